package tq

// #include <stdlib.h>
// #include <tq.h>
import "C"

import (
	"strings"
	"time"
	"unsafe"
)

// Durability says when a write counts as stored. See WithDurability.
type Durability int32

const (
	// DurabilityFull (the default): a call returns once its write is
	// flushed to disk, so it survives a power loss. Writes that arrive
	// together share a flush.
	DurabilityFull Durability = C.TQ_DURABILITY_FULL
	// DurabilityNormal: a write survives a crash of the process; a power
	// loss or OS crash may lose the latest commits, never corrupting the
	// file. Several times faster than DurabilityFull.
	DurabilityNormal Durability = C.TQ_DURABILITY_NORMAL
)

// An Option configures Open.
type Option struct {
	apply func(*optionSetter[*C.tq_options])
}

// A PushOption configures one Push, PushJSON or PushBatch.
type PushOption struct {
	apply func(*optionSetter[*C.tq_push_options])
}

// A PullOption configures one pull: Pull, TryPull, PullBatch or
// FinishAndPull.
type PullOption struct {
	apply func(*optionSetter[*C.tq_pull_options])
}

// applyTo applies the option; the zero Option does nothing.
func (o Option) applyTo(s *optionSetter[*C.tq_options]) {
	if o.apply != nil {
		o.apply(s)
	}
}

// applyTo applies the option; the zero PushOption does nothing.
func (o PushOption) applyTo(s *optionSetter[*C.tq_push_options]) {
	if o.apply != nil {
		o.apply(s)
	}
}

// applyTo applies the option; the zero PullOption does nothing.
func (o PullOption) applyTo(s *optionSetter[*C.tq_pull_options]) {
	if o.apply != nil {
		o.apply(s)
	}
}

// WithDurability sets when a write counts as stored (default
// DurabilityFull). Any other value than the constants is an
// ErrInvalidArgument from Open.
func WithDurability(d Durability) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_durability(o, C.int32_t(d)) })
	}}
}

// WithBusyTimeout sets how long a call waits for other writers on the file
// before it fails with ErrBusy (default 5 s; 0 fails at once; at most one
// year), rounded up to whole milliseconds.
func WithBusyTimeout(d time.Duration) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		ms := s.millis("busy timeout", d)
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_busy_timeout_ms(o, ms) })
	}}
}

// WithHistory keeps the tasks finished through this queue as done, with
// their finish time, instead of deleting them: Count(Done) counts them and
// Purge removes them.
func WithHistory() Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_keep_history(o, true) })
	}}
}

// WithResultRetention sets how long a task finished through this queue
// with FinishWithResult is kept for its result when the queue keeps no
// history (default 7 days; 1 ms to one year, rounded up to whole
// milliseconds): Task and Wait read it meanwhile, and later finishes with
// a result delete the tasks whose time has passed. With WithHistory, a
// result stays with its done task until Purge.
func WithResultRetention(d time.Duration) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		ms := s.millis("result retention", d)
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_result_retention_ms(o, ms) })
	}}
}

// WithMaxPayloadLen sets the largest payload this queue pushes, in bytes,
// from 1 to MaxPayloadLen (the default). A larger Push fails with
// ErrInvalidArgument.
func WithMaxPayloadLen(n int) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		if n < 0 {
			s.fail("the payload limit %d is negative", n)
			return
		}
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_max_payload_len(o, C.size_t(n)) })
	}}
}

// MaxPayloadLen is the largest payload any queue accepts, in bytes
// (1,000,000,000).
const MaxPayloadLen = C.TQ_MAX_PAYLOAD_LEN

// WithQueue chooses the queue the Queue works on (default "default"): one
// file holds any number of independent queues, and pushes, pulls, counts,
// lists, Recover, retries and purges act on this one. A name is 1 to
// MaxQueueNameLen bytes of UTF-8 without NUL.
func WithQueue(name string) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		s.setString("queue name", name, func(o *C.tq_options, name *C.char) C.enum_tq_status {
			return C.tq_options_set_queue(o, name)
		})
	}}
}

// MaxQueueNameLen is the longest queue name, in bytes.
const MaxQueueNameLen = C.TQ_MAX_QUEUE_NAME_LEN

