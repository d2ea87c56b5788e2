package tq_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tq-dev/tq-go"
)

func TestAGroupRunsOneAtATimeInPushOrderBesideOthers(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	a1 := push(t, q, `1`, tq.WithGroup("a", 1))
	b1 := push(t, q, `2`, tq.WithGroup("b", 1))
	a2 := push(t, q, `3`, tq.WithGroup("a", 1), tq.WithPriority(10))
	first, second := tryPull(t, q), tryPull(t, q)
	if first.ID() != a1 || second.ID() != b1 {
		t.Fatalf("pulled %d and %d; want the heads %d and %d", first.ID(), second.ID(), a1, b1)
	}
	if _, err := q.TryPull(); !errors.Is(err, tq.ErrEmpty) {
		t.Fatalf("TryPull while the group's head is held: %v", err)
	}
	info, ok, err := q.Task(a2)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if info.Group() != "a" || !slices.Equal(info.WaitingFor(), []int64{a1}) || info.Parents() != nil {
		t.Fatalf("task %d: group %q, waiting for %v, parents %v", a2, info.Group(), info.WaitingFor(), info.Parents())
	}
	if n, err := q.GroupsWaiting(); n != 1 || err != nil {
		t.Fatalf("GroupsWaiting = %d, %v; want 1 (a)", n, err)
	}
	if err := first.Finish(); err != nil {
		t.Fatal(err)
	}
	if next := tryPull(t, q); next.ID() != a2 {
		t.Fatalf("pulled %d; want %d", next.ID(), a2)
	}
	if n, err := q.GroupsWaiting(); n != 0 || err != nil {
		t.Fatalf("GroupsWaiting = %d, %v; want 0", n, err)
	}
}

func TestAGroupOfKInABatch(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	ids, err := q.PushBatch([][]byte{[]byte(`1`), []byte(`2`), []byte(`3`)}, tq.WithGroup("k", 2))
	if err != nil {
		t.Fatal(err)
	}
	held := []int64{tryPull(t, q).ID(), tryPull(t, q).ID()}
	if !slices.Equal(held, ids[:2]) {
		t.Fatalf("held %v; want %v", held, ids[:2])
	}
	if _, err := q.TryPull(); !errors.Is(err, tq.ErrEmpty) {
		t.Fatalf("TryPull with two of the group held: %v", err)
	}
}

func TestBadGroupsAreRefused(t *testing.T) {
	q, _ := openQueue(t)
	for _, bad := range []struct {
		key string
		k   int
	}{{"", 1}, {strings.Repeat("k", tq.MaxUniqueKeyLen+1), 1}, {"a\x00b", 1}, {"g", 0}, {"g", tq.MaxGroupAtOnce + 1}, {"g", -1}} {
		_, err := q.Push([]byte(`1`), tq.WithGroup(bad.key, bad.k))
		wantErr(t, err, tq.ErrInvalidArgument, "")
	}
	if n, err := q.Count(tq.Pending); err != nil || n != 0 {
		t.Fatalf("%d pending, %v", n, err)
	}
}
