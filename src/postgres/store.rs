//! The PostgreSQL backend as the engine sees it: `impl Store for
//! PostgresStore`, its methods in the order of the trait, each handing its
//! work to the file that answers for it (`push.rs`, `claim.rs`,
//! `finish.rs`, ...).

use std::sync::Arc;
use std::time::Duration;

use super::finish::FinishAndClaim;
use super::push::key_caps_not_here;
use super::{no_wal_file, PostgresStore};
use crate::error::Result;
use crate::options::RetryBackoff;
use crate::schedule::{ScheduleInfo, StoredSchedule};
use crate::store::{Checkpoint, IfNotHeld, ListFrom, NewTask, PutSchedule, Store};
use crate::task::{
    Cancelled, Delayed, Failed, Lease, Pause, Pushed, RateLimit, Receipt, Stop, Task, TaskInfo,
    TaskState, TaskTiming,
};
use crate::wait::Bell;

impl Store for PostgresStore {
    // Push

    fn push(&self, tasks: Vec<NewTask>, _now: i64) -> Result<Vec<Pushed>> {
        self.push_tasks(tasks)
    }

    // Claim

    fn claim(&self, max: usize, _now: i64, lease: i64) -> Result<Vec<Task>> {
        self.claims.submit_committed((max, lease), |claims| {
            self.claim_together(|sql, params| self.write_one(sql, params), false, &claims)
        })
    }

