/*
 * The plain C loops the Node.js benchmark (bench/node/bench.js) measures its
 * binding against, on the same library, file settings and disk: the loops
 * of the Go binding's benchmarks (bindings/go/internal/cbench).
 *
 *     c_loops FILE DURABILITY push N          time N single pushes
 *     c_loops FILE DURABILITY pull_finish N   push N tasks (untimed), then
 *                                             time N pulls, each finished
 *
 * DURABILITY is 0 (full) or 1 (normal). Prints the loop's time in
 * nanoseconds; on an error, prints it to stderr and exits 1.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tq.h>

/* The payload of the crate's throughput benchmark and the binding's. */
static const char PAYLOAD[] = "{\"kind\":\"email\",\"to\":\"user@example.com\",\"template\":\"welcome\"}";

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int fail(const char *what, enum tq_status status)
{
    fprintf(stderr, "c_loops: %s: %s: %s\n", what, tq_status_str(status), tq_last_error());
    return 1;
}

static enum tq_status push_loop(tq_queue *q, long n)
{
    for (long i = 0; i < n; i++) {
        int64_t id;
        enum tq_status status = tq_push(q, PAYLOAD, sizeof PAYLOAD - 1, NULL, &id);
        if (status != TQ_OK)
            return status;
    }
    return TQ_OK;
}

static enum tq_status pull_finish_loop(tq_queue *q, long n)
{
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
    return TQ_OK;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[3], "push") != 0 && strcmp(argv[3], "pull_finish") != 0)) {
        fprintf(stderr, "usage: c_loops FILE DURABILITY push|pull_finish N\n");
        return 2;
    }
    long n = strtol(argv[4], NULL, 10);
    tq_options *options = tq_options_new();
    enum tq_status status = tq_options_set_durability(options, atoi(argv[2]));
    if (status != TQ_OK)
        return fail("durability", status);
    tq_queue *q;
    status = tq_open(argv[1], options, &q);
    tq_options_free(options);
    if (status != TQ_OK)
        return fail("open", status);
    int pulling = strcmp(argv[3], "pull_finish") == 0;
    if (pulling && (status = push_loop(q, n)) != TQ_OK)
        return fail("push", status);
    int64_t start = now_ns();
    status = pulling ? pull_finish_loop(q, n) : push_loop(q, n);
    int64_t elapsed = now_ns() - start;
    if (status != TQ_OK)
        return fail(argv[3], status);
    tq_close(q);
    printf("%lld\n", (long long)elapsed);
    return 0;
}
