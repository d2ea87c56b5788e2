package tq

/*
#include <stdlib.h>
#include <tq.h>
*/
import "C"

import (
	"strings"
	"time"
	"unsafe"
)

// CatchUp says what the slots of a schedule that came due while nothing
// drove it (the program was down, no pull came) become when something
// next does.
type CatchUp int32

const (
	// CatchUpSkip runs the latest due slot if it came due at most a
	// minute ago, and skips the others.
	CatchUpSkip CatchUp = C.TQ_CATCH_UP_SKIP
	// CatchUpOne runs the latest due slot, however late: one run for all
	// the slots missed. The default.
	CatchUpOne CatchUp = C.TQ_CATCH_UP_ONE
	// CatchUpEach runs every due slot, the latest N of them (WithCatchUp's
	// limit), in slot order.
	CatchUpEach CatchUp = C.TQ_CATCH_UP_EACH
)

// A ScheduleOption describes a schedule for AddSchedule and
// ReplaceSchedule. Exactly one of Cron and Every is required.
type ScheduleOption struct {
	apply func(*optionSetter[*C.tq_schedule_options])
}

// applyTo applies the option; the zero ScheduleOption does nothing.
func (o ScheduleOption) applyTo(s *optionSetter[*C.tq_schedule_options]) {
	if o.apply != nil {
		o.apply(s)
	}
}

// Cron gives the schedule the slots of a cron expression: five fields
// (minute, hour, day of month, month, day of week) or six (seconds
// first), or an alias such as "@daily", read in the schedule's time zone
// (WithTimeZone). One that does not parse is an ErrInvalidArgument naming
// it.
func Cron(expression string) ScheduleOption {
	return ScheduleOption{func(s *optionSetter[*C.tq_schedule_options]) {
		s.setString("cron expression", expression, func(o *C.tq_schedule_options, e *C.char) C.enum_tq_status {
			return C.tq_schedule_options_set_cron(o, e)
		})
	}}
}

// Every gives the schedule a slot every d (1 ms to 366 days, rounded up to
// whole milliseconds), the first one d after it is added.
func Every(d time.Duration) ScheduleOption {
	return ScheduleOption{func(s *optionSetter[*C.tq_schedule_options]) {
		ms := s.millis("interval", d)
		s.set(func(o *C.tq_schedule_options) C.enum_tq_status { return C.tq_schedule_options_set_every_ms(o, ms) })
	}}
}

// WithTimeZone reads the cron expression in the IANA time zone name (such
// as "Europe/Paris"; default "UTC"). An unknown zone is an
// ErrInvalidArgument naming it; an interval takes no zone but UTC.
func WithTimeZone(name string) ScheduleOption {
	return ScheduleOption{func(s *optionSetter[*C.tq_schedule_options]) {
		s.setString("time zone", name, func(o *C.tq_schedule_options, n *C.char) C.enum_tq_status {
			return C.tq_schedule_options_set_time_zone(o, n)
		})
	}}
}

// WithSchedulePriority sets the priority of the schedule's tasks (default 0).
func WithSchedulePriority(priority int32) ScheduleOption {
	return ScheduleOption{func(s *optionSetter[*C.tq_schedule_options]) {
		s.set(func(o *C.tq_schedule_options) C.enum_tq_status {
			return C.tq_schedule_options_set_priority(o, C.int32_t(priority))
		})
	}}
}

// WithScheduleMaxAttempts sets how many deliveries each of the schedule's
// tasks gets (at least 1), instead of the Queue's WithMaxAttempts.
func WithScheduleMaxAttempts(n int) ScheduleOption {
	return ScheduleOption{func(s *optionSetter[*C.tq_schedule_options]) {
		n := s.uint32("maximum attempts", n)
		s.set(func(o *C.tq_schedule_options) C.enum_tq_status {
			return C.tq_schedule_options_set_max_attempts(o, n)
		})
	}}
}

