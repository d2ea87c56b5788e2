// Command goqite measures tq's Go binding against goqite
// (github.com/maragudk/goqite, a SQLite queue for Go, on mattn/go-sqlite3)
// on the same disk, in one run: `make bench-go` runs it, or
// `go run -tags tq_intree .` here (the tag links the in-tree libtq.a:
// build it first).
//
// Each scenario works no-op jobs: 5,000 pushed beforehand and drained by 1
// and 4 workers of one process, and 5,000 pushed one at a time by 2
// producers while 4 workers work them; at `full` (SQLite's
// synchronous=FULL in WAL mode, tq's default) and at `normal`
// (synchronous=NORMAL), each system on a fresh file. The systems:
//
//   - goqite, its plain loop: each worker calls Receive, then Delete, and
//     sleeps 0.5 ms when it received nothing (goqite has no blocking
//     receive);
//   - goqite's worker helper, jobs.Runner, with Limit the workers and its
//     shortest sensible PollInterval, 1 ms (its default, 100 ms, holds it
//     to a job per tick);
//   - tq, the plain calls: Pull (waiting), then Finish;
//   - tq's worker helper, Queue.Work, with one handler per worker.
//
// A run ends when every job's completion is committed. Every figure is the
// median of 3 runs, with the lowest and highest, the systems taking turns
// within each round. TQ_BENCH_QUICK=1 makes the runs small and single (a
// smoke test; its figures mean nothing). TQ_BENCH_DIR (default the
// system's temporary directory) is where the files go: a disk, not a
// tmpfs, for flushes to cost what they cost.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maragudk/goqite"
	goqitejobs "github.com/maragudk/goqite/jobs"
	_ "github.com/mattn/go-sqlite3"

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
	{"2 producers + 4 workers", 2, 4},
}

// A system under test: runs one scenario on jobs jobs in a fresh file
// under dir at durability, returns jobs per second.
type system struct {
	name string
	run  func(ctx context.Context, dir string, durability string, sc scenario, jobs int) (float64, error)
}

var systems = []system{
	{"goqite, Receive + Delete", runGoqiteLoop},
	{"goqite, jobs.Runner", runGoqiteRunner},
	{"tq, Pull + Finish", runTQPlain},
	{"tq, Work", runTQWork},
}

// How long a run may take before it counts as stuck.
const runLimit = 5 * time.Minute

// The pause of a goqite worker that received nothing.
const idleSleep = 500 * time.Microsecond

var payload = []byte(`{"file":"video-000001.mp4"}`)

func main() {
	if err := run(os.Getenv("TQ_BENCH_QUICK") != ""); err != nil {
		fmt.Fprintln(os.Stderr, "benchmark failed:", err)
		os.Exit(1)
	}
}

func run(quick bool) error {
	jobs, runs := 5000, 3
	if quick {
		jobs, runs = 200, 1
	}
	parent := os.Getenv("TQ_BENCH_DIR")
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(parent, "goqite-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("%d no-op jobs per run, one process, files in %s; median [lowest-highest] of %d runs, the systems interleaved\n",
		jobs, dir, runs)
	header := "| durability, scenario |"
	rule := "|---|"
	for _, sys := range systems {
		header += " " + sys.name + " |"
		rule += "---:|"
	}
	fmt.Println(header + " Work / best goqite |")
	fmt.Println(rule + "---:|")
	for _, durability := range []string{"full", "normal"} {
		for _, sc := range scenarios {
			rates := make([][]float64, len(systems))
			for r := 0; r < runs; r++ {
				for i, sys := range systems {
					ctx, cancel := context.WithTimeout(context.Background(), runLimit)
					runDir := filepath.Join(dir, fmt.Sprintf("%s-%d-%d-%d", durability, len(rates[i]), i, time.Now().UnixNano()))
					if err := os.Mkdir(runDir, 0o755); err != nil {
						cancel()
						return err
					}
					rate, err := sys.run(ctx, runDir, durability, sc, jobs)
					cancel()
					os.RemoveAll(runDir)
					if err != nil {
						return fmt.Errorf("%s, %s, %s: %w", sys.name, durability, sc.name, err)
					}
					rates[i] = append(rates[i], rate)
				}
			}
			line := fmt.Sprintf("| %s, %s |", durability, sc.name)
			for _, r := range rates {
				line += " " + summary(r) + " |"
			}
			best := max(median(rates[0]), median(rates[1]))
			fmt.Printf("%s %.2f |\n", line, median(rates[3])/best)
		}
	}
	return nil
}

func median(values []float64) float64 {
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	return sorted[len(sorted)/2]
}

func summary(values []float64) string {
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	return fmt.Sprintf("%.0f/s [%.0f-%.0f]", median(values), sorted[0], sorted[len(sorted)-1])
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
// goqite

// openGoqite opens a goqite queue in a fresh file of dir at durability,
// with jobs sent beforehand (through send) when sc has no producers.
func openGoqite(ctx context.Context, dir, durability string, sc scenario, jobs int, send func(*goqite.Queue) error) (*sql.DB, *goqite.Queue, error) {
	synchronous := strings.ToUpper(durability)
	db, err := sql.Open("sqlite3", filepath.Join(dir, "goqite.db")+"?_journal=WAL&_timeout=5000&_fk=true&_sync="+synchronous)
	if err != nil {
		return nil, nil, err
	}
	if err := goqite.Setup(ctx, db); err != nil {
		db.Close()
		return nil, nil, err
	}
	q := goqite.New(goqite.NewOpts{DB: db, Name: "jobs", Timeout: 30 * time.Second})
	if sc.producers == 0 {
		for i := 0; i < jobs; i++ {
			if err := send(q); err != nil {
				db.Close()
				return nil, nil, err
			}
		}
	}
	return db, q, nil
}

// goqiteDrained checks that a run of goqite ended without an error, in
// time, and with no message left in its table.
func goqiteDrained(ctx context.Context, db *sql.DB, errs chan error) error {
	if err := firstError(errs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the run took longer than %v: %w", runLimit, err)
	}
	var left int
	if err := db.QueryRow("SELECT count(*) FROM goqite").Scan(&left); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("%d messages were left", left)
	}
	return nil
}