    // Finish, fail, extend

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
        self.finish_keeping_result(receipt, result, retention)
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
        self.fail_delivery(receipt, reason, backoff)
    }

    fn extend(
        &self,
        receipt: Receipt,
        _now: i64,
        lease: i64,
        progress: Option<&str>,
    ) -> Result<()> {
        self.extend_lease(receipt, lease, progress)
    }

    // Recover

    fn recover(&self, _now: i64) -> Result<u64> {
        self.recover_leases()
    }

    // Look at a queue

    fn count(&self, state: TaskState) -> Result<u64> {
        self.count_tasks(state)
    }

    fn groups_waiting(&self) -> Result<u64> {
        self.count_groups_waiting()
    }

    fn oldest_ready(&self, now: i64) -> Result<Option<i64>> {
        self.oldest_ready_at(now)
    }

    fn task(&self, id: i64) -> Result<Option<TaskInfo>> {
        self.task_info(id)
    }

    fn timings_since(&self, since: i64, limit: usize) -> Result<Vec<TaskTiming>> {
        self.read_timings(since, limit)
    }

    fn list(&self, state: TaskState, from: ListFrom, limit: usize) -> Result<Vec<TaskInfo>> {
        self.list_tasks(state, from, limit)
    }

    fn list_delayed(
        &self,
        kind: Delayed,
        after: (i64, i64),
        _now: i64,
        limit: usize,
    ) -> Result<Vec<TaskInfo>> {
        self.list_delayed_tasks(kind, after, limit)
    }

    fn count_delayed(&self, kind: Delayed, _now: i64, up_to: u64) -> Result<u64> {
        self.count_delayed_tasks(kind, up_to)
    }

    fn leases(&self, only: Option<i64>, limit: usize) -> Result<Vec<Lease>> {
        self.read_leases(only, limit)
    }

    fn task_with_unique_key(&self, key: &str) -> Result<Option<TaskInfo>> {
        self.task_info_by_unique_key(key)
    }

    // Retry and purge

    fn retry_dead(&self, ids: Option<&[i64]>, _now: i64) -> Result<u64> {
        self.retry_dead_tasks(ids)
    }

    fn purge(&self, state: TaskState, _now: i64, older_than: i64) -> Result<u64> {
        self.purge_tasks(state, older_than)
    }

    // Cancel

    fn cancel_task(&self, id: i64, reason: &str, _now: i64) -> Result<Cancelled> {
        self.cancel_by_id(id, reason)
    }

    fn cancel_many(&self, ids: &[i64], reason: &str, _now: i64) -> Result<u64> {
        self.cancel_ids(ids, reason)
    }

    fn end_cancelled(&self, receipt: Receipt, _now: i64) -> Result<bool> {
        self.end_cancelled_delivery(receipt)
    }

    fn delivery(&self, receipt: Receipt) -> Result<Option<Stop>> {
        self.current_delivery(receipt)
    }

    fn cancellations(&self) -> Result<(Arc<Bell>, Duration)> {
        self.cancellations_bell()
    }

    // Snooze

    fn snooze(&self, receipt: Receipt, _now: i64, delay: i64) -> Result<()> {
        self.snooze_delivery(receipt, delay)
    }

    // Steps

    fn record_step(&self, receipt: Receipt, name: &str, output: &str, _now: i64) -> Result<bool> {
        self.record_held_step(receipt, name, output)
    }

    fn step_output(&self, id: i64, name: &str) -> Result<Option<String>> {
        self.read_step_output(id, name)
    }

    fn clear_steps_after(&self, id: i64, name: &str) -> Result<u64> {
        self.clear_task_steps_after(id, name)
    }

    // Pause and limits

    fn set_pause(&self, pause: Option<Pause>) -> Result<()> {
        self.write_pause(pause)
    }

    fn pause(&self, _now: i64) -> Result<Option<Pause>> {
        self.read_pause()
    }

    fn set_concurrency_limit(&self, limit: Option<u32>) -> Result<()> {
        self.write_concurrency_limit(limit)
    }

    fn concurrency_limit(&self) -> Result<Option<u32>> {
        self.read_concurrency_limit()
    }

    fn set_max_pending(&self, cap: Option<u64>) -> Result<()> {
        self.write_max_pending(cap)
    }

    fn max_pending(&self) -> Result<Option<u64>> {
        self.read_max_pending()
    }

    fn set_max_pending_per_key(&self, _cap: Option<u64>) -> Result<()> {
        Err(key_caps_not_here())
    }

    fn max_pending_per_key(&self) -> Result<Option<u64>> {
        Err(key_caps_not_here())
    }

    fn set_key_max_pending(&self, _key: &str, _cap: Option<u64>) -> Result<()> {
        Err(key_caps_not_here())
    }

    fn key_max_pending(&self, _key: &str) -> Result<Option<u64>> {
        Err(key_caps_not_here())
    }

    fn set_fair_weight(&self, key: &str, weight: f64) -> Result<()> {
        self.set_weight(key, weight)
    }

    fn fair_weight(&self, key: &str) -> Result<f64> {
        self.weight(key)
    }

    fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        self.write_rate_limit(limit)
    }

    fn rate_limit(&self) -> Result<Option<RateLimit>> {
        self.read_rate_limit()
    }

    // The file (none here: the server keeps its own log)

    fn checkpoint(&self) -> Result<Checkpoint> {
        Err(no_wal_file())
    }

    fn wal_size(&self) -> Result<u64> {
        Err(no_wal_file())
    }

    // Waiting

    fn next_claimable(&self, now: i64) -> Result<Option<i64>> {
        self.next_claimable_at(now)
    }

    fn change_counter(&self) -> Result<i64> {
        Ok(self
            .waiters
            .changes
            .load(std::sync::atomic::Ordering::SeqCst))
    }

    // The whole schema's queues and ids

    fn queue_names(&self) -> Result<Vec<String>> {
        self.read_queue_names()
    }

    fn last_id(&self) -> Result<i64> {
        self.read_last_id()
    }

    // Schedules

    fn put_schedule(&self, schedule: &StoredSchedule, put: PutSchedule, _now: i64) -> Result<()> {
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

    // Identity

    fn store_id(&self) -> u128 {
        // Drawn at random when the schema was created (migration 2).
        u128::from(self.store_id as u64)
    }
}
