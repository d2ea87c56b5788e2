//! Pushing: how tasks are stored, with their unique keys, the tasks they
//! wait for and their ordered groups; and how a write wakes the waiters
//! of a queue in every process.

use super::pool::{Params, Tx};
use super::PostgresStore;
use crate::error::{Error, Result};
use crate::store::{
    group_predecessor_sql, of_item, parent_ids, Limit, NewTask, CANCELLED, DEAD, DONE, NO_FAIR_KEY,
};
use crate::task::Pushed;

/// Stores tasks without unique keys, in order, and notifies the schema's
/// channel (`$7`, payload the queue `$1`) once: an uncorrelated subquery
/// is run once per statement, not once per row. `$3` is each task's delay from
/// now, or NULL when `$4` gives its time. `check_room` (migration 12 in
/// `schema.rs`) refuses the push first when it would overfill a capped
/// queue; it is called only for a queue with a cap (the count of its calls,
/// an aggregate, is taken before the insert), so that an uncapped queue's
/// push pays a lookup of its settings rather than a PL/pgSQL call. `$8` is
/// each task's fairness key: in a fair queue, NULL stands for the empty
/// key `$9` (see `fair.rs`).
const PUSH: &str = "WITH clock AS (
        SELECT NOW_MS AS now,
               (SELECT count(@.check_room($1, cardinality($2::text[]), 0)) FROM @.queues
                WHERE queue = $1 AND max_pending > 0) AS room,
               (SELECT $9::text FROM @.fair_queues WHERE queue = $1) AS no_key),
    ins AS (
        INSERT INTO @.tasks (queue, state, payload, created_at, run_at, priority, max_attempts,
                             fair_key)
        SELECT $1, CASE WHEN x.run_at <= clock.now THEN 0 ELSE 4 END, u.payload, clock.now,
               x.run_at, u.priority, u.max_attempts, coalesce(u.fair_key, clock.no_key)
        FROM unnest($2::text[], $3::int8[], $4::int8[], $5::int4[], $6::int8[], $8::text[])
                 WITH ORDINALITY AS u(payload, delay, at, priority, max_attempts, fair_key, ord)
             CROSS JOIN clock
             CROSS JOIN LATERAL (SELECT coalesce(clock.now + u.delay, u.at) AS run_at) x
        ORDER BY u.ord
        RETURNING id)
    SELECT id, (SELECT pg_notify($7, $1)::text) FROM ins";

/// Stores one task through the schema's `push_task` (migration 10 in
/// `schema.rs`), which the SQL function `push` calls too: one set of rules
/// for unique keys, the tasks waited for and ordered groups, whichever way
/// a task is pushed. Answers its id and whether it was stored (not: the
/// holder of its unique key).
const PUSH_TASK: &str = "SELECT id, stored
    FROM @.push_task($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// Merges a push into the pending task `$1` holding its unique key
/// (migration 13 in `schema.rs`, store.rs's `merge_sql`); NULL when it
/// did not.
const MERGE_PENDING: &str = "SELECT @.merge_pending($1, $2, $3, $4, $5)";

/// Marks the tasks `$1` of queue `$2` as waited for (so that their end
/// reaches the task waiting, see `schema.rs`) and answers the state of
/// each: the newest, as the rows are locked until the push commits.
const MARK_PARENTS: &str = "UPDATE @.tasks SET has_children = true
    WHERE id = ANY ($1) AND queue = $2 RETURNING id, state";

/// Records that task `$2` waits for the tasks `$1` (`$3`: to run anyway).
pub(super) const ADD_DEPENDENCIES: &str = "INSERT INTO @.dependencies (parent, task, run_anyway)
    SELECT unnest($1::int8[]), $2, $3";

/// Serialises the pushes to ordered group `$1` (a text naming the schema,
/// the queue and the group) until the transaction ends, so that each finds
/// the tasks the others pushed before it. A key of one `bigint`, apart
/// from the schema's `(lock space, n)` keys (the migration's and holders'),
/// whose second half a hash could not avoid.
const LOCK_GROUP: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))::text";

/// Locks queue `$1`'s row of settings until the transaction ends when the
/// queue has a cap (`check_room` with nothing to add: its lock alone). A
/// push of tasks one at a time takes it after its groups' locks and before
/// any task's, the order of every other push, so that a push waiting for
/// the cap holds no unique key or task that the push ahead of it needs.
const LOCK_ROOM: &str = "SELECT @.check_room($1, 0, 0)::text";

