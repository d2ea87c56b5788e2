package tq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// retryAtOnce is a queue whose failed tasks come back at once.
func retryAtOnce(t *testing.T, opts ...tq.Option) (*tq.Queue, string) {
	return openQueue(t, append([]tq.Option{tq.WithDurability(tq.DurabilityNormal), tq.WithRetryBackoff(0, 0)}, opts...)...)
}

func list(t *testing.T, q *tq.Queue, state tq.State) []tq.TaskInfo {
	t.Helper()
	infos, err := q.List(state, 0, 100)
	if err != nil {
		t.Fatalf("List(%v): %v", state, err)
	}
	return infos
}

func TestFailRetriesThenDead(t *testing.T) {
	q, _ := retryAtOnce(t, tq.WithMaxAttempts(2))
	id := push(t, q, `{"n": 1}`)
	task := tryPull(t, q)
	if task.MaxAttempts() != 2 {
		t.Fatalf("MaxAttempts() = %d, want the queue's 2", task.MaxAttempts())
	}
	if reason, ok := task.LastError(); ok || reason != "" {
		t.Fatalf("first delivery: LastError() = %q, %v", reason, ok)
	}
	if err := task.Fail("upstream timed out"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, task.Fail("again"), tq.ErrNotHeld, "was already failed")
	wantErr(t, task.Finish(), tq.ErrNotHeld, "was already failed")

	again := tryPull(t, q)
	if reason, ok := again.LastError(); again.ID() != id || again.Attempts() != 2 || !ok || reason != "upstream timed out" {
		t.Fatalf("retry: task %d attempt %d last error %q, %v", again.ID(), again.Attempts(), reason, ok)
	}
	if err := again.Fail("still down"); err != nil { // the last attempt: dead
		t.Fatal(err)
	}
	if _, err := q.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("a dead task was delivered: %v", err)
	}
	if n := count(t, q, tq.Dead); n != 1 {
		t.Fatalf("dead = %d, want 1", n)
	}
	dead := list(t, q, tq.Dead)
	if len(dead) != 1 {
		t.Fatalf("listed %d dead tasks", len(dead))
	}
	if reason, _ := dead[0].LastError(); dead[0].ID() != id || dead[0].State() != tq.Dead ||
		dead[0].Attempts() != 2 || reason != "still down" || string(dead[0].Payload()) != `{"n": 1}` {
		t.Fatalf("dead task listed as %+v", dead[0])
	}

	// Back to pending with all its attempts ahead of it.
	if err := q.RetryDead(id); err != nil {
		t.Fatal(err)
	}
	wantErr(t, q.RetryDead(id), tq.ErrInvalidArgument, "tq: retry dead: ")
	wantErr(t, q.RetryDead(12345), tq.ErrInvalidArgument, "12345")
	task = tryPull(t, q)
	if task.ID() != id || task.Attempts() != 1 {
		t.Fatalf("retried: task %d attempt %d, want %d attempt 1", task.ID(), task.Attempts(), id)
	}
	if err := task.Fail(""); err != nil {
		t.Fatal(err)
	}
	task = tryPull(t, q)
	if reason, ok := task.LastError(); ok || reason != "" {
		t.Fatalf("after Fail(\"\"): LastError() = %q, %v; want none", reason, ok)
	}
	if err := task.Fail(strings.Repeat("é", 40_000)); err != nil { // 80,000 bytes, kept cut
		t.Fatal(err)
	}
	dead = list(t, q, tq.Dead)
	if reason, _ := dead[0].LastError(); len(reason) != 64*1024 {
		t.Fatalf("a long reason was kept as %d bytes, want 64 KiB", len(reason))
	}
}

