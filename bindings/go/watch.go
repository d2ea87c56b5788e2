package tq

// #include <tq.h>
import "C"

import (
	"context"
	"errors"
	"time"
)

// A call refused for a while (isTransient) is tried again after these
// waits, doubling. A watch that cannot read its task for now asks again
// for as long as it runs, rather than stop the work it watches: the task
// is still held. Work's claims do too; its finishes and fails stop after
// one lease (retryFor).
const (
	firstRetryWait = 50 * time.Millisecond
	maxRetryWait   = 2 * time.Second
)

// isTransient says whether err refuses a call only for a while: ErrBusy
// (the file's write lock held past the busy timeout) or ErrIO (on
// PostgreSQL, a connection cut or a server restarting).
func isTransient(err error) bool {
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrIO)
}

// watcher is the goroutine of one Task.Context: it waits in
// tq_wait_cancellation on the delivery until the task is cancelled, the
// delivery ends, or its own tq_cancel is triggered.
type watcher struct {
	cancel *C.tq_cancel
	end    context.CancelCauseFunc
	// returned is closed once the goroutine makes no more C calls on the
	// task, which may then be freed.
	returned chan struct{}
}

// Context returns a copy of parent for the work on this delivery, which
// is cancelled when the work must stop, without any polling: as soon as
// the task's cancellation (Queue.CancelTask, from any process) is
// recorded, context.Cause then matching ErrCancelled; when the delivery
// ends (Finish, Fail, Snooze, a lease taken back by another worker or
// Recover), ErrNotHeld; when the task or its Queue is closed, ErrClosed;
// when Interrupt is called on the Queue, ErrInterrupted; when libtq fails
// in another way, that error; or when parent is done or cancel is called,
// as context.WithCancel's. A task that cannot be read for now (ErrBusy,
// ErrIO) is read again after a short wait: the work goes on. Each cause
// of tq's is an *Error whose Op is "context".
//
//	task, err := q.Pull(ctx)
//	...
//	work, stop := task.Context(ctx)
//	defer stop()
//	err = convert(work, task.Payload()) // returns once work is done
//	if errors.Is(context.Cause(work), tq.ErrCancelled) {
//		task.Finish() // returns ErrCancelled and ends the task as cancelled
//	}
//
// After a cancellation the delivery's next Extend, Finish, Fail or Snooze
// returns ErrCancelled, as without a Context. A Task not held (finished,
// closed, or not from a pull) gives a context that is done at once, its
// cause what Finish would return.
//
// Until the context is done, a goroutine waits on an OS thread in libtq;
// call cancel once the work is over, as with context.WithCancel. Any
// number of Contexts may watch one delivery, and Extend, Finish and the
// other calls on the task go on meanwhile: ending the delivery ends its
// Contexts first.
func (t *Task) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, end := context.WithCancelCause(parent)
	cancel = func() { end(nil) }
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.c == nil:
		end(t.use("context"))
		return ctx, cancel
	case ctx.Err() != nil:
		return ctx, cancel
	}
	w := &watcher{cancel: C.tq_cancel_new(), end: end, returned: make(chan struct{})}
	if w.cancel == nil {
		end(bindingError("context", ErrInternal, "libtq could not create a cancellation"))
		return ctx, cancel
	}
	if t.watchers == nil {
		t.watchers = make(map[*watcher]struct{})
	}
	t.watchers[w] = struct{}{}
	go t.watch(ctx, w, t.c)
	return ctx, cancel
}

// watch runs w until ctx is done, then frees its cancellation. c stays
// allocated meanwhile: whatever frees it ends the watch first and waits
// for returned (release), or, on Close of the Queue, interrupts every wait
// and waits for the calls in progress.
func (t *Task) watch(ctx context.Context, w *watcher, c *C.tq_task) {
	triggered := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.tq_cancel_trigger(w.cancel)
		close(triggered)
	})
	err := t.waitCancellation(ctx, w.cancel, c)
	if errors.Is(err, ErrNotHeld) {
		t.awaitCallsInFlight(ctx)
	}
	w.end(err)
	close(w.returned)
	// The cancellation is freed once nothing can trigger it any more: the
	// function of AfterFunc, and release, which triggers only the watchers
	// of t.watchers.
	if !stop() {
		<-triggered
	}
	t.mu.Lock()
	delete(t.watchers, w)
	t.mu.Unlock()
	C.tq_cancel_free(w.cancel)
}

// awaitCallsInFlight returns once no call on the task holds t.mu, or ctx
// is done. A delivery found over may have been ended by such a call (a
// Finish of this process): it then ends the watchers with its own, more
// telling cause ("finished"), which must come first. It cannot wait on
// t.mu itself: the call holds it while it waits for the watchers.
func (t *Task) awaitCallsInFlight(ctx context.Context) {
	for !t.mu.TryLock() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
	t.mu.Unlock()
}

// waitCancellation waits in libtq for a reason to stop working on the
// delivery c, and returns it: nil when ctx is done, whose cause is then
// set already.
func (t *Task) waitCancellation(ctx context.Context, cancel *C.tq_cancel, c *C.tq_task) error {
	retryWait := firstRetryWait
	for {
		_, err := t.q.call("context", func(q *C.tq_queue) C.enum_tq_status {
			return C.tq_wait_cancellation(q, c, ceilMillis(maxWait), cancel)
		})
		switch {
		case err == nil:
			// TQ_EMPTY: maxWait passed without a reason to stop.
			retryWait = firstRetryWait
		case isTransient(err):
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retryWait):
			}
			retryWait = min(2*retryWait, maxRetryWait)
		case !errors.Is(err, ErrInterrupted):
			return err
		case ctx.Err() != nil:
			return nil
		case t.q.h.closing.Load():
			return bindingError("context", ErrClosed, "the queue was closed")
		default:
			return err
		}
	}
}

// endWatches cancels the Contexts watching the delivery with an error of
// why's kind and message, and waits until their goroutines make no more C
// calls on the task. Called with t.mu held.
func (t *Task) endWatches(why *Error) {
	cause := &Error{Op: "context", Kind: why.Kind, Message: why.Message}
	for w := range t.watchers {
		w.end(cause)
		C.tq_cancel_trigger(w.cancel)
	}
	for w := range t.watchers {
		<-w.returned
	}
}