func runGoqiteLoop(ctx context.Context, dir, durability string, sc scenario, jobs int) (float64, error) {
	send := func(q *goqite.Queue) error { return q.Send(ctx, goqite.Message{Body: payload}) }
	db, q, err := openGoqite(ctx, dir, durability, sc, jobs, send)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var done atomic.Int64
	errs := make(chan error, sc.workers+sc.producers)
	var wg sync.WaitGroup
	started := time.Now()
	runProducers(sc, jobs, func() error { return send(q) }, errs, &wg)
	for w := 0; w < sc.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(jobs) && ctx.Err() == nil {
				m, err := q.Receive(ctx)
				if err != nil {
					errs <- err
					return
				}
				if m == nil {
					time.Sleep(idleSleep)
					continue
				}
				if err := q.Delete(ctx, m.ID); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(started)
	if err := goqiteDrained(ctx, db, errs); err != nil {
		return 0, err
	}
	return float64(jobs) / elapsed.Seconds(), nil
}

func runGoqiteRunner(ctx context.Context, dir, durability string, sc scenario, jobs int) (float64, error) {
	send := func(q *goqite.Queue) error { return jobsCreate(ctx, q) }
	db, q, err := openGoqite(ctx, dir, durability, sc, jobs, send)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	runner := goqitejobs.NewRunner(goqitejobs.NewRunnerOpts{Limit: sc.workers, PollInterval: time.Millisecond, Queue: q})
	working, allDone := context.WithCancel(ctx)
	defer allDone()
	var done atomic.Int64
	runner.Register("noop", func(context.Context, []byte) error {
		if done.Add(1) == int64(jobs) {
			allDone()
		}
		return nil
	})
	errs := make(chan error, sc.producers)
	var wg sync.WaitGroup
	started := time.Now()
	runProducers(sc, jobs, func() error { return send(q) }, errs, &wg)
	// Start returns once its jobs, their deletes included, have ended.
	runner.Start(working)
	elapsed := time.Since(started)
	wg.Wait()
	if err := goqiteDrained(ctx, db, errs); err != nil {
		return 0, err
	}
	return float64(jobs) / elapsed.Seconds(), nil
}

// jobsCreate sends a job for jobs.Runner's "noop" function.
func jobsCreate(ctx context.Context, q *goqite.Queue) error {
	return goqitejobs.Create(ctx, q, "noop", payload)
}

// ---------------------------------------------------------------------------
// tq

// openTQ opens a queue in a fresh file of dir at durability, with jobs
// pushed beforehand (in batches) when sc has no producers.
func openTQ(dir, durability string, sc scenario, jobs int) (*tq.Queue, error) {
	d := tq.DurabilityFull
	if durability == "normal" {
		d = tq.DurabilityNormal
	}
	q, err := tq.Open(filepath.Join(dir, "tq.db"), tq.WithDurability(d))
	if err != nil {
		return nil, err
	}
	if sc.producers == 0 {
		batch := make([][]byte, 1000)
		for i := range batch {
			batch[i] = payload
		}
		for pushed := 0; pushed < jobs; pushed += len(batch) {
			if _, err := q.PushBatch(batch[:min(len(batch), jobs-pushed)]); err != nil {
				q.Close()
				return nil, err
			}
		}
	}
	return q, nil
}

// drained checks that a run of tq ended with every job finished.
func drained(ctx context.Context, q *tq.Queue) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the run took longer than %v: %w", runLimit, err)
	}
	for _, state := range []tq.State{tq.Pending, tq.Leased} {
		left, err := q.Count(state)
		if err != nil {
			return err
		}
		if left != 0 {
			return fmt.Errorf("%d jobs were left %v", left, state)
		}
	}
	return nil
}

func runTQPlain(ctx context.Context, dir, durability string, sc scenario, jobs int) (float64, error) {
	q, err := openTQ(dir, durability, sc, jobs)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	working, allDone := context.WithCancel(ctx)
	defer allDone()
	var done atomic.Int64
	errs := make(chan error, sc.workers+sc.producers)
	var wg sync.WaitGroup
	started := time.Now()
	runProducers(sc, jobs, func() error { _, err := q.Push(payload); return err }, errs, &wg)
	for w := 0; w < sc.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				task, err := q.Pull(working)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						errs <- err
					}
					return
				}
				if err := task.Finish(); err != nil {
					errs <- err
					return
				}
				if done.Add(1) == int64(jobs) {
					allDone()
				}
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

func runTQWork(ctx context.Context, dir, durability string, sc scenario, jobs int) (float64, error) {
	q, err := openTQ(dir, durability, sc, jobs)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	working, allDone := context.WithCancel(ctx)
	defer allDone()
	var handled atomic.Int64
	errs := make(chan error, sc.producers+1)
	var wg sync.WaitGroup
	started := time.Now()
	runProducers(sc, jobs, func() error { _, err := q.Push(payload); return err }, errs, &wg)
	// Work returns once the last finish is committed.
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
