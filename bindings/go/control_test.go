package tq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

func TestCancelTaskTakesAPendingTaskOutOfLineAndKeepsItsReason(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithHistory())
	id := push(t, q, `"report"`)
	state, err := q.CancelTask(id, "not needed")
	if err != nil || state != tq.Cancelled {
		t.Fatalf("CancelTask = %v, %v; want cancelled", state, err)
	}
	if _, err := q.TryPull(); !errors.Is(err, tq.ErrEmpty) {
		t.Fatalf("TryPull after the cancel: %v", err)
	}
	cancelled := list(t, q, tq.Cancelled)
	if len(cancelled) != 1 || cancelled[0].ID() != id {
		t.Fatalf("cancelled tasks: %+v", cancelled)
	}
	if reason, ok := cancelled[0].LastError(); !ok || reason != "not needed" {
		t.Fatalf("the cancelled task's last error: %q, %v", reason, ok)
	}
	_, err = q.CancelTask(id+100, "")
	wantErr(t, err, tq.ErrInvalidArgument, "no task")
	_, err = q.CancelTask(id, "nul\x00")
	wantErr(t, err, tq.ErrInvalidArgument, "NUL")
}

func TestALeasedTaskCancelledIsToldAtItsHoldersNextCall(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `"long"`)
	task := tryPull(t, q)
	if state, err := q.CancelTask(id, "stop"); err != nil || state != tq.Leased {
		t.Fatalf("CancelTask = %v, %v; want leased", state, err)
	}
	wantErr(t, task.Extend(time.Minute), tq.ErrCancelled, "cancelled")
	wantErr(t, task.Finish(), tq.ErrNotHeld, "")
	if n := count(t, q, tq.Leased); n != 0 {
		t.Fatalf("%d leased after the holder was told", n)
	}
}

func TestAPausedQueueDeliversNothingUntilResumed(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if _, paused, err := q.PausedUntil(); err != nil || paused {
		t.Fatalf("PausedUntil on a new queue: %v, %v", paused, err)
	}
	if err := q.Pause(time.Time{}); err != nil {
		t.Fatal(err)
	}
	until, paused, err := q.PausedUntil()
	if err != nil || !paused || !until.IsZero() {
		t.Fatalf("PausedUntil = %v, %v, %v; want paused until resumed", until, paused, err)
	}
	id := push(t, q, `"held back"`)
	got := make(chan *tq.Task)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		task, err := q.Pull(ctx)
		if err != nil {
			t.Errorf("Pull: %v", err)
		}
		got <- task
	}()
	select {
	case <-got:
		t.Fatal("a pull returned while the queue was paused")
	case <-time.After(200 * time.Millisecond):
	}
	other, err := tq.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Resume(); err != nil {
		t.Fatal(err)
	}
	task := <-got
	if task == nil || task.ID() != id {
		t.Fatalf("after the resume, pulled %v", task)
	}
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, q.Pause(time.Now().Add(-time.Second)), tq.ErrInvalidArgument, "future")
	end := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := q.Pause(end); err != nil {
		t.Fatal(err)
	}
	if until, paused, _ := q.PausedUntil(); !paused || !until.Equal(end) {
		t.Fatalf("PausedUntil = %v, %v; want %v", until, paused, end)
	}
}

