// Command workers is the prototype's scenario in Go: push 100 tasks, then
// four goroutines pull and finish until none is left; it prints how many
// are left (0) and how many each goroutine finished.
//
//	make example-go                                  (from the repository root)
//	go run -tags tq_intree ./workers [QUEUE_FILE]    (from examples/go; default workers.db)
package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/tq-dev/tq-go"
)

const (
	tasks   = 100
	workers = 4
)

func main() {
	path := "workers.db"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	if err := run(path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(path string) error {
	q, err := tq.Open(path)
	if err != nil {
		return err
	}
	defer q.Close()

	// A worker that crashed in an earlier run leaves tasks behind: take
	// them back. Tasks of live workers elsewhere are left alone.
	recovered, err := q.Recover()
	if err != nil {
		return err
	}
	// One transaction for the whole batch: all of it is stored, or none.
	payloads := make([][]byte, tasks)
	for i := range payloads {
		payloads[i] = fmt.Appendf(nil, `{"index": %d, "sleep": 0.01}`, i)
	}
	if _, err := q.PushBatch(payloads); err != nil {
		return err
	}

	done := make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { done[w], errs[w] = work(q) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	left, err := q.Count(tq.Pending)
	if err != nil {
		return err
	}
	fmt.Println("pending left:", left)
	total := 0
	for w, n := range done {
		fmt.Printf("worker %d finished %d tasks\n", w, n)
		total += n
	}
	if left != 0 || int64(total) != tasks+recovered {
		return fmt.Errorf("finished %d tasks with %d left, want %d and 0", total, left, tasks+recovered)
	}
	return nil
}

// work claims tasks until none is ready, "working" 10 ms on each, and
// returns how many it finished.
func work(q *tq.Queue) (int, error) {
	for n := 0; ; n++ {
		task, err := q.TryPull()
		if errors.Is(err, tq.ErrEmpty) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		var job struct{ Sleep float64 }
		if err := task.Decode(&job); err != nil {
			task.Close()
			return n, fmt.Errorf("task %d: %w", task.ID(), err)
		}
		time.Sleep(time.Duration(job.Sleep * float64(time.Second)))
		if err := task.Finish(); err != nil {
			return n, err
		}
	}
}
