package tq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// workUntil runs q.Work with handler and opts until done is closed, and
// returns Work's error.
func workUntil(t *testing.T, q *tq.Queue, done <-chan struct{}, handler tq.Handler, opts ...tq.WorkOption) error {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the handlers did not end within 30 s")
		}
		stop()
	}()
	return q.Work(ctx, handler, opts...)
}

// drainWithWork pushes n tasks and works them with Work, checking that each
// is handled exactly once, that no more than concurrency handlers ever run
// at once (nor more tasks are held), and that none is left.
func drainWithWork(t *testing.T, q *tq.Queue, n, concurrency int) {
	for i := range n {
		push(t, q, fmt.Sprint(i))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var running, mostRunning, mostLeased atomic.Int64
	var handled atomic.Int64
	done := make(chan struct{})
	err := workUntil(t, q, done, func(ctx context.Context, task *tq.Task) error {
		now := running.Add(1)
		defer running.Add(-1)
		for {
			most := mostRunning.Load()
			if now <= most || mostRunning.CompareAndSwap(most, now) {
				break
			}
		}
		if leased := count(t, q, tq.Leased); leased > mostLeased.Load() {
			mostLeased.Store(leased)
		}
		mu.Lock()
		seen[string(task.Payload())]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		if handled.Add(1) == int64(n) {
			close(done)
		}
		return nil
	}, tq.WithConcurrency(concurrency), tq.WithErrorHandler(func(task *tq.Task, err error) {
		t.Errorf("Work reported %v", err)
	}))
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	for i := range n {
		if got := seen[fmt.Sprint(i)]; got != 1 {
			t.Errorf("task %d handled %d times", i, got)
		}
	}
	if left := count(t, q, tq.Pending) + count(t, q, tq.Leased); left != 0 {
		t.Errorf("%d tasks left unfinished once Work returned", left)
	}
	if mostRunning.Load() > int64(concurrency) || mostLeased.Load() > int64(concurrency) {
		t.Errorf("at most %d handlers at once, got %d running and %d leased",
			concurrency, mostRunning.Load(), mostLeased.Load())
	}
	if concurrency > 1 && mostRunning.Load() < 2 {
		t.Errorf("the handlers never ran side by side (most at once: %d)", mostRunning.Load())
	}
}

func TestWorkHandlesEachTaskOnceAndHoldsNoMoreThanItsHandlers(t *testing.T) {
	q, _ := openQueue(t, tq.WithDurability(tq.DurabilityNormal))
	drainWithWork(t, q, 300, 8)
}

func TestWorkFailsATaskWhoseHandlerErrsOrPanics(t *testing.T) {
	q, _ := openQueue(t, tq.WithMaxAttempts(1), tq.WithHistory())
	erring := push(t, q, `"err"`)
	panicking := push(t, q, `"panic"`)
	var handled atomic.Int64
	done := make(chan struct{})
	err := workUntil(t, q, done, func(ctx context.Context, task *tq.Task) error {
		defer func() {
			if handled.Add(1) == 2 {
				close(done)
			}
		}()
		if string(task.Payload()) == `"panic"` {
			panic("the converter broke")
		}
		return errors.New("no such file\x00")
	})
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	for id, want := range map[int64]string{erring: `no such file\x00`, panicking: "panic: the converter broke"} {
		info, found, err := q.Task(id)
		if err != nil || !found {
			t.Fatalf("Task(%d) = %v, %v", id, found, err)
		}
		reason, _ := info.LastError()
		if info.State() != tq.Dead || !strings.HasPrefix(reason, want) {
			t.Errorf("task %d is %v with reason %q; want dead with a reason starting %q", id, info.State(), reason, want)
		}
	}
	if dead := count(t, q, tq.Dead); dead != 2 {
		t.Errorf("%d dead tasks, want 2", dead)
	}
}

// While another process holds the file's write lock, the finish and the
// fail of the handlers that returned are refused (ErrBusy past a 50 ms
// busy timeout); Work tries them again until the lock is released, well
// within one lease.
func TestWorkTriesAFinishAndAFailAgainWhileTheFileIsBusy(t *testing.T) {
	q, path := openQueue(t, tq.WithBusyTimeout(50*time.Millisecond), tq.WithMaxAttempts(1), tq.WithHistory())
	finished := push(t, q, `"ok"`)
	failed := push(t, q, `"fail"`)
	var bothRunning sync.WaitGroup
	bothRunning.Add(2)
	var takeLock sync.Once
	var locker *child
	var handled, busy atomic.Int64
	done := make(chan struct{})
	err := workUntil(t, q, done, func(ctx context.Context, task *tq.Task) error {
		// Both tasks were claimed in one batch before the lock is taken.
		bothRunning.Done()
		bothRunning.Wait()
		takeLock.Do(func() {
			locker = startChild(t, "lock", path)
			if got := locker.line(t); got != "locked" {
				t.Errorf("child said %q", got)
			}
			time.AfterFunc(400*time.Millisecond, func() { locker.stdin.Close() })
		})
		if handled.Add(1) == 2 {
			close(done)
		}
		if string(task.Payload()) == `"fail"` {
			return errors.New("refused on purpose")
		}
		return nil
	}, tq.WithConcurrency(2), tq.WithWorkLease(30*time.Second), tq.WithErrorHandler(func(task *tq.Task, err error) {
		if errors.Is(err, tq.ErrBusy) {
			busy.Add(1)
		}
	}))
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	locker.wait(t)
	if busy.Load() == 0 {
		t.Errorf("no call was refused as busy: the lock did not hold the worker back")
	}
	for id, want := range map[int64]tq.State{finished: tq.Done, failed: tq.Dead} {
		info, found, err := q.Task(id)
		if err != nil || !found {
			t.Fatalf("Task(%d) = %v, %v", id, found, err)
		}
		if info.State() != want {
			t.Errorf("task %d is %v, want %v", id, info.State(), want)
		}
	}
}

func TestWorkRenewsTheLeaseOfALongTask(t *testing.T) {
	q, _ := openQueue(t)
	id := push(t, q, `"long"`)
	lease := 150 * time.Millisecond
	done := make(chan struct{})
	var redelivered atomic.Bool
	err := workUntil(t, q, done, func(ctx context.Context, task *tq.Task) error {
		defer close(done)
		// Five leases long: without renewals another worker would take it.
		deadline := time.Now().Add(5 * lease)
		for time.Now().Before(deadline) {
			if other, err := q.TryPull(); err == nil {
				redelivered.Store(true)
				other.Close()
			}
			time.Sleep(lease / 5)
		}
		return ctx.Err()
	}, tq.WithWorkLease(lease))
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	if redelivered.Load() {
		t.Errorf("task %d was delivered again while its handler ran", id)
	}
	if left := count(t, q, tq.Pending) + count(t, q, tq.Leased); left != 0 {
		t.Errorf("%d tasks left", left)
	}
}

func TestWorkEndsAHandlersContextWhenItsTaskIsCancelled(t *testing.T) {
	q, _ := openQueue(t, tq.WithHistory())
	id := push(t, q, `"cancel me"`)
	started := make(chan struct{})
	done := make(chan struct{})
	var cause error
	go func() {
		<-started
		if _, err := q.CancelTask(id, "not needed"); err != nil {
			t.Errorf("CancelTask: %v", err)
		}
	}()
	err := workUntil(t, q, done, func(ctx context.Context, task *tq.Task) error {
		defer close(done)
		close(started)
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(10 * time.Second):
		}
		return nil
	}, tq.WithWorkLease(90*time.Millisecond), tq.WithErrorHandler(func(*tq.Task, error) {}))
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	if !errors.Is(cause, tq.ErrCancelled) {
		t.Fatalf("the handler's context ended with %v, want a cause matching ErrCancelled", cause)
	}
	info, _, err := q.Task(id)
	if err != nil || info.State() != tq.Cancelled {
		t.Errorf("task %d is %v (%v), want cancelled", id, info.State(), err)
	}
}