// WithCatchUp sets the schedule's catch-up policy (default CatchUpOne);
// limit, 1 to 10,000, bounds CatchUpEach and is ignored by the others.
func WithCatchUp(policy CatchUp, limit int) ScheduleOption {
	return ScheduleOption{func(s *optionSetter[*C.tq_schedule_options]) {
		limit := s.uint32("catch-up limit", limit)
		s.set(func(o *C.tq_schedule_options) C.enum_tq_status {
			return C.tq_schedule_options_set_catch_up(o, C.int32_t(policy), limit)
		})
	}}
}

// A Schedule is a schedule of the queue as Schedules lists it.
type Schedule struct {
	Name string
	// Cron is the cron expression, empty for an interval.
	Cron string
	// Every is the interval, 0 for a cron expression.
	Every        time.Duration
	TimeZone     string
	Payload      []byte
	Priority     int32
	MaxAttempts  int
	CatchUp      CatchUp
	CatchUpLimit int
	Paused       bool
	// NextSlot is its next slot not yet enqueued (on PostgreSQL, on the
	// server's clock).
	NextSlot time.Time
}

// AddSchedule adds to the queue the schedule name, which enqueues a task
// of payload (one JSON text) at every slot of its Cron or Every option,
// the first slot after now. Each slot is enqueued exactly once however
// many processes drive the queue's schedules, as a task with the unique
// key "schedule:<name>:<slot ms>" due at the slot: pulls drive due
// schedules by themselves (a waiting Pull wakes at the next slot), and so
// does RunDueSchedules.
//
// Errors match ErrInvalidArgument (a name the queue has, no spec, a bad
// cron expression or time zone), ErrInvalidJSON, ErrBusy, ErrIO or
// ErrClosed; on any of them nothing is stored.
func (q *Queue) AddSchedule(name string, payload []byte, opts ...ScheduleOption) error {
	return q.putSchedule("add schedule", name, payload, opts, putAdd)
}

// ReplaceSchedule is AddSchedule that overwrites a schedule of the same
// name: its next slot is computed afresh and it is no longer paused. A
// slot enqueued before is not enqueued again.
func (q *Queue) ReplaceSchedule(name string, payload []byte, opts ...ScheduleOption) error {
	return q.putSchedule("replace schedule", name, payload, opts, putReplace)
}

// UpsertSchedule declares a schedule, as an application does at every
// start: AddSchedule, or an update of the schedule of the same name that
// keeps its next slot while its timing (Cron or Every, time zone,
// catch-up) is unchanged, so that a restart neither delays an interval's
// slot nor skips a due slot. A changed timing's next slot is computed
// afresh; a paused schedule stays paused.
func (q *Queue) UpsertSchedule(name string, payload []byte, opts ...ScheduleOption) error {
	return q.putSchedule("upsert schedule", name, payload, opts, putUpsert)
}

// What storing a schedule does to one of the same name.
type putMode int

const (
	putAdd     putMode = iota // fail
	putReplace                // overwrite, next slot afresh
	putUpsert                 // update, next slot kept
)

func (q *Queue) putSchedule(op, name string, payload []byte, opts []ScheduleOption, mode putMode) error {
	if len(opts) == 0 {
		return bindingError(op, ErrInvalidArgument, "schedule %q needs Cron or Every", name)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return bindingError(op, ErrInvalidArgument, "the schedule name %q has a NUL byte", name)
	}
	options, err := newOptions(op, opts,
		func() *C.tq_schedule_options { return C.tq_schedule_options_new() },
		func(o *C.tq_schedule_options) { C.tq_schedule_options_free(o) })
	if err != nil {
		return err
	}
	defer options.release()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	data := &noBytes[0]
	if len(payload) > 0 {
		data = &payload[0]
	}
	_, err = q.call(op, func(c *C.tq_queue) C.enum_tq_status {
		text, length := (*C.char)(unsafe.Pointer(data)), C.size_t(len(payload))
		switch mode {
		case putReplace:
			return C.tq_schedule_replace(c, cname, text, length, options.obj)
		case putUpsert:
			return C.tq_schedule_upsert(c, cname, text, length, options.obj)
		}
		return C.tq_schedule_add(c, cname, text, length, options.obj)
	})
	return err
}