// DefaultMaxAttempts is how many deliveries a task gets unless WithMaxAttempts
// or WithTaskMaxAttempts says otherwise.
const DefaultMaxAttempts = C.TQ_DEFAULT_MAX_ATTEMPTS

// WithMaxAttempts sets how many deliveries each task pushed through the
// Queue gets (at least 1; default DefaultMaxAttempts): the failure of its
// last one, by Fail, a lost lease or a dead holder, makes the task dead.
// WithTaskMaxAttempts overrides it for one push.
func WithMaxAttempts(n int) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		n := s.uint32("maximum attempts", n)
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_max_attempts(o, n) })
	}}
}

// WithRetryBackoff sets the pauses before a failed task is pulled again:
// min after the first failure, doubling with each attempt up to max, with
// random jitter taking up to half off each pause (default 1 s and 1 h).
// min may be 0 (retry at once); max must not be below min; both at most
// one year, rounded up to whole milliseconds.
func WithRetryBackoff(min, max time.Duration) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		minMS, maxMS := s.millis("minimum back-off", min), s.millis("maximum back-off", max)
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_retry_backoff_ms(o, minMS, maxMS) })
	}}
}

// WithPoolSize sets how many connections the Queue keeps to a PostgreSQL
// server at most (1 to MaxPoolSize; default DefaultPoolSize); calls beyond
// that wait for one up to the busy timeout, then fail with ErrBusy. For a
// postgres:// URL only: Open of an SQLite file with it fails with
// ErrInvalidArgument.
func WithPoolSize(n int) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		n := s.uint32("pool size", n)
		s.set(func(o *C.tq_options) C.enum_tq_status { return C.tq_options_set_pool_size(o, n) })
	}}
}

// DefaultPoolSize is how many connections a Queue on PostgreSQL keeps at
// most unless WithPoolSize says otherwise.
const DefaultPoolSize = C.TQ_DEFAULT_POOL_SIZE

// MaxPoolSize is the largest WithPoolSize.
const MaxPoolSize = C.TQ_MAX_POOL_SIZE

// WithPostgresSchema names the PostgreSQL schema that holds tq's tables
// (default "tq"): 1 to 63 ASCII letters, digits and '_', not starting with
// a digit or "pg_". tq creates it when missing. Several schemas keep
// independent sets of queues in one database. For a postgres:// URL only:
// Open of an SQLite file with it fails with ErrInvalidArgument.
func WithPostgresSchema(name string) Option {
	return Option{func(s *optionSetter[*C.tq_options]) {
		s.setString("PostgreSQL schema", name, func(o *C.tq_options, name *C.char) C.enum_tq_status {
			return C.tq_options_set_postgres_schema(o, name)
		})
	}}
}

// WithDelay makes the task ready d after the push (at most one year),
// rounded up to whole milliseconds. It replaces an earlier WithRunAt.
func WithDelay(d time.Duration) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := s.millis("delay", d)
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_delay_ms(o, ms) })
	}}
}

// WithWaitForRoom lets the push wait up to d (at most one year, rounded up
// to whole milliseconds) for room when the queue is at its cap on pending
// tasks (Queue.SetMaxPending), instead of failing with ErrFull at once: it
// tries again when a task of the queue is delivered or ends, and fails
// with ErrFull once d has passed, or ErrInterrupted after Queue.Interrupt.
func WithWaitForRoom(d time.Duration) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := s.millis("wait for room", d)
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_wait_for_room_ms(o, ms) })
	}}
}

// WithRunAt makes the task ready at t (a time in the past means at once;
// before 1970 is an ErrInvalidArgument). It replaces an earlier WithDelay.
func WithRunAt(t time.Time) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := C.int64_t(t.UnixMilli())
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_run_at_unix_ms(o, ms) })
	}}
}

// WithExpireAfter gives the task an expiry d after the push (1 ms to one
// year, rounded up to whole milliseconds): its first delivery never starts
// once it has passed. A pull that meets the task then ends it as dead with
// the last error "expired", and takes the next task. Retries are not bound
// by it. A push whose run time is not before the expiry fails with
// ErrInvalidArgument. It replaces an earlier WithExpireAt.
func WithExpireAfter(d time.Duration) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := s.millis("expiry", d)
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_expire_after_ms(o, ms) })
	}}
}

