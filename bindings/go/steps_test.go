package tq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

type charge struct {
	ID string `json:"id"`
}

func TestAStepRecordedByOneDeliveryIsReadByTheNext(t *testing.T) {
	q, _ := retryAtOnce(t, tq.WithHistory())
	id := push(t, q, `{"order": 7}`)
	ctx := context.Background()
	runs := 0
	chargeCard := func() (charge, error) {
		runs++
		return charge{ID: "ch_1"}, nil
	}

	first := tryPull(t, q)
	if got, err := tq.Step(ctx, first, "charge", chargeCard); err != nil || got.ID != "ch_1" {
		t.Fatalf("Step = %+v, %v", got, err)
	}
	failed := errors.New("the mail server is down")
	if _, err := tq.Step(ctx, first, "mail", func() (bool, error) { return false, failed }); !errors.Is(err, failed) {
		t.Fatalf("a failing step: %v", err)
	}
	if err := first.Fail("mail failed"); err != nil {
		t.Fatal(err)
	}

	second := tryPull(t, q)
	if second.ID() != id {
		t.Fatalf("pulled %d, want %d", second.ID(), id)
	}
	if got, err := tq.Step(ctx, second, "charge", chargeCard); err != nil || got.ID != "ch_1" || runs != 1 {
		t.Fatalf("Step = %+v, %v after %d runs; want the recorded output, run once", got, err, runs)
	}
	if _, found, err := second.StepOutput("mail"); err != nil || found {
		t.Fatalf("a failed step was recorded: %v, %v", found, err)
	}
	stored, err := second.RecordStep("charge", []byte(`{"id": "ch_2"}`))
	if err != nil || stored {
		t.Fatalf("RecordStep of a recorded step = %v, %v; want kept first", stored, err)
	}
	if _, err := second.RecordStep("bad", []byte(`{nope`)); !errors.Is(err, tq.ErrInvalidJSON) {
		t.Fatalf("bad JSON: %v", err)
	}
	if _, err := second.RecordStep("a\x00b", []byte(`1`)); !errors.Is(err, tq.ErrInvalidArgument) {
		t.Fatalf("a name with NUL: %v", err)
	}
	if err := second.Finish(); err != nil {
		t.Fatal(err)
	}
	info, _, err := q.Task(id)
	if err != nil || len(info.Steps()) != 1 || info.Steps()[0].Name != "charge" ||
		string(info.Steps()[0].Output) != `{"id":"ch_1"}` || time.Since(info.Steps()[0].RecordedAt) > time.Minute {
		t.Fatalf("Steps = %+v, %v", info.Steps(), err)
	}
}

func TestAStaleDeliveryRecordsNoStepAndStepsAreClearedForARetry(t *testing.T) {
	q, _ := retryAtOnce(t, tq.WithHistory(), tq.WithMaxAttempts(2))
	id := push(t, q, `1`)
	first := tryPull(t, q, tq.WithLease(30*time.Millisecond))
	if _, err := first.RecordStep("one", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	second := tryPull(t, q)
	if _, err := first.RecordStep("two", []byte(`2`)); !errors.Is(err, tq.ErrNotHeld) {
		t.Fatalf("a stale delivery's step: %v", err)
	}
	for _, name := range []string{"two", "three"} {
		if _, err := second.RecordStep(name, []byte(`true`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.ClearStepsAfter(id, "one"); !errors.Is(err, tq.ErrInvalidArgument) {
		t.Fatalf("clearing a held task's steps: %v", err)
	}
	if err := second.Fail("three went wrong"); err != nil {
		t.Fatal(err)
	}
	if n, err := q.ClearStepsAfter(id, "one"); err != nil || n != 2 {
		t.Fatalf("ClearStepsAfter = %d, %v; want 2", n, err)
	}
	info, _, err := q.Task(id)
	if err != nil || len(info.Steps()) != 1 || info.Steps()[0].Name != "one" {
		t.Fatalf("Steps = %+v, %v", info.Steps(), err)
	}
}
