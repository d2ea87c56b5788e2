/*
 * Scenario 2: one queue cycle under an injected system-call failure.
 *
 *   cycle run DB                  open, push, pull, finish, close on DB
 *   cycle verify DB RESULTS CALLS reopen DB cleanly and check it against the
 *                                 run's output RESULTS; CALLS names the calls
 *                                 (comma-separated, or "-") whose failure
 *                                 came from a commit: their effect is unknown
 *
 * `run` is meant to run under strace with an injected failure (of one
 * system call, or of every call from one on). It prints
 * "begin CALL" before each call and "end CALL STATUS CODE MESSAGE" after it
 * (one write(2) each, so the strace log shows where the injection landed),
 * and never stops early except when open fails.
 *
 * `verify` runs without strace, in another process. It replays the run's
 * outcomes on the set of states the task may be in (absent, pending,
 * leased, gone), treating a failure during a commit as "applied or not",
 * and checks that the reopened file holds one of them, with the exact
 * payload and attempt count. Its last line is "verdict ok" or
 * "verdict FAIL: reason"; exit status 0 or 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tq.h>

#include "common.h"

/* Small enough to fit one page: the cycle's writes stay a few frames. */
#define PAYLOAD_INDEX 42
#define PAYLOAD_SIZE 100

/* ------------------------------------------------------------------------
 * run
 * --------------------------------------------------------------------- */

static void say_end(const char *call, tq_status status)
{
    if (status < 0) {
        const char *message = tq_last_error();
        say("end %s %s %d %s", call, status_name(status), (int)status,
            message[0] ? message : "(no message)");
    } else {
        say("end %s %s %d", call, status_name(status), (int)status);
    }
}

static int run(const char *path)
{
    char payload[PAYLOAD_SIZE + 64];
    size_t len = make_payload(payload, sizeof payload, PAYLOAD_INDEX, PAYLOAD_SIZE);

    tq_queue *queue = NULL;
    say("begin open");
    tq_status status = tq_open(path, NULL, &queue);
    say_end("open", status);
    if (status != TQ_OK)
        return 0; /* nothing more can be called; verify checks the file */

    /* A handle in WAL mode keeps DB-wal open from its first read on; its
     * absence after a successful open means the file is in rollback-journal
     * mode. stat(2) is not among the injected calls, so this check does not
     * shift the injection count. */
    char wal[4096 + 8];
    snprintf(wal, sizeof wal, "%s-wal", path);
    say("journal %s", file_exists(wal) ? "wal" : "NOT-WAL");

    say("begin push");
    say_end("push", tq_push(queue, payload, len, NULL, NULL));

    tq_task *task = NULL;
    say("begin pull");
    status = tq_pull(queue, NULL, &task);
    say_end("pull", status);
    if (status == TQ_OK) {
        size_t got_len = 0;
        const char *got = tq_task_payload(task, &got_len);
        bool same = got_len == len && memcmp(got, payload, len) == 0;
        say("pulled attempts=%u payload=%s", tq_task_attempts(task), same ? "exact" : "DIFFERENT");
        say("begin finish");
        say_end("finish", tq_finish(queue, task));
        tq_task_free(task);
    }

    /* tq_close returns nothing; what it did is checked by verify. */
    say("begin close");
    tq_close(queue);
    say("end close");
    return 0;
}

/* ------------------------------------------------------------------------
 * verify
 * --------------------------------------------------------------------- */

/* The states the task may be in, as a bit set. A task that was never
 * stored and one that was finished (deleted) look the same in the file. */
enum { ABSENT = 1, PENDING = 2, LEASED = 4, GONE = 8 };

static const char *state_names(int set)
{
    static char buf[64];
    buf[0] = '\0';
    const char *names[] = {"absent", "pending", "leased", "gone"};
    for (int i = 0; i < 4; i++) {
        if (set & (1 << i)) {
            if (buf[0])
                strcat(buf, "|");
            strcat(buf, names[i]);
        }
    }
    return buf[0] ? buf : "(none)";
}

/* The set after a call that moves the task from `from` to `to` returned
 * `status`: applied on success, unchanged on failure, either when the
 * failure came from a commit. */
