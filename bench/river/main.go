// Command river measures tq's PostgreSQL backend, through its Go binding,
// against River (github.com/riverqueue/river with its riverpgxv5 driver)
// on one server, in one run: `make bench-postgres` runs it on a throwaway
// server, or `go run -tags tq_intree .` here with TQ_BENCH_POSTGRES_URL
// naming one (the tag links the in-tree libtq.a: build it first).
//
// Each scenario drains no-op jobs: 10,000 pushed beforehand, worked by 1,
// 4 and 16 workers of one process, and 10,000 pushed one at a time by 2
// producers while 4 workers work them. A run ends when the last job's
// completion is committed: for tq, when every worker has returned from its
// last finish; for River, when the last job_completed event arrives, which
// River sends once its completer has written the job's state. tq runs
// twice, its workers pulling and finishing in two calls, and with
// finish_and_pull (one call, one commit, per job). Every figure is the
// median of 3 runs, the systems taking turns within each round.
//
// TQ_BENCH_QUICK=1 makes the runs small and single (a smoke test; its
// figures mean nothing).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/tq-dev/tq-go"
)

// A scenario: workers in one process, and producers pushing meanwhile (0:
// the jobs are all pushed before the workers start).
type scenario struct {
	name      string
	producers int
	workers   int
}

var scenarios = []scenario{
	{"drain, 1 worker", 0, 1},
	{"drain, 4 workers", 0, 4},
	{"drain, 16 workers", 0, 16},
	{"2 producers + 4 workers", 2, 4},
}

// A system under test: runs one scenario on jobs jobs, returns jobs per second.
type system struct {
	name string
	run  func(ctx context.Context, sc scenario, jobs int) (float64, error)
}

// How long a run may take before it counts as stuck.
const runLimit = 5 * time.Minute

func main() {
	url := os.Getenv("TQ_BENCH_POSTGRES_URL")
	if url == "" {
		fmt.Println("skipped: TQ_BENCH_POSTGRES_URL is not set (`make bench-postgres` starts a server)")
		return
	}
	if err := run(url, os.Getenv("TQ_BENCH_QUICK") != ""); err != nil {
		fmt.Fprintln(os.Stderr, "benchmark failed:", err)
		os.Exit(1)
	}
}

