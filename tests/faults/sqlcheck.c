/*
 * Checks a queue file with the system SQLite (libsqlite3), never with
 * libtq: this program is a separate process from anything that has the
 * file open through libtq, so neither copy of SQLite can drop the other's
 * POSIX locks.
 *
 *   sqlcheck DB             PRAGMA integrity_check must say "ok"
 *   sqlcheck DB --holders   also: every tq_holders row names a real
 *                           process identity (this boot's id, a pid
 *                           namespace, a start time), as recovery relies
 *                           on it to tell live holders from dead ones; or
 *                           is visibly incomplete (an empty boot id or pid
 *                           namespace, a start time of 0), which recovery
 *                           never judges dead (scenario "2 holder
 *                           identity" checks that behaviour)
 *
 * Prints what it finds; exit status 0 when everything is as it should be,
 * 1 when not, 2 when the file cannot be checked at all.
 */
#define _POSIX_C_SOURCE 200809L

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool integrity_ok(sqlite3 *db)
{
    sqlite3_stmt *stmt;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, NULL) != SQLITE_OK) {
        printf("integrity_check: cannot run: %s\n", sqlite3_errmsg(db));
        return false;
    }
    bool ok = true;
    int rc, rows = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(stmt, 0);
        printf("integrity_check: %s\n", line ? line : "(null)");
        if (!line || strcmp(line, "ok") != 0)
            ok = false;
        rows++;
    }
    if (rc != SQLITE_DONE) {
        printf("integrity_check: failed: %s\n", sqlite3_errmsg(db));
        ok = false;
    }
    sqlite3_finalize(stmt);
    return ok && rows == 1;
}

static void read_boot_id(char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *in = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!in)
        return;
    if (fgets(buf, (int)size, in))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(in);
}

static bool holders_ok(sqlite3 *db)
{
    char boot_id[64];
    read_boot_id(boot_id, sizeof boot_id);
    sqlite3_stmt *stmt;
    if (sqlite3_prepare_v2(db, "SELECT id, boot_id, pid_namespace, pid, start_time FROM tq_holders", -1, &stmt,
                           NULL) != SQLITE_OK) {
        /* A file whose creation failed has no tq tables: nothing to check. */
        printf("holders: no table (%s)\n", sqlite3_errmsg(db));
        return true;
    }
    bool ok = true;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        const char *boot = (const char *)sqlite3_column_text(stmt, 1);
        const char *ns = (const char *)sqlite3_column_text(stmt, 2);
        long long start = sqlite3_column_int64(stmt, 4);
        bool incomplete = !boot || !boot[0] || !ns || !ns[0] || start == 0;
        bool good = incomplete || strcmp(boot, boot_id) == 0;
        if (!good) {
            printf("holders: BAD row id=%lld boot_id='%s' pid_namespace='%s' pid=%lld start_time=%lld\n",
                   sqlite3_column_int64(stmt, 0), boot ? boot : "", ns ? ns : "", sqlite3_column_int64(stmt, 3),
                   start);
            ok = false;
        }
    }
    sqlite3_finalize(stmt);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--holders") != 0)) {
        fprintf(stderr, "usage: sqlcheck DB [--holders]\n");
        return 2;
    }
    sqlite3 *db;
    /* Read-write without create: a leftover WAL may need recovering, and a
     * missing file is an error, not a new empty database. */
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        printf("open: %s\n", sqlite3_errmsg(db));
        sqlite3_close(db);
        return 2;
    }
    bool ok = integrity_ok(db);
    if (argc == 3 && !holders_ok(db))
        ok = false;
    sqlite3_close(db);
    return ok ? 0 : 1;
}
