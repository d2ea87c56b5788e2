//! Pushing: how a task is stored, with its unique key, the tasks it
//! waits for and its place in an ordered group.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::fair;
use super::ids::{self, next_task_id};
use super::settings::Room;
use crate::error::Result;
use crate::store::{
    group_predecessor_sql, holds_unique_key, merge_sql, of_item, parent_ids, waits_for, NewTask,
    BLOCKED, NO_FAIR_KEY, READY, WAITING,
};
use crate::task::Pushed;

/// Stores one task in `queue`, or finds the task holding its unique key.
/// A task that no longer holds its key ([`holds_unique_key`]) gives it up
/// here. `earlier` is what the earlier items of the same push did, which
/// the task may wait for; a task to wait for that cannot be
/// ([`waits_for`]) fails the push.
pub(crate) fn push_one(
    conn: &Connection,
    queue: &str,
    task: &NewTask,
    earlier: &[Pushed],
    now: i64,
) -> Result<Pushed> {
    let parents = parent_ids(&task.after, earlier);
    let unfinished = unfinished_parents(conn, queue, &parents, task.run_anyway)?;
    if let Some((key, _)) = &task.unique {
        if let Some(id) = unique_key_holder(conn, queue, key, now)? {
            if task.merge.is_set() && merge_into(conn, id, task, now)? {
                return Ok(Pushed::Merged(id));
            }
            return Ok(Pushed::Duplicate(id));
        }
    }
    let group_parent = match &task.group {
        Some((group, at_once)) => group_parent(conn, queue, group, *at_once, &unfinished)?,
        None => None,
    };
    let waiting_for = unfinished.len() + usize::from(group_parent.is_some());
    let state = if waiting_for > 0 {
        BLOCKED
    } else if task.run_at <= now {
        READY
    } else {
        WAITING
    };
    let fair_key = fair::key_for_push(conn, queue, task.fair_key.as_deref())?;
    let place = Place {
        state,
        waiting_for,
        fair_key: fair_key.as_deref(),
    };
    let id = insert_task(conn, queue, task, &place, &parents, now)?;
    if let Some(key) = &fair_key {
        fair::activate(conn, queue, key)?;
    }
    let dependencies = unfinished
        .into_iter()
        .map(|parent| (parent, task.run_anyway))
        .chain(group_parent.map(|parent| (parent, true)));
    for (parent, run_anyway) in dependencies {
        conn.prepare_cached(
            "INSERT INTO tq_dependencies (parent, task, run_anyway) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![parent, id, run_anyway])?;
    }
    Ok(Pushed::Stored(id))
}

/// Pushes the tasks of one call in order, so that a task can wait for an
/// earlier item of the same push; an error says which item failed. A push
/// that would take a capped queue, or a capped fairness key, over its cap
/// fails whole (its transaction is rolled back); duplicates add nothing to
/// the count.
pub(crate) fn push_all(
    conn: &Connection,
    queue: &str,
    tasks: &[NewTask],
    now: i64,
) -> Result<Vec<Pushed>> {
    let room = Room::of(conn, queue)?;
    let mut pushed = Vec::with_capacity(tasks.len());
    for (index, task) in tasks.iter().enumerate() {
        let one = push_one(conn, queue, task, &pushed, now)
            .map_err(|err| of_item(err, index, tasks.len()))?;
        pushed.push(one);
    }
    if let Some(room) = room {
        room.check(conn, queue, stored_count(&pushed))?;
    }
    if fair::is_fair(conn, queue)? {
        fair::check_key_room(conn, queue, &stored_per_key(tasks, &pushed))?;
    }
    Ok(pushed)
}

/// How many of `pushed` were stored under each fairness key of a fair
/// queue: their own, or the empty key.
fn stored_per_key<'a>(tasks: &'a [NewTask], pushed: &[Pushed]) -> BTreeMap<&'a str, u64> {
    let mut per_key = BTreeMap::new();
    for (task, one) in tasks.iter().zip(pushed) {
        if matches!(one, Pushed::Stored(_)) {
            let key = task.fair_key.as_deref().unwrap_or(NO_FAIR_KEY);
            *per_key.entry(key).or_insert(0) += 1;
        }
    }
    per_key
}

/// How many of `pushed` were stored (not found holding their unique key).
fn stored_count(pushed: &[Pushed]) -> u64 {
    pushed
        .iter()
        .filter(|one| matches!(one, Pushed::Stored(_)))
        .count() as u64
}

