/*
 * Scenario 1: pushing into a full disk or against a file size limit.
 *
 *   fill rlimit DIR LIMIT PAYLOAD   the child runs under a soft
 *                                   RLIMIT_FSIZE of LIMIT bytes
 *   fill disk DIR FILLER PAYLOAD    DIR is a small filesystem; the child
 *                                   first writes DIR/filler (FILLER bytes)
 *
 * A forked child opens DIR/fill.db, arms the fault, pushes tasks of about
 * PAYLOAD bytes until one push fails, tries once more, lifts the fault
 * (raises the soft limit back / deletes the filler), pushes once more on
 * the same handle and counts. The parent, which never had the file open,
 * then reopens it and checks that exactly the acknowledged tasks are there,
 * in order, byte for byte, and nothing of the failed push.
 *
 * Prints what it sees; exit status 0 when every check passed, 1 when one
 * failed, 2 when the test itself could not run.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tq.h>

#include "common.h"

/* Pushes stop here even if nothing fails: the fault did not take. */
#define MAX_PUSHES 200000
/* Indexes of the push made after lifting the fault. */
#define AFTER_INDEX 1000000000L
#define MAX_PAYLOAD 8192

/* ------------------------------------------------------------------------
 * Faults: how to cause one in the child, and how to take it away again
 * --------------------------------------------------------------------- */

struct fault {
    const char *dir;
    long long size; /* the limit, or the filler's size */
    bool (*arm)(const struct fault *fault);
    bool (*lift)(const struct fault *fault);
    const char *lift_text;
};

static bool set_soft_fsize(rlim_t soft)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_FSIZE, &limit) != 0)
        return false;
    limit.rlim_cur = soft;
    return setrlimit(RLIMIT_FSIZE, &limit) == 0;
}

static bool rlimit_arm(const struct fault *fault)
{
    /* Without this, the first write past the limit kills the process with
     * SIGXFSZ; ignored, the write fails with EFBIG instead. */
    signal(SIGXFSZ, SIG_IGN);
    return set_soft_fsize((rlim_t)fault->size);
}

static bool rlimit_lift(const struct fault *fault)
{
    (void)fault;
    /* Only the soft limit was lowered, so it can be raised back to the
     * hard limit without privileges. */
    struct rlimit limit;
    return getrlimit(RLIMIT_FSIZE, &limit) == 0 && set_soft_fsize(limit.rlim_max);
}

static void filler_path(const struct fault *fault, char *buf, size_t size)
{
    snprintf(buf, size, "%s/filler", fault->dir);
}

static bool disk_arm(const struct fault *fault)
{
    char path[4096];
    filler_path(fault, path, sizeof path);
    FILE *out = fopen(path, "w");
    if (!out)
        return false;
    static char block[4096];
    memset(block, 'f', sizeof block);
    bool ok = true;
    for (long long written = 0; ok && written < fault->size; written += (long long)sizeof block)
        ok = fwrite(block, sizeof block, 1, out) == 1;
    ok = fclose(out) == 0 && ok;
    return ok;
}

static bool disk_lift(const struct fault *fault)
{
    char path[4096];
    filler_path(fault, path, sizeof path);
    return unlink(path) == 0;
}

/* ------------------------------------------------------------------------
 * The child: fill, fail, lift, try again
 * --------------------------------------------------------------------- */

/* What the child reports to the parent through a pipe. */
struct child_report {
    long acked;          /* pushes 0..acked-1 returned TQ_OK */
    int failed_status;   /* the status of push number `acked` */
    int again_status;    /* one more push under the fault */
    int after_status;    /* a push once the fault was lifted */
    long long pending;   /* the handle's pending count at the end */
    bool setup_failed;
};

