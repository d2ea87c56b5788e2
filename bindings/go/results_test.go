package tq_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

func TestAResultIsKeptWithoutHistoryForAnyoneToRead(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `"resize"`)
	task := tryPull(t, q)
	if err := task.FinishWithResult([]byte(`{"width": 640}`)); err != nil {
		t.Fatalf("FinishWithResult: %v", err)
	}
	wantErr(t, task.Finish(), tq.ErrNotHeld, "already finished")

	other, err := tq.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	info, found, err := other.Task(id)
	if err != nil || !found {
		t.Fatalf("Task(%d) = %v, %v", id, found, err)
	}
	if info.State() != tq.Done || string(info.Result()) != `{"width": 640}` || string(info.Payload()) != `"resize"` {
		t.Fatalf("Task(%d): state %v, result %s, payload %s", id, info.State(), info.Result(), info.Payload())
	}
	if info.Progress() != nil {
		t.Fatalf("progress %s, want none", info.Progress())
	}
	if _, found, err := q.Task(id + 1); err != nil || found {
		t.Fatalf("Task of no task = %v, %v; want not found", found, err)
	}
}

func TestFinishWithResultJSONEncodes(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithHistory())
	id := push(t, q, `1`)
	task := tryPull(t, q)
	if err := task.FinishWithResultJSON(map[string]int{"sum": 3}); err != nil {
		t.Fatal(err)
	}
	info, _, err := q.Task(id)
	if err != nil || string(info.Result()) != `{"sum":3}` {
		t.Fatalf("result %s, %v", info.Result(), err)
	}
	listed, err := q.List(tq.Done, 0, 10)
	if err != nil || len(listed) != 1 || string(listed[0].Result()) != `{"sum":3}` {
		t.Fatalf("List(Done) = %+v, %v", listed, err)
	}
}

func TestABadResultChangesNothing(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithMaxPayloadLen(16))
	push(t, q, `1`)
	task := tryPull(t, q)
	wantErr(t, task.FinishWithResult([]byte(`{"a":`)), tq.ErrInvalidJSON, "")
	wantErr(t, task.FinishWithResult(nil), tq.ErrInvalidJSON, "")
	wantErr(t, task.FinishWithResult([]byte("{}\x00{")), tq.ErrInvalidJSON, "NUL byte at byte 2")
	wantErr(t, task.FinishWithResult([]byte(`"a string far longer than sixteen bytes"`)), tq.ErrInvalidArgument, "")
	var unsupported *json.UnsupportedValueError
	if err := task.FinishWithResultJSON(math.NaN()); !errors.As(err, &unsupported) {
		t.Fatalf("FinishWithResultJSON(NaN): %v, want json's error", err)
	}
	if n := count(t, q, tq.Leased); n != 1 {
		t.Fatalf("%d leased after refused results, want 1", n)
	}
	if err := task.FinishWithResult([]byte(`true`)); err != nil {
		t.Fatalf("FinishWithResult after refused ones: %v", err)
	}
}

func TestProgressIsReadWhileTheTaskRuns(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `"encode"`)
	task := tryPull(t, q)
	if err := task.ExtendWithProgress(time.Minute, []byte(`{"done": 10}`)); err != nil {
		t.Fatalf("ExtendWithProgress: %v", err)
	}
	info, found, err := q.Task(id)
	if err != nil || !found || info.State() != tq.Leased || string(info.Progress()) != `{"done": 10}` {
		t.Fatalf("Task = %v %v; state %v, progress %s", found, err, info.State(), info.Progress())
	}
	if err := task.ExtendWithProgressJSON(time.Minute, []int{20}); err != nil {
		t.Fatal(err)
	}
	if info, _, _ := q.Task(id); string(info.Progress()) != `[20]` {
		t.Fatalf("progress %s, want [20]", info.Progress())
	}
	wantErr(t, task.ExtendWithProgress(time.Minute, []byte(`nope`)), tq.ErrInvalidJSON, "")
	wantErr(t, task.ExtendWithProgress(-time.Second, []byte(`1`)), tq.ErrInvalidArgument, "negative")
	if info, _, _ := q.Task(id); string(info.Progress()) != `[20]` {
		t.Fatalf("progress %s after refused ones, want [20]", info.Progress())
	}
	if _, err := q.CancelTask(id, "stop"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, task.ExtendWithProgress(time.Minute, []byte(`1`)), tq.ErrCancelled, "")
}