// WithExpireAt gives the task an expiry at t, as WithExpireAfter does
// after the push. It replaces an earlier WithExpireAfter.
func WithExpireAt(t time.Time) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := C.int64_t(t.UnixMilli())
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_expire_at_unix_ms(o, ms) })
	}}
}

// WithDeadlineAfter gives the task a deadline d after the push (1 ms to
// one year, rounded up to whole milliseconds): no delivery, first or
// retry, starts once it has passed. A pull that meets the task then ends
// it as dead with the last error "deadline passed"; a Fail whose retry
// would fall at or after it ends it so at once. A delivery running when
// it passes runs to its end. It replaces an earlier WithDeadline.
func WithDeadlineAfter(d time.Duration) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := s.millis("deadline", d)
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_deadline_after_ms(o, ms) })
	}}
}

// WithDeadline gives the task a deadline at t, as WithDeadlineAfter does
// after the push. It replaces an earlier WithDeadlineAfter.
func WithDeadline(t time.Time) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := C.int64_t(t.UnixMilli())
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_deadline_unix_ms(o, ms) })
	}}
}

// WithPriority sets the task's priority: a ready task of higher priority
// is pulled before any of lower priority, and equal priorities come out in
// the order they became ready. Any value; default 0.
func WithPriority(priority int32) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		s.set(func(o *C.tq_push_options) C.enum_tq_status {
			return C.tq_push_options_set_priority(o, C.int32_t(priority))
		})
	}}
}

// WithTaskMaxAttempts sets how many deliveries the task gets (at least 1),
// instead of the Queue's WithMaxAttempts.
func WithTaskMaxAttempts(n int) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		n := s.uint32("maximum attempts", n)
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_max_attempts(o, n) })
	}}
}

// WithUniqueKey gives the task a unique key, 1 to MaxUniqueKeyLen bytes of
// UTF-8 without NUL: while a task of the queue with that key is pending or
// leased (or within its WithUniqueFor window once done), Push stores
// nothing and returns that task's id with ErrDuplicate. PushBatch takes no
// unique key.
func WithUniqueKey(key string) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		s.setString("unique key", key, func(o *C.tq_push_options, key *C.char) C.enum_tq_status {
			return C.tq_push_options_set_unique_key(o, key)
		})
	}}
}

// WithReplacePending lets a push under a unique key held by a pending task
// (ready, delayed, waiting for a retry or for other tasks, but not being
// delivered) give that task its payload: Push then returns that task's id
// with ErrMerged. A task being delivered is never changed (Push returns
// ErrDuplicate, its receipt and payload stay valid). It needs
// WithUniqueKey, and a push with WithAfter or WithGroup is refused, as is
// PushBatch. It combines with WithDebounce.
func WithReplacePending() PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_replace_pending(o, true) })
	}}
}

// WithDebounce lets a push under a unique key held by a pending task (as
// for WithReplacePending) move that task's run time to the push's own (now
// plus its WithDelay, or its WithRunAt), but never later than max (1 ms to
// one year, rounded up to whole milliseconds) after that task was first
// pushed: Push then returns that task's id with ErrMerged. A burst of
// pushes runs the task once, a delay after the last one; a steady stream
// still runs it within max of the first. The holder keeps its payload
// unless WithReplacePending is given too.
func WithDebounce(max time.Duration) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		if max == 0 {
			s.fail("the longest debounce must be positive")
			return
		}
		ms := s.millis("longest debounce", max)
		s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_debounce_ms(o, ms) })
	}}
}

// ParentFailure says what a task does when a task it waits for ends dead
// or cancelled. See WithOnParentFailure.
type ParentFailure int32

const (
	// ParentFailureCancel (the default): the waiting task is cancelled,
	// with a reason naming that task, and so in turn are the tasks
	// waiting for it.
	ParentFailureCancel ParentFailure = C.TQ_PARENT_FAILURE_CANCEL
	// ParentFailureRunAnyway: the end counts as finished.
	ParentFailureRunAnyway ParentFailure = C.TQ_PARENT_FAILURE_RUN_ANYWAY
)

