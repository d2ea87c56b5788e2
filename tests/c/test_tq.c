/*
 * The C test suite of libtq: every exported function, every error path.
 *
 *   test_tq          run every case
 *   test_tq NAME     run the case NAME alone
 *
 * Each case runs in a fresh temporary directory under $TMPDIR (or /tmp).
 * One line is printed per failed check; the last line is "N passed, N
 * failed", counting cases. Children forked by a case report through their
 * exit status and leave with _exit(), so that no atexit handler (stdio
 * buffers, LeakSanitizer) runs twice.
 */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tq.h>

/* valgrind's leak check also runs when a forked child exits; see
 * child_exit(). Without the header, nothing changes outside valgrind. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef VALGRIND_CLO_CHANGE
#define VALGRIND_CLO_CHANGE(option) ((void)(option))
#endif

/* ------------------------------------------------------------------------
 * Harness
 * --------------------------------------------------------------------- */

static const char *case_name = "";
static int case_failed;
/* What a loop is at, added to the line of a failed check (or NULL). */
static const char *check_note;

static void report(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void report(const char *file, int line, const char *fmt, ...)
{
    printf("%s:%d: %s: ", file, line, case_name);
    va_list args;
    va_start(args, fmt);
    vprintf(fmt, args);
    va_end(args);
    if (check_note)
        printf(" [%s]", check_note);
    printf("\n");
    fflush(stdout);
    case_failed = 1;
}

static bool check_(bool ok, const char *file, int line, const char *what)
{
    if (!ok)
        report(file, line, "check failed: %s", what);
    return ok;
}

static bool check_status_(tq_status got, tq_status want, const char *file, int line, const char *what)
{
    if (got != want) {
        /* Copied first: the message is only valid until the next tq call. */
        char message[512];
        snprintf(message, sizeof message, "%s", tq_last_error());
        report(file, line, "%s returned %d (%s), expected %d (%s); last error: \"%s\"", what, (int)got,
               tq_status_str(got), (int)want, tq_status_str(want), message);
    }
    return got == want;
}

static bool check_int_(long long got, long long want, const char *file, int line, const char *what)
{
    if (got != want)
        report(file, line, "%s is %lld, expected %lld", what, got, want);
    return got == want;
}

static bool check_contains_(const char *text, const char *part, const char *file, int line, const char *what)
{
    bool ok = text != NULL && strstr(text, part) != NULL;
    if (!ok)
        report(file, line, "%s is \"%s\", expected it to contain \"%s\"", what, text ? text : "(NULL)", part);
    return ok;
}

#define CHECK(cond) check_((cond), __FILE__, __LINE__, #cond)
#define CHECK_STATUS(call, want) check_status_((call), (want), __FILE__, __LINE__, #call)
#define CHECK_INT(got, want) check_int_((long long)(got), (long long)(want), __FILE__, __LINE__, #got)
#define CHECK_CONTAINS(text, part) check_contains_((text), (part), __FILE__, __LINE__, #text)
/* A check the rest of the case depends on: the case stops when it fails. */
#define REQUIRE(cond) do { if (!CHECK(cond)) return; } while (0)
#define REQUIRE_STATUS(call, want) do { if (!CHECK_STATUS(call, want)) return; } while (0)

/* The last error, checked to contain `part` (a copy is not needed: nothing
 * calls tq between the failing call and this one). */
#define CHECK_LAST_ERROR(part) CHECK_CONTAINS(tq_last_error(), part)

static int64_t now_ms(void)
{
    /* tq compares due times and leases with the wall clock. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void path_in(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        abort();
    }
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Ends a forked child with its verdict as exit status. _exit() skips the
 * atexit handlers inherited from the parent (stdio buffers, LeakSanitizer).
 * Under valgrind the child's exit still runs a leak check, which finds the
 * parent's objects: the child cannot free them (tq_close in a child leaves
 * the parent's connection alone by design), so that check is turned off
 * here. Memory errors found while the child ran still count. */
static _Noreturn void child_exit(void)
{
    fflush(stdout);
    VALGRIND_CLO_CHANGE("--leak-check=no");
    _exit(case_failed ? 1 : 0);
}

/* Runs `body` in a forked child and returns its exit status (-1 when it did
 * not exit normally). The child's failed checks are printed by the child. */
static int run_child(void (*body)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return -1;
    }
    if (pid == 0) {
        case_failed = 0;
        body(arg);
        child_exit();
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Opens `name` in `dir` with the given durability and history settings. */
static tq_queue *open_queue(const char *dir, const char *name, int durability, bool history)
{
    char path[4096];
    path_in(path, sizeof path, dir, name);
    tq_options *opts = tq_options_new();
    if (!CHECK(opts != NULL))
        return NULL;
    CHECK_STATUS(tq_options_set_durability(opts, durability), TQ_OK);
    CHECK_STATUS(tq_options_set_keep_history(opts, history), TQ_OK);
    tq_queue *q = NULL;
    CHECK_STATUS(tq_open(path, opts, &q), TQ_OK);
    tq_options_free(opts);
    return q;
}

static int64_t count(const tq_queue *q, int state)
{
    int64_t n = -1;
    CHECK_STATUS(tq_count(q, state, &n), TQ_OK);
    return n;
}

static int64_t push_text(tq_queue *q, const char *json)
{
    int64_t id = 0;
    CHECK_STATUS(tq_push(q, json, strlen(json), NULL, &id), TQ_OK);
    return id;
}

/* Pulls with the default lease; NULL (and a failed check) when nothing came. */
static tq_task *pull_one(tq_queue *q)
{
    tq_task *task = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &task), TQ_OK);
    return task;
}

static tq_task *pull_with_lease(tq_queue *q, uint64_t lease_ms)
{
    tq_pull_options *opts = tq_pull_options_new();
    if (!CHECK(opts != NULL))
        return NULL;
    CHECK_STATUS(tq_pull_options_set_lease_ms(opts, lease_ms), TQ_OK);
    tq_task *task = NULL;
    CHECK_STATUS(tq_pull(q, opts, &task), TQ_OK);
    tq_pull_options_free(opts);
    return task;
}

static bool payload_is(const tq_task *task, const char *json)
{
    size_t len = 0;
    const char *text = tq_task_payload(task, &len);
    return text != NULL && len == strlen(json) && memcmp(text, json, len) == 0 && text[len] == '\0';
}

static const int64_t ONE_YEAR_MS = 365LL * 24 * 3600 * 1000;
/* Over one year even if "one year" means a leap year. */
static const uint64_t OVER_ONE_YEAR_MS = 366ULL * 24 * 3600 * 1000 + 1;

/* ------------------------------------------------------------------------
 * Versions, status strings, last error
 * --------------------------------------------------------------------- */

static void test_version(const char *dir)
{
    (void)dir;
    REQUIRE(tq_version() != NULL);
    CHECK(strcmp(tq_version(), TQ_VERSION) == 0);
    CHECK_INT(tq_version_number(), TQ_VERSION_NUMBER);
    CHECK_INT(TQ_VERSION_NUMBER, TQ_VERSION_MAJOR * 10000 + TQ_VERSION_MINOR * 100 + TQ_VERSION_PATCH);
    char text[64];
    snprintf(text, sizeof text, "%d.%d.%d", TQ_VERSION_MAJOR, TQ_VERSION_MINOR, TQ_VERSION_PATCH);
    CHECK(strcmp(text, TQ_VERSION) == 0);
    /* Static: the same string every time. */
    CHECK(tq_version() == tq_version());
}

/* The display form drops the password; a small buffer gets a cut,
 * NUL-terminated result and the full length; bad arguments are refused. */
static void test_location_redacted(const char *dir)
{
    (void)dir;
    const char *url = "postgres://alice:s3cret@127.0.0.1:1/db?password=x&sslmode=disable";
    const char *shown = "postgres://alice@127.0.0.1:1/db?sslmode=disable";
    char buf[128];
    size_t len = 0;
    CHECK_STATUS(tq_location_redacted(url, buf, sizeof buf, &len), TQ_OK);
    CHECK(strcmp(buf, shown) == 0);
    CHECK_INT(len, strlen(shown));
    len = 0;
    CHECK_STATUS(tq_location_redacted(url, NULL, 0, &len), TQ_OK);
    CHECK_INT(len, strlen(shown));
    char small[9];
    memset(small, 'z', sizeof small);
    CHECK_STATUS(tq_location_redacted(url, small, sizeof small, NULL), TQ_OK);
    CHECK(strcmp(small, "postgres") == 0);
    CHECK_STATUS(tq_location_redacted("/var/lib/jobs.db", buf, sizeof buf, NULL), TQ_OK);
    CHECK(strcmp(buf, "/var/lib/jobs.db") == 0);
    strcpy(buf, "untouched");
    CHECK_STATUS(tq_location_redacted(NULL, buf, sizeof buf, &len), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("location is NULL");
    CHECK_STATUS(tq_location_redacted("\xff", buf, sizeof buf, &len), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("not valid UTF-8");
    CHECK_STATUS(tq_location_redacted(url, NULL, 4, &len), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("buf is NULL");
    CHECK(strcmp(buf, "untouched") == 0);
}

static void test_status_str(const char *dir)
{
    (void)dir;
    const int known[] = {TQ_OK,           TQ_EMPTY,   TQ_DUPLICATE, TQ_MERGED, TQ_SUSPENDED,
                         TQ_TIMEOUT,      TQ_ERR_INVALID_ARGUMENT,
                         TQ_ERR_INVALID_JSON, TQ_ERR_NOT_HELD, TQ_ERR_BUSY, TQ_ERR_IO,
                         TQ_ERR_NOT_A_DATABASE, TQ_ERR_INTERNAL, TQ_ERR_INTERRUPTED,
                         TQ_ERR_UNKNOWN_OUTCOME, TQ_ERR_CANCELLED, TQ_ERR_FULL};
    const size_t n = sizeof known / sizeof known[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = tq_status_str(known[i]);
        if (!CHECK(s != NULL))
            continue;
        CHECK(s[0] != '\0');
        CHECK(strcmp(s, "unknown status") != 0);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(s, tq_status_str(known[j])) != 0);
    }
    const int32_t unknown[] = {6, 100, -12, -100, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = tq_status_str(unknown[i]);
        if (CHECK(s != NULL))
            CHECK(strcmp(s, "unknown status") == 0);
    }
    /* An unknown outcome has a cause on each backend, and the text names both. */
    const char *unknown_outcome = tq_status_str(TQ_ERR_UNKNOWN_OUTCOME);
    CHECK(strstr(unknown_outcome, "flush") != NULL);
    CHECK(strstr(unknown_outcome, "connection") != NULL);
}

struct thread_error {
    char seen_at_start[256];
    char seen_after_empty[256];
    char seen_after_failure[256];
    const char *path;
};

static void copy_text(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "(NULL)");
}

static void *fresh_thread(void *arg)
{
    struct thread_error *t = arg;
    copy_text(t->seen_at_start, sizeof t->seen_at_start, tq_last_error());
    /* TQ_EMPTY is not a failure: it leaves the message alone. */
    tq_queue *q = NULL;
    if (tq_open(t->path, NULL, &q) == TQ_OK) {
        tq_task *task = NULL;
        if (tq_pull(q, NULL, &task) == TQ_EMPTY)
            copy_text(t->seen_after_empty, sizeof t->seen_after_empty, tq_last_error());
        tq_close(q);
    }
    tq_options *opts = tq_options_new();
    if (tq_options_set_durability(opts, 7) == TQ_ERR_INVALID_ARGUMENT)
        copy_text(t->seen_after_failure, sizeof t->seen_after_failure, tq_last_error());
    tq_options_free(opts);
    return NULL;
}

static void test_last_error_fresh_thread(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    struct thread_error t = {"unset", "unset", "unset", path};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, fresh_thread, &t) == 0);
    pthread_join(thread, NULL);
    CHECK(strcmp(t.seen_at_start, "") == 0);
    CHECK(strcmp(t.seen_after_empty, "") == 0);
    CHECK_CONTAINS(t.seen_after_failure, "7");
}

static void test_last_error_after_failure(const char *dir)
{
    (void)dir;
    CHECK_STATUS(tq_count(NULL, TQ_STATE_PENDING, NULL), TQ_ERR_INVALID_ARGUMENT);
    const char *message = tq_last_error();
    REQUIRE(message != NULL);
    CHECK(message[0] != '\0');
    CHECK_CONTAINS(message, "NULL");
    CHECK_CONTAINS(message, "queue");
    char copy[256];
    copy_text(copy, sizeof copy, message);

    /* It is the message of the last *failed* call: a success keeps it. */
    CHECK(strcmp(tq_version(), TQ_VERSION) == 0);
    tq_options *opts = tq_options_new();
    CHECK_STATUS(tq_options_set_durability(opts, TQ_DURABILITY_NORMAL), TQ_OK);
    CHECK(strcmp(tq_last_error(), copy) == 0);

    /* A later failure replaces it. */
    CHECK_STATUS(tq_options_set_durability(opts, 2), TQ_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(tq_last_error(), copy) != 0);
    CHECK_LAST_ERROR("2");
    tq_options_free(opts);
}

struct two_threads {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int step;
    char seen[2][256];
};

static void wait_step(struct two_threads *t, int step)
{
    pthread_mutex_lock(&t->lock);
    while (t->step < step)
        pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

static void set_step(struct two_threads *t, int step)
{
    pthread_mutex_lock(&t->lock);
    t->step = step;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

static void *thread_b(void *arg)
{
    struct two_threads *t = arg;
    wait_step(t, 1); /* thread A has failed */
    copy_text(t->seen[0], sizeof t->seen[0], tq_last_error());
    tq_push_options *opts = tq_push_options_new();
    tq_push_options_set_run_at_unix_ms(opts, -5);
    tq_push_options_free(opts);
    copy_text(t->seen[1], sizeof t->seen[1], tq_last_error());
    set_step(t, 2);
    return NULL;
}

static void test_last_error_per_thread(const char *dir)
{
    (void)dir;
    struct two_threads t;
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    pthread_t b;
    REQUIRE(pthread_create(&b, NULL, thread_b, &t) == 0);

    CHECK_STATUS(tq_push(NULL, "1", 1, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    char mine[256];
    copy_text(mine, sizeof mine, tq_last_error());
    CHECK_CONTAINS(mine, "NULL");
    set_step(&t, 1);
    wait_step(&t, 2);
    pthread_join(b, NULL);

    /* B never saw A's message, and B's failure did not change A's. */
    CHECK(strcmp(t.seen[0], "") == 0);
    CHECK_CONTAINS(t.seen[1], "-5");
    CHECK(strcmp(tq_last_error(), mine) == 0);
    pthread_mutex_destroy(&t.lock);
    pthread_cond_destroy(&t.cond);
}

/* ------------------------------------------------------------------------
 * Options
 * --------------------------------------------------------------------- */

static void test_options_new_free(const char *dir)
{
    (void)dir;
    tq_options *o = tq_options_new();
    tq_push_options *push = tq_push_options_new();
    tq_pull_options *pull = tq_pull_options_new();
    CHECK(o != NULL);
    CHECK(push != NULL);
    CHECK(pull != NULL);
    tq_options_free(o);
    tq_push_options_free(push);
    tq_pull_options_free(pull);
    tq_options_free(NULL);
    tq_push_options_free(NULL);
    tq_pull_options_free(NULL);
}

static void test_options_null_object(const char *dir)
{
    (void)dir;
    CHECK_STATUS(tq_options_set_durability(NULL, TQ_DURABILITY_FULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_options_set_busy_timeout_ms(NULL, 1000), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_options_set_keep_history(NULL, true), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_push_options_set_delay_ms(NULL, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(NULL, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_pull_options_set_lease_ms(NULL, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
}

static void test_options_ranges(const char *dir)
{
    (void)dir;
    tq_options *o = tq_options_new();
    tq_push_options *push = tq_push_options_new();
    tq_pull_options *pull = tq_pull_options_new();
    REQUIRE(o && push && pull);

    CHECK_STATUS(tq_options_set_durability(o, TQ_DURABILITY_FULL), TQ_OK);
    CHECK_STATUS(tq_options_set_durability(o, TQ_DURABILITY_NORMAL), TQ_OK);
    CHECK_STATUS(tq_options_set_durability(o, 2), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_durability(o, -1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_durability(o, INT32_MIN), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_durability(o, INT32_MAX), TQ_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(tq_options_set_busy_timeout_ms(o, 0), TQ_OK);
    CHECK_STATUS(tq_options_set_busy_timeout_ms(o, 5000), TQ_OK);
    CHECK_STATUS(tq_options_set_busy_timeout_ms(o, (uint64_t)ONE_YEAR_MS), TQ_OK);
    CHECK_STATUS(tq_options_set_busy_timeout_ms(o, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_busy_timeout_ms(o, UINT64_MAX), TQ_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(tq_options_set_keep_history(o, true), TQ_OK);
    CHECK_STATUS(tq_options_set_keep_history(o, false), TQ_OK);

    CHECK_STATUS(tq_push_options_set_delay_ms(push, 0), TQ_OK);
    CHECK_STATUS(tq_push_options_set_delay_ms(push, 1000), TQ_OK);
    CHECK_STATUS(tq_push_options_set_delay_ms(push, (uint64_t)ONE_YEAR_MS), TQ_OK);
    CHECK_STATUS(tq_push_options_set_delay_ms(push, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_delay_ms(push, UINT64_MAX), TQ_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(push, 0), TQ_OK);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(push, now_ms()), TQ_OK);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(push, INT64_MAX), TQ_OK);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(push, -1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(push, INT64_MIN), TQ_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, 1), TQ_OK);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, 30000), TQ_OK);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, (uint64_t)ONE_YEAR_MS), TQ_OK);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, UINT64_MAX), TQ_ERR_INVALID_ARGUMENT);

    tq_options_free(o);
    tq_push_options_free(push);
    tq_pull_options_free(pull);
}

/* A refused value leaves the object as it was: here, a refused lease of 0
 * after a valid 1 ms lease still gives a 1 ms lease. */
static void test_options_unchanged_after_refusal(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    tq_pull_options *pull = tq_pull_options_new();
    REQUIRE(pull != NULL);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, 1), TQ_OK);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    push_text(q, "1");
    tq_task *first = NULL;
    CHECK_STATUS(tq_pull(q, pull, &first), TQ_OK);
    sleep_ms(20);
    tq_task *again = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &again), TQ_OK);
    CHECK_INT(tq_task_attempts(again), 2);
    CHECK_STATUS(tq_finish(q, again), TQ_OK);
    tq_task_free(first);
    tq_task_free(again);
    tq_pull_options_free(pull);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Opening and closing
 * --------------------------------------------------------------------- */

/* A non-NULL pointer to store in an out-parameter before a call that must
 * overwrite it with NULL. Never dereferenced. */
static void *sentinel(void)
{
    static int object;
    return &object;
}

static void test_open_invalid_arguments(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = sentinel();

    CHECK_STATUS(tq_open(NULL, NULL, &q), TQ_ERR_INVALID_ARGUMENT);
    CHECK(q == NULL);
    CHECK_LAST_ERROR("NULL");

    CHECK_STATUS(tq_open(path, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK(!file_exists(path));

    CHECK_STATUS(tq_open(NULL, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);

    q = sentinel();
    CHECK_STATUS(tq_open("", NULL, &q), TQ_ERR_INVALID_ARGUMENT);
    CHECK(q == NULL);
    CHECK_LAST_ERROR("empty");

    char bad[4096];
    path_in(bad, sizeof bad, dir, "\xff\xfe");
    q = sentinel();
    CHECK_STATUS(tq_open("\xff\xfe", NULL, &q), TQ_ERR_INVALID_ARGUMENT);
    CHECK(q == NULL);
    CHECK_LAST_ERROR("UTF-8");
    q = sentinel();
    CHECK_STATUS(tq_open(bad, NULL, &q), TQ_ERR_INVALID_ARGUMENT);
    CHECK(q == NULL);
    CHECK(!file_exists(bad));

    /* An in-memory database has no WAL: tq refuses it. */
    q = sentinel();
    CHECK_STATUS(tq_open(":memory:", NULL, &q), TQ_ERR_INVALID_ARGUMENT);
    CHECK(q == NULL);
    CHECK_LAST_ERROR("WAL");
}

static void test_open_missing_directory(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "no/such/dir/q.db");
    tq_queue *q = sentinel();
    CHECK_STATUS(tq_open(path, NULL, &q), TQ_ERR_IO);
    CHECK(q == NULL);
    CHECK(tq_last_error()[0] != '\0');
}

static void test_open_directory_as_file(const char *dir)
{
    tq_queue *q = sentinel();
    CHECK_STATUS(tq_open(dir, NULL, &q), TQ_ERR_IO);
    CHECK(q == NULL);
}

static void test_open_not_a_database(const char *dir)
{
    char path[4096], side[4200];
    path_in(path, sizeof path, dir, "notes.txt");
    char text[4096];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (i % 64 == 63) ? '\n' : (char)('a' + i % 26);
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL);
    REQUIRE(fwrite(text, 1, sizeof text, f) == sizeof text);
    REQUIRE(fclose(f) == 0);

    tq_queue *q = sentinel();
    CHECK_STATUS(tq_open(path, NULL, &q), TQ_ERR_NOT_A_DATABASE);
    CHECK(q == NULL);
    CHECK(tq_last_error()[0] != '\0');

    char after[sizeof text + 16];
    f = fopen(path, "rb");
    REQUIRE(f != NULL);
    size_t got = fread(after, 1, sizeof after, f);
    fclose(f);
    CHECK_INT(got, sizeof text);
    CHECK(memcmp(after, text, sizeof text) == 0);
    snprintf(side, sizeof side, "%s-wal", path);
    CHECK(!file_exists(side));
    snprintf(side, sizeof side, "%s-shm", path);
    CHECK(!file_exists(side));
    snprintf(side, sizeof side, "%s-journal", path);
    CHECK(!file_exists(side));
}

static void test_open_reopen_keeps_tasks(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    int64_t a = push_text(q, "{\"n\":1}");
    int64_t b = push_text(q, "{\"n\":2}");
    tq_close(q);

    q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    CHECK_INT(count(q, TQ_STATE_PENDING), 2);
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), a);
    CHECK(payload_is(task, "{\"n\":1}"));
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), b);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    tq_close(q);

    /* Ids are never reused, not even the newest one once it is gone. */
    q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    int64_t c = push_text(q, "3");
    CHECK(c > b);
    tq_close(q);
}