func TestWorkStopsClaimingWhenItsContextEndsAndWaitsForItsHandlers(t *testing.T) {
	q, _ := openQueue(t)
	first := push(t, q, `"first"`)
	push(t, q, `"second"`)
	ctx, stop := context.WithCancel(context.Background())
	var handled []int64
	var handlerCtxErr error
	err := q.Work(ctx, func(hctx context.Context, task *tq.Task) error {
		handled = append(handled, task.ID())
		stop()
		time.Sleep(50 * time.Millisecond) // Work must wait for this
		handlerCtxErr = hctx.Err()
		return nil
	}, tq.WithConcurrency(1))
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	if len(handled) != 1 || handled[0] != first {
		t.Fatalf("handled %v, want only task %d", handled, first)
	}
	if handlerCtxErr != nil {
		t.Errorf("the running handler's context ended with Work's: %v", handlerCtxErr)
	}
	if pending, leased := count(t, q, tq.Pending), count(t, q, tq.Leased); pending != 1 || leased != 0 {
		t.Errorf("%d pending and %d leased once Work returned, want 1 and 0", pending, leased)
	}
}

func TestWorkReturnsWhenItsQueueIsClosed(t *testing.T) {
	q, _ := openQueue(t)
	returned := make(chan error, 1)
	go func() {
		returned <- q.Work(context.Background(), func(context.Context, *tq.Task) error { return nil })
	}()
	time.Sleep(50 * time.Millisecond)
	q.Close()
	select {
	case err := <-returned:
		wantErr(t, err, tq.ErrClosed, "")
	case <-time.After(10 * time.Second):
		t.Fatal("Work did not return after Close")
	}
}

