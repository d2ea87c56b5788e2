//! Cancelling: how a task is cancelled (at once, or by its holder when it
//! is leased), and how a holder learns that its delivery was cancelled.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::pool::Tx;
use super::PostgresStore;
use crate::error::{Error, Result};
use crate::store::{
    cancellations_channel, delivery_stop, stored_reason, CANCELLED, CANCELLING, DONE, LEASED,
};
use crate::task::{Cancelled, Receipt, Stop};
use crate::wait::Bell;

/// How often a holder watching for its task's cancellation looks again
/// when nothing rang: notifications are not lost while the listener is
/// connected, and its reconnection wakes every watcher, so this only bounds
/// what a loss nobody foresaw would cost.
const CANCELLATIONS_SAFETY_NET: Duration = Duration::from_secs(1);

/// Ends task `$1` as cancelled at the server's time, keeping reason `$2`
/// (when not NULL), on a handle with history.
const KEEP_CANCELLED: &str = "UPDATE @.tasks
    SET state = 5, finished_at = NOW_MS, last_error = coalesce($2, last_error),
        lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
        unique_key = NULL, unique_until = NULL
    WHERE id = $1";

impl PostgresStore {
    /// Cancels task `id` of the queue (`Store::cancel_task`).
    pub(super) fn cancel_by_id(&self, id: i64, reason: &str) -> Result<Cancelled> {
        let reason = stored_reason(reason);
        self.write(|tx| self.cancel_in(tx, id, reason))
    }

    /// Cancels each of `ids` that the queue has and is not done, in one
    /// transaction (`Store::cancel_many`); says how many.
    pub(super) fn cancel_ids(&self, ids: &[i64], reason: &str) -> Result<u64> {
        let reason = stored_reason(reason);
        self.write(|tx| {
            let mut cancelled = 0;
            for &id in ids {
                match self.cancel_in(tx, id, reason) {
                    Ok(_) => cancelled += 1,
                    // Refused before any write: the task is skipped.
                    Err(err) if err.kind() == crate::ErrorKind::InvalidArgument => {}
                    Err(err) => return Err(err),
                }
            }
            Ok(cancelled)
        })
    }

    /// Cancels task `id` of the queue in `tx`; refuses a task the queue
    /// does not have, or a done one, before writing anything.
    fn cancel_in(&self, tx: &mut Tx, id: i64, reason: Option<&str>) -> Result<Cancelled> {
        {
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
        }
    }

    /// Ends a delivery whose task is cancelling (`Store::end_cancelled`).
    pub(super) fn end_cancelled_delivery(&self, receipt: Receipt) -> Result<bool> {
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

    /// Whether a delivery is still current, and if not why (`Store::delivery`).
    pub(super) fn current_delivery(&self, receipt: Receipt) -> Result<Option<Stop>> {
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

    /// The bell that a cancellation rings (`Store::cancellations`).
    pub(super) fn cancellations_bell(&self) -> Result<(Arc<Bell>, Duration)> {
        Ok((
            Arc::clone(&self.cancellations.bell),
            CANCELLATIONS_SAFETY_NET,
        ))
    }

    /// Ends task `id` as cancelled (see `sqlite/cancel.rs`): kept with
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
}