// MaxParents is the most tasks one task may wait for.
const MaxParents = C.TQ_MAX_PARENTS

// WithAfter makes the task wait for the stored tasks ids: it is stored
// blocked (counted and listed as Pending, never pulled) until each is
// done. Each must be a task of the same queue that is stored at the push:
// not yet finished, or kept as history; otherwise the push fails with
// ErrInvalidArgument and stores nothing.
func WithAfter(ids ...int64) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		for _, id := range ids {
			s.set(func(o *C.tq_push_options) C.enum_tq_status {
				return C.tq_push_options_add_after(o, C.int64_t(id))
			})
		}
	}}
}

// WithAfterItem makes an item of PushItems wait for the earlier item at
// index of the same call, as WithAfter does for a stored task, so that a
// graph of tasks is stored in one call, all or none. Any other push with
// it fails with ErrInvalidArgument.
func WithAfterItem(index int) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		if index < 0 {
			s.fail("the item index %d is negative", index)
			return
		}
		s.set(func(o *C.tq_push_options) C.enum_tq_status {
			return C.tq_push_options_add_after_item(o, C.size_t(index))
		})
	}}
}

// WithOnParentFailure sets what the task does when a task it waits for
// ends dead or cancelled (default ParentFailureCancel). Any other value
// than the constants is an ErrInvalidArgument from the push.
func WithOnParentFailure(policy ParentFailure) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		s.set(func(o *C.tq_push_options) C.enum_tq_status {
			return C.tq_push_options_set_on_parent_failure(o, C.int32_t(policy))
		})
	}}
}

// MaxGroupAtOnce is the most tasks of one ordered group delivered at
// once (see WithGroup).
const MaxGroupAtOnce = C.TQ_MAX_GROUP_AT_ONCE

// WithGroup puts the task in the ordered group key of its queue (1 to
// MaxUniqueKeyLen bytes, no NUL), whose tasks are delivered at most
// maxAtOnce at a time (1 to MaxGroupAtOnce), in push order for 1, while
// other groups proceed in parallel. The task waits, as one pushed
// WithAfter and ParentFailureRunAnyway would, for the maxAtOnce-th most
// recent unfinished task of the group, if any: listed by WaitingFor while
// it is blocked, not by Parents. Tasks of one group in one PushBatch or
// PushItems wait for each other likewise, in order. A task of the group
// cancelled while it still waits hands its place on: the tasks of the
// group waiting for it wait for the task it waited for.
func WithGroup(key string, maxAtOnce int) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		limit := s.uint32("group's tasks at once", maxAtOnce)
		s.setString("group key", key, func(o *C.tq_push_options, key *C.char) C.enum_tq_status {
			return C.tq_push_options_set_group(o, key, limit)
		})
	}}
}

// WithFairKey files the task under fairness key key (1 to MaxUniqueKeyLen
// bytes, no NUL), a tenant say. Once a queue has a fairness key, its
// pulls share their deliveries between the keys with ready tasks in
// proportion to their weights (Queue.SetFairWeight, default 1); tasks
// pushed without one share the key "". SQLite only: on PostgreSQL the
// push fails with ErrInvalidArgument and stores nothing.
func WithFairKey(key string) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		s.setString("fairness key", key, func(o *C.tq_push_options, key *C.char) C.enum_tq_status {
			return C.tq_push_options_set_fair_key(o, key)
		})
	}}
}

// MaxUniqueKeyLen is the longest unique key, in bytes.
const MaxUniqueKeyLen = C.TQ_MAX_UNIQUE_KEY_LEN

// WithUniqueFor keeps the task's unique key reserved for d after the task
// is done (at most one year, rounded up to whole milliseconds; default 0:
// the key is free once the task is done). It needs WithUniqueKey, given
// before or after it.
func WithUniqueFor(d time.Duration) PushOption {
	return PushOption{func(s *optionSetter[*C.tq_push_options]) {
		ms := s.millis("unique window", d)
		// libtq takes the window once the key is set.
		s.last = append(s.last, func() {
			s.set(func(o *C.tq_push_options) C.enum_tq_status { return C.tq_push_options_set_unique_for_ms(o, ms) })
		})
	}}
}