func TestRetryAllDeadAndPurgeDead(t *testing.T) {
	q, _ := retryAtOnce(t)
	for i := range 3 {
		push(t, q, fmt.Sprint(i), tq.WithTaskMaxAttempts(1))
	}
	for range 3 {
		task := tryPull(t, q)
		if task.MaxAttempts() != 1 {
			t.Fatalf("MaxAttempts() = %d, want the push's 1", task.MaxAttempts())
		}
		if err := task.Fail("no"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := q.RetryAllDead(); err != nil || n != 3 {
		t.Fatalf("RetryAllDead() = %d, %v; want 3", n, err)
	}
	if n, err := q.RetryAllDead(); err != nil || n != 0 {
		t.Fatalf("second RetryAllDead() = %d, %v; want 0", n, err)
	}
	for range 3 {
		if err := tryPull(t, q).Fail("no"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := q.Purge(tq.Dead, time.Hour); err != nil || n != 0 {
		t.Fatalf("Purge(Dead, 1h) = %d, %v; want none that recent", n, err)
	}
	if n, err := q.Purge(tq.Dead, 0); err != nil || n != 3 {
		t.Fatalf("Purge(Dead, 0) = %d, %v; want 3", n, err)
	}
	if n := count(t, q, tq.Dead); n != 0 {
		t.Fatalf("dead = %d after Purge", n)
	}
}

func TestRetryBackoff(t *testing.T) {
	q, _ := openQueue(t, tq.WithRetryBackoff(time.Hour, 2*time.Hour))
	id := push(t, q, `1`)
	if err := tryPull(t, q).Fail("later"); err != nil {
		t.Fatal(err)
	}
	failed := time.Now()
	if _, err := q.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("a failed task came back before its back-off: %v", err)
	}
	pending := list(t, q, tq.Pending)
	// The first pause is the minimum, an hour, less up to half of jitter.
	if len(pending) != 1 || pending[0].ID() != id {
		t.Fatalf("pending: %+v", pending)
	}
	if wait := pending[0].RunAt().Sub(failed); wait < 29*time.Minute || wait > 61*time.Minute {
		t.Fatalf("retried after %v, want between 30 min and 1 h", wait)
	}
	if _, ok, err := q.OldestReadyAge(); err != nil || ok {
		t.Fatalf("OldestReadyAge() with no ready task: %v, %v", ok, err)
	}
}

func TestFailAndExtendErrors(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	push(t, q, `1`)
	task := tryPull(t, q)
	wantErr(t, task.Fail("a\x00b"), tq.ErrInvalidArgument, "NUL")
	wantErr(t, task.Fail("\xff"), tq.ErrInvalidArgument, "tq: fail: ")
	wantErr(t, task.Extend(0), tq.ErrInvalidArgument, "tq: extend: ")
	wantErr(t, task.Extend(-time.Second), tq.ErrInvalidArgument, "lease -1s is negative")
	wantErr(t, task.Extend(400*24*time.Hour), tq.ErrInvalidArgument, "tq: extend: ")
	// None of them ended the delivery.
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, task.Extend(time.Second), tq.ErrNotHeld, "was already finished")

	push(t, q, `2`)
	closed := tryPull(t, q)
	closed.Close()
	wantErr(t, closed.Fail("x"), tq.ErrClosed, "was closed")
	wantErr(t, closed.Extend(time.Second), tq.ErrClosed, "was closed")
	var zero tq.Task
	wantErr(t, zero.Fail("x"), tq.ErrClosed, "not pulled")
	wantErr(t, zero.Extend(time.Second), tq.ErrClosed, "not pulled")
}

// A lost lease: Fail and Extend report it and change nothing.
func TestLostLease(t *testing.T) {
	for _, op := range []string{"fail", "extend"} {
		t.Run(op, func(t *testing.T) {
			q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
			push(t, q, `1`)
			lost := tryPull(t, q, tq.WithLease(time.Millisecond))
			time.Sleep(5 * time.Millisecond)
			current := tryPull(t, q)
			var err error
			if op == "fail" {
				err = lost.Fail("late")
			} else {
				err = lost.Extend(time.Hour)
			}
			wantErr(t, err, tq.ErrNotHeld, "tq: "+op+": ")
			wantErr(t, lost.Finish(), tq.ErrNotHeld, "no longer held")
			if err := current.Finish(); err != nil {
				t.Fatalf("the current holder's Finish: %v", err)
			}
		})
	}
}

func TestExtendKeepsTheLease(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	other, err := tq.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	push(t, q, `1`)
	task := tryPull(t, q, tq.WithLease(50*time.Millisecond))
	if err := task.Extend(time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := other.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("an extended lease ran out: %v", err)
	}
	if err := task.Extend(time.Microsecond); err != nil { // rounds up to 1 ms
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if taken, err := other.TryPull(); err != nil || taken.ID() != task.ID() {
		t.Fatalf("a shortened lease was not taken: %v", err)
	}
	wantErr(t, task.Finish(), tq.ErrNotHeld, "tq: finish: ")
}

func TestPriorities(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	low := push(t, q, `"low"`, tq.WithPriority(-5))
	mid1 := push(t, q, `"mid 1"`)
	high := push(t, q, `"high"`, tq.WithPriority(10))
	mid2 := push(t, q, `"mid 2"`, tq.WithPriority(0))
	for _, want := range []struct {
		id       int64
		priority int32
	}{{high, 10}, {mid1, 0}, {mid2, 0}, {low, -5}} {
		task := tryPull(t, q)
		if task.ID() != want.id || task.Priority() != want.priority {
			t.Fatalf("pulled task %d of priority %d, want %d of priority %d",
				task.ID(), task.Priority(), want.id, want.priority)
		}
		if err := task.Finish(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNamedQueues(t *testing.T) {
	emails, path := openQueue(t, tq.WithQueue("emails"))
	reports, err := tq.Open(path, tq.WithQueue("reports"))
	if err != nil {
		t.Fatal(err)
	}
	defer reports.Close()
	deflt, err := tq.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer deflt.Close()
	push(t, emails, `"to ann"`)
	push(t, emails, `"to bob"`)
	push(t, reports, `"daily"`)
	for q, want := range map[*tq.Queue]int64{emails: 2, reports: 1, deflt: 0} {
		if n := count(t, q, tq.Pending); n != want {
			t.Fatalf("pending = %d, want %d", n, want)
		}
	}
	if _, err := deflt.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("the default queue pulled another queue's task: %v", err)
	}
	task := tryPull(t, reports)
	if string(task.Payload()) != `"daily"` {
		t.Fatalf("reports pulled %s", task.Payload())
	}
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}

	for name, text := range map[string]string{
		"":                       "tq: open: ",
		strings.Repeat("q", 129): "tq: open: ",
		"a\x00b":                 "NUL",
		"\xff":                   "tq: open: ",
	} {
		_, err := tq.Open(path, tq.WithQueue(name))
		wantErr(t, err, tq.ErrInvalidArgument, text)
	}
	if q, err := tq.Open(path, tq.WithQueue(strings.Repeat("q", tq.MaxQueueNameLen))); err != nil {
		t.Fatalf("a name of %d bytes: %v", tq.MaxQueueNameLen, err)
	} else {
		q.Close()
	}
}

func TestOpenOptionErrors(t *testing.T) {
	path := t.TempDir() + "/q.db"
	for _, c := range []struct {
		opt  tq.Option
		text string
	}{
		{tq.WithMaxAttempts(0), "tq: open: "},
		{tq.WithMaxAttempts(-1), "maximum attempts -1 is out of range"},
		{tq.WithMaxAttempts(1 << 32), "out of range"},
		{tq.WithRetryBackoff(2*time.Second, time.Second), "tq: open: "},
		{tq.WithRetryBackoff(-time.Second, time.Second), "minimum back-off -1s is negative"},
		{tq.WithRetryBackoff(0, 400*24*time.Hour), "tq: open: "},
	} {
		_, err := tq.Open(path, c.opt)
		wantErr(t, err, tq.ErrInvalidArgument, c.text)
	}
}

func TestUniqueKeys(t *testing.T) {
	q, _ := retryAtOnce(t, tq.WithMaxAttempts(1))
	key := tq.WithUniqueKey("report:42")
	id := push(t, q, `1`, key)
	for _, state := range []string{"pending", "leased"} {
		dup, err := q.Push([]byte(`2`), key)
		if err != tq.ErrDuplicate || dup != id {
			t.Fatalf("push while %s: %d, %v; want %d, ErrDuplicate", state, dup, err, id)
		}
		if state == "pending" {
			tryPull(t, q)
		}
	}
	if dup, err := q.PushJSON(3, key); !errors.Is(err, tq.ErrDuplicate) || dup != id {
		t.Fatalf("PushJSON: %d, %v", dup, err)
	}
	if n := count(t, q, tq.Pending) + count(t, q, tq.Leased); n != 1 {
		t.Fatalf("%d tasks stored, want 1", n)
	}
}

func TestDebounceAndReplace(t *testing.T) {
	q, _ := retryAtOnce(t, tq.WithMaxAttempts(2))
	key := tq.WithUniqueKey("doc:7")
	merging := []tq.PushOption{key, tq.WithReplacePending(), tq.WithDelay(time.Hour), tq.WithDebounce(2 * time.Hour)}
	id := push(t, q, `1`, key)
	for _, payload := range []string{`2`, `3`} {
		merged, err := q.Push([]byte(payload), merging...)
		if err != tq.ErrMerged || merged != id {
			t.Fatalf("push %s: %d, %v; want %d, ErrMerged", payload, merged, err, id)
		}
	}
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatalf("%d tasks pending, want 1", n)
	}
	if _, err := q.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("debounced an hour away, yet pulled: %v", err)
	}
	// A debounce to now makes it ready, with the newest payload.
	if merged, err := q.Push([]byte(`4`), key, tq.WithReplacePending(), tq.WithDebounce(time.Millisecond)); err != tq.ErrMerged || merged != id {
		t.Fatalf("push 4: %d, %v", merged, err)
	}
	task := tryPull(t, q)
	if task.ID() != id || string(task.Payload()) != `4` {
		t.Fatalf("pulled %d %s, want %d 4", task.ID(), task.Payload(), id)
	}
	if dup, err := q.Push([]byte(`5`), merging...); err != tq.ErrDuplicate || dup != id {
		t.Fatalf("push while delivered: %d, %v; want %d, ErrDuplicate", dup, err, id)
	}
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]tq.PushOption{
		{tq.WithReplacePending()},
		{tq.WithUniqueKey("k"), tq.WithDebounce(0)},
		{tq.WithUniqueKey("k"), tq.WithDebounce(-time.Second)},
		{tq.WithUniqueKey("k"), tq.WithReplacePending(), tq.WithGroup("g", 1)},
	} {
		_, err := q.Push([]byte(`6`), bad...)
		wantErr(t, err, tq.ErrInvalidArgument, "tq: push: ")
	}
	if n := count(t, q, tq.Pending); n != 0 {
		t.Fatalf("%d tasks pending after refused pushes, want 0", n)
	}
}

func TestUniqueKeyIsFreedAndWindow(t *testing.T) {
	q, path := retryAtOnce(t, tq.WithMaxAttempts(1))
	key := tq.WithUniqueKey("daily")
	first := push(t, q, `1`, key)
	if err := tryPull(t, q).Finish(); err != nil {
		t.Fatal(err)
	}
	second := push(t, q, `2`, key)
	if second == first {
		t.Fatal("a done task kept its key without a window")
	}
	if err := tryPull(t, q).Fail("dead"); err != nil {
		t.Fatal(err)
	}
	push(t, q, `3`, key) // a dead task gives its key up
	other, err := tq.Open(path, tq.WithQueue("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	push(t, other, `4`, key) // keys are per queue

	// With a window, given before or after the key: the key stays held for
	// that long after the task is done.
	window := push(t, q, `5`, tq.WithUniqueFor(300*time.Millisecond), tq.WithUniqueKey("weekly"))
	if _, err := q.Push([]byte(`6`), tq.WithUniqueKey("weekly")); err != tq.ErrDuplicate {
		t.Fatalf("push of a held key: %v", err)
	}
	for {
		task := tryPull(t, q)
		if err := task.Finish(); err != nil {
			t.Fatal(err)
		}
		if task.ID() == window {
			break
		}
	}
	if dup, err := q.Push([]byte(`7`), tq.WithUniqueKey("weekly")); err != tq.ErrDuplicate || dup != window {
		t.Fatalf("push inside the window: %d, %v; want %d, ErrDuplicate", dup, err, window)
	}
	time.Sleep(350 * time.Millisecond)
	push(t, q, `8`, tq.WithUniqueKey("weekly"))
}

func TestUniqueKeyErrors(t *testing.T) {
	q, _ := openQueue(t)
	for _, c := range []struct {
		name string
		opts []tq.PushOption
		text string
	}{
		{"empty key", []tq.PushOption{tq.WithUniqueKey("")}, "tq: push: "},
		{"key too long", []tq.PushOption{tq.WithUniqueKey(strings.Repeat("k", tq.MaxUniqueKeyLen+1))}, "tq: push: "},
		{"NUL in key", []tq.PushOption{tq.WithUniqueKey("a\x00b")}, "NUL"},
		{"key not UTF-8", []tq.PushOption{tq.WithUniqueKey("\xff")}, "tq: push: "},
		{"window without a key", []tq.PushOption{tq.WithUniqueFor(time.Hour)}, "tq: push: "},
		{"negative window", []tq.PushOption{tq.WithUniqueKey("k"), tq.WithUniqueFor(-time.Hour)}, "unique window -1h0m0s is negative"},
		{"window over a year", []tq.PushOption{tq.WithUniqueKey("k"), tq.WithUniqueFor(400 * 24 * time.Hour)}, "tq: push: "},
		{"max attempts 0", []tq.PushOption{tq.WithTaskMaxAttempts(0)}, "tq: push: "},
		{"negative max attempts", []tq.PushOption{tq.WithTaskMaxAttempts(-2)}, "out of range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := q.Push([]byte(`1`), c.opts...)
			if id != 0 {
				t.Errorf("a failed push returned id %d", id)
			}
			wantErr(t, err, tq.ErrInvalidArgument, c.text)
		})
	}
	push(t, q, `1`, tq.WithUniqueKey(strings.Repeat("k", tq.MaxUniqueKeyLen)))
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatalf("pending = %d, want the one valid push", n)
	}
}

func TestPushBatch(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	payloads := make([][]byte, 100)
	for i := range payloads {
		payloads[i] = fmt.Appendf(nil, `{"i": %d}`, i)
	}
	payloads[7] = []byte(`"é"`)
	ids, err := q.PushBatch(payloads, tq.WithPriority(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(payloads) {
		t.Fatalf("%d ids for %d payloads", len(ids), len(payloads))
	}
	for i, task := range list(t, q, tq.Pending) {
		if task.ID() != ids[i] || string(task.Payload()) != string(payloads[i]) || task.Priority() != 3 {
			t.Fatalf("task %d: id %d payload %s priority %d; pushed as %d, %s", i, task.ID(), task.Payload(), task.Priority(), ids[i], payloads[i])
		}
	}
	if ids, err := q.PushBatch(nil); err != nil || len(ids) != 0 {
		t.Fatalf("PushBatch(nil) = %v, %v", ids, err)
	}

	for _, c := range []struct {
		name string
		bad  []byte
		opts []tq.PushOption
		kind error
		text string
	}{
		{"invalid JSON", []byte(`{`), nil, tq.ErrInvalidJSON, "payload 2: "},
		{"empty payload", nil, nil, tq.ErrInvalidJSON, "payload 2: "},
		{"not UTF-8", []byte("\"\xff\""), nil, tq.ErrInvalidArgument, "payload 2: "},
		{"a unique key", []byte(`1`), []tq.PushOption{tq.WithUniqueKey("k")}, tq.ErrInvalidArgument, "tq: push: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids, err := q.PushBatch([][]byte{[]byte(`1`), []byte(`2`), c.bad, []byte(`4`)}, c.opts...)
			if ids != nil {
				t.Errorf("a failed batch returned ids %v", ids)
			}
			wantErr(t, err, c.kind, c.text)
		})
	}
	if n := count(t, q, tq.Pending); n != 100 {
		t.Fatalf("pending = %d: a failed batch stored tasks", n)
	}
	limited, _ := openQueue(t, tq.WithMaxPayloadLen(4))
	_, err = limited.PushBatch([][]byte{[]byte(`1`), []byte(`"too long"`)})
	wantErr(t, err, tq.ErrInvalidArgument, "payload 1: ")
}

func TestPullBatchAndFinishBatch(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithHistory())
	ids, err := q.PushBatch([][]byte{[]byte(`1`), []byte(`2`), []byte(`3`), []byte(`4`), []byte(`5`), []byte(`6`)})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := q.PullBatch(t.Context(), 4, tq.WithLease(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 4 {
		t.Fatalf("PullBatch(4) claimed %d tasks", len(tasks))
	}
	for i, task := range tasks {
		if task.ID() != ids[i] || task.Attempts() != 1 {
			t.Fatalf("batch task %d: id %d attempt %d, want %d attempt 1", i, task.ID(), task.Attempts(), ids[i])
		}
	}
	rest, err := q.PullBatch(t.Context(), 10)
	if err != nil || len(rest) != 2 {
		t.Fatalf("PullBatch(10) with 2 ready: %d tasks, %v", len(rest), err)
	}

	// One finished before, one closed, one lost, one from another Queue,
	// one given twice: the others are finished all the same.
	other, err := tq.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	push(t, other, `"other"`)
	foreign := tryPull(t, other)
	if err := tasks[0].Finish(); err != nil {
		t.Fatal(err)
	}
	tasks[1].Close()
	lost := rest[0]
	if err := lost.Fail("gone"); err != nil {
		t.Fatal(err)
	}
	batch := []*tq.Task{tasks[0], tasks[1], tasks[2], tasks[3], lost, foreign, tasks[3], rest[1]}
	errs, err := q.FinishBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind error
		text string
	}{
		{tq.ErrNotHeld, "already finished"},
		{tq.ErrClosed, "was closed"},
		{nil, ""},
		{nil, ""},
		{tq.ErrNotHeld, "already failed"},
		{tq.ErrInvalidArgument, "another Queue"},
		{tq.ErrNotHeld, "already finished"},
		{nil, ""},
	}
	for i, w := range want {
		if w.kind == nil {
			if errs[i] != nil {
				t.Errorf("task %d: %v, want it finished", i, errs[i])
			}
			continue
		}
		if !errors.Is(errs[i], w.kind) || !strings.Contains(fmt.Sprint(errs[i]), w.text) {
			t.Errorf("task %d: %v, want %v mentioning %q", i, errs[i], w.kind, w.text)
		}
	}
	if n := count(t, q, tq.Done); n != 4 {
		t.Fatalf("done = %d, want 4", n)
	}
	if err := foreign.Finish(); err != nil {
		t.Fatalf("the other Queue's task after the batch: %v", err)
	}
	if errs, err := q.FinishBatch(nil); err != nil || len(errs) != 0 {
		t.Fatalf("FinishBatch(nil) = %v, %v", errs, err)
	}

	// A delivery taken by another worker meanwhile: libtq reports it.
	push(t, q, `"taken"`)
	expired := tryPull(t, q, tq.WithLease(time.Millisecond))
	time.Sleep(5 * time.Millisecond)
	taker := tryPull(t, other)
	errs, err = q.FinishBatch([]*tq.Task{expired})
	if err != nil || !errors.Is(errs[0], tq.ErrNotHeld) || !strings.Contains(errs[0].Error(), "no longer held") {
		t.Fatalf("FinishBatch of a taken task: %v, %v", errs, err)
	}
	if err := taker.Finish(); err != nil {
		t.Fatal(err)
	}

	_, err = q.PullBatch(t.Context(), 0)
	wantErr(t, err, tq.ErrInvalidArgument, "a batch of 0 tasks")
	_, err = q.PullBatch(t.Context(), 1, tq.WithLease(0))
	wantErr(t, err, tq.ErrInvalidArgument, "tq: pull: ")
}

// FinishAndPullBatch finishes a worker's tasks and claims the next in one
// call; a task not held stops neither the others nor the claim.
func TestFinishAndPullBatch(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithHistory())
	ids, err := q.PushBatch([][]byte{[]byte(`1`), []byte(`2`), []byte(`3`), []byte(`4`), []byte(`5`), []byte(`6`)})
	if err != nil {
		t.Fatal(err)
	}
	first, err := q.PullBatch(t.Context(), 3)
	if err != nil || len(first) != 3 {
		t.Fatalf("PullBatch(3) = %d tasks, %v", len(first), err)
	}
	if err := first[1].Finish(); err != nil {
		t.Fatal(err)
	}
	errs, next, err := q.FinishAndPullBatch(first, 2, tq.WithLease(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], tq.ErrNotHeld) || errs[2] != nil {
		t.Errorf("errs = %v, want the second not held", errs)
	}
	if len(next) != 2 || next[0].ID() != ids[3] || next[1].ID() != ids[4] {
		t.Fatalf("claimed %v, want tasks %v", next, ids[3:5])
	}
	if n := count(t, q, tq.Done); n != 3 {
		t.Errorf("done = %d, want 3", n)
	}
	// No tasks: a claim alone. max 0: a finish alone.
	errs, last, err := q.FinishAndPullBatch(nil, 5)
	if err != nil || len(errs) != 0 || len(last) != 1 || last[0].ID() != ids[5] {
		t.Fatalf("FinishAndPullBatch(nil, 5) = %v, %v, %v", errs, last, err)
	}
	errs, none, err := q.FinishAndPullBatch(append(next, last...), 0)
	if err != nil || len(none) != 0 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("FinishAndPullBatch(..., 0) = %v, %v, %v", errs, none, err)
	}
	if n := count(t, q, tq.Leased); n != 0 {
		t.Errorf("leased = %d, want 0", n)
	}
	_, _, err = q.FinishAndPullBatch(nil, -1)
	wantErr(t, err, tq.ErrInvalidArgument, "negative")
}

