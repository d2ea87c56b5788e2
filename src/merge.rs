//! Merging a push into the pending task that holds its unique key: the
//! options that ask for it ([`PushOptions::replace_pending`],
//! [`PushOptions::debounce`]) and their checks. The statement that merges
//! is a rule both backends share ([`crate::store::merge_sql`]).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::options::{check_duration, PushOptions};

/// What a push does to the pending task holding its unique key, instead of
/// storing nothing beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Merge {
    /// The holder's payload becomes the push's.
    pub(crate) replace: bool,
    /// The holder's run time becomes the push's, but never later than
    /// this long after the holder was first pushed.
    pub(crate) debounce_max: Option<Duration>,
}

impl Merge {
    /// Whether the push merges at all.
    pub(crate) fn is_set(self) -> bool {
        self.replace || self.debounce_max.is_some()
    }
}

impl PushOptions {
    /// With `true`, a push under a unique key that a pending task holds
    /// (ready, delayed, waiting for a retry or for other tasks, but not
    /// delivered at the moment) gives that task this push's payload, and
    /// answers [`crate::Pushed::Merged`] with its id: its next delivery
    /// carries the newest payload. A task being delivered is never
    /// changed (its receipt and the payload it was handed stay valid):
    /// then the push stores nothing and answers
    /// [`crate::Pushed::Duplicate`], as without this option. Needs a
    /// unique key, and refuses tasks to wait for and ordered groups
    /// ([`crate::Queue::push`] fails with `InvalidArgument`). Combines
    /// with [`PushOptions::debounce`].
    pub fn replace_pending(&mut self, replace: bool) -> &mut Self {
        self.merge.replace = replace;
        self
    }

    /// Debounces the task: a push under a unique key that a pending task
    /// holds (as for [`PushOptions::replace_pending`]) moves that task's
    /// run time to this push's own (now plus its delay, or its run-at
    /// time), but never later than `max` (1 ms to one year) after the
    /// holder was first pushed, and answers [`crate::Pushed::Merged`] with
    /// its id. So a burst of pushes runs the task once, a delay after the
    /// last push, and a steady stream still runs it within `max` of the
    /// first. The holder's payload stays unless `replace_pending` is set
    /// too; its priority, attempts, expiry and deadline stay as they were.
    /// A push that finds no holder stores its task as usual.
    pub fn debounce(&mut self, max: Duration) -> Result<&mut Self> {
        self.merge.debounce_max = Some(check_duration(
            "the longest debounce",
            max,
            Duration::from_millis(1),
        )?);
        Ok(self)
    }

    /// Removes the debounce ([`PushOptions::debounce`]).
    pub fn clear_debounce(&mut self) -> &mut Self {
        self.merge.debounce_max = None;
        self
    }

    /// Refuses a merge the options cannot make: without a unique key there
    /// is no holder to merge into, and a task waiting for others or in an
    /// ordered group would leave the holder's own ties as they were
    /// (merging only payloads and run times keeps one meaning).
    pub(crate) fn check_merge(&self) -> Result<()> {
        if !self.merge.is_set() {
            return Ok(());
        }
        let conflict = if self.unique.is_none() {
            Some("needs a unique key: set the key too")
        } else if !self.after.is_empty() {
            Some("cannot wait for other tasks: the holder keeps the tasks it waits for")
        } else if self.group.is_some() {
            Some("cannot join an ordered group: the holder keeps its place in its group")
        } else {
            None
        };
        match conflict {
            Some(why) => Err(Error::invalid_argument(format!(
                "a push that replaces or debounces the pending task holding its key {why}"
            ))),
            None => Ok(()),
        }
    }

    /// The options of [`PushOptions::from_json`] that merge into a pending
    /// holder: `replace_pending` (a boolean) and `debounce_max_ms`.
    pub(crate) fn merge_from_json(
        &mut self,
        fields: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        if let Some(replace) = fields.get("replace_pending") {
            let replace = replace.as_bool().ok_or_else(|| {
                Error::invalid_argument("push option replace_pending takes true or false")
            })?;
            self.replace_pending(replace);
        }
        if let Some(max) = fields.get("debounce_max_ms") {
            let max = max.as_u64().ok_or_else(|| {
                Error::invalid_argument("push option debounce_max_ms takes an integer in range")
            })?;
            self.debounce(Duration::from_millis(max))?;
        }
        Ok(())
    }
}
