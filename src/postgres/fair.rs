//! Fair shares by key on PostgreSQL: a fair queue's line of keys, their
//! weights, and the claim that serves them in turn ([`PICK_TURN`]), with
//! the semantics of SQLite's (`src/sqlite/fair.rs`, [`fair_pass_after`]).
//!
//! A queue becomes fair with its first fairness key (a push that names one,
//! or a weight set): a row in `fair_queues`, and the empty key in its line
//! for the tasks pushed without one. The line (`fair_keys`) holds a row
//! per key with tasks not yet ended: its pass, and where its last turn
//! started. A claim locks the first key in line (smallest pass, then key)
//! that has a task it can take, skipping keys other claims hold, so that
//! concurrent claims serve different keys; it takes that key's best task,
//! in the claim's usual order, and moves the key's pass on one stride in
//! the same statement. The keys before it with nothing to take forfeit the
//! turn (their pass moves up to the served key's), so none banks credit
//! while idle; a key new to the line starts where the latest turn started.
//! A key left with no task not yet ended leaves the line at the next claim
//! that passes over it; a push holds its keys' rows (`FOR KEY SHARE`)
//! until it commits, so that no claim removes a key a push is adding a
//! task to.
//!
//! Lock order: a push takes its groups' locks, then its cap's
//! (`LOCK_ROOM`), then its keys' rows in key order, then its tasks; a
//! claim takes its settings' lock (limited queues only), then a key's row
//! and tasks, skipping locked rows; only a claim that holds no key yet
//! waits for one (every key with a task held by others), so no claim
//! waits while holding a key, and no push waits for a claim but one
//! removing a key the push found gone a moment before.

use std::sync::atomic::Ordering;

use postgres::Row;

use super::claim::{task_from_row, CLAIM};
use super::pool::{Params, Tx};
use super::PostgresStore;
use crate::error::Result;
use crate::store::{fair_pass_after, NewTask, DEFAULT_FAIR_WEIGHT, NO_FAIR_KEY};
use crate::task::{Pushed, Task};

/// Migration 15: SQLite's version 14, fair shares by key. `fair_key` is a
/// task's key (NULL in a queue that is not fair); the partial indexes on
/// it are empty for other queues, so that they cost those nothing.
pub(super) const FAIR_SHARES: &str = "ALTER TABLE @.tasks ADD COLUMN fair_key text;
    CREATE TABLE @.fair_queues (queue text PRIMARY KEY);
    CREATE TABLE @.fair_keys (
        queue      text NOT NULL,
        fair_key   text NOT NULL,
        pass       double precision NOT NULL,
        turn_start double precision NOT NULL,
        PRIMARY KEY (queue, fair_key)
    );
    CREATE INDEX fair_keys_line ON @.fair_keys (queue, pass, fair_key);
    CREATE INDEX fair_keys_turns ON @.fair_keys (queue, turn_start);
    CREATE TABLE @.fair_weights (
        queue    text NOT NULL,
        fair_key text NOT NULL,
        weight   double precision NOT NULL,
        PRIMARY KEY (queue, fair_key)
    );
    CREATE INDEX tasks_fair_ready ON @.tasks (queue, fair_key, priority DESC, run_at, id)
        WHERE state = 0 AND fair_key IS NOT NULL;
    CREATE INDEX tasks_fair_due ON @.tasks (queue, fair_key, run_at)
        WHERE state = 4 AND fair_key IS NOT NULL;
    CREATE INDEX tasks_fair_leased ON @.tasks (queue, fair_key, lease_expires_at)
        WHERE state = 1 AND fair_key IS NOT NULL;
    CREATE INDEX tasks_fair_held ON @.tasks (queue, fair_key, id)
        WHERE (state = 6 OR state = 7) AND fair_key IS NOT NULL;";

/// Where queue `$1`'s latest turn started: its line, where a key that
/// comes back starts. One probe of `fair_keys_turns`.
macro_rules! line_start {
    () => {
        "(SELECT coalesce(max(turn_start), 0) FROM @.fair_keys WHERE queue = $1)"
    };
}

