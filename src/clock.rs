//! The clock tq reads: the engine for every operation, and a backend for
//! a claim that must be stamped once it holds the write lock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in milliseconds since the Unix epoch: leases and due
/// times are compared across processes, so they use the shared clock.
pub(crate) fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}