static int step(int set, int from, int to, int status, bool unknown)
{
    int applied = (set & from) ? (set & ~from) | to : set;
    if (status == TQ_OK)
        return applied;
    return unknown ? set | applied : set;
}

struct outcome {
    bool ran;
    int status;
};

struct run_result {
    struct outcome open, push, pull, finish;
    bool closed;          /* "end close" was printed */
    bool not_wal;         /* open succeeded but left the file out of WAL mode */
    bool pulled_exact;    /* the pulled payload was the pushed one */
    unsigned pulled_attempts;
    char failure[256];    /* a call that failed with a status other than a negative one with a message */
};

static struct outcome *outcome_of(struct run_result *r, const char *call)
{
    if (strcmp(call, "open") == 0) return &r->open;
    if (strcmp(call, "push") == 0) return &r->push;
    if (strcmp(call, "pull") == 0) return &r->pull;
    if (strcmp(call, "finish") == 0) return &r->finish;
    return NULL;
}

static void read_results(const char *file, struct run_result *r)
{
    FILE *in = fopen(file, "r");
    if (!in)
        die("cannot read %s", file);
    char line[1200];
    while (fgets(line, sizeof line, in)) {
        char call[32], name[64];
        int status;
        unsigned attempts;
        char exact[16];
        if (sscanf(line, "end %31s %63s %d", call, name, &status) == 3) {
            struct outcome *o = outcome_of(r, call);
            if (o) {
                o->ran = true;
                o->status = status;
                if (status < 0 && strstr(line, "(no message)"))
                    snprintf(r->failure, sizeof r->failure, "%s failed without a message", call);
            }
        } else if (strncmp(line, "journal NOT-WAL", 15) == 0) {
            r->not_wal = true;
        } else if (strncmp(line, "end close", 9) == 0) {
            r->closed = true;
        } else if (sscanf(line, "pulled attempts=%u payload=%15s", &attempts, exact) == 2) {
            r->pulled_attempts = attempts;
            r->pulled_exact = strcmp(exact, "exact") == 0;
        }
    }
    fclose(in);
}

/* The states the file may hold after the run, or 0 with `why` set when the
 * run itself contradicts the contract. */
/* Whether `call` is in the comma-separated list `unknown` ("-" for none). */
static bool is_unknown(const char *unknown, const char *call)
{
    size_t len = strlen(call);
    for (const char *p = unknown; (p = strstr(p, call)) != NULL; p += len)
        if ((p == unknown || p[-1] == ',') && (p[len] == '\0' || p[len] == ','))
            return true;
    return false;
}

static int expected_states(const struct run_result *r, const char *unknown, char *why, size_t whysize)
{
    int set = ABSENT;
    if (!r->open.ran) {
        snprintf(why, whysize, "the run printed no result for open");
        return 0;
    }
    if (r->open.status != TQ_OK)
        return set; /* no call ran after it */
    set = step(set, ABSENT, PENDING, r->push.status, is_unknown(unknown, "push"));

    if (r->pull.status == TQ_OK) {
        /* The pull saw the task: it must have been stored. */
        if (!(set & PENDING)) {
            snprintf(why, whysize, "pull returned a task whose push failed");
            return 0;
        }
        if (!r->pulled_exact || r->pulled_attempts != 1) {
            snprintf(why, whysize, "pull returned attempts=%u, payload %s", r->pulled_attempts,
                     r->pulled_exact ? "exact" : "DIFFERENT");
            return 0;
        }
        set = PENDING; /* it was stored, whatever the push said */
    } else if (r->pull.status == TQ_EMPTY && set == PENDING) {
        snprintf(why, whysize, "pull found no task after a push that returned TQ_OK");
        return 0;
    }
    set = step(set, PENDING, LEASED, r->pull.status, is_unknown(unknown, "pull"));

    if (r->finish.ran)
        set = step(set, LEASED, GONE, r->finish.status, is_unknown(unknown, "finish"));
    return set;
}

/* Reopens the file with tq (a clean reopen: recovery of the WAL), and
 * reports the task's state, checking its payload and attempts by pulling it
 * (after recovering it when the dead run held it). */
