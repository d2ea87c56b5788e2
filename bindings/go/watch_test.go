package tq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// openOther opens a second handle on the queue file at path, closed at the
// end of the test: what another process does, it does through its own
// handle.
func openOther(t *testing.T, path string, opts ...tq.Option) *tq.Queue {
	t.Helper()
	q, err := tq.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// waitDone waits up to 10 s for ctx to be done and fails unless its cause
// matches kind and mentions text.
func waitDone(t *testing.T, ctx context.Context, kind error, text string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the context was not done after 10 s (want %v)", kind)
	}
	wantErr(t, context.Cause(ctx), kind, text)
}

// wantLive fails if ctx is done.
func wantLive(t *testing.T, ctx context.Context) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("the context is done: %v", context.Cause(ctx))
	}
}

// wantGoroutinesBackTo waits up to 10 s for the process to run no more
// than n goroutines: a watcher that outlived its context would stay.
func wantGoroutinesBackTo(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the contexts", runtime.NumGoroutine(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestATaskContextIsCancelledWhenTheTaskIsCancelled(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	other := openOther(t, path)
	id := push(t, q, `"long"`)
	task := tryPull(t, q)
	ctx, cancel := task.Context(context.Background())
	defer cancel()
	// The holder keeps using the task while its context is watched.
	if err := task.Extend(time.Minute); err != nil {
		t.Fatal(err)
	}
	wantLive(t, ctx)
	start := time.Now()
	if state, err := other.CancelTask(id, "stop"); err != nil || state != tq.Leased {
		t.Fatalf("CancelTask = %v, %v; want leased", state, err)
	}
	waitDone(t, ctx, tq.ErrCancelled, fmt.Sprintf("task %d was cancelled", id))
	t.Logf("cancelled through another handle: the context was done after %v", time.Since(start))
	var cause *tq.Error
	if !errors.As(context.Cause(ctx), &cause) || cause.Op != "context" {
		t.Fatalf("cause %#v, want an *Error of op context", context.Cause(ctx))
	}
	wantErr(t, task.Extend(time.Minute), tq.ErrCancelled, "cancelled")
	wantErr(t, task.Finish(), tq.ErrNotHeld, "")
	if n := count(t, q, tq.Leased); n != 0 {
		t.Fatalf("%d leased after the holder was told", n)
	}
}

func TestATaskContextOfACancelledTaskEndsWithErrCancelledWhenFinished(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	id := push(t, q, `"long"`)
	task := tryPull(t, q)
	if _, err := q.CancelTask(id, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := task.Context(context.Background())
	defer cancel()
	// Whichever tells first, the context's cause is the cancellation.
	wantErr(t, task.Finish(), tq.ErrCancelled, "cancelled")
	waitDone(t, ctx, tq.ErrCancelled, "cancelled")
}

func TestATaskContextEndsWithTheDelivery(t *testing.T) {
	cases := []struct {
		name string
		end  func(*tq.Queue, *tq.Task) error
		kind error
		text string
	}{
		{"finish", func(_ *tq.Queue, task *tq.Task) error { return task.Finish() },
			tq.ErrNotHeld, "was already finished"},
		{"finish with result", func(_ *tq.Queue, task *tq.Task) error { return task.FinishWithResult([]byte(`1`)) },
			tq.ErrNotHeld, "was already finished"},
		{"fail", func(_ *tq.Queue, task *tq.Task) error { return task.Fail("no") },
			tq.ErrNotHeld, "was already failed"},
		{"snooze", func(_ *tq.Queue, task *tq.Task) error { return task.Snooze(time.Hour) },
			tq.ErrNotHeld, "was already snoozed"},
		{"close", func(_ *tq.Queue, task *tq.Task) error { task.Close(); return nil },
			tq.ErrClosed, "was closed"},
		{"finish batch", func(q *tq.Queue, task *tq.Task) error {
			errs, err := q.FinishBatch([]*tq.Task{task})
			if err != nil {
				return err
			}
			return errs[0]
		}, tq.ErrNotHeld, "was already finished"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
			push(t, q, `"work"`)
			task := tryPull(t, q)
			ctx, cancel := task.Context(context.Background())
			defer cancel()
			second, cancelSecond := task.Context(context.Background())
			defer cancelSecond()
			if err := c.end(q, task); err != nil {
				t.Fatal(err)
			}
			// Ended before the call returned: no wait.
			if ctx.Err() == nil || second.Err() == nil {
				t.Fatal("a context of the delivery is not done once it ended")
			}
			// Worded by libtq when its wait saw the end first.
			wantErr(t, context.Cause(ctx), c.kind, "task")
			wantErr(t, context.Cause(second), c.kind, "task")
			// A context of a delivery that is over is done at once.
			after, cancelAfter := task.Context(context.Background())
			defer cancelAfter()
			if after.Err() == nil {
				t.Fatal("a context of an ended delivery is not done")
			}
			wantErr(t, context.Cause(after), c.kind, c.text)
		})
	}
}