const NOTIFY: &str = "SELECT pg_notify($1, $2)::text";

/// Sets the expiry and deadline of task `$1`, just stored: each from now
/// (`$2`, `$4`) when the push gave a length, else at a time (`$3`, `$5`);
/// NULL for none. `not_after` is the earlier (see `schema.rs`).
const SET_LIMITS: &str = "UPDATE @.tasks
    SET expires_at = e.at, deadline = d.at, not_after = least(e.at, d.at)
    FROM (SELECT coalesce(NOW_MS + $2::int8, $3::int8) AS at) e,
         (SELECT coalesce(NOW_MS + $4::int8, $5::int8) AS at) d
    WHERE id = $1";

/// The error of a cap per fairness key on PostgreSQL, which does not
/// count a key's pending tasks yet: the call changes nothing.
pub(super) fn key_caps_not_here() -> Error {
    Error::invalid_argument(
        "key caps (caps per fairness key) are not available on PostgreSQL yet: \
         a PostgreSQL queue takes a cap per queue only (set_max_pending)",
    )
}

impl PostgresStore {
    /// Stores the tasks, all or none (`Store::push`).
    // Long: the two ways of a push (one task at a time, or one statement),
    // each with its fairness keys' line taken in the same lock order.
    pub(super) fn push_tasks(&self, tasks: Vec<NewTask>) -> Result<Vec<Pushed>> {
        let keyed = tasks.iter().any(|task| task.fair_key.is_some());
        // One at a time: a task with a unique key, an expiry or a
        // deadline, or a push with tasks to wait for or in groups.
        if tasks.iter().any(|task| {
            task.unique.is_some()
                || !task.after.is_empty()
                || task.group.is_some()
                || task.expiry.is_some()
                || task.deadline.is_some()
        }) {
            return self.write(|tx| {
                self.lock_groups(
                    tx,
                    tasks
                        .iter()
                        .filter_map(|task| task.group.as_ref().map(|(group, _)| group.as_str())),
                )?;
                tx.query(&self.sql(LOCK_ROOM), &[&self.queue])?;
                if keyed {
                    self.join_line(tx, &tasks)?;
                }
                let mut pushed = Vec::with_capacity(tasks.len());
                for (index, task) in tasks.iter().enumerate() {
                    let one = self
                        .push_one(tx, task, &pushed)
                        .map_err(|err| of_item(err, index, tasks.len()))?;
                    pushed.push(one);
                }
                if keyed || self.seen_fair() {
                    self.set_task_keys(tx, &tasks, &pushed)?;
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
        let keys: Vec<Option<&str>> = tasks.iter().map(|task| task.fair_key.as_deref()).collect();
        let push = self.sql(PUSH);
        let params: Params<'_> = &[
            &self.queue,
            &payloads,
            &delays,
            &times,
            &priorities,
            &attempts,
            &self.channel,
            &keys,
            &NO_FAIR_KEY,
        ];
        let rows = if keyed {
            self.write(|tx| {
                tx.query(&self.sql(LOCK_ROOM), &[&self.queue])?;
                self.join_line(tx, &tasks)?;
                tx.query(&push, params)
            })?
        } else {
            self.write_one(&push, params)?
        };
        let mut ids = rows
            .iter()
            .map(|row| row.try_get::<_, i64>(0))
            .collect::<std::result::Result<Vec<i64>, _>>()?;
        // Ids are drawn in insertion order, which is the tasks' order.
        ids.sort_unstable();
        Ok(ids.into_iter().map(Pushed::Stored).collect())
    }

    /// Stores one task, or, with a unique key, finds the task holding it
    /// ([`PUSH_TASK`]). `earlier` is what the earlier items of the same
    /// push did, which the task may wait for; a task to wait for that
    /// cannot be fails the push, with the message of [`waits_for`].
    ///
    /// [`waits_for`]: crate::store::waits_for
    pub(super) fn push_one(
        &self,
        tx: &mut Tx<'_>,
        task: &NewTask,
        earlier: &[Pushed],
    ) -> Result<Pushed> {
        let parents = parent_ids(&task.after, earlier);
        let parents = (!parents.is_empty()).then_some(parents);
        let (key, window) = match &task.unique {
            Some((key, window)) => (Some(key.as_str()), *window),
            None => (None, 0),
        };
        let (group, at_once) = match &task.group {
            Some((group, at_once)) => (Some(group.as_str()), *at_once as i32),
            None => (None, 1),
        };
        let rows = tx.query(
            &self.sql(PUSH_TASK),
            &[
                &self.queue,
                &task.payload,
                &task.delay,
                &task.run_at,
                &task.priority,
                &i64::from(task.max_attempts),
                &key,
                &window,
                &parents,
                &task.run_anyway,
                &group,
                &at_once,
            ],
        )?;
        let row = rows
            .first()
            .ok_or_else(|| Error::new(crate::ErrorKind::Internal, "push_task answered no row"))?;
        let id: i64 = row.try_get(0)?;
        if !row.try_get::<_, bool>(1)? {
            return self.found_holder(tx, id, task);
        }
        if task.expiry.is_some() || task.deadline.is_some() {
            let relative = |limit: Option<Limit>| limit.and_then(|limit| limit.after);
            let absolute = |limit: Option<Limit>| {
                limit.and_then(|limit| limit.after.is_none().then_some(limit.at))
            };
            tx.query(
                &self.sql(SET_LIMITS),
                &[
                    &id,
                    &relative(task.expiry),
                    &absolute(task.expiry),
                    &relative(task.deadline),
                    &absolute(task.deadline),
                ],
            )?;
        }
        Ok(Pushed::Stored(id))
    }

    /// What the push of `task` did on finding its unique key held by task
    /// `holder`, which [`PUSH_TASK`] locked until the push commits: merged
    /// into it when the options ask and it is pending and not held by a
    /// delivery ([`MERGE_PENDING`], which wakes the queue's waiters when it
    /// merges), else nothing.
    fn found_holder(&self, tx: &mut Tx<'_>, holder: i64, task: &NewTask) -> Result<Pushed> {
        if !task.merge.is_set() {
            return Ok(Pushed::Duplicate(holder));
        }
        let max = task
            .merge
            .debounce_max
            .map(|max| i64::try_from(max.as_millis()).unwrap_or(i64::MAX));
        let row = tx.query_opt(
            &self.sql(MERGE_PENDING),
            &[
                &holder,
                &task.merge.replace.then_some(task.payload.as_str()),
                &task.delay,
                &task.run_at,
                &max,
            ],
        )?;
        let merged = match row {
            Some(row) => row.try_get::<_, Option<i64>>(0)?.is_some(),
            None => false,
        };
        Ok(if merged {
            Pushed::Merged(holder)
        } else {
            Pushed::Duplicate(holder)
        })
    }

    /// The task a task pushed to `group`, `at_once` of whose tasks run at
    /// once, waits for as its group's predecessor (see
    /// [`group_predecessor_sql`]), marked as waited for, unless it waits
    /// for that task already among its `parents`, with their own policy.
    /// The group must be locked ([`PostgresStore::lock_groups`]).
    pub(super) fn group_parent(
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
    pub(super) fn lock_groups<'a>(
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

    /// Wakes the waiters of `queue`, in every process, once `tx` commits.
    pub(super) fn notify(&self, tx: &mut Tx<'_>, queue: &str) -> Result<()> {
        tx.query(NOTIFY, &[&self.channel, &queue])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_server::{fresh_store, server};
    use super::*;
    use crate::options::{OpenOptions, PushOptions};
    use crate::store::Store;

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

    #[test]
    fn a_merge_into_the_holder_of_a_key_wakes_the_waiters() {
        let Some(url) = server("a_merge_into_the_holder_of_a_key_wakes_the_waiters") else {
            return;
        };
        let schema = format!("unit_merge_wakes_{}", std::process::id());
        let store = fresh_store(&url, &schema, "a");
        let bell = store.bell();
        let keyed = |replace: bool| {
            let mut options = PushOptions::new();
            options
                .unique_key("doc")
                .unwrap()
                .delay(std::time::Duration::from_secs(3600))
                .unwrap();
            options.replace_pending(replace);
            vec![NewTask::new("1", &options, 0, 3)]
        };
        let seen = bell.rings();
        assert!(matches!(
            store.push(keyed(false), 0).unwrap()[..],
            [Pushed::Stored(_)]
        ));
        assert!(rung_after(&bell, seen), "the push wakes the waiters");

        // Only the merge itself writes: without its notification no
        // waiter would hear that the holder changed.
        let seen = bell.rings();
        assert!(matches!(
            store.push(keyed(true), 0).unwrap()[..],
            [Pushed::Merged(_)]
        ));
        assert!(rung_after(&bell, seen), "the merge wakes the waiters");
        drop(store);
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }
}