// WithLease sets how long the pulled task is held (default 30 s; 1 ms to
// one year), rounded up to whole milliseconds: past it, the task is ready
// again for other workers and this delivery can no longer be finished once
// one of them has taken it.
func WithLease(d time.Duration) PullOption {
	return PullOption{func(s *optionSetter[*C.tq_pull_options]) {
		ms := s.millis("lease", d)
		s.set(func(o *C.tq_pull_options) C.enum_tq_status { return C.tq_pull_options_set_lease_ms(o, ms) })
	}}
}

// optionSetter applies options to one C options object of pointer type P,
// remembering the first error.
type optionSetter[P comparable] struct {
	op   string
	obj  P
	err  error
	last []func() // applied after every option
}

// set calls one setter of the C object unless an earlier option failed.
func (s *optionSetter[P]) set(setter func(P) C.enum_tq_status) {
	if s.err == nil {
		_, s.err = lockedCall(s.op, func() C.enum_tq_status { return setter(s.obj) })
	}
}

// setString calls a setter that takes a C string, refusing a Go string
// with a NUL byte, which C would read as its end.
func (s *optionSetter[P]) setString(what, value string, setter func(P, *C.char) C.enum_tq_status) {
	if strings.IndexByte(value, 0) >= 0 {
		s.fail("the %s %q has a NUL byte", what, value)
		return
	}
	cvalue := C.CString(value)
	defer C.free(unsafe.Pointer(cvalue))
	s.set(func(o P) C.enum_tq_status { return setter(o, cvalue) })
}

// fail records an option the binding refuses before libtq sees it.
func (s *optionSetter[P]) fail(format string, args ...any) {
	if s.err == nil {
		s.err = bindingError(s.op, ErrInvalidArgument, format, args...)
	}
}

// millis converts d to whole milliseconds with ceilMillis; a negative d is
// refused.
func (s *optionSetter[P]) millis(what string, d time.Duration) C.uint64_t {
	if d < 0 {
		s.fail("the %s %v is negative", what, d)
		return 0
	}
	return ceilMillis(d)
}

// uint32 converts a count for libtq, refusing one out of its range (0 is
// left for libtq to refuse).
func (s *optionSetter[P]) uint32(what string, n int) C.uint32_t {
	if n < 0 || uint64(n) > 1<<32-1 {
		s.fail("the %s %d is out of range", what, n)
		return 0
	}
	return C.uint32_t(n)
}

// ceilMillis converts a duration that is not negative to whole
// milliseconds, rounding up so that any positive duration stays positive.
func ceilMillis(d time.Duration) C.uint64_t {
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return C.uint64_t(ms)
}

// cOptions is a C options object (of pointer type P) with its free
// function; the zero value stands for the defaults (NULL).
type cOptions[P comparable] struct {
	obj  P
	free func(P)
}

// newOptions creates the C options object for opts with create, applies
// them, and returns it; with no options it returns the zero cOptions,
// whose NULL object libtq reads as the defaults. The caller frees it with
// release.
func newOptions[P comparable, O interface{ applyTo(*optionSetter[P]) }](op string, opts []O,
	create func() P, free func(P)) (cOptions[P], error) {
	if len(opts) == 0 {
		return cOptions[P]{}, nil
	}
	var obj, null P
	_, err := lockedCall(op, func() C.enum_tq_status {
		if obj = create(); obj == null {
			return C.TQ_ERR_INTERNAL
		}
		return C.TQ_OK
	})
	if err != nil {
		return cOptions[P]{}, err
	}
	setter := optionSetter[P]{op: op, obj: obj}
	for _, opt := range opts {
		opt.applyTo(&setter)
	}
	for _, fn := range setter.last {
		fn()
	}
	if setter.err != nil {
		free(obj)
		return cOptions[P]{}, setter.err
	}
	return cOptions[P]{obj: obj, free: free}, nil
}

// release frees the C object, if any.
func (o cOptions[P]) release() {
	if o.free != nil {
		o.free(o.obj)
	}
}
