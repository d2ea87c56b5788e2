package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tq-dev/tq-go"
)

// How many tasks the self-test pushes that succeed, and that fail.
const (
	selfTestTasks   = 20
	selfTestFailing = 3
)

// selfTestAttempts is how many deliveries a task gets in the self-test,
// whose failed tasks are retried at once.
const selfTestAttempts = 2

// selfTest runs the service on a free local port with a queue in a new
// temporary directory, drives it through HTTP and checks its answers: every
// task pushed is processed once, failing ones end dead after their
// attempts, a key is not pushed twice, bad requests are refused, and the
// service shuts down when asked.
func selfTest(ctx context.Context, logger *log.Logger) error {
	dir, err := os.MkdirTemp("", "tq-httpservice")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	q, err := tq.Open(filepath.Join(dir, "tasks.db"), tq.WithHistory(),
		tq.WithMaxAttempts(selfTestAttempts), tq.WithRetryBackoff(0, 0))
	if err != nil {
		return err
	}
	defer q.Close()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- newService(q, logger).run(ctx, listener, 4) }()

	err = drive(ctx, "http://"+listener.Addr().String())
	cancel()
	if runErr := <-served; err == nil && runErr != context.Canceled {
		err = fmt.Errorf("the service stopped with %v, want context.Canceled", runErr)
	}
	return err
}

// drive pushes tasks and bad requests through HTTP, then polls /stats until
// every task is done or dead, and checks /dead.
func drive(ctx context.Context, base string) error {
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(body, key string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tasks", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		text, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(text), err
	}
	type created struct {
		ID        int64
		Duplicate bool
	}

	ids := make(map[int64]bool)
	for i := range selfTestTasks + selfTestFailing {
		body := fmt.Sprintf(`{"work_ms": 20, "index": %d}`, i)
		if i >= selfTestTasks {
			body = fmt.Sprintf(`{"fail": "task %d always fails"}`, i)
		}
		status, text, err := post(body, "")
		if err != nil {
			return err
		}
		var c created
		if status != http.StatusCreated || json.Unmarshal([]byte(text), &c) != nil || ids[c.ID] {
			return fmt.Errorf("POST /tasks: %d %s", status, text)
		}
		ids[c.ID] = true
	}
	// A key held by a task that is pending or running: the second push
	// names the first task and stores nothing.
	var first created
	for i, want := range []int{http.StatusCreated, http.StatusOK} {
		status, text, err := post(`{"work_ms": 200, "report": 42}`, "report:42")
		if err != nil {
			return err
		}
		var c created
		if status != want || json.Unmarshal([]byte(text), &c) != nil || c.Duplicate != (i == 1) ||
			(i == 1 && c.ID != first.ID) {
			return fmt.Errorf("POST /tasks with a key, push %d: %d %s", i+1, status, text)
		}
		first = c
	}
	for _, bad := range []string{``, `{"work_ms": `, "\"\xff\""} {
		status, text, err := post(bad, "")
		if err != nil {
			return err
		}
		if status != http.StatusBadRequest || !strings.HasPrefix(text, "tq: push: ") {
			return fmt.Errorf("POST /tasks %q: %d %s, want 400 with tq's message", bad, status, text)
		}
	}
	resp, err := client.Get(base + "/tasks")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		return fmt.Errorf("GET /tasks: %s, want 405", resp.Status)
	}

	get := func(path string, v any) error {
		resp, err := client.Get(base + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(v)
	}
	want := map[string]int64{
		"pending": 0, "leased": 0,
		"done": selfTestTasks + 1, "processed": selfTestTasks + 1,
		"dead": selfTestFailing, "failed": selfTestFailing * selfTestAttempts,
	}
	for {
		var stats map[string]int64
		if err := get("/stats", &stats); err != nil {
			return err
		}
		if maps.Equal(stats, want) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("GET /stats: %v when the time ran out, want %v", stats, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var dead []struct {
		ID        int64
		Attempts  int
		LastError string `json:"last_error"`
	}
	if err := get("/dead", &dead); err != nil {
		return err
	}
	if len(dead) != selfTestFailing {
		return fmt.Errorf("GET /dead: %d tasks, want %d", len(dead), selfTestFailing)
	}
	for i, task := range dead {
		if task.Attempts != selfTestAttempts || task.LastError != fmt.Sprintf("task %d always fails", selfTestTasks+i) {
			return fmt.Errorf("GET /dead: %+v", task)
		}
	}
	return nil
}
