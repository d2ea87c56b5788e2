package tq_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// promptly is how soon Pull must return once its context ends or its
// queue is closed: the median of the measurements must be under it.
const promptly = 100 * time.Millisecond

// tooLate fails any single measurement, loosely: the machines that run the
// tests may be loaded, and -race slows everything down.
const tooLate = time.Second

// pullAsync runs Pull, then Finish, on another goroutine, and reports the
// outcome with the time Pull returned.
func pullAsync(ctx context.Context, q *tq.Queue) <-chan pulled {
	done := make(chan pulled, 1)
	go func() {
		task, err := q.Pull(ctx)
		at := time.Now()
		if err == nil {
			err = task.Finish()
		}
		done <- pulled{at, err}
	}()
	return done
}

type pulled struct {
	at  time.Time
	err error
}

// blocked fails unless the Pull behind done is still waiting after a while.
func blocked(t *testing.T, done <-chan pulled) {
	t.Helper()
	select {
	case p := <-done:
		t.Fatalf("Pull returned %v on an empty queue", p.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// latencies checks and reports measured delays: every one under tooLate,
// their median under want.
func latencies(t *testing.T, what string, delays []time.Duration, want time.Duration) {
	t.Helper()
	slices.Sort(delays)
	median := delays[len(delays)/2]
	t.Logf("%s: median %v, max %v over %d", what, median, delays[len(delays)-1], len(delays))
	if median > want || delays[len(delays)-1] > tooLate {
		t.Fatalf("%s: %v, want a median under %v and each under %v", what, delays, want, tooLate)
	}
}

func TestPullReturnsPromptlyWhenCancelled(t *testing.T) {
	q, _ := openQueue(t)
	var delays []time.Duration
	for range 10 {
		ctx, cancel := context.WithCancel(t.Context())
		done := pullAsync(ctx, q)
		blocked(t, done)
		cancelled := time.Now()
		cancel()
		p := <-done
		if p.err != context.Canceled {
			t.Fatalf("Pull: %v, want context.Canceled itself", p.err)
		}
		delays = append(delays, p.at.Sub(cancelled))
	}
	latencies(t, "Pull after cancellation", delays, promptly)
}

func TestPullDeadline(t *testing.T) {
	q, _ := openQueue(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Millisecond)
	defer cancel()
	_, err := q.Pull(ctx)
	deadline, _ := ctx.Deadline()
	late := time.Since(deadline)
	t.Logf("Pull returned %v after its deadline", late)
	if late > tooLate {
		t.Fatalf("Pull returned %v after its deadline", late)
	}
	if err != context.DeadlineExceeded {
		t.Fatalf("Pull: %v, want context.DeadlineExceeded", err)
	}
}

// A context that has already ended claims nothing, even with a task ready.
func TestPullWithEndedContextClaimsNothing(t *testing.T) {
	q, _ := openQueue(t)
	push(t, q, `1`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := q.Pull(ctx); err != context.Canceled {
		t.Fatalf("Pull: %v", err)
	}
	if _, err := q.PullBatch(ctx, 5); err != context.Canceled {
		t.Fatalf("PullBatch: %v", err)
	}
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatal("Pull with an ended context claimed the task")
	}
}

// A push through this Queue, or through another handle on the file, wakes
// a waiting Pull.
func TestPullWokenByPush(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	other, err := tq.Open(path, tq.WithDurability(tq.DurabilityNormal))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for name, pusher := range map[string]*tq.Queue{"this Queue": q, "another Queue": other} {
		var delays []time.Duration
		for range 5 {
			done := pullAsync(t.Context(), q)
			blocked(t, done)
			if _, err := pusher.Push([]byte(`"wake up"`)); err != nil {
				t.Fatal(err)
			}
			pushed := time.Now()
			select {
			case p := <-done:
				if p.err != nil {
					t.Fatal(p.err)
				}
				delays = append(delays, max(p.at.Sub(pushed), 0))
			case <-time.After(5 * time.Second):
				t.Fatal("Pull did not see the task pushed while it waited")
			}
		}
		latencies(t, "Pull after a push through "+name, delays, promptly)
	}
}

// A delayed task wakes a waiting Pull when it comes due.
func TestPullWokenByADueTask(t *testing.T) {
	q, _ := openQueue(t)
	due := time.Now().Add(100 * time.Millisecond)
	id := push(t, q, `"soon"`, tq.WithDelay(100*time.Millisecond))
	task, err := q.Pull(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	late := time.Since(due)
	t.Logf("Pull returned %v after the task's due time", late)
	// libtq's clock counts whole milliseconds.
	if task.ID() != id || late < -5*time.Millisecond || late > tooLate {
		t.Fatalf("Pull returned task %d %v after its due time", task.ID(), late)
	}
}

func TestPullReturnsPromptlyWhenClosed(t *testing.T) {
	var delays []time.Duration
	for range 5 {
		q, _ := openQueue(t)
		waiting := []<-chan pulled{pullAsync(t.Context(), q), pullAsync(t.Context(), q)}
		batch := make(chan error, 1)
		go func() {
			_, err := q.PullBatch(t.Context(), 10)
			batch <- err
		}()
		for _, done := range waiting {
			blocked(t, done)
		}
		closed := time.Now()
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		for _, done := range waiting {
			p := <-done
			wantErr(t, p.err, tq.ErrClosed, "tq: pull: the queue was closed while waiting")
			delays = append(delays, p.at.Sub(closed))
		}
		wantErr(t, <-batch, tq.ErrClosed, "tq: pull: ")
	}
	latencies(t, "Pull after Close", delays, promptly)
}

// Interrupt ends every wait, for good, with ErrInterrupted; a ready task
// is still claimed.
func TestInterrupt(t *testing.T) {
	q, _ := openQueue(t)
	done := pullAsync(t.Context(), q)
	blocked(t, done)
	if err := q.Interrupt(); err != nil {
		t.Fatal(err)
	}
	p := <-done
	wantErr(t, p.err, tq.ErrInterrupted, "tq: pull: ")
	start := time.Now()
	_, err := q.Pull(t.Context())
	wantErr(t, err, tq.ErrInterrupted, "tq: pull: ")
	if waited := time.Since(start); waited > tooLate {
		t.Fatalf("a Pull after Interrupt waited %v", waited)
	}
	id := push(t, q, `1`)
	task, err := q.Pull(t.Context())
	if err != nil || task.ID() != id {
		t.Fatalf("Pull of a ready task after Interrupt: %v", err)
	}
	if _, err := task.FinishAndPull(t.Context()); !errors.Is(err, tq.ErrInterrupted) {
		t.Fatalf("FinishAndPull after Interrupt: %v", err)
	}
	// Other calls go on.
	push(t, q, `2`)
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatalf("pending = %d", n)
	}
	q.Close()
	wantErr(t, q.Interrupt(), tq.ErrClosed, "tq: interrupt: ")
}

// Many Pulls waiting and cancelled at once: each returns its own
// context's error, and cancelling one leaves the others waiting.
func TestManyWaitingPulls(t *testing.T) {
	q, _ := openQueue(t)
	const n = 8
	cancels := make([]context.CancelFunc, n)
	dones := make([]<-chan pulled, n)
	for i := range n {
		var ctx context.Context
		ctx, cancels[i] = context.WithCancel(t.Context())
		dones[i] = pullAsync(ctx, q)
	}
	blocked(t, dones[0])
	cancels[0]()
	if p := <-dones[0]; p.err != context.Canceled {
		t.Fatalf("cancelled Pull: %v", p.err)
	}
	for _, done := range dones[1:] {
		blocked(t, done)
	}
	push(t, q, `1`)
	time.Sleep(100 * time.Millisecond)
	finished := 0
	for i, done := range dones[1:] {
		cancels[i+1]()
		switch p := <-done; p.err {
		case nil:
			finished++
		case context.Canceled:
		default:
			t.Fatalf("Pull: %v", p.err)
		}
	}
	if finished != 1 {
		t.Fatalf("%d Pulls got the one task", finished)
	}
}
