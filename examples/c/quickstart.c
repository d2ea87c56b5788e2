/*
 * The shortest worker: push a task, then pull and finish tasks until none
 * is ready.
 *
 *   make example               (from the repository root)
 *   ./quickstart [QUEUE_FILE]  (default: jobs.db, created if needed)
 */
#include <stdio.h>

#include <tq.h>

int main(int argc, char **argv)
{
    tq_queue *queue;
    if (tq_open(argc > 1 ? argv[1] : "jobs.db", NULL, &queue) != TQ_OK) {
        fprintf(stderr, "open: %s\n", tq_last_error());
        return 1;
    }
    tq_recover(queue, NULL); /* take back what crashed workers held */

    const char job[] = "{\"file\": \"a.mp4\"}";
    if (tq_push(queue, job, sizeof job - 1, NULL, NULL) != TQ_OK)
        fprintf(stderr, "push: %s\n", tq_last_error());

    tq_task *task;
    tq_status status;
    while ((status = tq_pull(queue, NULL, &task)) == TQ_OK) {
        size_t len;
        const char *payload = tq_task_payload(task, &len);
        printf("task %lld: %.*s\n", (long long)tq_task_id(task), (int)len, payload);
        if (tq_finish(queue, task) != TQ_OK) /* TQ_ERR_NOT_HELD: the lease was lost */
            fprintf(stderr, "finish: %s\n", tq_last_error());
        tq_task_free(task);
    }
    tq_close(queue);
    return status == TQ_EMPTY ? 0 : 1; /* TQ_EMPTY: no task is ready */
}
