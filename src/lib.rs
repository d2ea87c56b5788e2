//! tq: a persistent task queue that lives in one SQLite file.
//!
//! [`Queue::push`] stores a JSON task, [`Queue::pull`] atomically claims the
//! oldest ready one under a lease, [`Queue::finish`] completes it, and
//! [`Queue::recover`] brings back what a crashed worker held without touching
//! the tasks of live workers. A [`Queue`] may be shared by any number of
//! threads; any number of processes on one host may open the same file.
//!
//! The C ABI in [`ffi`] is a thin layer over this API; `include/tq.h` is
//! generated from it.
//!
//! Layout: [`queue`] is the engine's front (argument checks, clock, fork
//! guard); [`store`] is the narrow interface a storage backend implements;
//! `sqlite/` is the SQLite backend (schema in `sqlite/schema.rs`, the
//! claim and every other task statement in `sqlite/tasks.rs`); `holder.rs`
//! tells whether a process holding tasks is still alive.

mod error;
pub mod ffi;
mod holder;
mod options;
mod queue;
mod sqlite;
mod store;
mod task;

pub use error::{Error, ErrorKind, Result};
pub use options::{Durability, OpenOptions, PullOptions, PushOptions};
pub use queue::{Queue, MAX_PAYLOAD_LEN};
pub use task::{Receipt, Task, TaskState};

/// The library's version, from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