func TestATaskContextEndsWhenTheLeaseIsTakenBack(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	other := openOther(t, path)
	push(t, q, `"slow"`)
	task := tryPull(t, q, tq.WithLease(50*time.Millisecond))
	ctx, cancel := task.Context(context.Background())
	defer cancel()
	time.Sleep(100 * time.Millisecond)
	again := tryPull(t, other)
	waitDone(t, ctx, tq.ErrNotHeld, "is over")
	wantErr(t, task.Finish(), tq.ErrNotHeld, "")
	if err := again.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestATaskContextEndsWithItsParentOrItsCancelFunc(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	push(t, q, `"work"`)
	task := tryPull(t, q)
	before := runtime.NumGoroutine()

	ctx, cancel := task.Context(context.Background())
	wantLive(t, ctx)
	cancel()
	waitDone(t, ctx, context.Canceled, "")
	cancel()

	parent, cancelParent := context.WithCancelCause(context.Background())
	ctx, cancel = task.Context(parent)
	defer cancel()
	stop := errors.New("shutting down")
	cancelParent(stop)
	waitDone(t, ctx, stop, "shutting down")

	deadline, cancelDeadline := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelDeadline()
	ctx, cancel = task.Context(deadline)
	defer cancel()
	waitDone(t, ctx, context.DeadlineExceeded, "")

	// A parent already done starts nothing.
	ctx, cancel = task.Context(parent)
	defer cancel()
	if !errors.Is(context.Cause(ctx), stop) {
		t.Fatalf("cause %v, want the parent's", context.Cause(ctx))
	}
	wantGoroutinesBackTo(t, before)
	// The delivery is untouched.
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestManyTaskContextsLeaveNoGoroutine(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	for i := range 20 {
		push(t, q, fmt.Sprint(i))
	}
	before := runtime.NumGoroutine()
	for i := range 20 {
		task := tryPull(t, q)
		ctx, cancel := task.Context(context.Background())
		switch i % 4 {
		case 0:
			cancel()
		case 1:
			if err := task.Finish(); err != nil {
				t.Fatal(err)
			}
			cancel()
		case 2:
			task.Close()
		case 3:
			if _, err := q.CancelTask(task.ID(), ""); err != nil {
				t.Fatal(err)
			}
			waitDone(t, ctx, tq.ErrCancelled, "")
		}
		<-ctx.Done()
	}
	wantGoroutinesBackTo(t, before)
}

func TestATaskContextEndsWhenTheQueueIsClosedOrInterrupted(t *testing.T) {
	path := t.TempDir() + "/q.db"
	q := openOther(t, path)
	push(t, q, `"a"`)
	push(t, q, `"b"`)
	first := tryPull(t, q)
	second := tryPull(t, q)
	ctx, cancel := first.Context(context.Background())
	defer cancel()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, tq.ErrClosed, "closed")
	wantErr(t, first.Finish(), tq.ErrClosed, "")
	// Contexts made after the Close end at once.
	late, cancelLate := second.Context(context.Background())
	defer cancelLate()
	waitDone(t, late, tq.ErrClosed, "closed")
	second.Close()

	q = openOther(t, path)
	push(t, q, `"c"`)
	task := tryPull(t, q)
	ctx, cancel = task.Context(context.Background())
	defer cancel()
	if err := q.Interrupt(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, tq.ErrInterrupted, "interrupted")
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestATaskContextOfATaskNotPulledIsDoneAtOnce(t *testing.T) {
	var task tq.Task
	ctx, cancel := task.Context(context.Background())
	defer cancel()
	if ctx.Err() == nil {
		t.Fatal("the context of a Task not pulled is not done")
	}
	wantErr(t, context.Cause(ctx), tq.ErrClosed, "not pulled")
}

// Ending a delivery while its contexts are made, cancelled and watching,
// from several goroutines: the race detector, and libtq refusing a freed
// task, find a C task freed under a watcher.
func TestTaskContextsRaceWithTheEndOfTheirDelivery(t *testing.T) {
	q, path := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	other := openOther(t, path)
	before := runtime.NumGoroutine()
	for i := range 30 {
		push(t, q, fmt.Sprint(i))
		task := tryPull(t, q)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				ctx, cancel := task.Context(context.Background())
				defer cancel()
				<-ctx.Done()
			})
		}
		wg.Go(func() {
			// Refused once the task is finished and deleted.
			if _, err := other.CancelTask(task.ID(), ""); err != nil && !errors.Is(err, tq.ErrInvalidArgument) {
				t.Error(err)
			}
		})
		switch i % 3 {
		case 0:
			if err := task.Finish(); err != nil && !errors.Is(err, tq.ErrCancelled) {
				t.Error(err)
			}
		case 1:
			task.Close()
		case 2:
			if err := task.Extend(time.Minute); err != nil && !errors.Is(err, tq.ErrCancelled) {
				t.Error(err)
			}
			task.Close()
		}
		wg.Wait()
	}
	wantGoroutinesBackTo(t, before)
}