/// Whether key row `k` of queue `$1` has a task a claim can take now: a
/// ready one within its limits, a waiting one due, or a leased one whose
/// lease expired (as [`CLAIM`]'s candidates). Scalar subqueries with a
/// LIMIT, so that each is a probe per key (an EXISTS may become a hash of
/// every task), each in the order of its partial index, so that the plan
/// reads that index whatever the statistics say of the keys (a scan of the
/// queue's tasks would then need a sort).
macro_rules! has_candidate {
    () => {
        "coalesce(
            (SELECT true FROM @.tasks t WHERE t.queue = $1 AND t.fair_key = k.fair_key
             AND t.state = 0 AND (t.not_after IS NULL OR t.not_after > NOW_MS)
             ORDER BY t.priority DESC, t.run_at, t.id LIMIT 1),
            (SELECT true FROM @.tasks t WHERE t.queue = $1 AND t.fair_key = k.fair_key
             AND t.state = 4 AND t.run_at <= NOW_MS ORDER BY t.run_at LIMIT 1),
            (SELECT true FROM @.tasks t WHERE t.queue = $1 AND t.fair_key = k.fair_key
             AND t.state = 1 AND t.lease_expires_at <= NOW_MS ORDER BY t.lease_expires_at LIMIT 1),
            false)"
    };
}

/// Whether key row `k` of queue `$1` has a task not yet ended: a probe
/// of each partial index, as [`has_candidate!`].
macro_rules! has_task {
    () => {
        "coalesce(
            (SELECT true FROM @.tasks t WHERE t.queue = $1 AND t.fair_key = k.fair_key
             AND t.state = 0 ORDER BY t.priority DESC, t.run_at, t.id LIMIT 1),
            (SELECT true FROM @.tasks t WHERE t.queue = $1 AND t.fair_key = k.fair_key
             AND t.state = 4 ORDER BY t.run_at LIMIT 1),
            (SELECT true FROM @.tasks t WHERE t.queue = $1 AND t.fair_key = k.fair_key
             AND t.state = 1 ORDER BY t.lease_expires_at LIMIT 1),
            (SELECT true FROM @.tasks t WHERE t.queue = $1 AND t.fair_key = k.fair_key
             AND (t.state = 6 OR t.state = 7) ORDER BY t.id LIMIT 1),
            false)"
    };
}

/// Makes queue `$1` fair; answers a row when it was not yet.
const MAKE_FAIR: &str =
    "INSERT INTO @.fair_queues (queue) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1";

/// The tasks of queue `$1` not yet ended, pushed before it was fair, join
/// the empty key `$2`: once per queue.
const SHARE_THE_EMPTY_KEY: &str = "UPDATE @.tasks SET fair_key = $2
    WHERE queue = $1 AND fair_key IS NULL AND state IN (0, 1, 4, 6, 7)";

