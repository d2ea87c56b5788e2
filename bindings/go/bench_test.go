package tq_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
	"github.com/tq-dev/tq-go/internal/cbench"
)

// The benchmarks measure the binding against the same loop written in C
// (internal/cbench), on files in one directory, in rounds that alternate
// between the two so that a noisy stretch of a shared machine affects both.
// Each reports ns/op and go-ops/s for Go, c-ops/s for C, and go/c: the
// median over rounds of Go's rate over C's.
//
// Files go to TQ_BENCH_DIR when it is set (it must be on the disk to
// measure: a tmpfs makes flushes free), else to the test's temporary
// directory.

// benchPayload is the payload of the crate's throughput benchmark.
var benchPayload = []byte(`{"kind":"email","to":"user@example.com","template":"welcome"}`)

// benchRound is how many operations each side does per round.
var benchRound = map[tq.Durability]int{tq.DurabilityFull: 50, tq.DurabilityNormal: 500}

func BenchmarkPush(b *testing.B) {
	forEachDurability(b, benchLoops{
		goLoop: func(b *testing.B, q *tq.Queue, n int) {
			for range n {
				if _, err := q.Push(benchPayload); err != nil {
					b.Fatal(err)
				}
			}
		},
		cLoop: func(c *cbench.Queue, n int) (time.Duration, error) { return c.Push(benchPayload, n) },
	})
}

// benchBatch is how many tasks BenchmarkPushBatch pushes per batch.
const benchBatch = 100

// BenchmarkPushBatch pushes in batches of benchBatch tasks; an operation
// is one task.
func BenchmarkPushBatch(b *testing.B) {
	batch := make([][]byte, benchBatch)
	for i := range batch {
		batch[i] = benchPayload
	}
	forEachDurability(b, benchLoops{
		goLoop: func(b *testing.B, q *tq.Queue, n int) {
			for done := 0; done < n; done += benchBatch {
				if _, err := q.PushBatch(batch[:min(benchBatch, n-done)]); err != nil {
					b.Fatal(err)
				}
			}
		},
		cLoop: func(c *cbench.Queue, n int) (time.Duration, error) { return c.PushBatch(benchPayload, n, benchBatch) },
	})
}

func BenchmarkPullFinish(b *testing.B) {
	forEachDurability(b, benchLoops{
		prepare: func(b *testing.B, q *tq.Queue, c *cbench.Queue, n int) {
			for range n {
				if _, err := q.Push(benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := c.Push(benchPayload, n); err != nil {
				b.Fatal(err)
			}
		},
		goLoop: func(b *testing.B, q *tq.Queue, n int) {
			for range n {
				task, err := q.TryPull()
				if err != nil {
					b.Fatal(err)
				}
				if err := task.Finish(); err != nil {
					b.Fatal(err)
				}
			}
		},
		cLoop: func(c *cbench.Queue, n int) (time.Duration, error) { return c.PullFinish(n) },
	})
}

// benchLoops is one operation done n times, untimed setup first.
type benchLoops struct {
	prepare func(b *testing.B, q *tq.Queue, c *cbench.Queue, n int) // may be nil
	goLoop  func(b *testing.B, q *tq.Queue, n int)
	cLoop   func(c *cbench.Queue, n int) (time.Duration, error)
}

// forEachDurability runs loops over b.N operations at each durability, in
// rounds: Go first in odd rounds, C first in even ones.
func forEachDurability(b *testing.B, loops benchLoops) {
	for _, durability := range []struct {
		name string
		d    tq.Durability
	}{{"full", tq.DurabilityFull}, {"normal", tq.DurabilityNormal}} {
		b.Run(durability.name, func(b *testing.B) {
			dir := b.TempDir()
			if base := os.Getenv("TQ_BENCH_DIR"); base != "" {
				if err := os.MkdirAll(base, 0o755); err != nil {
					b.Fatal(err)
				}
				var err error
				if dir, err = os.MkdirTemp(base, "go-bench"); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(dir) })
			}
			q, err := tq.Open(filepath.Join(dir, "go.db"), tq.WithDurability(durability.d))
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			c, err := cbench.Open(filepath.Join(dir, "c.db"), int(durability.d))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()

			var goTotal, cTotal time.Duration
			var ratios []float64
			b.ResetTimer()
			for done, i := 0, 0; done < b.N; i++ {
				n := min(benchRound[durability.d], b.N-done)
				b.StopTimer()
				if loops.prepare != nil {
					loops.prepare(b, q, c, n)
				}
				var goTime, cTime time.Duration
				runC := func() {
					if cTime, err = loops.cLoop(c, n); err != nil {
						b.Fatal(err)
					}
				}
				if i%2 == 0 {
					runC()
				}
				b.StartTimer()
				start := time.Now()
				loops.goLoop(b, q, n)
				goTime = time.Since(start)
				b.StopTimer()
				if i%2 == 1 {
					runC()
				}
				goTotal += goTime
				cTotal += cTime
				ratios = append(ratios, cTime.Seconds()/goTime.Seconds())
				done += n
			}
			slices.Sort(ratios)
			b.ReportMetric(float64(b.N)/goTotal.Seconds(), "go-ops/s")
			b.ReportMetric(float64(b.N)/cTotal.Seconds(), "c-ops/s")
			b.ReportMetric(ratios[len(ratios)/2], "go/c")
		})
	}
}