static tq_status push_index(tq_queue *queue, long index, size_t payload_size)
{
    char payload[MAX_PAYLOAD + 64];
    size_t len = make_payload(payload, sizeof payload, index, payload_size);
    return tq_push(queue, payload, len, NULL, NULL);
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Which file ran into the fault: the sizes of the database and its WAL. */
static void print_sizes(const char *path)
{
    char wal[4096 + 8]; /* path is at most 4096 bytes */
    snprintf(wal, sizeof wal, "%s-wal", path);
    printf("child: at the failure the database is %lld bytes, its WAL %lld bytes\n", file_size(path),
           file_size(wal));
}

static void child_run(const char *path, const struct fault *fault, size_t payload_size, struct child_report *r)
{
    tq_queue *queue = NULL;
    if (tq_open(path, NULL, &queue) != TQ_OK) {
        printf("child: open failed: %s\n", tq_last_error());
        r->setup_failed = true;
        return;
    }
    if (!fault->arm(fault)) {
        printf("child: cannot arm the fault: %s\n", strerror(errno));
        r->setup_failed = true;
        tq_close(queue);
        return;
    }

    tq_status status = TQ_OK;
    while (r->acked < MAX_PUSHES && (status = push_index(queue, r->acked, payload_size)) == TQ_OK)
        r->acked++;
    r->failed_status = status;
    print_sizes(path);
    printf("child: %ld pushes returned TQ_OK; push #%ld returned %s (%d): %s\n", r->acked, r->acked,
           status_name(status), (int)status, status == TQ_OK ? "" : tq_last_error());

    status = push_index(queue, AFTER_INDEX - 1, payload_size);
    r->again_status = status;
    printf("child: one more push under the fault: %s%s%s\n", status_name(status), status ? ": " : "",
           status ? tq_last_error() : "");
    if (status == TQ_OK)
        printf("child: (that push was stored though the fault is still armed)\n");

    if (!fault->lift(fault)) {
        printf("child: cannot lift the fault: %s\n", strerror(errno));
        r->setup_failed = true;
    }
    printf("child: fault lifted (%s)\n", fault->lift_text);
    status = push_index(queue, AFTER_INDEX, payload_size);
    r->after_status = status;
    printf("child: push on the same handle after lifting: %s%s%s\n", status_name(status), status ? ": " : "",
           status ? tq_last_error() : "");

    int64_t pending = -1;
    status = tq_count(queue, TQ_STATE_PENDING, &pending);
    r->pending = pending;
    printf("child: pending count on the same handle: %lld (%s)\n", (long long)pending, status_name(status));
    tq_close(queue);
}

/* ------------------------------------------------------------------------
 * The parent: reopen and check
 * --------------------------------------------------------------------- */

/* Pulls every task and checks it is the next one expected: pushes
 * 0..acked-1, then the one made after lifting if it returned TQ_OK, then,
 * only if they returned TQ_OK, the extra one under the fault. */
static bool check_contents(const char *path, const struct child_report *r, size_t payload_size)
{
    tq_queue *queue = NULL;
    tq_status status = tq_open(path, NULL, &queue);
    if (status != TQ_OK) {
        printf("parent: reopen failed: %s: %s\n", status_name(status), tq_last_error());
        return false;
    }
    long expected[3] = {0};
    long extra = 0;
    if (r->again_status == TQ_OK)
        expected[extra++] = AFTER_INDEX - 1;
    if (r->after_status == TQ_OK)
        expected[extra++] = AFTER_INDEX;

    bool ok = true;
    long count = 0;
    char want[MAX_PAYLOAD + 64];
    tq_task *task;
    while ((status = tq_pull(queue, NULL, &task)) == TQ_OK) {
        long index = count < r->acked ? count : (count - r->acked < extra ? expected[count - r->acked] : -1);
        size_t got_len = 0;
        const char *got = tq_task_payload(task, &got_len);
        size_t want_len = index >= 0 ? make_payload(want, sizeof want, index, payload_size) : 0;
        if (index < 0 || got_len != want_len || memcmp(got, want, want_len) != 0) {
            if (ok) /* the first difference says enough */
                printf("parent: task #%ld is %.60s..., expected push #%ld\n", count, got, index);
            ok = false;
        }
        tq_task_free(task);
        count++;
    }
    if (status != TQ_EMPTY) {
        printf("parent: pull failed: %s: %s\n", status_name(status), tq_last_error());
        ok = false;
    }
    if (count != r->acked + extra) {
        printf("parent: the file holds %ld tasks, expected %ld\n", count, r->acked + extra);
        ok = false;
    }
    if (ok)
        printf("parent: reopened; all %ld tasks there, in order, byte for byte; nothing of the failed push\n",
               count);
    tq_close(queue);
    return ok;
}

static int run(const char *dir, const struct fault *fault, size_t payload_size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fill.db", dir);

    int fds[2];
    if (pipe(fds) != 0)
        die("pipe: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        struct child_report report;
        memset(&report, 0, sizeof report);
        child_run(path, fault, payload_size, &report);
        fflush(stdout);
        if (write(fds[1], &report, sizeof report) != (ssize_t)sizeof report)
            _exit(3);
        _exit(0);
    }
    close(fds[1]);
    struct child_report r;
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    if (WIFSIGNALED(wstatus)) {
        printf("FAIL: the child was killed by signal %d\n", WTERMSIG(wstatus));
        return 1;
    }
    if (got != (ssize_t)sizeof r || r.setup_failed)
        return 2;

    bool ok = true;
    if (r.failed_status != TQ_ERR_IO) {
        printf("FAIL: the first failed push returned %s, expected TQ_ERR_IO\n", status_name(r.failed_status));
        ok = false;
    }
    if (r.after_status != TQ_OK) {
        printf("FAIL: the handle did not work again once the fault was lifted\n");
        ok = false;
    }
    long long expected_pending = r.acked + (r.again_status == TQ_OK) + (r.after_status == TQ_OK);
    if (r.pending != expected_pending) {
        printf("FAIL: the handle counted %lld pending tasks, expected %lld\n", r.pending, expected_pending);
        ok = false;
    }
    if (!check_contents(path, &r, payload_size))
        ok = false;
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: fill rlimit|disk DIR SIZE PAYLOAD\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct fault fault = {.dir = argv[2], .size = atoll(argv[3])};
    if (strcmp(argv[1], "rlimit") == 0) {
        fault.arm = rlimit_arm;
        fault.lift = rlimit_lift;
        fault.lift_text = "soft RLIMIT_FSIZE raised back to the hard limit";
    } else if (strcmp(argv[1], "disk") == 0) {
        fault.arm = disk_arm;
        fault.lift = disk_lift;
        fault.lift_text = "filler file deleted";
    } else {
        fprintf(stderr, "unknown fault %s\n", argv[1]);
        return 2;
    }
    size_t payload_size = (size_t)atol(argv[4]);
    if (payload_size < 16 || payload_size > MAX_PAYLOAD)
        die("payload size out of range");
    return run(argv[2], &fault, payload_size);
}
