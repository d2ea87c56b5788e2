//! tq's tables and their migrations.
//!
//! The schema version lives in tq's own `tq_meta` table (not `PRAGMA
//! user_version`, which belongs to the application when tq shares its
//! file). Every tq table is prefixed `tq_`; tq never touches another.

use rusqlite::{Connection, OptionalExtension};

use super::ids;
use crate::error::{Error, ErrorKind, Result};

/// One step of the schema's history.
enum Migration {
    /// Statements run as they are.
    Sql(&'static str),
    /// A change SQL cannot state alone.
    Code(fn(&Connection) -> Result<()>),
}

/// Migrations in order: `MIGRATIONS[n]` brings a file from version `n` to
/// `n + 1`. Never edit a released entry; append a new one.
const MIGRATIONS: &[Migration] = &[
    // 1: tasks, their holders, and the metadata table.
    Migration::Sql("CREATE TABLE tq_meta (
        key   TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID;

    -- One row per process that has claimed a task; leased tasks point here.
    CREATE TABLE tq_holders (
        id            INTEGER PRIMARY KEY,
        boot_id       TEXT NOT NULL,
        pid_namespace TEXT NOT NULL,
        pid           INTEGER NOT NULL,
        start_time    INTEGER NOT NULL,
        UNIQUE (boot_id, pid_namespace, pid, start_time)
    );

    -- Times are milliseconds since the Unix epoch. state: 0 pending,
    -- 1 leased, 2 done. AUTOINCREMENT: an id is never reused, even after
    -- the newest task is deleted.
    CREATE TABLE tq_tasks (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        state            INTEGER NOT NULL,
        payload          TEXT NOT NULL,
        created_at       INTEGER NOT NULL,
        run_at           INTEGER NOT NULL,
        attempts         INTEGER NOT NULL DEFAULT 0,
        lease_token      INTEGER,
        lease_expires_at INTEGER,
        holder_id        INTEGER,
        finished_at      INTEGER
    );

    -- Partial indexes keep each lookup proportional to its own state:
    -- history and held tasks never slow down a claim.
    CREATE INDEX tq_tasks_ready  ON tq_tasks (run_at, id)       WHERE state = 0;
    CREATE INDEX tq_tasks_leased ON tq_tasks (lease_expires_at) WHERE state = 1;
    CREATE INDEX tq_tasks_done   ON tq_tasks (finished_at)      WHERE state = 2;"),
    // 2: named queues, priorities, retries with a dead state, unique keys.
    // state gains 3 (dead) and 4 (waiting: pending, not yet due), so that
    // the ready index holds only due tasks and a claim is one lookup in it.
    Migration::Sql("ALTER TABLE tq_tasks ADD COLUMN queue        TEXT    NOT NULL DEFAULT 'default';
    ALTER TABLE tq_tasks ADD COLUMN priority     INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tq_tasks ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 25;
    -- The reason given by the last failure, or why the last lease ended.
    ALTER TABLE tq_tasks ADD COLUMN last_error   TEXT;
    -- A task's unique key reserves the key in its queue while the task is
    -- pending or leased, and after it is done until unique_until.
    ALTER TABLE tq_tasks ADD COLUMN unique_key   TEXT;
    ALTER TABLE tq_tasks ADD COLUMN unique_for   INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tq_tasks ADD COLUMN unique_until INTEGER;

    UPDATE tq_tasks SET state = 4
        WHERE state = 0 AND run_at > CAST(unixepoch('subsec') * 1000 AS INTEGER);

    DROP INDEX tq_tasks_ready;
    DROP INDEX tq_tasks_leased;
    DROP INDEX tq_tasks_done;
    -- The ready index's order is the claim order.
    CREATE INDEX tq_tasks_ready   ON tq_tasks (queue, priority DESC, run_at, id) WHERE state = 0;
    CREATE INDEX tq_tasks_waiting ON tq_tasks (queue, run_at)           WHERE state = 4;
    CREATE INDEX tq_tasks_leased  ON tq_tasks (queue, lease_expires_at) WHERE state = 1;
    CREATE INDEX tq_tasks_done    ON tq_tasks (queue, finished_at)      WHERE state = 2;
    CREATE INDEX tq_tasks_dead    ON tq_tasks (queue, finished_at)      WHERE state = 3;
    CREATE INDEX tq_tasks_reserved ON tq_tasks (queue, unique_until)
        WHERE state = 2 AND unique_until IS NOT NULL;
    CREATE UNIQUE INDEX tq_tasks_unique ON tq_tasks (queue, unique_key)
        WHERE unique_key IS NOT NULL;"),
    // 3: a holder's id is never given again (AUTOINCREMENT), so a leased
    // task cannot come to point at another process that registers later.
    // SQLite cannot add AUTOINCREMENT to a table: it is made anew, each
    // holder keeping its id, and no id a task still carries is given out.
    Migration::Sql("CREATE TABLE tq_holders_new (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        boot_id       TEXT NOT NULL,
        pid_namespace TEXT NOT NULL,
        pid           INTEGER NOT NULL,
        start_time    INTEGER NOT NULL,
        UNIQUE (boot_id, pid_namespace, pid, start_time)
    );
    INSERT INTO tq_holders_new (id, boot_id, pid_namespace, pid, start_time)
        SELECT id, boot_id, pid_namespace, pid, start_time FROM tq_holders;
    DROP TABLE tq_holders;
    ALTER TABLE tq_holders_new RENAME TO tq_holders;
    DELETE FROM sqlite_sequence WHERE name = 'tq_holders';
    INSERT INTO sqlite_sequence (name, seq) VALUES ('tq_holders', max(
        (SELECT coalesce(max(id), 0) FROM tq_holders),
        (SELECT coalesce(max(holder_id), 0) FROM tq_tasks)));"),
    // Ready and leased tasks in one index: each queue's leased tasks (by
    // lease expiry) sort just before its ready ones (in claim order), so a
    // claim moves an entry from the head of the ready ones to the end of
    // the leased ones, most often within one page, and a finish removes it
    // from there. Two indexes cost every claim one more page written.
    // Ready tasks have no lease expiry; the claim queries rely on it.
    Migration::Sql("UPDATE tq_tasks SET lease_expires_at = NULL WHERE state = 0 AND lease_expires_at IS NOT NULL;
    DROP INDEX tq_tasks_ready;
    DROP INDEX tq_tasks_leased;
    CREATE INDEX tq_tasks_live
        ON tq_tasks (queue, state DESC, lease_expires_at, priority DESC, run_at, id)
        WHERE state = 0 OR state = 1;"),
    // 5: cancelled tasks kept as history (state 5), leased tasks whose
    // cancellation waits for their holder (state 6: out of the index of
    // live tasks, so never claimed), and what an operator sets per queue.
    Migration::Sql("CREATE INDEX tq_tasks_cancelled  ON tq_tasks (queue, finished_at)      WHERE state = 5;
    CREATE INDEX tq_tasks_cancelling ON tq_tasks (queue, lease_expires_at) WHERE state = 6;
    CREATE TABLE tq_queues (
        queue        TEXT PRIMARY KEY,
        -- Claims find nothing before this time; 9223372036854775807 (the
        -- largest integer): until resumed. NULL: not paused.
        paused_until INTEGER,
        -- At most this many tasks of the queue leased at once (expired
        -- leases hold no slot). NULL: no limit.
        max_leased   INTEGER,
        -- At most as many claims in any window of this many ms as the
        -- queue has rows in tq_rate_slots. NULL: no rate limit.
        rate_period  INTEGER
    ) WITHOUT ROWID;
    -- One row per claim a rate-limited queue may make in a window: each
    -- delivery takes a slot last used a window ago or more.
    CREATE TABLE tq_rate_slots (
        queue   TEXT NOT NULL,
        slot    INTEGER NOT NULL,
        used_at INTEGER NOT NULL,
        PRIMARY KEY (queue, slot)
    ) WITHOUT ROWID;
    CREATE INDEX tq_rate_slots_free ON tq_rate_slots (queue, used_at);"),
    // 6: results and progress. A done task kept only for its result (on a
    // handle without history) is deleted once result_until passes.
    Migration::Sql("ALTER TABLE tq_tasks ADD COLUMN result       TEXT;
    ALTER TABLE tq_tasks ADD COLUMN result_until INTEGER;
    ALTER TABLE tq_tasks ADD COLUMN progress     TEXT;
    CREATE INDEX tq_tasks_results ON tq_tasks (queue, result_until)
        WHERE result_until IS NOT NULL;"),
    // 7: periodic schedules. spec: a cron expression, or '@every <ms>ms';
    // catch_up: 0 skip, 1 one run, 2 each slot up to catch_up_limit;
    // next_slot: the first slot not yet enqueued (ms since the Unix epoch).
    Migration::Sql("CREATE TABLE tq_schedules (
        queue          TEXT    NOT NULL,
        name           TEXT    NOT NULL,
        spec           TEXT    NOT NULL,
        time_zone      TEXT    NOT NULL,
        payload        TEXT    NOT NULL,
        priority       INTEGER NOT NULL,
        max_attempts   INTEGER NOT NULL,
        catch_up       INTEGER NOT NULL,
        catch_up_limit INTEGER NOT NULL,
        paused         INTEGER NOT NULL,
        next_slot      INTEGER NOT NULL,
        PRIMARY KEY (queue, name)
    ) WITHOUT ROWID;
    -- The due schedules of a queue: one lookup.
    CREATE INDEX tq_schedules_due ON tq_schedules (queue, next_slot) WHERE paused = 0;"),
    // 8: dependencies. A task pushed to wait for unfinished tasks is
    // blocked (state 7: out of the index of live tasks, so never claimed)
    // until the last of them ends: `waiting_for` counts those left, and
    // `tq_dependencies` holds one row per task still waited for, found by
    // the parent when it ends (and deleted then). `parents` is the JSON
    // array of every task it was pushed to wait for, handed to its worker.
    Migration::Sql("ALTER TABLE tq_tasks ADD COLUMN parents     TEXT;
    ALTER TABLE tq_tasks ADD COLUMN waiting_for INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX tq_tasks_blocked ON tq_tasks (queue, run_at) WHERE state = 7;
    CREATE TABLE tq_dependencies (
        parent     INTEGER NOT NULL,
        task       INTEGER NOT NULL,
        -- 1: the parent ending dead or cancelled counts as finished;
        -- 0: it cancels the task.
        run_anyway INTEGER NOT NULL,
        PRIMARY KEY (parent, task)
    ) WITHOUT ROWID;
    CREATE INDEX tq_dependencies_task ON tq_dependencies (task);"),
    // 9: ordered groups. A task pushed to a group waits (a dependency
    // that runs anyway) for the K-th most recent unfinished task of its
    // group, found from the group's newest task in this index.
    Migration::Sql("ALTER TABLE tq_tasks ADD COLUMN group_key TEXT;
    CREATE INDEX tq_tasks_group ON tq_tasks (queue, group_key, id) WHERE group_key IS NOT NULL;"),
    // 10: when the task was last claimed, set by the statement that leases
    // it, for the time it waited (from run_at) and ran (to finished_at).
    // No index: it is read from rows found through the indexes of leased
    // and ended tasks. NULL: never claimed since version 10.
    Migration::Sql("ALTER TABLE tq_tasks ADD COLUMN claimed_at INTEGER;"),
    // 11: task ids without AUTOINCREMENT, kept from reuse by a floor in
    // tq_meta instead (see ids.rs): a push writes one page less.
    Migration::Code(ids::drop_autoincrement),
    // 12: expiries and deadlines (ms since the Unix epoch; NULL: none).
    // not_after is the one a claim checks: the time from which the task's
    // next delivery may not start (the earlier of the two until its first
    // delivery, then the deadline). Pending tasks with one are indexed by
    // it, so a claim finds the passed ones in one lookup, which costs
    // nothing more when no task of the queue has a limit.
    Migration::Sql("ALTER TABLE tq_tasks ADD COLUMN expires_at INTEGER;
    ALTER TABLE tq_tasks ADD COLUMN deadline   INTEGER;
    ALTER TABLE tq_tasks ADD COLUMN not_after  INTEGER;
    CREATE INDEX tq_tasks_not_after ON tq_tasks (queue, not_after)
        WHERE not_after IS NOT NULL AND (state = 0 OR state = 4);"),
    // 13: a cap on each queue's pending tasks (ready, waiting, blocked),
    // checked by every push in its transaction. NULL: no cap. Named for
    // the queue, so that a cap per fairness key can sit beside it.
    Migration::Sql("ALTER TABLE tq_queues ADD COLUMN max_pending INTEGER;"),
    // 14: fair shares by key (see fair.rs). A queue is fair once it has a
    // row in tq_fair_queues. Every task of a fair queue not yet ended
    // carries a fairness key (the empty key for those pushed without one),
    // and is indexed by it, so a claim finds a key's best ready task, and
    // whether it has pending ones, in one lookup. A key is active while it
    // has pending tasks; the active keys are indexed by pass, the order
    // in which they take their turns.
    Migration::Sql("ALTER TABLE tq_tasks ADD COLUMN fair_key TEXT;
    CREATE INDEX tq_tasks_fair ON tq_tasks (queue, fair_key, state, priority DESC, run_at, id)
        WHERE fair_key IS NOT NULL;
    CREATE TABLE tq_fair_queues (queue TEXT PRIMARY KEY) WITHOUT ROWID;
    CREATE TABLE tq_fair_keys (
        queue    TEXT    NOT NULL,
        fair_key TEXT    NOT NULL,
        weight   REAL    NOT NULL,
        pass     REAL    NOT NULL,
        active   INTEGER NOT NULL,
        PRIMARY KEY (queue, fair_key)
    ) WITHOUT ROWID;
    CREATE INDEX tq_fair_keys_line ON tq_fair_keys (queue, pass, fair_key) WHERE active = 1;"),
    // 15: step checkpoints, each recorded once per task; seq (the rowid,
    // one more than the largest) is the order of recording within a task.
    // The trigger removes a task's steps with it, whichever statement
    // deletes the task (a finish without history, a purge, a cancel, a
    // recovery, the outbox's tq_finish): one lookup in the index of steps.
    Migration::Sql("CREATE TABLE tq_steps (
        seq         INTEGER PRIMARY KEY,
        task        INTEGER NOT NULL,
        name        TEXT NOT NULL,
        output      TEXT NOT NULL,
        recorded_at INTEGER NOT NULL,
        UNIQUE (task, name)
    );
    CREATE TRIGGER tq_tasks_forget_steps AFTER DELETE ON tq_tasks
    BEGIN
        DELETE FROM tq_steps WHERE task = OLD.id;
    END;"),
    // 16: caps on each fairness key's pending tasks (see fair.rs): a
    // default for every key of the queue, and a cap of a key's own that
    // replaces it. NULL: none. Counted in the index of keys.
    Migration::Sql("ALTER TABLE tq_queues ADD COLUMN max_pending_per_key INTEGER;
    ALTER TABLE tq_fair_keys ADD COLUMN max_pending INTEGER;"),
    // 17: attempts (see attempts.rs), the deliveries that ended without
    // finishing, in the order they ended (seq). The first trigger records
    // one in the statement that takes a held delivery's lease away with a
    // reason: a failure, a recovery, an expired lease claimed again, a
    // cancellation ending it; never a finish (which sets no reason, so the
    // trigger is not even looked at) nor a snooze. Its outcome is read
    // from the new state and from the reasons tq itself writes when it
    // takes a lease back (recover.rs, claim.rs, fair.rs; an expired lease
    // past its deadline ends with DEADLINE_PASSED's). It keeps the
    // task's newest 20 (ATTEMPTS_KEPT). The holder's pid is copied, since
    // a dead holder's row is forgotten. The second removes a task's
    // attempts with it, as tq_tasks_forget_steps does its steps.
    Migration::Sql("CREATE TABLE tq_attempts (
        seq        INTEGER PRIMARY KEY,
        task       INTEGER NOT NULL,
        attempt    INTEGER NOT NULL,
        outcome    INTEGER NOT NULL,
        reason     TEXT,
        holder_id  INTEGER,
        holder_pid INTEGER,
        started_at INTEGER,
        ended_at   INTEGER NOT NULL
    );
    CREATE INDEX tq_attempts_task ON tq_attempts (task, seq);
    CREATE TRIGGER tq_tasks_record_attempt AFTER UPDATE OF last_error ON tq_tasks
    WHEN OLD.state IN (1, 6) AND OLD.lease_token IS NOT NULL
         AND NEW.lease_token IS NOT OLD.lease_token AND NEW.state <> 2
    BEGIN
        INSERT INTO tq_attempts
            (task, attempt, outcome, reason, holder_id, holder_pid, started_at, ended_at)
        SELECT OLD.id, OLD.attempts,
               CASE WHEN NEW.state = 5 THEN 3
                    WHEN NEW.last_error LIKE 'the process holding delivery % died%' THEN 2
                    WHEN OLD.lease_expires_at <= now.ms
                         AND (NEW.last_error LIKE 'the lease of % expired%'
                              OR NEW.last_error = 'deadline passed') THEN 1
                    ELSE 0 END,
               NEW.last_error, OLD.holder_id,
               (SELECT pid FROM tq_holders WHERE id = OLD.holder_id),
               OLD.claimed_at, max(now.ms, coalesce(OLD.claimed_at, now.ms))
        FROM (SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS ms) AS now;
        DELETE FROM tq_attempts WHERE task = OLD.id AND seq <= (
            SELECT seq FROM tq_attempts WHERE task = OLD.id
            ORDER BY seq DESC LIMIT 1 OFFSET 20);
    END;
    CREATE TRIGGER tq_tasks_forget_attempts AFTER DELETE ON tq_tasks
    BEGIN
        DELETE FROM tq_attempts WHERE task = OLD.id;
    END;"),
    // 18: events and durable sleep (see events.rs). An event waits under
    // its key in tq_events until a wait takes it (deleting it: the task's
    // step records its payload) or its retention passes. A task waiting for
    // a key has a row in tq_event_waits until its wait ends; the trigger
    // removes it with its task.
    Migration::Sql("CREATE TABLE tq_events (
        seq        INTEGER PRIMARY KEY,
        queue      TEXT    NOT NULL,
        key        TEXT    NOT NULL,
        payload    TEXT    NOT NULL,
        sent_at    INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE INDEX tq_events_by_key ON tq_events (queue, key, seq);
    CREATE INDEX tq_events_by_expiry ON tq_events (queue, expires_at);
    CREATE TABLE tq_event_waits (
        task       INTEGER PRIMARY KEY,
        queue      TEXT    NOT NULL,
        key        TEXT    NOT NULL,
        started_at INTEGER NOT NULL,
        wait_until INTEGER NOT NULL
    );
    CREATE INDEX tq_event_waits_by_key ON tq_event_waits (queue, key, started_at, task);
    CREATE TRIGGER tq_tasks_forget_event_waits AFTER DELETE ON tq_tasks
    BEGIN
        DELETE FROM tq_event_waits WHERE task = OLD.id;
    END;"),
];

/// The schema version this library writes.
pub(crate) const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// The file's tq schema version: 0 when tq has never used it. Only reads,
/// so a file that is refused is left as it was.
pub(crate) fn version(conn: &Connection) -> Result<i64> {
    let has_meta: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tq_meta'",
        [],
        |row| row.get(0),
    )?;
    if !has_meta {
        return Ok(0);
    }
    let version: Option<i64> = conn
        .query_row(
            "SELECT value FROM tq_meta WHERE key = 'schema_version'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    match version {
        Some(version) if version >= 1 => Ok(version),
        Some(version) => Err(Error::new(
            ErrorKind::NotADatabase,
            format!("the file has tq schema version {version}, which no tq ever wrote: not a tq database"),
        )),
        None => Err(Error::new(
            ErrorKind::NotADatabase,
            "the file has a tq_meta table without a schema version: not a tq database",
        )),
    }
}

/// Refuses a file whose schema is newer than this library's.
pub(crate) fn check_supported(version: i64) -> Result<()> {
    if version > CURRENT_VERSION {
        return Err(Error::new(
            ErrorKind::NotADatabase,
            format!(
                "the file has tq schema version {version}, newer than this library's \
                 {CURRENT_VERSION}: upgrade tq to open it"
            ),
        ));
    }
    Ok(())
}

/// Brings the schema up to date. Must run inside a write transaction, so
/// that processes opening the file at once apply each migration once.
pub(crate) fn migrate(conn: &Connection) -> Result<()> {
    let from = version(conn)?;
    check_supported(from)?;
    apply(conn, &MIGRATIONS[from as usize..])?;
    if from < CURRENT_VERSION {
        conn.execute(
            "INSERT INTO tq_meta (key, value) VALUES ('schema_version', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [CURRENT_VERSION],
        )?;
    }
    Ok(())
}

/// Runs `migrations` in order.
fn apply(conn: &Connection, migrations: &[Migration]) -> Result<()> {
    for migration in migrations {
        match migration {
            Migration::Sql(sql) => conn.execute_batch(sql)?,
            Migration::Code(run) => run(conn)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rusqlite::config::DbConfig;

    use super::*;

    fn register(conn: &Connection, pid: i64) -> i64 {
        conn.query_row(
            "INSERT INTO tq_holders (boot_id, pid_namespace, pid, start_time)
             VALUES ('boot', 'ns', ?1, 0) RETURNING id",
            [pid],
            |row| row.get(0),
        )
        .unwrap()
    }

    /// Makes `conn` a file tq left at `version`.
    fn at_version(conn: &Connection, version: usize) {
        apply(conn, &MIGRATIONS[..version]).unwrap();
        conn.execute(
            "INSERT INTO tq_meta VALUES ('schema_version', ?1)",
            [version as i64],
        )
        .unwrap();
    }

    #[test]
    fn a_holder_id_is_never_given_twice_in_a_new_or_migrated_file() {
        let new = Connection::open_in_memory().unwrap();
        migrate(&new).unwrap();
        // A file made at version 2, with holders, then migrated.
        let old = Connection::open_in_memory().unwrap();
        at_version(&old, 2);
        let kept = register(&old, 1);
        let newest = register(&old, 2);
        // A lease under an id whose row is gone: that id is not given either.
        old.execute(
            "INSERT INTO tq_tasks (state, payload, created_at, run_at, holder_id)
             VALUES (1, '1', 0, 0, ?1)",
            [newest + 5],
        )
        .unwrap();
        migrate(&old).unwrap();
        let kept_pid: i64 = old
            .query_row("SELECT pid FROM tq_holders WHERE id = ?1", [kept], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(kept_pid, 1, "the migration keeps each holder's id");
        old.execute("DELETE FROM tq_holders WHERE id = ?1", [newest])
            .unwrap();
        assert!(register(&old, 3) > newest + 5);

        let gone = register(&new, 1);
        new.execute("DELETE FROM tq_holders WHERE id = ?1", [gone])
            .unwrap();
        assert!(
            register(&new, 2) > gone,
            "the id of a holder gone is not reused"
        );
    }

    #[test]
    fn version_11_keeps_every_id_given_from_reuse_without_autoincrement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v10.db");
        let old = Connection::open(&path).unwrap();
        old.pragma_update(None, "journal_mode", "WAL").unwrap();
        at_version(&old, 10);
        old.execute_batch(
            "INSERT INTO tq_tasks (state, payload, created_at, run_at) VALUES (0, '1', 0, 0);
             INSERT INTO tq_tasks (state, payload, created_at, run_at) VALUES (0, '2', 0, 0);
             INSERT INTO tq_tasks (state, payload, created_at, run_at) VALUES (0, '3', 0, 0);
             DELETE FROM tq_tasks WHERE id = 3;",
        )
        .unwrap();
        // A second connection, open on the file across the migration.
        let other = Connection::open(&path).unwrap();
        other
            .query_row("SELECT count(*) FROM tq_tasks", [], |row| {
                row.get::<_, i64>(0)
            })
            .unwrap();

        // As some builds of SQLite set it on every connection.
        old.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
            .unwrap();
        old.execute_batch("BEGIN IMMEDIATE").unwrap();
        migrate(&old).unwrap();
        old.execute_batch("COMMIT").unwrap();
        assert!(
            old.db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE).unwrap(),
            "the migration leaves the connection as it found it"
        );

        let definition: String = old
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'tq_tasks'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert!(
            definition.contains("id               INTEGER PRIMARY KEY,"),
            "{definition}"
        );
        assert!(!definition.contains("AUTOINCREMENT"), "{definition}");
        let check: String = old
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        for conn in [&old, &other] {
            assert_eq!(ids::last_given(conn).unwrap(), 3, "the id deleted before");
        }
        // The other connection reads the new definition: its insert leaves
        // sqlite_sequence alone.
        other
            .execute(
                concat!(
                    "INSERT INTO tq_tasks (id, state, payload, created_at, run_at) VALUES (",
                    ids::next_task_id!(),
                    ", 0, '4', 0, 0)"
                ),
                [],
            )
            .unwrap();
        assert_eq!(other.last_insert_rowid(), 4);
        // So does the connection that ran the migration.
        old.execute(
            concat!(
                "INSERT INTO tq_tasks (id, state, payload, created_at, run_at) VALUES (",
                ids::next_task_id!(),
                ", 0, '5', 0, 0)"
            ),
            [],
        )
        .unwrap();
        assert_eq!(old.last_insert_rowid(), 5);
        let sequences: i64 = old
            .query_row(
                "SELECT count(*) FROM sqlite_sequence WHERE name = 'tq_tasks'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(sequences, 0);
    }
}