static int observed_state(const char *path, char *why, size_t whysize)
{
    tq_queue *queue = NULL;
    tq_status status = tq_open(path, NULL, &queue);
    if (status != TQ_OK) {
        snprintf(why, whysize, "reopen failed: %s %s", status_name(status), tq_last_error());
        return 0;
    }
    int64_t pending = -1, leased = -1, done = -1;
    if (tq_count(queue, TQ_STATE_PENDING, &pending) != TQ_OK || tq_count(queue, TQ_STATE_LEASED, &leased) != TQ_OK ||
        tq_count(queue, TQ_STATE_DONE, &done) != TQ_OK) {
        snprintf(why, whysize, "count failed: %s", tq_last_error());
        tq_close(queue);
        return 0;
    }
    int state;
    unsigned want_attempts = 1;
    if (pending + leased + done == 0) {
        tq_close(queue);
        return ABSENT | GONE;
    } else if (pending == 1 && leased == 0 && done == 0) {
        state = PENDING;
    } else if (pending == 0 && leased == 1 && done == 0) {
        state = LEASED;
        want_attempts = 2; /* recovered from the run, pulled again below */
        int64_t recovered = 0;
        if (tq_recover(queue, &recovered) != TQ_OK || recovered != 1) {
            snprintf(why, whysize, "recover of the dead run's lease gave %lld", (long long)recovered);
            tq_close(queue);
            return 0;
        }
    } else {
        snprintf(why, whysize, "the file holds %lld pending, %lld leased, %lld done tasks", (long long)pending,
                 (long long)leased, (long long)done);
        tq_close(queue);
        return 0;
    }

    char payload[PAYLOAD_SIZE + 64];
    size_t len = make_payload(payload, sizeof payload, PAYLOAD_INDEX, PAYLOAD_SIZE);
    tq_task *task = NULL;
    status = tq_pull(queue, NULL, &task);
    if (status != TQ_OK) {
        snprintf(why, whysize, "pull of the stored task gave %s", status_name(status));
        state = 0;
    } else {
        size_t got_len = 0;
        const char *got = tq_task_payload(task, &got_len);
        if (got_len != len || memcmp(got, payload, len) != 0) {
            snprintf(why, whysize, "stored payload differs: %.*s", (int)got_len, got);
            state = 0;
        } else if (tq_task_attempts(task) != want_attempts) {
            snprintf(why, whysize, "stored attempts %u, expected %u", tq_task_attempts(task), want_attempts);
            state = 0;
        }
        tq_task_free(task);
    }
    tq_close(queue);
    return state;
}

static int verify(const char *path, const char *results, const char *unknown)
{
    struct run_result r;
    memset(&r, 0, sizeof r);
    read_results(results, &r);

    char why[512] = "";
    if (r.failure[0]) {
        say("verdict FAIL: %s", r.failure);
        return 1;
    }
    if (r.open.status == TQ_OK && !r.closed) {
        say("verdict FAIL: the run did not reach the end of close");
        return 1;
    }
    int expected = expected_states(&r, unknown, why, sizeof why);
    if (!expected) {
        say("verdict FAIL: %s", why);
        return 1;
    }
    int observed = observed_state(path, why, sizeof why);
    if (!observed) {
        say("verdict FAIL: %s", why);
        return 1;
    }
    say("expected %s", state_names(expected));
    say("observed %s", state_names(observed));
    if (!(expected & observed)) {
        say("verdict FAIL: the file holds the task %s, expected %s", state_names(observed), state_names(expected));
        return 1;
    }
    /* Checked last, so the line above still tells whether the data is right. */
    if (r.not_wal) {
        say("verdict FAIL: open returned TQ_OK but left the file in rollback-journal mode (data ok)");
        return 1;
    }
    say("verdict ok");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "run") == 0)
        return run(argv[2]);
    if (argc == 5 && strcmp(argv[1], "verify") == 0)
        return verify(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: cycle run DB | cycle verify DB RESULTS UNKNOWN-CALLS\n");
    return 2;
}
