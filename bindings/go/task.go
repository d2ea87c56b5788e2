package tq

// #include <stdlib.h>
// #include <string.h>
// #include <tq.h>
import "C"

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// taskFields is what Go reads of a task, copied when the task is pulled or
// listed: a Task and a TaskInfo share its accessors.
type taskFields struct {
	id           int64
	attempts     int
	maxAttempts  int
	priority     int32
	runAt        time.Time
	expiresAt    int64
	deadline     int64
	lastError    string
	hasLastError bool
	payload      []byte
	parents      []int64
	waitingFor   []int64
	group        string
}

// readIDs copies an array of ids from a C task (nil when empty).
func readIDs(ids *C.int64_t, n C.size_t) []int64 {
	if ids == nil || n == 0 {
		return nil
	}
	out := make([]int64, int(n))
	for i, id := range unsafe.Slice(ids, int(n)) {
		out[i] = int64(id)
	}
	return out
}

// readTask copies the fields of a C task.
func readTask(c *C.tq_task) taskFields {
	var n C.size_t
	text := C.tq_task_payload(c, &n)
	f := taskFields{
		id:          int64(C.tq_task_id(c)),
		attempts:    int(C.tq_task_attempts(c)),
		maxAttempts: int(C.tq_task_max_attempts(c)),
		priority:    int32(C.tq_task_priority(c)),
		runAt:       time.UnixMilli(int64(C.tq_task_run_at_unix_ms(c))),
		expiresAt:   int64(C.tq_task_expires_at_unix_ms(c)),
		deadline:    int64(C.tq_task_deadline_unix_ms(c)),
		payload:     C.GoBytes(unsafe.Pointer(text), C.int(n)),
	}
	if reason := C.tq_task_last_error(c); reason != nil {
		f.lastError, f.hasLastError = C.GoString(reason), true
	}
	var count C.size_t
	f.parents = readIDs(C.tq_task_parents(c, &count), count)
	f.waitingFor = readIDs(C.tq_task_waiting_for(c, &count), count)
	if group := C.tq_task_group(c); group != nil {
		f.group = C.GoString(group)
	}
	return f
}

// ID returns the task's id, as Push returned it.
func (f taskFields) ID() int64 { return f.id }

// Attempts returns how many times the task has been delivered: for a
// Task, this delivery included (1 the first time, 2 and up for a
// redelivery); for a TaskInfo, so far.
func (f taskFields) Attempts() int { return f.attempts }

// MaxAttempts returns how many deliveries the task gets before a failure
// makes it dead.
func (f taskFields) MaxAttempts() int { return f.maxAttempts }

// Priority returns the task's priority (see WithPriority).
func (f taskFields) Priority() int32 { return f.priority }

// RunAt returns when the task became, or becomes, ready, to the
// millisecond.
func (f taskFields) RunAt() time.Time { return f.runAt }

// ExpiresAt returns, for a TaskInfo, the task's expiry (see
// WithExpireAfter), and false when it has none (or for a Task).
func (f taskFields) ExpiresAt() (time.Time, bool) {
	return time.UnixMilli(f.expiresAt), f.expiresAt != 0
}

// Deadline returns, for a TaskInfo, the task's deadline (see
// WithDeadlineAfter), and false when it has none (or for a Task).
func (f taskFields) Deadline() (time.Time, bool) {
	return time.UnixMilli(f.deadline), f.deadline != 0
}

// LastError returns why the task's previous delivery ended (the reason
// given to Fail, or libtq's words for a lost lease or a dead holder), and
// false when no delivery has ended that way.
func (f taskFields) LastError() (string, bool) { return f.lastError, f.hasLastError }

// Parents returns, for a Task, the ids of the tasks it was pushed to wait
// for (WithAfter), ascending: each has ended, so a worker may read what
// they left. Nil for a TaskInfo and for a task that waited for none.
func (f taskFields) Parents() []int64 { return f.parents }

// WaitingFor returns, for a TaskInfo, the ids of the tasks it still waits
// for, ascending: nil unless it is pending and blocked. Nil for a Task.
func (f taskFields) WaitingFor() []int64 { return f.waitingFor }