func TestWaitReturnsTheOutcomeOnceTheTaskEnds(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `"job"`)
	task := tryPull(t, q)
	go func() {
		time.Sleep(100 * time.Millisecond)
		task.FinishWithResult([]byte(`"ok"`))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := q.Wait(ctx, id)
	if err != nil || info.State() != tq.Done || string(info.Result()) != `"ok"` {
		t.Fatalf("Wait = state %v, result %s, %v", info.State(), info.Result(), err)
	}
	// An ended task answers at once.
	info, err = q.Wait(ctx, id)
	if err != nil || string(info.Result()) != `"ok"` {
		t.Fatalf("second Wait = %s, %v", info.Result(), err)
	}
}

func TestWaitSeesADeadTaskWithItsReason(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithMaxAttempts(1))
	id := push(t, q, `1`)
	if err := tryPull(t, q).Fail("broken"); err != nil {
		t.Fatal(err)
	}
	info, err := q.Wait(context.Background(), id)
	if reason, _ := info.LastError(); err != nil || info.State() != tq.Dead || reason != "broken" {
		t.Fatalf("Wait = %v, %q, %v", info.State(), reason, err)
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `1`)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := q.Wait(ctx, id); err != context.DeadlineExceeded {
		t.Fatalf("Wait past its deadline: %v", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("Wait returned %v after its deadline of 100ms", waited)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	if _, err := q.Wait(ctx, id); err != context.Canceled {
		t.Fatalf("Wait cancelled: %v", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("Wait returned %v after a cancel at 100ms", waited)
	}
	if _, err := q.Wait(ctx, id); err != context.Canceled {
		t.Fatalf("Wait with an ended context: %v", err)
	}
}

func TestWaitErrors(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `1`)
	_, err := q.Wait(context.Background(), id+1)
	wantErr(t, err, tq.ErrInvalidArgument, "no task")
	// Finished without a result on a queue without history: not kept.
	if err := tryPull(t, q).Finish(); err != nil {
		t.Fatal(err)
	}
	_, err = q.Wait(context.Background(), id)
	wantErr(t, err, tq.ErrInvalidArgument, "no task")

	running := push(t, q, `2`)
	done := make(chan error, 1)
	go func() {
		_, err := q.Wait(context.Background(), running)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	q.Close()
	select {
	case err := <-done:
		wantErr(t, err, tq.ErrClosed, "closed")
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still waiting 5s after Close")
	}
	_, _, err = q.Task(running)
	wantErr(t, err, tq.ErrClosed, "")
}

func TestWaitIsInterrupted(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `1`)
	time.AfterFunc(100*time.Millisecond, func() { q.Interrupt() })
	_, err := q.Wait(context.Background(), id)
	wantErr(t, err, tq.ErrInterrupted, "")
}

func TestResultRetentionOption(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithResultRetention(time.Millisecond))
	first := push(t, q, `1`)
	if err := tryPull(t, q).FinishWithResult([]byte(`1`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	push(t, q, `2`)
	// A later finish with a result deletes the results whose time passed.
	if err := tryPull(t, q).FinishWithResult([]byte(`2`)); err != nil {
		t.Fatal(err)
	}
	if _, found, err := q.Task(first); err != nil || found {
		t.Fatalf("Task(%d) past its retention = %v, %v; want not found", first, found, err)
	}
	for _, d := range []time.Duration{0, -time.Second, 367 * 24 * time.Hour} {
		q, err := tq.Open(t.TempDir()+"/r.db", tq.WithResultRetention(d))
		if q != nil {
			q.Close()
			t.Fatalf("Open with a retention of %v succeeded", d)
		}
		wantErr(t, err, tq.ErrInvalidArgument, "")
	}
}
