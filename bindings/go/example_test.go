package tq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tq-dev/tq-go"
)

func ExampleQueue_Pull() {
	dir, err := os.MkdirTemp("", "tq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	q, err := tq.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	if _, err := q.PushJSON(map[string]string{"file": "a.mp4"}); err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	task, err := q.Pull(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer task.Close()
	var job struct{ File string }
	if err := task.Decode(&job); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("working on", job.File, "attempt", task.Attempts())
	if err := task.Finish(); err != nil {
		fmt.Println(err)
	}
	// Output: working on a.mp4 attempt 1
}

func ExampleTask_FinishAndPull() {
	dir, err := os.MkdirTemp("", "tq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	q, err := tq.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	if _, err := q.PushBatch([][]byte{[]byte(`"a"`), []byte(`"b"`), []byte(`"c"`)}); err != nil {
		fmt.Println(err)
		return
	}

	// A worker draining a backlog: one commit per task.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	task, err := q.Pull(ctx)
	for err == nil {
		fmt.Println("working on", string(task.Payload()))
		task, err = task.FinishAndPull(ctx)
	}
	fmt.Println("stopped:", err)
	// Output:
	// working on "a"
	// working on "b"
	// working on "c"
	// stopped: context deadline exceeded
}

func ExampleQueue_Push_unique() {
	dir, err := os.MkdirTemp("", "tq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	q, err := tq.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	for range 2 {
		id, err := q.Push([]byte(`{"invoice": 1042}`), tq.WithUniqueKey("invoice:1042"))
		if err != nil && !errors.Is(err, tq.ErrDuplicate) {
			fmt.Println(err)
			return
		}
		fmt.Println("task", id, "duplicate:", errors.Is(err, tq.ErrDuplicate))
	}
	// Output:
	// task 1 duplicate: false
	// task 1 duplicate: true
}

func ExampleQueue_Wait() {
	dir, err := os.MkdirTemp("", "tq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	q, err := tq.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	id, err := q.PushJSON(map[string]int{"a": 2, "b": 3})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A worker, here in a goroutine, finishes the task with a result.
	go func() {
		task, err := q.Pull(context.Background())
		if err != nil {
			return
		}
		var sum struct{ A, B int }
		task.Decode(&sum)
		task.FinishWithResultJSON(map[string]int{"sum": sum.A + sum.B})
	}()

	// Whoever pushed it waits for the outcome, here up to 5 s.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := q.Wait(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.State(), string(info.Result()))
	// Output: done {"sum":5}
}

func ExampleTask_Context() {
	dir, err := os.MkdirTemp("", "tq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	q, err := tq.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	id, err := q.PushJSON(map[string]string{"file": "a.mp4"})
	if err != nil {
		fmt.Println(err)
		return
	}
	task, err := q.TryPull()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer task.Close()

	// Someone, here in a goroutine, cancels the task while it is worked on.
	go q.CancelTask(id, "no longer needed")

	// The work stops as soon as the cancellation is recorded.
	work, stop := task.Context(context.Background())
	defer stop()
	select {
	case <-work.Done():
	case <-time.After(time.Hour): // the long work, which takes work as its context
	}
	fmt.Println("stopped:", errors.Is(context.Cause(work), tq.ErrCancelled))
	fmt.Println(task.Finish())
	// Output:
	// stopped: true
	// tq: finish: task 1 was cancelled while this delivery held it: it will not run again
}