// Group returns, for a TaskInfo, the key of the ordered group it was
// pushed to (WithGroup), or "" when none. "" for a Task.
func (f taskFields) Group() string { return f.group }

// Payload returns the task's JSON text exactly as pushed. The slice is the
// task's own copy, valid at any time; do not modify it.
func (f taskFields) Payload() []byte { return f.payload }

// Decode decodes the payload into v with encoding/json.
func (f taskFields) Decode(v any) error {
	return json.Unmarshal(f.payload, v)
}

// Token returns the token of this delivery: with ID, it finishes the task
// in SQL, `SELECT tq_finish(id, token)` through tq's SQLite extension
// (libtq_sqlite), in the same commit as the worker's own writes.
func (t *Task) Token() int64 { return t.token }

// Task is one delivery of one task, held under a lease until it is
// finished or failed. Its accessors may be called from any goroutine at
// any time; Finish, Fail, Extend, FinishAndPull, Close and Context may be
// called concurrently with each other.
//
// Finish a task when its work is done, or Fail it. A task that is neither
// (closed, or dropped) stays leased and is delivered again once its lease
// runs out (or, once this process has exited, at the next Recover); Close
// frees its memory at once, and the garbage collector frees a dropped one
// eventually.
type Task struct {
	taskFields
	q     *Queue
	seq   uint64 // the order in which FinishBatch locks tasks
	token int64

	mu      sync.Mutex
	c       *C.tq_task // nil once finished, failed, lost or closed
	gone    *Error     // why c is nil: what later calls return
	cleanup runtime.Cleanup
	// watchers are the goroutines of Context, each in a C call on c
	// until it ends: release ends them before freeing c.
	watchers map[*watcher]struct{}
}

// taskSeq numbers the tasks wrapped by this process.
var taskSeq atomic.Uint64

// TaskInfo is a task as List, Task or Wait saw it: a snapshot, not a
// delivery. It cannot be finished, and reading a task does not hold it.
type TaskInfo struct {
	taskFields
	state    State
	result   []byte
	progress []byte
	steps    []StepInfo
}

// StepInfo is a step of a task as a snapshot lists it (Step, RecordStep).
type StepInfo struct {
	// Name is the step's name.
	Name string
	// Output is the JSON text recorded, exactly as given.
	Output []byte
	// RecordedAt is when it was recorded (the server's clock on
	// PostgreSQL).
	RecordedAt time.Time
}

// readInfo copies a C snapshot task.
func readInfo(c *C.tq_task) TaskInfo {
	info := TaskInfo{
		taskFields: readTask(c),
		state:      State(C.tq_task_state(c)),
		result:     goText(C.tq_task_result(c)),
		progress:   goText(C.tq_task_progress(c)),
	}
	count := C.tq_task_step_count(c)
	for index := C.size_t(0); index < count; index++ {
		info.steps = append(info.steps, StepInfo{
			Name:       string(goText(C.tq_task_step_name(c, index))),
			Output:     goText(C.tq_task_step_output(c, index)),
			RecordedAt: time.UnixMilli(int64(C.tq_task_step_recorded_at_unix_ms(c, index))),
		})
	}
	return info
}

// Steps returns the steps the task's deliveries recorded, in the order
// they were recorded, as Queue.Task or Queue.Wait read them; a task of
// List lists none. The slice is the snapshot's own; do not modify it.
func (i TaskInfo) Steps() []StepInfo { return i.steps }

// goText copies a NUL-terminated C text, or returns nil for NULL.
func goText(text *C.char) []byte {
	if text == nil {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(text), C.int(C.strlen(text)))
}

// State returns the task's state when it was read.
func (i TaskInfo) State() State { return i.state }

// Result returns the JSON text the task was finished with
// (FinishWithResult), exactly as given, or nil when it has none. The slice
// is the snapshot's own copy; do not modify it.
func (i TaskInfo) Result() []byte { return i.result }

// Progress returns the JSON text its holder last recorded
// (ExtendWithProgress), in this delivery or an earlier one, or nil when
// none was. The slice is the snapshot's own copy; do not modify it.
func (i TaskInfo) Progress() []byte { return i.progress }

