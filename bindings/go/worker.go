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
// ctx is done; then it claims no more tasks, runs those it holds, waits
// for the handlers running to end and their tasks to be finished or
// failed, and returns nil.
//
// Work runs one goroutine per handler. A goroutine whose handler returned
// takes its next task itself: one claimed before, or else from one commit
// that finishes the tasks whose handlers returned and claims a task for
// each goroutine that is free (FinishAndPullBatch). No task passes from one
// goroutine to another on its way, and busy handlers share their commits
// (and their round trips, on PostgreSQL). When no task is ready, one
// goroutine waits as Pull does and the others sleep until it has tasks for
// them. The tasks Work holds are never more than its concurrency. A
// process that dies loses no task: what it held is delivered again, as any
// lease.
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
		q:       q,
		handler: handler,
		config:  config,
		ctx:     ctx,
		values:  context.WithoutCancel(ctx),
		running: make(map[*running]struct{}),
		commits: make(chan struct{}, commitsInFlight),
	}
	w.idle = sync.NewCond(&w.mu)
	// Once ctx is done, sleeping goroutines wake to see it; the waiting
	// pull ends by itself.
	stopWaking := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.idle.Broadcast()
		w.mu.Unlock()
	})
	defer stopWaking()
	renewerDone := make(chan struct{})
	endRenewals := make(chan struct{})
	go func() {
		w.renewLeases(endRenewals)
		close(renewerDone)
	}()
	var handlers sync.WaitGroup
	for range config.concurrency {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			w.handleTasks()
		}()
	}
	handlers.Wait()
	close(endRenewals)
	<-renewerDone
	return w.failure
}

// commitsInFlight is how many of a Work call's commits may be in flight at
// once. On PostgreSQL each commit is a round trip and a flush of the
// server's log: overlapping a few keeps the handlers fed while one waits.
// On SQLite libtq joins the commits that arrive together in one
// transaction.
const commitsInFlight = 4

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
	// ctx is Work's context: once done, nothing more is claimed.
	ctx context.Context
	// values is ctx without its end: the parent of the handlers' contexts.
	values context.Context

	// commits holds a token per commit in flight: at most cap(commits)
	// finish and claim at once (their transactions overlap on PostgreSQL;
	// on SQLite libtq's group commit joins them).
	commits chan struct{}

	// mu guards what follows; goroutines with nothing to do sleep on idle
	// while another waits in a pull.
	mu   sync.Mutex
	idle *sync.Cond
	// claimed holds the tasks claimed and not yet taken by a goroutine.
	claimed []*Task
	// toFinish holds the tasks whose handlers returned nil.
	toFinish []*Task
	// handling counts the goroutines running a handler.
	handling int
	// pulling says a goroutine waits in a pull, for pullWanted tasks.
	pulling    bool
	pullWanted int
	// committing counts the commits in flight, and reserved the tasks
	// they may claim.
	committing int
	reserved   int
	// failure is the error that stopped the work for good.
	failure error

	// renewalsMu guards running, the tasks whose handlers run.
	renewalsMu sync.Mutex
	running    map[*running]struct{}
}

// running is a task whose handler runs, for the renewing goroutine.
type running struct {
	task *Task
	// due is when its lease is renewed next.
	due time.Time
	// stop ends the handler's context.
	stop context.CancelCauseFunc
}

// stopped says whether the work is stopping: its context ended or a call
// failed for good. Under mu.
func (w *worker) stopped() bool {
	return w.ctx.Err() != nil || w.failure != nil
}

// fatal stops the work for good with err, which Work returns.
func (w *worker) fatal(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failure == nil {
		w.failure = err
	}
	w.idle.Broadcast()
}

// handleTasks is a handler goroutine: it runs the handler on each task it
// takes until the work stops and no task claimed is left, then finishes
// the tasks left to finish.
func (w *worker) handleTasks() {
	for {
		task := w.nextTask()
		if task == nil {
			break
		}
		w.run(task)
	}
	w.commits <- struct{}{}
	w.finishPending()
	<-w.commits
}

