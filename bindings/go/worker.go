package tq

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// A Handler works on one task pulled by Work. Returning nil finishes the
// task; returning an error fails it, the error's text its reason (a panic
// fails it too, with the panic's value and stack). ctx is done when the
// task is cancelled or its lease was lost (context.Cause then matches
// ErrCancelled or ErrNotHeld): stop working on it then. ctx carries the
// values of Work's context but not its end: Work waits for its handlers
// rather than stopping them.
type Handler func(ctx context.Context, task *Task) error

// A WorkOption configures Work.
type WorkOption struct {
	apply func(*workConfig)
}

// workConfig is what Work's options set.
type workConfig struct {
	concurrency int
	lease       time.Duration
	onError     func(task *Task, err error)
}

// WithConcurrency sets how many handlers Work runs at once (default 4).
func WithConcurrency(n int) WorkOption {
	return WorkOption{func(c *workConfig) { c.concurrency = n }}
}

// WithWorkLease sets the lease of each task Work pulls (default 30 s; at
// least 3 ms). Work renews it every third of it while the handler runs,
// so a crashed process's tasks come back about one lease after the crash.
func WithWorkLease(d time.Duration) WorkOption {
	return WorkOption{func(c *workConfig) { c.lease = d }}
}

// WithErrorHandler sets what Work does with the errors of its own calls
// that do not stop it: a pull, finish, fail or lease renewal refused
// (task is nil for a pull). The default logs them with the log package.
// A handler's own errors are not passed to it: they fail their task.
func WithErrorHandler(f func(task *Task, err error)) WorkOption {
	return WorkOption{func(c *workConfig) { c.onError = f }}
}

// Work runs handler on the tasks of q, up to WithConcurrency at once, until
// ctx is done; then it claims no more tasks, waits for the handlers
// running to end and their tasks to be finished or failed, and returns nil.
//
// Work claims for its handlers together: whenever handlers are free it
// claims as many tasks as there are free handlers in one PullBatch,
// waiting as Pull does while none is ready, so no task waits leased for a
// handler. It finishes the tasks of handlers that returned together, in
// one FinishBatch per commit, while the handlers go on with the next
// tasks. So many handlers share round trips, on PostgreSQL above all. The
// tasks Work holds are at most three times its concurrency: those of the
// handlers running, and at most twice the concurrency waiting for their
// finish to commit. A process that dies loses no task: what it held is
// delivered again, as any lease.
//
// A lease renewal that finds the task cancelled or taken back ends the
// handler's ctx; a handler that needs to hear of a cancellation sooner
// than a third of the lease can watch task.Context. Calls refused for a
// while (ErrBusy; ErrIO, as while a PostgreSQL server restarts) are tried
// again after waits of 50 ms doubling to 2 s, and reported to the error
// handler. Work returns an error only for a bad option, or when q is
// closed or fails for good (ErrClosed, ErrNotADatabase, ...), after its
// handlers have ended.
//
// A Queue may run any number of Work calls, and other calls meanwhile.
func (q *Queue) Work(ctx context.Context, handler Handler, opts ...WorkOption) error {
	config := workConfig{concurrency: 4, lease: 30 * time.Second, onError: logWorkError}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&config)
		}
	}
	switch {
	case config.concurrency < 1:
		return bindingError("work", ErrInvalidArgument, "a concurrency of %d runs no handler", config.concurrency)
	case config.lease < 3*time.Millisecond:
		return bindingError("work", ErrInvalidArgument, "the lease %v is under 3 ms", config.lease)
	case handler == nil:
		return bindingError("work", ErrInvalidArgument, "the handler is nil")
	case config.onError == nil:
		return bindingError("work", ErrInvalidArgument, "the error handler is nil")
	}
	w := &worker{
		q:        q,
		handler:  handler,
		config:   config,
		values:   context.WithoutCancel(ctx),
		free:     make(chan struct{}, config.concurrency),
		finished: make(chan *Task, config.concurrency),
	}
	for range config.concurrency {
		w.free <- struct{}{}
	}
	finisherDone := make(chan struct{})
	go func() {
		w.finishInBatches()
		close(finisherDone)
	}()
	err := w.claim(ctx)
	w.handlers.Wait()
	close(w.finished)
	<-finisherDone
	return err
}

// logWorkError is Work's default error handler.
func logWorkError(task *Task, err error) {
	if task == nil {
		log.Printf("tq: Work: %v", err)
		return
	}
	log.Printf("tq: Work: task %d: %v", task.ID(), err)
}

// worker is one call of Work.
type worker struct {
	q       *Queue
	handler Handler
	config  workConfig
	// values is the context of Work without its end: the parent of the
	// handlers' contexts.
	values context.Context
	// free holds a token per handler free to take a task.
	free chan struct{}
	// finished carries the tasks whose handlers returned nil to the
	// goroutine that finishes them; its capacity, the concurrency, bounds
	// the finishes waiting.
	finished chan *Task
	handlers sync.WaitGroup
}

