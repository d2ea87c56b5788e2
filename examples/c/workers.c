/*
 * The prototype's scenario in C: push 100 tasks, then four threads pull and
 * finish until none is left; print how many are left (0) and how many each
 * thread did.
 *
 *   make example            (from the repository root)
 *   ./workers [QUEUE_FILE]  (default: workers.db, created if needed)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tq.h>

#define TASKS 100
#define THREADS 4

static tq_queue *queue;

static int fail(const char *what, tq_status status)
{
    fprintf(stderr, "%s failed: %s: %s\n", what, tq_status_str(status), tq_last_error());
    return 1;
}

/* Each worker claims tasks until none is ready, "working" 10 ms on each. */
static void *worker(void *arg)
{
    long *done = arg;
    for (;;) {
        tq_task *task = NULL;
        tq_status status = tq_pull(queue, NULL, &task);
        if (status == TQ_EMPTY)
            break;
        if (status != TQ_OK) {
            fail("tq_pull", status);
            break;
        }
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
        status = tq_finish(queue, task);
        tq_task_free(task);
        if (status != TQ_OK) {
            fail("tq_finish", status);
            break;
        }
        (*done)++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "workers.db";
    if (strcmp(tq_version(), TQ_VERSION) != 0) {
        fprintf(stderr, "header %s but library %s\n", TQ_VERSION, tq_version());
        return 1;
    }

    tq_status status = tq_open(path, NULL, &queue);
    if (status != TQ_OK)
        return fail("tq_open", status);

    /* A worker that crashed in an earlier run leaves tasks behind: take
     * them back. Tasks of live workers elsewhere are left alone. */
    int64_t recovered = 0;
    if ((status = tq_recover(queue, &recovered)) != TQ_OK)
        return fail("tq_recover", status);

    for (int i = 0; i < TASKS; i++) {
        char payload[64];
        int len = snprintf(payload, sizeof payload, "{\"index\": %d, \"sleep\": 0.01}", i);
        if ((status = tq_push(queue, payload, (size_t)len, NULL, NULL)) != TQ_OK)
            return fail("tq_push", status);
    }

    pthread_t threads[THREADS];
    long done[THREADS] = {0};
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, worker, &done[t]);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);

    int64_t left = -1;
    if ((status = tq_count(queue, TQ_STATE_PENDING, &left)) != TQ_OK)
        return fail("tq_count", status);
    printf("pending left: %lld\n", (long long)left);
    long total = 0;
    for (int t = 0; t < THREADS; t++) {
        printf("thread %d finished %ld tasks\n", t, done[t]);
        total += done[t];
    }
    tq_close(queue);
    return left == 0 && total == TASKS + recovered ? 0 : 1;
}