// cJSON copies a JSON text for libtq, which takes it NUL-terminated: a NUL
// byte inside it, which no JSON text has, is an ErrInvalidJSON rather than
// the end of a shorter text. The caller frees the copy.
func cJSON(op, what string, text []byte) (*C.char, error) {
	if nul := bytes.IndexByte(text, 0); nul >= 0 {
		return nil, bindingError(op, ErrInvalidJSON, "the %s has a NUL byte at byte %d", what, nul)
	}
	return C.CString(string(text)), nil
}

// TryPull claims the ready task first in line under a lease without
// waiting, or returns ErrEmpty when no task is ready. The first in line
// is the ready task of highest priority, and among those the one ready
// longest.
//
// Errors match ErrInvalidArgument (a bad option), ErrBusy, ErrIO,
// ErrNotADatabase (the stored task is damaged) or ErrClosed.
func (q *Queue) TryPull(opts ...PullOption) (*Task, error) {
	options, err := newPullOptions("pull", opts)
	if err != nil {
		return nil, err
	}
	defer options.release()
	var task *Task
	status, err := q.call("pull", func(c *C.tq_queue) C.enum_tq_status {
		var ct *C.tq_task
		status := C.tq_pull(c, options.obj, &ct)
		if status == C.TQ_OK {
			task = q.wrap(ct)
		}
		return status
	})
	if err != nil {
		return nil, err
	}
	if status == C.TQ_EMPTY {
		return nil, ErrEmpty
	}
	return task, nil
}

// Pull claims the ready task first in line under a lease, as TryPull does,
// waiting until one is ready when none is: a push to its queue wakes it at
// once, from this process or another, a delayed task at its due time. The wait uses no CPU to speak of, but
// keeps an OS thread in libtq.
//
// When ctx ends first, Pull returns ctx.Err() itself; when the queue is
// closed, an error matching ErrClosed; when Interrupt ends the wait, one
// matching ErrInterrupted. A ctx that has already ended claims nothing.
// Other errors are those of TryPull.
func (q *Queue) Pull(ctx context.Context, opts ...PullOption) (*Task, error) {
	var task *Task
	err := q.wait(ctx, "pull", opts, func(c *C.tq_queue, options *C.tq_pull_options) C.enum_tq_status {
		var ct *C.tq_task
		status := C.tq_pull(c, options, &ct)
		if status == C.TQ_OK {
			task = q.wrap(ct)
		}
		return status
	})
	return task, err
}

// PullBatch claims up to max ready tasks in one transaction, in the order
// Pull would return them, waiting as Pull does while none is ready. It
// returns at least one task, or an error as Pull does; max below 1 is an
// ErrInvalidArgument.
func (q *Queue) PullBatch(ctx context.Context, max int, opts ...PullOption) ([]*Task, error) {
	if max < 1 {
		return nil, bindingError("pull", ErrInvalidArgument, "a batch of %d tasks is empty", max)
	}
	out := make([]*C.tq_task, max)
	var tasks []*Task
	err := q.wait(ctx, "pull", opts, func(c *C.tq_queue, options *C.tq_pull_options) C.enum_tq_status {
		var n C.size_t
		status := C.tq_pull_batch(c, options, C.size_t(max), &out[0], &n)
		for _, ct := range out[:n] {
			tasks = append(tasks, q.wrap(ct))
		}
		return status
	})
	if err != nil {
		return nil, err
	}
	return tasks, nil
}

// newPullOptions makes the C options of a pull.
func newPullOptions(op string, opts []PullOption) (cOptions[*C.tq_pull_options], error) {
	return newOptions(op, opts,
		func() *C.tq_pull_options { return C.tq_pull_options_new() },
		func(o *C.tq_pull_options) { C.tq_pull_options_free(o) })
}

// maxWait is how long one C call of a waiting pull waits: within libtq's
// limit of a year, after which the pull calls again.
const maxWait = 365 * 24 * time.Hour

// waitFor makes a pull wait up to maxWait for a task, unless cancel is
// triggered.
func waitFor(cancel *C.tq_cancel) PullOption {
	return PullOption{func(s *optionSetter[*C.tq_pull_options]) {
		s.set(func(o *C.tq_pull_options) C.enum_tq_status {
			return C.tq_pull_options_set_wait_ms(o, ceilMillis(maxWait))
		})
		s.set(func(o *C.tq_pull_options) C.enum_tq_status { return C.tq_pull_options_set_cancel(o, cancel) })
	}}
}

