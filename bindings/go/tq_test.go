package tq_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// openQueue opens a queue on a new file in the test's directory, closed at
// the end of the test.
func openQueue(t testing.TB, opts ...tq.Option) (*tq.Queue, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := tq.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q, path
}

func push(t testing.TB, q *tq.Queue, payload string, opts ...tq.PushOption) int64 {
	t.Helper()
	id, err := q.Push([]byte(payload), opts...)
	if err != nil {
		t.Fatalf("Push(%s): %v", payload, err)
	}
	return id
}

func tryPull(t testing.TB, q *tq.Queue, opts ...tq.PullOption) *tq.Task {
	t.Helper()
	task, err := q.TryPull(opts...)
	if err != nil {
		t.Fatalf("TryPull: %v", err)
	}
	return task
}

func count(t testing.TB, q *tq.Queue, state tq.State) int64 {
	t.Helper()
	n, err := q.Count(state)
	if err != nil {
		t.Fatalf("Count(%v): %v", state, err)
	}
	return n
}

// wantErr fails unless err matches kind and its message contains text.
func wantErr(t testing.TB, err, kind error, text string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("got error %v, want one matching %v", err, kind)
	}
	if !strings.Contains(err.Error(), text) {
		t.Fatalf("error %q does not mention %q", err, text)
	}
}

func TestPushPullFinish(t *testing.T) {
	q, _ := openQueue(t)
	payload := `{"file": "a.mp4", "sizes": [1, 2.5e3], "name": "é\u00e9"}`
	id := push(t, q, payload)
	if id <= 0 {
		t.Fatalf("Push returned id %d", id)
	}
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatalf("pending = %d, want 1", n)
	}

	task := tryPull(t, q)
	if task.ID() != id || task.Attempts() != 1 || string(task.Payload()) != payload {
		t.Fatalf("pulled id %d attempts %d payload %s; want %d, 1, %s",
			task.ID(), task.Attempts(), task.Payload(), id, payload)
	}
	if task.Token() == 0 {
		t.Fatal("a pulled task's Token is 0")
	}
	var decoded struct {
		File  string
		Sizes []float64
	}
	if err := task.Decode(&decoded); err != nil || decoded.File != "a.mp4" || decoded.Sizes[1] != 2500 {
		t.Fatalf("Decode: %+v, %v", decoded, err)
	}
	if n := count(t, q, tq.Leased); n != 1 {
		t.Fatalf("leased = %d, want 1", n)
	}
	if _, err := q.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("second TryPull: %v, want ErrEmpty", err)
	}
	if err := task.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	for _, state := range []tq.State{tq.Pending, tq.Leased, tq.Done} {
		if n := count(t, q, state); n != 0 {
			t.Fatalf("%v = %d after Finish, want 0", state, n)
		}
	}
	if string(task.Payload()) != payload {
		t.Fatal("the payload changed after Finish")
	}
}

