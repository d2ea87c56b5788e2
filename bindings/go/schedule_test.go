package tq_test

import (
	"context"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

func TestSchedulesAreAddedListedReplacedAndRemoved(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	err := q.AddSchedule("nightly", []byte(`{"report":true}`), tq.Cron("0 2 * * *"),
		tq.WithTimeZone("Europe/Paris"), tq.WithSchedulePriority(3), tq.WithScheduleMaxAttempts(2),
		tq.WithCatchUp(tq.CatchUpEach, 5))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddSchedule("often", []byte(`1`), tq.Every(time.Minute)); err != nil {
		t.Fatal(err)
	}
	schedules, err := q.Schedules()
	if err != nil || len(schedules) != 2 {
		t.Fatalf("Schedules = %+v, %v", schedules, err)
	}
	nightly, often := schedules[0], schedules[1]
	if nightly.Name != "nightly" || nightly.Cron != "0 2 * * *" || nightly.Every != 0 ||
		nightly.TimeZone != "Europe/Paris" || string(nightly.Payload) != `{"report":true}` ||
		nightly.Priority != 3 || nightly.MaxAttempts != 2 || nightly.CatchUp != tq.CatchUpEach ||
		nightly.CatchUpLimit != 5 || nightly.Paused || !nightly.NextSlot.After(time.Now()) {
		t.Fatalf("nightly: %+v", nightly)
	}
	if often.Cron != "" || often.Every != time.Minute || often.CatchUp != tq.CatchUpOne {
		t.Fatalf("often: %+v", often)
	}
	wantErr(t, q.AddSchedule("often", []byte(`2`), tq.Every(time.Second)), tq.ErrInvalidArgument, "'often'")
	if err := q.ReplaceSchedule("often", []byte(`2`), tq.Every(time.Second)); err != nil {
		t.Fatal(err)
	}
	// Declared again unchanged, at a later start: the next slot stays.
	before, _ := q.Schedules()
	time.Sleep(20 * time.Millisecond)
	if err := q.UpsertSchedule("often", []byte(`2`), tq.Every(time.Second)); err != nil {
		t.Fatal(err)
	}
	after, _ := q.Schedules()
	if !after[1].NextSlot.Equal(before[1].NextSlot) {
		t.Fatalf("upsert moved the next slot: %v then %v", before[1].NextSlot, after[1].NextSlot)
	}
	if err := q.RemoveSchedule("nightly"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, q.RemoveSchedule("nightly"), tq.ErrInvalidArgument, "no schedule named 'nightly'")
	schedules, _ = q.Schedules()
	if len(schedules) != 1 || string(schedules[0].Payload) != `2` {
		t.Fatalf("after replace and remove: %+v", schedules)
	}
}

func TestBadSchedulesAreRefusedNamingTheProblem(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	wantErr(t, q.AddSchedule("bad", []byte(`1`), tq.Cron("61 * * * *")), tq.ErrInvalidArgument, "'61 * * * *'")
	wantErr(t, q.AddSchedule("bad", []byte(`1`), tq.Cron("@daily"), tq.WithTimeZone("Mars/Olympus")),
		tq.ErrInvalidArgument, "'Mars/Olympus'")
	wantErr(t, q.AddSchedule("bad", []byte(`1`)), tq.ErrInvalidArgument, "Cron or Every")
	wantErr(t, q.AddSchedule("bad", []byte(`nope`), tq.Every(time.Second)), tq.ErrInvalidJSON, "")
	wantErr(t, q.AddSchedule("bad", []byte(`1`), tq.Every(time.Second), tq.WithCatchUp(tq.CatchUpEach, 0)),
		tq.ErrInvalidArgument, "")
	wantErr(t, q.PauseSchedule("missing"), tq.ErrInvalidArgument, "missing")
	if schedules, err := q.Schedules(); err != nil || len(schedules) != 0 {
		t.Fatalf("Schedules after refusals = %+v, %v", schedules, err)
	}
}

func TestAWaitingPullTakesEachSlotAtItsTime(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if err := q.AddSchedule("tick", []byte(`"tick"`), tq.Every(200*time.Millisecond),
		tq.WithCatchUp(tq.CatchUpEach, 100)); err != nil {
		t.Fatal(err)
	}
	var slots []time.Time
	deadline := time.Now().Add(1100 * time.Millisecond)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		task, err := q.Pull(ctx)
		cancel()
		if err != nil {
			continue
		}
		slots = append(slots, task.RunAt())
		if err := task.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if len(slots) < 4 {
		t.Fatalf("%d slots in 1.1 s", len(slots))
	}
	for i := 1; i < len(slots); i++ {
		if gap := slots[i].Sub(slots[i-1]); gap != 200*time.Millisecond {
			t.Fatalf("slots %v apart: %v", gap, slots)
		}
	}
}

func TestAPausedScheduleEnqueuesNothingUntilResumed(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	if err := q.AddSchedule("tick", []byte(`1`), tq.Every(100*time.Millisecond),
		tq.WithCatchUp(tq.CatchUpEach, 100)); err != nil {
		t.Fatal(err)
	}
	if err := q.PauseSchedule("tick"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond)
	if n, err := q.RunDueSchedules(); err != nil || n != 0 {
		t.Fatalf("RunDueSchedules while paused = %d, %v", n, err)
	}
	if err := q.ResumeSchedule("tick"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if n, err := q.RunDueSchedules(); err != nil || n < 1 || n > 3 {
		t.Fatalf("RunDueSchedules after resuming = %d, %v", n, err)
	}
}