// cancelWith returns a tq_cancel that ctx triggers when it ends
// (context.AfterFunc), so that a wait in libtq given it wakes at once,
// without polling; and the function that frees it, once the trigger has
// run or can no longer start.
func cancelWith(ctx context.Context, op string) (*C.tq_cancel, func(), error) {
	cancel := C.tq_cancel_new()
	if cancel == nil {
		return nil, nil, bindingError(op, ErrInternal, "libtq could not create a cancellation")
	}
	triggered := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.tq_cancel_trigger(cancel)
		close(triggered)
	})
	release := func() {
		if !stop() {
			<-triggered
		}
		C.tq_cancel_free(cancel)
	}
	return cancel, release, nil
}

// wait runs pull, a C pull given options that wait, until it claims a
// task, ctx ends, or the queue is closed or interrupted. The wait ends
// when ctx does through a tq_cancel of this call's own, which
// context.AfterFunc triggers: libtq wakes the pull at once, without any
// polling.
func (q *Queue) wait(ctx context.Context, op string, opts []PullOption,
	pull func(*C.tq_queue, *C.tq_pull_options) C.enum_tq_status) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cancel, release, err := cancelWith(ctx, op)
	if err != nil {
		return err
	}
	defer release()
	options, err := newPullOptions(op, append(slices.Clip(opts), waitFor(cancel)))
	if err != nil {
		return err
	}
	defer options.release()
	for {
		status, err := q.call(op, func(c *C.tq_queue) C.enum_tq_status { return pull(c, options.obj) })
		switch {
		case errors.Is(err, ErrInterrupted):
			if q.h.closing.Load() {
				return bindingError(op, ErrClosed, "the queue was closed while waiting")
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		case err != nil:
			return err
		case status == C.TQ_OK:
			return nil
		}
		// TQ_EMPTY: maxWait passed without a task.
	}
}

// wrap copies what Go reads of a new C task and records it in the queue.
// It runs under the queue's read lock, so Close cannot miss the task.
func (q *Queue) wrap(c *C.tq_task) *Task {
	t := &Task{taskFields: readTask(c), q: q, seq: taskSeq.Add(1), token: int64(C.tq_task_token(c)), c: c}
	h := q.h
	h.tasksMu.Lock()
	h.tasks[c] = struct{}{}
	h.tasksMu.Unlock()
	t.cleanup = runtime.AddCleanup(t, h.freeTask, c)
	return t
}

// freeTask frees c unless Close or another owner already did.
func (h *handle) freeTask(c *C.tq_task) {
	h.tasksMu.Lock()
	_, live := h.tasks[c]
	delete(h.tasks, c)
	h.tasksMu.Unlock()
	if live {
		C.tq_task_free(c)
	}
}

// release ends the Contexts of the delivery and frees the C task, after
// which calls return gone. Called with t.mu held.
func (t *Task) release(gone *Error) {
	t.endWatches(gone)
	t.cleanup.Stop()
	t.q.h.freeTask(t.c)
	t.c = nil
	t.gone = gone
}

// use returns the error for a call on a task that is no longer held, or
// never was (a Task not from a pull).
func (t *Task) use(op string) error {
	if t.gone == nil {
		return bindingError(op, ErrClosed, "the task was not pulled with Pull, TryPull or PullBatch")
	}
	return &Error{Op: op, Kind: t.gone.Kind, Message: t.gone.Message}
}

// end runs call, a C call on the held task, with t.mu held. When the
// delivery is no longer held, and when call succeeded and ended it
// (ended is not empty: how later calls word it), the C task is released.
func (t *Task) end(op, ended string, call func(*C.tq_queue, *C.tq_task) C.enum_tq_status) (C.enum_tq_status, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c == nil {
		return 0, t.use(op)
	}
	status, err := t.q.call(op, func(c *C.tq_queue) C.enum_tq_status { return call(c, t.c) })
	runtime.KeepAlive(t)
	switch {
	case err == nil && ended != "":
		t.release(bindingError("", ErrNotHeld, "task %d %s", t.id, ended))
	case errors.Is(err, ErrNotHeld), errors.Is(err, ErrCancelled):
		// Its Contexts learn why (ErrCancelled), later calls only that
		// the delivery is over.
		var why *Error
		errors.As(err, &why)
		t.endWatches(why)
		t.release(bindingError("", ErrNotHeld, "task %d is no longer held", t.id))
	}
	return status, err
}