func TestPushJSONAndDecode(t *testing.T) {
	q, _ := openQueue(t)
	type job struct {
		Index int      `json:"index"`
		Tags  []string `json:"tags"`
	}
	id, err := q.PushJSON(job{Index: 7, Tags: []string{"a", "<b>"}})
	if err != nil {
		t.Fatal(err)
	}
	task := tryPull(t, q)
	defer task.Close()
	var got job
	if err := task.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if task.ID() != id || got.Index != 7 || len(got.Tags) != 2 || got.Tags[1] != "<b>" {
		t.Fatalf("decoded %+v from task %d, pushed as %d", got, task.ID(), id)
	}

	// A []byte given to PushJSON is a Go value: it becomes a JSON string.
	push(t, q, `"plain"`)
	if _, err := q.PushJSON([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	tryPull(t, q).Close()
	task = tryPull(t, q)
	defer task.Close()
	if string(task.Payload()) != `"e30="` {
		t.Fatalf("PushJSON([]byte) stored %s", task.Payload())
	}

	_, err = q.PushJSON(make(chan int))
	var unsupported *json.UnsupportedTypeError
	if !errors.As(err, &unsupported) || !strings.HasPrefix(err.Error(), "tq: push: json: ") {
		t.Fatalf("PushJSON(chan): %v, want json's error wrapped", err)
	}
	if err := task.Decode(new(int)); err == nil {
		t.Fatal("Decode of a string into an int succeeded")
	}
}

func TestOrderAndSchedule(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	later := push(t, q, `"in an hour"`, tq.WithDelay(time.Hour))
	first := push(t, q, `1`)
	second := push(t, q, `2`, tq.WithRunAt(time.Now().Add(-time.Minute)))
	third := push(t, q, `3`, tq.WithDelay(0))
	// By due time, then id: the task due a minute ago goes first.
	for _, want := range []int64{second, first, third} {
		task := tryPull(t, q)
		if task.ID() != want {
			t.Fatalf("pulled %d, want %d", task.ID(), want)
		}
		if err := task.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("the delayed task %d came out early: %v", later, err)
	}
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatalf("pending = %d, want the delayed task", n)
	}
	// A later option replaces an earlier one, as in libtq.
	soon := push(t, q, `"soon"`, tq.WithDelay(time.Hour), tq.WithRunAt(time.Now()))
	if task := tryPull(t, q); task.ID() != soon {
		t.Fatalf("pulled %d, want %d", task.ID(), soon)
	}
}

func TestExpiryAndDeadline(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithHistory())
	expiry := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	expired := push(t, q, `"late"`, tq.WithExpireAt(expiry), tq.WithDeadlineAfter(time.Hour))
	next := push(t, q, `"next"`)
	info, found, err := q.Task(expired)
	if err != nil || !found {
		t.Fatalf("Task(%d): %v %v", expired, found, err)
	}
	if at, ok := info.ExpiresAt(); !ok || !at.Equal(expiry) {
		t.Fatalf("ExpiresAt = %v %v, want %v", at, ok, expiry)
	}
	if at, ok := info.Deadline(); !ok || !at.After(time.Now()) {
		t.Fatalf("Deadline = %v %v, want within the hour", at, ok)
	}
	// The pull ends the expired task and delivers the next.
	if task := tryPull(t, q); task.ID() != next {
		t.Fatalf("pulled %d, want %d", task.ID(), next)
	}
	info, _, err = q.Task(expired)
	if reason, _ := info.LastError(); err != nil || info.State() != tq.Dead || reason != "expired" {
		t.Fatalf("the expired task: %v %v %q", err, info.State(), reason)
	}
	// One that would expire before its run time could never run.
	_, err = q.Push([]byte(`1`), tq.WithDelay(time.Minute), tq.WithExpireAfter(time.Second))
	wantErr(t, err, tq.ErrInvalidArgument, "could never run")
}

func TestLeaseExpiryAndNotHeld(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	push(t, q, `{"n": 1}`)
	first := tryPull(t, q, tq.WithLease(30*time.Millisecond))
	time.Sleep(60 * time.Millisecond)
	second := tryPull(t, q)
	if second.ID() != first.ID() || second.Attempts() != 2 {
		t.Fatalf("redelivery: id %d attempts %d, want %d and 2", second.ID(), second.Attempts(), first.ID())
	}
	wantErr(t, first.Finish(), tq.ErrNotHeld, "tq: finish: ")
	// The lost delivery stays lost, and says so without calling libtq.
	wantErr(t, first.Finish(), tq.ErrNotHeld, "no longer held")
	if err := second.Finish(); err != nil {
		t.Fatalf("the current holder's Finish: %v", err)
	}
	wantErr(t, second.Finish(), tq.ErrNotHeld, "already finished")
	second.Close() // after Finish: nothing to do
	if n := count(t, q, tq.Leased) + count(t, q, tq.Pending); n != 0 {
		t.Fatalf("%d tasks left", n)
	}
}

