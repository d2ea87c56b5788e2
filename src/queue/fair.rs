//! Fair shares by key: the weights of a queue's fairness keys (see
//! [`crate::PushOptions::fair_key`] and the guide, "Fair shares").

use super::Queue;
use crate::error::{Error, Result};
use crate::options::{check_text, MAX_UNIQUE_KEY_LEN};

/// The smallest weight of a fairness key.
pub const MIN_FAIR_WEIGHT: f64 = 0.001;

/// The largest weight of a fairness key.
pub const MAX_FAIR_WEIGHT: f64 = 1_000_000.0;

impl Queue {
    /// Sets the weight of fairness key `key` of this queue (the empty key
    /// `""` stands for the tasks pushed without one), for every process
    /// and machine on its file: [`MIN_FAIR_WEIGHT`] to
    /// [`MAX_FAIR_WEIGHT`], default 1. Among the keys with ready tasks,
    /// each gets deliveries in proportion to its weight. Setting a weight
    /// makes the queue fair, as a push with a fairness key does.
    pub fn set_fair_weight(&self, key: &str, weight: f64) -> Result<()> {
        check_fair_key(key)?;
        if !(MIN_FAIR_WEIGHT..=MAX_FAIR_WEIGHT).contains(&weight) {
            return Err(Error::invalid_argument(format!(
                "a fairness key's weight is {MIN_FAIR_WEIGHT} to {MAX_FAIR_WEIGHT}, got {weight}"
            )));
        }
        self.store()?.set_fair_weight(key, weight)
    }

    /// The weight of fairness key `key` of this queue: 1 unless one was set.
    pub fn fair_weight(&self, key: &str) -> Result<f64> {
        check_fair_key(key)?;
        self.store()?.fair_weight(key)
    }
}

/// Checks a fairness key named to weigh it: as a push's, or empty.
pub(super) fn check_fair_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Ok(());
    }
    check_text("a fairness key", key, MAX_UNIQUE_KEY_LEN)
}
