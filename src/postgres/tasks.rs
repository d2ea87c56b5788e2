//! Every statement on tasks in PostgreSQL: push, claim, finish, fail,
//! extend, recover, and the calls that look at or tidy a queue. This is
//! where a task is claimed ([`CLAIM`]).
//!
//! Design: `docs/internals.md`, "PostgreSQL task statements".

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use postgres::Row;

use super::pool::{Params, Tx};
use super::{no_wal_file, PostgresStore};
use crate::error::{Error, Result};
use crate::options::RetryBackoff;
use crate::schedule::{Schedule, ScheduleInfo};
use crate::store::{
    cancellations_channel, delivery_stop, group_predecessor_sql, holds_unique_key,
    lease_slot_taken, not_held, of_item, parent_ids, pause_until, sort_claimed, state_condition,
    stored_pause, stored_reason, visible_state, waits_for, Checkpoint, IfNotHeld, ListFrom,
    NewTask, PutSchedule, Store, CANCELLED, CANCELLING, DEAD, DONE, LEASED, NEVER_USED,
};
use crate::task::{
    Cancelled, Failed, Pause, Pushed, RateLimit, Receipt, Stop, Task, TaskInfo, TaskState,
    TaskTiming,
};
use crate::wait::Bell;

/// How often a holder watching for its task's cancellation looks again
/// when nothing rang: notifications are not lost while the listener is
/// connected, and its reconnection wakes every watcher, so this only bounds
/// what a loss nobody foresaw would cost.
const CANCELLATIONS_SAFETY_NET: Duration = Duration::from_secs(1);

/// How long a pull that found its queue at its concurrency limit posts
/// that it waits for a slot ([`WANT_SLOT`]), in ms.
const SLOT_WANTED_FOR: i64 = 10_000;

/// How long before a posted want of a slot lapses a pull waiting at the
/// concurrency limit looks again, even when no finish notified it, and so
/// posts its want again (see [`NEXT_CLAIMABLE`]), in ms. A notification
/// lost after its finish committed costs a waiter at most the rest.
const SLOT_WANT_RENEWED_BEFORE_END: i64 = SLOT_WANTED_FOR / 2;

/// The live leases of queue `$1`, which hold a slot of its concurrency
/// limit (expired ones hold none): two ranges of partial indexes.
/// One finish-and-claim ([`Store::finish_and_claim`]), as its handle's
/// threads' calls made at once are run together.
pub(super) struct FinishAndClaim {
    receipts: Vec<Receipt>,
    if_not_held: IfNotHeld,
    lease: i64,
    max: usize,
}

macro_rules! live_leases {
    () => {
        "((SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 1 AND lease_expires_at > NOW_MS)
          + (SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 6 AND lease_expires_at > NOW_MS))"
    };
}

/// Stores tasks without unique keys, in order, and notifies the schema's
/// channel (`$7`, payload the queue `$1`) once: an uncorrelated subquery
/// is run once per statement, not once per row. `$3` is each task's delay from
/// now, or NULL when `$4` gives its time.
const PUSH: &str = "WITH clock AS (SELECT NOW_MS AS now),
    ins AS (
        INSERT INTO @.tasks (queue, state, payload, created_at, run_at, priority, max_attempts)
        SELECT $1, CASE WHEN x.run_at <= clock.now THEN 0 ELSE 4 END, u.payload, clock.now,
               x.run_at, u.priority, u.max_attempts
        FROM unnest($2::text[], $3::int8[], $4::int8[], $5::int4[], $6::int8[])
                 WITH ORDINALITY AS u(payload, delay, at, priority, max_attempts, ord)
             CROSS JOIN clock
             CROSS JOIN LATERAL (SELECT coalesce(clock.now + u.delay, u.at) AS run_at) x
        ORDER BY u.ord
        RETURNING id)
    SELECT id, (SELECT pg_notify($7, $1)::text) FROM ins";

/// The task of queue `$1` holding unique key `$2`, if any.
const UNIQUE_HOLDER: &str = "SELECT id, state, unique_until, NOW_MS FROM @.tasks
    WHERE queue = $1 AND unique_key = $2 FOR UPDATE";

/// Stores one task, with a unique key `$7` unless NULL, and unless a task
/// pushed meanwhile by another transaction took the key. It was pushed to
/// wait for tasks `$9` (NULL: none), waiting for `$10` unfinished ones, in
/// ordered group `$11` (NULL: none).
const PUSH_ONE: &str = "WITH clock AS (SELECT NOW_MS AS now),
    v AS (SELECT coalesce(clock.now + $3::int8, $4::int8) AS run_at, clock.now FROM clock)
    INSERT INTO @.tasks
        (queue, state, payload, created_at, run_at, priority, max_attempts, unique_key, unique_for,
         parents, waiting_for, group_key)
    SELECT $1, CASE WHEN $10::int8 > 0 THEN 7 WHEN v.run_at <= v.now THEN 0 ELSE 4 END, $2, v.now,
           v.run_at, $5, $6, $7, $8, $9, $10, $11
    FROM v
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id";

/// Marks the tasks `$1` of queue `$2` as waited for (so that their end
/// reaches the task waiting, see `schema.rs`) and answers the state of
/// each: the newest, as the rows are locked until the push commits.
const MARK_PARENTS: &str = "UPDATE @.tasks SET has_children = true
    WHERE id = ANY ($1) AND queue = $2 RETURNING id, state";

/// Records that task `$2` waits for the tasks `$1` (`$3`: to run anyway).
const ADD_DEPENDENCIES: &str = "INSERT INTO @.dependencies (parent, task, run_anyway)
    SELECT unnest($1::int8[]), $2, $3";

/// Serialises the pushes to ordered group `$1` (a text naming the schema,
/// the queue and the group) until the transaction ends, so that each finds
/// the tasks the others pushed before it. A key of one `bigint`, apart
/// from the schema's `(lock space, n)` keys (the migration's and holders'),
/// whose second half a hash could not avoid.
const LOCK_GROUP: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))::text";

const NOTIFY: &str = "SELECT pg_notify($1, $2)::text";

/// Claims up to `$2` tasks of queue `$1` for `$3` ms for holder `$4`, in
/// one statement. The candidates, each arm skipping rows others have
/// locked, are: the ready tasks first in claim order, the leased tasks
/// whose lease expired (so that a task whose holder vanished keeps its
/// place in line), and the waiting tasks now due. The best `$2` of them are
/// taken, except that an expired delivery that was its task's last attempt
/// is buried as dead instead (those rows come back with a NULL token); the
/// due tasks not taken become ready. A paused queue has no candidates;
/// nor has a queue with a concurrency or rate limit unless `$5` (the claim
/// is already bounded by its slots: see [`LOCK_SLOTS`]), which then
/// answers one row with a NULL id instead. With `$6`, its settings locked,
/// it takes no more than its concurrency limit's slots left: the limit
/// less the live leases (expired ones hold no slot), counted in the
/// claim's own snapshot, which the lock's statement before it makes see
/// the leases of the claim that held the lock last. It also ends the tasks
/// of every queue cancelled while leased whose lease has run out (kept as
/// history with `$7`, else deleted), as `Store::claim` says: the triggers
/// release what waits for them, which the next claim can take. Rows are
/// changed by id, looked up in the primary key (`= ANY (ARRAY(...))`), so
/// that the plan, made once for any values (see `pool.rs`), never scans
/// the table.
const CLAIM: &str = "WITH clock AS (SELECT NOW_MS AS now),
    cancels_over AS (
        SELECT id FROM @.tasks WHERE state = 6 AND lease_expires_at <= (SELECT now FROM clock)
        FOR UPDATE SKIP LOCKED),
    cancels_kept AS (
        UPDATE @.tasks t
        SET state = 5, finished_at = clock.now, lease_token = NULL, lease_expires_at = NULL,
            holder_id = NULL, unique_key = NULL, unique_until = NULL
        FROM clock WHERE $7::bool AND t.id = ANY (ARRAY(SELECT id FROM cancels_over))),
    cancels_deleted AS (
        DELETE FROM @.tasks t
        WHERE NOT $7::bool AND t.id = ANY (ARRAY(SELECT id FROM cancels_over))),
    room AS (
        SELECT CASE WHEN $6::bool THEN greatest(least($2::int8,
                   (SELECT max_leased FROM @.queues WHERE queue = $1)
                   - (SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 1
                        AND lease_expires_at > (SELECT now FROM clock))
                   - (SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 6
                        AND lease_expires_at > (SELECT now FROM clock))), 0)
               ELSE $2::int8 END AS n),
    settings AS (
        SELECT coalesce(paused_until > (SELECT now FROM clock), false) AS paused,
               (max_leased IS NOT NULL OR rate_period IS NOT NULL) AND NOT $5::bool AS unbounded
        FROM @.queues WHERE queue = $1),
    open AS (
        SELECT NOT EXISTS (SELECT 1 FROM settings WHERE paused OR unbounded) AS open),
    ready AS (
        SELECT id, priority, run_at, false AS last FROM @.tasks
        WHERE queue = $1 AND state = 0 AND (SELECT open FROM open)
        ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED),
    expired AS (
        SELECT id, priority, run_at, attempts >= max_attempts AS last
        FROM @.tasks
        WHERE queue = $1 AND state = 1 AND lease_expires_at <= (SELECT now FROM clock)
          AND (SELECT open FROM open)
        ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED),
    due AS (
        SELECT id, priority, run_at, false AS last FROM @.tasks
        WHERE queue = $1 AND state = 4 AND run_at <= (SELECT now FROM clock)
          AND (SELECT open FROM open)
        ORDER BY run_at LIMIT greatest((SELECT n FROM room), 1000) FOR UPDATE SKIP LOCKED),
    picked AS (
        SELECT * FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired
                       UNION ALL SELECT * FROM due) c
        ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM room)),
    promoted AS (
        UPDATE @.tasks t SET state = 0
        WHERE t.id = ANY (ARRAY(SELECT id FROM due WHERE id NOT IN (SELECT id FROM picked)))),
    buried AS (
        UPDATE @.tasks t
        SET state = 3, finished_at = clock.now, lease_token = NULL, lease_expires_at = NULL,
            holder_id = NULL,
            last_error = 'the lease of delivery ' || t.attempts || ' expired before it finished'
        FROM clock WHERE t.id = ANY (ARRAY(SELECT id FROM picked WHERE last))
        RETURNING t.id),
    taken AS (
        UPDATE @.tasks t
        SET state = 1, attempts = t.attempts + 1, lease_token = RANDOM_TOKEN,
            lease_expires_at = clock.now + $3::int8, holder_id = $4::int4, claimed_at = clock.now,
            last_error = CASE WHEN t.state = 1 THEN 'the lease of the previous delivery expired'
                              ELSE t.last_error END
        FROM clock WHERE t.id = ANY (ARRAY(SELECT id FROM picked WHERE NOT last))
        RETURNING t.id, t.lease_token, t.attempts, t.max_attempts, t.priority, t.run_at,
                  t.last_error, t.payload, t.parents)
    SELECT id, lease_token, attempts, max_attempts, priority, run_at, last_error, payload, parents
    FROM taken
    UNION ALL SELECT id, NULL, 0, 0, 0, 0, NULL, NULL, NULL FROM buried
    UNION ALL SELECT NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL FROM settings
        WHERE unbounded AND NOT paused";