func run(url string, quick bool) error {
	jobs, runs := 10000, 3
	if quick {
		jobs, runs = 400, 1
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	riverSchema := fmt.Sprintf("bench_river_%d", os.Getpid())
	if err := migrateRiver(ctx, pool, riverSchema); err != nil {
		return fmt.Errorf("River's migrations: %w", err)
	}
	defer pool.Exec(ctx, fmt.Sprintf("DROP SCHEMA %s CASCADE", riverSchema))

	systems := []system{
		{"River", func(ctx context.Context, sc scenario, jobs int) (float64, error) {
			return runRiver(ctx, pool, riverSchema, sc, jobs)
		}},
		{"tq (pull + finish)", func(ctx context.Context, sc scenario, jobs int) (float64, error) {
			return runTQ(ctx, pool, url, sc, jobs, false)
		}},
		{"tq (finish_and_pull)", func(ctx context.Context, sc scenario, jobs int) (float64, error) {
			return runTQ(ctx, pool, url, sc, jobs, true)
		}},
		{"tq (Work)", func(ctx context.Context, sc scenario, jobs int) (float64, error) {
			return runTQWork(ctx, pool, url, sc, jobs)
		}},
	}
	fmt.Printf("%d no-op jobs per run, one process, median of %d runs, the systems interleaved\n", jobs, runs)
	fmt.Println("| scenario | River | tq, pull + finish | tq, finish_and_pull | tq, Work | pull + finish / River | finish_and_pull / River | Work / River |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, sc := range scenarios {
		rates := make([][]float64, len(systems))
		for r := 0; r < runs; r++ {
			for i, sys := range systems {
				ctx, cancel := context.WithTimeout(ctx, runLimit)
				rate, err := sys.run(ctx, sc, jobs)
				cancel()
				if err != nil {
					return fmt.Errorf("%s, %s: %w", sys.name, sc.name, err)
				}
				rates[i] = append(rates[i], rate)
			}
		}
		river, pullFinish, finishAndPull, work := median(rates[0]), median(rates[1]), median(rates[2]), median(rates[3])
		fmt.Printf("| %s | %.0f/s | %.0f/s | %.0f/s | %.0f/s | %.2f | %.2f | %.2f |\n", sc.name, river, pullFinish,
			finishAndPull, work, pullFinish/river, finishAndPull/river, work/river)
	}
	return nil
}

func median(values []float64) float64 {
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	return sorted[len(sorted)/2]
}

// runProducers starts sc.producers goroutines that push jobs between them
// with push, one at a time.
func runProducers(sc scenario, jobs int, push func() error, errs chan<- error, wg *sync.WaitGroup) {
	for p := 0; p < sc.producers; p++ {
		share := jobs / sc.producers
		if p == 0 {
			share += jobs % sc.producers
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < share; i++ {
				if err := push(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
}

// firstError returns the first error sent to errs, if any.
func firstError(errs chan error) error {
	close(errs)
	return <-errs
}

// ---------------------------------------------------------------------------
// tq

// openTQ opens a handle on a fresh schema, its pool of connections the
// default, with jobs pushed beforehand when sc has no producers; cleanup
// closes it and drops the schema.
func openTQ(ctx context.Context, pool *pgxpool.Pool, url string, sc scenario, jobs int) (q *tq.Queue, cleanup func(), err error) {
	schema := fmt.Sprintf("bench_tq_%d", os.Getpid())
	if _, err := pool.Exec(ctx, fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE", schema)); err != nil {
		return nil, nil, err
	}
	cleanup = func() {
		pool.Exec(context.Background(), fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE", schema))
	}
	q, err = tq.Open(url, tq.WithPostgresSchema(schema))
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	cleanup = func() {
		q.Close()
		pool.Exec(context.Background(), fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE", schema))
	}
	if sc.producers == 0 {
		batch := make([][]byte, 1000)
		for i := range batch {
			batch[i] = payload
		}
		for pushed := 0; pushed < jobs; pushed += len(batch) {
			if _, err := q.PushBatch(batch[:min(len(batch), jobs-pushed)]); err != nil {
				cleanup()
				return nil, nil, err
			}
		}
	}
	return q, cleanup, nil
}

var payload = []byte("{}")

// drained checks that a run of tq ended with every job finished.
func drained(ctx context.Context, q *tq.Queue) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the run took longer than %v: %w", runLimit, err)
	}
	left, err := q.Count(tq.Pending)
	if err != nil {
		return err
	}
	leased, err := q.Count(tq.Leased)
	if err != nil {
		return err
	}
	if left+leased != 0 {
		return fmt.Errorf("%d jobs were left unfinished", left+leased)
	}
	return nil
}

// runTQ runs sc with one handle shared by the workers and producers; with
// finishAndPull, each worker finishes a task and claims the next in one
// call.
func runTQ(ctx context.Context, pool *pgxpool.Pool, url string, sc scenario, jobs int, finishAndPull bool) (float64, error) {
	q, cleanup, err := openTQ(ctx, pool, url, sc, jobs)
	if err != nil {
		return 0, err
	}
	defer cleanup()

	working, allDone := context.WithCancel(ctx)
	defer allDone()
	var done atomic.Int64
	// Counts a job whose finish has been (or is being) committed; the
	// worker that counts the last one ends the run once its finish returns.
	last := func() bool { return done.Add(1) == int64(jobs) }
	errs := make(chan error, sc.workers+sc.producers)
	var wg sync.WaitGroup
	started := time.Now()
	runProducers(sc, jobs, func() error { _, err := q.Push(payload); return err }, errs, &wg)
	for w := 0; w < sc.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, err := q.Pull(working)
			for err == nil {
				if last() {
					err = task.Finish()
					allDone()
					break
				}
				if finishAndPull {
					task, err = task.FinishAndPull(working)
					continue
				}
				if err = task.Finish(); err == nil {
					task, err = q.Pull(working)
				}
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
				allDone()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(started)
	if err := firstError(errs); err != nil {
		return 0, err
	}
	if err := drained(ctx, q); err != nil {
		return 0, err
	}
	return float64(jobs) / elapsed.Seconds(), nil
}

// runTQWork runs sc with the binding's worker, Queue.Work, with one
// handler per sc worker. As River's completions are counted once
// committed, so are Work's: the run ends when the last finish commits and
// Work returns.
func runTQWork(ctx context.Context, pool *pgxpool.Pool, url string, sc scenario, jobs int) (float64, error) {
	q, cleanup, err := openTQ(ctx, pool, url, sc, jobs)
	if err != nil {
		return 0, err
	}
	defer cleanup()

	working, allDone := context.WithCancel(ctx)
	defer allDone()
	var handled atomic.Int64
	errs := make(chan error, sc.producers+1)
	var wg sync.WaitGroup
	started := time.Now()
	runProducers(sc, jobs, func() error { _, err := q.Push(payload); return err }, errs, &wg)
	err = q.Work(working, func(context.Context, *tq.Task) error {
		if handled.Add(1) == int64(jobs) {
			allDone()
		}
		return nil
	}, tq.WithConcurrency(sc.workers), tq.WithErrorHandler(func(_ *tq.Task, err error) {
		errs <- err
		allDone()
	}))
	elapsed := time.Since(started)
	wg.Wait()
	if err != nil {
		return 0, err
	}
	if err := firstError(errs); err != nil {
		return 0, err
	}
	if err := drained(ctx, q); err != nil {
		return 0, err
	}
	return float64(jobs) / elapsed.Seconds(), nil
}

// ---------------------------------------------------------------------------
// River

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (*noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// migrateRiver creates schema and runs River's migrations in it.
func migrateRiver(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if _, err := pool.Exec(ctx, fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", schema, schema)); err != nil {
		return err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: quiet()})
	if err != nil {
		return err
	}
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runRiver runs sc on River's tables in schema, emptied first, with a
// client whose default queue has one worker per sc worker, and its other
// settings River's defaults but one: the pause between two fetches of
// jobs is River's shortest (1 ms), as the default (100 ms) would hold
// a worker to 10 jobs a second.
func runRiver(ctx context.Context, pool *pgxpool.Pool, schema string, sc scenario, jobs int) (float64, error) {
	if _, err := pool.Exec(ctx, fmt.Sprintf("TRUNCATE %s.river_job", schema)); err != nil {
		return 0, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:        schema,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: sc.workers}},
		Workers:       workers,
		Logger:        quiet(),
		FetchCooldown: river.FetchCooldownMin,
	})
	if err != nil {
		return 0, err
	}
	if sc.producers == 0 {
		batch := make([]river.InsertManyParams, 1000)
		for i := range batch {
			batch[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		for pushed := 0; pushed < jobs; pushed += len(batch) {
			if _, err := client.InsertMany(ctx, batch[:min(len(batch), jobs-pushed)]); err != nil {
				return 0, err
			}
		}
	}
	completed, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs + 1,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer unsubscribe()
	errs := make(chan error, sc.producers)
	var wg sync.WaitGroup
	started := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	runProducers(sc, jobs, func() error { _, err := client.Insert(ctx, noopArgs{}, nil); return err }, errs, &wg)
	for n := 0; n < jobs; n++ {
		select {
		case <-completed:
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d jobs completed in %v: %w", n, jobs, runLimit, ctx.Err())
		}
	}
	elapsed := time.Since(started)
	wg.Wait()
	if err := client.Stop(ctx); err != nil {
		return 0, err
	}
	if err := firstError(errs); err != nil {
		return 0, err
	}
	var left int
	err = pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.river_job WHERE state <> 'completed'", schema)).Scan(&left)
	if err != nil {
		return 0, err
	}
	if left != 0 {
		return 0, fmt.Errorf("%d jobs were left unfinished", left)
	}
	return float64(jobs) / elapsed.Seconds(), nil
}
