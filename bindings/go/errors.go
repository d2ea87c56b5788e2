package tq

// #include <tq.h>
import "C"

import (
	"errors"
	"fmt"
	"runtime"
)

// The kinds of error. Every error a Queue or Task returns for a failed
// operation is an *Error whose Kind is one of these, so callers test them
// with errors.Is:
//
//	if errors.Is(err, tq.ErrBusy) { /* try again later */ }
var (
	// ErrInvalidArgument: a bad argument or option (an empty path, a
	// payload that is not UTF-8 or is over the queue's limit, an option
	// out of range, an id that is not a dead task). Nothing was done.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidJSON: the payload is not one JSON text. Nothing was stored.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrNotHeld: the delivery is no longer current. Its lease was taken
	// by another worker or by Recover, or it was already finished or
	// failed.
	ErrNotHeld = errors.New("not held")
	// ErrBusy: other writers kept the file locked past the busy timeout.
	// Nothing was done; the call may be tried again.
	ErrBusy = errors.New("busy")
	// ErrIO: the operating system refused (missing directory, permissions,
	// disk full, an I/O error). A write that failed this way may or may
	// not have reached the disk.
	ErrIO = errors.New("I/O error")
	// ErrNotADatabase: the file is not an SQLite database, is corrupt, or
	// has a tq schema newer than the library. It was left untouched.
	ErrNotADatabase = errors.New("not a tq database")
	// ErrInternal: a bug in tq. The queue remains usable.
	ErrInternal = errors.New("internal error")
	// ErrInterrupted: Interrupt ended the wait of a pull. Nothing was
	// claimed.
	ErrInterrupted = errors.New("interrupted")
	// ErrUnknownOutcome: the write may or may not last. On an SQLite file
	// at DurabilityFull, flushing the committed write to the disk failed
	// (later writes of the process to the file then fail with ErrIO until
	// every handle on it is closed); on PostgreSQL, the connection to the
	// server was lost while the write was being committed.
	ErrUnknownOutcome = errors.New("unknown outcome")
	// ErrCancelled: the task was cancelled (Queue.CancelTask) while this
	// delivery held it. The delivery is over, the task is cancelled and
	// is never delivered again: stop working on it.
	ErrCancelled = errors.New("cancelled")
	// ErrFull: the push would take the queue's pending tasks over its cap
	// (Queue.SetMaxPending), and no room came within its WithWaitForRoom.
	// Nothing was stored (of a batch, no task): push again later.
	ErrFull = errors.New("full")
	// ErrClosed: the Queue was closed, or the Task was closed, before the
	// call, or the Queue was closed while a pull waited.
	ErrClosed = errors.New("closed")
)

// Outcomes that are not failures, returned as they are.
var (
	// ErrEmpty is returned by TryPull when no task is ready.
	ErrEmpty = errors.New("tq: no task is ready")
	// ErrDuplicate is returned by Push and PushJSON, with the id of the
	// task that holds the push's unique key, when they stored nothing
	// because of that task (see WithUniqueKey).
	ErrDuplicate = errors.New("tq: a task with this unique key exists")
	// ErrMerged is returned by Push and PushJSON, with the id of the
	// pending task that holds the push's unique key, when that task took
	// the push's payload or run time (see WithReplacePending and
	// WithDebounce) instead of a new task being stored. Only a push with
	// one of those options returns it.
	ErrMerged = errors.New("tq: the pending task with this unique key took the push")
)

// Error is a failed operation: which one, its kind (one of the Err values,
// matched by errors.Is) and the library's message.
type Error struct {
	Op      string // the operation: "open", "push", "pull", "finish", ...
	Kind    error  // ErrInvalidArgument, ErrBusy, ...
	Message string // what went wrong, from libtq or from the binding
}

// Error returns "tq: OP: MESSAGE".
func (e *Error) Error() string {
	return "tq: " + e.Op + ": " + e.Message
}

// Unwrap returns the error's Kind, so that errors.Is(err, tq.ErrBusy) holds
// for a busy error.
func (e *Error) Unwrap() error {
	return e.Kind
}

// kinds maps each error status of the C ABI to its kind.
var kinds = map[C.enum_tq_status]error{
	C.TQ_ERR_INVALID_ARGUMENT: ErrInvalidArgument,
	C.TQ_ERR_INVALID_JSON:     ErrInvalidJSON,
	C.TQ_ERR_NOT_HELD:         ErrNotHeld,
	C.TQ_ERR_BUSY:             ErrBusy,
	C.TQ_ERR_IO:               ErrIO,
	C.TQ_ERR_NOT_A_DATABASE:   ErrNotADatabase,
	C.TQ_ERR_INTERNAL:         ErrInternal,
	C.TQ_ERR_INTERRUPTED:      ErrInterrupted,
	C.TQ_ERR_UNKNOWN_OUTCOME:  ErrUnknownOutcome,
	C.TQ_ERR_CANCELLED:        ErrCancelled,
	C.TQ_ERR_FULL:             ErrFull,
}

// statusError is the error for a negative status and its message. A status
// this binding does not know (impossible with the header it was compiled
// against) counts as internal.
func statusError(op string, status C.enum_tq_status, message string) *Error {
	kind, ok := kinds[status]
	if !ok {
		kind = ErrInternal
		message = fmt.Sprintf("unknown status %d: %s", int(status), message)
	}
	if message == "" {
		message = C.GoString(C.tq_status_str(C.int32_t(status)))
	}
	return &Error{Op: op, Kind: kind, Message: message}
}

// bindingError is an error found by the binding before calling libtq.
func bindingError(op string, kind error, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// testHookBeforeCall, set only by tests, runs just before each fallible C
// call: the GC-stress test collects garbage there, where a wrapper that is
// not kept alive through its call would be found unreachable.
var testHookBeforeCall func()

// lockedCall runs one fallible C call and, when it fails, reads its message
// from tq_last_error on the same OS thread: the message is thread-local, and
// an unlocked goroutine could move to another thread between the two calls.
// Positive statuses (TQ_EMPTY, TQ_DUPLICATE, TQ_MERGED) are returned with a
// nil error.
func lockedCall(op string, call func() C.enum_tq_status) (C.enum_tq_status, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if testHookBeforeCall != nil {
		testHookBeforeCall()
	}
	status := call()
	if status < 0 {
		return status, statusError(op, status, C.GoString(C.tq_last_error()))
	}
	return status, nil
}