func TestTaskClose(t *testing.T) {
	q, _ := openQueue(t)
	id := push(t, q, `"x"`)
	task := tryPull(t, q, tq.WithLease(20*time.Millisecond))
	task.Close()
	task.Close()
	wantErr(t, task.Finish(), tq.ErrClosed, fmt.Sprintf("task %d was closed", id))
	if task.ID() != id || string(task.Payload()) != `"x"` {
		t.Fatal("a closed task lost its id or payload")
	}
	// Closing does not finish: the task comes back after its lease.
	time.Sleep(40 * time.Millisecond)
	again := tryPull(t, q)
	if again.ID() != id || again.Attempts() != 2 {
		t.Fatalf("got %d (attempt %d), want %d again", again.ID(), again.Attempts(), id)
	}
	if err := again.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestHistoryAndPurge(t *testing.T) {
	q, _ := openQueue(t, tq.WithHistory(), tq.WithDurability(tq.DurabilityNormal))
	for i := range 3 {
		push(t, q, fmt.Sprint(i))
		if err := tryPull(t, q).Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, q, tq.Done); n != 3 {
		t.Fatalf("done = %d, want 3", n)
	}
	if n, err := q.Purge(tq.Done, time.Hour); err != nil || n != 0 {
		t.Fatalf("Purge(Done, 1h) = %d, %v; want nothing that recent", n, err)
	}
	if n, err := q.Purge(tq.Done, 0); err != nil || n != 3 {
		t.Fatalf("Purge(Done, 0) = %d, %v; want 3", n, err)
	}
	if n := count(t, q, tq.Done); n != 0 {
		t.Fatalf("done = %d after Purge", n)
	}
}

func TestRecoverLeavesLiveHolders(t *testing.T) {
	q, _ := openQueue(t)
	push(t, q, `1`)
	task := tryPull(t, q)
	defer task.Close()
	n, err := q.Recover()
	if err != nil || n != 0 {
		t.Fatalf("Recover = %d, %v; want the live holder's task left alone", n, err)
	}
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestStateString(t *testing.T) {
	for state, want := range map[tq.State]string{tq.Pending: "pending", tq.Leased: "leased", tq.Done: "done", tq.Dead: "dead", 9: "State(9)"} {
		if state.String() != want {
			t.Errorf("%d.String() = %q, want %q", int32(state), state.String(), want)
		}
	}
}

func TestVersion(t *testing.T) {
	if v := tq.Version(); !strings.HasPrefix(v, "0.3.") {
		t.Fatalf("Version() = %q, want the 0.3 ABI", v)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	content := bytes.Repeat([]byte("this is not an SQLite database. "), 64)
	if err := os.WriteFile(garbage, content, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		opts []tq.Option
		kind error
		text string
	}{
		{"empty path", "", nil, tq.ErrInvalidArgument, "tq: open: "},
		{"NUL in path", "a\x00b.db", nil, tq.ErrInvalidArgument, "NUL"},
		{"in memory", ":memory:", nil, tq.ErrInvalidArgument, "tq: open: "},
		{"missing directory", filepath.Join(dir, "missing", "q.db"), nil, tq.ErrIO, "tq: open: "},
		{"a directory", dir, nil, tq.ErrIO, "tq: open: "},
		{"not a database", garbage, nil, tq.ErrNotADatabase, "tq: open: "},
		{"unknown durability", filepath.Join(dir, "q.db"), []tq.Option{tq.WithDurability(7)}, tq.ErrInvalidArgument, "durability"},
		{"negative busy timeout", filepath.Join(dir, "q.db"), []tq.Option{tq.WithBusyTimeout(-time.Second)}, tq.ErrInvalidArgument, "busy timeout -1s is negative"},
		{"busy timeout over a year", filepath.Join(dir, "q.db"), []tq.Option{tq.WithBusyTimeout(400 * 24 * time.Hour)}, tq.ErrInvalidArgument, "tq: open: "},
		{"payload limit 0", filepath.Join(dir, "q.db"), []tq.Option{tq.WithMaxPayloadLen(0)}, tq.ErrInvalidArgument, "tq: open: "},
		{"negative payload limit", filepath.Join(dir, "q.db"), []tq.Option{tq.WithMaxPayloadLen(-1)}, tq.ErrInvalidArgument, "negative"},
		{"payload limit over the maximum", filepath.Join(dir, "q.db"), []tq.Option{tq.WithMaxPayloadLen(tq.MaxPayloadLen + 1)}, tq.ErrInvalidArgument, "tq: open: "},
		{"first bad option wins", filepath.Join(dir, "q.db"), []tq.Option{tq.WithHistory(), tq.WithBusyTimeout(-1), tq.WithDurability(7)}, tq.ErrInvalidArgument, "busy timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := tq.Open(c.path, c.opts...)
			if q != nil {
				q.Close()
				t.Fatal("Open succeeded")
			}
			wantErr(t, err, c.kind, c.text)
			var tqErr *tq.Error
			if !errors.As(err, &tqErr) || tqErr.Op != "open" || tqErr.Message == "" {
				t.Fatalf("%#v is not an *tq.Error of open with a message", err)
			}
		})
	}
	after, err := os.ReadFile(garbage)
	if err != nil || !bytes.Equal(after, content) {
		t.Fatal("the file that is not a database was changed")
	}
}

func TestPushErrors(t *testing.T) {
	q, _ := openQueue(t, tq.WithMaxPayloadLen(16))
	cases := []struct {
		name    string
		payload []byte
		opts    []tq.PushOption
		kind    error
		text    string
	}{
		{"nil", nil, nil, tq.ErrInvalidJSON, "tq: push: "},
		{"empty", []byte{}, nil, tq.ErrInvalidJSON, "tq: push: "},
		{"truncated", []byte(`{"a": `), nil, tq.ErrInvalidJSON, "tq: push: "},
		{"two values", []byte(`1 2`), nil, tq.ErrInvalidJSON, "tq: push: "},
		{"not UTF-8", []byte{'"', 0xff, '"'}, nil, tq.ErrInvalidArgument, "UTF-8"},
		{"over the queue's limit", []byte(`"0123456789abcdef"`), nil, tq.ErrInvalidArgument, "tq: push: "},
		{"negative delay", []byte(`1`), []tq.PushOption{tq.WithDelay(-time.Millisecond)}, tq.ErrInvalidArgument, "delay -1ms is negative"},
		{"delay over a year", []byte(`1`), []tq.PushOption{tq.WithDelay(400 * 24 * time.Hour)}, tq.ErrInvalidArgument, "tq: push: "},
		{"run at before 1970", []byte(`1`), []tq.PushOption{tq.WithRunAt(time.Unix(-10, 0))}, tq.ErrInvalidArgument, "tq: push: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := q.Push(c.payload, c.opts...)
			if id != 0 {
				t.Errorf("a failed Push returned id %d", id)
			}
			wantErr(t, err, c.kind, c.text)
		})
	}
	if n := count(t, q, tq.Pending); n != 0 {
		t.Fatalf("failed pushes stored %d tasks", n)
	}
	push(t, q, `"0123456789abcd"`) // 16 bytes: at the limit
}

func TestPullErrors(t *testing.T) {
	q, _ := openQueue(t)
	push(t, q, `1`)
	for _, c := range []struct {
		lease time.Duration
		text  string
	}{{0, "tq: pull: "}, {-time.Second, "lease -1s is negative"}, {400 * 24 * time.Hour, "tq: pull: "}} {
		_, err := q.TryPull(tq.WithLease(c.lease))
		wantErr(t, err, tq.ErrInvalidArgument, c.text)
		_, err = q.Pull(t.Context(), tq.WithLease(c.lease))
		wantErr(t, err, tq.ErrInvalidArgument, c.text)
	}
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatal("a failed pull claimed the task")
	}
	// A lease under a millisecond rounds up to one, rather than to the
	// invalid 0.
	task := tryPull(t, q, tq.WithLease(time.Microsecond))
	if err := task.Finish(); err != nil && !errors.Is(err, tq.ErrNotHeld) {
		t.Fatal(err)
	}
}

