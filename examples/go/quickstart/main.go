// Command quickstart is the shortest worker: it pushes a task, then pulls
// and finishes tasks until none is ready.
//
//	make example-go                                     (from the repository root)
//	go run -tags tq_intree ./quickstart [QUEUE_FILE]    (from examples/go; default jobs.db)
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/tq-dev/tq-go"
)

func main() {
	path := "jobs.db"
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
	if _, err := q.Recover(); err != nil { // take back what crashed workers held
		return err
	}
	if _, err := q.Push([]byte(`{"file": "a.mp4"}`)); err != nil {
		return err
	}
	for {
		task, err := q.TryPull()
		if errors.Is(err, tq.ErrEmpty) { // no task is ready
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Printf("task %d: %s\n", task.ID(), task.Payload())
		if err := task.Finish(); err != nil { // tq.ErrNotHeld: the lease was lost
			return err
		}
	}
}
