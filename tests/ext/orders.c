/*
 tq's SQLite extension from C: an application on its own SQLite (an
 amalgamation of 3.51.3 or later, compiled in) loads libtq_sqlite.so with
 sqlite3_load_extension, commits an order and its task in one transaction
 and rolls back another pair; a worker in another process (this program
 again, exec'd with the argument "worker", pulling through libtq) gets
 exactly the committed task, waiting for it across the commit, and
 finishes it with tq_finish(id, token) in the same commit as a receipt row.

   orders DB EXTENSION
*/
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sqlite3.h"
#include "tq.h"

static void fail(const char *what, const char *why) {
    fprintf(stderr, "orders: %s: %s\n", what, why);
    exit(1);
}

/* The application's connection to `path`, with tq's extension loaded:
   loading is enabled for the call only. */
static sqlite3 *open_with_extension(const char *path, const char *extension) {
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) fail("sqlite3_open", sqlite3_errmsg(db));
    sqlite3_busy_timeout(db, 10000);
    char *error = NULL;
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, NULL);
    if (sqlite3_load_extension(db, extension, NULL, &error) != SQLITE_OK) fail("sqlite3_load_extension", error);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL);
    return db;
}

static void exec(sqlite3 *db, const char *sql) {
    char *error = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &error) != SQLITE_OK) fail(sql, error);
}

/* The single integer `sql` answers, after binding `a` and `b` to ?1 and ?2;
   on an error, its message is stored in `error` (when not NULL) and -1 is
   returned. */
static int64_t query_int(sqlite3 *db, const char *sql, int64_t a, int64_t b, char *error, size_t error_len) {
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) fail(sql, sqlite3_errmsg(db));
    if (sqlite3_bind_parameter_count(statement) >= 1) sqlite3_bind_int64(statement, 1, a);
    if (sqlite3_bind_parameter_count(statement) >= 2) sqlite3_bind_int64(statement, 2, b);
    int64_t value = -1;
    if (sqlite3_step(statement) == SQLITE_ROW) {
        value = sqlite3_column_int64(statement, 0);
    } else if (error != NULL) {
        snprintf(error, error_len, "%s", sqlite3_errmsg(db));
    } else {
        fail(sql, sqlite3_errmsg(db));
    }
    sqlite3_finalize(statement);
    return value;
}

/* An order and its receipt email in one transaction, committed or not. */
static void place_order(sqlite3 *db, int64_t order, int commit) {
    exec(db, "BEGIN IMMEDIATE");
    query_int(db, "INSERT INTO orders (id, total) VALUES (?1, 100) RETURNING id", order, 0, NULL, 0);
    query_int(db, "SELECT tq_push('emails', json_object('order', ?1))", order, 0, NULL, 0);
    exec(db, commit ? "COMMIT" : "ROLLBACK");
}

/* The worker: waits for a task of the queue "emails" through libtq,
   prints its payload, finishes it in SQL in one commit with a receipt
   row, and checks that no other task is ready. */
static int worker(const char *path, const char *extension) {
    struct tq_options *options = tq_options_new();
    struct tq_queue *queue = NULL;
    if (options == NULL || tq_options_set_queue(options, "emails") != TQ_OK ||
        tq_open(path, options, &queue) != TQ_OK)
        fail("tq_open", tq_last_error());
    tq_options_free(options);
    struct tq_pull_options *wait = tq_pull_options_new();
    if (wait == NULL || tq_pull_options_set_wait_ms(wait, 120000) != TQ_OK) fail("pull options", tq_last_error());
    printf("ready\n");
    fflush(stdout);

    struct tq_task *task = NULL;
    if (tq_pull(queue, wait, &task) != TQ_OK) fail("tq_pull", "no task came");
    printf("%s\n", tq_task_payload(task, NULL));
    fflush(stdout);

    sqlite3 *db = open_with_extension(path, extension);
    exec(db, "BEGIN IMMEDIATE");
    query_int(db, "INSERT INTO receipts (task) VALUES (?1) RETURNING task", tq_task_id(task), 0, NULL, 0);
    if (query_int(db, "SELECT tq_finish(?1, ?2)", tq_task_id(task), tq_task_token(task), NULL, 0) != tq_task_id(task))
        fail("tq_finish", "returned another id");
    exec(db, "COMMIT");
    sqlite3_close(db);
    tq_task_free(task);

    struct tq_task *another = NULL;
    enum tq_status status = tq_pull(queue, NULL, &another);
    if (status != TQ_EMPTY) fail("tq_pull", "a task that was rolled back was delivered");
    tq_pull_options_free(wait);
    tq_close(queue);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "worker") == 0) return worker(argv[2], argv[3]);
    if (argc != 3) {
        fprintf(stderr, "usage: %s DB EXTENSION\n", argv[0]);
        return 2;
    }
    const char *path = argv[1], *extension = argv[2];
    if (sqlite3_libversion_number() < 3051003) fail("SQLite", "the amalgamation is older than 3.51.3");
    sqlite3 *db = open_with_extension(path, extension);
    exec(db, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL);"
             "CREATE TABLE receipts (task INTEGER PRIMARY KEY)");
    place_order(db, 2, 0);

    int from_worker[2];
    if (pipe(from_worker) != 0) fail("pipe", strerror(errno));
    pid_t child = fork();
    if (child < 0) fail("fork", strerror(errno));
    if (child == 0) {
        dup2(from_worker[1], STDOUT_FILENO);
        close(from_worker[0]);
        close(from_worker[1]);
        execl("/proc/self/exe", argv[0], "worker", path, extension, (char *)NULL);
        _exit(127);
    }
    close(from_worker[1]);
    FILE *lines = fdopen(from_worker[0], "r");
    char line[256];
    if (fgets(line, sizeof line, lines) == NULL || strcmp(line, "ready\n") != 0) fail("worker", "did not start");
    /* The worker is waiting: this commit wakes it. */
    place_order(db, 1, 1);
    if (fgets(line, sizeof line, lines) == NULL || strcmp(line, "{\"order\":1}\n") != 0)
        fail("worker", "did not get the committed task");
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("worker", "failed");
    fclose(lines);

    if (query_int(db, "SELECT count(*) FROM orders WHERE id = 1", 0, 0, NULL, 0) != 1 ||
        query_int(db, "SELECT count(*) FROM orders", 0, 0, NULL, 0) != 1)
        fail("orders", "not exactly the committed order");
    if (query_int(db, "SELECT count(*) FROM receipts", 0, 0, NULL, 0) != 1) fail("receipts", "not one row");
    /* A bad payload is refused with tq's message. */
    char error[512] = "";
    query_int(db, "SELECT tq_push('emails', '{not json')", 0, 0, error, sizeof error);
    if (strncmp(error, "tq_push: ", 9) != 0) fail("a bad payload", error[0] ? error : "was accepted");
    sqlite3_close(db);
    printf("ok: the committed order's task went to a worker in another process, the rolled back one to nobody; "
           "it was finished with its receipt in one commit\n");
    return 0;
}