// Finish completes this delivery: the task is deleted, or kept as done on
// a queue opened WithHistory. It succeeds as long as nobody else has taken
// the task since it was pulled, even past its lease.
//
// Errors match ErrNotHeld (finished or failed already, or the lease was
// taken by another worker or by Recover: nothing changed), ErrCancelled
// (the task was cancelled meanwhile: it ends as cancelled, not done),
// ErrBusy or ErrIO (the task is still held and Finish may be tried
// again), or ErrClosed.
func (t *Task) Finish() error {
	_, err := t.end("finish", "was already finished", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		return C.tq_finish(c, task)
	})
	return err
}

// FinishWithResult finishes the task as Finish does, and keeps result, one
// JSON text in UTF-8 (at most the queue's payload limit), with it, exactly
// as given, for any process to read (Queue.Task) or wait for (Queue.Wait):
// for the queue's result retention (WithResultRetention), or, on a queue
// opened WithHistory, as long as the done task is kept.
//
// Errors are those of Finish, and ErrInvalidJSON or ErrInvalidArgument
// (not UTF-8, too long), which change nothing: the task is still held.
func (t *Task) FinishWithResult(result []byte) error {
	cresult, err := cJSON("finish", "result", result)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cresult))
	_, err = t.end("finish", "was already finished", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		return C.tq_finish_with_result(c, task, cresult)
	})
	return err
}

// FinishWithResultJSON finishes the task with v, encoded with
// encoding/json, as its result: FinishWithResult of json.Marshal(v). A
// value that encoding/json cannot encode is an error wrapping json's, and
// the task is still held.
func (t *Task) FinishWithResultJSON(v any) error {
	result, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("tq: finish: %w", err)
	}
	return t.FinishWithResult(result)
}

// FinishAndPull finishes t and pulls the next task, as Finish then Pull
// do, but in one commit when a task is ready: a worker draining a backlog
// pays one commit (one flush at DurabilityFull) per task instead of two.
// When no task is ready, t is finished and FinishAndPull waits as Pull
// does. When ctx has already ended, it only finishes t.
//
//	task, err := q.Pull(ctx)
//	for err == nil {
//		... work on task ...
//		task, err = task.FinishAndPull(ctx)
//	}
//
// An error of the finish, an *Error whose Op is "finish" (ErrNotHeld,
// ErrBusy, ErrIO, ErrClosed, or ErrInvalidArgument for a bad option),
// leaves t as Finish would and claims nothing. Any other error, ctx.Err()
// or an *Error whose Op is "pull", came after t was finished. Either way,
// calling Finish again on t finishes it or reports ErrNotHeld.
func (t *Task) FinishAndPull(ctx context.Context, opts ...PullOption) (*Task, error) {
	if ctx.Err() != nil {
		if err := t.Finish(); err != nil {
			return nil, err
		}
		return nil, ctx.Err()
	}
	// libtq's finish-and-pull waits too, but then cannot tell a failed
	// finish from a failed wait. Without a wait it is one transaction, and
	// the wait, when no task was ready, is an ordinary Pull.
	options, err := newPullOptions("finish", opts)
	if err != nil {
		return nil, err
	}
	defer options.release()
	var next *Task
	status, err := t.end("finish", "was already finished", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		var ct *C.tq_task
		status := C.tq_finish_and_pull(c, task, options.obj, &ct)
		if status == C.TQ_OK {
			next = t.q.wrap(ct)
		}
		return status
	})
	switch {
	case err != nil:
		return nil, err
	case status == C.TQ_EMPTY:
		return t.q.Pull(ctx, opts...)
	}
	return next, nil
}