func TestWorkRefusesBadOptions(t *testing.T) {
	q, _ := openQueue(t)
	push(t, q, "1")
	handler := func(context.Context, *tq.Task) error { return nil }
	ctx := context.Background()
	wantErr(t, q.Work(ctx, handler, tq.WithConcurrency(0)), tq.ErrInvalidArgument, "concurrency of 0")
	wantErr(t, q.Work(ctx, handler, tq.WithWorkLease(time.Millisecond)), tq.ErrInvalidArgument, "under 3 ms")
	wantErr(t, q.Work(ctx, nil), tq.ErrInvalidArgument, "handler is nil")
	wantErr(t, q.Work(ctx, handler, tq.WithErrorHandler(nil)), tq.ErrInvalidArgument, "error handler is nil")
	if pending := count(t, q, tq.Pending); pending != 1 {
		t.Errorf("a refused Work changed the queue: %d pending, want 1", pending)
	}
}

func TestPostgresWorkHandlesEachTaskOnce(t *testing.T) {
	url := os.Getenv("TQ_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)")
	}
	schema := fmt.Sprintf("go_work_%d_%d", os.Getpid(), time.Now().UnixNano())
	drainWithWork(t, openOther(t, url, tq.WithPostgresSchema(schema)), 300, 16)
}

// TestPostgresWorkGoesOnAcrossAServerRestart: Work, its pulls refused
// while the server restarts, tries again and works what is pushed once the
// server is back, without being started again. It restarts the server
// that TQ_TEST_POSTGRES_DIR names (`make test-postgres` sets it).
func TestPostgresWorkGoesOnAcrossAServerRestart(t *testing.T) {
	url, dir := os.Getenv("TQ_TEST_POSTGRES_URL"), os.Getenv("TQ_TEST_POSTGRES_DIR")
	if url == "" || dir == "" {
		t.Skip("TQ_TEST_POSTGRES_URL or TQ_TEST_POSTGRES_DIR is not set (`make test-postgres` sets both)")
	}
	schema := fmt.Sprintf("go_work_%d_%d", os.Getpid(), time.Now().UnixNano())
	q := openOther(t, url, tq.WithPostgresSchema(schema))
	var mu sync.Mutex
	handled := map[string]bool{}
	handledCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	ctx, stop := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		returned <- q.Work(ctx, func(_ context.Context, task *tq.Task) error {
			mu.Lock()
			handled[string(task.Payload())] = true
			mu.Unlock()
			return nil
		}, tq.WithWorkLease(2*time.Second), tq.WithErrorHandler(func(*tq.Task, error) {}))
	}()
	// Each push is unique by key, so one tried again after a cut
	// connection is stored once.
	pushAll := func(from, to int) {
		for i := from; i < to; i++ {
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := q.Push([]byte(fmt.Sprint(i)), tq.WithUniqueKey(fmt.Sprint(i)))
				if err == nil || errors.Is(err, tq.ErrDuplicate) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("push %d: %v", i, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	waitFor := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for handledCount() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d tasks handled after 30 s", handledCount(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	pushAll(0, 50)
	waitFor(50)
	if out, err := exec.Command("../../tests/postgres/cluster.sh", "restart", dir, "immediate").CombinedOutput(); err != nil {
		t.Fatalf("restarting the server: %v: %s", err, out)
	}
	pushAll(50, 100)
	waitFor(100)
	select {
	case err := <-returned:
		t.Fatalf("Work returned during the restart: %v", err)
	default:
	}
	stop()
	if err := <-returned; err != nil {
		t.Fatalf("Work: %v", err)
	}
}