/// Locks the settings of queue `$1`, which has a concurrency or rate
/// limit, and answers them. Claims of a limited queue take this lock one
/// after another, each in a statement of its own, so that the count of
/// live leases in the claim that follows it ([`CLAIM`] with `$6`) sees the
/// leases the claim before took (a statement's snapshot is taken when it
/// starts).
const LOCK_SLOTS: &str = "SELECT max_leased, rate_period FROM @.queues WHERE queue = $1 FOR UPDATE";

/// Posts, for `$2` ms, that a pull waits for a slot of queue `$1`'s
/// concurrency limit, if the queue is at its limit; answers a row if so.
/// Run by a claim that took nothing with the settings locked
/// ([`LOCK_SLOTS`]).
const WANT_SLOT: &str = concat!(
    "UPDATE @.queues SET slots_wanted_until = NOW_MS + $2
     WHERE queue = $1 AND max_leased <= ",
    live_leases!(),
    " RETURNING 1"
);

/// Notifies channel `$1` with queue `$2` if a pull waits for a slot of the
/// queue's concurrency limit ([`WANT_SLOT`]). Run in a transaction of its
/// own once the call that freed a slot committed: it then sees any want
/// posted by a claim that could not see that slot free, and it writes
/// nothing (so waits for no flush) when no one waits.
const NOTIFY_IF_SLOT_WANTED: &str = "SELECT pg_notify($1, $2)::text FROM @.queues
    WHERE queue = $2 AND slots_wanted_until > NOW_MS";

/// How many of queue `$1`'s rate slots are free (last used `$2` ms ago or
/// more), counting up to `$3`.
const FREE_RATE_SLOTS: &str = "SELECT count(*) FROM (SELECT 1 FROM @.rate_slots
    WHERE queue = $1 AND used_at <= NOW_MS - $2 LIMIT $3) free";

/// Marks `$3` of queue `$1`'s free rate slots (see [`FREE_RATE_SLOTS`])
/// used now.
const USE_RATE_SLOTS: &str = "UPDATE @.rate_slots SET used_at = NOW_MS
    WHERE queue = $1 AND slot IN (SELECT slot FROM @.rate_slots
                                  WHERE queue = $1 AND used_at <= NOW_MS - $2
                                  ORDER BY used_at LIMIT $3)";

/// Completes the current deliveries among receipts (`$1` ids, `$2`
/// tokens): deleted, or kept as done with history (`$3`) or for a unique
/// window; returns the receipts that were current. On a handle without
/// history, also deletes a few done tasks of queue `$4` whose unique window
/// has passed. A slot of a concurrency limit freed is told afterwards, and
/// only to a pull that waits for one ([`NOTIFY_IF_SLOT_WANTED`]).
const FINISH: &str = "WITH clock AS (SELECT NOW_MS AS now),
    r AS (SELECT * FROM unnest($1::int8[], $2::int8[]) AS r(id, token)),
    deleted AS (
        DELETE FROM @.tasks t USING r
        WHERE t.id = ANY ($1) AND t.id = r.id AND t.state = 1 AND t.lease_token = r.token AND NOT $3::bool
          AND (t.unique_key IS NULL OR t.unique_for = 0)
        RETURNING t.id, r.token),
    kept AS (
        UPDATE @.tasks t
        SET state = 2, finished_at = clock.now,
            lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
            unique_key = CASE WHEN t.unique_for > 0 THEN t.unique_key END,
            unique_until = CASE WHEN t.unique_for > 0 AND t.unique_key IS NOT NULL
                                THEN clock.now + t.unique_for END
        FROM r, clock
        WHERE t.id = ANY ($1) AND t.id = r.id AND t.state = 1 AND t.lease_token = r.token
          AND ($3 OR (t.unique_key IS NOT NULL AND t.unique_for > 0))
        RETURNING t.id, r.token),
    swept AS (
        DELETE FROM @.tasks WHERE NOT $3 AND id IN (
            SELECT id FROM @.tasks
            WHERE queue = $4 AND state = 2 AND unique_until IS NOT NULL
              AND unique_until <= (SELECT now FROM clock)
              AND (result_until IS NULL OR result_until <= (SELECT now FROM clock))
            LIMIT 100 FOR UPDATE SKIP LOCKED)),
    done AS (SELECT id, token FROM deleted UNION ALL SELECT id, token FROM kept)
    SELECT id, token FROM done";

/// Completes the delivery `($1, $2)`, if current, keeping the task as done
/// with result `$3`: for `$5` ms on a handle without history (`$4`), with
/// its history otherwise. Also deletes a few done tasks of queue `$6`
/// whose result's time has passed, and notifies channel `$7`, for the
/// processes waiting for the task's outcome. Returns the task if current.
const FINISH_WITH_RESULT: &str = "WITH clock AS (SELECT NOW_MS AS now),
    kept AS (
        UPDATE @.tasks t
        SET state = 2, finished_at = clock.now,
            lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
            unique_key = CASE WHEN t.unique_for > 0 THEN t.unique_key END,
            unique_until = CASE WHEN t.unique_for > 0 AND t.unique_key IS NOT NULL
                                THEN clock.now + t.unique_for END,
            result = $3, result_until = CASE WHEN NOT $4::bool THEN clock.now + $5::int8 END
        FROM clock
        WHERE t.id = $1 AND t.state = 1 AND t.lease_token = $2
        RETURNING t.id),
    swept AS (
        DELETE FROM @.tasks WHERE id IN (
            SELECT id FROM @.tasks
            WHERE queue = $6 AND state = 2 AND result_until IS NOT NULL
              AND result_until <= (SELECT now FROM clock)
              AND (unique_until IS NULL OR unique_until <= (SELECT now FROM clock))
            LIMIT 100 FOR UPDATE SKIP LOCKED))
    SELECT id, pg_notify($7, $6)::text FROM kept";

/// Ends the delivery `($1, $2)`, if current, as failed for reason `$3`:
/// dead on its last attempt, else due again after the back-off that
/// `RetryBackoff::pause` computes (from `$4` to `$5` ms, doubling with each
/// attempt, less a random part of up to half), and then the channel `$6`
/// is notified with the task's queue (the task may be another queue's of
/// this schema). Returns whether it died and when it is due again.
const FAIL: &str = "WITH clock AS (
        SELECT NOW_MS AS now, floor(random() * 9007199254740992)::numeric AS draw),
    current AS (
        SELECT t.id, t.queue, t.attempts >= t.max_attempts AS dead,
               least(clock.now + b.full - mod(clock.draw, floor(b.full / 2) + 1),
                     9223372036854775807)::int8 AS retry_at
        FROM @.tasks t, clock,
             LATERAL (SELECT least($4::int8 * 2::numeric ^ least(greatest(t.attempts - 1, 0), 63),
                                   $5::int8) AS full) b
        WHERE t.id = $1 AND t.state = 1 AND t.lease_token = $2 FOR UPDATE OF t),
    failed AS (
        UPDATE @.tasks t
        SET state = CASE WHEN c.dead THEN 3 WHEN c.retry_at <= clock.now THEN 0 ELSE 4 END,
            run_at = CASE WHEN c.dead THEN t.run_at ELSE c.retry_at END,
            finished_at = CASE WHEN c.dead THEN clock.now END,
            last_error = $3, lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
        FROM current c, clock WHERE t.id = c.id
        RETURNING c.dead, c.retry_at, c.queue)
    SELECT dead, retry_at, CASE WHEN NOT dead THEN pg_notify($6, queue)::text END FROM failed";

/// Moves the live lease of delivery `($1, $2)` to `$3` ms from now,
/// recording progress `$4` when not NULL, unless its queue has a
/// concurrency limit: those extends take the claims' lock
/// ([`PostgresStore::extend_limited`]).
const EXTEND: &str = "UPDATE @.tasks t
    SET lease_expires_at = NOW_MS + $3::int8, progress = coalesce($4::text, progress)
    WHERE id = $1 AND state = 1 AND lease_token = $2 AND lease_expires_at > NOW_MS
      AND NOT EXISTS (SELECT 1 FROM @.queues q WHERE q.queue = t.queue AND q.max_leased IS NOT NULL)
    RETURNING id";

/// The concurrency limit of task `$1`'s queue, its settings locked as
/// claims of a limited queue lock them ([`LOCK_SLOTS`]); no row when its
/// queue has no settings.
const LOCK_SLOTS_OF_TASK: &str = "SELECT max_leased FROM @.queues
    WHERE queue = (SELECT queue FROM @.tasks WHERE id = $1) FOR UPDATE";

/// The queue of delivery `($1, $2)`, if current, and whether its lease is
/// live, its row locked so that no claim takes it meanwhile.
const LOCK_DELIVERY: &str = "SELECT queue, lease_expires_at > NOW_MS FROM @.tasks
    WHERE id = $1 AND state = 1 AND lease_token = $2 FOR UPDATE";

/// The live leases of queue `$1`, which hold a slot of its concurrency limit.
const LIVE_LEASES: &str = concat!("SELECT ", live_leases!());

/// Moves the lease of task `$1` to `$2` ms from now, recording progress
/// `$3` when not NULL.
const EXTEND_LOCKED: &str = "UPDATE @.tasks
    SET lease_expires_at = NOW_MS + $2::int8, progress = coalesce($3::text, progress)
    WHERE id = $1";

/// A lease token: 64 random bits, as in SQLite, so that a receipt never
/// matches a delivery it was not drawn for (two draws of 32 bits: one
/// `random()` has fewer than 64).
pub(super) const RANDOM_TOKEN: &str = "((floor(random() * 4294967296)::int8 << 32)
    | floor(random() * 4294967296)::int8)";

/// The server's time and the live holders: those holding their lock
/// (`($2, holder id)`) or whose heartbeat is younger than `$3` ms (the
/// listener's grace period), so merely connecting again.
const CLOCK_AND_LIVE: &str = "WITH clock AS (SELECT NOW_MS AS now),
    live AS (
        SELECT objid::int8 AS id FROM pg_locks
        WHERE locktype = 'advisory' AND classid::int8 = $2::int8 AND objsubid = 2 AND granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        UNION
        SELECT id FROM @.holders WHERE seen_alive_at > (SELECT now FROM clock) - $3::int8)";

