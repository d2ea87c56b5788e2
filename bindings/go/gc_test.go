package tq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// TestGCStress calls through wrappers that become unreachable during their
// own call, and runs a full collection, with its cleanups, just before each
// C call: a Queue or Task that was not kept alive through its call (a
// missing runtime.KeepAlive) would be found unreachable there, and its
// cleanup would either free its C object, which libtq would then refuse,
// or, for a Queue, wait for the very call in progress to end, which
// collect reports as stalled.
//
// TQ_GC_STRESS=1 runs ten times as many rounds.
func TestGCStress(t *testing.T) {
	rounds := 100
	if os.Getenv("TQ_GC_STRESS") != "" {
		rounds *= 10
	}
	path := filepath.Join(t.TempDir(), "q.db")
	opts := []tq.Option{tq.WithDurability(tq.DurabilityNormal), tq.WithRetryBackoff(0, 0), tq.WithMaxAttempts(1000)}
	q, err := tq.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// Each call through a Queue that nothing else references.
	dropped := func() *tq.Queue {
		q, err := tq.Open(path, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	tq.SetBeforeCall(collect)
	defer tq.SetBeforeCall(nil)

	pushed := make(map[int64]string)
	record := func(id int64, err error, payload string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		pushed[id] = payload
	}
	// finished records the outcome of finishing task; its lease of 1 ms
	// may have gone.
	finished := func(id int64, err error) {
		t.Helper()
		if err == nil {
			delete(pushed, id)
		} else if !errors.Is(err, tq.ErrNotHeld) {
			t.Fatal(err)
		}
	}
	lease := tq.WithLease(time.Millisecond)
	for i := range rounds {
		if stalled.Load() {
			t.Fatal("a cleanup waited for a call in progress: its wrapper was not kept alive")
		}
		payload := fmt.Sprintf(`{"round": %d}`, i)
		id, err := q.Push([]byte(payload))
		record(id, err, payload)
		if i%10 == 0 {
			payload := fmt.Sprintf(`{"round": %d, "queue": "dropped"}`, i)
			id, err := dropped().Push([]byte(payload))
			record(id, err, payload)
			if _, err := dropped().Count(tq.Pending); err != nil {
				t.Fatal(err)
			}
			if _, err := dropped().List(tq.Pending, 0, 5); err != nil {
				t.Fatal(err)
			}
		}
		if i%5 == 0 {
			batch := []string{fmt.Sprintf(`{"round": %d, "batch": 0}`, i), fmt.Sprintf(`{"round": %d, "batch": 1}`, i)}
			ids, err := q.PushBatch([][]byte{[]byte(batch[0]), []byte(batch[1])})
			if err != nil {
				t.Fatal(err)
			}
			record(ids[0], nil, batch[0])
			record(ids[1], nil, batch[1])
		}
		var task *tq.Task
		if i%2 == 0 {
			task, err = q.TryPull(lease)
		} else {
			task, err = q.Pull(t.Context(), lease)
		}
		if err != nil {
			t.Fatal(err)
		}
		if string(task.Payload()) != pushed[task.ID()] {
			t.Fatalf("task %d: payload %s, pushed %s", task.ID(), task.Payload(), pushed[task.ID()])
		}
		switch id := task.ID(); i % 7 {
		case 0: // the last use of the task is its Finish, which ends its context
			ctx, stop := task.Context(t.Context())
			finished(id, task.Finish())
			<-ctx.Done()
			stop()
		case 1: // dropped unfinished, once its context ended: its cleanup frees it
			_, stop := task.Context(t.Context())
			stop()
		case 2:
			task.Close()
		case 3: // failed: back at once
			if err := task.Extend(time.Millisecond); err != nil && !errors.Is(err, tq.ErrNotHeld) {
				t.Fatal(err)
			}
			if err := task.Fail("stress"); err != nil && !errors.Is(err, tq.ErrNotHeld) {
				t.Fatal(err)
			}
		case 4:
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			next, err := task.FinishAndPull(ctx, lease)
			cancel()
			var tqErr *tq.Error
			if errors.As(err, &tqErr) && tqErr.Op == "finish" {
				finished(id, err)
			} else {
				delete(pushed, id)
			}
			if next != nil {
				finished(next.ID(), next.Finish())
			} else if err != context.DeadlineExceeded && !errors.Is(err, tq.ErrNotHeld) {
				t.Fatal(err)
			}
		case 5:
			errs, err := q.FinishBatch([]*tq.Task{task})
			if err != nil {
				t.Fatal(err)
			}
			finished(id, errs[0])
		case 6:
			tasks, err := q.PullBatch(t.Context(), 3, lease)
			if err != nil {
				t.Fatal(err)
			}
			errs, err := q.FinishBatch(append(tasks, task))
			if err != nil {
				t.Fatal(err)
			}
			for i, task := range append(tasks, task) {
				finished(task.ID(), errs[i])
			}
		}
	}

	// Every task is still there to be finished once, the dropped and closed
	// ones after their lease.
	deadline := time.Now().Add(30 * time.Second)
	for len(pushed) > 0 && time.Now().Before(deadline) {
		task, err := q.TryPull()
		if errors.Is(err, tq.ErrEmpty) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Finish(); err != nil {
			t.Fatal(err)
		}
		delete(pushed, task.ID())
	}
	if len(pushed) > 0 {
		t.Fatalf("%d tasks were never delivered again", len(pushed))
	}
	for _, state := range []tq.State{tq.Pending, tq.Leased, tq.Dead} {
		if n, err := q.Count(state); err != nil || n != 0 {
			t.Fatalf("%v = %d, %v", state, n, err)
		}
	}
}

// stalled is set when collect gave up waiting for cleanups.
var stalled atomic.Bool

// collect runs a full collection and waits for the cleanups it queued: it
// drops an object of its own with a cleanup, and waits for that one,
// collecting again every half second in case the object outlived the
// first collection. Cleanups run one at a time, so a cleanup that blocks
// holds up that one: after 5 s collect sets stalled and returns.
func collect() {
	ran := make(chan struct{})
	runtime.AddCleanup(new([64]byte), func(ran chan struct{}) { close(ran) }, ran)
	for range 10 {
		runtime.GC()
		select {
		case <-ran:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	stalled.Store(true)
}
