// Package tq is a persistent task queue in one SQLite file, for Go programs,
// through libtq's C ABI.
//
// Programs push JSON tasks; workers in any number of goroutines and
// processes on the same host pull them, each task claimed by one worker at
// a time under a lease, and finish them. A push that returned is stored;
// a worker that dies before Finish leaves its task to be delivered again
// (at least once delivery), once its lease runs out or Recover takes it back.
//
//	q, err := tq.Open("jobs.db")
//	if err != nil { ... }
//	defer q.Close()
//	q.Recover() // take back what crashed workers held
//	q.PushJSON(map[string]string{"file": "a.mp4"})
//	task, err := q.Pull(ctx) // waits for a task
//	if err != nil { ... }
//	defer task.Close()
//	var job struct{ File string }
//	task.Decode(&job)
//	if err := work(job); err != nil {
//		task.Fail(err.Error()) // retried after a back-off, or dead
//	} else {
//		task.Finish()
//	}
//
// A task that keeps failing stops: once it has used its attempts it is
// dead, kept with its last error until RetryDead or Purge. Tasks carry a
// priority, may be unique by key, and are pushed, pulled and finished in
// batches; one file holds any number of named queues (WithQueue).
//
// A Queue may be used by any number of goroutines at once. Close it when
// done: Close wakes the pulls waiting on it, waits for the calls in
// progress, and every later call returns an error matching ErrClosed.
package tq