func TestCountAndPurgeErrors(t *testing.T) {
	q, _ := openQueue(t)
	_, err := q.Count(tq.State(42))
	wantErr(t, err, tq.ErrInvalidArgument, "tq: count: ")
	for _, state := range []tq.State{tq.Pending, tq.Leased} {
		_, err = q.Purge(state, 0)
		wantErr(t, err, tq.ErrInvalidArgument, "only done, dead and cancelled tasks")
	}
	_, err = q.Purge(9, 0)
	wantErr(t, err, tq.ErrInvalidArgument, "unknown task state 9")
	_, err = q.Purge(tq.Done, -time.Second)
	wantErr(t, err, tq.ErrInvalidArgument, "negative")
}

func TestUseAfterClose(t *testing.T) {
	q, _ := openQueue(t)
	push(t, q, `1`)
	push(t, q, `2`)
	held := tryPull(t, q)
	finished := tryPull(t, q)
	if err := finished.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	_, err := q.Push([]byte(`3`))
	wantErr(t, err, tq.ErrClosed, "tq: push: the queue is closed")
	_, err = q.PushJSON(3)
	wantErr(t, err, tq.ErrClosed, "tq: push: ")
	_, err = q.Push([]byte(`3`), tq.WithDelay(time.Second))
	wantErr(t, err, tq.ErrClosed, "tq: push: ")
	_, err = q.TryPull()
	wantErr(t, err, tq.ErrClosed, "tq: pull: ")
	_, err = q.Pull(t.Context())
	wantErr(t, err, tq.ErrClosed, "tq: pull: ")
	_, err = q.Recover()
	wantErr(t, err, tq.ErrClosed, "tq: recover: ")
	_, err = q.Count(tq.Pending)
	wantErr(t, err, tq.ErrClosed, "tq: count: ")
	_, err = q.Purge(tq.Done, 0)
	wantErr(t, err, tq.ErrClosed, "tq: purge: ")
	_, err = q.PushBatch([][]byte{[]byte(`3`)})
	wantErr(t, err, tq.ErrClosed, "tq: push: ")
	_, err = q.PullBatch(t.Context(), 2)
	wantErr(t, err, tq.ErrClosed, "tq: pull: ")
	_, err = q.FinishBatch([]*tq.Task{held})
	wantErr(t, err, tq.ErrClosed, "tq: finish: ")
	wantErr(t, q.RetryDead(1), tq.ErrClosed, "tq: retry dead: ")
	_, err = q.RetryAllDead()
	wantErr(t, err, tq.ErrClosed, "tq: retry dead: ")
	_, _, err = q.OldestReadyAge()
	wantErr(t, err, tq.ErrClosed, "tq: oldest ready age: ")
	_, err = q.List(tq.Pending, 0, 10)
	wantErr(t, err, tq.ErrClosed, "tq: list: ")
	_, err = q.Checkpoint()
	wantErr(t, err, tq.ErrClosed, "tq: checkpoint: ")
	_, err = q.WALSize()
	wantErr(t, err, tq.ErrClosed, "tq: wal size: ")
	wantErr(t, q.Interrupt(), tq.ErrClosed, "tq: interrupt: ")

	// The task Close freed answers without touching freed memory.
	wantErr(t, held.Finish(), tq.ErrClosed, "tq: finish: ")
	wantErr(t, held.Fail("x"), tq.ErrClosed, "tq: fail: ")
	wantErr(t, held.Extend(time.Second), tq.ErrClosed, "tq: extend: ")
	_, err = held.FinishAndPull(t.Context())
	wantErr(t, err, tq.ErrClosed, "tq: finish: ")
	held.Close()
	wantErr(t, held.Finish(), tq.ErrClosed, "was closed")
	wantErr(t, finished.Finish(), tq.ErrNotHeld, "already finished")
	if held.ID() == 0 || string(held.Payload()) != `1` || held.Attempts() != 1 {
		t.Fatal("a task of a closed queue lost its fields")
	}
}