/// Takes back the leased tasks of queue `$1` whose lease expired or whose
/// holder is gone (not live: see [`CLOCK_AND_LIVE`]).
const RECOVER: &str = ",
    gone AS (
        SELECT t.id, (t.holder_id IS NULL OR t.holder_id NOT IN (SELECT id FROM live)) AS died
        FROM @.tasks t, clock
        WHERE t.queue = $1 AND t.state = 1
          AND (t.lease_expires_at <= clock.now OR t.holder_id IS NULL
               OR t.holder_id NOT IN (SELECT id FROM live))
        FOR UPDATE OF t SKIP LOCKED)
    UPDATE @.tasks t
    SET state = CASE WHEN t.attempts >= t.max_attempts THEN 3 ELSE 0 END,
        finished_at = CASE WHEN t.attempts >= t.max_attempts THEN clock.now END,
        last_error = CASE
            WHEN g.died THEN 'the process holding delivery ' || t.attempts
                             || ' died (its session on the server ended)'
            ELSE 'the lease of delivery ' || t.attempts || ' expired before it finished'
        END,
        lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
    FROM gone g, clock WHERE t.id = g.id";

/// The cancelling tasks of queue `$1` whose lease expired or whose holder
/// is gone: they are over (after [`CLOCK_AND_LIVE`]).
const OVER_CANCELLING: &str = ",
    over AS (
        SELECT t.id FROM @.tasks t, clock
        WHERE t.queue = $1 AND t.state = 6
          AND (t.lease_expires_at <= clock.now OR t.holder_id IS NULL
               OR t.holder_id NOT IN (SELECT id FROM live))
        FOR UPDATE OF t SKIP LOCKED)";

/// Ends task `$1` as cancelled at the server's time, keeping reason `$2`
/// (when not NULL), on a handle with history.
const KEEP_CANCELLED: &str = "UPDATE @.tasks
    SET state = 5, finished_at = NOW_MS, last_error = coalesce($2, last_error),
        lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
        unique_key = NULL, unique_until = NULL
    WHERE id = $1";

/// The time the ready task of queue `$1` that has been ready longest
/// became ready, found as SQLite does (see `sqlite/tasks.rs`), and the
/// server's time.
const OLDEST_READY: &str = "WITH RECURSIVE level(priority) AS (
        SELECT max(priority) FROM @.tasks WHERE queue = $1 AND state = 0
        UNION ALL
        SELECT (SELECT max(priority) FROM @.tasks
                WHERE queue = $1 AND state = 0 AND priority < level.priority)
        FROM level WHERE level.priority IS NOT NULL)
    SELECT least(
        (SELECT min((SELECT run_at FROM @.tasks
                     WHERE queue = $1 AND state = 0 AND priority = level.priority
                     ORDER BY run_at LIMIT 1))
         FROM level WHERE level.priority IS NOT NULL),
        (SELECT min(run_at) FROM @.tasks WHERE queue = $1 AND state = 4 AND run_at <= NOW_MS)),
        NOW_MS";