/// Puts keys `$2` (sorted, distinct) of queue `$1` in line, those not in
/// it yet starting at the line ([`line_start!`]).
const JOIN_LINE: &str = concat!(
    "INSERT INTO @.fair_keys (queue, fair_key, pass, turn_start)
    SELECT $1, key, s.at, s.at FROM unnest($2::text[]) AS key, (SELECT ",
    line_start!(),
    " AS at) s
    ORDER BY key
    ON CONFLICT (queue, fair_key) DO NOTHING"
);

/// Holds the rows of keys `$2` of queue `$1` in line until the push
/// commits, in key order: no claim removes them meanwhile (claims remove
/// a key skipping locked rows). Answers the keys held.
const HOLD_LINE: &str = "SELECT fair_key FROM @.fair_keys
    WHERE queue = $1 AND fair_key = ANY ($2::text[]) ORDER BY fair_key FOR KEY SHARE";

/// Sets the keys of the tasks just pushed, `$1` by id, to `$2` (NULL: the
/// empty key), in a queue `$3` that is fair.
const SET_TASK_KEYS: &str = "UPDATE @.tasks t SET fair_key = coalesce(u.key, $4)
    FROM unnest($1::int8[], $2::text[]) AS u(id, key)
    WHERE t.id = u.id AND EXISTS (SELECT 1 FROM @.fair_queues WHERE queue = $3)";

/// The turn of fair queue `$1`: the first key in line that has a task a
/// claim can take, locked (skipping keys other claims hold), with its pass
/// and its weight (`$2` unless one was set). The keys before it in line,
/// with no task to take, forfeit the turn, skipping those locked: those
/// with a task not yet ended (and the empty key) move up to its pass, the
/// others leave the line (a push holds the keys it adds to, so none it
/// adds a task to leaves). Through `fair_keys_line`, stopping at the first
/// key with a candidate. A key skipped because another claim holds it
/// keeps its pass: it is served once free.
pub(super) const PICK_TURN: &str = concat!(
    "WITH pick AS (
        SELECT k.fair_key, k.pass FROM @.fair_keys k
        WHERE k.queue = $1 AND ",
    has_candidate!(),
    "
        ORDER BY k.pass, k.fair_key LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED),
    passed AS (
        SELECT k.fair_key, k.fair_key = '' OR ",
    has_task!(),
    " AS stays
        FROM @.fair_keys k
        WHERE k.queue = $1
          AND (k.pass, k.fair_key) < (coalesce((SELECT pass FROM pick), 'Infinity'),
                                      coalesce((SELECT fair_key FROM pick), ''))
          AND NOT ",
    has_candidate!(),
    "
        FOR UPDATE SKIP LOCKED),
    gone AS (
        DELETE FROM @.fair_keys d WHERE d.queue = $1
          AND d.fair_key = ANY (ARRAY(SELECT fair_key FROM passed WHERE NOT stays))),
    forfeited AS (
        UPDATE @.fair_keys f SET pass = (SELECT pass FROM pick) WHERE f.queue = $1
          AND f.fair_key = ANY (ARRAY(SELECT fair_key FROM passed WHERE stays))
          AND EXISTS (SELECT 1 FROM pick))
    SELECT p.fair_key, p.pass,
           coalesce((SELECT weight FROM @.fair_weights w
                     WHERE w.queue = $1 AND w.fair_key = p.fair_key), $2::float8)
    FROM pick p"
);

/// The part of the claim of a key's turn ([`CLAIM`] narrowed to key `$9`)
/// that moves the key on when it took a task: its turn started at `$10`,
/// its next starts at `$11`. In the claim's statement, so that the key is
/// held no longer than it takes.
const END_TURN: &str = ",
    turned AS (
        UPDATE @.fair_keys SET turn_start = $10, pass = $11
        WHERE queue = $1 AND fair_key = $9 AND EXISTS (SELECT 1 FROM taken))
    SELECT id, lease_token";

/// Puts back in line the keys of queue `$1` with ready tasks that left it
/// (dead tasks retried), starting at the line.
const REJOIN_LINE: &str = concat!(
    "INSERT INTO @.fair_keys (queue, fair_key, pass, turn_start)
    SELECT DISTINCT $1, t.fair_key, s.at, s.at FROM @.tasks t, (SELECT ",
    line_start!(),
    " AS at) s
    WHERE t.queue = $1 AND t.state = 0 AND t.fair_key IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM @.fair_keys k WHERE k.queue = $1 AND k.fair_key = t.fair_key)
    ON CONFLICT (queue, fair_key) DO NOTHING"
);

/// Sets the weight of key `$2` of queue `$1` to `$3`.
const SET_WEIGHT: &str = "INSERT INTO @.fair_weights (queue, fair_key, weight) VALUES ($1, $2, $3)
    ON CONFLICT (queue, fair_key) DO UPDATE SET weight = excluded.weight";

/// The weight set for key `$2` of queue `$1`, if one was.
const WEIGHT: &str = "SELECT weight FROM @.fair_weights WHERE queue = $1 AND fair_key = $2";