// A waiting PullBatch is woken by a push, and ends with its context.
func TestPullBatchWaits(t *testing.T) {
	q, _ := openQueue(t)
	got := make(chan []*tq.Task, 1)
	go func() {
		tasks, err := q.PullBatch(t.Context(), 10)
		if err != nil {
			t.Error(err)
		}
		got <- tasks
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := q.PushBatch([][]byte{[]byte(`1`), []byte(`2`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case tasks := <-got:
		if len(tasks) == 0 {
			t.Fatal("PullBatch returned no task")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a push did not wake PullBatch")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	for { // takes what the first batch left, then waits
		if _, err := q.PullBatch(ctx, 10); err != nil {
			if err != context.DeadlineExceeded {
				t.Fatalf("PullBatch: %v, want its context's error", err)
			}
			break
		}
	}
}

func TestFinishAndPull(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithHistory())
	ids, err := q.PushBatch([][]byte{[]byte(`1`), []byte(`2`), []byte(`3`)})
	if err != nil {
		t.Fatal(err)
	}
	task, err := q.Pull(t.Context())
	for i := 0; err == nil; i++ {
		if task.ID() != ids[i] {
			t.Fatalf("pulled %d, want %d", task.ID(), ids[i])
		}
		if i == len(ids)-1 {
			break
		}
		task, err = task.FinishAndPull(t.Context(), tq.WithLease(time.Hour))
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, q, tq.Done); n != 2 {
		t.Fatalf("done = %d, want 2", n)
	}

	// None ready: the task is finished, then the pull waits for a push.
	next := make(chan *tq.Task, 1)
	go func() {
		task, err := task.FinishAndPull(t.Context())
		if err != nil {
			t.Error(err)
		}
		next <- task
	}()
	time.Sleep(50 * time.Millisecond)
	if n := count(t, q, tq.Done); n != 3 {
		t.Fatalf("done = %d while FinishAndPull waits, want 3", n)
	}
	late := push(t, q, `"late"`)
	select {
	case task = <-next:
		if task == nil || task.ID() != late {
			t.Fatalf("FinishAndPull returned %v, want task %d", task, late)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a push did not wake FinishAndPull")
	}

	// The wait ends with the context, after the finish.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := task.FinishAndPull(ctx); err != context.DeadlineExceeded {
		t.Fatalf("FinishAndPull: %v, want DeadlineExceeded", err)
	}
	wantErr(t, task.Finish(), tq.ErrNotHeld, "already finished")

	// An ended context: the task is finished, nothing is claimed.
	push(t, q, `"a"`)
	push(t, q, `"b"`)
	task = tryPull(t, q)
	ended, stop := context.WithCancel(t.Context())
	stop()
	if next, err := task.FinishAndPull(ended); next != nil || err != context.Canceled {
		t.Fatalf("FinishAndPull with an ended context: %v, %v", next, err)
	}
	if p, d := count(t, q, tq.Pending), count(t, q, tq.Done); p != 1 || d != 5 {
		t.Fatalf("pending %d, done %d; want 1 and 5", p, d)
	}
	_, err = task.FinishAndPull(ended)
	wantErr(t, err, tq.ErrNotHeld, "tq: finish: ")
}

func TestFinishAndPullErrors(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	push(t, q, `1`)
	push(t, q, `2`)
	lost := tryPull(t, q, tq.WithLease(time.Millisecond))
	time.Sleep(5 * time.Millisecond)
	current := tryPull(t, q)
	if current.ID() != lost.ID() {
		t.Fatal("the expired task was not first in line")
	}
	_, err := lost.FinishAndPull(t.Context())
	wantErr(t, err, tq.ErrNotHeld, "tq: finish: ")
	var tqErr *tq.Error
	if !errors.As(err, &tqErr) || tqErr.Op != "finish" {
		t.Fatalf("%v is not an error of the finish", err)
	}
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatalf("pending = %d: a failed FinishAndPull claimed a task", n)
	}
	_, err = current.FinishAndPull(t.Context(), tq.WithLease(0))
	wantErr(t, err, tq.ErrInvalidArgument, "tq: finish: ")
	current.Close()
	_, err = current.FinishAndPull(t.Context())
	wantErr(t, err, tq.ErrClosed, "was closed")
	var zero tq.Task
	_, err = zero.FinishAndPull(t.Context())
	wantErr(t, err, tq.ErrClosed, "not pulled")
}

func TestOldestReadyAge(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if age, ok, err := q.OldestReadyAge(); err != nil || ok || age != 0 {
		t.Fatalf("empty queue: %v, %v, %v", age, ok, err)
	}
	push(t, q, `1`, tq.WithDelay(time.Hour))
	if _, ok, err := q.OldestReadyAge(); err != nil || ok {
		t.Fatalf("only a delayed task: %v, %v", ok, err)
	}
	push(t, q, `2`, tq.WithRunAt(time.Now().Add(-time.Minute)))
	push(t, q, `3`)
	if age, ok, err := q.OldestReadyAge(); err != nil || !ok || age < time.Minute || age > 2*time.Minute {
		t.Fatalf("OldestReadyAge() = %v, %v, %v; want about a minute", age, ok, err)
	}
}

func TestListPages(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	var ids []int64
	runAt := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	for i := range 5 {
		ids = append(ids, push(t, q, fmt.Sprintf(`{"i": %d}`, i), tq.WithRunAt(runAt), tq.WithPriority(int32(i))))
	}
	var listed []tq.TaskInfo
	after := int64(0)
	for {
		page, err := q.List(tq.Pending, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID()
	}
	if len(listed) != 5 {
		t.Fatalf("listed %d tasks, want 5", len(listed))
	}
	for i, info := range listed {
		var job struct{ I int }
		if err := info.Decode(&job); err != nil {
			t.Fatal(err)
		}
		if info.ID() != ids[i] || job.I != i || info.State() != tq.Pending || info.Attempts() != 0 ||
			info.Priority() != int32(i) || !info.RunAt().Equal(runAt) || info.MaxAttempts() != tq.DefaultMaxAttempts {
			t.Fatalf("listed %d: %+v", i, info)
		}
	}
	if infos := list(t, q, tq.Leased); len(infos) != 0 {
		t.Fatalf("listed %d leased tasks, want none", len(infos))
	}
	// Listing holds nothing.
	if n := count(t, q, tq.Pending); n != 5 {
		t.Fatalf("pending = %d after List", n)
	}

	_, err := q.List(tq.State(9), 0, 10)
	wantErr(t, err, tq.ErrInvalidArgument, "tq: list: ")
	_, err = q.List(tq.Pending, 0, 0)
	wantErr(t, err, tq.ErrInvalidArgument, "a page of 0 tasks")
}

func TestCheckpointAndWALSize(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	payloads := make([][]byte, 200)
	for i := range payloads {
		payloads[i], _ = json.Marshal(strings.Repeat("x", 1000))
	}
	if _, err := q.PushBatch(payloads); err != nil {
		t.Fatal(err)
	}
	size, err := q.WALSize()
	if err != nil || size < 200_000 {
		t.Fatalf("WALSize() = %d, %v; want the batch's 200 kB at least", size, err)
	}
	if size, err := q.Checkpoint(); err != nil || size != 0 {
		t.Fatalf("Checkpoint() = %d, %v; want the log truncated", size, err)
	}
	if size, err := q.WALSize(); err != nil || size != 0 {
		t.Fatalf("WALSize() after Checkpoint = %d, %v", size, err)
	}
}
