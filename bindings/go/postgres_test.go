package tq_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

func TestPostgresOptionsRefusedOnSQLite(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		opt  tq.Option
		text string
	}{
		{"pool size", tq.WithPoolSize(2), "pool size applies to PostgreSQL only"},
		{"schema", tq.WithPostgresSchema("jobs"), "schema applies to PostgreSQL only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".db")
			q, err := tq.Open(path, c.opt)
			if q != nil {
				q.Close()
				t.Fatal("Open of an SQLite file succeeded")
			}
			wantErr(t, err, tq.ErrInvalidArgument, c.text)
		})
	}
}

func TestPostgresOptionValuesRefused(t *testing.T) {
	cases := []struct {
		name string
		opt  tq.Option
		text string
	}{
		{"pool size 0", tq.WithPoolSize(0), "tq: open: "},
		{"negative pool size", tq.WithPoolSize(-1), "pool size -1 is out of range"},
		{"pool size over the maximum", tq.WithPoolSize(tq.MaxPoolSize + 1), "tq: open: "},
		{"schema starting with pg_", tq.WithPostgresSchema("pg_jobs"), "not a schema name"},
		{"empty schema", tq.WithPostgresSchema(""), "tq: open: "},
		{"NUL in schema", tq.WithPostgresSchema("a\x00b"), "NUL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Refused before any connection: the URL names no server.
			q, err := tq.Open("postgres://nobody@127.0.0.1:1/none", c.opt)
			if q != nil {
				q.Close()
				t.Fatal("Open succeeded")
			}
			wantErr(t, err, tq.ErrInvalidArgument, c.text)
		})
	}
}

// TestPostgresPushPullFinish runs on the server TQ_TEST_POSTGRES_URL names
// (`make test-postgres` starts one), in a schema of its own.
func TestPostgresPushPullFinish(t *testing.T) {
	url := os.Getenv("TQ_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)")
	}
	schema := fmt.Sprintf("go_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	q, err := tq.Open(url, tq.WithPostgresSchema(schema), tq.WithPoolSize(1))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer q.Close()
	// A second handle on another schema of the same database sees none of
	// the first one's tasks.
	other, err := tq.Open(url, tq.WithPostgresSchema(schema+"_other"))
	if err != nil {
		t.Fatalf("Open of another schema: %v", err)
	}
	defer other.Close()

	id := push(t, q, `{"n": 1}`)
	if n := count(t, other, tq.Pending); n != 0 {
		t.Fatalf("pending in the other schema = %d, want 0", n)
	}
	// With a pool of one connection, calls take turns on it.
	if n := count(t, q, tq.Pending); n != 1 {
		t.Fatalf("pending = %d, want 1", n)
	}
	task := tryPull(t, q)
	if task == nil || task.ID() != id || string(task.Payload()) != `{"n": 1}` {
		t.Fatalf("pulled %v, want task %d", task, id)
	}
	if err := task.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	for _, state := range []tq.State{tq.Pending, tq.Leased} {
		if n := count(t, q, state); n != 0 {
			t.Fatalf("%v = %d after Finish, want 0", state, n)
		}
	}
}

// TestPostgresResultProgressAndWait runs on TQ_TEST_POSTGRES_URL as
// TestPostgresPushPullFinish does.
func TestPostgresResultProgressAndWait(t *testing.T) {
	url := os.Getenv("TQ_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)")
	}
	schema := fmt.Sprintf("go_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	q, err := tq.Open(url, tq.WithPostgresSchema(schema), tq.WithResultRetention(time.Hour))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer q.Close()
	id := push(t, q, `"job"`)
	task := tryPull(t, q)
	if err := task.ExtendWithProgress(time.Minute, []byte(`{"step": 1}`)); err != nil {
		t.Fatalf("ExtendWithProgress: %v", err)
	}
	if info, found, err := q.Task(id); err != nil || !found || string(info.Progress()) != `{"step": 1}` {
		t.Fatalf("Task = %v, %v; progress %s", found, err, info.Progress())
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		task.FinishWithResult([]byte(`{"ok": true}`))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := q.Wait(ctx, id)
	if err != nil || info.State() != tq.Done || string(info.Result()) != `{"ok": true}` {
		t.Fatalf("Wait = state %v, result %s, %v", info.State(), info.Result(), err)
	}
}

func TestPostgresScheduleSlotsArePulledOnce(t *testing.T) {
	url := os.Getenv("TQ_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)")
	}
	schema := fmt.Sprintf("go_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	q, err := tq.Open(url, tq.WithPostgresSchema(schema))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer q.Close()
	if err := q.AddSchedule("tick", []byte(`"tick"`), tq.Every(200*time.Millisecond),
		tq.WithCatchUp(tq.CatchUpEach, 100)); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	deadline := time.Now().Add(1100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n, err := q.RunDueSchedules(); err != nil || n > 1 {
			t.Fatalf("RunDueSchedules = %d, %v", n, err)
		}
		for {
			task, err := q.TryPull()
			if err != nil {
				break
			}
			slot := task.RunAt().UnixMilli()
			if seen[slot] {
				t.Fatalf("slot %d enqueued twice", slot)
			}
			seen[slot] = true
			task.Finish()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(seen) < 4 {
		t.Fatalf("%d slots in 1.1 s", len(seen))
	}
}
