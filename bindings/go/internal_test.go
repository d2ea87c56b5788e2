package tq

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Every error status of the C ABI has its kind; the values are fixed by the
// ABI (never renumbered), so the test spells them out.
func TestStatusKinds(t *testing.T) {
	got := []*Error{
		statusError("op", -1, "m"), statusError("op", -2, "m"), statusError("op", -3, "m"),
		statusError("op", -4, "m"), statusError("op", -5, "m"), statusError("op", -6, "m"),
		statusError("op", -7, "m"), statusError("op", -8, "m"), statusError("op", -9, "m"),
		statusError("op", -10, "m"), statusError("op", -11, "m"),
	}
	want := []error{ErrInvalidArgument, ErrInvalidJSON, ErrNotHeld, ErrBusy, ErrIO, ErrNotADatabase, ErrInternal, ErrInterrupted, ErrUnknownOutcome, ErrCancelled, ErrFull}
	for i, err := range got {
		if !errors.Is(err, want[i]) || err.Error() != "tq: op: m" {
			t.Errorf("status %d: %v (%v), want %v", -1-i, err, err.Kind, want[i])
		}
		for j, other := range want {
			if j != i && errors.Is(err, other) {
				t.Errorf("status %d also matches %v", -1-i, other)
			}
		}
	}
	if len(kinds) != len(want) {
		t.Errorf("%d statuses mapped, want %d", len(kinds), len(want))
	}

	unknown := statusError("op", -99, "m")
	if !errors.Is(unknown, ErrInternal) || unknown.Message != "unknown status -99: m" {
		t.Errorf("unknown status: %v", unknown)
	}
	// Without a message, the status's own description stands in.
	if err := statusError("op", -4, ""); !strings.HasPrefix(err.Message, "busy") {
		t.Errorf("empty message: %q", err.Message)
	}
}

// eventually runs GC until cond holds, or fails after a few seconds.
// Cleanups run on their own goroutine after the collection that finds
// their object unreachable.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10 s of garbage collection", what)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

func (h *handle) liveTasks() int {
	h.tasksMu.Lock()
	defer h.tasksMu.Unlock()
	return len(h.tasks)
}

// A dropped task is freed by its cleanup, and is still delivered again.
func TestDroppedTasksAreFreed(t *testing.T) {
	q, err := Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for range 5 {
		if _, err := q.Push([]byte(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	func() {
		for range 5 {
			if _, err := q.TryPull(WithLease(30 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
	}()
	eventually(t, "dropped tasks freed", func() bool { return q.h.liveTasks() == 0 })
	time.Sleep(40 * time.Millisecond)
	for range 5 {
		task, err := q.TryPull()
		if err != nil {
			t.Fatalf("redelivery: %v", err)
		}
		if task.Attempts() != 2 {
			t.Fatalf("task %d delivered %d times, want 2", task.ID(), task.Attempts())
		}
		if err := task.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if q.h.liveTasks() != 0 {
		t.Fatal("finished tasks are still recorded")
	}
}

// openFiles counts this process's descriptors on the queue file and its
// -wal and -shm companions.
func openFiles(t *testing.T, path string) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, path) {
			n++
		}
	}
	return n
}

// A dropped queue is closed by its cleanup, freeing its tasks too.
func TestDroppedQueueIsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	func() {
		q, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Push([]byte(`1`)); err != nil {
			t.Fatal(err)
		}
		if _, err := q.TryPull(); err != nil {
			t.Fatal(err)
		}
		if openFiles(t, path) == 0 {
			t.Fatal("an open queue has no descriptor on its file")
		}
	}()
	eventually(t, "dropped queue closed", func() bool { return openFiles(t, path) == 0 })
}

// Ending a delivery, or closing its Queue, waits for the watchers' C
// calls before freeing the C task: a watcher held up just before its
// call, by the hook, must find its task still allocated there. (A watcher
// not yet at its call when the Queue is closed makes none.)
func TestTheEndOfADeliveryWaitsForItsWatchers(t *testing.T) {
	for _, end := range []string{"task", "queue"} {
		t.Run(end, func(t *testing.T) {
			q, err := Open(filepath.Join(t.TempDir(), "q.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if _, err := q.Push([]byte(`1`)); err != nil {
				t.Fatal(err)
			}
			task, err := q.TryPull()
			if err != nil {
				t.Fatal(err)
			}
			c := task.c
			entered, freedBeforeCall := make(chan struct{}, 1), make(chan bool, 1)
			testHookBeforeCall = func() {
				select {
				case entered <- struct{}{}:
				default:
				}
				time.Sleep(50 * time.Millisecond)
				q.h.tasksMu.Lock()
				_, live := q.h.tasks[c]
				q.h.tasksMu.Unlock()
				select {
				case freedBeforeCall <- !live:
				default:
				}
			}
			defer func() { testHookBeforeCall = nil }()
			ctx, cancel := task.Context(context.Background())
			defer cancel()
			if end == "task" {
				task.Close()
			} else {
				<-entered
				q.Close()
			}
			if <-freedBeforeCall {
				t.Fatal("the task was freed before its watcher's C call")
			}
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), ErrClosed) {
				t.Fatalf("cause %v, want ErrClosed", context.Cause(ctx))
			}
		})
	}
}