static void test_open_two_handles(const char *dir)
{
    tq_queue *a = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    tq_queue *b = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(a != NULL && b != NULL);
    int64_t id = push_text(a, "\"from a\"");
    CHECK_INT(count(b, TQ_STATE_PENDING), 1);
    tq_task *task = pull_one(b);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), id);
    CHECK(payload_is(task, "\"from a\""));
    CHECK_INT(count(a, TQ_STATE_LEASED), 1);
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(a, NULL, &none), TQ_EMPTY);
    CHECK_STATUS(tq_finish(b, task), TQ_OK);
    tq_task_free(task);
    CHECK_INT(count(a, TQ_STATE_LEASED), 0);
    push_text(b, "\"from b\"");
    task = pull_one(a);
    REQUIRE(task != NULL);
    CHECK(payload_is(task, "\"from b\""));
    CHECK_STATUS(tq_finish(a, task), TQ_OK);
    tq_task_free(task);
    tq_close(a);
    tq_close(b);
}

static void test_close_and_free_null(const char *dir)
{
    (void)dir;
    tq_close(NULL);
    tq_task_free(NULL);
    CHECK(true);
}

/* A queue's own payload limit: checked before anything is stored. */
static void test_payload_limit(const char *dir)
{
    tq_options *opts = tq_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_options_set_max_payload_len(NULL, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_max_payload_len(opts, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_max_payload_len(opts, (size_t)TQ_MAX_PAYLOAD_LEN + 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_max_payload_len(opts, TQ_MAX_PAYLOAD_LEN), TQ_OK);
    CHECK_STATUS(tq_options_set_max_payload_len(opts, 8), TQ_OK);
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = NULL;
    REQUIRE_STATUS(tq_open(path, opts, &q), TQ_OK);
    tq_options_free(opts);
    CHECK_STATUS(tq_push(q, "[1,2,3]", 7, NULL, NULL), TQ_OK);
    CHECK_STATUS(tq_push(q, "\"123456\"", 8, NULL, NULL), TQ_OK);
    CHECK_STATUS(tq_push(q, "[1,2,3,4]", 9, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("limit is 8");
    CHECK_INT(count(q, TQ_STATE_PENDING), 2);
    tq_close(q);
}

/* tq records every object it hands out, so a stale or foreign pointer is
 * refused without being read (sanitizers and valgrind see no access). */
static void test_stale_and_foreign_pointers(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "1");
    push_text(q, "2");
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    tq_task *other = pull_one(q);
    REQUIRE(other != NULL);

    /* A task where a queue belongs, and a queue where a task belongs. */
    CHECK_STATUS(tq_finish((tq_queue *)task, task), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("not a tq_queue");
    CHECK_STATUS(tq_finish(q, (const tq_task *)q), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("not a tq_task");

    /* A task freed twice, then read: refused, never touched. */
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    tq_task_free(task);
    CHECK_LAST_ERROR("already freed");
    CHECK_INT(tq_task_id(task), 0);
    CHECK_LAST_ERROR("already freed");
    CHECK(tq_task_payload(task, NULL) == NULL);
    CHECK_STATUS(tq_finish(q, task), TQ_ERR_INVALID_ARGUMENT);

    /* Options used after their free. */
    tq_pull_options *options = tq_pull_options_new();
    REQUIRE(options != NULL);
    tq_pull_options_free(options);
    tq_task *none = sentinel();
    CHECK_STATUS(tq_pull(q, options, &none), TQ_ERR_INVALID_ARGUMENT);
    CHECK(none == NULL);
    CHECK_STATUS(tq_pull_options_set_lease_ms(options, 1000), TQ_ERR_INVALID_ARGUMENT);
    tq_pull_options_free(options);
    CHECK_LAST_ERROR("already freed");

    /* A queue used after close, and closed twice; its task outlives it. */
    tq_close(q);
    CHECK_STATUS(tq_push(q, "3", 1, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("already freed or closed");
    int64_t n = -1;
    CHECK_STATUS(tq_count(q, TQ_STATE_PENDING, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(n, -1);
    tq_close(q);
    CHECK_LAST_ERROR("already freed or closed");
    CHECK_INT(tq_task_attempts(other), 1);
    tq_task_free(other);
}

/* ------------------------------------------------------------------------
 * Push
 * --------------------------------------------------------------------- */

/* Pushes `len` bytes of `payload`, expecting `want`, the message to contain
 * `part`, `*out_id` untouched and the pending count unchanged. */
#define CHECK_PUSH_FAILS(q, payload, len, want, part) \
    check_push_fails_((q), (payload), (len), (want), (part), __FILE__, __LINE__)

static void check_push_fails_(tq_queue *q, const char *payload, size_t len, tq_status want, const char *part,
                              const char *file, int line)
{
    int64_t before = -1, after = -1;
    if (q != NULL)
        tq_count(q, TQ_STATE_PENDING, &before);
    int64_t id = -42;
    tq_status got = tq_push(q, payload, len, NULL, &id);
    char message[512];
    snprintf(message, sizeof message, "%s", tq_last_error());
    if (check_status_(got, want, file, line, "tq_push") && !strstr(message, part))
        report(file, line, "tq_push's message \"%s\" does not contain \"%s\"", message, part);
    check_int_(id, -42, file, line, "the id after a failed push");
    if (q != NULL) {
        tq_count(q, TQ_STATE_PENDING, &after);
        check_int_(after, before, file, line, "the pending count after a failed push");
    }
}

static void test_push_invalid_arguments(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "\"already there\"");
    CHECK_PUSH_FAILS(NULL, "1", 1, TQ_ERR_INVALID_ARGUMENT, "NULL");
    CHECK_PUSH_FAILS(q, NULL, 1, TQ_ERR_INVALID_ARGUMENT, "NULL");
    CHECK_PUSH_FAILS(q, NULL, 0, TQ_ERR_INVALID_ARGUMENT, "NULL");
    CHECK_PUSH_FAILS(q, "1", 0, TQ_ERR_INVALID_JSON, "JSON");
    /* The length is checked before the buffer is read: a short buffer with
     * a huge length is safe. */
    CHECK_PUSH_FAILS(q, "1", SIZE_MAX, TQ_ERR_INVALID_ARGUMENT, "1000000000");
    CHECK_PUSH_FAILS(q, "1", (size_t)TQ_MAX_PAYLOAD_LEN + 1, TQ_ERR_INVALID_ARGUMENT, "1000000000");
    CHECK_PUSH_FAILS(q, "1", (size_t)1000000001, TQ_ERR_INVALID_ARGUMENT, "1000000000");
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    tq_close(q);
}

static void test_push_invalid_utf8(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "\"already there\"");
    const char *bad[] = {
        "\"\xff\"",             /* never valid in UTF-8 */
        "\"\xff\xfe\"",
        "\"\xc3\"",             /* truncated sequence */
        "\"\xc0\xaf\"",         /* overlong encoding */
        "\"\xed\xa0\x80\"",     /* UTF-16 surrogate */
        "\"\xf4\x90\x80\x80\"", /* above U+10FFFF */
        "{\"k\":\"\xe2\x82\"}", /* truncated inside an object */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char note[32];
        snprintf(note, sizeof note, "payload %zu", i);
        check_note = note;
        CHECK_PUSH_FAILS(q, bad[i], strlen(bad[i]), TQ_ERR_INVALID_ARGUMENT, "UTF-8");
        check_note = NULL;
    }
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    tq_close(q);
}

static void test_push_invalid_json(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "\"already there\"");
    const char *bad[] = {"{", "{\"a\":}", "nope", "1 2", "[1,]", "{\"a\" 1}", "'x'", "tru", "\"open",
                         "   ", "{}}", "01", "NaN", "[1] x", "\"a\tb\"", "\xef\xbb\xbf{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_note = bad[i];
        CHECK_PUSH_FAILS(q, bad[i], strlen(bad[i]), TQ_ERR_INVALID_JSON, "JSON");
        check_note = NULL;
    }
    /* A NUL byte within the given length is not JSON either. */
    const char with_nul[] = "\"a\0b\"";
    CHECK_PUSH_FAILS(q, with_nul, sizeof with_nul - 1, TQ_ERR_INVALID_JSON, "JSON");
    const char nul_after[] = "{}\0";
    CHECK_PUSH_FAILS(q, nul_after, sizeof nul_after - 1, TQ_ERR_INVALID_JSON, "JSON");
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    tq_close(q);
}

static void test_push_valid_roundtrip(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    const char *good[] = {
        "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}",
        "[1, 2.5, -3e10, \"x\", [], {}]",
        "\"just a string\"",
        "42",
        "-0.125e-3",
        "true",
        "null",
        " \t\r\n {\"spaced\" :  [ 1 , 2 ] } \n\t ",
        "\"caf\\u00e9 \\ud83d\\ude00 \\\"quoted\\\" \\\\ \\/ \\n\"",
        "\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac\"",
        "{\"\xce\xbb\":\"\\u0000 is escaped\"}",
    };
    const size_t n = sizeof good / sizeof good[0];
    int64_t last = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t id = 0;
        check_note = good[i];
        bool pushed = CHECK_STATUS(tq_push(q, good[i], strlen(good[i]), NULL, &id), TQ_OK);
        check_note = NULL;
        if (!pushed)
            continue;
        CHECK(id > last);
        last = id;
    }
    CHECK_STATUS(tq_push(q, "{}", 2, NULL, NULL), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_PENDING), n + 1);

    for (size_t i = 0; i < n; i++) {
        tq_task *task = pull_one(q);
        if (!task)
            break;
        size_t len = 12345;
        const char *text = tq_task_payload(task, &len);
        if (CHECK(text != NULL)) {
            CHECK_INT(len, strlen(good[i]));
            CHECK(len == strlen(good[i]) && memcmp(text, good[i], len) == 0);
            CHECK(text[len] == '\0');
        }
        CHECK(tq_task_payload(task, NULL) == text);
        CHECK_INT(tq_task_attempts(task), 1);
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
    }
    tq_task *task = pull_one(q);
    if (task) {
        CHECK(payload_is(task, "{}"));
        CHECK(tq_task_id(task) > last);
        tq_task_free(task);
    }
    tq_close(q);
}

/* The payload is read up to `len` and no further: it ends right before a
 * page the process may not read, with no terminator. */
static void test_push_unterminated_prefix(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    long page = sysconf(_SC_PAGESIZE);
    REQUIRE(page > 0);
    char *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map != MAP_FAILED);
    REQUIRE(mprotect(map + page, (size_t)page, PROT_NONE) == 0);
    const char json[] = "[1,2,3]";
    const size_t len = sizeof json - 1;
    char *payload = map + page - len;
    memcpy(payload, json, len);
    CHECK_STATUS(tq_push(q, payload, len, NULL, NULL), TQ_OK);

    /* Only a prefix of a larger buffer. */
    const char buffer[] = "{\"k\":\"v\"}{\"ignored\":true}";
    CHECK_STATUS(tq_push(q, buffer, 9, NULL, NULL), TQ_OK);
    munmap(map, (size_t)page * 2);

    tq_task *task = pull_one(q);
    if (task) {
        CHECK(payload_is(task, "[1,2,3]"));
        tq_task_free(task);
    }
    task = pull_one(q);
    if (task) {
        CHECK(payload_is(task, "{\"k\":\"v\"}"));
        tq_task_free(task);
    }
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Pull
 * --------------------------------------------------------------------- */

static void test_pull_invalid_and_empty(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    tq_task *task = sentinel();
    CHECK_STATUS(tq_pull(NULL, NULL, &task), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_pull(q, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");

    task = sentinel();
    CHECK_STATUS(tq_pull(q, NULL, &task), TQ_EMPTY);
    CHECK(task == NULL);

    tq_pull_options *opts = tq_pull_options_new();
    task = sentinel();
    CHECK_STATUS(tq_pull(q, opts, &task), TQ_EMPTY);
    CHECK(task == NULL);
    tq_pull_options_free(opts);

    /* A NULL pull does not lose a task that is there. */
    push_text(q, "1");
    CHECK_STATUS(tq_pull(q, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    tq_close(q);
}

static void test_pull_fifo(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t ids[5];
    char json[32];
    for (int i = 0; i < 5; i++) {
        snprintf(json, sizeof json, "{\"i\":%d}", i);
        ids[i] = push_text(q, json);
    }
    for (int i = 0; i < 5; i++) {
        tq_task *task = pull_one(q);
        REQUIRE(task != NULL);
        snprintf(json, sizeof json, "{\"i\":%d}", i);
        CHECK_INT(tq_task_id(task), ids[i]);
        CHECK(payload_is(task, json));
        CHECK_INT(tq_task_attempts(task), 1);
        tq_task_free(task);
    }
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_INT(count(q, TQ_STATE_LEASED), 5);
    tq_close(q);
}

static void test_pull_delay(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_push_options_set_delay_ms(opts, 300), TQ_OK);

    int64_t before = now_ms();
    int64_t late = 0;
    CHECK_STATUS(tq_push(q, "\"late\"", 6, opts, &late), TQ_OK);
    int64_t pushed = now_ms();
    tq_push_options_free(opts);
    int64_t early = push_text(q, "\"early\"");

    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), early);
    tq_task_free(task);

    task = NULL;
    tq_status status = tq_pull(q, NULL, &task);
    if (status == TQ_EMPTY) {
        CHECK(task == NULL);
        CHECK_INT(count(q, TQ_STATE_PENDING), 1);
        int64_t wait = pushed + 320 - now_ms();
        if (wait > 0)
            sleep_ms((long)wait);
        task = pull_one(q);
    } else {
        /* A slow run (valgrind) may get there only after the delay. */
        CHECK(now_ms() - before >= 300);
        CHECK_STATUS(status, TQ_OK);
    }
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), late);
    CHECK(payload_is(task, "\"late\""));
    tq_task_free(task);
    tq_close(q);
}

static void test_expiry_and_deadline(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_push_options_set_expire_after_ms(NULL, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_expire_after_ms(opts, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_expire_at_unix_ms(opts, -1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_deadline_after_ms(NULL, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_deadline_unix_ms(opts, -1), TQ_ERR_INVALID_ARGUMENT);

    /* Expired before any pull: ended by the pull, which takes the next. */
    int64_t expiry = now_ms() - 1000;
    CHECK_STATUS(tq_push_options_set_expire_at_unix_ms(opts, expiry), TQ_OK);
    CHECK_STATUS(tq_push_options_set_deadline_after_ms(opts, 3600000), TQ_OK);
    int64_t expired = 0;
    CHECK_STATUS(tq_push(q, "\"late\"", 6, opts, &expired), TQ_OK);
    int64_t next = push_text(q, "\"next\"");
    tq_task *listed = NULL;
    CHECK_STATUS(tq_get_task(q, expired, &listed), TQ_OK);
    CHECK_INT(tq_task_expires_at_unix_ms(listed), expiry);
    CHECK(tq_task_deadline_unix_ms(listed) > now_ms());
    tq_task_free(listed);
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), next);
    CHECK_INT(tq_task_expires_at_unix_ms(task), 0); /* a delivery has none */
    tq_task_free(task);
    CHECK_STATUS(tq_get_task(q, expired, &listed), TQ_OK);
    CHECK_INT(tq_task_state(listed), TQ_STATE_DEAD);
    CHECK_CONTAINS(tq_task_last_error(listed), "expired");
    tq_task_free(listed);

    /* A delayed task that would expire before its run time is refused. */
    tq_push_options *delayed = tq_push_options_new();
    REQUIRE(delayed != NULL);
    CHECK_STATUS(tq_push_options_set_delay_ms(delayed, 60000), TQ_OK);
    CHECK_STATUS(tq_push_options_set_expire_after_ms(delayed, 1000), TQ_OK);
    CHECK_STATUS(tq_push(q, "1", 1, delayed, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("could never run");
    tq_push_options_free(delayed);
    tq_push_options_free(opts);
    tq_close(q);
}

static void test_pull_run_at(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);

    /* Due long ago: ready at once, and ahead of tasks due now. */
    int64_t now_task = push_text(q, "\"now\"");
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(opts, now_ms() - 60000), TQ_OK);
    int64_t past = 0;
    CHECK_STATUS(tq_push(q, "\"past\"", 6, opts, &past), TQ_OK);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(opts, 0), TQ_OK);
    int64_t epoch = 0;
    CHECK_STATUS(tq_push(q, "\"epoch\"", 7, opts, &epoch), TQ_OK);
    /* Due in an hour: not ready. The delay replaced by run-at and back. */
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(opts, now_ms() + 3600000), TQ_OK);
    CHECK_STATUS(tq_push(q, "\"future\"", 8, opts, NULL), TQ_OK);
    CHECK_STATUS(tq_push_options_set_delay_ms(opts, 3600000), TQ_OK);
    CHECK_STATUS(tq_push(q, "\"delayed\"", 9, opts, NULL), TQ_OK);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(opts, 1), TQ_OK);
    int64_t replaced = 0;
    CHECK_STATUS(tq_push(q, "\"replaced\"", 10, opts, &replaced), TQ_OK);

    const int64_t order[] = {epoch, replaced, past, now_task};
    for (size_t i = 0; i < 4; i++) {
        tq_task *task = pull_one(q);
        if (!task)
            break;
        CHECK_INT(tq_task_id(task), order[i]);
        tq_task_free(task);
    }
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_INT(count(q, TQ_STATE_PENDING), 2);
    tq_push_options_free(opts);
    tq_close(q);
}

static void test_pull_lease_expiry(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "{\"job\":\"lease\"}");
    int64_t before = now_ms();
    tq_task *first = pull_with_lease(q, 50);
    REQUIRE(first != NULL);
    CHECK_INT(tq_task_attempts(first), 1);

    tq_task *second = NULL;
    tq_status status = tq_pull(q, NULL, &second);
    if (status == TQ_EMPTY) {
        CHECK(second == NULL);
        sleep_ms(100);
        CHECK_INT(count(q, TQ_STATE_LEASED), 1); /* expired, not yet taken back */
        second = pull_one(q);
    } else {
        /* A slow run (valgrind) may get there only after the lease. */
        CHECK(now_ms() - before >= 50);
        CHECK_STATUS(status, TQ_OK);
    }
    REQUIRE(second != NULL);
    CHECK_INT(tq_task_id(second), id);
    CHECK_INT(tq_task_attempts(second), 2);
    CHECK(payload_is(second, "{\"job\":\"lease\"}"));
    CHECK_STATUS(tq_finish(q, first), TQ_ERR_NOT_HELD);
    CHECK_LAST_ERROR("not held");
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_STATUS(tq_finish(q, second), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    tq_task_free(first);
    tq_task_free(second);
    tq_close(q);
}

/* Finishing past the lease succeeds while no one else has taken the task. */
static void test_finish_after_lease_expired(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "1");
    tq_task *task = pull_with_lease(q, 1);
    REQUIRE(task != NULL);
    sleep_ms(20);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    tq_close(q);
}

