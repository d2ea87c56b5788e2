/*
 * Scenario 3b: a program linked with both the system SQLite (libsqlite3)
 * and libtq, using each on its own file, interleaved.
 *
 *   both_sqlites DIR
 *
 * The system SQLite must stay the one the program sees (its version, 3.40
 * on Debian 12, matching the header it was compiled with), and libtq must
 * keep using its bundled copy: tq_open refuses an SQLite older than
 * 3.51.3, so a libtq whose SQLite calls bound to the system library would
 * fail to open at all. dladdr() names the library each symbol comes from.
 *
 * Exit status 0 when everything checks out, 1 otherwise.
 */
#define _GNU_SOURCE /* dladdr */

#include <dlfcn.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <tq.h>

#include "common.h"

#define ROUNDS 5

static int failures;

static void check(bool ok, const char *what)
{
    if (!ok) {
        printf("FAIL: %s\n", what);
        failures++;
    }
}

/* The library that provides `name` to the program (the dynamic linker's
 * global lookup, as the program's own calls resolve). */
static const char *library_of(const char *name)
{
    Dl_info info;
    void *symbol = dlsym(RTLD_DEFAULT, name);
    return symbol && dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : "(not found)";
}

/* Whether libtq itself (or what it loads) provides `name`. */
static bool libtq_provides(const char *name)
{
    void *handle = dlopen(library_of("tq_version"), RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
        return false;
    bool found = dlsym(handle, name) != NULL;
    dlclose(handle);
    return found;
}

static void sql(sqlite3 *db, const char *statement)
{
    char *error = NULL;
    if (sqlite3_exec(db, statement, NULL, NULL, &error) != SQLITE_OK) {
        printf("FAIL: system SQLite: %s: %s\n", statement, error ? error : "?");
        failures++;
    }
    sqlite3_free(error);
}

static long long sum_of_x(sqlite3 *db)
{
    sqlite3_stmt *stmt;
    long long sum = -1;
    if (sqlite3_prepare_v2(db, "SELECT total(x) FROM t", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        sum = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return sum;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: both_sqlites DIR\n");
        return 2;
    }
    char plain_path[4096], queue_path[4096];
    snprintf(plain_path, sizeof plain_path, "%s/plain.db", argv[1]);
    snprintf(queue_path, sizeof queue_path, "%s/queue.db", argv[1]);
    /* Fresh files: leftovers of an earlier run would change the counts. */
    const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; i++) {
        char path[4096 + 16];
        snprintf(path, sizeof path, "%s%s", plain_path, suffixes[i]);
        remove(path);
        snprintf(path, sizeof path, "%s%s", queue_path, suffixes[i]);
        remove(path);
    }

    printf("system SQLite: sqlite3_libversion() = %s (header %s), from %s\n", sqlite3_libversion(), SQLITE_VERSION,
           library_of("sqlite3_libversion"));
    printf("libtq %s, from %s\n", tq_version(), library_of("tq_version"));
    check(strcmp(sqlite3_libversion(), SQLITE_VERSION) == 0, "sqlite3_libversion() matches the header");
    check(strncmp(sqlite3_libversion(), "3.40.", 5) == 0, "the system SQLite is 3.40.x");
    check(strstr(library_of("sqlite3_libversion"), "libsqlite3") != NULL,
          "sqlite3_libversion comes from libsqlite3");
    check(strstr(library_of("tq_version"), "libtq") != NULL, "tq_version comes from libtq");
    check(libtq_provides("tq_open"), "a lookup in libtq finds tq_open (control)");
    check(!libtq_provides("sqlite3_libversion") && !libtq_provides("sqlite3_open_v2"),
          "libtq exports no sqlite3_* symbol");

    sqlite3 *db = NULL;
    check(sqlite3_open(plain_path, &db) == SQLITE_OK, "system SQLite opens its file");
    sql(db, "CREATE TABLE t (x INTEGER)");

    tq_queue *queue = NULL;
    tq_status status = tq_open(queue_path, NULL, &queue);
    if (status != TQ_OK) {
        /* The likely cause: libtq's SQLite calls went to the system 3.40. */
        printf("FAIL: tq_open: %s: %s\n", status_name(status), tq_last_error());
        return 1;
    }

    /* Interleaved: one statement on each side per step. */
    char payload[64], insert[64];
    for (int i = 1; i <= ROUNDS; i++) {
        snprintf(insert, sizeof insert, "INSERT INTO t VALUES (%d)", i);
        sql(db, insert);
        size_t len = make_payload(payload, sizeof payload, i, 20);
        check(tq_push(queue, payload, len, NULL, NULL) == TQ_OK, "tq_push");
    }
    int finished = 0;
    for (int i = 1; i <= ROUNDS; i++) {
        check(sum_of_x(db) == ROUNDS * (ROUNDS + 1) / 2, "the system SQLite reads back what it wrote");
        tq_task *task = NULL;
        if (tq_pull(queue, NULL, &task) == TQ_OK) {
            size_t len = make_payload(payload, sizeof payload, i, 20);
            size_t got_len = 0;
            const char *got = tq_task_payload(task, &got_len);
            check(got_len == len && memcmp(got, payload, len) == 0, "tq_pull returns the payloads in order");
            finished += tq_finish(queue, task) == TQ_OK;
        }
        tq_task_free(task);
        sql(db, "UPDATE t SET x = x WHERE x = 1");
    }
    check(finished == ROUNDS, "every task pulled and finished");
    int64_t left = -1;
    check(tq_count(queue, TQ_STATE_PENDING, &left) == TQ_OK && left == 0, "no task left");
    tq_close(queue);
    check(sqlite3_close(db) == SQLITE_OK, "system SQLite closes");
    check(strcmp(sqlite3_libversion(), SQLITE_VERSION) == 0, "sqlite3_libversion() unchanged after libtq ran");

    printf("system SQLite wrote and read %d rows; libtq pushed, pulled and finished %d tasks, interleaved\n", ROUNDS,
           finished);
    printf("%s\n", failures ? "both_sqlites: FAILED" : "both_sqlites: ok");
    return failures ? 1 : 0;
}