/// How long until a task of queue `$1` can be claimed (see
/// `Store::next_claimable`): 0 when one is ready; while the queue is
/// paused, until its pause ends (NULL: until resumed); under a rate limit,
/// not before a slot is free; at its concurrency limit, not before the
/// first live lease expires (a finish notifies instead), nor later than
/// `$2` ms before the want of a slot posted lapses (at once when none is),
/// so that a waiting pull claims, and so posts its want, again.
const NEXT_CLAIMABLE: &str = concat!(
    "SELECT CASE
        WHEN p.until IS NULL THEN greatest(c.at, (
            SELECT min(s.used_at + q.rate_period) FROM @.queues q
            JOIN @.rate_slots s ON s.queue = q.queue
            WHERE q.queue = $1 AND q.rate_period IS NOT NULL AND c.at IS NOT NULL), (
            SELECT least(
                (SELECT min(lease_expires_at) FROM @.tasks
                 WHERE queue = $1 AND state = 1 AND lease_expires_at > NOW_MS),
                (SELECT min(lease_expires_at) FROM @.tasks
                 WHERE queue = $1 AND state = 6 AND lease_expires_at > NOW_MS),
                coalesce(q.slots_wanted_until, 0) - $2)
            FROM @.queues q
            WHERE q.queue = $1 AND c.at IS NOT NULL AND q.max_leased <= ",
    live_leases!(),
    "))
        WHEN p.until < 9223372036854775807 THEN p.until
    END - NOW_MS
    FROM (SELECT (SELECT paused_until FROM @.queues WHERE queue = $1 AND paused_until > NOW_MS)
          AS until) p,
         (SELECT least(
            (SELECT NOW_MS WHERE EXISTS (SELECT 1 FROM @.tasks WHERE queue = $1 AND state = 0)),
            (SELECT min(run_at) FROM @.tasks WHERE queue = $1 AND state = 4),
            (SELECT min(lease_expires_at) FROM @.tasks WHERE queue = $1 AND state = 1),
            (SELECT min(lease_expires_at) FROM @.tasks WHERE queue = $1 AND state = 6)) AS at) c"
);

/// The end of queue `$1`'s pause in force, if any.
const PAUSED_UNTIL: &str =
    "SELECT paused_until FROM @.queues WHERE queue = $1 AND paused_until > NOW_MS";

const RETRY_DEAD: &str = "UPDATE @.tasks
    SET state = 0, attempts = 0, run_at = NOW_MS, finished_at = NULL
    WHERE queue = $1 AND state = 3 AND ($2::int8 IS NULL OR id = $2)";

/// The dead tasks of ordered groups that [`RETRY_DEAD`] would retry, with
/// their groups, by id, locked until the retry commits.
const DEAD_IN_GROUPS: &str = "SELECT id, group_key FROM @.tasks
    WHERE queue = $1 AND state = 3 AND group_key IS NOT NULL AND ($2::int8 IS NULL OR id = $2)
    ORDER BY id FOR UPDATE";

/// Retries the dead task `$1` of an ordered group: ready, or blocked
/// behind one task when `$2`.
const RETRY_GROUPED: &str = "UPDATE @.tasks
    SET state = CASE WHEN $2 THEN 7 ELSE 0 END, waiting_for = CASE WHEN $2 THEN 1 ELSE 0 END,
        attempts = 0, run_at = NOW_MS, finished_at = NULL
    WHERE id = $1";

/// The rate limit of queue `$1`: as many claims as it has slots, and its
/// window (read by [`rate_limit_in`]).
const RATE_LIMIT: &str = "SELECT count(*), q.rate_period FROM @.queues q
    JOIN @.rate_slots s ON s.queue = q.queue
    WHERE q.queue = $1 AND q.rate_period IS NOT NULL
    GROUP BY q.rate_period";

/// The rate limit that [`RATE_LIMIT`] answered.
fn rate_limit_in(rows: &[Row]) -> Result<Option<RateLimit>> {
    rows.first()
        .map(|row| -> Result<RateLimit> {
            Ok(RateLimit {
                claims: u32::try_from(row.try_get::<_, i64>(0)?).unwrap_or(u32::MAX),
                per: std::time::Duration::from_millis(row.try_get::<_, i64>(1)?.max(0) as u64),
            })
        })
        .transpose()
}

/// Counts the tasks of queue `$1` in `state`.
fn count_sql(state: TaskState) -> String {
    format!(
        "SELECT count(*) FROM @.tasks WHERE queue = $1 AND {}",
        state_condition(state)
    )
}

/// Lists up to `$3` tasks of queue `$1` in `state` beyond id `$2`, in the
/// order `from` asks.
fn list_sql(state: TaskState, from: ListFrom) -> String {
    let (range, order) = match from {
        ListFrom::After(_) => ("id > $2", "id"),
        ListFrom::Before(_) => ("id < $2", "id DESC"),
    };
    format!(
        "SELECT {TASK_INFO}
         FROM @.tasks t WHERE queue = $1 AND {} AND {range} ORDER BY {order} LIMIT $3",
        state_condition(state)
    )
}

/// The timings of queue `$1` since `$2`, at most `$3` of each kind (see
/// `Store::timings_since`), in one statement: the leased and cancelling
/// tasks through their indexes (as many as are held), the done and dead
/// ones ended since `$2` through theirs, in their order.
const TIMINGS: &str = "(SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 1 AND claimed_at >= $2 LIMIT $3)
    UNION ALL
    (SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 6 AND claimed_at >= $2 LIMIT $3)
    UNION ALL
    (SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 2 AND finished_at >= $2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT $3)
    UNION ALL
    (SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 3 AND finished_at >= $2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT $3)";

fn timing_from_row(row: &Row) -> Result<TaskTiming> {
    Ok(TaskTiming {
        id: row.try_get(0)?,
        state: visible_state(i64::from(row.try_get::<_, i16>(1)?))?,
        attempts: count32(row, 2)?,
        run_at_unix_ms: row.try_get(3)?,
        claimed_at_unix_ms: row.try_get(4)?,
        finished_at_unix_ms: row.try_get(5)?,
    })
}

/// The columns of a task as [`info_from_row`] reads them.
const TASK_INFO: &str =
    "id, state, attempts, max_attempts, priority, run_at, last_error, payload, result, progress,
     CASE WHEN state = 7 THEN ARRAY(SELECT parent FROM @.dependencies
                                    WHERE task = t.id ORDER BY parent) END,
     group_key, created_at, claimed_at,
     CASE WHEN state IN (2, 3, 5) THEN finished_at END";

fn info_from_row(row: &Row) -> Result<TaskInfo> {
    Ok(TaskInfo {
        id: row.try_get(0)?,
        state: visible_state(i64::from(row.try_get::<_, i16>(1)?))?,
        attempts: count32(row, 2)?,
        max_attempts: count32(row, 3)?,
        priority: row.try_get(4)?,
        run_at_unix_ms: row.try_get(5)?,
        last_error: row.try_get(6)?,
        payload: row.try_get(7)?,
        result: row.try_get(8)?,
        progress: row.try_get(9)?,
        waiting_for: row.try_get::<_, Option<Vec<i64>>>(10)?.unwrap_or_default(),
        group: row.try_get(11)?,
        created_at_unix_ms: row.try_get(12)?,
        claimed_at_unix_ms: row.try_get(13)?,
        finished_at_unix_ms: row.try_get(14)?,
    })
}

/// A count read from the database as a `u32` (tq writes only those).
fn count32(row: &Row, column: usize) -> Result<u32> {
    let value: i64 = row.try_get(column)?;
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

/// A claimed task, or `None` for a delivery buried as dead (NULL token).
fn task_from_row(row: &Row) -> Result<Option<Task>> {
    let Some(token) = row.try_get::<_, Option<i64>>(1)? else {
        return Ok(None);
    };
    Ok(Some(Task {
        receipt: Receipt::new(row.try_get(0)?, token),
        attempts: count32(row, 2)?,
        max_attempts: count32(row, 3)?,
        priority: row.try_get(4)?,
        run_at_unix_ms: row.try_get(5)?,
        last_error: row.try_get(6)?,
        payload: row.try_get(7)?,
        parents: row.try_get::<_, Option<Vec<i64>>>(8)?.unwrap_or_default(),
    }))
}

impl PostgresStore {
    /// Claims up to `max` tasks for this process's holder, each round of
    /// [`CLAIM`] run by `run` (in a `transaction` of the caller's, or each
    /// statement in one of its own). A limited queue is claimed from in a
    /// transaction: the caller's, or one of its own.
    fn claim_with(
        &self,
        mut run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        transaction: bool,
        max: usize,
        lease: i64,
    ) -> Result<Vec<Task>> {
        let holder = self.listener.holder(self.wait)?;
        // A limited queue: its slots are taken under a lock, which lasts
        // until the end of a transaction. A handle that saw its queue
        // limited goes there at once, rather than learn it again from a
        // round of the claim.
        let claim_limited = |run| {
            if transaction {
                return Ok(self.claim_limited(run, max, lease, holder)?.0);
            }
            let claim = || {
                self.write(|tx| {
                    self.claim_limited(|sql, params| tx.query(sql, params), max, lease, holder)
                })
            };
            let (tasks, wanted) = claim()?;
            if wanted {
                // A finish that committed after this claim counted the
                // leases looked for a want before this one was posted, and
                // told no one: look once more, now that it is posted.
                return Ok(claim()?.0);
            }
            Ok(tasks)
        };
        if self.limited.load(Ordering::Relaxed) {
            return claim_limited(run);
        }
        let sql = self.sql(CLAIM);
        let max = max.min(i64::MAX as usize) as i64;
        let mut tasks = Vec::new();
        // A round that claimed nothing but buried some expired last
        // attempts goes again: they have left the candidates, so it ends.
        // One that claimed a task ends the claim, so that each round may
        // be a transaction of its own without tasks claimed and then lost
        // to a later round's error.
        while tasks.is_empty() {
            let rows = run(
                &sql,
                &[
                    &self.queue,
                    &max,
                    &lease,
                    &holder,
                    &false,
                    &false,
                    &self.keep_history,
                ],
            )?;
            let mut buried = 0;
            for row in &rows {
                if row.try_get::<_, Option<i64>>(0)?.is_none() {
                    self.limited.store(true, Ordering::Relaxed);
                    return claim_limited(run);
                }
                match task_from_row(row)? {
                    Some(task) => tasks.push(task),
                    None => buried += 1,
                }
            }
            if buried == 0 {
                break;
            }
        }
        sort_claimed(&mut tasks);
        Ok(tasks)
    }

    /// Claims up to `max` tasks of this limited queue, with `run` in a
    /// transaction: locks its settings ([`LOCK_SLOTS`]), counts its free
    /// rate slots, claims no more than those and its concurrency limit's
    /// slots left, and marks the rate slots it used. Having claimed
    /// nothing at its concurrency limit, it posts that a pull waits for a
    /// slot ([`WANT_SLOT`]), and says so.
    fn claim_limited(
        &self,
        mut run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        max: usize,
        lease: i64,
        holder: i32,
    ) -> Result<(Vec<Task>, bool)> {
        let (limit, rate_period) = self.lock_limits(&mut run)?;
        let mut room = max;
        if let Some(period) = rate_period {
            room = room.min(self.free_rate_slots(&mut run, period, room)?);
        }
        let sql = self.sql(CLAIM);
        let room = room.min(i64::MAX as usize) as i64;
        let mut tasks = Vec::new();
        // As in `claim_with`, bounded by the slots: no marker comes back.
        let count_leases = limit.is_some();
        while room > 0 && tasks.is_empty() {
            let rows = run(
                &sql,
                &[
                    &self.queue,
                    &room,
                    &lease,
                    &holder,
                    &true,
                    &count_leases,
                    &self.keep_history,
                ],
            )?;
            let mut buried = 0;
            for row in &rows {
                match task_from_row(row)? {
                    Some(task) => tasks.push(task),
                    None => buried += 1,
                }
            }
            if buried == 0 {
                break;
            }
        }
        if let (Some(period), false) = (rate_period, tasks.is_empty()) {
            let used = tasks.len() as i64;
            run(&self.sql(USE_RATE_SLOTS), &[&self.queue, &period, &used])?;
        }
        let wanted = tasks.is_empty()
            && count_leases
            && !run(&self.sql(WANT_SLOT), &[&self.queue, &SLOT_WANTED_FOR])?.is_empty();
        sort_claimed(&mut tasks);
        Ok((tasks, wanted))
    }

    /// Extends the lease of `receipt` that [`EXTEND`] did not: one of a
    /// queue with a concurrency limit, or one expired (or not current).
    /// Under the settings' lock that claims of a limited queue take, it
    /// decides whether the lease is live and, if it is not, whether the
    /// limit has room for it: an expired lease holds no slot, and a claim
    /// may have filled it. Without the lock, an extend begun while the
    /// lease was live and a claim counting it expired could both succeed.
    fn extend_limited(&self, receipt: Receipt, lease: i64, progress: Option<&str>) -> Result<()> {
        self.write(|tx| {
            let limit: Option<i64> = match tx
                .query(&self.sql(LOCK_SLOTS_OF_TASK), &[&receipt.id])?
                .first()
            {
                Some(row) => row.try_get(0)?,
                None => None,
            };
            let current = tx.query(&self.sql(LOCK_DELIVERY), &[&receipt.id, &receipt.token])?;
            let Some(row) = current.first() else {
                return Err(not_held(receipt.id));
            };
            let queue: String = row.try_get(0)?;
            let live: bool = row.try_get(1)?;
            if let (Some(limit), false) = (limit, live) {
                let taken: i64 = tx
                    .query(&self.sql(LIVE_LEASES), &[&queue])?
                    .first()
                    .map(|row| row.try_get(0))
                    .transpose()?
                    .unwrap_or(0);
                if taken >= limit {
                    return Err(lease_slot_taken(receipt.id, &queue, limit));
                }
            }
            tx.execute(&self.sql(EXTEND_LOCKED), &[&receipt.id, &lease, &progress])?;
            Ok(())
        })
    }

    /// Locks this queue's settings ([`LOCK_SLOTS`]) until the transaction
    /// ends, and answers its concurrency limit and its rate limit's
    /// window. Limits found lifted are remembered, so that later claims
    /// take no lock.
    fn lock_limits(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
    ) -> Result<(Option<i64>, Option<i64>)> {
        let settings = run(&self.sql(LOCK_SLOTS), &[&self.queue])?;
        let (limit, rate_period): (Option<i64>, Option<i64>) = match settings.first() {
            Some(row) => (row.try_get(0)?, row.try_get(1)?),
            // The settings were removed meanwhile.
            None => (None, None),
        };
        if limit.is_none() && rate_period.is_none() {
            // The limits were lifted: later claims need no lock.
            self.limited.store(false, Ordering::Relaxed);
        }
        Ok((limit, rate_period))
    }

    /// How many of this queue's rate slots are free in a window of
    /// `period` ms, counted up to `most` (no claim takes more).
    fn free_rate_slots(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        period: i64,
        most: usize,
    ) -> Result<usize> {
        let most = most.min(i64::MAX as usize) as i64;
        let free: i64 = run(&self.sql(FREE_RATE_SLOTS), &[&self.queue, &period, &most])?
            .first()
            .map(|row| row.try_get(0))
            .transpose()?
            .unwrap_or(0);
        Ok(free.max(0) as usize)
    }

    /// Wakes the pulls waiting for a slot of this limited queue, in every
    /// process, if one waits ([`NOTIFY_IF_SLOT_WANTED`]), once a call that
    /// freed a slot committed: one round trip, made only by a handle that
    /// saw its queue limited. Its error is not the call's, which has
    /// committed: a waiter it misses looks again before its want lapses
    /// ([`SLOT_WANT_RENEWED_BEFORE_END`]).
    fn slots_freed(&self) {
        if self.limited.load(Ordering::Relaxed) {
            let _ = self.write_one(
                &self.sql(NOTIFY_IF_SLOT_WANTED),
                &[&self.channel, &self.queue],
            );
        }
    }

    /// Completes the current deliveries among `receipts`, [`FINISH`] run
    /// by `run`.
    fn finish_with(
        &self,
        run: impl FnOnce(&str, Params<'_>) -> Result<Vec<Row>>,
        receipts: &[Receipt],
    ) -> Result<Vec<bool>> {
        let ids: Vec<i64> = receipts.iter().map(|receipt| receipt.id).collect();
        let tokens: Vec<i64> = receipts.iter().map(|receipt| receipt.token).collect();
        let rows = run(
            &self.sql(FINISH),
            &[&ids, &tokens, &self.keep_history, &self.queue],
        )?;
        let mut done = HashSet::new();
        for row in &rows {
            done.insert((row.try_get::<_, i64>(0)?, row.try_get::<_, i64>(1)?));
        }
        // A receipt given twice was current the first time only.
        Ok(receipts
            .iter()
            .map(|receipt| done.remove(&(receipt.id, receipt.token)))
            .collect())
    }

    /// Ends task `id` as cancelled (see `sqlite/tasks.rs`): kept with
    /// `reason` with history, deleted without.
    fn end_as_cancelled(&self, tx: &mut Tx<'_>, id: i64, reason: Option<&str>) -> Result<()> {
        // What it waited for is forgotten after its end, which a blocked
        // task of an ordered group hands on first (see `schema.rs`).
        if self.keep_history {
            tx.execute(&self.sql(KEEP_CANCELLED), &[&id, &reason])?;
        } else {
            tx.execute(&self.sql("DELETE FROM @.tasks WHERE id = $1"), &[&id])?;
        }
        tx.execute(
            &self.sql("DELETE FROM @.dependencies WHERE task = $1"),
            &[&id],
        )?;
        Ok(())
    }

    /// Runs claims made at once (their size and lease), one statement for
    /// those of each lease, each run by `run` (in a `transaction` or not:
    /// see `claim_with`); each claim gets the best tasks left by the claims
    /// before it.
    fn claim_together(
        &self,
        mut run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        transaction: bool,
        claims: &[(usize, i64)],
    ) -> Vec<Result<Vec<Task>>> {
        let mut results: Vec<Option<Result<Vec<Task>>>> = claims.iter().map(|_| None).collect();
        for (first, &(_, lease)) in claims.iter().enumerate() {
            if results[first].is_some() {
                continue;
            }
            let same_lease: Vec<usize> = (first..claims.len())
                .filter(|&i| claims[i].1 == lease)
                .collect();
            let total = same_lease.iter().map(|&i| claims[i].0).sum();
            match self.claim_with(&mut run, transaction, total, lease) {
                Ok(tasks) => {
                    let mut tasks = tasks.into_iter();
                    for &i in &same_lease {
                        results[i] = Some(Ok(tasks.by_ref().take(claims[i].0).collect()));
                    }
                }
                Err(err) => {
                    for &i in &same_lease {
                        results[i] = Some(Err(err.clone()));
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|result| result.expect("every claim has a lease"))
            .collect()
    }

    /// Runs finish-and-claims made at once in one transaction: one
    /// statement finishes them all, then one claims the tasks of all those
    /// to claim (per lease).
    fn finish_and_claim_together(
        &self,
        calls: &[FinishAndClaim],
    ) -> Vec<Result<(Vec<bool>, Vec<Task>)>> {
        let receipts: Vec<Receipt> = calls
            .iter()
            .flat_map(|call| call.receipts.iter().copied())
            .collect();
        let outcome = self.write(|tx| {
            let mut done = self
                .finish_with(|sql, params| tx.query(sql, params), &receipts)?
                .into_iter();
            let held: Vec<Vec<bool>> = calls
                .iter()
                .map(|call| done.by_ref().take(call.receipts.len()).collect())
                .collect();
            let claims: Vec<(usize, i64)> = calls
                .iter()
                .zip(&held)
                .map(|(call, held)| {
                    let refused = call.if_not_held == IfNotHeld::Refuse && held.contains(&false);
                    (if refused { 0 } else { call.max }, call.lease)
                })
                .collect();
            let claimed = self
                .claim_together(|sql, params| tx.query(sql, params), true, &claims)
                .into_iter()
                .collect::<Result<Vec<Vec<Task>>>>()?;
            Ok((held, claimed))
        });
        match outcome {
            Ok((held, claimed)) => {
                // Finishes whose claims took fewer tasks left slots free.
                let finished: usize = held.iter().flatten().filter(|&&done| done).count();
                if finished > claimed.iter().map(Vec::len).sum() {
                    self.slots_freed();
                }
                calls
                    .iter()
                    .zip(held.into_iter().zip(claimed))
                    .map(
                        |(call, (held, tasks))| match held.iter().position(|&done| !done) {
                            Some(lost) if call.if_not_held == IfNotHeld::Refuse => {
                                Err(not_held(call.receipts[lost].id))
                            }
                            _ => Ok((held, tasks)),
                        },
                    )
                    .collect()
            }
            Err(err) => calls.iter().map(|_| Err(err.clone())).collect(),
        }
    }

    /// Runs finishes made at once as one statement; each gets the answers
    /// for its own receipts.
    fn finish_together(&self, finishes: &[Vec<Receipt>]) -> Vec<Result<Vec<bool>>> {
        let receipts = finishes.concat();
        match self.finish_with(|sql, params| self.write_one(sql, params), &receipts) {
            Ok(done) => {
                if done.contains(&true) {
                    self.slots_freed();
                }
                let mut done = done.into_iter();
                finishes
                    .iter()
                    .map(|receipts| Ok(done.by_ref().take(receipts.len()).collect()))
                    .collect()
            }
            Err(err) => finishes.iter().map(|_| Err(err.clone())).collect(),
        }
    }

    /// Wakes the waiters of `queue`, in every process, once `tx` commits.
    pub(super) fn notify(&self, tx: &mut Tx<'_>, queue: &str) -> Result<()> {
        tx.query(NOTIFY, &[&self.channel, &queue])?;
        Ok(())
    }

    /// Stores one task, or, with a unique key, finds the task holding it.
    /// A key is held by a pending or leased task, or by a done one until
    /// its window ends; a task that no longer holds its key gives it up
    /// here. `earlier` is what the earlier items of the same push did,
    /// which the task may wait for; a task to wait for that cannot be
    /// ([`waits_for`]) fails the push.
    pub(super) fn push_one(
        &self,
        tx: &mut Tx<'_>,
        task: &NewTask,
        earlier: &[Pushed],
    ) -> Result<Pushed> {
        let parents = parent_ids(&task.after, earlier);
        let unfinished = self.unfinished_parents(tx, &parents, task.run_anyway)?;
        let group_parent = match &task.group {
            Some((group, at_once)) => self.group_parent(tx, group, *at_once, &unfinished)?,
            None => None,
        };
        let waiting = (unfinished.len() + usize::from(group_parent.is_some())) as i64;
        let parents = (!parents.is_empty()).then_some(parents);
        let key = task.unique.as_ref().map(|(key, _)| key.as_str());
        // Two rounds at most: a concurrent push that took the key first is
        // seen by the second look.
        for _ in 0..2 {
            if let Some(key) = key {
                if let Some(id) = self.unique_key_holder(tx, key)? {
                    return Ok(Pushed::Duplicate(id));
                }
            }
            if let Some(id) = self.insert_task(tx, task, &parents, waiting)? {
                if !unfinished.is_empty() {
                    tx.execute(
                        &self.sql(ADD_DEPENDENCIES),
                        &[&unfinished, &id, &task.run_anyway],
                    )?;
                }
                if let Some(parent) = group_parent {
                    tx.execute(&self.sql(ADD_DEPENDENCIES), &[&vec![parent], &id, &true])?;
                }
                self.notify(tx, &self.queue)?;
                return Ok(Pushed::Stored(id));
            }
        }
        Err(Error::new(
            crate::ErrorKind::Busy,
            "the unique key was taken and given up by other pushes meanwhile: try again",
        ))
    }

    /// Those of `parents` that a new task must still wait for, marked as
    /// waited for ([`MARK_PARENTS`]) in one statement; [`waits_for`]
    /// refuses a parent it cannot wait for, which fails the push.
    fn unfinished_parents(
        &self,
        tx: &mut Tx<'_>,
        parents: &[i64],
        run_anyway: bool,
    ) -> Result<Vec<i64>> {
        let mut unfinished = Vec::new();
        if !parents.is_empty() {
            let mut states = HashMap::new();
            for row in tx.query(&self.sql(MARK_PARENTS), &[&parents, &self.queue])? {
                states.insert(row.try_get::<_, i64>(0)?, row.try_get::<_, i16>(1)?);
            }
            for &parent in parents {
                let state = states.get(&parent).map(|&state| i64::from(state));
                if waits_for(&self.queue, parent, state, run_anyway)? {
                    unfinished.push(parent);
                }
            }
        }
        Ok(unfinished)
    }

    /// The task of this queue that still holds unique key `key`, if one
    /// does, by the database's clock. A task that has the key but no
    /// longer holds it gives it up here, so that the new task can take it.
    fn unique_key_holder(&self, tx: &mut Tx<'_>, key: &str) -> Result<Option<i64>> {
        if let Some(row) = tx.query_opt(&self.sql(UNIQUE_HOLDER), &[&self.queue, &key])? {
            let id: i64 = row.try_get(0)?;
            let state: i16 = row.try_get(1)?;
            let unique_until: Option<i64> = row.try_get(2)?;
            let now: i64 = row.try_get(3)?;
            if holds_unique_key(i64::from(state), unique_until, now) {
                return Ok(Some(id));
            }
            tx.execute(
                &self.sql("UPDATE @.tasks SET unique_key = NULL WHERE id = $1"),
                &[&id],
            )?;
        }
        Ok(None)
    }

    /// Inserts `task`, waiting for `waiting` tasks, and returns its id;
    /// none when its unique key was taken meanwhile by a concurrent push
    /// ([`PUSH_ONE`] then inserts nothing), for the caller to look again.
    fn insert_task(
        &self,
        tx: &mut Tx<'_>,
        task: &NewTask,
        parents: &Option<Vec<i64>>,
        waiting: i64,
    ) -> Result<Option<i64>> {
        let group = task.group.as_ref().map(|(group, _)| group.as_str());
        let (key, window) = match &task.unique {
            Some((key, window)) => (Some(key.as_str()), *window),
            None => (None, 0),
        };
        let max_attempts = i64::from(task.max_attempts);
        let inserted = tx.query_opt(
            &self.sql(PUSH_ONE),
            &[
                &self.queue,
                &task.payload,
                &task.delay,
                &task.run_at,
                &task.priority,
                &max_attempts,
                &key,
                &window,
                parents,
                &waiting,
                &group,
            ],
        )?;
        match inserted {
            Some(row) => Ok(Some(row.try_get(0)?)),
            None => Ok(None),
        }
    }

    /// The task a task pushed to `group`, `at_once` of whose tasks run at
    /// once, waits for as its group's predecessor (see
    /// [`group_predecessor_sql`]), marked as waited for, unless it waits
    /// for that task already among its `parents`, with their own policy.
    /// The group must be locked ([`PostgresStore::lock_groups`]).
    fn group_parent(
        &self,
        tx: &mut Tx<'_>,
        group: &str,
        at_once: u32,
        parents: &[i64],
    ) -> Result<Option<i64>> {
        let offset = i64::from(at_once) - 1;
        let Some(row) = tx.query_opt(
            &self.sql(&group_predecessor_sql("@.tasks", '$')),
            &[&self.queue, &group, &offset],
        )?
        else {
            return Ok(None);
        };
        let predecessor: i64 = row.try_get(0)?;
        if parents.contains(&predecessor) {
            return Ok(None);
        }
        // It may have ended since it was found: then it holds nothing back.
        let marked = tx.query_opt(&self.sql(MARK_PARENTS), &[&vec![predecessor], &self.queue])?;
        let state = match marked {
            Some(row) => Some(i64::from(row.try_get::<_, i16>(1)?)),
            None => None,
        };
        Ok(state
            .filter(|&state| !matches!(state, DONE | DEAD | CANCELLED))
            .map(|_| predecessor))
    }

    /// Locks the ordered `groups` ([`LOCK_GROUP`]) for the rest of the
    /// transaction, in one order, so that two pushes (or retries) to the
    /// same groups cannot each wait for the other.
    fn lock_groups<'a>(
        &self,
        tx: &mut Tx<'_>,
        groups: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        let groups: std::collections::BTreeSet<&str> = groups.into_iter().collect();
        for group in groups {
            let key = format!(
                "tq:{}:{}:{}:{group}",
                self.schema,
                self.queue.len(),
                self.queue
            );
            tx.query(LOCK_GROUP, &[&key])?;
        }
        Ok(())
    }

    /// One number from a query returning one row and column.
    fn read_value<T>(&self, sql: &str, params: super::pool::Params<'_>) -> Result<T>
    where
        T: for<'a> postgres::types::FromSql<'a>,
    {
        let sql = self.sql(sql);
        self.read(|conn| {
            let rows = conn.query(&sql, params)?;
            let row = rows.first().ok_or_else(|| {
                Error::new(
                    crate::ErrorKind::Internal,
                    "a query for one value returned no row",
                )
            })?;
            Ok(row.try_get(0)?)
        })
    }
}

impl Store for PostgresStore {
    fn push(&self, tasks: Vec<NewTask>, _now: i64) -> Result<Vec<Pushed>> {
        // One at a time: a task with a unique key, or a push with tasks
        // to wait for or in groups.
        if tasks
            .iter()
            .any(|task| task.unique.is_some() || !task.after.is_empty() || task.group.is_some())
        {
            return self.write(|tx| {
                self.lock_groups(
                    tx,
                    tasks
                        .iter()
                        .filter_map(|task| task.group.as_ref().map(|(group, _)| group.as_str())),
                )?;
                let mut pushed = Vec::with_capacity(tasks.len());
                for (index, task) in tasks.iter().enumerate() {
                    let one = self
                        .push_one(tx, task, &pushed)
                        .map_err(|err| of_item(err, index, tasks.len()))?;
                    pushed.push(one);
                }
                Ok(pushed)
            });
        }
        let payloads: Vec<&str> = tasks.iter().map(|task| task.payload.as_str()).collect();
        let delays: Vec<Option<i64>> = tasks.iter().map(|task| task.delay).collect();
        let times: Vec<i64> = tasks.iter().map(|task| task.run_at).collect();
        let priorities: Vec<i32> = tasks.iter().map(|task| task.priority).collect();
        let attempts: Vec<i64> = tasks
            .iter()
            .map(|task| i64::from(task.max_attempts))
            .collect();
        let rows = self.write_one(
            &self.sql(PUSH),
            &[
                &self.queue,
                &payloads,
                &delays,
                &times,
                &priorities,
                &attempts,
                &self.channel,
            ],
        )?;
        let mut ids = rows
            .iter()
            .map(|row| row.try_get::<_, i64>(0))
            .collect::<std::result::Result<Vec<i64>, _>>()?;
        // Ids are drawn in insertion order, which is the tasks' order.
        ids.sort_unstable();
        Ok(ids.into_iter().map(Pushed::Stored).collect())
    }

    fn claim(&self, max: usize, _now: i64, lease: i64) -> Result<Vec<Task>> {
        self.claims.submit_committed((max, lease), |claims| {
            self.claim_together(|sql, params| self.write_one(sql, params), false, &claims)
        })
    }

    fn finish(&self, receipts: &[Receipt], _now: i64) -> Result<Vec<bool>> {
        self.finishes
            .submit_committed(receipts.to_vec(), |finishes| {
                self.finish_together(&finishes)
            })
    }

    fn finish_with_result(
        &self,
        receipt: Receipt,
        result: &str,
        _now: i64,
        retention: i64,
    ) -> Result<bool> {
        let rows = self.write_one(
            &self.sql(FINISH_WITH_RESULT),
            &[
                &receipt.id,
                &receipt.token,
                &result,
                &self.keep_history,
                &retention,
                &self.queue,
                &self.channel,
            ],
        )?;
        // Its statement notified the waiters, of a free slot too.
        Ok(!rows.is_empty())
    }

    fn finish_and_claim(
        &self,
        receipts: &[Receipt],
        if_not_held: IfNotHeld,
        _now: i64,
        lease: i64,
        max: usize,
    ) -> Result<(Vec<bool>, Vec<Task>)> {
        let call = FinishAndClaim {
            receipts: receipts.to_vec(),
            if_not_held,
            lease,
            max,
        };
        self.finish_and_claims
            .submit_committed(call, |calls| self.finish_and_claim_together(&calls))
    }

    fn fail(
        &self,
        receipt: Receipt,
        reason: &str,
        _now: i64,
        backoff: &RetryBackoff,
    ) -> Result<Failed> {
        let reason = stored_reason(reason);
        let (min, max) = (
            backoff.min.as_millis().min(i64::MAX as u128) as i64,
            backoff.max.as_millis().min(i64::MAX as u128) as i64,
        );
        let rows = self.write_one(
            &self.sql(FAIL),
            &[
                &receipt.id,
                &receipt.token,
                &reason,
                &min,
                &max,
                &self.channel,
            ],
        )?;
        let row = rows.first().ok_or_else(|| not_held(receipt.id))?;
        if row.try_get(0)? {
            self.slots_freed();
            return Ok(Failed::Dead);
        }
        Ok(Failed::RetryAt(row.try_get(1)?))
    }

    fn extend(
        &self,
        receipt: Receipt,
        _now: i64,
        lease: i64,
        progress: Option<&str>,
    ) -> Result<()> {
        let extended = self.write_one(
            &self.sql(EXTEND),
            &[&receipt.id, &receipt.token, &lease, &progress],
        )?;
        if extended.is_empty() {
            return self.extend_limited(receipt, lease, progress);
        }
        Ok(())
    }

    fn recover(&self, _now: i64) -> Result<u64> {
        let space = i64::from(self.lock_space);
        let grace = super::listener::GRACE.as_millis() as i64;
        let ended = if self.keep_history {
            "UPDATE @.tasks t
             SET state = 5, finished_at = clock.now,
                 lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
                 unique_key = NULL, unique_until = NULL
             FROM over o, clock WHERE t.id = o.id"
        } else {
            "DELETE FROM @.tasks t USING over o WHERE t.id = o.id"
        };
        self.write(|tx| {
            let recovered = tx.execute(
                &self.sql(&format!("{CLOCK_AND_LIVE}{RECOVER}")),
                &[&self.queue, &space, &grace],
            )?;
            tx.execute(
                &self.sql(&format!("{CLOCK_AND_LIVE}{OVER_CANCELLING} {ended}")),
                &[&self.queue, &space, &grace],
            )?;
            if recovered > 0 {
                self.notify(tx, &self.queue)?;
            }
            Ok(recovered)
        })
    }

    fn count(&self, state: TaskState) -> Result<u64> {
        let count: i64 = self.read_value(&count_sql(state), &[&self.queue])?;
        Ok(count as u64)
    }

    fn groups_waiting(&self) -> Result<u64> {
        let count: i64 = self.read_value(
            "SELECT count(DISTINCT group_key) FROM @.tasks
             WHERE queue = $1 AND state = 7 AND group_key IS NOT NULL",
            &[&self.queue],
        )?;
        Ok(count as u64)
    }

    fn oldest_ready(&self, now: i64) -> Result<Option<i64>> {
        let sql = self.sql(OLDEST_READY);
        let (oldest, server_now): (Option<i64>, i64) = self.read(|conn| {
            let rows = conn.query(&sql, &[&self.queue])?;
            let row = &rows[0];
            Ok((row.try_get(0)?, row.try_get(1)?))
        })?;
        // The engine measures the age on its own clock: same age, its time.
        Ok(oldest.map(|ready_at| now.saturating_sub(server_now.saturating_sub(ready_at))))
    }

    fn task(&self, id: i64) -> Result<Option<TaskInfo>> {
        let sql = self.sql(&format!(
            "SELECT {TASK_INFO} FROM @.tasks t WHERE id = $1 AND queue = $2"
        ));
        self.read(|conn| {
            conn.query(&sql, &[&id, &self.queue])?
                .first()
                .map(info_from_row)
                .transpose()
        })
    }

    fn timings_since(&self, since: i64, limit: usize) -> Result<Vec<TaskTiming>> {
        let sql = self.sql(TIMINGS);
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &since, &limit])?
                .iter()
                .map(timing_from_row)
                .collect()
        })
    }

    fn list(&self, state: TaskState, from: ListFrom, limit: usize) -> Result<Vec<TaskInfo>> {
        let sql = self.sql(&list_sql(state, from));
        let limit = limit.min(i64::MAX as usize) as i64;
        let (ListFrom::After(bound) | ListFrom::Before(bound)) = from;
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &bound, &limit])?
                .iter()
                .map(info_from_row)
                .collect()
        })
    }

    fn task_with_unique_key(&self, key: &str) -> Result<Option<TaskInfo>> {
        let sql = self.sql(&format!(
            "SELECT {TASK_INFO} FROM @.tasks t WHERE queue = $1 AND unique_key = $2"
        ));
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &key])?
                .first()
                .map(info_from_row)
                .transpose()
        })
    }

    fn retry_dead(&self, id: Option<i64>, _now: i64) -> Result<u64> {
        self.write(|tx| {
            // See `Store::retry_dead`: each dead task of a group rejoins it
            // at the back of its line, after the one retried before it.
            let grouped: Vec<(i64, String)> = tx
                .query(&self.sql(DEAD_IN_GROUPS), &[&self.queue, &id])?
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<_>>()?;
            self.lock_groups(tx, grouped.iter().map(|(_, group)| group.as_str()))?;
            for (task, group) in &grouped {
                let predecessor = self.group_parent(tx, group, 1, &[])?;
                tx.execute(&self.sql(RETRY_GROUPED), &[task, &predecessor.is_some()])?;
                if let Some(parent) = predecessor {
                    tx.execute(&self.sql(ADD_DEPENDENCIES), &[&vec![parent], task, &true])?;
                }
            }
            let retried =
                tx.execute(&self.sql(RETRY_DEAD), &[&self.queue, &id])? + grouped.len() as u64;
            if retried > 0 {
                self.notify(tx, &self.queue)?;
            }
            Ok(retried)
        })
    }

    fn purge(&self, state: TaskState, _now: i64, older_than: i64) -> Result<u64> {
        let sql = match state {
            TaskState::Done => {
                "DELETE FROM @.tasks WHERE queue = $1 AND state = 2 AND finished_at <= NOW_MS - $2"
            }
            TaskState::Dead => {
                "DELETE FROM @.tasks WHERE queue = $1 AND state = 3 AND finished_at <= NOW_MS - $2"
            }
            TaskState::Cancelled => {
                "DELETE FROM @.tasks WHERE queue = $1 AND state = 5 AND finished_at <= NOW_MS - $2"
            }
            TaskState::Pending | TaskState::Leased => {
                return Err(Error::invalid_argument(
                    "only done, dead and cancelled tasks can be purged",
                ))
            }
        };
        let sql = self.sql(sql);
        self.write(|tx| tx.execute(&sql, &[&self.queue, &older_than]))
    }

    fn cancel_task(&self, id: i64, reason: &str, _now: i64) -> Result<Cancelled> {
        let reason = stored_reason(reason);
        self.write(|tx| {
            let state: Option<i16> = tx
                .query_opt(
                    &self.sql("SELECT state FROM @.tasks WHERE id = $1 AND queue = $2 FOR UPDATE"),
                    &[&id, &self.queue],
                )?
                .map(|row| row.try_get(0))
                .transpose()?;
            match state.map(i64::from) {
                None => Err(Error::invalid_argument(format!(
                    "queue '{}' has no task {id}",
                    self.queue
                ))),
                Some(DONE) => Err(Error::invalid_argument(format!(
                    "task {id} is done: a finished task cannot be cancelled"
                ))),
                Some(CANCELLED) => Ok(Cancelled::Removed),
                Some(CANCELLING) => Ok(Cancelled::Requested),
                Some(LEASED) => {
                    tx.execute(
                        &self.sql(
                            "UPDATE @.tasks SET state = 6, last_error = coalesce($2, last_error)
                             WHERE id = $1",
                        ),
                        &[&id, &reason],
                    )?;
                    self.notify(tx, &cancellations_channel(&self.queue))?;
                    Ok(Cancelled::Requested)
                }
                Some(_) => {
                    self.end_as_cancelled(tx, id, reason)?;
                    Ok(Cancelled::Removed)
                }
            }
        })
    }

    fn end_cancelled(&self, receipt: Receipt, _now: i64) -> Result<bool> {
        self.write(|tx| {
            let cancelling = tx
                .query_opt(
                    &self.sql(
                        "SELECT 1 FROM @.tasks WHERE id = $1 AND state = 6 AND lease_token = $2
                         FOR UPDATE",
                    ),
                    &[&receipt.id, &receipt.token],
                )?
                .is_some();
            if cancelling {
                self.end_as_cancelled(tx, receipt.id, None)?;
                if self.limited.load(Ordering::Relaxed) {
                    self.notify(tx, &self.queue)?;
                }
            }
            Ok(cancelling)
        })
    }

    fn delivery(&self, receipt: Receipt) -> Result<Option<Stop>> {
        let sql = self.sql(
            "SELECT state FROM @.tasks
             WHERE id = $1 AND lease_token = $2 AND (state = 1 OR state = 6)",
        );
        let state: Option<i16> = self.read(|conn| {
            conn.query(&sql, &[&receipt.id, &receipt.token])?
                .first()
                .map(|row| Ok(row.try_get(0)?))
                .transpose()
        })?;
        Ok(delivery_stop(state.map(i64::from)))
    }

    fn cancellations(&self) -> Result<(Arc<Bell>, Duration)> {
        Ok((
            Arc::clone(&self.cancellations.bell),
            CANCELLATIONS_SAFETY_NET,
        ))
    }

    fn snooze(&self, receipt: Receipt, _now: i64, delay: i64) -> Result<()> {
        self.write(|tx| {
            let snoozed = tx.execute(
                &self.sql(
                    "UPDATE @.tasks
                     SET state = CASE WHEN $3::int8 <= 0 THEN 0 ELSE 4 END, run_at = NOW_MS + $3,
                         attempts = attempts - 1,
                         lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
                     WHERE id = $1 AND state = 1 AND lease_token = $2",
                ),
                &[&receipt.id, &receipt.token, &delay],
            )?;
            if snoozed == 0 {
                return Err(not_held(receipt.id));
            }
            self.notify(tx, &self.queue)
        })
    }

    fn set_pause(&self, pause: Option<Pause>) -> Result<()> {
        let until = pause.map(pause_until);
        self.write(|tx| {
            tx.execute(
                &self.sql(
                    "INSERT INTO @.queues (queue, paused_until) VALUES ($1, $2)
                     ON CONFLICT (queue) DO UPDATE SET paused_until = excluded.paused_until",
                ),
                &[&self.queue, &until],
            )?;
            if pause.is_none() {
                self.notify(tx, &self.queue)?;
            }
            Ok(())
        })
    }

    fn set_concurrency_limit(&self, limit: Option<u32>) -> Result<()> {
        let limit = limit.map(i64::from);
        self.write(|tx| {
            tx.execute(
                &self.sql(
                    "INSERT INTO @.queues (queue, max_leased) VALUES ($1, $2)
                     ON CONFLICT (queue) DO UPDATE SET max_leased = excluded.max_leased",
                ),
                &[&self.queue, &limit],
            )?;
            self.notify(tx, &self.queue)
        })?;
        self.limited.store(limit.is_some(), Ordering::Relaxed);
        Ok(())
    }

    fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        let period = limit.map(|limit| limit.per.as_millis() as i64);
        self.write(|tx| {
            // Locks the settings, so that two calls at once see each other.
            tx.execute(
                &self.sql(
                    "INSERT INTO @.queues (queue) VALUES ($1)
                     ON CONFLICT (queue) DO UPDATE SET queue = excluded.queue",
                ),
                &[&self.queue],
            )?;
            let in_force = rate_limit_in(&tx.query(&self.sql(RATE_LIMIT), &[&self.queue])?)?;
            if in_force == limit {
                return Ok(());
            }
            tx.execute(
                &self.sql("UPDATE @.queues SET rate_period = $2 WHERE queue = $1"),
                &[&self.queue, &period],
            )?;
            // The most recent uses carry over to the new rate, so that
            // declaring a rate again grants no burst the old one refused.
            let mut newest_first: Vec<i64> = tx
                .query(
                    &self.sql("DELETE FROM @.rate_slots WHERE queue = $1 RETURNING used_at"),
                    &[&self.queue],
                )?
                .iter()
                .map(|row| row.try_get(0))
                .collect::<std::result::Result<_, _>>()?;
            newest_first.sort_unstable_by(|a, b| b.cmp(a));
            if let Some(limit) = limit {
                let claims = i64::from(limit.claims);
                tx.execute(
                    &self.sql(
                        "INSERT INTO @.rate_slots (queue, slot, used_at)
                         SELECT $1, slot, coalesce(($3::int8[])[slot + 1], $4)
                         FROM generate_series(0, $2::int8 - 1) AS slot",
                    ),
                    &[&self.queue, &claims, &newest_first, &NEVER_USED],
                )?;
            }
            self.notify(tx, &self.queue)
        })
    }

    fn rate_limit(&self) -> Result<Option<RateLimit>> {
        let sql = self.sql(RATE_LIMIT);
        self.read(|conn| rate_limit_in(&conn.query(&sql, &[&self.queue])?))
    }

    fn concurrency_limit(&self) -> Result<Option<u32>> {
        let sql = self.sql("SELECT max_leased FROM @.queues WHERE queue = $1");
        self.read(|conn| {
            let rows = conn.query(&sql, &[&self.queue])?;
            let limit: Option<i64> = rows
                .first()
                .map(|row| row.try_get(0))
                .transpose()?
                .flatten();
            Ok(limit.map(|limit| u32::try_from(limit).unwrap_or(u32::MAX)))
        })
    }

    fn pause(&self, _now: i64) -> Result<Option<Pause>> {
        let sql = self.sql(PAUSED_UNTIL);
        self.read(|conn| {
            let rows = conn.query(&sql, &[&self.queue])?;
            Ok(rows
                .first()
                .map(|row| row.try_get::<_, i64>(0))
                .transpose()?
                .map(stored_pause))
        })
    }

    fn checkpoint(&self) -> Result<Checkpoint> {
        Err(no_wal_file())
    }

    fn wal_size(&self) -> Result<u64> {
        Err(no_wal_file())
    }

    fn next_claimable(&self, now: i64) -> Result<Option<i64>> {
        let until: Option<i64> = self.read_value(
            NEXT_CLAIMABLE,
            &[&self.queue, &SLOT_WANT_RENEWED_BEFORE_END],
        )?;
        // The server says how long until then; the engine waits on its clock.
        Ok(until.map(|until| now.saturating_add(until.max(0))))
    }

    fn change_counter(&self) -> Result<i64> {
        Ok(self
            .waiters
            .changes
            .load(std::sync::atomic::Ordering::SeqCst))
    }

    fn queue_names(&self) -> Result<Vec<String>> {
        let sql = self.sql(&queue_names_sql());
        self.read(|conn| {
            conn.query(&sql, &[])?
                .iter()
                .map(|row| Ok(row.try_get(0)?))
                .collect()
        })
    }

    fn put_schedule(&self, schedule: &Schedule, put: PutSchedule, _now: i64) -> Result<()> {
        self.put_schedule_row(schedule, put)
    }

    fn remove_schedule(&self, name: &str) -> Result<bool> {
        self.remove_schedule_row(name)
    }

    fn set_schedule_paused(&self, name: &str, paused: bool, _now: i64) -> Result<bool> {
        self.set_schedule_row_paused(name, paused)
    }

    fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        self.schedule_rows()
    }

    fn run_due_schedules(&self, _now: i64) -> Result<u64> {
        self.run_due_schedule_rows()
    }

    fn next_schedule_slot(&self, now: i64) -> Result<Option<i64>> {
        self.next_schedule_row_slot(now)
    }

    fn last_id(&self) -> Result<i64> {
        self.read_value(LAST_ID, &[])
    }

    fn store_id(&self) -> u128 {
        // Drawn at random when the schema was created (migration 2).
        u128::from(self.store_id as u64)
    }
}