// TestPostgresTaskContext runs on TQ_TEST_POSTGRES_URL as
// TestPostgresPushPullFinish does: a cancellation through another handle
// reaches the holder's context through the server's notification.
func TestPostgresTaskContext(t *testing.T) {
	url := os.Getenv("TQ_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)")
	}
	schema := fmt.Sprintf("go_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	q := openOther(t, url, tq.WithPostgresSchema(schema))
	other := openOther(t, url, tq.WithPostgresSchema(schema))
	id := push(t, q, `"long"`)
	task := tryPull(t, q)
	ctx, cancel := task.Context(context.Background())
	defer cancel()
	if err := task.Extend(time.Minute); err != nil {
		t.Fatal(err)
	}
	wantLive(t, ctx)
	start := time.Now()
	if _, err := other.CancelTask(id, "stop"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, tq.ErrCancelled, "cancelled")
	t.Logf("the context was done %v after the cancel", time.Since(start))
	wantErr(t, task.Finish(), tq.ErrCancelled, "cancelled")

	push(t, q, `"short"`)
	task = tryPull(t, q)
	ctx, cancel = task.Context(context.Background())
	defer cancel()
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, tq.ErrNotHeld, "finished")
}

// TestPostgresTaskContextOutlivesCutConnectionsAndARestart: a holder
// whose connections to the server are cut (pg_terminate_backend, through
// psql), or whose server restarts (cluster.sh, when TQ_TEST_POSTGRES_DIR
// names its directory, as `make test-postgres` does), keeps its task, so
// its work goes on: the watch reads again once it can, and still hears the
// cancellation afterwards.
func TestPostgresTaskContextOutlivesCutConnectionsAndARestart(t *testing.T) {
	url := os.Getenv("TQ_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)")
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql, which cuts the holder's connections, is not installed")
	}
	schema := fmt.Sprintf("go_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	name := "tq_" + schema
	separator := "?"
	if strings.Contains(url, "?") {
		separator = "&"
	}
	q := openOther(t, url+separator+"application_name="+name, tq.WithPostgresSchema(schema))
	other := openOther(t, url, tq.WithPostgresSchema(schema))
	id := push(t, q, `"long"`)
	task := tryPull(t, q)
	ctx, cancel := task.Context(context.Background())
	defer cancel()
	faults := [][]string{{psql, url, "-Atc", "SELECT count(pg_terminate_backend(pid)) " +
		"FROM pg_stat_activity WHERE application_name = '" + name + "'"}}
	if dir := os.Getenv("TQ_TEST_POSTGRES_DIR"); dir != "" {
		faults = append(faults, []string{"../../tests/postgres/cluster.sh", "restart", dir, "immediate"})
	} else {
		t.Log("TQ_TEST_POSTGRES_DIR is not set: no restart of the server, only cut connections")
	}
	for _, fault := range faults {
		if out, err := exec.Command(fault[0], fault[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", fault, err, out)
		}
		// Past the watch's read of the task once a second.
		time.Sleep(1500 * time.Millisecond)
		wantLive(t, ctx)
	}
	if _, err := other.CancelTask(id, "stop"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, tq.ErrCancelled, "cancelled")
}