/*
#include <stdlib.h>
#include <tq.h>

// This binding is written for this ABI version: before 1.0 a minor release
// may change the ABI, so both numbers must match.
#if TQ_VERSION_MAJOR != 0 || TQ_VERSION_MINOR != 3
#error "tq.h is not the 0.3 ABI this Go binding is written for"
#endif
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Queue is an open queue: one of the named queues of a file (WithQueue).
// Its methods may be called from any number of goroutines at once.
type Queue struct {
	h       *handle
	cleanup runtime.Cleanup
}

// handle owns the C queue and the tasks pulled through it. It is apart from
// Queue so that the safety-net cleanup of an unreachable Queue can close it.
type handle struct {
	// mu is held for reading by every call on c, waiting pulls included,
	// and for writing by close, so a close waits for the calls in progress
	// and no call starts after.
	mu sync.RWMutex
	c  *C.tq_queue // nil once closed
	// closing is set by close before it interrupts the waiting pulls, so
	// that they report ErrClosed.
	closing atomic.Bool

	// tasks holds the C tasks not yet freed. Whoever removes a task from
	// it frees that task: Finish, Task.Close, a task's cleanup, or close,
	// which frees them all.
	tasksMu sync.Mutex
	tasks   map[*C.tq_task]struct{}
}

// Version returns the version of the libtq loaded at run time,
// "MAJOR.MINOR.PATCH".
func Version() string {
	return C.GoString(C.tq_version())
}

// checkVersion refuses a loaded library whose ABI differs from the header's.
var checkVersion = sync.OnceValue(func() error {
	if C.tq_version_number()/100 != C.TQ_VERSION_NUMBER/100 {
		return bindingError("open", ErrInternal, "the loaded libtq is %s, but this binding needs %s",
			Version(), C.TQ_VERSION)
	}
	return nil
})

// redactedLocation is location as messages show it: a URL without its
// password (tq_location_redacted), a file path unchanged.
func redactedLocation(location string) string {
	clocation := C.CString(location)
	defer C.free(unsafe.Pointer(clocation))
	var length C.size_t
	if C.tq_location_redacted(clocation, nil, 0, &length) != C.TQ_OK {
		return "(not UTF-8)"
	}
	shown := make([]byte, length+1)
	C.tq_location_redacted(clocation, (*C.char)(unsafe.Pointer(&shown[0])), C.size_t(len(shown)), &length)
	return string(shown[:length])
}

// Open opens the queue in the SQLite file at path, creating the file and
// tq's tables as needed. The file must be on a local filesystem. Several
// Queues and processes may open the same file.
//
// A path that is a postgres:// or postgresql:// URL opens the queue in that
// PostgreSQL database instead, shared by any number of machines (see
// WithPostgresSchema and WithPoolSize).
//
// Errors match ErrInvalidArgument (an empty path or a bad option),
// ErrNotADatabase (not an SQLite file, corrupt, or a newer tq schema; the
// file is left untouched), ErrIO (cannot open or create) or ErrBusy.
func Open(path string, opts ...Option) (*Queue, error) {
	if err := checkVersion(); err != nil {
		return nil, err
	}
	if nul := strings.IndexByte(path, 0); nul >= 0 {
		return nil, bindingError("open", ErrInvalidArgument, "the path starting %q has a NUL byte at byte %d",
			redactedLocation(path[:nul]), nul)
	}
	options, err := newOptions("open", opts,
		func() *C.tq_options { return C.tq_options_new() },
		func(o *C.tq_options) { C.tq_options_free(o) })
	if err != nil {
		return nil, err
	}
	defer options.release()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var c *C.tq_queue
	if _, err := lockedCall("open", func() C.enum_tq_status { return C.tq_open(cpath, options.obj, &c) }); err != nil {
		return nil, err
	}
	h := &handle{c: c, tasks: make(map[*C.tq_task]struct{})}
	q := &Queue{h: h}
	q.cleanup = runtime.AddCleanup(q, (*handle).close, h)
	return q, nil
}

// Close closes the queue. It wakes the pulls waiting on it (which return
// errors matching ErrClosed), cancels the Contexts of its tasks (with a
// cause matching ErrClosed), waits for the calls in progress on other
// goroutines, and frees the tasks pulled through the queue that were
// neither finished, failed nor closed: they are delivered again once their
// lease runs out (or, once this process has exited, at the next Recover).
// Later calls on the queue and its tasks return errors matching ErrClosed.
// Calling Close again does nothing. The error is always nil.
func (q *Queue) Close() error {
	if q.h != nil {
		q.cleanup.Stop()
		q.h.close()
	}
	return nil
}

// close closes the C queue and frees its remaining tasks, once.
func (h *handle) close() {
	// Waiting pulls hold the read lock: wake them, for good, before
	// waiting for the write lock.
	h.closing.Store(true)
	h.mu.RLock()
	if h.c != nil {
		C.tq_interrupt(h.c)
	}
	h.mu.RUnlock()

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil {
		return
	}
	h.tasksMu.Lock()
	tasks := h.tasks
	h.tasks = nil
	h.tasksMu.Unlock()
	for c := range tasks {
		C.tq_task_free(c)
	}
	C.tq_close(h.c)
	h.c = nil
}

// call runs one C call on the open queue: under the read lock, so that
// Close waits for it, and through lockedCall, so that a failure carries its
// message. On a closed queue it returns ErrClosed without calling.
func (q *Queue) call(op string, fn func(c *C.tq_queue) C.enum_tq_status) (C.enum_tq_status, error) {
	h := q.h
	if h == nil {
		return 0, bindingError(op, ErrClosed, "the queue was not opened with Open")
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.c == nil {
		return 0, bindingError(op, ErrClosed, "the queue is closed")
	}
	status, err := lockedCall(op, func() C.enum_tq_status { return fn(h.c) })
	runtime.KeepAlive(q)
	return status, err
}

// noBytes stands in for an empty payload, which libtq must still receive as
// a non-NULL pointer to report it as invalid JSON.
var noBytes [1]byte

// Push stores payload, one JSON text in UTF-8, as a new pending task,
// exactly as given, and returns its id. It returns once the task is stored
// at the queue's durability. The queue keeps no reference to payload.
//
// With WithUniqueKey, when a task of the queue holds the key, Push stores
// nothing and returns that task's id with ErrDuplicate itself, which is not
// a failure:
//
//	id, err := q.Push(payload, tq.WithUniqueKey("invoice:1042"))
//	if err != nil && !errors.Is(err, tq.ErrDuplicate) {
//		return err
//	}
//	// id is the task that will do the work, new or not
//
// With WithReplacePending or WithDebounce, a pending holder of the key
// takes the push instead, and Push returns its id with ErrMerged, which is
// not a failure either; a holder being delivered is never changed (then
// ErrDuplicate).
//
// Errors match ErrInvalidJSON, ErrInvalidArgument (not UTF-8, longer than
// the queue's limit, a bad option), ErrBusy, ErrIO or ErrClosed; on any of
// them nothing is stored (for ErrIO: unless the disk took the write) and
// the id is 0.
func (q *Queue) Push(payload []byte, opts ...PushOption) (int64, error) {
	options, err := newOptions("push", opts,
		func() *C.tq_push_options { return C.tq_push_options_new() },
		func(o *C.tq_push_options) { C.tq_push_options_free(o) })
	if err != nil {
		return 0, err
	}
	defer options.release()
	data := &noBytes[0]
	if len(payload) > 0 {
		data = &payload[0]
	}
	var id C.int64_t
	status, err := q.call("push", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_push(c, (*C.char)(unsafe.Pointer(data)), C.size_t(len(payload)), options.obj, &id)
	})
	switch {
	case err != nil:
		return 0, err
	case status == C.TQ_DUPLICATE:
		return int64(id), ErrDuplicate
	case status == C.TQ_MERGED:
		return int64(id), ErrMerged
	}
	return int64(id), nil
}

// PushBatch stores payloads as new pending tasks in one transaction, in
// order, and returns their ids: all of them or none. Options apply to
// every task; a unique key is refused. No payloads stores nothing.
//
// Errors are those of Push; for a bad payload, the message names its index
// ("payload 17: ...").
func (q *Queue) PushBatch(payloads [][]byte, opts ...PushOption) ([]int64, error) {
	options, err := newOptions("push", opts,
		func() *C.tq_push_options { return C.tq_push_options_new() },
		func(o *C.tq_push_options) { C.tq_push_options_free(o) })
	if err != nil {
		return nil, err
	}
	defer options.release()
	// libtq takes an array of pointers to the payloads. An array in Go
	// memory holding pointers to the payloads' Go memory would break cgo's
	// rule that memory passed to C holds no (unpinned) Go pointers, so the
	// payloads are copied into one C buffer and the array of pointers into
	// it is C memory too. libtq copies the payloads as it reads them, and
	// neither allocation outlives the call.
	n := max(len(payloads), 1) // never a zero-sized allocation
	total := 1
	for _, p := range payloads {
		total += len(p)
	}
	buf := C.malloc(C.size_t(total))
	defer C.free(buf)
	array := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
	defer C.free(array)
	data := unsafe.Slice((*byte)(buf), total)
	pointers := unsafe.Slice((**C.char)(array), n)
	lens := make([]C.size_t, n)
	offset := 0
	for i, p := range payloads {
		copy(data[offset:], p)
		pointers[i] = (*C.char)(unsafe.Pointer(&data[offset]))
		lens[i] = C.size_t(len(p))
		offset += len(p)
	}
	ids := make([]C.int64_t, n)
	_, err = q.call("push", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_push_batch(c, &pointers[0], &lens[0], C.size_t(len(payloads)), options.obj, &ids[0])
	})
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(payloads))
	for i := range out {
		out[i] = int64(ids[i])
	}
	return out, nil
}

// A PushItem is one task of PushItems: its payload and its own options.
type PushItem struct {
	Payload []byte
	Options []PushOption
}

// PushItems stores each item as Push would, in order, in one transaction,
// and returns their ids (for an item whose unique key a task holds, that
// task's): all of them or none. An item may wait for an earlier one
// (WithAfterItem), so a graph of tasks is stored whole. No items stores
// nothing.
//
// Errors are those of Push; the message names the index of the first bad
// item ("item 17: ...").
func (q *Queue) PushItems(items []PushItem) ([]int64, error) {
	n := max(len(items), 1) // never a zero-sized allocation
	// As in PushBatch, what libtq reads through pointers is C memory.
	total := 1
	for _, item := range items {
		total += len(item.Payload)
	}
	buf := C.malloc(C.size_t(total))
	defer C.free(buf)
	array := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
	defer C.free(array)
	optionArray := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.tq_push_options)(nil))))
	defer C.free(optionArray)
	data := unsafe.Slice((*byte)(buf), total)
	pointers := unsafe.Slice((**C.char)(array), n)
	options := unsafe.Slice((**C.tq_push_options)(optionArray), n)
	lens := make([]C.size_t, n)
	offset := 0
	for i, item := range items {
		opts, err := newOptions("push", item.Options,
			func() *C.tq_push_options { return C.tq_push_options_new() },
			func(o *C.tq_push_options) { C.tq_push_options_free(o) })
		if err != nil {
			return nil, err
		}
		defer opts.release()
		options[i] = opts.obj
		copy(data[offset:], item.Payload)
		pointers[i] = (*C.char)(unsafe.Pointer(&data[offset]))
		lens[i] = C.size_t(len(item.Payload))
		offset += len(item.Payload)
	}
	ids := make([]C.int64_t, n)
	_, err := q.call("push", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_push_items(c, &pointers[0], &lens[0], &options[0], C.size_t(len(items)), &ids[0])
	})
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(items))
	for i := range out {
		out[i] = int64(ids[i])
	}
	return out, nil
}

// PushJSON stores v, encoded with encoding/json, as a new task: Push of
// json.Marshal(v), with the same results. A value that encoding/json cannot encode is an error
// wrapping json's.
//
// Push and PushJSON are separate because a []byte given to encoding/json
// becomes a base64 string: Push stores bytes that already are JSON as they
// are, PushJSON encodes a Go value.
func (q *Queue) PushJSON(v any, opts ...PushOption) (int64, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("tq: push: %w", err)
	}
	return q.Push(payload, opts...)
}

// Recover returns to pending every leased task of the queue whose lease
// expired or whose holder process no longer exists on this host, and
// returns how many; a task whose lost delivery was its last attempt becomes
// dead instead. Tasks of live processes, this one included, are untouched,
// so calling Recover at every start-up is safe with several processes.
func (q *Queue) Recover() (int64, error) {
	var n C.int64_t
	_, err := q.call("recover", func(c *C.tq_queue) C.enum_tq_status { return C.tq_recover(c, &n) })
	return int64(n), err
}

// Interrupt ends the wait of every Pull, PullBatch, FinishAndPull and Wait
// on the queue with an error matching ErrInterrupted, now and from then
// on: a later pull still claims a task that is ready, and returns
// ErrInterrupted at once when none is (a later Wait, when the task has not
// ended). It cancels the Contexts of the queue's tasks (Task.Context) too.
// Pulls through other Queues are not affected. Close
// does this itself; Interrupt is for stopping workers that share no
// context while the queue stays open for other calls.
func (q *Queue) Interrupt() error {
	_, err := q.call("interrupt", func(c *C.tq_queue) C.enum_tq_status { return C.tq_interrupt(c) })
	return err
}

// State is a task's state, for Count, List and Purge.
type State int32

const (
	// Pending: waiting to be pulled (possibly not yet due).
	Pending State = C.TQ_STATE_PENDING
	// Leased: pulled and held under a lease (possibly expired and not yet
	// taken back).
	Leased State = C.TQ_STATE_LEASED
	// Done: finished and kept as history (queues opened WithHistory).
	Done State = C.TQ_STATE_DONE
	// Dead: used up its attempts; kept with its last error until RetryDead,
	// RetryAllDead or Purge.
	Dead State = C.TQ_STATE_DEAD
	// Cancelled: cancelled by CancelTask; kept with its reason (queues
	// opened WithHistory) until Purge.
	Cancelled State = C.TQ_STATE_CANCELLED
)

// String returns the state's name.
func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Leased:
		return "leased"
	case Done:
		return "done"
	case Dead:
		return "dead"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Count returns how many tasks of the queue are in state. A leased task
// whose lease expired counts as leased until it is pulled again or
// recovered.
func (q *Queue) Count(state State) (int64, error) {
	var n C.int64_t
	_, err := q.call("count", func(c *C.tq_queue) C.enum_tq_status { return C.tq_count(c, C.int32_t(state), &n) })
	return int64(n), err
}

// Purge deletes the queue's tasks in state, Done, Dead or Cancelled, that reached it
// at least olderThan ago (0: all of them), and returns how many. Another
// state is an ErrInvalidArgument.
func (q *Queue) Purge(state State, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, bindingError("purge", ErrInvalidArgument, "the age %v is negative", olderThan)
	}
	ms := ceilMillis(olderThan)
	var n C.int64_t
	_, err := q.call("purge", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_purge(c, C.int32_t(state), ms, &n)
	})
	return int64(n), err
}

// List returns a page of the queue's tasks in state: up to limit of them
// with ids above afterID, by id. Start with afterID 0 and pass the last id
// of each page to get the next; a page shorter than limit is the last.
// Listed tasks are snapshots: listing holds nothing. A page reads the
// table from afterID on: a call for tools and monitoring, not for a
// worker's loop. A limit below 1 is an ErrInvalidArgument.
func (q *Queue) List(state State, afterID int64, limit int) ([]TaskInfo, error) {
	if limit < 1 {
		return nil, bindingError("list", ErrInvalidArgument, "a page of %d tasks is empty", limit)
	}
	out := make([]*C.tq_task, limit)
	var infos []TaskInfo
	_, err := q.call("list", func(c *C.tq_queue) C.enum_tq_status {
		var n C.size_t
		status := C.tq_list(c, C.int32_t(state), C.int64_t(afterID), C.size_t(limit), &out[0], &n)
		infos = make([]TaskInfo, n)
		for i, ct := range out[:n] {
			infos[i] = readInfo(ct)
			C.tq_task_free(ct)
		}
		return status
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// Task reads task id of the queue as it is now, with its result and
// progress, and returns false when the queue has no such task (never
// pushed, or ended and not kept: see FinishWithResult).
func (q *Queue) Task(id int64) (TaskInfo, bool, error) {
	var info TaskInfo
	status, err := q.call("task", func(c *C.tq_queue) C.enum_tq_status {
		var ct *C.tq_task
		status := C.tq_get_task(c, C.int64_t(id), &ct)
		if status == C.TQ_OK {
			info = readInfo(ct)
			C.tq_task_free(ct)
		}
		return status
	})
	if err != nil || status == C.TQ_EMPTY {
		return TaskInfo{}, false, err
	}
	return info, true, nil
}

// Wait waits for task id of the queue to end and returns it as it ended:
// Done with its result (TaskInfo.Result), Dead or Cancelled with its
// reason (TaskInfo.LastError). A task that has ended already returns at
// once. The wait only reads; it wakes when the task ends through this
// process or, through another, by a write that wakes the queue's pulls. A
// task it saw not yet ended that then left the store (finished without a
// result on a queue without history, cancelled there, or purged) has ended
// too: it returns as last seen, as Done without a result.
//
// When ctx ends first (give it a deadline to wait for a while), Wait
// returns ctx.Err() itself, at once: a tq_cancel of the call's own, which
// context.AfterFunc triggers, ends the wait in libtq. When the queue is
// closed, it returns an error matching ErrClosed; when Interrupt ends the
// wait, one matching ErrInterrupted. An id that is no task of the queue,
// or one that ended without being kept (on a queue without history,
// finish it with FinishWithResult to wait for it), is an
// ErrInvalidArgument. Other errors match ErrBusy or ErrIO.
func (q *Queue) Wait(ctx context.Context, id int64) (TaskInfo, error) {
	if err := ctx.Err(); err != nil {
		return TaskInfo{}, err
	}
	cancel, release, err := cancelWith(ctx, "wait")
	if err != nil {
		return TaskInfo{}, err
	}
	defer release()
	for {
		slice := maxWait
		if deadline, ok := ctx.Deadline(); ok {
			slice = min(slice, time.Until(deadline))
		}
		var info TaskInfo
		status, err := q.call("wait", func(c *C.tq_queue) C.enum_tq_status {
			var ct *C.tq_task
			status := C.tq_wait_task(c, C.int64_t(id), ceilMillis(max(slice, 0)), cancel, &ct)
			if status == C.TQ_OK {
				info = readInfo(ct)
				C.tq_task_free(ct)
			}
			return status
		})
		switch {
		case errors.Is(err, ErrInterrupted) && q.h.closing.Load():
			return TaskInfo{}, bindingError("wait", ErrClosed, "the queue was closed while waiting")
		case errors.Is(err, ErrInterrupted) && ctx.Err() != nil:
			return TaskInfo{}, ctx.Err()
		case err != nil:
			return TaskInfo{}, err
		case status == C.TQ_OK:
			return info, nil
		case ctx.Err() != nil:
			return TaskInfo{}, ctx.Err()
		}
		// TQ_EMPTY: maxWait passed with the task still running.
	}
}

// CancelTask cancels task id of the queue, keeping reason (cut to 64 KiB;
// an empty one records none) as its last error. A pending, delayed or
// dead task leaves the line at once (kept as Cancelled on a queue opened
// WithHistory, deleted otherwise) and CancelTask returns Cancelled. A
// leased task is never delivered again and its holder learns of it at its
// next Extend, Finish, Fail or Snooze, which return ErrCancelled:
// CancelTask returns Leased. Cancelling a cancelled task again returns the
// same. An id that is no task of the queue, or a done task, is an
// ErrInvalidArgument, and nothing changes.
func (q *Queue) CancelTask(id int64, reason string) (State, error) {
	if strings.IndexByte(reason, 0) >= 0 {
		return 0, bindingError("cancel task", ErrInvalidArgument, "the reason %q has a NUL byte", reason)
	}
	creason := C.CString(reason)
	defer C.free(unsafe.Pointer(creason))
	var state C.int32_t
	_, err := q.call("cancel task", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_cancel_task(c, C.int64_t(id), creason, &state)
	})
	return State(state), err
}

// Pause pauses the queue for every process on its file (or PostgreSQL
// schema) until Resume, or until the time until when it is not zero (it
// must be in the future): pulls find nothing meanwhile (waiting pulls keep
// waiting and take a task once the pause ends); pushes are stored as
// usual. A new pause replaces the one in force.
func (q *Queue) Pause(until time.Time) error {
	ms := C.int64_t(C.TQ_UNTIL_RESUMED)
	if !until.IsZero() {
		ms = C.int64_t(until.UnixMilli())
	}
	_, err := q.call("pause", func(c *C.tq_queue) C.enum_tq_status { return C.tq_pause(c, ms) })
	return err
}

// Resume ends the queue's pause, if any, and wakes its waiting pulls in
// every process.
func (q *Queue) Resume() error {
	_, err := q.call("resume", func(c *C.tq_queue) C.enum_tq_status { return C.tq_resume(c) })
	return err
}

// PausedUntil reports whether the queue is paused and, for a pause with an
// end, when it ends (the zero time for a pause until Resume).
func (q *Queue) PausedUntil() (time.Time, bool, error) {
	var ms C.int64_t
	_, err := q.call("paused until", func(c *C.tq_queue) C.enum_tq_status { return C.tq_paused_until(c, &ms) })
	switch {
	case err != nil || ms == 0:
		return time.Time{}, false, err
	case ms == C.TQ_UNTIL_RESUMED:
		return time.Time{}, true, nil
	}
	return time.UnixMilli(int64(ms)), true, nil
}

// SetConcurrencyLimit limits the queue to limit tasks leased at once (at
// least 1) across every process and machine on its file (or PostgreSQL
// schema), enforced inside each claim so that it holds under any race;
// expired leases and tasks recovered from dead holders hold no slot. A
// limit below 1 is an ErrInvalidArgument: ClearConcurrencyLimit removes
// the limit, Pause stops claims.
func (q *Queue) SetConcurrencyLimit(limit int) error {
	if limit < 1 || int64(limit) > math.MaxUint32 {
		return bindingError("set concurrency limit", ErrInvalidArgument, "the limit %d is not between 1 and %d", limit, uint32(math.MaxUint32))
	}
	_, err := q.call("set concurrency limit", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_set_concurrency_limit(c, C.uint32_t(limit))
	})
	return err
}

// SetRateLimit allows at most claims deliveries of the queue in any window
// of length per (rounded up to whole milliseconds), across every process
// and machine on its file (or PostgreSQL schema), without a coordinator:
// a pull finds nothing while the window's claims are spent, and a waiting
// pull waits for the next free slot. Claims out of 1 to 100,000 or a
// window out of 1 ms to 366 days is an ErrInvalidArgument.
func (q *Queue) SetRateLimit(claims int, per time.Duration) error {
	if claims < 1 || claims > math.MaxUint32 || per < 0 {
		return bindingError("set rate limit", ErrInvalidArgument, "a rate of %d per %v is out of range", claims, per)
	}
	ms := ceilMillis(per)
	_, err := q.call("set rate limit", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_set_rate_limit(c, C.uint32_t(claims), ms)
	})
	return err
}

// ClearRateLimit removes the queue's rate limit, if any.
func (q *Queue) ClearRateLimit() error {
	_, err := q.call("clear rate limit", func(c *C.tq_queue) C.enum_tq_status { return C.tq_clear_rate_limit(c) })
	return err
}

// RateLimit returns the queue's rate limit, and false when it has none.
func (q *Queue) RateLimit() (claims int, per time.Duration, limited bool, err error) {
	var n C.uint32_t
	var ms C.uint64_t
	_, err = q.call("rate limit", func(c *C.tq_queue) C.enum_tq_status { return C.tq_rate_limit(c, &n, &ms) })
	return int(n), time.Duration(ms) * time.Millisecond, err == nil && n > 0, err
}

// ClearConcurrencyLimit removes the queue's concurrency limit, if any.
func (q *Queue) ClearConcurrencyLimit() error {
	_, err := q.call("clear concurrency limit", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_clear_concurrency_limit(c)
	})
	return err
}

// ConcurrencyLimit returns the queue's concurrency limit, and false when
// it has none.
func (q *Queue) ConcurrencyLimit() (int, bool, error) {
	var limit C.uint32_t
	_, err := q.call("concurrency limit", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_concurrency_limit(c, &limit)
	})
	return int(limit), err == nil && limit > 0, err
}

// SetMaxPending caps the queue at max pending tasks, for every process and
// machine on its file (or PostgreSQL schema); 0 removes the cap. Pending
// tasks are those pushed and neither delivered nor ended: ready, delayed,
// waiting for other tasks or a retry; leased tasks do not count. A push
// that would take the count over the cap stores nothing (of a batch, no
// task) and fails with ErrFull, unless WithWaitForRoom lets it wait; a
// push answered ErrDuplicate is never refused. The check is exact, inside
// the push's transaction. Setting a cap removes no task.
func (q *Queue) SetMaxPending(max uint64) error {
	_, err := q.call("set max pending", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_set_max_pending(c, C.uint64_t(max))
	})
	return err
}

// MaxPending returns the queue's cap on pending tasks, and false when it
// has none.
func (q *Queue) MaxPending() (uint64, bool, error) {
	var max C.uint64_t
	_, err := q.call("max pending", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_max_pending(c, &max)
	})
	return uint64(max), err == nil && max > 0, err
}

// SetMaxPendingPerKey caps each fairness key of the queue at max pending
// tasks (counted as SetMaxPending counts them), unless the key has a cap of
// its own (SetKeyMaxPending); 0 removes this default. A push beyond its
// key's cap stores nothing (of a batch, no task) and fails with ErrFull,
// unless WithWaitForRoom lets it wait; other keys are not affected. A cap
// makes the queue fair. SQLite only.
func (q *Queue) SetMaxPendingPerKey(max uint64) error {
	_, err := q.call("set max pending per key", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_set_max_pending_per_key(c, C.uint64_t(max))
	})
	return err
}

// MaxPendingPerKey returns the default cap on each fairness key's pending
// tasks, and false when there is none.
func (q *Queue) MaxPendingPerKey() (uint64, bool, error) {
	var max C.uint64_t
	_, err := q.call("max pending per key", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_max_pending_per_key(c, &max)
	})
	return uint64(max), err == nil && max > 0, err
}

// SetKeyMaxPending caps fairness key key ("": the tasks pushed without
// one) at max pending tasks, in place of the default of
// SetMaxPendingPerKey; 0 removes the key's own cap, so that the default
// applies to it again. SQLite only.
func (q *Queue) SetKeyMaxPending(key string, max uint64) error {
	if strings.IndexByte(key, 0) >= 0 {
		return bindingError("set key max pending", ErrInvalidArgument, "the fairness key %q has a NUL byte", key)
	}
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	_, err := q.call("set key max pending", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_set_key_max_pending(c, ckey, C.uint64_t(max))
	})
	return err
}

// KeyMaxPending returns the cap in force for fairness key key (its own,
// else the queue's default for every key), and false when there is none.
func (q *Queue) KeyMaxPending(key string) (uint64, bool, error) {
	if strings.IndexByte(key, 0) >= 0 {
		return 0, false, bindingError("key max pending", ErrInvalidArgument, "the fairness key %q has a NUL byte", key)
	}
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	var max C.uint64_t
	_, err := q.call("key max pending", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_key_max_pending(c, ckey, &max)
	})
	return uint64(max), err == nil && max > 0, err
}

// SetFairWeight sets the weight of fairness key key of the queue ("":
// the tasks pushed without one), MinFairWeight to MaxFairWeight, default
// 1: among the keys with ready tasks, each gets deliveries in proportion
// to its weight (see WithFairKey). SQLite only.
func (q *Queue) SetFairWeight(key string, weight float64) error {
	if strings.IndexByte(key, 0) >= 0 {
		return bindingError("set fair weight", ErrInvalidArgument, "the fairness key %q has a NUL byte", key)
	}
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	_, err := q.call("set fair weight", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_set_fair_weight(c, ckey, C.double(weight))
	})
	return err
}

// FairWeight returns the weight of fairness key key of the queue: 1
// unless one was set.
func (q *Queue) FairWeight(key string) (float64, error) {
	if strings.IndexByte(key, 0) >= 0 {
		return 0, bindingError("fair weight", ErrInvalidArgument, "the fairness key %q has a NUL byte", key)
	}
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	var weight C.double
	_, err := q.call("fair weight", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_fair_weight(c, ckey, &weight)
	})
	return float64(weight), err
}

// MinFairWeight and MaxFairWeight bound a fairness key's weight.
const (
	MinFairWeight = C.TQ_MIN_FAIR_WEIGHT
	MaxFairWeight = C.TQ_MAX_FAIR_WEIGHT
)

// RetryDead makes the dead task id of the queue pending again, ready now,
// with all its attempts ahead of it. An id that is not a dead task of the
// queue is an ErrInvalidArgument.
func (q *Queue) RetryDead(id int64) error {
	_, err := q.call("retry dead", func(c *C.tq_queue) C.enum_tq_status { return C.tq_retry_dead(c, C.int64_t(id)) })
	return err
}

// ClearStepsAfter deletes the steps of task id of the queue recorded after
// its step name, so that its next delivery runs them again ("retry from
// step name"), and returns how many. RetryDead keeps every step: clear
// first. A task not in the queue, held by a worker, or without a step
// name is an ErrInvalidArgument, and nothing changes.
func (q *Queue) ClearStepsAfter(id int64, name string) (uint64, error) {
	cname, err := cStepName("clear steps", name)
	if err != nil {
		return 0, err
	}
	defer C.free(unsafe.Pointer(cname))
	var n C.uint64_t
	_, err = q.call("clear steps", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_clear_steps_after(c, C.int64_t(id), cname, &n)
	})
	return uint64(n), err
}

// RetryAllDead makes every dead task of the queue pending again, as
// RetryDead does, and returns how many.
func (q *Queue) RetryAllDead() (int64, error) {
	var n C.int64_t
	_, err := q.call("retry dead", func(c *C.tq_queue) C.enum_tq_status { return C.tq_retry_all_dead(c, &n) })
	return int64(n), err
}

// OldestReadyAge returns how long the task of the queue that has been
// ready longest has waited, and false when no task is ready.
func (q *Queue) OldestReadyAge() (time.Duration, bool, error) {
	var ms C.int64_t
	status, err := q.call("oldest ready age", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_oldest_ready_age_ms(c, &ms)
	})
	if err != nil || status == C.TQ_EMPTY {
		return 0, false, err
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

// GroupsWaiting returns how many ordered groups of the queue have tasks
// waiting for their turn behind the group's earlier tasks (WithGroup);
// those tasks count as pending.
func (q *Queue) GroupsWaiting() (int64, error) {
	var n C.int64_t
	_, err := q.call("groups waiting", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_groups_waiting(c, &n)
	})
	return int64(n), err
}

// Checkpoint copies the file's write-ahead log into the database and
// truncates it, waiting up to the busy timeout for readers to move on, and
// returns the log's size afterwards, in bytes. libtq also checkpoints by
// itself when the log grows past 16 MiB; call this at quiet moments. It
// does not make copying the file a backup (a commit during the copy would
// tear it): back up with `tq backup FILE COPY`, which copies consistently
// while the file is in use. An ErrBusy (a reader still used the log) comes
// with the size of what remains.
func (q *Queue) Checkpoint() (int64, error) {
	var n C.int64_t
	_, err := q.call("checkpoint", func(c *C.tq_queue) C.enum_tq_status { return C.tq_checkpoint(c, &n) })
	return int64(n), err
}

// WALSize returns the size of the file's write-ahead log (the -wal file),
// in bytes.
func (q *Queue) WALSize() (int64, error) {
	var n C.int64_t
	_, err := q.call("wal size", func(c *C.tq_queue) C.enum_tq_status { return C.tq_wal_size(c, &n) })
	return int64(n), err
}