/// The queues with a task in any state, sorted: in each state's partial
/// index (all start with the queue's name), a skip from name to name. The
/// states are literals, so that each partial index can serve its branch.
fn queue_names_sql() -> String {
    let states = [0, 1, 2, 3, 4, 7];
    let branches: Vec<String> = states
        .iter()
        .map(|state| {
            format!(
                "n{state}(name) AS (
                    SELECT min(queue) FROM @.tasks WHERE state = {state}
                    UNION ALL
                    SELECT (SELECT min(queue) FROM @.tasks WHERE state = {state} AND queue > n{state}.name)
                    FROM n{state} WHERE n{state}.name IS NOT NULL)"
            )
        })
        .collect();
    let names: Vec<String> = states
        .iter()
        .map(|state| format!("SELECT name FROM n{state} WHERE name IS NOT NULL"))
        .collect();
    format!(
        "WITH RECURSIVE {} {} ORDER BY 1",
        branches.join(", "),
        names.join(" UNION ")
    )
}

/// The last value the tasks' id sequence handed out, 0 before the first.
const LAST_ID: &str = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM @.tasks_id_seq";

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::options::{OpenOptions, PushOptions};

    /// The test server's URL, or `None` after saying why the test is skipped.
    fn server(test: &str) -> Option<String> {
        let url = std::env::var("TQ_TEST_POSTGRES_URL").ok();
        if url.is_none() {
            let _ = writeln!(
                std::io::stderr(),
                "skipped {test}: TQ_TEST_POSTGRES_URL is not set (`make test-postgres` sets it)"
            );
        }
        url
    }

    fn unix_ms() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    }

    #[test]
    fn times_come_from_the_server_clock_whatever_the_client_says() {
        let Some(url) = server("times_come_from_the_server_clock_whatever_the_client_says") else {
            return;
        };
        let schema = format!("unit_clock_{}", std::process::id());
        let mut options = OpenOptions::new();
        options.postgres_schema(&schema).unwrap();
        let store = PostgresStore::open(&url, &options).unwrap();
        // A client whose clock is off by a day either way.
        let (past, future) = (unix_ms() - 86_400_000, unix_ms() + 86_400_000);
        let task = NewTask::new("1", &PushOptions::new(), future, 3);
        store.push(vec![task], future).unwrap();
        let claimed = store.claim(1, past, 60_000).unwrap().pop().unwrap();
        let now = unix_ms();
        assert!(
            (claimed.run_at_unix_ms - now).abs() < 10_000,
            "pushed at the server's time, not the client's: {} vs {now}",
            claimed.run_at_unix_ms
        );
        let lease_ends: i64 = store
            .read_value(
                "SELECT lease_expires_at FROM @.tasks WHERE id = $1",
                &[&claimed.id()],
            )
            .unwrap();
        assert!(
            (lease_ends - (now + 60_000)).abs() < 10_000,
            "the lease runs from the server's time"
        );
        // The engine waits on its own clock: the due time comes back in it.
        let due = store.next_claimable(past).unwrap().unwrap();
        assert!((due - (past + 60_000)).abs() < 10_000, "{due}");
        assert_eq!(
            store.recover(future).unwrap(),
            0,
            "the lease has not expired"
        );
        drop(store);
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }

    #[test]
    fn durability_and_busy_timeout_become_session_settings() {
        let Some(url) = server("durability_and_busy_timeout_become_session_settings") else {
            return;
        };
        for (durability, expected) in [
            (crate::Durability::Full, "on"),
            (crate::Durability::Normal, "off"),
        ] {
            let mut options = OpenOptions::new();
            options
                .durability(durability)
                .busy_timeout(std::time::Duration::ZERO)
                .unwrap();
            let connector = super::super::pool::Connector::new(&url, &options).unwrap();
            let mut client = connector.connect().unwrap();
            let setting = |client: &mut postgres::Client, name: &str| -> String {
                client
                    .query_one(&format!("SHOW {name}"), &[])
                    .unwrap()
                    .get(0)
            };
            assert_eq!(setting(&mut client, "synchronous_commit"), expected);
            assert_eq!(
                setting(&mut client, "lock_timeout"),
                "1ms",
                "0 is no limit there"
            );
        }
    }

    /// Opens schema `schema` afresh on queue `queue`.
    fn fresh_store(url: &str, schema: &str, queue: &str) -> PostgresStore {
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .unwrap();
        let mut options = OpenOptions::new();
        options
            .postgres_schema(schema)
            .unwrap()
            .queue(queue)
            .unwrap();
        PostgresStore::open(url, &options).unwrap()
    }

    #[test]
    fn pending_tasks_are_counted_and_listed_through_the_partial_indexes() {
        let Some(url) = server("pending_tasks_are_counted_and_listed_through_the_partial_indexes")
        else {
            return;
        };
        let schema = format!("unit_plans_{}", std::process::id());
        let store = fresh_store(&url, &schema, "default");
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // History dwarfs the pending tasks, as on a queue that keeps it.
        client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".tasks
                     (queue, state, payload, created_at, run_at, max_attempts, finished_at)
                 SELECT 'default', CASE WHEN i % 1000 = 0 THEN i % 3000 / 1000 * 4 ELSE 2 END,
                        '1', 0, i, 3, i
                 FROM generate_series(1, 100000) AS i;
                 ANALYZE \"{schema}\".tasks"
            ))
            .unwrap();
        for (sql, bound) in [
            (count_sql(TaskState::Pending), 0),
            (list_sql(TaskState::Pending, ListFrom::After(0)), 0),
            (
                list_sql(TaskState::Pending, ListFrom::Before(i64::MAX)),
                i64::MAX,
            ),
        ] {
            let sql = store
                .sql(&sql)
                .replace("$1", "'default'")
                .replace("$2", &bound.to_string())
                .replace("$3", "100");
            let plan: Vec<String> = client
                .query(&format!("EXPLAIN {sql}"), &[])
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            let plan = plan.join("\n");
            assert!(!plan.contains("Seq Scan"), "{sql}\n{plan}");
            assert!(
                plan.contains("tasks_ready") && plan.contains("tasks_waiting"),
                "{sql}\n{plan}"
            );
        }
        assert_eq!(store.count(TaskState::Pending).unwrap(), 67);
        assert_eq!(
            store
                .list(TaskState::Pending, ListFrom::After(0), 1000)
                .unwrap()
                .len(),
            67
        );
        drop(store);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }

    #[test]
    fn claiming_stays_an_index_lookup_with_a_million_blocked_tasks() {
        let Some(url) = server("claiming_stays_an_index_lookup_with_a_million_blocked_tasks")
        else {
            return;
        };
        let schema = format!("unit_blocked_{}", std::process::id());
        let store = fresh_store(&url, &schema, "default");
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".tasks
                     (queue, state, payload, created_at, run_at, max_attempts, waiting_for)
                 SELECT 'default', 7, '1', 0, i, 3, 1 FROM generate_series(1, 1000000) AS i;
                 INSERT INTO \"{schema}\".dependencies (parent, task, run_anyway)
                 SELECT 1, id, false FROM \"{schema}\".tasks;
                 INSERT INTO \"{schema}\".tasks (queue, state, payload, created_at, run_at, max_attempts)
                 VALUES ('default', 0, '2', 0, 5, 3);
                 ANALYZE \"{schema}\".tasks;
                 ANALYZE \"{schema}\".dependencies"
            ))
            .unwrap();
        let claim = store
            .sql(CLAIM)
            .replace("$1", "'default'")
            .replace("$2", "1")
            .replace("$3", "1000")
            .replace("$4", "1")
            .replace("$5", "false")
            .replace("$6", "false")
            .replace("$7", "false");
        let plan: Vec<String> = client
            .query(&format!("EXPLAIN {claim}"), &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        let plan = plan.join("\n");
        assert!(!plan.contains("Seq Scan"), "{plan}");
        let tasks = store.claim(1, 0, 1000).unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].payload(), "2");
        // A finish of a task nobody waits for calls no trigger function;
        // one waited for finds the tasks waiting by the primary key.
        let take: Vec<String> = client
            .query(
                &format!("EXPLAIN DELETE FROM \"{schema}\".dependencies WHERE parent = 2"),
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(!take.join("\n").contains("Seq Scan"), "{take:?}");
        drop(store);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }

    #[test]
    fn claiming_stays_an_index_lookup_with_a_thousand_groups_of_a_hundred() {
        let Some(url) =
            server("claiming_stays_an_index_lookup_with_a_thousand_groups_of_a_hundred")
        else {
            return;
        };
        let schema = format!("unit_groups_{}", std::process::id());
        let store = fresh_store(&url, &schema, "default");
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // What pushes of 100 rounds to 1,000 groups store: each group's
        // head ready, each other task blocked by the one before it.
        client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".tasks
                     (id, queue, state, payload, created_at, run_at, max_attempts, waiting_for,
                      has_children, group_key)
                 SELECT i, 'default', CASE WHEN i <= 1000 THEN 0 ELSE 7 END, '1', 0, i, 3,
                        CASE WHEN i <= 1000 THEN 0 ELSE 1 END, i <= 99000, 'g' || (i % 1000)
                 FROM generate_series(1, 100000) AS i;
                 INSERT INTO \"{schema}\".dependencies (parent, task, run_anyway)
                 SELECT i - 1000, i, true FROM generate_series(1001, 100000) AS i;
                 SELECT setval(pg_get_serial_sequence('\"{schema}\".tasks', 'id'), 100000);
                 ANALYZE \"{schema}\".tasks;
                 ANALYZE \"{schema}\".dependencies"
            ))
            .unwrap();
        let explain = |client: &mut postgres::Client, sql: &str| -> String {
            let plan: Vec<String> = client
                .query(&format!("EXPLAIN {sql}"), &[])
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            plan.join("\n")
        };
        let claim = store
            .sql(CLAIM)
            .replace("$1", "'default'")
            .replace("$2", "1")
            .replace("$3", "1000")
            .replace("$4", "1")
            .replace("$5", "false")
            .replace("$6", "false")
            .replace("$7", "false");
        let plan = explain(&mut client, &claim);
        assert!(!plan.contains("Seq Scan"), "{plan}");
        let predecessor = store
            .sql(&group_predecessor_sql("@.tasks", '$'))
            .replace("$1", "'default'")
            .replace("$2", "'g7'")
            .replace("$3", "0");
        let plan = explain(&mut client, &predecessor);
        assert!(plan.contains("tasks_group"), "{plan}");
        // The timings a monitor samples: each kind through its index.
        let timings = store
            .sql(TIMINGS)
            .replace("$1", "'default'")
            .replace("$2", "0")
            .replace("$3", "10000");
        let plan = explain(&mut client, &timings);
        assert!(!plan.contains("Seq Scan"), "{plan}");
        for index in ["tasks_leased", "tasks_done", "tasks_dead"] {
            assert!(plan.contains(index), "{index}: {plan}");
        }
        let tasks = store.claim(1, 0, 1000).unwrap();
        assert_eq!(tasks.len(), 1);
        assert!(tasks[0].receipt().id() <= 1000, "a group's head");
        // A push to a group waits for the group's newest task.
        let mut options = PushOptions::new();
        options.group("g7", 1).unwrap();
        let pushed = store
            .push(vec![NewTask::new("1", &options, 0, 3)], 0)
            .unwrap();
        let info = store.task(pushed[0].id()).unwrap().unwrap();
        assert_eq!(info.waiting_for(), [99_007]);
        assert_eq!(info.group(), Some("g7"));
        drop(store);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }

    /// Waits (up to a generous bound) until `bell` has rung after `seen`.
    fn rung_after(bell: &crate::wait::Bell, seen: u64) -> bool {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        bell.sleep(seen, until, || false);
        bell.rings() > seen
    }

    #[test]
    fn a_notification_wakes_only_the_waiters_of_its_queue() {
        let Some(url) = server("a_notification_wakes_only_the_waiters_of_its_queue") else {
            return;
        };
        let schema = format!("unit_wakes_{}", std::process::id());
        let a = fresh_store(&url, &schema, "a");
        let mut options = OpenOptions::new();
        options
            .postgres_schema(&schema)
            .unwrap()
            .queue("b")
            .unwrap();
        let b = PostgresStore::open(&url, &options).unwrap();
        let (bell_a, bell_b) = (a.bell(), b.bell());
        let task = |payload: &str| vec![NewTask::new(payload, &PushOptions::new(), 0, 3)];

        // Notifications are heard in order: once a's push is heard, the
        // listener's start is behind us too.
        let seen = bell_a.rings();
        a.push(task("1"), 0).unwrap();
        assert!(rung_after(&bell_a, seen), "a push to a wakes a's waiters");

        let (seen_a, seen_b) = (bell_a.rings(), bell_b.rings());
        b.push(task("2"), 0).unwrap();
        assert!(rung_after(&bell_b, seen_b), "a push to b wakes b's waiters");
        assert_eq!(
            bell_a.rings(),
            seen_a,
            "a push to b leaves a's waiters asleep"
        );

        a.push(task("3"), 0).unwrap();
        assert!(rung_after(&bell_a, seen_a), "and a push to a wakes them");
        drop((a, b));
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }
}