// Fail ends this delivery as failed, keeping reason (cut to 64 KiB; an
// empty one records none) as the task's last error: the task is pulled again after the queue's retry
// back-off (WithRetryBackoff), or, when this delivery was its last attempt
// (WithMaxAttempts, WithTaskMaxAttempts), it becomes dead.
//
// Errors match ErrNotHeld (finished or failed already, or the lease was
// taken: nothing changed), ErrInvalidArgument (a reason that is not UTF-8
// or has a NUL byte), ErrBusy or ErrIO (the task is still held), or
// ErrClosed.
func (t *Task) Fail(reason string) error {
	if strings.IndexByte(reason, 0) >= 0 {
		return bindingError("fail", ErrInvalidArgument, "the reason %q has a NUL byte", reason)
	}
	creason := C.CString(reason)
	defer C.free(unsafe.Pointer(creason))
	_, err := t.end("fail", "was already failed", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		return C.tq_fail(c, task, creason)
	})
	return err
}

// Extend renews the task's lease: it now runs out lease from now (1 ms to
// one year, rounded up to whole milliseconds). Call it well before the
// lease runs out while working on a long task.
//
// Errors match ErrNotHeld (the lease was lost and another worker may have
// the task: stop working on it), ErrCancelled (the task was cancelled:
// stop working on it), ErrInvalidArgument (a lease out of
// range), ErrBusy, ErrIO or ErrClosed.
func (t *Task) Extend(lease time.Duration) error {
	if lease < 0 {
		return bindingError("extend", ErrInvalidArgument, "the lease %v is negative", lease)
	}
	ms := ceilMillis(lease)
	_, err := t.end("extend", "", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		return C.tq_extend(c, task, ms)
	})
	return err
}

// ExtendWithProgress renews the task's lease as Extend does, and records
// progress, one JSON text in UTF-8 (at most the queue's payload limit),
// with it, for anyone to read (Queue.Task, TaskInfo.Progress) until the
// next progress replaces it, a later delivery's included.
//
// Errors are those of Extend, and ErrInvalidJSON or ErrInvalidArgument
// (not UTF-8, too long), which change nothing.
func (t *Task) ExtendWithProgress(lease time.Duration, progress []byte) error {
	if lease < 0 {
		return bindingError("extend", ErrInvalidArgument, "the lease %v is negative", lease)
	}
	ms := ceilMillis(lease)
	cprogress, err := cJSON("extend", "progress", progress)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cprogress))
	_, err = t.end("extend", "", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		return C.tq_extend_with_progress(c, task, ms, cprogress)
	})
	return err
}

// ExtendWithProgressJSON renews the lease with v, encoded with
// encoding/json, as the progress: ExtendWithProgress of json.Marshal(v). A
// value that encoding/json cannot encode is an error wrapping json's, and
// the lease is not renewed.
func (t *Task) ExtendWithProgressJSON(lease time.Duration, v any) error {
	progress, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("tq: extend: %w", err)
	}
	return t.ExtendWithProgress(lease, progress)
}

// RecordStep records step name of this held task with output, one JSON
// text in UTF-8 (at most the queue's payload limit), in one commit that
// checks the delivery is still current; every later delivery of the task
// reads it back (StepOutput) instead of running the step again. It
// returns true once stored, and false when the task already had a step
// of that name, whose first output is kept.
//
// Errors match ErrNotHeld (the delivery is no longer current: nothing is
// recorded), ErrCancelled, ErrInvalidJSON, ErrInvalidArgument (a name
// empty, too long or holding NUL; an output too long), ErrBusy, ErrIO or
// ErrClosed.
func (t *Task) RecordStep(name string, output []byte) (bool, error) {
	cname, err := cStepName("record step", name)
	if err != nil {
		return false, err
	}
	defer C.free(unsafe.Pointer(cname))
	coutput, err := cJSON("record step", "step's output", output)
	if err != nil {
		return false, err
	}
	defer C.free(unsafe.Pointer(coutput))
	status, err := t.end("record step", "", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		return C.tq_step_put(c, task, cname, coutput)
	})
	return err == nil && status == C.TQ_OK, err
}