// claim pulls tasks for the free handlers until ctx is done, and returns
// the error that stopped it for good, if any.
func (w *worker) claim(ctx context.Context) error {
	retryWait := firstRetryWait
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.free:
		}
		free := 1 + w.takeFree()
		tasks, err := w.q.PullBatch(ctx, free, WithLease(w.config.lease))
		for range free - len(tasks) {
			w.free <- struct{}{}
		}
		switch {
		case err == nil:
			retryWait = firstRetryWait
		case ctx.Err() != nil:
			return nil
		case isTransient(err):
			w.config.onError(nil, err)
			if !sleep(ctx, retryWait) {
				return nil
			}
			retryWait = min(2*retryWait, maxRetryWait)
		default:
			return err
		}
		for _, task := range tasks {
			w.handlers.Add(1)
			go w.run(task)
		}
	}
}

// takeFree takes the tokens of every other free handler, and returns how
// many it took.
func (w *worker) takeFree() int {
	for n := 0; ; n++ {
		select {
		case <-w.free:
		default:
			return n
		}
	}
}

// run works on one task: its handler under a renewed lease, then the
// finish (through the finishing goroutine) or the fail.
func (w *worker) run(task *Task) {
	defer w.handlers.Done()
	ctx, stop := context.WithCancelCause(w.values)
	defer stop(nil)
	endRenewals := w.renewLease(task, stop)
	err := w.callHandler(ctx, task)
	endRenewals()
	if err == nil {
		w.finished <- task
	} else {
		w.fail(task, err)
	}
	w.free <- struct{}{}
}

// renewLease renews task's lease every third of it until the returned
// function is called; a renewal refused because the task was cancelled or
// taken back ends the handler's context with that cause.
func (w *worker) renewLease(task *Task, stop context.CancelCauseFunc) (end func()) {
	over := make(chan struct{})
	go func() {
		ticker := time.NewTicker(w.config.lease / 3)
		defer ticker.Stop()
		for {
			select {
			case <-over:
				return
			case <-ticker.C:
			}
			err := task.Extend(w.config.lease)
			select {
			case <-over:
				return // the handler returned meanwhile: the error is stale
			default:
			}
			switch {
			case errors.Is(err, ErrCancelled), errors.Is(err, ErrNotHeld):
				stop(err)
				return
			case err != nil:
				w.config.onError(task, err)
			}
		}
	}()
	return func() { close(over) }
}

// callHandler runs the handler, turning a panic into an error.
func (w *worker) callHandler(ctx context.Context, task *Task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return w.handler(ctx, task)
}

// fail fails task with the handler's error as its reason, trying again
// while the store is busy, for up to one lease: past it, the task is
// delivered again anyway.
func (w *worker) fail(task *Task, handlerErr error) {
	reason := strings.ReplaceAll(handlerErr.Error(), "\x00", `\x00`)
	report := func(err error) { w.config.onError(task, err) }
	err := retryFor(w.config.lease, isTransient, report, func() error {
		return task.Fail(reason)
	})
	if err != nil {
		report(err)
	}
}

// finishInBatches finishes the tasks sent on w.finished, all those waiting
// (at most the concurrency) in one FinishBatch, until the channel is
// closed.
func (w *worker) finishInBatches() {
	var batch []*Task
	for task := range w.finished {
		batch = append(batch[:0], task)
	gather:
		for len(batch) < cap(w.finished) {
			select {
			case task, open := <-w.finished:
				if !open {
					break gather
				}
				batch = append(batch, task)
			default:
				break gather
			}
		}
		w.finishBatch(batch)
	}
}

// finishBatch finishes batch, trying again while the store is busy or
// the outcome was not known, for up to one lease (a task whose finish was
// committed after all is then reported as no longer held).
func (w *worker) finishBatch(batch []*Task) {
	var errs []error
	report := func(err error) { w.config.onError(nil, err) }
	err := retryFor(w.config.lease, isTransientOrUnknownOutcome, report, func() (err error) {
		errs, err = w.q.FinishBatch(batch)
		return err
	})
	if err != nil {
		for _, task := range batch {
			w.config.onError(task, err)
		}
		return
	}
	for i, taskErr := range errs {
		if taskErr != nil {
			w.config.onError(batch[i], taskErr)
		}
	}
}

// retryFor calls call until it returns nil or an error retryable does not
// accept, or until lease has passed since the first call: past it, the
// tasks concerned are delivered again anyway. Before each new call it
// passes the error refused to report and waits, firstRetryWait doubling
// to maxRetryWait. It returns call's last error.
func retryFor(lease time.Duration, retryable func(error) bool, report func(error), call func() error) error {
	wait := firstRetryWait
	giveUp := time.Now().Add(lease)
	for {
		err := call()
		if err == nil || !retryable(err) || !time.Now().Before(giveUp) {
			return err
		}
		report(err)
		time.Sleep(wait)
		wait = min(2*wait, maxRetryWait)
	}
}

// isTransientOrUnknownOutcome says whether a FinishBatch refused with
// err is worth trying again: refused for a while, or its commit's outcome
// not known.
func isTransientOrUnknownOutcome(err error) bool {
	return isTransient(err) || errors.Is(err, ErrUnknownOutcome)
}

// sleep waits for d or until ctx is done, and says whether ctx is still
// live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