/* Still past the lease: another worker's pull that takes a *different*
 * task (one due earlier) has not taken this one, so finishing succeeds and
 * the task is not delivered again. */
static void test_finish_after_lease_expired_other_task_pulled(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t x = push_text(q, "\"x\"");
    tq_task *task = pull_with_lease(q, 1);
    REQUIRE(task != NULL);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(opts, 0), TQ_OK);
    int64_t z = 0;
    CHECK_STATUS(tq_push(q, "\"z\"", 3, opts, &z), TQ_OK);
    tq_push_options_free(opts);
    sleep_ms(20);

    tq_task *other = pull_one(q);
    REQUIRE(other != NULL);
    CHECK_INT(tq_task_id(other), z);
    /* "Claimed under a lease (possibly expired and not yet taken back)". */
    CHECK_INT(count(q, TQ_STATE_LEASED), 2);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task *again = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &again), TQ_EMPTY);
    if (again) {
        CHECK_INT(tq_task_id(again), x);
        tq_task_free(again);
    }
    CHECK_STATUS(tq_finish(q, other), TQ_OK);
    tq_task_free(other);
    tq_task_free(task);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Tasks
 * --------------------------------------------------------------------- */

/* Leaves a last error that does not mention NULL. */
static void fail_without_null(void)
{
    tq_options *o = tq_options_new();
    CHECK_STATUS(tq_options_set_durability(o, 9), TQ_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tq_last_error(), "NULL") == NULL);
    tq_options_free(o);
}

static void test_task_accessors_null(const char *dir)
{
    (void)dir;
    fail_without_null();
    CHECK_INT(tq_task_id(NULL), 0);
    CHECK_LAST_ERROR("NULL");

    fail_without_null();
    CHECK_INT(tq_task_attempts(NULL), 0);
    CHECK_LAST_ERROR("NULL");

    fail_without_null();
    size_t len = 99;
    CHECK(tq_task_payload(NULL, &len) == NULL);
    CHECK_INT(len, 0);
    CHECK_LAST_ERROR("NULL");
    CHECK(tq_task_payload(NULL, NULL) == NULL);
}

/* A delivery's token names it: a later delivery of the same task has
 * another token, and a snapshot (not a delivery) has none. */
static void test_task_token(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "1");
    tq_pull_options *pull = tq_pull_options_new();
    REQUIRE(pull != NULL);
    CHECK_STATUS(tq_pull_options_set_lease_ms(pull, 1), TQ_OK);
    tq_task *first = NULL;
    CHECK_STATUS(tq_pull(q, pull, &first), TQ_OK);
    CHECK(tq_task_token(first) != 0);
    sleep_ms(20);
    tq_task *second = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &second), TQ_OK);
    CHECK_INT(tq_task_id(second), id);
    CHECK(tq_task_token(second) != 0);
    CHECK(tq_task_token(second) != tq_task_token(first));
    tq_task *snapshot = NULL;
    CHECK_STATUS(tq_get_task(q, id, &snapshot), TQ_OK);
    CHECK_INT(tq_task_token(snapshot), 0);
    CHECK_STATUS(tq_finish(q, second), TQ_OK);

    fail_without_null();
    CHECK_INT(tq_task_token(NULL), 0);
    CHECK_LAST_ERROR("NULL");

    tq_task_free(snapshot);
    tq_task_free(second);
    tq_task_free(first);
    tq_pull_options_free(pull);
    tq_close(q);
}

struct shared_task {
    const tq_task *task;
    int64_t id;
    const char *json;
    int ok;
};

static void *read_task(void *arg)
{
    struct shared_task *s = arg;
    int ok = 1;
    for (int i = 0; i < 200; i++) {
        size_t len = 0;
        const char *text = tq_task_payload(s->task, &len);
        ok &= tq_task_id(s->task) == s->id && tq_task_attempts(s->task) == 1 && text != NULL &&
              len == strlen(s->json) && memcmp(text, s->json, len) == 0;
    }
    s->ok = ok;
    return NULL;
}

static void test_task_read_by_threads(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    const char *json = "{\"shared\":[1,2,3]}";
    int64_t id = push_text(q, json);
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    struct shared_task s[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        s[i] = (struct shared_task){task, id, json, 0};
        REQUIRE(pthread_create(&threads[i], NULL, read_task, &s[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        CHECK(s[i].ok);
    }
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Finish
 * --------------------------------------------------------------------- */

static void test_finish_invalid_and_twice(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "[\"once\"]");
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_finish(NULL, task), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_finish(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);

    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    CHECK_INT(count(q, TQ_STATE_DONE), 0);
    CHECK_STATUS(tq_finish(q, task), TQ_ERR_NOT_HELD);
    CHECK(tq_last_error()[0] != '\0');
    /* The task is still readable after finishing, until it is freed. */
    CHECK(payload_is(task, "[\"once\"]"));
    tq_task_free(task);
    tq_close(q);
}

static void test_finish_through_other_handle(const char *dir)
{
    tq_queue *a = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    tq_queue *b = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(a != NULL && b != NULL);
    push_text(a, "1");
    push_text(a, "2");
    tq_task *one = pull_one(a);
    tq_task *two = pull_one(a);
    REQUIRE(one != NULL && two != NULL);
    CHECK_STATUS(tq_finish(b, one), TQ_OK);
    CHECK_STATUS(tq_finish(a, one), TQ_ERR_NOT_HELD);
    /* A task outlives the handle it was pulled through. */
    tq_close(a);
    CHECK(payload_is(two, "2"));
    CHECK_INT(tq_task_attempts(two), 1);
    CHECK_STATUS(tq_finish(b, two), TQ_OK);
    CHECK_INT(count(b, TQ_STATE_LEASED), 0);
    CHECK_INT(count(b, TQ_STATE_PENDING), 0);
    tq_task_free(one);
    tq_task_free(two);
    tq_close(b);
}

/* A task from another file's queue is refused there, and changes nothing. */
static void test_finish_task_of_other_file(const char *dir)
{
    tq_queue *a = open_queue(dir, "a.db", TQ_DURABILITY_NORMAL, false);
    tq_queue *b = open_queue(dir, "b.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(a != NULL && b != NULL);
    push_text(a, "\"a\"");
    push_text(b, "\"b\"");
    tq_task *task = pull_one(a);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_finish(b, task), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("another queue store");
    CHECK_STATUS(tq_fail(b, task, "no"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_extend(b, task, 1000), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(count(b, TQ_STATE_PENDING), 1);
    CHECK_INT(count(a, TQ_STATE_LEASED), 1);
    CHECK_STATUS(tq_finish(a, task), TQ_OK);
    tq_task_free(task);
    tq_close(a);
    tq_close(b);
}

/* ------------------------------------------------------------------------
 * Count, history, purge
 * --------------------------------------------------------------------- */

static void test_count(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t n = -7;
    CHECK_STATUS(tq_count(NULL, TQ_STATE_PENDING, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_count(q, TQ_STATE_PENDING, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_count(q, 5, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("5");
    CHECK_STATUS(tq_count(q, -1, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_count(q, INT32_MAX, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(n, -7);

    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    CHECK_INT(count(q, TQ_STATE_DONE), 0);
    for (int i = 0; i < 3; i++)
        push_text(q, "{}");
    CHECK_INT(count(q, TQ_STATE_PENDING), 3);
    tq_task *a = pull_one(q);
    tq_task *b = pull_one(q);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 2);
    CHECK_STATUS(tq_finish(q, a), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_INT(count(q, TQ_STATE_DONE), 0);
    CHECK_STATUS(tq_finish(q, b), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    tq_task_free(a);
    tq_task_free(b);
    tq_close(q);
}

static void test_history_and_purge(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, true);
    tq_queue *plain = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL && plain != NULL);
    for (int i = 0; i < 4; i++)
        push_text(q, "[]");
    for (int i = 0; i < 3; i++) {
        tq_task *task = pull_one(q);
        REQUIRE(task != NULL);
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        /* Kept as done is still finished: not held any more. */
        CHECK_STATUS(tq_finish(q, task), TQ_ERR_NOT_HELD);
        tq_task_free(task);
    }
    CHECK_INT(count(q, TQ_STATE_DONE), 3);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);

    /* History belongs to the handle: finishing through one without it deletes. */
    tq_task *task = pull_one(plain);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_finish(plain, task), TQ_OK);
    tq_task_free(task);
    CHECK_INT(count(q, TQ_STATE_DONE), 3);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);

    int64_t purged = -1;
    CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, 3600000, &purged), TQ_OK);
    CHECK_INT(purged, 0);
    CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, (uint64_t)INT64_MAX, &purged), TQ_OK);
    CHECK_INT(purged, 0);
    CHECK_INT(count(q, TQ_STATE_DONE), 3);

    /* Through any handle: purging is not tied to history. The pause keeps
     * finish and purge in distinct milliseconds, the subject of
     * purge_all_right_after_finish. */
    sleep_ms(5);
    CHECK_STATUS(tq_purge(plain, TQ_STATE_DONE, 0, &purged), TQ_OK);
    CHECK_INT(purged, 3);
    CHECK_INT(count(q, TQ_STATE_DONE), 0);
    CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, 0, NULL), TQ_OK);
    CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, 0, &purged), TQ_OK);
    CHECK_INT(purged, 0);
    tq_close(plain);
    tq_close(q);
}

/* "0: all of them", including a task finished in the same millisecond. */
static void test_purge_all_right_after_finish(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    int rounds_with_leftovers = 0;
    for (int i = 0; i < 10; i++) {
        push_text(q, "{}");
        tq_task *task = pull_one(q);
        REQUIRE(task != NULL);
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
        int64_t done = count(q, TQ_STATE_DONE);
        int64_t purged = -1;
        CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, 0, &purged), TQ_OK);
        if (purged != done || count(q, TQ_STATE_DONE) != 0)
            rounds_with_leftovers++;
    }
    CHECK_INT(rounds_with_leftovers, 0);
    CHECK_INT(count(q, TQ_STATE_DONE), 0);
    tq_close(q);
}

static void test_purge_invalid(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    int64_t purged = -3;
    CHECK_STATUS(tq_purge(NULL, TQ_STATE_DONE, 0, &purged), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, (uint64_t)INT64_MAX + 1, &purged), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, UINT64_MAX, &purged), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(purged, -3);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Recover
 * --------------------------------------------------------------------- */

static void test_recover_invalid(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t n = -1;
    CHECK_STATUS(tq_recover(NULL, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("NULL");
    CHECK_INT(n, -1);
    CHECK_STATUS(tq_recover(q, NULL), TQ_OK);
    CHECK_STATUS(tq_recover(q, &n), TQ_OK);
    CHECK_INT(n, 0);
    tq_close(q);
}

struct child_args {
    const char *path;
    int ready_fd; /* the child writes one byte here once it holds its task */
    int go_fd;    /* and then waits for one byte here before leaving */
};

/* A child that signals once it is set up (one byte on ready_fd), then waits
 * for a byte on go_fd before leaving, so the parent can act in between. */
struct handshake {
    pid_t pid;
    int ready_fd; /* read by the parent */
    int go_fd;    /* written by the parent */
};

/* Forks a child running `body` with a struct child_args for `path`, and
 * waits until it is ready; false if it could not start or never got ready
 * (finish_handshake_child must still be called when the fork succeeded). */
static bool start_handshake_child(struct handshake *child, void (*body)(void *), const char *path)
{
    int ready[2], go[2];
    child->pid = -1;
    if (!CHECK(pipe(ready) == 0 && pipe(go) == 0))
        return false;
    fflush(stdout);
    fflush(stderr);
    child->pid = fork();
    if (!CHECK(child->pid >= 0))
        return false;
    if (child->pid == 0) {
        close(ready[0]);
        close(go[1]);
        struct child_args args = {path, ready[1], go[0]};
        case_failed = 0;
        body(&args);
        child_exit();
    }
    close(ready[1]);
    close(go[0]);
    child->ready_fd = ready[0];
    child->go_fd = go[1];
    char byte = 0;
    return CHECK(read(child->ready_fd, &byte, 1) == 1);
}

/* Lets the child go, waits for it, and returns whether it exited with 0. */
static bool finish_handshake_child(struct handshake *child)
{
    if (child->pid < 0)
        return false;
    CHECK(write(child->go_fd, "g", 1) == 1);
    int status = 0;
    while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR)
        ;
    close(child->ready_fd);
    close(child->go_fd);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void child_pulls_and_dies(void *arg)
{
    struct child_args *c = arg;
    tq_queue *q = NULL;
    REQUIRE_STATUS(tq_open(c->path, NULL, &q), TQ_OK);
    tq_task *task = pull_with_lease(q, 60000);
    REQUIRE(task != NULL);
    CHECK(payload_is(task, "\"crash\""));
    if (c->ready_fd >= 0) {
        char byte = 'r';
        CHECK(write(c->ready_fd, &byte, 1) == 1);
        CHECK(read(c->go_fd, &byte, 1) == 1);
    }
    /* Leaves without finishing, freeing or closing, as a crash would. */
}

static void test_recover_crashed_holder(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "\"crash\"");
    push_text(q, "\"mine\"");

    struct child_args args = {path, -1, -1};
    CHECK_INT(run_child(child_pulls_and_dies, &args), 0);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);

    /* This process holds the other task under a long lease: untouched. */
    tq_task *mine = pull_with_lease(q, 60000);
    REQUIRE(mine != NULL);
    CHECK(payload_is(mine, "\"mine\""));

    int64_t recovered = -1;
    CHECK_STATUS(tq_recover(q, &recovered), TQ_OK);
    CHECK_INT(recovered, 1);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);

    tq_task *again = pull_one(q);
    REQUIRE(again != NULL);
    CHECK_INT(tq_task_id(again), id);
    CHECK_INT(tq_task_attempts(again), 2);
    CHECK(payload_is(again, "\"crash\""));
    CHECK_STATUS(tq_finish(q, again), TQ_OK);
    CHECK_STATUS(tq_finish(q, mine), TQ_OK);
    tq_task_free(again);
    tq_task_free(mine);

    CHECK_STATUS(tq_recover(q, &recovered), TQ_OK);
    CHECK_INT(recovered, 0);
    tq_close(q);
}

