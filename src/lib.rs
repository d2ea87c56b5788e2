//! tq: a persistent task queue that lives in one SQLite file.
//!
//! [`Queue::push`] stores a JSON task, [`Queue::pull`] atomically claims the
//! oldest ready one under a lease, [`Queue::finish`] completes it, and
//! [`Queue::recover`] brings back what a crashed worker held without touching
//! the tasks of live workers. A [`Queue`] may be shared by any number of
//! threads; any number of processes on one host may open the same file.
//!
//! The C ABI (`src/ffi/`) is a thin layer over this API; `include/tq.h` is
//! generated from it.
//!
//! Layout: `docs/internals.md` opens with a map of the source, which file
//! answers which question: the engine's front in `queue/` (argument
//! checks, clock, fork guard, waiting), the interface a backend implements
//! in `store.rs`, the backends in `sqlite/` and `postgres/` (each cut by
//! entity: `push.rs`, `claim.rs`, `finish.rs`, ...), the C ABI in `ffi/`
//! (one file per C object).

// Waiting between processes uses futexes and liveness reads /proc, so no
// other system can build tq: this error comes first, ahead of those of the
// libc items such a system lacks.
#[cfg(not(target_os = "linux"))]
compile_error!("tq runs on Linux only: it relies on futexes and /proc");

mod attempts;
mod clock;
mod error;
mod events;
// The C ABI is not part of the Rust API: hidden from its documentation and
// outside its semver promise. It stays reachable from Rust only because the
// fuzz targets and tests/fork.rs drive the C functions without a C compiler.
// Not in tq's SQLite extension, which exports its entry point alone.
#[doc(hidden)]
#[cfg(not(feature = "sqlite-extension"))]
pub mod ffi;
mod global_lock;
mod group;
mod holder;
mod limits;
mod location;
mod merge;
mod options;
pub mod outbox;
#[cfg(feature = "postgres")]
mod postgres;
mod queue;
mod registry;
mod schedule;
mod sqlite;
mod store;
mod task;
mod wait;

pub use attempts::{AttemptInfo, AttemptOutcome, ATTEMPTS_KEPT};
pub use error::{Error, ErrorKind, Result};
pub use events::{Awaited, Slept, RESERVED_STEP_PREFIX};
pub use location::{redacted_location, Backend};
pub use options::{
    Durability, OpenOptions, ParentFailure, PullOptions, PushOptions, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_POOL_SIZE, DEFAULT_POSTGRES_SCHEMA, DEFAULT_QUEUE, DEFAULT_RESULT_RETENTION,
    MAX_GROUP_AT_ONCE, MAX_PARENTS, MAX_PAYLOAD_LEN, MAX_POOL_SIZE, MAX_QUEUE_NAME_LEN,
    MAX_STEP_NAME_LEN, MAX_UNIQUE_KEY_LEN, PUSH_OPTION_KEYS,
};
pub use queue::{
    Queue, DEFAULT_EVENT_RETENTION, MAX_EVENT_KEY_LEN, MAX_FAIR_WEIGHT, MAX_REASON_LEN,
    MAX_SLEEP_NAME_LEN, MAX_TIMINGS, MIN_FAIR_WEIGHT, ROOM_POLL_INTERVAL,
};
/// The SQLite binding tq is built on, for [`outbox`] callers: using this
/// one keeps one copy of SQLite in the process.
pub use rusqlite;
pub use schedule::{
    CatchUp, Schedule, ScheduleInfo, ScheduleSpec, MAX_CATCH_UP, MAX_SCHEDULE_NAME_LEN, SKIP_GRACE,
};
pub use store::Checkpoint;
pub use task::{
    Cancelled, Delayed, Failed, Holder, Lease, Pause, Pushed, RateLimit, Receipt, StepInfo, Stop,
    Task, TaskInfo, TaskState, TaskTiming, MAX_RATE_CLAIMS,
};
pub use wait::CancelToken;

/// The library's version, from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