func TestSnoozeHandsATaskBackWithoutCountingAnAttempt(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithMaxAttempts(1))
	id := push(t, q, `"not yet"`)
	task := tryPull(t, q)
	if err := task.Snooze(0); err != nil {
		t.Fatal(err)
	}
	wantErr(t, task.Snooze(0), tq.ErrNotHeld, "snoozed")
	wantErr(t, task.Snooze(-time.Second), tq.ErrInvalidArgument, "negative")
	again := tryPull(t, q)
	if again.ID() != id || again.Attempts() != 1 {
		t.Fatalf("pulled %d with %d attempts after the snooze", again.ID(), again.Attempts())
	}
	if err := again.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestAConcurrencyLimitCapsTheLeasedTasks(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if _, limited, err := q.ConcurrencyLimit(); err != nil || limited {
		t.Fatalf("ConcurrencyLimit on a new queue: %v, %v", limited, err)
	}
	wantErr(t, q.SetConcurrencyLimit(0), tq.ErrInvalidArgument, "between 1")
	if err := q.SetConcurrencyLimit(1); err != nil {
		t.Fatal(err)
	}
	if limit, limited, err := q.ConcurrencyLimit(); err != nil || !limited || limit != 1 {
		t.Fatalf("ConcurrencyLimit = %d, %v, %v; want 1", limit, limited, err)
	}
	push(t, q, "1")
	push(t, q, "2")
	first := tryPull(t, q)
	if _, err := q.TryPull(); !errors.Is(err, tq.ErrEmpty) {
		t.Fatalf("a second pull under a limit of 1: %v", err)
	}
	if err := first.Finish(); err != nil {
		t.Fatal(err)
	}
	second := tryPull(t, q)
	if err := q.ClearConcurrencyLimit(); err != nil {
		t.Fatal(err)
	}
	if err := second.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestARateLimitAllowsThatManyClaimsPerWindow(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	wantErr(t, q.SetRateLimit(0, time.Second), tq.ErrInvalidArgument, "out of range")
	if err := q.SetRateLimit(1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, per, limited, err := q.RateLimit(); err != nil || !limited || n != 1 || per != time.Hour {
		t.Fatalf("RateLimit = %d, %v, %v, %v; want 1 per hour", n, per, limited, err)
	}
	push(t, q, "1")
	push(t, q, "2")
	if err := tryPull(t, q).Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.TryPull(); !errors.Is(err, tq.ErrEmpty) {
		t.Fatalf("a second pull in the window: %v", err)
	}
	if err := q.ClearRateLimit(); err != nil {
		t.Fatal(err)
	}
	if err := tryPull(t, q).Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestACappedQueueRefusesAPushBeyondItsCapWithErrFull(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if _, capped, err := q.MaxPending(); err != nil || capped {
		t.Fatalf("MaxPending on a new queue: %v, %v", capped, err)
	}
	if err := q.SetMaxPending(2); err != nil {
		t.Fatal(err)
	}
	if max, capped, err := q.MaxPending(); err != nil || !capped || max != 2 {
		t.Fatalf("MaxPending = %d, %v, %v; want 2", max, capped, err)
	}
	push(t, q, `1`)
	push(t, q, `2`)
	_, err := q.Push([]byte(`3`))
	wantErr(t, err, tq.ErrFull, "cap is 2")
	_, err = q.Push([]byte(`3`), tq.WithWaitForRoom(20*time.Millisecond))
	wantErr(t, err, tq.ErrFull, "full")
	if n := count(t, q, tq.Pending); n != 2 {
		t.Fatalf("%d pending after the refused pushes, want 2", n)
	}
	task := tryPull(t, q)
	push(t, q, `3`)
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := q.SetMaxPending(0); err != nil {
		t.Fatal(err)
	}
	push(t, q, `4`)
}

func TestFairKeysShareDeliveriesByWeight(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if w, err := q.FairWeight("a"); err != nil || w != 1 {
		t.Fatalf("FairWeight of a new key = %v, %v; want 1", w, err)
	}
	wantErr(t, q.SetFairWeight("a", 0), tq.ErrInvalidArgument, "weight")
	if err := q.SetFairWeight("a", 2); err != nil {
		t.Fatal(err)
	}
	if w, err := q.FairWeight("a"); err != nil || w != 2 {
		t.Fatalf("FairWeight = %v, %v; want 2", w, err)
	}
	// b's tasks come first in push order; the turns give a two in three.
	for i := 0; i < 10; i++ {
		if _, err := q.Push([]byte(`"b"`), tq.WithFairKey("b")); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := q.Push([]byte(`"a"`), tq.WithFairKey("a")); err != nil {
			t.Fatal(err)
		}
	}
	_, err := q.Push([]byte(`1`), tq.WithFairKey(""))
	wantErr(t, err, tq.ErrInvalidArgument, "fairness key")
	ofA := 0
	for i := 0; i < 9; i++ {
		task := tryPull(t, q)
		if string(task.Payload()) == `"a"` {
			ofA++
		}
		if err := task.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if ofA != 6 {
		t.Fatalf("%d of 9 deliveries went to a (weight 2) against b (weight 1), want 6", ofA)
	}
}

func TestAKeyCapRefusesAPushBeyondItWithErrFullAndNotOtherKeys(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if _, capped, err := q.MaxPendingPerKey(); err != nil || capped {
		t.Fatalf("MaxPendingPerKey on a new queue: %v, %v", capped, err)
	}
	if err := q.SetMaxPendingPerKey(1); err != nil {
		t.Fatal(err)
	}
	if err := q.SetKeyMaxPending("b", 2); err != nil {
		t.Fatal(err)
	}
	if max, capped, err := q.KeyMaxPending("a"); err != nil || !capped || max != 1 {
		t.Fatalf("KeyMaxPending(a) = %d, %v, %v; want 1", max, capped, err)
	}
	if max, _, err := q.KeyMaxPending("b"); err != nil || max != 2 {
		t.Fatalf("KeyMaxPending(b) = %d, %v; want 2", max, err)
	}
	push(t, q, `1`, tq.WithFairKey("a"))
	_, err := q.Push([]byte(`2`), tq.WithFairKey("a"))
	wantErr(t, err, tq.ErrFull, "fairness key 'a'")
	push(t, q, `3`, tq.WithFairKey("b"))
	push(t, q, `4`, tq.WithFairKey("b"))
	if n := count(t, q, tq.Pending); n != 3 {
		t.Fatalf("%d pending, want 3", n)
	}
	wantErr(t, q.SetKeyMaxPending("a\x00b", 1), tq.ErrInvalidArgument, "NUL")
	if err := q.SetMaxPendingPerKey(0); err != nil {
		t.Fatal(err)
	}
	push(t, q, `2`, tq.WithFairKey("a"))
}