/// [`CLAIM`] with its candidates (ready, expired, due) narrowed to key
/// `$9`, moving the key on when it takes a task ([`END_TURN`]).
pub(super) fn claim_of_turn() -> String {
    let sql = claim_narrowed("fair_key = $9");
    let end = "\n    SELECT id, lease_token";
    assert!(sql.contains(end), "CLAIM has no final SELECT");
    sql.replacen(end, END_TURN, 1)
}

/// [`CLAIM`] with its candidates (ready, expired, due) narrowed by
/// `filter`, a condition on a task's `fair_key`.
pub(super) fn claim_narrowed(filter: &str) -> String {
    let mut sql = CLAIM.to_owned();
    for arm in [
        "WHERE queue = $1 AND state = 0 AND (SELECT open",
        "WHERE queue = $1 AND state = 1 AND lease_expires_at <=",
        "WHERE queue = $1 AND state = 4 AND run_at <=",
    ] {
        assert!(sql.contains(arm), "CLAIM has no arm {arm}");
        let narrowed = arm.replacen("queue = $1", &format!("queue = $1 AND {filter}"), 1);
        sql = sql.replacen(arm, &narrowed, 1);
    }
    sql
}

/// What a round of a claim answered: its tasks, how many deliveries it
/// buried as dead, and whether it found the queue limited, or fair, which
/// it was not told.
#[derive(Default)]
pub(super) struct Round {
    pub(super) tasks: Vec<Task>,
    pub(super) buried: usize,
    pub(super) limited: bool,
    pub(super) fair: bool,
}

impl Round {
    /// Reads the rows of [`CLAIM`]: tasks, buried deliveries (NULL token)
    /// and markers (NULL id: 0 a limited queue, 1 a fair one).
    pub(super) fn from_rows(rows: &[Row]) -> Result<Round> {
        let mut round = Round::default();
        for row in rows {
            if row.try_get::<_, Option<i64>>(0)?.is_none() {
                match row.try_get::<_, i64>(2)? {
                    0 => round.limited = true,
                    _ => round.fair = true,
                }
                continue;
            }
            match task_from_row(row)? {
                Some(task) => round.tasks.push(task),
                None => round.buried += 1,
            }
        }
        Ok(round)
    }
}

/// A key's turn, as [`PICK_TURN`] found it.
struct Turn {
    key: String,
    pass: f64,
    weight: f64,
}

impl PostgresStore {
    /// Whether this handle saw its queue fair.
    pub(super) fn seen_fair(&self) -> bool {
        self.fair.load(Ordering::Relaxed)
    }