// StepOutput returns the output recorded for step name of this task, by
// this delivery or an earlier one, and false when it was never recorded.
// It only reads, so it works for a delivery no longer current too.
func (t *Task) StepOutput(name string) ([]byte, bool, error) {
	cname, err := cStepName("step output", name)
	if err != nil {
		return nil, false, err
	}
	defer C.free(unsafe.Pointer(cname))
	var output []byte
	status, err := t.end("step output", "", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		var text *C.char
		status := C.tq_step_get(c, task, cname, &text)
		if status == C.TQ_OK {
			output = goText(text)
			C.tq_string_free(text)
		}
		return status
	})
	return output, err == nil && status == C.TQ_OK, err
}

// Step runs step name of task once across its deliveries: it returns the
// output an earlier delivery recorded, decoded with encoding/json, without
// calling run; otherwise it calls run and records what it returns,
// encoded with encoding/json, before returning it. An error of run is
// returned and nothing is recorded: the step runs again at the next
// delivery. A ctx that has ended runs nothing.
//
// A step is exactly once only where its effect commits with its record:
// give a call to another system an idempotency key of its own.
func Step[T any](ctx context.Context, task *Task, name string, run func() (T, error)) (T, error) {
	var value T
	if err := ctx.Err(); err != nil {
		return value, err
	}
	recorded, found, err := task.StepOutput(name)
	if err != nil {
		return value, err
	}
	if !found {
		if value, err = run(); err != nil {
			return value, err
		}
		output, err := json.Marshal(value)
		if err != nil {
			return value, fmt.Errorf("tq: step %q: %w", name, err)
		}
		stored, err := task.RecordStep(name, output)
		if err != nil || stored {
			return value, err
		}
		// Recorded meanwhile by another goroutine: the first output stands.
		if recorded, _, err = task.StepOutput(name); err != nil {
			return value, err
		}
	}
	var decoded T
	if err := json.Unmarshal(recorded, &decoded); err != nil {
		return decoded, fmt.Errorf("tq: step %q: %w", name, err)
	}
	return decoded, nil
}

// cStepName copies a step's name for libtq: a NUL byte inside it would end
// it early, so it is refused.
func cStepName(op, name string) (*C.char, error) {
	if nul := strings.IndexByte(name, 0); nul >= 0 {
		return nil, bindingError(op, ErrInvalidArgument, "the step name has a NUL byte at byte %d", nul)
	}
	return C.CString(name), nil
}

// Snooze hands this delivery back: the task is pulled again delay from now
// (0 to one year, rounded up to whole milliseconds), and this delivery
// does not count as an attempt. For a worker that cannot do the task yet.
//
// Errors match ErrNotHeld, ErrCancelled (the task was cancelled
// meanwhile), ErrInvalidArgument (a delay out of range), ErrBusy, ErrIO or
// ErrClosed.
func (t *Task) Snooze(delay time.Duration) error {
	if delay < 0 {
		return bindingError("snooze", ErrInvalidArgument, "the delay %v is negative", delay)
	}
	ms := ceilMillis(delay)
	_, err := t.end("snooze", "was already snoozed", func(c *C.tq_queue, task *C.tq_task) C.enum_tq_status {
		return C.tq_snooze(c, task, ms)
	})
	return err
}

// Close frees the delivery without finishing it: the task stays leased and
// is delivered again once its lease runs out (or, once this process has
// exited, at the next Recover).
// Later calls return errors matching ErrClosed. Close after Finish, or a
// second Close, does nothing.
func (t *Task) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c != nil {
		t.release(bindingError("", ErrClosed, "task %d was closed", t.id))
	}
}

// FinishBatch finishes the deliveries of tasks, pulled through q, in one
// transaction. errs[i] says how tasks[i] fared: nil when it was finished,
// else what Finish would have returned for it (ErrNotHeld: finished
// already or its lease was taken; ErrClosed: closed), or an
// ErrInvalidArgument when it was pulled through another Queue. A task not
// finished does not stop the others.
//
// err is the failure of the whole batch (ErrBusy, ErrIO, ErrClosed): then
// errs is nil, nothing was finished, and the tasks may be finished again.
func (q *Queue) FinishBatch(tasks []*Task) (errs []error, err error) {
	errs, _, err = q.finishAndPull(tasks, 0, nil)
	return errs, err
}

