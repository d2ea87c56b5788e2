/*
 * Scenario 3a: two handles on one file in one process, a short cycle.
 *
 *   hygiene DB
 *   hygiene DB --bad   the same, but the program itself also opens and
 *                      closes DB-shm once while the handles are open, as
 *                      a second copy of SQLite in the process would: a
 *                      negative control for the checks of the strace log
 *
 * Opens DB twice, pushes through one handle and pulls and finishes through
 * the other, both ways; closes the first handle and checks, in
 * /proc/locks, that the process still holds its POSIX locks on DB-shm (the
 * second handle relies on them: a close of any descriptor of the file
 * would have dropped them all); then keeps using the second handle.
 * Meant to run under strace, whose log scenario3.sh checks.
 *
 * Exit status 0 when every call did what it should, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tq.h>

#include "common.h"

static int failures;

static void expect(tq_status got, tq_status want, const char *what)
{
    if (got != want) {
        printf("FAIL: %s returned %s, expected %s: %s\n", what, status_name(got), status_name(want),
               tq_last_error());
        failures++;
    }
}

static void push(tq_queue *queue, int index)
{
    char payload[64];
    size_t len = make_payload(payload, sizeof payload, index, 20);
    expect(tq_push(queue, payload, len, NULL, NULL), TQ_OK, "push");
}

/* Pulls through `puller` and finishes through `finisher`. */
static void pull_and_finish(tq_queue *puller, tq_queue *finisher)
{
    tq_task *task = NULL;
    expect(tq_pull(puller, NULL, &task), TQ_OK, "pull");
    if (task)
        expect(tq_finish(finisher, task), TQ_OK, "finish");
    tq_task_free(task);
}

/* How many POSIX locks this process holds on the file at `path`, from
 * /proc/locks (lines "N: POSIX ADVISORY READ|WRITE PID MAJ:MIN:INODE ..."). */
static int my_locks_on(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    FILE *in = fopen("/proc/locks", "r");
    if (!in)
        return -1;
    int count = 0;
    char line[256];
    while (fgets(line, sizeof line, in)) {
        char kind[16];
        long pid;
        unsigned long inode;
        if (sscanf(line, "%*d: %15s %*s %*s %ld %*x:%*x:%lu", kind, &pid, &inode) == 3 &&
            strcmp(kind, "POSIX") == 0 && pid == (long)getpid() && inode == (unsigned long)st.st_ino)
            count++;
    }
    fclose(in);
    return count;
}

int main(int argc, char **argv)
{
    bool bad = argc == 3 && strcmp(argv[2], "--bad") == 0;
    if (argc != 2 && !bad) {
        fprintf(stderr, "usage: hygiene DB [--bad]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *path = argv[1];
    char shm[4096 + 8];
    snprintf(shm, sizeof shm, "%s-shm", path);

    tq_queue *a = NULL, *b = NULL;
    expect(tq_open(path, NULL, &a), TQ_OK, "open a");
    expect(tq_open(path, NULL, &b), TQ_OK, "open b");
    if (!a || !b)
        return 1;
    for (int i = 0; i < 4; i++)
        push(i % 2 ? b : a, i);
    pull_and_finish(b, a);
    pull_and_finish(a, b);
    printf("two handles: pushed 4, pulled and finished 2 across handles\n");
    printf("locks held on -shm with both handles open: %d\n", my_locks_on(shm));
    if (bad) {
        /* What tq must never do: this close drops the process's locks. */
        int fd = open(shm, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            close(fd);
        printf("--bad: opened and closed -shm behind the handles' back\n");
    }

    tq_close(a);
    int locks = my_locks_on(shm);
    printf("locks held on -shm after closing handle a: %d\n", locks);
    if (locks < 1) {
        printf("FAIL: the process holds no lock on -shm though handle b is open\n");
        failures++;
    }
    pull_and_finish(b, b);
    pull_and_finish(b, b);
    int64_t left = -1;
    expect(tq_count(b, TQ_STATE_PENDING, &left), TQ_OK, "count");
    if (left != 0) {
        printf("FAIL: %lld tasks left, expected 0\n", (long long)left);
        failures++;
    }
    tq_close(b);
    printf("%s\n", failures ? "hygiene: FAILED" : "hygiene: every call did what it should");
    return failures ? 1 : 0;
}
