package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tq-dev/tq-go"
)

// maxBody is the largest request body POST /tasks takes.
const maxBody = 1 << 20

// maxWork is the longest a task's work takes.
const maxWork = 10 * time.Second

// historyKept is how long finished and dead tasks are kept.
const historyKept = time.Hour

// service is the HTTP front of a queue and its pool of workers.
type service struct {
	q         *tq.Queue
	log       *log.Logger
	processed atomic.Int64 // tasks finished by this process
	failed    atomic.Int64 // deliveries failed by this process
}

// newService serves q, logging to logger.
func newService(q *tq.Queue, logger *log.Logger) *service {
	return &service{q: q, log: logger}
}

// run serves HTTP on listener and runs the workers until ctx ends, then
// shuts the server down, waits for the workers and returns ctx's error, or
// the server's if it failed first.
func (s *service) run(ctx context.Context, listener net.Listener, workers int) error {
	// A worker of an earlier run that crashed left its tasks leased.
	if n, err := s.q.Recover(); err != nil {
		return err
	} else if n > 0 {
		s.log.Printf("recovered %d tasks", n)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { s.work(ctx) })
	}
	wg.Go(func() { s.purgeHistory(ctx) })

	server := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	var err error
	select {
	case <-ctx.Done():
		err = ctx.Err()
	case err = <-served:
	}
	cancel()
	shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if shutdownErr := server.Shutdown(shutdown); shutdownErr != nil && err == nil {
		err = shutdownErr
	}
	wg.Wait()
	return err
}

// routes maps the service's requests to their handlers.
func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tasks", s.pushTask)
	mux.HandleFunc("GET /stats", s.stats)
	mux.HandleFunc("GET /dead", s.dead)
	return mux
}

// pushTask stores the request body as a task. A request with an
// Idempotency-Key header stores it only if no task of that key is pending
// or running.
func (s *service) pushTask(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var opts []tq.PushOption
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		opts = append(opts, tq.WithUniqueKey(key))
	}
	id, err := s.q.Push(body, opts...)
	switch {
	case errors.Is(err, tq.ErrDuplicate):
		reply(w, http.StatusOK, map[string]any{"id": id, "duplicate": true})
	case errors.Is(err, tq.ErrInvalidJSON) || errors.Is(err, tq.ErrInvalidArgument):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, tq.ErrBusy):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case err != nil:
		s.log.Print(err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		reply(w, http.StatusCreated, map[string]any{"id": id})
	}
}

// stats reports the queue's counts and what this process has done.
func (s *service) stats(w http.ResponseWriter, r *http.Request) {
	counts := map[string]int64{"processed": s.processed.Load(), "failed": s.failed.Load()}
	for _, state := range []tq.State{tq.Pending, tq.Leased, tq.Done, tq.Dead} {
		n, err := s.q.Count(state)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		counts[state.String()] = n
	}
	reply(w, http.StatusOK, counts)
}

// deadTask is how GET /dead shows a dead task.
type deadTask struct {
	ID        int64           `json:"id"`
	Attempts  int             `json:"attempts"`
	LastError string          `json:"last_error"`
	Payload   json.RawMessage `json:"payload"`
}

// dead lists the first 100 dead tasks, with why their last attempt failed.
func (s *service) dead(w http.ResponseWriter, r *http.Request) {
	infos, err := s.q.List(tq.Dead, 0, 100)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	tasks := make([]deadTask, len(infos))
	for i, info := range infos {
		reason, _ := info.LastError()
		tasks[i] = deadTask{info.ID(), info.Attempts(), reason, info.Payload()}
	}
	reply(w, http.StatusOK, tasks)
}

// reply writes status and v as JSON.
func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// work pulls and handles tasks until ctx ends. Pull waits for a task
// without polling, and returns ctx.Err() as soon as ctx ends.
func (s *service) work(ctx context.Context) {
	for {
		task, err := s.q.Pull(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Printf("pull: %v", err)
			select { // ErrBusy or worse: try again in a while
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.handle(ctx, task)
	}
}

// job is what a task asks for.
type job struct {
	WorkMS int    `json:"work_ms"` // how long the work takes
	Fail   string `json:"fail"`    // when set, the work fails with this reason
}

// handle does one task's work and finishes it, or fails it when the work
// fails: it is retried after a back-off until it has used its attempts,
// then dead. Interrupted by ctx, it leaves the task unfinished, to be
// delivered again.
func (s *service) handle(ctx context.Context, task *tq.Task) {
	defer task.Close()
	var j job
	// A payload that is not such an object (a number, a list) has no work.
	if task.Decode(&j) != nil {
		j = job{}
	}
	// Well within the 30 s lease, past which another worker could take
	// the task.
	work := min(time.Duration(j.WorkMS)*time.Millisecond, maxWork)
	select {
	case <-ctx.Done():
		return
	case <-time.After(work):
	}
	if j.Fail != "" {
		if err := task.Fail(j.Fail); err != nil {
			s.log.Printf("fail task %d: %v", task.ID(), err)
			return
		}
		s.failed.Add(1)
		return
	}
	if err := task.Finish(); err != nil {
		s.log.Printf("finish task %d: %v", task.ID(), err)
		return
	}
	s.processed.Add(1)
}

// purgeHistory deletes the tasks finished, or dead, over historyKept ago,
// every minute, until ctx ends.
func (s *service) purgeHistory(ctx context.Context) {
	ticker := time.NewTicker(time.Minute)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			for _, state := range []tq.State{tq.Done, tq.Dead} {
				if _, err := s.q.Purge(state, historyKept); err != nil {
					s.log.Printf("purge: %v", err)
				}
			}
		}
	}
}