// nextTask returns the next task for this goroutine, counted as handled:
// one claimed before, or one it claims, or one it waits for; nil once the
// work stops and no task claimed is left. Tasks whose handlers returned
// are finished before the goroutine takes another, in a commit that
// claims (its own, or one another goroutine made meanwhile).
func (w *worker) nextTask() *Task {
	retryWait := firstRetryWait
	for {
		w.mu.Lock()
		for {
			// Tasks to finish are left to a commit in flight (the last to
			// end finishes those that came meanwhile); without one, this
			// goroutine commits before it takes another task.
			if len(w.claimed) > 0 && (len(w.toFinish) == 0 || w.committing > 0) {
				task := w.takeClaimed()
				w.mu.Unlock()
				return task
			}
			if w.stopped() || len(w.toFinish) > 0 || w.wanted() > 0 || (w.reserved == 0 && !w.pulling) {
				break
			}
			// A commit in flight, or the pull, claims for this goroutine.
			w.idle.Wait()
		}
		stopped := w.stopped()
		w.mu.Unlock()

		w.commits <- struct{}{}
		if stopped {
			// Tasks claimed before the stop are run; none after.
			w.finishPending()
			<-w.commits
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.claimed) == 0 {
				return nil
			}
			return w.takeClaimed()
		}
		err := w.finishAndClaim()
		<-w.commits
		switch {
		case err == nil:
			retryWait = firstRetryWait
		case isTransient(err):
			w.config.onError(nil, err)
			sleep(w.ctx, retryWait)
			retryWait = min(2*retryWait, maxRetryWait)
			continue
		default:
			w.fatal(err)
			continue
		}
		w.mu.Lock()
		if len(w.claimed) > 0 {
			task := w.takeClaimed()
			w.mu.Unlock()
			return task
		}
		inFlight := w.reserved > 0 || w.pulling
		w.mu.Unlock()
		if !inFlight {
			w.waitForTasks()
		}
	}
}

// wanted is how many tasks a commit may claim: one for each goroutine
// neither handling nor waiting for a task claimed, or for one that a
// commit in flight or the pull may claim. Under mu.
func (w *worker) wanted() int {
	return max(w.config.concurrency-w.handling-len(w.claimed)-w.reserved-w.pullWanted, 0)
}

// takeClaimed takes the first task claimed, counted as handled. Under mu,
// with a task claimed.
func (w *worker) takeClaimed() *Task {
	task := w.claimed[0]
	w.claimed[0] = nil
	w.claimed = w.claimed[1:]
	w.handling++
	return task
}

// finishAndClaim finishes the tasks to finish and claims the tasks wanted
// (see wanted), in one commit, reserving them while it runs. The last
// commit in flight to end commits again while tasks to finish came
// meanwhile, so that none waits for the next claim. With a token of
// commits.
func (w *worker) finishAndClaim() error {
	w.mu.Lock()
	w.committing++
	defer func() {
		w.committing--
		w.mu.Unlock()
	}()
	for {
		batch := w.toFinish
		w.toFinish = nil
		wanted := w.wanted()
		if len(batch) == 0 && wanted == 0 {
			return nil
		}
		w.reserved += wanted
		w.mu.Unlock()
		errs, claimed, err := w.q.FinishAndPullBatch(batch, wanted, WithLease(w.config.lease))
		if err == nil {
			w.reportNotFinished(batch, errs)
		} else {
			// Nothing done, or not known: the finishes are tried alone.
			w.finishBatch(batch)
		}
		w.mu.Lock()
		w.reserved -= wanted
		w.claimed = append(w.claimed, claimed...)
		// The goroutines waiting for this commit take its tasks, or commit.
		w.idle.Broadcast()
		if err != nil && !errors.Is(err, ErrUnknownOutcome) {
			return err
		}
		if len(w.toFinish) == 0 || w.committing > 1 {
			return nil
		}
	}
}