static void test_recover_live_holders_untouched(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "\"crash\"");
    push_text(q, "\"mine\"");
    tq_task *mine = NULL;

    struct handshake child;
    bool child_ready = start_handshake_child(&child, child_pulls_and_dies, path);
    if (child_ready) {
        mine = pull_with_lease(q, 60000);
        CHECK(mine != NULL);
        int64_t recovered = -1;
        /* Another live process and this one: neither is touched. */
        CHECK_STATUS(tq_recover(q, &recovered), TQ_OK);
        CHECK_INT(recovered, 0);
        CHECK_INT(count(q, TQ_STATE_LEASED), 2);
    }
    CHECK(finish_handshake_child(&child));

    int64_t recovered = -1;
    CHECK_STATUS(tq_recover(q, &recovered), TQ_OK);
    CHECK_INT(recovered, 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_STATUS(tq_finish(q, mine), TQ_OK);
    tq_task_free(mine);
    tq_close(q);
}

static void test_recover_expired_lease(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "7");
    tq_task *task = pull_with_lease(q, 1);
    REQUIRE(task != NULL);
    sleep_ms(20);
    int64_t recovered = -1;
    CHECK_STATUS(tq_recover(q, &recovered), TQ_OK);
    CHECK_INT(recovered, 1);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    /* Recovered means the delivery is over. */
    CHECK_STATUS(tq_finish(q, task), TQ_ERR_NOT_HELD);
    tq_task *again = pull_one(q);
    REQUIRE(again != NULL);
    CHECK_INT(tq_task_id(again), id);
    CHECK_INT(tq_task_attempts(again), 2);
    CHECK_STATUS(tq_finish(q, again), TQ_OK);
    tq_task_free(task);
    tq_task_free(again);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * fork
 * --------------------------------------------------------------------- */

struct fork_args {
    tq_queue *parent_queue;
    tq_task *parent_task;
    const char *path;
};

