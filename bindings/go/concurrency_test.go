package tq_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// Many goroutines push and pull on one Queue: every task is delivered and
// finished exactly once.
func TestManyGoroutinesExactlyOnce(t *testing.T) {
	const pushers, perPusher, pullers = 4, 250, 4
	const total = pushers * perPusher
	q, _ := openQueue(t)

	type job struct{ Pusher, Index int }
	ids := make(chan int64, total)
	var pushing sync.WaitGroup
	for p := range pushers {
		pushing.Go(func() {
			for i := range perPusher {
				id, err := q.PushJSON(job{p, i})
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		})
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	seen := make(map[job]int64)
	var finished atomic.Int64
	// check records a delivery, failing on a second one of the same job.
	check := func(task *tq.Task) {
		var j job
		if err := task.Decode(&j); err != nil {
			t.Error(err)
		}
		mu.Lock()
		if first, dup := seen[j]; dup {
			t.Errorf("%+v delivered as task %d and %d", j, first, task.ID())
		}
		seen[j] = task.ID()
		mu.Unlock()
		if task.Attempts() != 1 {
			t.Errorf("task %d delivered %d times", task.ID(), task.Attempts())
		}
	}
	done := func(n int) { finished.Add(int64(n)) }
	// The pullers wait in Pull (two of them), in FinishAndPull, and in
	// PullBatch, finishing with Finish, FinishAndPull and FinishBatch.
	var pulling sync.WaitGroup
	for range pullers - 2 {
		pulling.Go(func() {
			for {
				task, err := q.Pull(ctx)
				if err == context.Canceled {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				check(task)
				if err := task.Finish(); err != nil {
					t.Error(err)
				}
				done(1)
			}
		})
	}
	pulling.Go(func() {
		task, err := q.Pull(ctx)
		for err == nil {
			check(task)
			next, nextErr := task.FinishAndPull(ctx)
			var tqErr *tq.Error
			if !errors.As(nextErr, &tqErr) || tqErr.Op != "finish" {
				done(1) // finished
			}
			task, err = next, nextErr
		}
		if err != context.Canceled {
			t.Error(err)
		}
	})
	pulling.Go(func() {
		for {
			tasks, err := q.PullBatch(ctx, 7)
			if err == context.Canceled {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			for _, task := range tasks {
				check(task)
			}
			errs, err := q.FinishBatch(tasks)
			if err != nil {
				t.Error(err)
				return
			}
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			done(len(tasks))
		}
	})
	pushing.Wait()
	close(ids)
	// Once every task is finished, the pullers are stopped while they wait
	// (FinishAndPull counts its finish only once it returns).
	for count(t, q, tq.Pending)+count(t, q, tq.Leased) > 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	pulling.Wait()

	if len(seen) != total || finished.Load() != total {
		t.Fatalf("%d distinct tasks finished (%d finishes), want %d", len(seen), finished.Load(), total)
	}
	byID := make(map[int64]bool)
	for _, id := range seen {
		byID[id] = true
	}
	for id := range ids {
		if !byID[id] {
			t.Errorf("pushed task %d was not finished", id)
		}
	}
	for _, state := range []tq.State{tq.Pending, tq.Leased, tq.Done} {
		if n := count(t, q, state); n != 0 {
			t.Errorf("%d %v tasks left", n, state)
		}
	}
}

// Finishing one task from several goroutines at once: one wins, the others
// learn it is no longer held. Closing it meanwhile makes the late ones
// return ErrClosed instead, and never finishes it twice.
func TestConcurrentFinishOfOneTask(t *testing.T) {
	q, _ := openQueue(t)
	race := func(closers int) (wins, refused int32) {
		push(t, q, `1`)
		task := tryPull(t, q)
		var w, r atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				switch err := task.Finish(); {
				case err == nil:
					w.Add(1)
				case errors.Is(err, tq.ErrNotHeld) || errors.Is(err, tq.ErrClosed):
					r.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		for range closers {
			wg.Go(task.Close)
		}
		wg.Wait()
		return w.Load(), r.Load()
	}

	if wins, refused := race(0); wins != 1 || refused != 7 {
		t.Fatalf("%d finishes won and %d were refused, want 1 and 7", wins, refused)
	}
	if n := count(t, q, tq.Leased); n != 0 {
		t.Fatalf("leased = %d after a winning Finish", n)
	}
	wins, refused := race(4)
	if wins > 1 || wins+refused != 8 {
		t.Fatalf("with Close: %d finishes won and %d were refused", wins, refused)
	}
	if n := count(t, q, tq.Leased); n != int64(1-wins) {
		t.Fatalf("leased = %d with %d winning finishes", n, wins)
	}
}

// Close while goroutines push, pull and finish: Close waits for the calls
// in progress, and every call after it returns ErrClosed.
func TestCloseWhileInUse(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	var calls atomic.Int64
	var wg sync.WaitGroup
	worker := func(op func() error) {
		wg.Go(func() {
			for {
				err := op()
				if errors.Is(err, tq.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, tq.ErrEmpty) {
					t.Error(err)
					return
				}
				calls.Add(1)
			}
		})
	}
	for i := range 3 {
		worker(func() error {
			_, err := q.PushJSON(i)
			return err
		})
		worker(func() error {
			task, err := q.TryPull()
			if err != nil {
				return err
			}
			if i == 0 {
				return nil // left to Close
			}
			return task.Finish()
		})
		worker(func() error {
			_, err := q.Count(tq.Pending)
			return err
		})
		worker(func() error { // waits whenever the others drained the queue
			task, err := q.Pull(t.Context())
			if err != nil {
				return err
			}
			_, err = task.FinishAndPull(t.Context())
			return err
		})
	}
	time.Sleep(100 * time.Millisecond)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if calls.Load() == 0 {
		t.Fatal("no call ran before Close")
	}
}