    /// Makes this queue fair, if it is not yet: its tasks not yet ended
    /// join the empty key, which is in line from then on.
    fn make_fair(&self, tx: &mut Tx<'_>) -> Result<()> {
        if !tx.query(&self.sql(MAKE_FAIR), &[&self.queue])?.is_empty() {
            tx.execute(&self.sql(SHARE_THE_EMPTY_KEY), &[&self.queue, &NO_FAIR_KEY])?;
            let empty = vec![NO_FAIR_KEY.to_owned()];
            tx.execute(&self.sql(JOIN_LINE), &[&self.queue, &empty])?;
        }
        self.fair.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Before a push of `tasks`, some with a fairness key: makes the queue
    /// fair, puts their keys in line and holds them there until the push
    /// commits ([`HOLD_LINE`]).
    pub(super) fn join_line(&self, tx: &mut Tx<'_>, tasks: &[NewTask]) -> Result<()> {
        self.make_fair(tx)?;
        let keys: std::collections::BTreeSet<&str> = tasks
            .iter()
            .filter_map(|task| task.fair_key.as_deref())
            .collect();
        let keys: Vec<&str> = keys.into_iter().collect();
        // A key a claim removed between the two statements is put back.
        loop {
            tx.execute(&self.sql(JOIN_LINE), &[&self.queue, &keys])?;
            if tx.query(&self.sql(HOLD_LINE), &[&self.queue, &keys])?.len() == keys.len() {
                return Ok(());
            }
        }
    }

    /// After a push of `tasks` one at a time, which stored `pushed`: sets
    /// the fairness keys of those stored, if the queue is fair.
    pub(super) fn set_task_keys(
        &self,
        tx: &mut Tx<'_>,
        tasks: &[NewTask],
        pushed: &[Pushed],
    ) -> Result<()> {
        let (ids, keys): (Vec<i64>, Vec<Option<&str>>) = tasks
            .iter()
            .zip(pushed)
            .filter_map(|(task, pushed)| match pushed {
                Pushed::Stored(id) => Some((*id, task.fair_key.as_deref())),
                _ => None,
            })
            .unzip();
        tx.execute(
            &self.sql(SET_TASK_KEYS),
            &[&ids, &keys, &self.queue, &NO_FAIR_KEY],
        )?;
        Ok(())
    }

    /// After dead tasks were retried: their keys that left the line
    /// rejoin it, if the queue is fair.
    pub(super) fn rejoin_line(&self, tx: &mut Tx<'_>) -> Result<()> {
        tx.execute(&self.sql(REJOIN_LINE), &[&self.queue])?;
        Ok(())
    }

    /// Sets the weight of key `key` (`Store::set_fair_weight`), making the
    /// queue fair.
    pub(super) fn set_weight(&self, key: &str, weight: f64) -> Result<()> {
        self.write(|tx| {
            self.make_fair(tx)?;
            tx.execute(&self.sql(SET_WEIGHT), &[&self.queue, &key, &weight])?;
            Ok(())
        })
    }

    /// The weight of key `key` (`Store::fair_weight`).
    pub(super) fn weight(&self, key: &str) -> Result<f64> {
        let rows = self.read(|conn| conn.query(&self.sql(WEIGHT), &[&self.queue, &key]))?;
        let weight: Option<f64> = rows.first().map(|row| row.try_get(0)).transpose()?;
        Ok(weight.unwrap_or(DEFAULT_FAIR_WEIGHT))
    }

    /// Claims up to `max` tasks of this fair queue, one key's turn at a
    /// time, with `run` in a transaction (each key stays locked until it
    /// ends), so that a claim of n tasks delivers what n claims of one
    /// would. `bounded` and `count_leases` are [`CLAIM`]'s `$5` and `$6`:
    /// a limited queue's claim locked its settings first. When no key has
    /// a task to take, the tasks without a key (pushed while the queue
    /// became fair) are claimed as an unfair queue's are. Answers the
    /// tasks, and whether the queue was found limited (not `bounded`): the
    /// claim then stopped, to be made again as a limited queue's.
    pub(super) fn claim_turns(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        max: usize,
        lease_holder: (i64, i32),
        bounds: (bool, bool),
    ) -> Result<(Vec<Task>, bool)> {
        let mut tasks = Vec::new();
        while tasks.len() < max {
            let pick = [
                &self.queue as &(dyn postgres::types::ToSql + Sync),
                &DEFAULT_FAIR_WEIGHT,
            ];
            let mut turn = run(&self.sql(PICK_TURN), &pick)?;
            if turn.is_empty() && tasks.is_empty() {
                // Every key with a task to take may be held by other
                // claims: wait for the first, holding no key (no cycle).
                let waiting = PICK_TURN.replacen("UPDATE SKIP LOCKED", "UPDATE", 1);
                turn = run(&self.sql(&waiting), &pick)?;
            }
            let round = match turn.first() {
                Some(row) => {
                    let turn = Turn {
                        key: row.try_get(0)?,
                        pass: row.try_get(1)?,
                        weight: row.try_get(2)?,
                    };
                    self.take_turn(run, &turn, lease_holder, bounds)?
                }
                None => {
                    let round = self.claim_unkeyed(run, max - tasks.len(), lease_holder, bounds)?;
                    if round.tasks.is_empty() && round.buried == 0 {
                        return Ok((tasks, round.limited));
                    }
                    round
                }
            };
            if round.limited {
                self.limited.store(true, Ordering::Relaxed);
                return Ok((tasks, true));
            }
            if round.tasks.is_empty() && round.buried == 0 {
                // The key's task went to a claim that held it: the turn ends.
                break;
            }
            tasks.extend(round.tasks);
        }
        Ok((tasks, false))
    }

    /// Claims up to `max` tasks of this fair queue that have no key
    /// (pushed while it became fair, or by the SQL function `push`), as an
    /// unfair queue's claim would.
    fn claim_unkeyed(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        max: usize,
        (lease, holder): (i64, i32),
        (bounded, count_leases): (bool, bool),
    ) -> Result<Round> {
        let max = max.min(i64::MAX as usize) as i64;
        Round::from_rows(&run(
            &self.sql(&claim_narrowed("fair_key IS NULL")),
            &[
                &self.queue,
                &max,
                &lease,
                &holder,
                &bounded,
                &count_leases,
                &self.keep_history,
                &true,
            ],
        )?)
    }

    /// Takes key `turn`'s best task, and moves its pass on one stride
    /// ([`fair_pass_after`]). One statement.
    fn take_turn(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        turn: &Turn,
        (lease, holder): (i64, i32),
        (bounded, count_leases): (bool, bool),
    ) -> Result<Round> {
        let one = 1i64;
        let start = turn.pass;
        let next = fair_pass_after(start, turn.weight);
        Round::from_rows(&run(
            &self.sql(&claim_of_turn()),
            &[
                &self.queue,
                &one,
                &lease,
                &holder,
                &bounded,
                &count_leases,
                &self.keep_history,
                &true,
                &turn.key,
                &start,
                &next,
            ],
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_server::{explain, fresh_store, server};
    use super::*;
    use crate::store::Store;

    /// `sql` with its parameters `$1`... replaced by `values`, the last
    /// first (so that `$1` does not match inside `$10`).
    fn with_values(sql: &str, values: &[&str]) -> String {
        let mut sql = sql.to_owned();
        for (n, value) in values.iter().enumerate().rev() {
            sql = sql.replace(&format!("${}", n + 1), value);
        }
        sql
    }

    #[test]
    fn a_fair_claim_stays_index_lookups_with_ten_thousand_keys() {
        let Some(url) = server("a_fair_claim_stays_index_lookups_with_ten_thousand_keys") else {
            return;
        };
        let schema = format!("unit_fair_{}", std::process::id());
        let store = fresh_store(&url, &schema, "default");
        store.set_fair_weight("k7", 2.0).unwrap();
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // Skewed statistics: one key holds 100,000 ready tasks, four hold
        // 100 each, and 10,000 more are in line with none left.
        client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".tasks
                     (queue, state, payload, created_at, run_at, max_attempts, fair_key)
                 SELECT 'default', 0, '1', 0, i, 3,
                        CASE WHEN i <= 100000 THEN 'k0' ELSE 'k' || (i % 4 + 1) END
                 FROM generate_series(1, 100400) AS i;
                 INSERT INTO \"{schema}\".fair_keys (queue, fair_key, pass, turn_start)
                 SELECT 'default', 'k' || i, i, 0 FROM generate_series(0, 10004) AS i;
                 ANALYZE \"{schema}\".tasks;
                 ANALYZE \"{schema}\".fair_keys"
            ))
            .unwrap();
        let pick = with_values(&store.sql(PICK_TURN), &["'default'", "1"]);
        let plan = explain(&mut client, &pick);
        assert!(!plan.contains("Seq Scan"), "{plan}");
        assert!(plan.contains("fair_keys_line"), "{plan}");
        assert!(plan.contains("tasks_fair_ready"), "{plan}");
        let claim = with_values(
            &store.sql(&claim_of_turn()),
            &[
                "'default'",
                "1",
                "1000",
                "1",
                "false",
                "false",
                "false",
                "true",
                "'k3'",
                "3",
                "4",
            ],
        );
        let plan = explain(&mut client, &claim);
        assert!(!plan.contains("Seq Scan"), "{plan}");
        assert!(plan.contains("tasks_fair_ready"), "{plan}");
        // A claim through them takes the turns of the first keys in line.
        let first: Vec<String> = store
            .claim(3, 0, 1000)
            .unwrap()
            .iter()
            .map(|task| task.payload().to_owned())
            .collect();
        assert_eq!(first.len(), 3);
        drop(store);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }
}
