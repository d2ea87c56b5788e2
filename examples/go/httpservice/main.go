// Command httpservice is a small HTTP service on a tq queue:
//
//	POST /tasks  stores the request body, one JSON text, as a task:
//	             201 {"id": N}; 400 with tq's message when it is not JSON.
//	             With an Idempotency-Key header, a task of that key still
//	             pending or running is not stored twice:
//	             200 {"id": N, "duplicate": true} names it.
//	GET  /stats  {"pending": N, "leased": N, "done": N, "dead": N,
//	             "processed": N, "failed": N}
//	GET  /dead   the first 100 dead tasks:
//	             [{"id": N, "attempts": N, "last_error": "...", "payload": ...}]
//
// A pool of worker goroutines waits in Pull for tasks, works on each (a
// task {"work_ms": 100} takes 100 ms, up to 10 s; any other JSON text takes
// no time) and finishes it. A task {"fail": "reason"} fails: it is retried
// after 1 s, then 2 s, and is dead after its third attempt. Finished and
// dead tasks are kept for an hour, so that /stats counts them; processed
// and failed count what this process did. On SIGINT or SIGTERM the
// service stops taking requests, and a task interrupted mid-work is
// delivered again later.
//
// From examples/go:
//
//	go run -tags tq_intree ./httpservice -addr localhost:8080 -db tasks.db
//	curl -d '{"work_ms": 100}' localhost:8080/tasks
//	curl -d '{"fail": "upstream timed out"}' localhost:8080/tasks
//	curl localhost:8080/stats
//
//	go run -tags tq_intree ./httpservice -selftest
//
// -selftest serves on a free port with a queue in a temporary directory,
// drives the service through HTTP, checks the answers and exits (status 0
// when everything held).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tq-dev/tq-go"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	db := flag.String("db", "tasks.db", "the queue file")
	workers := flag.Int("workers", 4, "worker goroutines")
	self := flag.Bool("selftest", false, "serve on a free port with a temporary queue, check the service through HTTP, and exit")
	flag.Parse()
	logger := log.New(os.Stderr, "", log.LstdFlags)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *self {
		err = selfTest(ctx, logger)
		if err == nil {
			fmt.Println("self-test passed")
		}
	} else {
		err = serve(ctx, *addr, *db, *workers, logger)
	}
	if err != nil {
		logger.Print(err)
		os.Exit(1)
	}
}

// serve runs the service on addr with the queue in path until ctx ends.
func serve(ctx context.Context, addr, path string, workers int, logger *log.Logger) error {
	q, err := tq.Open(path, tq.WithHistory(), tq.WithMaxAttempts(3), tq.WithRetryBackoff(time.Second, time.Minute))
	if err != nil {
		return err
	}
	defer q.Close()
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger.Printf("serving on http://%s with %d workers, queue %s", listener.Addr(), workers, path)
	err = newService(q, logger).run(ctx, listener, workers)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