// Schedules returns the queue's schedules, by name.
func (q *Queue) Schedules() ([]Schedule, error) {
	const page = 100
	out := make([]*C.tq_schedule, page)
	var schedules []Schedule
	var after *C.char
	defer func() { C.free(unsafe.Pointer(after)) }()
	for {
		var n C.size_t
		_, err := q.call("schedules", func(c *C.tq_queue) C.enum_tq_status {
			status := C.tq_schedules(c, after, page, &out[0], &n)
			for _, cs := range out[:n] {
				schedules = append(schedules, readSchedule(cs))
				C.tq_schedule_free(cs)
			}
			return status
		})
		if err != nil {
			return nil, err
		}
		if n < page {
			return schedules, nil
		}
		C.free(unsafe.Pointer(after))
		after = C.CString(schedules[len(schedules)-1].Name)
	}
}

// readSchedule copies a listed schedule out of libtq's object.
func readSchedule(c *C.tq_schedule) Schedule {
	var length C.size_t
	payload := C.tq_schedule_payload(c, &length)
	var limit C.uint32_t
	policy := C.tq_schedule_catch_up(c, &limit)
	schedule := Schedule{
		Name:         C.GoString(C.tq_schedule_name(c)),
		Every:        time.Duration(C.tq_schedule_every_ms(c)) * time.Millisecond,
		TimeZone:     C.GoString(C.tq_schedule_time_zone(c)),
		Payload:      C.GoBytes(unsafe.Pointer(payload), C.int(length)),
		Priority:     int32(C.tq_schedule_priority(c)),
		MaxAttempts:  int(C.tq_schedule_max_attempts(c)),
		CatchUp:      CatchUp(policy),
		CatchUpLimit: int(limit),
		Paused:       bool(C.tq_schedule_paused(c)),
		NextSlot:     time.UnixMilli(int64(C.tq_schedule_next_slot_unix_ms(c))),
	}
	if cron := C.tq_schedule_cron(c); cron != nil {
		schedule.Cron = C.GoString(cron)
	}
	return schedule
}

// byName runs call, a schedule function taking the schedule's name.
func (q *Queue) byName(op, name string, call func(*C.tq_queue, *C.char) C.enum_tq_status) error {
	if strings.IndexByte(name, 0) >= 0 {
		return bindingError(op, ErrInvalidArgument, "the schedule name %q has a NUL byte", name)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	_, err := q.call(op, func(c *C.tq_queue) C.enum_tq_status { return call(c, cname) })
	return err
}

// RemoveSchedule deletes the schedule name of the queue; the tasks it
// enqueued stay. No such schedule is an ErrInvalidArgument.
func (q *Queue) RemoveSchedule(name string) error {
	return q.byName("remove schedule", name, func(c *C.tq_queue, n *C.char) C.enum_tq_status {
		return C.tq_schedule_remove(c, n)
	})
}

// PauseSchedule pauses the schedule name: its slots are skipped until
// ResumeSchedule. No such schedule is an ErrInvalidArgument.
func (q *Queue) PauseSchedule(name string) error {
	return q.byName("pause schedule", name, func(c *C.tq_queue, n *C.char) C.enum_tq_status {
		return C.tq_schedule_pause(c, n)
	})
}

// ResumeSchedule resumes the schedule name from its first slot from now
// on: the slots that fell while it was paused are skipped.
func (q *Queue) ResumeSchedule(name string) error {
	return q.byName("resume schedule", name, func(c *C.tq_queue, n *C.char) C.enum_tq_status {
		return C.tq_schedule_resume(c, n)
	})
}

// RunDueSchedules enqueues the task of every due slot of the queue's
// schedules and returns how many it stored. Any number of processes may
// call it at once: each slot is enqueued once. Pulls do this by
// themselves; call it where nothing pulls.
func (q *Queue) RunDueSchedules() (int64, error) {
	var n C.int64_t
	_, err := q.call("run due schedules", func(c *C.tq_queue) C.enum_tq_status {
		return C.tq_run_due_schedules(c, &n)
	})
	return int64(n), err
}
