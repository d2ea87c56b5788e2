package tq_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/tq-dev/tq-go"
)

func TestATaskWaitsForItsParentsAndKnowsThem(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	first := push(t, q, `1`)
	second := push(t, q, `2`)
	join, err := q.Push([]byte(`"join"`), tq.WithAfter(first, second))
	if err != nil {
		t.Fatal(err)
	}
	pending := list(t, q, tq.Pending)
	if len(pending) != 3 || !slices.Equal(pending[2].WaitingFor(), []int64{first, second}) {
		t.Fatalf("pending tasks: %+v", pending)
	}
	a, b := tryPull(t, q), tryPull(t, q)
	if _, err := q.TryPull(); !errors.Is(err, tq.ErrEmpty) {
		t.Fatalf("TryPull while the join waits: %v", err)
	}
	if err := a.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	task := tryPull(t, q)
	if task.ID() != join || !slices.Equal(task.Parents(), []int64{first, second}) {
		t.Fatalf("pulled %d with parents %v; want %d after %d and %d", task.ID(), task.Parents(), join, first, second)
	}
	_, err = q.Push([]byte(`1`), tq.WithAfter(join+100))
	wantErr(t, err, tq.ErrInvalidArgument, "no task")
	_, err = q.Push([]byte(`1`), tq.WithOnParentFailure(tq.ParentFailure(7)))
	wantErr(t, err, tq.ErrInvalidArgument, "policy")
}

func TestAGraphIsPushedWholeOrNotAtAll(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal), tq.WithMaxAttempts(1))
	_, err := q.PushItems([]tq.PushItem{
		{Payload: []byte(`"root"`)},
		{Payload: []byte(`"child"`), Options: []tq.PushOption{tq.WithAfterItem(2)}},
	})
	wantErr(t, err, tq.ErrInvalidArgument, "item 1")
	if n := count(t, q, tq.Pending); n != 0 {
		t.Fatalf("%d tasks stored by a refused graph", n)
	}
	ids, err := q.PushItems([]tq.PushItem{
		{Payload: []byte(`"root"`)},
		{Payload: []byte(`"cancelled"`), Options: []tq.PushOption{tq.WithAfterItem(0)}},
		{Payload: []byte(`"anyway"`), Options: []tq.PushOption{
			tq.WithAfterItem(0), tq.WithOnParentFailure(tq.ParentFailureRunAnyway)}},
	})
	if err != nil || len(ids) != 3 {
		t.Fatalf("PushItems = %v, %v", ids, err)
	}
	root := tryPull(t, q)
	if err := root.Fail("broken"); err != nil {
		t.Fatal(err)
	}
	task := tryPull(t, q)
	if task.ID() != ids[2] {
		t.Fatalf("pulled %d; want the task run anyway, %d", task.ID(), ids[2])
	}
	if n := count(t, q, tq.Pending); n != 0 {
		t.Fatalf("%d tasks still pending: the one waiting for the dead root is cancelled", n)
	}
}