static void child_uses_parent_handle(void *arg)
{
    struct fork_args *f = arg;
    tq_queue *q = f->parent_queue;
    int64_t n = -1, id = -1;
    CHECK_STATUS(tq_push(q, "1", 1, NULL, &id), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("fork");
    CHECK_INT(id, -1);
    tq_task *task = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &task), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("fork");
    CHECK(task == NULL);
    CHECK_STATUS(tq_count(q, TQ_STATE_PENDING, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("fork");
    CHECK_INT(n, -1);
    CHECK_STATUS(tq_finish(q, f->parent_task), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("fork");
    CHECK_STATUS(tq_recover(q, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("fork");
    CHECK_STATUS(tq_purge(q, TQ_STATE_DONE, 0, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("fork");
    /* The task's own data is plain memory: readable in the child. */
    CHECK(payload_is(f->parent_task, "\"held\""));
    tq_close(q);
}

static void test_fork_parent_handle_in_child(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    push_text(q, "\"held\"");
    push_text(q, "\"waiting\"");
    tq_task *held = pull_one(q);
    REQUIRE(held != NULL);

    struct fork_args args = {q, held, path};
    CHECK_INT(run_child(child_uses_parent_handle, &args), 0);

    /* The child's tq_close left the parent's connection alone. */
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_STATUS(tq_finish(q, held), TQ_OK);
    tq_task_free(held);
    int64_t id = push_text(q, "\"after\"");
    CHECK(id > 0);
    tq_task *task = pull_one(q);
    if (task) {
        CHECK(payload_is(task, "\"waiting\""));
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
    }
    task = pull_one(q);
    if (task) {
        CHECK_INT(tq_task_id(task), id);
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
    }
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    tq_close(q);
}

static void child_opens_own_handle(void *arg)
{
    struct fork_args *f = arg;
    tq_queue *mine = NULL;
    REQUIRE_STATUS(tq_open(f->path, NULL, &mine), TQ_OK);
    CHECK_INT(count(mine, TQ_STATE_PENDING), 1);
    tq_task *task = pull_one(mine);
    if (task) {
        CHECK(payload_is(task, "\"for the child\""));
        CHECK_STATUS(tq_finish(mine, task), TQ_OK);
        tq_task_free(task);
    }
    int64_t id = 0;
    CHECK_STATUS(tq_push(mine, "\"from the child\"", 16, NULL, &id), TQ_OK);
    CHECK(id > 0);
    tq_close(mine);
    /* The parent's handle still refuses, and closing it is harmless. */
    CHECK_STATUS(tq_push(f->parent_queue, "1", 1, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    tq_close(f->parent_queue);
}

static void test_fork_child_opens_own_handle(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    push_text(q, "\"for the child\"");

    struct fork_args args = {q, NULL, path};
    CHECK_INT(run_child(child_opens_own_handle, &args), 0);

    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    tq_task *task = pull_one(q);
    if (task) {
        CHECK(payload_is(task, "\"from the child\""));
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
    }
    int64_t recovered = -1;
    CHECK_STATUS(tq_recover(q, &recovered), TQ_OK);
    CHECK_INT(recovered, 0);
    tq_close(q);
}

static void child_pushes_after_go(void *arg)
{
    struct child_args *c = arg;
    tq_queue *mine = NULL;
    REQUIRE_STATUS(tq_open(c->path, NULL, &mine), TQ_OK);
    char byte = 'r';
    CHECK(write(c->ready_fd, &byte, 1) == 1);
    CHECK(read(c->go_fd, &byte, 1) == 1);
    CHECK_STATUS(tq_push(mine, "\"from the child\"", 16, NULL, NULL), TQ_OK);
    CHECK_INT(count(mine, TQ_STATE_PENDING), 2);
    tq_close(mine);
}

/* The usual pre-fork pattern: the parent opens, forks a worker that opens
 * its own handle, then closes its own. The worker's acknowledged writes
 * must stay in the file. */
static void test_fork_child_handle_survives_parent_close(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    push_text(q, "\"from the parent\"");

    struct handshake child;
    bool child_ready = start_handshake_child(&child, child_pushes_after_go, path);
    CHECK(child_ready);
    tq_close(q);
    CHECK(finish_handshake_child(&child));

    q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    CHECK_INT(count(q, TQ_STATE_PENDING), 2);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Busy: another process holds the write lock
 * --------------------------------------------------------------------- */

/* In a separate process (fcntl locks are per process), take the WAL write
 * lock: byte 120 of the -shm file, as documented in SQLite's walformat. */
static void child_holds_write_lock(void *arg)
{
    struct child_args *c = arg;
    char shm[4200];
    snprintf(shm, sizeof shm, "%s-shm", c->path);
    int fd = open(shm, O_RDWR);
    REQUIRE(fd >= 0);
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = 120;
    lock.l_len = 1;
    REQUIRE(fcntl(fd, F_SETLK, &lock) == 0);
    char byte = 'r';
    CHECK(write(c->ready_fd, &byte, 1) == 1);
    CHECK(read(c->go_fd, &byte, 1) == 1);
    close(fd);
}

static void test_busy(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    tq_options *opts = tq_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_options_set_busy_timeout_ms(opts, 0), TQ_OK);
    tq_queue *impatient = NULL;
    REQUIRE_STATUS(tq_open(path, opts, &impatient), TQ_OK);
    push_text(q, "\"held\"");
    push_text(q, "\"waiting\"");
    tq_task *held = pull_one(q);
    REQUIRE(held != NULL);

    struct handshake child;
    bool child_ready = start_handshake_child(&child, child_holds_write_lock, path);
    if (child_ready) {
        int64_t n = -1;
        CHECK_STATUS(tq_push(impatient, "1", 1, NULL, &n), TQ_ERR_BUSY);
        CHECK_INT(n, -1);
        CHECK(strstr(tq_last_error(), "lock") != NULL || strstr(tq_last_error(), "busy") != NULL);
        tq_task *task = NULL;
        CHECK_STATUS(tq_pull(impatient, NULL, &task), TQ_ERR_BUSY);
        CHECK(task == NULL);
        CHECK_STATUS(tq_finish(impatient, held), TQ_ERR_BUSY);
        CHECK_STATUS(tq_recover(impatient, &n), TQ_ERR_BUSY);
        CHECK_STATUS(tq_purge(impatient, TQ_STATE_DONE, 0, &n), TQ_ERR_BUSY);
        CHECK_INT(n, -1);
        /* Reading needs no write lock. */
        CHECK_STATUS(tq_count(impatient, TQ_STATE_PENDING, &n), TQ_OK);
        CHECK_INT(n, 1);

        /* Opening a current queue file writes nothing, so it needs no
         * write lock; a handle that waits gives up on a write after its
         * timeout, not before. */
        tq_options *patient = tq_options_new();
        CHECK_STATUS(tq_options_set_busy_timeout_ms(patient, 150), TQ_OK);
        tq_queue *third = NULL;
        CHECK_STATUS(tq_open(path, patient, &third), TQ_OK);
        tq_options_free(patient);
        int64_t start = now_ms();
        CHECK_STATUS(tq_push(third, "2", 1, NULL, NULL), TQ_ERR_BUSY);
        CHECK(now_ms() - start >= 140);
        tq_close(third);
    }
    CHECK(finish_handshake_child(&child));

    /* Nothing was done while busy; everything works once the lock is gone. */
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_INT(count(q, TQ_STATE_DONE), 0);
    CHECK_STATUS(tq_finish(impatient, held), TQ_OK);
    CHECK_STATUS(tq_push(impatient, "3", 1, NULL, NULL), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_PENDING), 2);
    tq_task_free(held);
    tq_close(impatient);
    tq_options_free(opts);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Threads
 * --------------------------------------------------------------------- */

enum { PUSHERS = 4, PULLERS = 4, PER_PUSHER = 250, TOTAL = PUSHERS * PER_PUSHER };

struct shared_queue {
    tq_queue *q;
    pthread_mutex_t lock;
    int finished[TOTAL];   /* times each payload was finished */
    int64_t ids[TOTAL];    /* the id each payload was pulled with */
    int total_finished;
    int errors;
};

struct pusher {
    struct shared_queue *s;
    int first;
};

static void *push_thread(void *arg)
{
    struct pusher *p = arg;
    for (int i = 0; i < PER_PUSHER; i++) {
        char json[32];
        int len = snprintf(json, sizeof json, "{\"n\":%d}", p->first + i);
        if (tq_push(p->s->q, json, (size_t)len, NULL, NULL) != TQ_OK) {
            pthread_mutex_lock(&p->s->lock);
            p->s->errors++;
            pthread_mutex_unlock(&p->s->lock);
        }
    }
    return NULL;
}

static void *pull_thread(void *arg)
{
    struct shared_queue *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool all_done = s->total_finished >= TOTAL || s->errors > 0;
        pthread_mutex_unlock(&s->lock);
        if (all_done)
            return NULL;
        tq_task *task = NULL;
        tq_status status = tq_pull(s->q, NULL, &task);
        if (status == TQ_EMPTY) {
            sleep_ms(1);
            continue;
        }
        int n = -1;
        const char *text = status == TQ_OK ? tq_task_payload(task, NULL) : NULL;
        bool ok = text != NULL && sscanf(text, "{\"n\":%d}", &n) == 1 && n >= 0 && n < TOTAL &&
                  tq_finish(s->q, task) == TQ_OK;
        pthread_mutex_lock(&s->lock);
        if (ok) {
            s->finished[n]++;
            s->ids[n] = tq_task_id(task);
            s->total_finished++;
        } else {
            s->errors++;
        }
        pthread_mutex_unlock(&s->lock);
        tq_task_free(task);
    }
}

static int compare_ids(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void test_threads_share_one_handle(const char *dir)
{
    static struct shared_queue s;
    memset(&s, 0, sizeof s);
    s.q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(s.q != NULL);
    pthread_mutex_init(&s.lock, NULL);
    pthread_t pushers[PUSHERS], pullers[PULLERS];
    struct pusher args[PUSHERS];
    for (int i = 0; i < PULLERS; i++)
        REQUIRE(pthread_create(&pullers[i], NULL, pull_thread, &s) == 0);
    for (int i = 0; i < PUSHERS; i++) {
        args[i] = (struct pusher){&s, i * PER_PUSHER};
        REQUIRE(pthread_create(&pushers[i], NULL, push_thread, &args[i]) == 0);
    }
    for (int i = 0; i < PUSHERS; i++)
        pthread_join(pushers[i], NULL);
    for (int i = 0; i < PULLERS; i++)
        pthread_join(pullers[i], NULL);

    CHECK_INT(s.errors, 0);
    CHECK_INT(s.total_finished, TOTAL);
    int wrong = 0;
    for (int i = 0; i < TOTAL; i++)
        wrong += s.finished[i] != 1;
    CHECK_INT(wrong, 0);
    /* Distinct payloads came with distinct ids. */
    qsort(s.ids, TOTAL, sizeof s.ids[0], compare_ids);
    int duplicates = 0;
    for (int i = 1; i < TOTAL; i++)
        duplicates += s.ids[i] == s.ids[i - 1];
    CHECK_INT(duplicates, 0);
    CHECK(s.ids[0] > 0);
    CHECK_INT(count(s.q, TQ_STATE_PENDING), 0);
    CHECK_INT(count(s.q, TQ_STATE_LEASED), 0);
    pthread_mutex_destroy(&s.lock);
    tq_close(s.q);
}

/* ------------------------------------------------------------------------
 * Durability
 * --------------------------------------------------------------------- */

static void test_durability_normal(const char *dir)
{
    tq_queue *q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    push_text(q, "{\"normal\":true}");
    tq_close(q);
    /* The same file through a FULL handle, and back. */
    q = open_queue(dir, "q.db", TQ_DURABILITY_FULL, false);
    REQUIRE(q != NULL);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    push_text(q, "{\"full\":true}");
    tq_close(q);
    q = open_queue(dir, "q.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    tq_task *task = pull_one(q);
    if (task) {
        CHECK(payload_is(task, "{\"normal\":true}"));
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
    }
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    tq_close(q);
}

/* ------------------------------------------------------------------------
 * Driver
 * --------------------------------------------------------------------- */

typedef void (*case_fn)(const char *dir);


/* ------------------------------------------------------------------------
 * Job semantics: failures, dead tasks, priorities, named queues, batches,
 * blocking pulls, heartbeats, unique keys, visibility, checkpoints
 * --------------------------------------------------------------------- */

/* A handle on queue `name` of q.db whose failed tasks are retried at once. */
static tq_queue *open_named(const char *dir, const char *name, uint32_t max_attempts)
{
    char path[4096];
    path_in(path, sizeof path, dir, "q.db");
    tq_options *opts = tq_options_new();
    if (!CHECK(opts != NULL))
        return NULL;
    CHECK_STATUS(tq_options_set_durability(opts, TQ_DURABILITY_NORMAL), TQ_OK);
    CHECK_STATUS(tq_options_set_queue(opts, name), TQ_OK);
    CHECK_STATUS(tq_options_set_max_attempts(opts, max_attempts), TQ_OK);
    CHECK_STATUS(tq_options_set_retry_backoff_ms(opts, 0, 0), TQ_OK);
    tq_queue *q = NULL;
    CHECK_STATUS(tq_open(path, opts, &q), TQ_OK);
    tq_options_free(opts);
    return q;
}

static void test_job_options_invalid(const char *dir)
{
    (void)dir;
    tq_options *opts = tq_options_new();
    tq_push_options *push = tq_push_options_new();
    tq_pull_options *pull = tq_pull_options_new();
    REQUIRE(opts && push && pull);
    char long_name[TQ_MAX_QUEUE_NAME_LEN + 2];
    memset(long_name, 'q', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK_STATUS(tq_options_set_queue(NULL, "q"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_queue(opts, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("name is NULL");
    CHECK_STATUS(tq_options_set_queue(opts, ""), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_queue(opts, long_name), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_queue(opts, "\xff"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("UTF-8");
    long_name[TQ_MAX_QUEUE_NAME_LEN] = '\0';
    CHECK_STATUS(tq_options_set_queue(opts, long_name), TQ_OK);
    CHECK_STATUS(tq_options_set_max_attempts(opts, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_retry_backoff_ms(opts, 10, 5), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("shorter");
    CHECK_STATUS(tq_options_set_retry_backoff_ms(opts, 0, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_priority(NULL, 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_max_attempts(push, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_unique_for_ms(push, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("key");
    CHECK_STATUS(tq_push_options_set_unique_key(push, ""), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_unique_key(push, "k"), TQ_OK);
    CHECK_STATUS(tq_push_options_set_unique_for_ms(push, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_unique_key(push, NULL), TQ_OK);
    CHECK_STATUS(tq_push_options_set_unique_for_ms(push, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_options_set_wait_ms(pull, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_options_set_wait_ms(NULL, 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_options_set_cancel(pull, (const tq_cancel *)opts), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_options_set_cancel(pull, NULL), TQ_OK);
    CHECK_STATUS(tq_cancel_trigger(NULL), TQ_ERR_INVALID_ARGUMENT);
    tq_cancel_free(NULL);
    tq_options_free(opts);
    tq_push_options_free(push);
    tq_pull_options_free(pull);
}

/* The PostgreSQL options: checked when set, and refused for an SQLite file
 * rather than ignored. */
static void test_postgres_options_on_a_file(const char *dir)
{
    char path[4096];
    path_in(path, sizeof path, dir, "pg-options.db");
    tq_options *opts = tq_options_new();
    REQUIRE(opts);
    CHECK_STATUS(tq_options_set_pool_size(NULL, 2), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_pool_size(opts, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_pool_size(opts, TQ_MAX_POOL_SIZE + 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_postgres_schema(opts, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_postgres_schema(opts, "pg_catalog"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_postgres_schema(opts, "a b"), TQ_ERR_INVALID_ARGUMENT);
    tq_queue *q = NULL;
    CHECK_STATUS(tq_open(path, opts, &q), TQ_OK);
    tq_close(q);
    CHECK_STATUS(tq_options_set_pool_size(opts, TQ_DEFAULT_POOL_SIZE), TQ_OK);
    CHECK_STATUS(tq_open(path, opts, &q), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("PostgreSQL only");
    CHECK(q == NULL);
    tq_options_free(opts);
    opts = tq_options_new();
    REQUIRE(opts);
    CHECK_STATUS(tq_options_set_postgres_schema(opts, "jobs"), TQ_OK);
    CHECK_STATUS(tq_open(path, opts, &q), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("PostgreSQL only");
    tq_options_free(opts);
}

static void test_fail_retry_and_dead(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 2);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "\"flaky\"");
    tq_task *first = pull_one(q);
    REQUIRE(first != NULL);
    CHECK(tq_task_last_error(first) == NULL);
    CHECK_INT(tq_task_max_attempts(first), 2);
    CHECK_INT(tq_task_state(first), TQ_STATE_LEASED);
    CHECK_STATUS(tq_fail(NULL, first, "x"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_fail(q, NULL, "x"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_fail(q, first, "\xff"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_fail(q, first, "timed out"), TQ_OK);
    CHECK_STATUS(tq_fail(q, first, "again"), TQ_ERR_NOT_HELD);
    tq_task *second = pull_one(q);
    REQUIRE(second != NULL);
    CHECK_INT(tq_task_id(second), id);
    CHECK_INT(tq_task_attempts(second), 2);
    CHECK_CONTAINS(tq_task_last_error(second), "timed out");
    CHECK_STATUS(tq_fail(q, second, NULL), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_DEAD), 1);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);

    tq_task *listed[2] = {NULL, NULL};
    size_t n = 9;
    CHECK_STATUS(tq_list(q, TQ_STATE_DEAD, 0, 2, listed, &n), TQ_OK);
    REQUIRE(n == 1 && listed[0] != NULL);
    CHECK(listed[1] == NULL);
    CHECK_INT(tq_task_state(listed[0]), TQ_STATE_DEAD);
    CHECK_INT(tq_task_attempts(listed[0]), 2);
    CHECK(tq_task_last_error(listed[0]) == NULL); /* a NULL reason */
    CHECK(payload_is(listed[0], "\"flaky\""));
    CHECK_STATUS(tq_fail(q, listed[0], "x"), TQ_ERR_NOT_HELD);
    CHECK_LAST_ERROR("listed");
    CHECK_STATUS(tq_extend(q, listed[0], 1000), TQ_ERR_NOT_HELD);
    CHECK_STATUS(tq_finish(q, listed[0]), TQ_ERR_NOT_HELD);

    CHECK_STATUS(tq_retry_dead(NULL, id), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_retry_dead(q, id + 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_retry_dead(q, id), TQ_OK);
    CHECK_STATUS(tq_retry_dead(q, id), TQ_ERR_INVALID_ARGUMENT);
    tq_task *third = pull_one(q);
    REQUIRE(third != NULL);
    CHECK_INT(tq_task_attempts(third), 1);
    CHECK_STATUS(tq_fail(q, third, "a"), TQ_OK);
    tq_task *fourth = pull_one(q);
    REQUIRE(fourth != NULL);
    CHECK_STATUS(tq_fail(q, fourth, "b"), TQ_OK);
    int64_t retried = -1, purged = -1;
    CHECK_STATUS(tq_retry_all_dead(q, &retried), TQ_OK);
    CHECK_INT(retried, 1);
    CHECK_STATUS(tq_retry_all_dead(q, NULL), TQ_OK);
    CHECK_STATUS(tq_purge(q, TQ_STATE_PENDING, 0, &purged), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_purge(q, 7, 0, &purged), TQ_ERR_INVALID_ARGUMENT);
    tq_task *fifth = pull_one(q);
    REQUIRE(fifth != NULL);
    CHECK_STATUS(tq_fail(q, fifth, "c"), TQ_OK);
    tq_task *sixth = pull_one(q);
    REQUIRE(sixth != NULL);
    CHECK_STATUS(tq_fail(q, sixth, "d"), TQ_OK);
    tq_task_free(sixth);
    CHECK_STATUS(tq_purge(q, TQ_STATE_DEAD, 0, &purged), TQ_OK);
    CHECK_INT(purged, 1);
    CHECK_INT(count(q, TQ_STATE_DEAD), 0);
    tq_task_free(first);
    tq_task_free(second);
    tq_task_free(third);
    tq_task_free(fourth);
    tq_task_free(fifth);
    tq_task_free(listed[0]);
    tq_close(q);
}

static void test_priorities(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    const int32_t priorities[] = {0, 7, -3, 7, INT32_MIN, INT32_MAX};
    for (int i = 0; i < 6; i++) {
        char json[16];
        snprintf(json, sizeof json, "%d", i);
        CHECK_STATUS(tq_push_options_set_priority(opts, priorities[i]), TQ_OK);
        CHECK_STATUS(tq_push(q, json, strlen(json), opts, NULL), TQ_OK);
    }
    const char *order[] = {"5", "1", "3", "0", "2", "4"};
    for (int i = 0; i < 6; i++) {
        tq_task *task = pull_one(q);
        REQUIRE(task != NULL);
        CHECK(payload_is(task, order[i]));
        CHECK_INT(tq_task_priority(task), priorities[atoi(order[i])]);
        tq_task_free(task);
    }
    tq_push_options_free(opts);
    tq_close(q);
}

static void test_named_queues(const char *dir)
{
    tq_queue *mail = open_named(dir, "mail", 5);
    tq_queue *jobs = open_named(dir, "jobs", 5);
    REQUIRE(mail && jobs);
    push_text(mail, "\"m\"");
    push_text(jobs, "\"j1\"");
    push_text(jobs, "\"j2\"");
    CHECK_INT(count(mail, TQ_STATE_PENDING), 1);
    CHECK_INT(count(jobs, TQ_STATE_PENDING), 2);
    tq_task *task = pull_one(mail);
    REQUIRE(task != NULL);
    CHECK(payload_is(task, "\"m\""));
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(mail, NULL, &none), TQ_EMPTY);
    /* A task is finished through any handle on the file. */
    CHECK_STATUS(tq_finish(jobs, task), TQ_OK);
    CHECK_INT(count(jobs, TQ_STATE_PENDING), 2);
    tq_task_free(task);
    tq_close(mail);
    tq_close(jobs);
}

static void test_batch_push(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    const char *good[] = {"1", "[2]", "{\"three\": 3}"};
    size_t lens[] = {1, 3, 12};
    int64_t ids[3] = {0, 0, 0};
    CHECK_STATUS(tq_push_batch(q, good, lens, 3, NULL, ids), TQ_OK);
    CHECK(ids[0] > 0 && ids[1] == ids[0] + 1 && ids[2] == ids[1] + 1);
    CHECK_STATUS(tq_push_batch(q, good, lens, 3, NULL, NULL), TQ_OK);
    CHECK_STATUS(tq_push_batch(q, NULL, NULL, 0, NULL, NULL), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_PENDING), 6);

    const char *bad_json[] = {"1", "{oops", "3"};
    size_t bad_lens[] = {1, 5, 1};
    CHECK_STATUS(tq_push_batch(q, bad_json, bad_lens, 3, NULL, ids), TQ_ERR_INVALID_JSON);
    CHECK_LAST_ERROR("payload 1");
    const char *with_null[] = {"1", "2", NULL};
    size_t ones[] = {1, 1, 1};
    CHECK_STATUS(tq_push_batch(q, with_null, ones, 3, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("payload 2");
    /* The first bad payload is reported, whatever is wrong with it. */
    const char *json_then_utf8[] = {"nul", "\xca"};
    size_t json_then_utf8_lens[] = {3, 1};
    CHECK_STATUS(tq_push_batch(q, json_then_utf8, json_then_utf8_lens, 2, NULL, NULL), TQ_ERR_INVALID_JSON);
    CHECK_LAST_ERROR("payload 0");
    const char *bad_utf8[] = {"\"\xff\""};
    size_t three[] = {3};
    CHECK_STATUS(tq_push_batch(q, bad_utf8, three, 1, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("payload 0");
    CHECK_STATUS(tq_push_batch(q, NULL, lens, 3, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_batch(q, good, NULL, 3, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_batch(NULL, good, lens, 3, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    tq_push_options *unique = tq_push_options_new();
    REQUIRE(unique != NULL);
    CHECK_STATUS(tq_push_options_set_unique_key(unique, "k"), TQ_OK);
    CHECK_STATUS(tq_push_batch(q, good, lens, 3, unique, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("unique");
    tq_push_options_free(unique);
    CHECK_INT(count(q, TQ_STATE_PENDING), 6);
    tq_close(q);
}

/* Fair shares by key: a key's weight, and deliveries taken by turns
   between the keys with ready tasks (2:1 for weights 2 and 1), whatever
   order the tasks were pushed in. */
static void test_fair_keys(const char *dir)
{
    tq_queue *q = open_named(dir, "fair", 5);
    REQUIRE(q != NULL);
    double weight = 0;
    CHECK_STATUS(tq_fair_weight(q, "a", &weight), TQ_OK);
    CHECK(weight == 1.0);
    CHECK_STATUS(tq_fair_weight(q, "a", NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_fair_weight(q, NULL, &weight), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_fair_weight(NULL, "a", 2.0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_fair_weight(q, NULL, 2.0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_fair_weight(q, "a", 0.0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("weight");
    CHECK_STATUS(tq_set_fair_weight(q, "a", 0.0 / 0.0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_fair_weight(q, "a", 2.0), TQ_OK);
    CHECK_STATUS(tq_fair_weight(q, "a", &weight), TQ_OK);
    CHECK(weight == 2.0);

    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_push_options_set_fair_key(NULL, "a"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_fair_key(opts, ""), TQ_ERR_INVALID_ARGUMENT);
    /* b's tasks are pushed first: without fair shares, they would all come first. */
    CHECK_STATUS(tq_push_options_set_fair_key(opts, "b"), TQ_OK);
    int64_t id = 0;
    for (int i = 0; i < 10; i++)
        CHECK_STATUS(tq_push(q, "\"b\"", 3, opts, &id), TQ_OK);
    CHECK_STATUS(tq_push_options_set_fair_key(opts, "a"), TQ_OK);
    for (int i = 0; i < 10; i++)
        CHECK_STATUS(tq_push(q, "\"a\"", 3, opts, &id), TQ_OK);
    tq_push_options_free(opts);
    int of_a = 0;
    for (int i = 0; i < 9; i++) {
        tq_task *task = pull_one(q);
        REQUIRE(task != NULL);
        of_a += payload_is(task, "\"a\"");
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
    }
    CHECK_INT(of_a, 6);
    tq_close(q);
}

/* A cap on pending tasks: a push beyond it, or a batch that does not fit,
   stores nothing and returns TQ_ERR_FULL; a leased task makes room. */
static void test_max_pending(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    uint64_t cap = 9;
    CHECK_STATUS(tq_max_pending(q, &cap), TQ_OK);
    CHECK_INT(cap, 0);
    CHECK_STATUS(tq_max_pending(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_max_pending(NULL, 2), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_max_pending(q, 2), TQ_OK);
    CHECK_STATUS(tq_max_pending(q, &cap), TQ_OK);
    CHECK_INT(cap, 2);
    push_text(q, "1");
    const char *two[] = {"2", "3"};
    size_t lens[] = {1, 1};
    CHECK_STATUS(tq_push_batch(q, two, lens, 2, NULL, NULL), TQ_ERR_FULL);
    CHECK_LAST_ERROR("full");
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    push_text(q, "2");
    int64_t id = 0;
    CHECK_STATUS(tq_push(q, "3", 1, NULL, &id), TQ_ERR_FULL);
    CHECK_LAST_ERROR("cap is 2");

    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_push_options_set_wait_for_room_ms(NULL, 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_wait_for_room_ms(opts, 50), TQ_OK);
    CHECK_STATUS(tq_push(q, "3", 1, opts, &id), TQ_ERR_FULL);
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_push(q, "3", 1, opts, &id), TQ_OK);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    tq_push_options_free(opts);
    CHECK_STATUS(tq_set_max_pending(q, 0), TQ_OK);
    CHECK_STATUS(tq_max_pending(q, &cap), TQ_OK);
    CHECK_INT(cap, 0);
    push_text(q, "4");
    tq_close(q);
}

/* Caps per fairness key: a default for every key and a key's own; a push
   beyond its key's cap, or a batch with a key that does not fit, stores
   nothing and returns TQ_ERR_FULL, while other keys still take pushes. */
static void test_key_max_pending(const char *dir)
{
    tq_queue *q = open_named(dir, "keycaps", 5);
    REQUIRE(q != NULL);
    uint64_t cap = 9;
    CHECK_STATUS(tq_max_pending_per_key(q, &cap), TQ_OK);
    CHECK_INT(cap, 0);
    CHECK_STATUS(tq_max_pending_per_key(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_max_pending_per_key(NULL, 2), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_key_max_pending(q, NULL, 2), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_key_max_pending(q, "a", NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_max_pending_per_key(q, 1), TQ_OK);
    CHECK_STATUS(tq_set_key_max_pending(q, "b", 2), TQ_OK);
    CHECK_STATUS(tq_max_pending_per_key(q, &cap), TQ_OK);
    CHECK_INT(cap, 1);
    CHECK_STATUS(tq_key_max_pending(q, "a", &cap), TQ_OK);
    CHECK_INT(cap, 1);
    CHECK_STATUS(tq_key_max_pending(q, "b", &cap), TQ_OK);
    CHECK_INT(cap, 2);

    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    int64_t id = 0;
    CHECK_STATUS(tq_push_options_set_fair_key(opts, "a"), TQ_OK);
    CHECK_STATUS(tq_push(q, "\"a\"", 3, opts, &id), TQ_OK);
    CHECK_STATUS(tq_push(q, "\"a\"", 3, opts, &id), TQ_ERR_FULL);
    CHECK_LAST_ERROR("fairness key 'a'");
    CHECK_STATUS(tq_push_options_set_fair_key(opts, "b"), TQ_OK);
    const char *three[] = {"1", "2", "3"};
    size_t lens[] = {1, 1, 1};
    CHECK_STATUS(tq_push_batch(q, three, lens, 3, opts, NULL), TQ_ERR_FULL);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_STATUS(tq_push_batch(q, three, lens, 2, opts, NULL), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_PENDING), 3);
    CHECK_STATUS(tq_set_key_max_pending(q, "b", 0), TQ_OK);
    CHECK_STATUS(tq_key_max_pending(q, "b", &cap), TQ_OK);
    CHECK_INT(cap, 1);
    CHECK_STATUS(tq_set_max_pending_per_key(q, 0), TQ_OK);
    CHECK_STATUS(tq_push(q, "\"b\"", 3, opts, &id), TQ_OK);
    tq_push_options_free(opts);
    tq_close(q);
}

static void test_batch_pull_and_finish(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    for (int i = 0; i < 5; i++)
        push_text(q, "{}");
    tq_task *tasks[4] = {NULL, NULL, NULL, NULL};
    size_t n = 99;
    CHECK_STATUS(tq_pull_batch(q, NULL, 0, tasks, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_batch(q, NULL, 3, NULL, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_batch(q, NULL, 3, tasks, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pull_batch(q, NULL, 3, tasks, &n), TQ_OK);
    REQUIRE(n == 3);
    CHECK(tasks[0] && tasks[1] && tasks[2]);
    CHECK(tq_task_id(tasks[0]) < tq_task_id(tasks[1]) && tq_task_id(tasks[1]) < tq_task_id(tasks[2]));
    tq_task *rest[4] = {NULL, NULL, NULL, NULL};
    CHECK_STATUS(tq_pull_batch(q, NULL, 4, rest, &n), TQ_OK);
    REQUIRE(n == 2);
    CHECK(rest[2] == NULL && rest[3] == NULL);
    tq_task *none[1] = {NULL};
    CHECK_STATUS(tq_pull_batch(q, NULL, 1, none, &n), TQ_EMPTY);
    CHECK_INT(n, 0);

    CHECK_STATUS(tq_finish(q, tasks[1]), TQ_OK);
    tq_task *batch[5] = {tasks[0], tasks[1], tasks[2], rest[0], rest[1]};
    int32_t statuses[5] = {9, 9, 9, 9, 9};
    tq_task *with_null[2] = {tasks[0], NULL};
    CHECK_STATUS(tq_finish_batch(q, with_null, 2, statuses), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tasks[1]");
    CHECK_INT(statuses[0], 9);
    CHECK_STATUS(tq_finish_batch(q, batch, 5, statuses), TQ_OK);
    const int32_t expected[5] = {TQ_OK, TQ_ERR_NOT_HELD, TQ_OK, TQ_OK, TQ_OK};
    for (int i = 0; i < 5; i++)
        CHECK_INT(statuses[i], expected[i]);
    CHECK_STATUS(tq_finish_batch(q, NULL, 0, NULL), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    for (int i = 0; i < 3; i++)
        tq_task_free(tasks[i]);
    tq_task_free(rest[0]);
    tq_task_free(rest[1]);

    /* tq_finish_and_pull_batch: the tasks that ended finished, the next
     * claimed, in one call; a task not held stops neither. */
    for (int i = 0; i < 4; i++)
        push_text(q, "{}");
    tq_task *held[2] = {NULL, NULL};
    CHECK_STATUS(tq_pull_batch(q, NULL, 2, held, &n), TQ_OK);
    REQUIRE(n == 2);
    CHECK_STATUS(tq_finish(q, held[0]), TQ_OK);
    tq_task *next[3] = {NULL, NULL, NULL};
    CHECK_STATUS(tq_finish_and_pull_batch(q, held, 2, statuses, NULL, 3, NULL, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("out_tasks");
    CHECK_STATUS(tq_finish_and_pull_batch(q, held, 2, statuses, NULL, 3, next, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    tq_pull_options *waits = tq_pull_options_new();
    REQUIRE(waits != NULL);
    CHECK_STATUS(tq_pull_options_set_wait_ms(waits, 100), TQ_OK);
    CHECK_STATUS(tq_finish_and_pull_batch(q, held, 2, statuses, waits, 3, next, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(n, 0);
    tq_pull_options_free(waits);
    CHECK_STATUS(tq_finish_and_pull_batch(q, held, 2, statuses, NULL, 3, next, &n), TQ_OK);
    CHECK_INT(statuses[0], TQ_ERR_NOT_HELD);
    CHECK_INT(statuses[1], TQ_OK);
    REQUIRE(n == 2);
    CHECK(next[0] && next[1] && next[2] == NULL);
    CHECK_INT(count(q, TQ_STATE_LEASED), 2);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    /* max 0 only finishes, and takes no array. */
    CHECK_STATUS(tq_finish_and_pull_batch(q, next, 2, statuses, NULL, 0, NULL, &n), TQ_EMPTY);
    CHECK_INT(n, 0);
    CHECK_INT(statuses[0], TQ_OK);
    CHECK_INT(statuses[1], TQ_OK);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    for (int i = 0; i < 2; i++) {
        tq_task_free(held[i]);
        tq_task_free(next[i]);
    }

    /* tq_pull_batch's array passes to tq_finish_batch as it is, no cast. */
    for (int i = 0; i < 2; i++)
        push_text(q, "{}");
    CHECK_STATUS(tq_pull_batch(q, NULL, 4, tasks, &n), TQ_OK);
    REQUIRE(n == 2);
    CHECK_STATUS(tq_finish_batch(q, tasks, n, statuses), TQ_OK);
    CHECK_INT(statuses[0], TQ_OK);
    CHECK_INT(statuses[1], TQ_OK);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    for (size_t i = 0; i < n; i++)
        tq_task_free(tasks[i]);
    tq_close(q);
}

struct waiter {
    tq_queue *q;
    tq_pull_options *opts;
    tq_status status;
    tq_task *task;
};

static void *wait_for_task(void *arg)
{
    struct waiter *w = arg;
    w->status = tq_pull(w->q, w->opts, &w->task);
    return NULL;
}

static void test_blocking_pull(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    tq_pull_options *opts = tq_pull_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_pull_options_set_wait_ms(opts, 30), TQ_OK);
    tq_task *task = NULL;
    int64_t started = now_ms();
    CHECK_STATUS(tq_pull(q, opts, &task), TQ_EMPTY);
    CHECK(now_ms() - started >= 30);

    /* A push wakes the waiter long before its 60 s are up. */
    CHECK_STATUS(tq_pull_options_set_wait_ms(opts, 60000), TQ_OK);
    struct waiter w = {q, opts, TQ_ERR_INTERNAL, NULL};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, wait_for_task, &w) == 0);
    usleep(50000);
    int64_t id = push_text(q, "\"wake\"");
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_OK);
    CHECK_INT(tq_task_id(w.task), id);
    tq_task_free(w.task);

    /* A cancel object ends one wait; it may be freed while options hold it. */
    tq_cancel *cancel = tq_cancel_new();
    REQUIRE(cancel != NULL);
    CHECK_STATUS(tq_pull_options_set_cancel(opts, cancel), TQ_OK);
    w = (struct waiter){q, opts, TQ_ERR_INTERNAL, NULL};
    REQUIRE(pthread_create(&thread, NULL, wait_for_task, &w) == 0);
    usleep(50000);
    started = now_ms();
    CHECK_STATUS(tq_cancel_trigger(cancel), TQ_OK);
    tq_cancel_free(cancel);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_ERR_INTERRUPTED);
    CHECK(w.task == NULL);
    CHECK(now_ms() - started < 30000);
    CHECK_STATUS(tq_pull(q, opts, &task), TQ_ERR_INTERRUPTED); /* for good */
    CHECK_STATUS(tq_pull_options_set_cancel(opts, NULL), TQ_OK);

    /* tq_interrupt ends every wait on the handle, now and later. */
    w = (struct waiter){q, opts, TQ_ERR_INTERNAL, NULL};
    REQUIRE(pthread_create(&thread, NULL, wait_for_task, &w) == 0);
    usleep(50000);
    CHECK_STATUS(tq_interrupt(q), TQ_OK);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_ERR_INTERRUPTED);
    CHECK_STATUS(tq_pull(q, opts, &task), TQ_ERR_INTERRUPTED);
    CHECK_STATUS(tq_pull(q, NULL, &task), TQ_EMPTY);
    CHECK_STATUS(tq_interrupt(NULL), TQ_ERR_INVALID_ARGUMENT);
    tq_pull_options_free(opts);
    tq_close(q);
}

static void test_extend(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    push_text(q, "1");
    tq_task *task = pull_with_lease(q, 100);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_extend(q, task, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_extend(q, task, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_extend(NULL, task, 1000), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_extend(q, NULL, 1000), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_extend(q, task, 600000), TQ_OK);
    usleep(150000);
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_STATUS(tq_extend(q, task, 1), TQ_OK);
    usleep(5000);
    tq_task *thief = pull_one(q);
    REQUIRE(thief != NULL);
    CHECK_STATUS(tq_extend(q, task, 1000), TQ_ERR_NOT_HELD);
    CHECK_STATUS(tq_finish(q, thief), TQ_OK);
    tq_task_free(task);
    tq_task_free(thief);
    tq_close(q);
}

static void test_finish_and_pull(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    int64_t first = push_text(q, "1");
    int64_t second = push_text(q, "2");
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    tq_task *next = (tq_task *)&next; /* overwritten with NULL on every path */
    CHECK_STATUS(tq_finish_and_pull(NULL, task, NULL, &next), TQ_ERR_INVALID_ARGUMENT);
    CHECK(next == NULL);
    CHECK_STATUS(tq_finish_and_pull(q, NULL, NULL, &next), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_finish_and_pull(q, task, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_STATUS(tq_finish_and_pull(q, task, NULL, &next), TQ_OK);
    REQUIRE(next != NULL);
    CHECK_INT(tq_task_id(task), first);
    CHECK_INT(tq_task_id(next), second);
    tq_task *none = NULL;
    CHECK_STATUS(tq_finish_and_pull(q, task, NULL, &none), TQ_ERR_NOT_HELD);
    CHECK(none == NULL);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    tq_pull_options *wait = tq_pull_options_new();
    REQUIRE(wait != NULL);
    CHECK_STATUS(tq_pull_options_set_wait_ms(wait, 10), TQ_OK);
    CHECK_STATUS(tq_finish_and_pull(q, next, wait, &none), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("wait");
    tq_pull_options_free(wait);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_STATUS(tq_finish_and_pull(q, next, NULL, &none), TQ_EMPTY);
    CHECK(none == NULL);
    CHECK_INT(count(q, TQ_STATE_LEASED), 0);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    tq_task_free(task);
    tq_task_free(next);
    tq_close(q);
}

static void test_unique_keys(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_push_options_set_unique_key(opts, "invoice-7"), TQ_OK);
    int64_t first = 0, again = 0;
    CHECK_STATUS(tq_push(q, "1", 1, opts, &first), TQ_OK);
    CHECK_STATUS(tq_push(q, "2", 1, opts, &again), TQ_DUPLICATE);
    CHECK_INT(again, first);
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_push(q, "3", 1, opts, NULL), TQ_DUPLICATE);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    CHECK_STATUS(tq_push(q, "4", 1, opts, &again), TQ_OK);
    CHECK(again > first);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    tq_task_free(task);
    tq_push_options_free(opts);
    tq_close(q);
}

static void test_debounce_and_replace(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    /* A merge needs a unique key: refused, storing nothing. */
    CHECK_STATUS(tq_push_options_set_replace_pending(opts, true), TQ_OK);
    CHECK_STATUS(tq_push(q, "0", 1, opts, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("needs a unique key");
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    CHECK_STATUS(tq_push_options_set_debounce_ms(opts, OVER_ONE_YEAR_MS), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_replace_pending(NULL, true), TQ_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(tq_push_options_set_unique_key(opts, "doc-7"), TQ_OK);
    CHECK_STATUS(tq_push_options_set_delay_ms(opts, 3600000), TQ_OK);
    CHECK_STATUS(tq_push_options_set_debounce_ms(opts, 7200000), TQ_OK);
    int64_t first = 0, again = 0;
    CHECK_STATUS(tq_push(q, "1", 1, opts, &first), TQ_OK);
    CHECK_STATUS(tq_push(q, "2", 1, opts, &again), TQ_MERGED);
    CHECK_INT(again, first);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    /* Debounced to an hour away: nothing to pull. */
    tq_task *task = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &task), TQ_EMPTY);

    /* Without the debounce the run time stays; 0 removes it. */
    CHECK_STATUS(tq_push_options_set_debounce_ms(opts, 0), TQ_OK);
    CHECK_STATUS(tq_push_options_set_delay_ms(opts, 0), TQ_OK);
    CHECK_STATUS(tq_push(q, "3", 1, opts, &again), TQ_MERGED);
    CHECK_STATUS(tq_pull(q, NULL, &task), TQ_EMPTY);
    /* A debounce to now makes it ready, with the newest payload. */
    CHECK_STATUS(tq_push_options_set_debounce_ms(opts, 1), TQ_OK);
    CHECK_STATUS(tq_push(q, "4", 1, opts, &again), TQ_MERGED);
    task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), first);
    CHECK(strcmp(tq_task_payload(task, NULL), "4") == 0);
    /* A delivered task is never changed. */
    CHECK_STATUS(tq_push(q, "5", 1, opts, &again), TQ_DUPLICATE);
    CHECK_INT(again, first);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    tq_push_options_free(opts);
    tq_close(q);
}

static void test_visibility(const char *dir)
{
    tq_queue *q = open_named(dir, "default", 5);
    REQUIRE(q != NULL);
    int64_t age = -1;
    CHECK_STATUS(tq_oldest_ready_age_ms(q, &age), TQ_EMPTY);
    CHECK_INT(age, 0);
    CHECK_STATUS(tq_oldest_ready_age_ms(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_oldest_ready_age_ms(NULL, &age), TQ_ERR_INVALID_ARGUMENT);
    tq_push_options *opts = tq_push_options_new();
    REQUIRE(opts != NULL);
    CHECK_STATUS(tq_push_options_set_run_at_unix_ms(opts, now_ms() - 5000), TQ_OK);
    CHECK_STATUS(tq_push(q, "\"old\"", 5, opts, NULL), TQ_OK);
    tq_push_options_free(opts);
    for (int i = 0; i < 4; i++)
        push_text(q, "{}");
    CHECK_STATUS(tq_oldest_ready_age_ms(q, &age), TQ_OK);
    CHECK(age >= 5000 && age < 60000);

    tq_task *page[2] = {NULL, NULL};
    size_t n = 0, seen = 0;
    int64_t after = 0;
    do {
        CHECK_STATUS(tq_list(q, TQ_STATE_PENDING, after, 2, page, &n), TQ_OK);
        for (size_t i = 0; i < n; i++) {
            CHECK(tq_task_id(page[i]) > after);
            CHECK_INT(tq_task_state(page[i]), TQ_STATE_PENDING);
            CHECK(tq_task_run_at_unix_ms(page[i]) > 0);
            after = tq_task_id(page[i]);
            tq_task_free(page[i]);
            seen++;
        }
    } while (n == 2);
    CHECK_INT(seen, 5);
    CHECK_STATUS(tq_list(q, 9, 0, 2, page, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_list(q, TQ_STATE_PENDING, 0, 2, NULL, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_list(q, TQ_STATE_PENDING, 0, 2, page, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_list(q, TQ_STATE_PENDING, 0, 0, page, &n), TQ_OK);
    CHECK_INT(n, 0);
    CHECK_INT(tq_task_state(NULL), -1);
    CHECK(tq_task_last_error(NULL) == NULL);
    CHECK_INT(tq_task_priority(NULL), 0);

    int64_t wal = -1;
    CHECK_STATUS(tq_wal_size(q, &wal), TQ_OK);
    CHECK(wal > 0);
    CHECK_STATUS(tq_checkpoint(q, &wal), TQ_OK);
    CHECK_INT(wal, 0);
    CHECK_STATUS(tq_checkpoint(q, NULL), TQ_OK);
    CHECK_STATUS(tq_wal_size(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_checkpoint(NULL, &wal), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(count(q, TQ_STATE_PENDING), 5);
    tq_close(q);
}

struct test_case {
    const char *name;
    case_fn fn;
};

struct cancellation_watch {
    tq_queue *q;
    const tq_task *task;
    tq_cancel *cancel;
    tq_status status;
};

static void *watch_cancellation(void *arg)
{
    struct cancellation_watch *w = arg;
    w->status = tq_wait_cancellation(w->q, w->task, 60000, w->cancel);
    return NULL;
}

/* A holder's watcher thread learns of its task's cancellation, or of the
 * end of its delivery, while the worker keeps using the task. */
static void test_wait_cancellation(const char *dir)
{
    tq_queue *q = open_queue(dir, "watch.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "\"watched\"");
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_wait_cancellation(NULL, task, 0, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_wait_cancellation(q, NULL, 0, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_wait_cancellation(q, task, UINT64_MAX, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_wait_cancellation(q, task, 0, NULL), TQ_EMPTY);

    struct cancellation_watch w = {q, task, NULL, TQ_OK};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, watch_cancellation, &w) == 0);
    CHECK_STATUS(tq_extend(q, task, 30000), TQ_OK);
    int32_t state = -1;
    CHECK_STATUS(tq_cancel_task(q, id, "stop", &state), TQ_OK);
    CHECK_INT(state, TQ_STATE_LEASED);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_ERR_CANCELLED);
    CHECK_STATUS(tq_finish(q, task), TQ_ERR_CANCELLED);
    CHECK_STATUS(tq_wait_cancellation(q, task, 0, NULL), TQ_ERR_NOT_HELD);
    tq_task_free(task);

    /* The work is done: the worker's cancel object stops the watcher. */
    push_text(q, "\"done\"");
    task = pull_one(q);
    REQUIRE(task != NULL);
    w = (struct cancellation_watch){q, task, tq_cancel_new(), TQ_OK};
    REQUIRE(w.cancel != NULL);
    REQUIRE(pthread_create(&thread, NULL, watch_cancellation, &w) == 0);
    CHECK_STATUS(tq_cancel_trigger(w.cancel), TQ_OK);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_ERR_INTERRUPTED);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_cancel_free(w.cancel);
    tq_task_free(task);

    /* A snapshot is not a delivery. */
    tq_task *snapshot = NULL;
    CHECK_STATUS(tq_get_task(q, id, &snapshot), TQ_OK);
    CHECK_STATUS(tq_wait_cancellation(q, snapshot, 0, NULL), TQ_ERR_NOT_HELD);
    tq_task_free(snapshot);
    tq_close(q);
}

struct change_wait {
    tq_queue *q;
    uint64_t seen;
    tq_cancel *cancel;
    uint64_t mark;
    tq_status status;
};

static void *wait_change(void *arg)
{
    struct change_wait *w = arg;
    w->status = tq_wait_change(w->q, w->seen, 60000, w->cancel, &w->mark);
    return NULL;
}

/* One thread waits for any change on behalf of many waits: a write or a
 * cancellation wakes it, a change made before it waits is not missed, and
 * a cancel object or tq_interrupt ends it. */
static void test_wait_change(const char *dir)
{
    tq_queue *q = open_queue(dir, "change.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    uint64_t mark = 0;
    CHECK_STATUS(tq_wait_change(NULL, 0, 0, NULL, &mark), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_wait_change(q, 0, 0, NULL, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_wait_change(q, 0, UINT64_MAX, NULL, &mark), TQ_ERR_INVALID_ARGUMENT);
    /* A zero timeout takes the mark; nothing moved since, so it is the same. */
    tq_status first = tq_wait_change(q, 0, 0, NULL, &mark);
    CHECK(first == TQ_OK || first == TQ_EMPTY);
    uint64_t again = mark + 1;
    CHECK_STATUS(tq_wait_change(q, mark, 0, NULL, &again), TQ_EMPTY);
    CHECK(again == mark);

    /* A push before the wait starts is seen at once. */
    int64_t id = push_text(q, "\"changed\"");
    CHECK_STATUS(tq_wait_change(q, mark, 60000, NULL, &again), TQ_OK);
    CHECK(again != mark);
    mark = again;

    /* A finish from another thread wakes a waiter. */
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_wait_change(q, 0, 0, NULL, &mark), TQ_OK);
    struct change_wait w = {q, mark, NULL, 0, TQ_OK};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, wait_change, &w) == 0);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_OK);
    CHECK(w.mark != mark);
    tq_task_free(task);
    tq_task *ended = NULL;
    CHECK_STATUS(tq_wait_task(q, id, 0, NULL, &ended), TQ_OK);
    CHECK_INT(tq_task_state(ended), TQ_STATE_DONE);
    tq_task_free(ended);

    /* A cancellation of a leased task wakes a waiter. */
    push_text(q, "\"cancelled\"");
    task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_wait_change(q, 0, 0, NULL, &mark), TQ_OK);
    w = (struct change_wait){q, mark, NULL, 0, TQ_OK};
    REQUIRE(pthread_create(&thread, NULL, wait_change, &w) == 0);
    CHECK_STATUS(tq_cancel_task(q, tq_task_id(task), "stop", NULL), TQ_OK);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_OK);
    CHECK_STATUS(tq_wait_cancellation(q, task, 0, NULL), TQ_ERR_CANCELLED);
    tq_task_free(task);

    /* A cancel object, then tq_interrupt, end the wait. */
    CHECK_STATUS(tq_wait_change(q, 0, 0, NULL, &mark), TQ_OK);
    w = (struct change_wait){q, mark, tq_cancel_new(), 0, TQ_OK};
    REQUIRE(w.cancel != NULL);
    REQUIRE(pthread_create(&thread, NULL, wait_change, &w) == 0);
    CHECK_STATUS(tq_cancel_trigger(w.cancel), TQ_OK);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_ERR_INTERRUPTED);
    tq_cancel_free(w.cancel);
    /* The trigger rang the queue's bell: a fresh mark, or the wait could
     * end with the change it made before tq_interrupt. */
    CHECK_STATUS(tq_wait_change(q, 0, 0, NULL, &mark), TQ_OK);
    w = (struct change_wait){q, mark, NULL, 0, TQ_OK};
    REQUIRE(pthread_create(&thread, NULL, wait_change, &w) == 0);
    CHECK_STATUS(tq_interrupt(q), TQ_OK);
    pthread_join(thread, NULL);
    CHECK_STATUS(w.status, TQ_ERR_INTERRUPTED);
    tq_close(q);
}

static void test_cancel_pause_snooze(const char *dir)
{
    tq_queue *q = open_queue(dir, "control.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    int64_t pending = push_text(q, "\"pending\"");
    int64_t leased = push_text(q, "\"leased\"");
    int32_t state = -1;
    CHECK_STATUS(tq_cancel_task(NULL, pending, NULL, &state), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_cancel_task(q, pending + 100, NULL, &state), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_cancel_task(q, pending, "\xff", &state), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(state, -1);
    CHECK_STATUS(tq_cancel_task(q, pending, "not needed", &state), TQ_OK);
    CHECK_INT(state, TQ_STATE_CANCELLED);
    CHECK_INT(count(q, TQ_STATE_CANCELLED), 1);

    /* A leased task: its holder is told at its next call. */
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), leased);
    CHECK_STATUS(tq_cancel_task(q, leased, NULL, &state), TQ_OK);
    CHECK_INT(state, TQ_STATE_LEASED);
    CHECK_STATUS(tq_extend(q, task, 1000), TQ_ERR_CANCELLED);
    CHECK_LAST_ERROR("cancelled");
    CHECK_STATUS(tq_finish(q, task), TQ_ERR_NOT_HELD);
    CHECK_INT(count(q, TQ_STATE_CANCELLED), 2);
    tq_task_free(task);

    /* A pause until resumed, then a snooze that does not count. */
    int64_t until = 1;
    CHECK_STATUS(tq_paused_until(q, &until), TQ_OK);
    CHECK_INT(until, 0);
    CHECK_STATUS(tq_paused_until(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pause(q, 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_pause(q, TQ_UNTIL_RESUMED), TQ_OK);
    CHECK_STATUS(tq_paused_until(q, &until), TQ_OK);
    CHECK(until == TQ_UNTIL_RESUMED);
    int64_t later = push_text(q, "\"later\"");
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_STATUS(tq_resume(q), TQ_OK);
    task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), later);
    CHECK_STATUS(tq_snooze(q, NULL, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_snooze(q, task, 0), TQ_OK);
    CHECK_STATUS(tq_snooze(q, task, 0), TQ_ERR_NOT_HELD);
    tq_task_free(task);
    task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_attempts(task), 1);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);

    /* A concurrency limit of one: a second pull finds no slot. */
    uint32_t limit = 9;
    CHECK_STATUS(tq_concurrency_limit(q, &limit), TQ_OK);
    CHECK_INT(limit, 0);
    CHECK_STATUS(tq_concurrency_limit(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_concurrency_limit(q, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_concurrency_limit(q, 1), TQ_OK);
    CHECK_STATUS(tq_concurrency_limit(q, &limit), TQ_OK);
    CHECK_INT(limit, 1);
    push_text(q, "1");
    push_text(q, "2");
    task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    CHECK_STATUS(tq_clear_concurrency_limit(q), TQ_OK);

    /* A rate of one claim an hour: the second pull finds no slot. */
    uint32_t claims = 9;
    uint64_t per_ms = 9;
    CHECK_STATUS(tq_rate_limit(q, &claims, &per_ms), TQ_OK);
    CHECK(claims == 0 && per_ms == 0);
    CHECK_STATUS(tq_set_rate_limit(q, 0, 1000), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_rate_limit(q, 1, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_rate_limit(q, NULL, &per_ms), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_set_rate_limit(q, 1, 3600000), TQ_OK);
    CHECK_STATUS(tq_rate_limit(q, &claims, &per_ms), TQ_OK);
    CHECK(claims == 1 && per_ms == 3600000);
    push_text(q, "3");
    task = pull_one(q);
    REQUIRE(task != NULL);
    tq_task_free(task);
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_STATUS(tq_clear_rate_limit(q), TQ_OK);
    task = pull_one(q);
    REQUIRE(task != NULL);
    tq_task_free(task);
    tq_close(q);
}

/* Schedules: options checked by their setters, add, list, pause, resume,
 * remove, and a slot's task enqueued once by a waiting pull. */
static void test_schedules(const char *dir)
{
    tq_queue *q = open_queue(dir, "schedules.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    tq_schedule_options *opts = tq_schedule_options_new();
    REQUIRE(opts != NULL);
    const char *payload = "{\"report\":true}";
    size_t len = strlen(payload);
    CHECK_STATUS(tq_schedule_add(q, "nightly", payload, len, opts), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("no spec");
    CHECK_STATUS(tq_schedule_options_set_cron(opts, "61 * * * *"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("'61 * * * *'");
    CHECK_STATUS(tq_schedule_options_set_cron(NULL, "@daily"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_options_set_time_zone(opts, "Mars/Olympus"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("'Mars/Olympus'");
    CHECK_STATUS(tq_schedule_options_set_catch_up(opts, 7, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_options_set_catch_up(opts, TQ_CATCH_UP_EACH, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_options_set_max_attempts(opts, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_options_set_every_ms(opts, 0), TQ_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(tq_schedule_options_set_cron(opts, "0 2 * * *"), TQ_OK);
    CHECK_STATUS(tq_schedule_options_set_time_zone(opts, "Europe/Paris"), TQ_OK);
    CHECK_STATUS(tq_schedule_options_set_priority(opts, 4), TQ_OK);
    CHECK_STATUS(tq_schedule_options_set_max_attempts(opts, 2), TQ_OK);
    CHECK_STATUS(tq_schedule_options_set_catch_up(opts, TQ_CATCH_UP_EACH, 5), TQ_OK);
    CHECK_STATUS(tq_schedule_add(q, "nightly", "not json", 8, opts), TQ_ERR_INVALID_JSON);
    CHECK_STATUS(tq_schedule_add(NULL, "nightly", payload, len, opts), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_add(q, "nightly", payload, len, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_add(q, "nightly", payload, len, opts), TQ_OK);
    CHECK_STATUS(tq_schedule_add(q, "nightly", payload, len, opts), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("already has a schedule named 'nightly'");
    CHECK_STATUS(tq_schedule_replace(q, "nightly", payload, len, opts), TQ_OK);
    /* Declared again unchanged, as at a later start: its next slot stays. */
    tq_schedule *declared[1] = {NULL};
    size_t found = 0;
    CHECK_STATUS(tq_schedules(q, NULL, 1, declared, &found), TQ_OK);
    REQUIRE(found == 1);
    int64_t slot = tq_schedule_next_slot_unix_ms(declared[0]);
    tq_schedule_free(declared[0]);
    CHECK_STATUS(tq_schedule_upsert(q, "nightly", payload, len, opts), TQ_OK);
    CHECK_STATUS(tq_schedules(q, NULL, 1, declared, &found), TQ_OK);
    REQUIRE(found == 1);
    CHECK(tq_schedule_next_slot_unix_ms(declared[0]) == slot);
    tq_schedule_free(declared[0]);

    /* An interval with a time zone is refused at the add. */
    tq_schedule_options *tick = tq_schedule_options_new();
    REQUIRE(tick != NULL);
    CHECK_STATUS(tq_schedule_options_set_every_ms(tick, 200), TQ_OK);
    CHECK_STATUS(tq_schedule_options_set_time_zone(tick, "Europe/Paris"), TQ_OK);
    CHECK_STATUS(tq_schedule_add(q, "tick", "\"tick\"", 6, tick), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_options_set_time_zone(tick, "UTC"), TQ_OK);
    CHECK_STATUS(tq_schedule_add(q, "tick", "\"tick\"", 6, tick), TQ_OK);

    tq_schedule *listed[3] = {NULL, NULL, NULL};
    size_t n = 9;
    CHECK_STATUS(tq_schedules(q, NULL, 3, NULL, &n), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedules(q, NULL, 3, listed, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedules(q, NULL, 3, listed, &n), TQ_OK);
    REQUIRE(n == 2);
    CHECK(strcmp(tq_schedule_name(listed[0]), "nightly") == 0);
    CHECK(strcmp(tq_schedule_cron(listed[0]), "0 2 * * *") == 0);
    CHECK_INT(tq_schedule_every_ms(listed[0]), 0);
    CHECK(strcmp(tq_schedule_time_zone(listed[0]), "Europe/Paris") == 0);
    size_t payload_len = 0;
    CHECK(strcmp(tq_schedule_payload(listed[0], &payload_len), payload) == 0);
    CHECK_INT(payload_len, len);
    CHECK_INT(tq_schedule_priority(listed[0]), 4);
    CHECK_INT(tq_schedule_max_attempts(listed[0]), 2);
    uint32_t limit = 0;
    CHECK_INT(tq_schedule_catch_up(listed[0], &limit), TQ_CATCH_UP_EACH);
    CHECK_INT(limit, 5);
    CHECK(!tq_schedule_paused(listed[0]));
    CHECK(tq_schedule_next_slot_unix_ms(listed[0]) > now_ms());
    CHECK(strcmp(tq_schedule_name(listed[1]), "tick") == 0);
    CHECK(tq_schedule_cron(listed[1]) == NULL);
    CHECK_INT(tq_schedule_every_ms(listed[1]), 200);
    CHECK_INT(tq_schedule_catch_up(listed[1], NULL), TQ_CATCH_UP_ONE);
    CHECK_INT(tq_schedule_catch_up(NULL, &limit), -1);
    CHECK(tq_schedule_name(NULL) == NULL);
    tq_schedule_free(listed[0]);
    tq_schedule_free(listed[1]);
    /* Paged by name. */
    CHECK_STATUS(tq_schedules(q, "nightly", 3, listed, &n), TQ_OK);
    REQUIRE(n == 1);
    CHECK(strcmp(tq_schedule_name(listed[0]), "tick") == 0);
    CHECK(listed[1] == NULL);
    tq_schedule_free(listed[0]);

    /* A waiting pull wakes at the slot and takes its task. */
    tq_pull_options *wait = tq_pull_options_new();
    REQUIRE(wait != NULL);
    CHECK_STATUS(tq_pull_options_set_wait_ms(wait, 5000), TQ_OK);
    int64_t started = now_ms();
    tq_task *task = NULL;
    CHECK_STATUS(tq_pull(q, wait, &task), TQ_OK);
    REQUIRE(task != NULL);
    CHECK(now_ms() - started < 2000);
    CHECK(payload_is(task, "\"tick\""));
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);

    /* Paused, nothing is enqueued; removed, the name is free again. */
    CHECK_STATUS(tq_schedule_pause(q, "tick"), TQ_OK);
    CHECK_STATUS(tq_schedule_pause(q, "missing"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_pause(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    struct timespec pause = {0, 450 * 1000 * 1000};
    nanosleep(&pause, NULL);
    int64_t enqueued = -1;
    CHECK_STATUS(tq_run_due_schedules(q, &enqueued), TQ_OK);
    CHECK_INT(enqueued, 0);
    CHECK_STATUS(tq_run_due_schedules(NULL, &enqueued), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_resume(q, "tick"), TQ_OK);
    nanosleep(&pause, NULL);
    CHECK_STATUS(tq_run_due_schedules(q, NULL), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_PENDING), 1);
    CHECK_STATUS(tq_schedule_remove(q, "tick"), TQ_OK);
    CHECK_STATUS(tq_schedule_remove(q, "tick"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_schedule_add(q, "tick", "\"tick\"", 6, tick), TQ_OK);

    tq_pull_options_free(wait);
    tq_schedule_options_free(tick);
    tq_schedule_options_free(opts);
    tq_schedule_options_free(NULL);
    tq_schedule_free(NULL);
    tq_close(q);
}

#define CASE(name) {#name, test_##name}

static void test_steps(const char *dir)
{
    tq_options *options = tq_options_new();
    REQUIRE(options != NULL);
    CHECK_STATUS(tq_options_set_keep_history(options, true), TQ_OK);
    CHECK_STATUS(tq_options_set_durability(options, TQ_DURABILITY_NORMAL), TQ_OK);
    CHECK_STATUS(tq_options_set_max_attempts(options, 2), TQ_OK);
    char path[4096];
    path_in(path, sizeof path, dir, "steps.db");
    tq_queue *q = NULL;
    CHECK_STATUS(tq_open(path, options, &q), TQ_OK);
    tq_options_free(options);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "{\"order\":7}");
    tq_task *first = pull_with_lease(q, 30);
    REQUIRE(first != NULL);

    char *output = (char *)"untouched";
    CHECK_STATUS(tq_step_get(q, first, "charge", &output), TQ_EMPTY);
    CHECK(output == NULL);
    CHECK_STATUS(tq_step_put(q, first, "charge", "{\"charge\":\"ch_1\"}"), TQ_OK);
    CHECK_STATUS(tq_step_put(q, first, "charge", "\"second\""), TQ_DUPLICATE);
    CHECK_STATUS(tq_step_put(q, first, "mail", "{bad"), TQ_ERR_INVALID_JSON);
    CHECK_STATUS(tq_step_put(q, first, "", "1"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_step_put(q, first, NULL, "1"), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_step_put(q, first, "mail", NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_step_get(q, first, "charge", NULL), TQ_ERR_INVALID_ARGUMENT);

    /* The lease runs out: the next delivery reads the step, and the stale
     * one can no longer record any. */
    sleep_ms(60);
    tq_task *second = pull_one(q);
    REQUIRE(second != NULL);
    CHECK_INT(tq_task_id(second), id);
    CHECK_STATUS(tq_step_put(q, first, "mail", "1"), TQ_ERR_NOT_HELD);
    CHECK_STATUS(tq_step_get(q, second, "charge", &output), TQ_OK);
    REQUIRE(output != NULL);
    CHECK(strcmp(output, "{\"charge\":\"ch_1\"}") == 0);
    tq_string_free(output);
    tq_string_free(NULL);
    CHECK_STATUS(tq_step_get(q, second, "mail", &output), TQ_EMPTY);
    CHECK_STATUS(tq_step_put(q, second, "mail", "true"), TQ_OK);
    CHECK_STATUS(tq_step_put(q, second, "receipt", "[1]"), TQ_OK);

    /* Held: clearing is refused. */
    uint64_t cleared = 99;
    CHECK_STATUS(tq_clear_steps_after(q, id, "charge", &cleared), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(cleared, 99);
    CHECK_STATUS(tq_fail(q, second, "the receipt bounced"), TQ_OK);

    tq_task *snapshot = NULL;
    CHECK_STATUS(tq_get_task(q, id, &snapshot), TQ_OK);
    REQUIRE(snapshot != NULL);
    CHECK_INT(tq_task_state(snapshot), TQ_STATE_DEAD);
    REQUIRE(tq_task_step_count(snapshot) == 3);
    CHECK(strcmp(tq_task_step_name(snapshot, 0), "charge") == 0);
    CHECK(strcmp(tq_task_step_output(snapshot, 0), "{\"charge\":\"ch_1\"}") == 0);
    CHECK(strcmp(tq_task_step_name(snapshot, 1), "mail") == 0);
    CHECK(strcmp(tq_task_step_name(snapshot, 2), "receipt") == 0);
    CHECK(tq_task_step_recorded_at_unix_ms(snapshot, 2) > now_ms() - 60000);
    CHECK(tq_task_step_name(snapshot, 3) == NULL);
    CHECK_LAST_ERROR("no step 3");
    CHECK_INT(tq_task_step_count(first), 0);
    CHECK_STATUS(tq_step_get(q, snapshot, "charge", &output), TQ_ERR_INVALID_ARGUMENT);
    tq_task_free(snapshot);

    CHECK_STATUS(tq_clear_steps_after(q, id, "nothing", &cleared), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_clear_steps_after(q, id, "charge", &cleared), TQ_OK);
    CHECK_INT(cleared, 2);
    CHECK_STATUS(tq_retry_dead(q, id), TQ_OK);
    tq_task *third = pull_one(q);
    REQUIRE(third != NULL);
    CHECK_STATUS(tq_step_get(q, third, "mail", &output), TQ_EMPTY);
    CHECK_STATUS(tq_step_get(q, third, "charge", &output), TQ_OK);
    tq_string_free(output);
    CHECK_STATUS(tq_finish(q, third), TQ_OK);
    tq_task_free(first);
    tq_task_free(second);
    tq_task_free(third);
    tq_close(q);
}

static void test_attempts(const char *dir)
{
    tq_options *options = tq_options_new();
    REQUIRE(options != NULL);
    CHECK_STATUS(tq_options_set_keep_history(options, true), TQ_OK);
    CHECK_STATUS(tq_options_set_durability(options, TQ_DURABILITY_NORMAL), TQ_OK);
    CHECK_STATUS(tq_options_set_max_attempts(options, 3), TQ_OK);
    CHECK_STATUS(tq_options_set_retry_backoff_ms(options, 0, 0), TQ_OK);
    char path[4096];
    path_in(path, sizeof path, dir, "attempts.db");
    tq_queue *q = NULL;
    CHECK_STATUS(tq_open(path, options, &q), TQ_OK);
    tq_options_free(options);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "{\"order\":7}");
    int64_t before = now_ms();

    /* Delivery 1 fails; delivery 2's lease runs out and a claim takes it
     * back; delivery 3 fails, the last. */
    tq_task *first = pull_one(q);
    REQUIRE(first != NULL);
    CHECK_STATUS(tq_fail(q, first, "HTTP 502"), TQ_OK);
    tq_task *second = pull_with_lease(q, 30);
    REQUIRE(second != NULL);
    sleep_ms(60);
    tq_task *third = pull_one(q);
    REQUIRE(third != NULL);
    CHECK_INT(tq_task_id(third), id);
    CHECK_STATUS(tq_fail(q, third, "HTTP 503"), TQ_OK);

    tq_task *snapshot = NULL;
    CHECK_STATUS(tq_get_task(q, id, &snapshot), TQ_OK);
    REQUIRE(snapshot != NULL);
    CHECK_INT(tq_task_state(snapshot), TQ_STATE_DEAD);
    REQUIRE(tq_task_attempt_count(snapshot) == 3);
    CHECK_INT(tq_task_attempt_number(snapshot, 0), 1);
    CHECK_INT(tq_task_attempt_outcome(snapshot, 0), TQ_ATTEMPT_FAILED);
    CHECK(strcmp(tq_task_attempt_reason(snapshot, 0), "HTTP 502") == 0);
    CHECK_INT(tq_task_attempt_number(snapshot, 1), 2);
    CHECK_INT(tq_task_attempt_outcome(snapshot, 1), TQ_ATTEMPT_LEASE_EXPIRED);
    CHECK(strstr(tq_task_attempt_reason(snapshot, 1), "expired") != NULL);
    CHECK_INT(tq_task_attempt_number(snapshot, 2), 3);
    CHECK_INT(tq_task_attempt_outcome(snapshot, 2), TQ_ATTEMPT_FAILED);
    CHECK(strcmp(tq_task_attempt_reason(snapshot, 2), "HTTP 503") == 0);
    for (size_t i = 0; i < 3; i++) {
        CHECK(tq_task_attempt_holder_id(snapshot, i) > 0);
        CHECK_INT(tq_task_attempt_holder_pid(snapshot, i), (int64_t)getpid());
        int64_t started = tq_task_attempt_started_at_unix_ms(snapshot, i);
        int64_t ended = tq_task_attempt_ended_at_unix_ms(snapshot, i);
        CHECK(started >= before);
        CHECK(ended >= started);
    }
    /* The expired delivery lasted at least its lease. */
    CHECK(tq_task_attempt_ended_at_unix_ms(snapshot, 1) -
              tq_task_attempt_started_at_unix_ms(snapshot, 1) >= 30);

    /* Past the end, and on tasks that list none. */
    CHECK(tq_task_attempt_reason(snapshot, 3) == NULL);
    CHECK_LAST_ERROR("no attempt 3");
    CHECK_INT(tq_task_attempt_outcome(snapshot, 3), -1);
    CHECK_INT(tq_task_attempt_number(snapshot, 3), 0);
    CHECK_INT(tq_task_attempt_ended_at_unix_ms(snapshot, 3), 0);
    CHECK_INT(tq_task_attempt_count(first), 0);
    CHECK_INT(tq_task_attempt_count(NULL), 0);
    CHECK_INT(tq_task_attempt_outcome(NULL, 0), -1);
    CHECK_INT(TQ_ATTEMPTS_KEPT, 20);
    tq_task_free(snapshot);

    /* A task of a list reads none. */
    tq_task *listed[1] = {NULL};
    size_t count = 0;
    CHECK_STATUS(tq_list(q, TQ_STATE_DEAD, 0, 1, listed, &count), TQ_OK);
    REQUIRE(count == 1);
    CHECK_INT(tq_task_attempt_count(listed[0]), 0);
    tq_task_free(listed[0]);

    tq_task_free(first);
    tq_task_free(second);
    tq_task_free(third);
    tq_close(q);
}

/* A held task waits for an event: suspended, woken by a signal, and its
 * next delivery reads the payload; a wait times out; a sleep suspends the
 * task and returns at once on replay. */
static void test_events_and_sleep(const char *dir)
{
    tq_queue *q = open_queue(dir, "events.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    int64_t woken = -1;
    CHECK_STATUS(tq_signal(q, "early", "{\"n\":1}", 0, &woken), TQ_OK);
    CHECK_INT(woken, 0);
    CHECK_STATUS(tq_signal(q, "k", "{bad", 0, NULL), TQ_ERR_INVALID_JSON);
    CHECK_STATUS(tq_signal(q, "", "1", 0, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_signal(q, NULL, "1", 0, NULL), TQ_ERR_INVALID_ARGUMENT);

    int64_t id = push_text(q, "{\"order\":7}");
    tq_task *first = pull_one(q);
    REQUIRE(first != NULL);
    char *payload = (char *)"untouched";
    CHECK_STATUS(tq_wait_for_event(q, first, "early", 60000, &payload), TQ_OK);
    REQUIRE(payload != NULL);
    CHECK(strcmp(payload, "{\"n\":1}") == 0);
    tq_string_free(payload);
    CHECK_STATUS(tq_wait_for_event(q, first, "k", 60000, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_wait_for_event(q, first, "payment:42", 60000, &payload), TQ_SUSPENDED);
    CHECK(payload == NULL);
    CHECK_STATUS(tq_finish(q, first), TQ_ERR_NOT_HELD);
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK(none == NULL);

    CHECK_STATUS(tq_signal(q, "payment:42", "\"paid\"", 0, &woken), TQ_OK);
    CHECK_INT(woken, id);
    tq_task *second = pull_one(q);
    REQUIRE(second != NULL);
    CHECK_INT(tq_task_attempts(second), 1);
    CHECK_STATUS(tq_wait_for_event(q, second, "payment:42", 60000, &payload), TQ_OK);
    REQUIRE(payload != NULL);
    CHECK(strcmp(payload, "\"paid\"") == 0);
    tq_string_free(payload);
    CHECK_STATUS(tq_wait_for_event(q, second, "never", 0, &payload), TQ_TIMEOUT);
    CHECK(payload == NULL);
    CHECK_STATUS(tq_wait_for_event(q, first, "never", 0, &payload), TQ_ERR_NOT_HELD);

    CHECK_STATUS(tq_sleep(q, second, "", 10), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_sleep_until(q, second, "past", 1), TQ_OK);
    CHECK_STATUS(tq_sleep(q, second, "nap", 50), TQ_SUSPENDED);
    sleep_ms(100);
    tq_task *third = pull_one(q);
    REQUIRE(third != NULL);
    CHECK_INT(tq_task_id(third), id);
    CHECK_INT(tq_task_attempts(third), 1);
    CHECK_STATUS(tq_sleep(q, third, "nap", 50), TQ_OK);
    CHECK_STATUS(tq_wait_for_event(q, third, "payment:42", 60000, &payload), TQ_OK);
    tq_string_free(payload);
    CHECK_STATUS(tq_finish(q, third), TQ_OK);
    tq_task_free(first);
    tq_task_free(second);
    tq_task_free(third);
    tq_close(q);
}

static void test_results_progress_and_waiting(const char *dir)
{
    tq_queue *q = open_queue(dir, "results.db", TQ_DURABILITY_NORMAL, false);
    REQUIRE(q != NULL);
    int64_t id = push_text(q, "{\"resize\":\"a.png\"}");
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK(tq_task_result(task) == NULL);
    CHECK_STATUS(tq_extend_with_progress(q, task, 60000, "{bad"), TQ_ERR_INVALID_JSON);
    CHECK_STATUS(tq_extend_with_progress(q, task, 60000, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_extend_with_progress(q, task, 60000, "{\"done\":3}"), TQ_OK);

    tq_task *seen = NULL;
    CHECK_STATUS(tq_get_task(q, id, &seen), TQ_OK);
    REQUIRE(seen != NULL);
    CHECK_INT(tq_task_state(seen), TQ_STATE_LEASED);
    CHECK(strcmp(tq_task_progress(seen), "{\"done\":3}") == 0);
    CHECK(tq_task_result(seen) == NULL);
    tq_task_free(seen);
    CHECK_STATUS(tq_get_task(q, id + 100, &seen), TQ_EMPTY);
    CHECK(seen == NULL);
    CHECK_STATUS(tq_get_task(q, id, NULL), TQ_ERR_INVALID_ARGUMENT);

    /* Still leased: the wait times out. */
    tq_task *outcome = NULL;
    CHECK_STATUS(tq_wait_task(q, id, 50, NULL, &outcome), TQ_EMPTY);
    CHECK(outcome == NULL);
    CHECK_STATUS(tq_wait_task(q, id + 100, 50, NULL, &outcome), TQ_ERR_INVALID_ARGUMENT);
    /* A triggered cancellation ends the wait at once. */
    tq_cancel *cancel = tq_cancel_new();
    REQUIRE(cancel != NULL);
    tq_cancel_trigger(cancel);
    CHECK_STATUS(tq_wait_task(q, id, 10000, cancel, &outcome), TQ_ERR_INTERRUPTED);
    CHECK(outcome == NULL);
    tq_cancel_free(cancel);

    CHECK_STATUS(tq_finish_with_result(q, task, "not json"), TQ_ERR_INVALID_JSON);
    CHECK_STATUS(tq_finish_with_result(q, task, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(count(q, TQ_STATE_LEASED), 1);
    CHECK_STATUS(tq_finish_with_result(q, task, "{\"width\":640}"), TQ_OK);
    CHECK_STATUS(tq_finish_with_result(q, task, "1"), TQ_ERR_NOT_HELD);
    tq_task_free(task);

    CHECK_STATUS(tq_wait_task(q, id, 10000, NULL, &outcome), TQ_OK);
    REQUIRE(outcome != NULL);
    CHECK_INT(tq_task_state(outcome), TQ_STATE_DONE);
    CHECK(strcmp(tq_task_result(outcome), "{\"width\":640}") == 0);
    CHECK(strcmp(tq_task_progress(outcome), "{\"done\":3}") == 0);
    CHECK_STATUS(tq_finish(q, outcome), TQ_ERR_NOT_HELD);
    tq_task_free(outcome);

    tq_options *options = tq_options_new();
    CHECK_STATUS(tq_options_set_result_retention_ms(options, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_options_set_result_retention_ms(options, 1000), TQ_OK);
    tq_options_free(options);
    tq_close(q);
}

static void test_dependencies(const char *dir)
{
    tq_queue *q = open_queue(dir, "deps.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    int64_t first = push_text(q, "1");
    int64_t second = push_text(q, "2");

    tq_push_options *after = tq_push_options_new();
    REQUIRE(after != NULL);
    CHECK_STATUS(tq_push_options_add_after(NULL, first), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_add_after(after, 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_on_parent_failure(after, 2), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("TQ_PARENT_FAILURE_CANCEL");
    CHECK_STATUS(tq_push_options_add_after(after, first), TQ_OK);
    CHECK_STATUS(tq_push_options_add_after(after, second), TQ_OK);
    int64_t join = 0;
    CHECK_STATUS(tq_push(q, "\"join\"", 6, after, &join), TQ_OK);
    CHECK_INT(count(q, TQ_STATE_PENDING), 3);

    /* Listed, it says what it waits for. */
    tq_task *listed[4] = {NULL};
    size_t n = 0;
    CHECK_STATUS(tq_list(q, TQ_STATE_PENDING, second, 4, listed, &n), TQ_OK);
    REQUIRE(n == 1);
    size_t waiting = 0;
    const int64_t *ids = tq_task_waiting_for(listed[0], &waiting);
    CHECK(waiting == 2 && ids != NULL && ids[0] == first && ids[1] == second);
    CHECK(tq_task_parents(listed[0], &waiting) == NULL && waiting == 0);
    tq_task_free(listed[0]);
    CHECK(tq_task_waiting_for(NULL, &waiting) == NULL && waiting == 0);

    tq_task *a = pull_one(q);
    tq_task *b = pull_one(q);
    REQUIRE(a != NULL && b != NULL);
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_STATUS(tq_finish(q, a), TQ_OK);
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK_STATUS(tq_finish(q, b), TQ_OK);
    tq_task_free(a);
    tq_task_free(b);
    tq_task *task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), join);
    size_t parents = 0;
    ids = tq_task_parents(task, &parents);
    CHECK(parents == 2 && ids != NULL && ids[0] == first && ids[1] == second);
    CHECK(tq_task_waiting_for(task, NULL) == NULL);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);

    /* An unknown task to wait for stores nothing. */
    tq_push_options *unknown = tq_push_options_new();
    REQUIRE(unknown != NULL);
    CHECK_STATUS(tq_push_options_add_after(unknown, join + 1000), TQ_OK);
    CHECK_STATUS(tq_push(q, "1", 1, unknown, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("no task");
    tq_push_options_free(unknown);

    /* A graph in one call: a root, two children, a join run anyway. */
    tq_push_options *child = tq_push_options_new();
    tq_push_options *anyway = tq_push_options_new();
    REQUIRE(child != NULL && anyway != NULL);
    CHECK_STATUS(tq_push_options_add_after_item(child, 0), TQ_OK);
    CHECK_STATUS(tq_push_options_add_after_item(anyway, 1), TQ_OK);
    CHECK_STATUS(tq_push_options_add_after_item(anyway, 2), TQ_OK);
    CHECK_STATUS(tq_push_options_set_on_parent_failure(anyway, TQ_PARENT_FAILURE_RUN_ANYWAY), TQ_OK);
    const char *payloads[] = {"\"root\"", "\"left\"", "\"right\"", "\"join\""};
    size_t lens[] = {6, 6, 7, 6};
    const tq_push_options *options[] = {NULL, child, child, anyway};
    int64_t graph[4] = {0};
    /* An item may not wait for itself or a later one; nothing is stored. */
    const tq_push_options *backwards[] = {child, NULL, NULL, NULL};
    CHECK_STATUS(tq_push_items(q, payloads, lens, backwards, 4, graph), TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("item 0");
    CHECK_STATUS(tq_push(q, "1", 1, child, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_batch(q, payloads, lens, 2, child, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_INT(count(q, TQ_STATE_PENDING), 0);
    CHECK_STATUS(tq_push_items(NULL, payloads, lens, options, 4, graph), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_items(q, payloads, lens, options, 4, graph), TQ_OK);
    CHECK(graph[0] > 0 && graph[1] > graph[0] && graph[3] > graph[2]);
    CHECK_STATUS(tq_push_items(q, payloads, lens, NULL, 1, NULL), TQ_OK);
    tq_push_options_free(child);
    tq_push_options_free(anyway);
    tq_push_options_free(after);

    task = pull_one(q);
    REQUIRE(task != NULL);
    CHECK_INT(tq_task_id(task), graph[0]);
    CHECK_STATUS(tq_finish(q, task), TQ_OK);
    tq_task_free(task);
    /* The left child is cancelled: the join runs anyway once the right is done. */
    int32_t state = -1;
    CHECK_STATUS(tq_cancel_task(q, graph[1], NULL, &state), TQ_OK);
    /* The three left, the join after the right child. */
    int64_t order[3] = {0};
    for (int k = 0; k < 3; k++) {
        task = pull_one(q);
        REQUIRE(task != NULL);
        order[k] = tq_task_id(task);
        CHECK_STATUS(tq_finish(q, task), TQ_OK);
        tq_task_free(task);
    }
    CHECK((order[0] == graph[2] && (order[1] == graph[3] || order[2] == graph[3])) ||
          (order[1] == graph[2] && order[2] == graph[3]));
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    tq_close(q);
}

static void test_groups(const char *dir)
{
    tq_queue *q = open_queue(dir, "groups.db", TQ_DURABILITY_NORMAL, true);
    REQUIRE(q != NULL);
    tq_push_options *group = tq_push_options_new();
    REQUIRE(group != NULL);
    CHECK_STATUS(tq_push_options_set_group(NULL, "a", 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_group(group, "", 1), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_group(group, "a", 0), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_push_options_set_group(group, "a", TQ_MAX_GROUP_AT_ONCE + 1),
                 TQ_ERR_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("at once");
    /* A refused group leaves the options as they were: in no group. */
    int64_t free_task = 0;
    CHECK_STATUS(tq_push(q, "0", 1, group, &free_task), TQ_OK);
    CHECK_STATUS(tq_push_options_set_group(group, "a", 1), TQ_OK);
    const char *payloads[] = {"1", "2", "3"};
    size_t lens[] = {1, 1, 1};
    int64_t ids[3] = {0};
    CHECK_STATUS(tq_push_batch(q, payloads, lens, 3, group, ids), TQ_OK);

    /* The task in no group and the group's head only. */
    tq_task *first = pull_one(q);
    tq_task *head = pull_one(q);
    REQUIRE(first != NULL && head != NULL);
    CHECK_INT(tq_task_id(first), free_task);
    CHECK_INT(tq_task_id(head), ids[0]);
    tq_task *none = NULL;
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    CHECK(tq_task_group(head) == NULL);
    CHECK(tq_task_group(NULL) == NULL);

    tq_task *listed = NULL;
    CHECK_STATUS(tq_get_task(q, ids[1], &listed), TQ_OK);
    REQUIRE(listed != NULL);
    CHECK(tq_task_group(listed) != NULL && strcmp(tq_task_group(listed), "a") == 0);
    size_t waiting = 0;
    const int64_t *waits = tq_task_waiting_for(listed, &waiting);
    CHECK(waiting == 1 && waits != NULL && waits[0] == ids[0]);
    tq_task_free(listed);
    int64_t groups = -1;
    CHECK_STATUS(tq_groups_waiting(q, &groups), TQ_OK);
    CHECK_INT(groups, 1);
    CHECK_STATUS(tq_groups_waiting(q, NULL), TQ_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tq_groups_waiting(NULL, &groups), TQ_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(tq_finish(q, head), TQ_OK);
    tq_task *second = pull_one(q);
    REQUIRE(second != NULL);
    CHECK_INT(tq_task_id(second), ids[1]);
    CHECK_STATUS(tq_pull(q, NULL, &none), TQ_EMPTY);
    /* NULL takes the options out of the group. */
    CHECK_STATUS(tq_push_options_set_group(group, NULL, 0), TQ_OK);
    int64_t other = push_text(q, "4");
    CHECK_STATUS(tq_push(q, "5", 1, group, &other), TQ_OK);
    tq_task *ungrouped = pull_one(q);
    REQUIRE(ungrouped != NULL);
    CHECK(tq_task_id(ungrouped) != ids[2]);
    tq_task_free(first);
    tq_task_free(head);
    tq_task_free(second);
    tq_task_free(ungrouped);
    tq_push_options_free(group);
    tq_close(q);
}

static const struct test_case cases[] = {
    CASE(version),
    CASE(expiry_and_deadline),
    CASE(location_redacted),
    CASE(status_str),
    CASE(last_error_fresh_thread),
    CASE(last_error_after_failure),
    CASE(last_error_per_thread),
    CASE(options_new_free),
    CASE(options_null_object),
    CASE(options_ranges),
    CASE(options_unchanged_after_refusal),
    CASE(open_invalid_arguments),
    CASE(open_missing_directory),
    CASE(open_directory_as_file),
    CASE(open_not_a_database),
    CASE(open_reopen_keeps_tasks),
    CASE(open_two_handles),
    CASE(close_and_free_null),
    CASE(stale_and_foreign_pointers),
    CASE(payload_limit),
    CASE(push_invalid_arguments),
    CASE(push_invalid_utf8),
    CASE(push_invalid_json),
    CASE(push_valid_roundtrip),
    CASE(push_unterminated_prefix),
    CASE(pull_invalid_and_empty),
    CASE(pull_fifo),
    CASE(pull_delay),
    CASE(pull_run_at),
    CASE(pull_lease_expiry),
    CASE(finish_after_lease_expired),
    CASE(finish_after_lease_expired_other_task_pulled),
    CASE(task_accessors_null),
    CASE(task_token),
    CASE(task_read_by_threads),
    CASE(finish_invalid_and_twice),
    CASE(finish_through_other_handle),
    CASE(finish_task_of_other_file),
    CASE(count),
    CASE(history_and_purge),
    CASE(purge_all_right_after_finish),
    CASE(purge_invalid),
    CASE(recover_invalid),
    CASE(recover_crashed_holder),
    CASE(recover_live_holders_untouched),
    CASE(recover_expired_lease),
    CASE(fork_parent_handle_in_child),
    CASE(fork_child_opens_own_handle),
    CASE(fork_child_handle_survives_parent_close),
    CASE(busy),
    CASE(threads_share_one_handle),
    CASE(durability_normal),
    CASE(job_options_invalid),
    CASE(postgres_options_on_a_file),
    CASE(fail_retry_and_dead),
    CASE(priorities),
    CASE(named_queues),
    CASE(batch_push),
    CASE(max_pending),
    CASE(key_max_pending),
    CASE(fair_keys),
    CASE(batch_pull_and_finish),
    CASE(blocking_pull),
    CASE(extend),
    CASE(finish_and_pull),
    CASE(unique_keys),
    CASE(debounce_and_replace),
    CASE(visibility),
    CASE(cancel_pause_snooze),
    CASE(wait_cancellation),
    CASE(wait_change),
    CASE(results_progress_and_waiting),
    CASE(steps),
    CASE(attempts),
    CASE(events_and_sleep),
    CASE(schedules),
    CASE(dependencies),
    CASE(groups),
};

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

/* Runs one case in a fresh temporary directory; returns whether it passed. */
static bool run_case(const struct test_case *c)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tq-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        printf("%s: cannot create a temporary directory under %s: %s\n", c->name,
               tmp && tmp[0] ? tmp : "/tmp", strerror(errno));
        return false;
    }
    case_name = c->name;
    case_failed = 0;
    check_note = NULL;
    c->fn(dir);
    check_note = NULL;
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    fflush(stdout);
    return !case_failed;
}

int main(int argc, char **argv)
{
    const size_t n = sizeof cases / sizeof cases[0];
    if (argc > 2) {
        fprintf(stderr, "usage: %s [CASE]\n", argv[0]);
        return 2;
    }
    /* A child that fails early closes its pipes; the parent's write to
     * it must fail with EPIPE (and a failed check), not kill the suite. */
    signal(SIGPIPE, SIG_IGN);
    int passed = 0, failed = 0;
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        if (argc == 2 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        found = true;
        if (run_case(&cases[i]))
            passed++;
        else
            failed++;
    }
    if (!found) {
        fprintf(stderr, "no case named %s; cases:\n", argv[1]);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "  %s\n", cases[i].name);
        return 2;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
