//! Maintenance: recovering the leases of dead holders, retrying dead
//! tasks, purging ended ones and checkpointing the file.

use std::time::Duration;

use super::Queue;
use crate::clock::now_unix_ms;
use crate::error::{Error, Result};
use crate::store::Checkpoint;
use crate::task::TaskState;

/// The most ids [`Queue::retry_dead_many`] retries (and
/// [`Queue::cancel_many`] cancels) in one transaction: a
/// statement's list stays small, and the write lock is never held long.
pub(super) const IDS_BATCH: usize = 500;

impl Queue {
    /// Takes back every leased task of this queue whose lease expired or
    /// whose holder process no longer exists on this machine, and says how
    /// many: each is pending again, or dead if that delivery was its last
    /// attempt. Tasks held by live processes (this one included) are
    /// untouched, so calling this at every start-up is safe with several
    /// processes. On PostgreSQL, a holder is gone when its session on the
    /// server ended (its process, machine or connection died), wherever it
    /// ran.
    pub fn recover(&self) -> Result<u64> {
        let recovered = self.store()?.recover(now_unix_ms())?;
        if recovered > 0 {
            self.bell.ring();
        }
        Ok(recovered)
    }

    /// Makes the dead task `id` of this queue pending again, ready now, with
    /// all its attempts ahead of it; a task of an ordered group waits, behind
    /// its group's newest unfinished task, for its turn. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// this queue has no dead task `id`.
    pub fn retry_dead(&self, id: i64) -> Result<()> {
        if self.store()?.retry_dead(Some(&[id]), now_unix_ms())? == 0 {
            return Err(Error::invalid_argument(format!(
                "queue '{}' has no dead task {id}",
                self.name
            )));
        }
        self.bell.ring();
        Ok(())
    }

    /// Makes the dead tasks `ids` of this queue pending again, as
    /// [`Queue::retry_dead`] does each, and says how many: ids of tasks
    /// that are not dead (retried, purged or never there) are skipped.
    /// Up to 500 ids are retried in one transaction, all or none of them;
    /// a longer list goes in batches of 500, each committed before the
    /// next is tried (an error leaves the batches before it retried).
    pub fn retry_dead_many(&self, ids: &[i64]) -> Result<u64> {
        let store = self.store()?;
        let mut retried = 0;
        for batch in ids.chunks(IDS_BATCH) {
            retried += store.retry_dead(Some(batch), now_unix_ms())?;
        }
        if retried > 0 {
            self.bell.ring();
        }
        Ok(retried)
    }

    /// Makes every dead task of this queue pending again, as
    /// [`Queue::retry_dead`] does, and says how many.
    pub fn retry_all_dead(&self) -> Result<u64> {
        let retried = self.store()?.retry_dead(None, now_unix_ms())?;
        if retried > 0 {
            self.bell.ring();
        }
        Ok(retried)
    }

    /// Deletes this queue's done, dead or cancelled tasks
    /// ([`TaskState::Done`], [`TaskState::Dead`] or [`TaskState::Cancelled`])
    /// that got there at least `older_than` ago, and
    /// says how many (0 done tasks on a handle without history is normal).
    pub fn purge(&self, state: TaskState, older_than: Duration) -> Result<u64> {
        let store = self.store()?;
        let age = i64::try_from(older_than.as_millis())
            .map_err(|_| Error::invalid_argument("age out of range"))?;
        store.purge(state, now_unix_ms(), age)
    }

    /// Copies the write-ahead log into the database and truncates it, waiting
    /// up to the busy timeout for readers to move on, and reports the log's
    /// size afterwards. tq also does this by itself when the log grows past 16
    /// MiB; call it at quiet moments to keep the file small. A PostgreSQL queue
    /// has no log file of its own: there it fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        self.store()?.checkpoint()
    }
}
