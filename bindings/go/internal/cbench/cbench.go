// Package cbench runs the loops of the binding's benchmarks in C, one cgo
// call per loop, so that the benchmarks measure the binding against C on the
// same library, file settings and disk, in the same run.
package cbench

/*
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <tq.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Pushes payload n times, one task per call; the time taken goes to *ns.
static enum tq_status push_loop(tq_queue *q, const char *payload, size_t len, long n, int64_t *ns)
{
    int64_t start = now_ns();
    for (long i = 0; i < n; i++) {
        int64_t id;
        enum tq_status status = tq_push(q, payload, len, NULL, &id);
        if (status != TQ_OK)
            return status;
    }
    *ns = now_ns() - start;
    return TQ_OK;
}

// Pushes payload n times in batches of up to batch tasks (at most 1,000),
// one transaction each; the time taken goes to *ns.
static enum tq_status push_batch_loop(tq_queue *q, const char *payload, size_t len, long n, long batch, int64_t *ns)
{
    const char *payloads[1000];
    size_t lens[1000];
    int64_t ids[1000];
    for (long i = 0; i < batch; i++) {
        payloads[i] = payload;
        lens[i] = len;
    }
    int64_t start = now_ns();
    for (long done = 0; done < n; done += batch) {
        long count = n - done < batch ? n - done : batch;
        enum tq_status status = tq_push_batch(q, payloads, lens, (size_t)count, NULL, ids);
        if (status != TQ_OK)
            return status;
    }
    *ns = now_ns() - start;
    return TQ_OK;
}

// Pulls, finishes and frees n tasks; the time taken goes to *ns. TQ_EMPTY
// means fewer than n tasks were ready.
static enum tq_status pull_finish_loop(tq_queue *q, long n, int64_t *ns)
{
    int64_t start = now_ns();
    for (long i = 0; i < n; i++) {
        tq_task *task;
        enum tq_status status = tq_pull(q, NULL, &task);
        if (status != TQ_OK)
            return status;
        status = tq_finish(q, task);
        tq_task_free(task);
        if (status != TQ_OK)
            return status;
    }
    *ns = now_ns() - start;
    return TQ_OK;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// Queue is a queue opened from C.
type Queue struct {
	c *C.tq_queue
}

// check turns a status into an error; it runs on the OS thread of the call
// that returned status, so the thread's last error is that call's.
func check(status C.enum_tq_status) error {
	if status == C.TQ_OK {
		return nil
	}
	return fmt.Errorf("%s: %s", C.GoString(C.tq_status_str(C.int32_t(status))), C.GoString(C.tq_last_error()))
}

// Open opens the queue file at path with a durability (0 full, 1 normal).
func Open(path string, durability int) (*Queue, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	options := C.tq_options_new()
	defer C.tq_options_free(options)
	if err := check(C.tq_options_set_durability(options, C.int32_t(durability))); err != nil {
		return nil, err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	q := &Queue{}
	if err := check(C.tq_open(cpath, options, &q.c)); err != nil {
		return nil, err
	}
	return q, nil
}

// Close closes the queue.
func (q *Queue) Close() {
	C.tq_close(q.c)
}

// Push pushes payload n times from C and returns the time the loop took.
func (q *Queue) Push(payload []byte, n int) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ns C.int64_t
	err := check(C.push_loop(q.c, (*C.char)(unsafe.Pointer(&payload[0])), C.size_t(len(payload)), C.long(n), &ns))
	return time.Duration(ns), err
}

// PushBatch pushes payload n times from C, in batches of up to batch tasks
// (at most 1,000), and returns the time the loop took.
func (q *Queue) PushBatch(payload []byte, n, batch int) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ns C.int64_t
	err := check(C.push_batch_loop(q.c, (*C.char)(unsafe.Pointer(&payload[0])), C.size_t(len(payload)), C.long(n), C.long(batch), &ns))
	return time.Duration(ns), err
}

// PullFinish pulls, finishes and frees n tasks from C and returns the time
// the loop took.
func (q *Queue) PullFinish(n int) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ns C.int64_t
	err := check(C.pull_finish_loop(q.c, C.long(n), &ns))
	return time.Duration(ns), err
}