func TestUnfinishedTaskOfAClosedQueueComesBack(t *testing.T) {
	q, path := openQueue(t)
	id := push(t, q, `"again"`)
	tryPull(t, q, tq.WithLease(20*time.Millisecond))
	q.Close()
	time.Sleep(40 * time.Millisecond)
	other, err := tq.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	task := tryPull(t, other)
	if task.ID() != id || task.Attempts() != 2 {
		t.Fatalf("got task %d attempt %d, want %d again", task.ID(), task.Attempts(), id)
	}
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
}

// Zero values, not from Open or Pull, behave as closed ones; zero options
// as no options.
func TestZeroValues(t *testing.T) {
	var q tq.Queue
	_, err := q.Push([]byte(`1`))
	wantErr(t, err, tq.ErrClosed, "not opened with Open")
	_, err = q.Pull(t.Context())
	wantErr(t, err, tq.ErrClosed, "not opened with Open")
	_, err = q.List(tq.Dead, 0, 1)
	wantErr(t, err, tq.ErrClosed, "not opened with Open")
	_, err = q.FinishBatch(nil)
	wantErr(t, err, tq.ErrClosed, "not opened with Open")
	wantErr(t, q.Interrupt(), tq.ErrClosed, "not opened with Open")
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var task tq.Task
	wantErr(t, task.Finish(), tq.ErrClosed, "not pulled")
	task.Close()

	// Zero options change nothing.
	opened, _ := openQueue(t, tq.Option{})
	push(t, opened, `1`, tq.PushOption{})
	if err := tryPull(t, opened, tq.PullOption{}).Finish(); err != nil {
		t.Fatal(err)
	}
}