// FinishAndPullBatch finishes the deliveries of tasks as FinishBatch does
// and claims up to max ready tasks as PullBatch does, in one transaction:
// a worker's tasks whose handlers returned and the claims of its free
// handlers share one commit (one flush at DurabilityFull). errs[i] says how
// tasks[i] fared, as in FinishBatch, and matches ErrCancelled for a task
// cancelled meanwhile (it then ends as cancelled); a task not finished
// stops neither the others nor the claim. next holds the tasks claimed, empty when none was
// ready: it never waits (then wait with Pull). opts set the new tasks'
// lease (WithLease). max 0 only finishes; no tasks only claims.
//
// err is the failure of the whole call (ErrBusy, ErrIO, ErrClosed, or
// ErrInvalidArgument for a negative max): then errs and next are nil,
// nothing was finished or claimed, and the tasks may be finished again.
func (q *Queue) FinishAndPullBatch(tasks []*Task, max int, opts ...PullOption) (errs []error, next []*Task, err error) {
	if max < 0 {
		return nil, nil, bindingError("finish", ErrInvalidArgument, "a batch of %d tasks to claim is negative", max)
	}
	options, err := newPullOptions("finish", opts)
	if err != nil {
		return nil, nil, err
	}
	defer options.release()
	return q.finishAndPull(tasks, max, options.obj)
}

// finishAndPull finishes tasks and claims up to most tasks with options,
// in one transaction: FinishBatch when most is 0.
func (q *Queue) finishAndPull(tasks []*Task, most int, options *C.tq_pull_options) (errs []error, next []*Task, err error) {
	// Each distinct task is locked once, in one order for every batch, so
	// that batches sharing tasks cannot deadlock. A Task not from a pull
	// (seq 0) never changes and is not locked.
	seen := make(map[*Task]bool, len(tasks))
	var distinct []*Task
	for _, t := range tasks {
		if !seen[t] {
			seen[t] = true
			distinct = append(distinct, t)
		}
	}
	slices.SortFunc(distinct, func(a, b *Task) int { return cmp.Compare(a.seq, b.seq) })
	for _, t := range distinct {
		if t.seq != 0 {
			t.mu.Lock()
			defer t.mu.Unlock()
		}
	}

	outcome := make(map[*Task]error, len(distinct))
	var batch []*Task
	for _, t := range distinct {
		switch {
		case t.c == nil:
			outcome[t] = t.use("finish")
		case t.q != q:
			outcome[t] = bindingError("finish", ErrInvalidArgument, "task %d was pulled through another Queue", t.id)
		default:
			batch = append(batch, t)
		}
	}
	ctasks := make([]*C.tq_task, max(len(batch), 1))
	statuses := make([]C.int32_t, max(len(batch), 1))
	for i, t := range batch {
		ctasks[i] = t.c
	}
	claimed := make([]*C.tq_task, max(most, 1))
	_, err = q.call("finish", func(c *C.tq_queue) C.enum_tq_status {
		if most == 0 {
			return C.tq_finish_batch(c, &ctasks[0], C.size_t(len(batch)), &statuses[0])
		}
		var n C.size_t
		status := C.tq_finish_and_pull_batch(c, &ctasks[0], C.size_t(len(batch)), &statuses[0],
			options, C.size_t(most), &claimed[0], &n)
		for _, ct := range claimed[:n] {
			next = append(next, q.wrap(ct))
		}
		return status
	})
	runtime.KeepAlive(batch)
	if err != nil {
		return nil, nil, err
	}
	for i, t := range batch {
		switch statuses[i] {
		case C.TQ_OK:
			outcome[t] = nil
			t.release(bindingError("", ErrNotHeld, "task %d was already finished", t.id))
		case C.TQ_ERR_CANCELLED:
			t.release(bindingError("", ErrCancelled, "task %d was cancelled while this delivery held it", t.id))
			outcome[t] = t.use("finish")
		default:
			t.release(bindingError("", ErrNotHeld, "task %d is no longer held", t.id))
			outcome[t] = t.use("finish")
		}
	}

	errs = make([]error, len(tasks))
	clear(seen)
	for i, t := range tasks {
		errs[i] = outcome[t]
		if seen[t] && errs[i] == nil {
			errs[i] = t.use("finish") // finished by its first occurrence
		}
		seen[t] = true
	}
	return errs, next, nil
}