// finishPending finishes the tasks to finish, claiming nothing. With a
// token of commits.
func (w *worker) finishPending() {
	w.mu.Lock()
	batch := w.toFinish
	w.toFinish = nil
	w.mu.Unlock()
	if len(batch) > 0 {
		w.finishBatch(batch)
	}
}

// waitForTasks waits, none being ready, for tasks: in a pull for the
// goroutines not handling, or asleep while another goroutine pulls (or a
// commit claims), until woken.
func (w *worker) waitForTasks() {
	w.mu.Lock()
	if w.pulling || len(w.claimed) > 0 || w.reserved > 0 || w.stopped() {
		if len(w.claimed) == 0 && !w.stopped() {
			w.idle.Wait()
		}
		w.mu.Unlock()
		return
	}
	w.pulling = true
	wanted := max(w.wanted(), 1)
	w.pullWanted = wanted
	w.mu.Unlock()

	tasks, err := w.q.PullBatch(w.ctx, wanted, WithLease(w.config.lease))
	switch {
	case err == nil, w.ctx.Err() != nil:
	case isTransient(err):
		w.config.onError(nil, err)
		sleep(w.ctx, firstRetryWait)
	default:
		w.fatal(err)
	}
	w.mu.Lock()
	w.pulling = false
	w.pullWanted = 0
	w.claimed = append(w.claimed, tasks...)
	// The sleepers take the tasks, or one of them the wait.
	w.idle.Broadcast()
	w.mu.Unlock()
}

// run works on one task: its handler under a renewed lease, then the task
// is put on the list to finish, or failed.
func (w *worker) run(task *Task) {
	ctx, stop := context.WithCancelCause(w.values)
	defer stop(nil)
	r := &running{task: task, due: time.Now().Add(w.config.lease / 3), stop: stop}
	w.renewalsMu.Lock()
	w.running[r] = struct{}{}
	w.renewalsMu.Unlock()
	err := w.callHandler(ctx, task)
	w.renewalsMu.Lock()
	delete(w.running, r)
	w.renewalsMu.Unlock()
	w.mu.Lock()
	w.handling--
	if err == nil {
		w.toFinish = append(w.toFinish, task)
	}
	w.mu.Unlock()
	if err != nil {
		w.fail(task, err)
	}
}

// renewLeases renews the lease of each task whose handler runs every third
// of the lease, until end is closed. It looks every sixth of the lease, so
// a lease is renewed at most half a lease after the last. A renewal
// refused because the task was cancelled or taken back ends the handler's
// context with that cause.
func (w *worker) renewLeases(end <-chan struct{}) {
	ticker := time.NewTicker(w.config.lease / 6)
	defer ticker.Stop()
	for {
		select {
		case <-end:
			return
		case <-ticker.C:
		}
		now := time.Now()
		var due []*running
		w.renewalsMu.Lock()
		for r := range w.running {
			if !r.due.After(now) {
				r.due = now.Add(w.config.lease / 3)
				due = append(due, r)
			}
		}
		w.renewalsMu.Unlock()
		for _, r := range due {
			w.renew(r)
		}
	}
}

// renew extends one running task's lease.
func (w *worker) renew(r *running) {
	err := r.task.Extend(w.config.lease)
	w.renewalsMu.Lock()
	_, still := w.running[r]
	w.renewalsMu.Unlock()
	if !still {
		return // the handler returned meanwhile: the error is stale
	}
	switch {
	case errors.Is(err, ErrCancelled), errors.Is(err, ErrNotHeld):
		r.stop(err)
	case err != nil:
		w.config.onError(r.task, err)
	}
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
	w.reportNotFinished(batch, errs)
}

// reportNotFinished reports the tasks of batch that were not finished.
func (w *worker) reportNotFinished(batch []*Task, errs []error) {
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