/// Those of `parents` in `queue` that a new task must still wait for;
/// [`waits_for`] refuses a parent it cannot wait for, which fails the push
/// before anything of the task is written.
fn unfinished_parents(
    conn: &Connection,
    queue: &str,
    parents: &[i64],
    run_anyway: bool,
) -> Result<Vec<i64>> {
    let mut unfinished = Vec::new();
    for &parent in parents {
        let state: Option<i64> = conn
            .prepare_cached("SELECT state FROM tq_tasks WHERE id = ?1 AND queue = ?2")?
            .query_row(params![parent, queue], |row| row.get(0))
            .optional()?;
        if waits_for(queue, parent, state, run_anyway)? {
            unfinished.push(parent);
        }
    }
    Ok(unfinished)
}

/// The task of `queue` that still holds unique key `key` at `now`, if one
/// does. A task that has the key but no longer holds it
/// ([`holds_unique_key`]) gives it up here, so that the new task can take
/// it without breaking the key's uniqueness in the table.
fn unique_key_holder(conn: &Connection, queue: &str, key: &str, now: i64) -> Result<Option<i64>> {
    let holder: Option<(i64, i64, Option<i64>)> = conn
        .prepare_cached(
            "SELECT id, state, unique_until FROM tq_tasks WHERE queue = ?1 AND unique_key = ?2",
        )?
        .query_row(params![queue, key], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    if let Some((id, state, unique_until)) = holder {
        if holds_unique_key(state, unique_until, now) {
            return Ok(Some(id));
        }
        conn.prepare_cached("UPDATE tq_tasks SET unique_key = NULL WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(None)
}

/// Merges `task` into task `holder`, which holds its unique key, as its
/// options ask ([`merge_sql`]); says whether it did (not when the holder is
/// held by a delivery, or is not pending).
fn merge_into(conn: &Connection, holder: i64, task: &NewTask, now: i64) -> Result<bool> {
    let merged: Option<i64> = conn
        .prepare_cached(&merge_sql("tq_tasks", '?', "?6"))?
        .query_row(
            params![
                holder,
                task.merge.replace.then_some(task.payload.as_str()),
                task.delay,
                task.run_at,
                task.merge
                    .debounce_max
                    .map(|max| i64::try_from(max.as_millis()).unwrap_or(i64::MAX)),
                now,
            ],
            |row| row.get(0),
        )
        .optional()?;
    Ok(merged.is_some())
}

/// Where a new task starts: its state, how many tasks it waits for, and
/// the fairness key it is filed under (see `fair.rs`).
struct Place<'a> {
    state: i64,
    waiting_for: usize,
    fair_key: Option<&'a str>,
}

/// Writes the row of a new task at `place`, and returns its id; its
/// `parents` are kept with it (as JSON) so a claim can hand them to the
/// worker.
fn insert_task(
    conn: &Connection,
    queue: &str,
    task: &NewTask,
    place: &Place<'_>,
    parents: &[i64],
    now: i64,
) -> Result<i64> {
    let (key, reserved_for) = task
        .unique
        .as_ref()
        .map_or((None, 0), |(key, ms)| (Some(key.as_str()), *ms));
    let parents_json = (!parents.is_empty())
        .then(|| serde_json::to_string(parents).expect("a list of integers serializes"));
    ids::settle_deletions(conn)?;
    conn.prepare_cached(concat!(
        "INSERT INTO tq_tasks
            (id, queue, state, payload, created_at, run_at, priority, max_attempts, unique_key,
             unique_for, parents, waiting_for, group_key, expires_at, deadline, not_after,
             fair_key)
         VALUES (",
        next_task_id!(),
        ", ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
           CASE WHEN ?13 IS NULL OR ?14 < ?13 THEN ?14 ELSE ?13 END, ?15)"
    ))?
    .execute(params![
        queue,
        place.state,
        task.payload,
        now,
        task.run_at,
        task.priority,
        task.max_attempts,
        key,
        reserved_for,
        parents_json,
        place.waiting_for as i64,
        task.group.as_ref().map(|(group, _)| group.as_str()),
        task.expiry.map(|limit| limit.at),
        task.deadline.map(|limit| limit.at),
        place.fair_key,
    ])?;
    Ok(conn.last_insert_rowid())
}

/// The task a task pushed to `group` of `queue`, `at_once` of whose tasks
/// run at once, waits for as its group's predecessor (see
/// [`group_predecessor_sql`]), unless it waits for that task already among
/// its `parents`, with their own policy.
pub(super) fn group_parent(
    conn: &Connection,
    queue: &str,
    group: &str,
    at_once: u32,
    parents: &[i64],
) -> Result<Option<i64>> {
    let predecessor: Option<i64> = conn
        .prepare_cached(&group_predecessor_sql("tq_tasks", '?'))?
        .query_row(params![queue, group, at_once - 1], |row| row.get(0))
        .optional()?;
    Ok(predecessor.filter(|id| !parents.contains(id)))
}
