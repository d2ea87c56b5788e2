/*
 * Scenario 2, holder identity: can a live holder's task be taken by
 * tq_recover in another process?
 *
 *   holder hold DB    open, push one task, pull it under a 60 s lease,
 *                     print "holding", wait for a line on stdin, then
 *                     finish it and print "end finish STATUS"
 *   holder steal DB   open, tq_recover ("recovered N"), then pull
 *                     ("pull STATUS"); finishes what it pulled
 *
 * Run `hold` (possibly under strace with an injected failure), then `steal`
 * while it holds the task: since the holder is alive and its lease has not
 * expired, steal must recover 0 tasks and find the queue empty, and the
 * holder's finish must succeed.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>

#include <tq.h>

#include "common.h"

static tq_queue *open_or_die(const char *path)
{
    tq_queue *queue = NULL;
    say("begin open");
    tq_status status = tq_open(path, NULL, &queue);
    say("end open %s", status_name(status));
    if (status != TQ_OK)
        die("open %s: %s", path, tq_last_error());
    return queue;
}

static int hold(const char *path)
{
    tq_queue *queue = open_or_die(path);
    const char payload[] = "{\"held\":true}";
    if (tq_push(queue, payload, sizeof payload - 1, NULL, NULL) != TQ_OK)
        die("push: %s", tq_last_error());

    tq_pull_options *options = tq_pull_options_new();
    tq_pull_options_set_lease_ms(options, 60000);
    tq_task *task = NULL;
    tq_status status = tq_pull(queue, options, &task);
    tq_pull_options_free(options);
    if (status != TQ_OK)
        die("pull: %s %s", status_name(status), tq_last_error());
    say("holding task %lld", (long long)tq_task_id(task));

    char line[16];
    if (!fgets(line, sizeof line, stdin))
        say("stdin closed");
    status = tq_finish(queue, task);
    say("end finish %s", status_name(status));
    tq_task_free(task);
    tq_close(queue);
    return 0;
}

static int steal(const char *path)
{
    tq_queue *queue = open_or_die(path);
    int64_t recovered = -1;
    tq_status status = tq_recover(queue, &recovered);
    say("recovered %lld (%s)", (long long)recovered, status_name(status));
    tq_task *task = NULL;
    status = tq_pull(queue, NULL, &task);
    say("pull %s attempts=%u", status_name(status), tq_task_attempts(task));
    if (status == TQ_OK)
        tq_finish(queue, task);
    tq_task_free(task);
    tq_close(queue);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "hold") == 0)
        return hold(argv[2]);
    if (argc == 3 && strcmp(argv[1], "steal") == 0)
        return steal(argv[2]);
    fprintf(stderr, "usage: holder hold|steal DB\n");
    return 2;
}
