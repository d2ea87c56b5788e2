//! The engine's error type: a kind that maps one-to-one onto a C status, and
//! a message for people.

use std::fmt;

/// What went wrong, in the terms a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A NULL or empty argument, bad UTF-8, an out-of-range option, or a
    /// handle used in a child process after `fork()`.
    InvalidArgument,
    /// The payload is not a JSON text.
    InvalidJson,
    /// The task's delivery is no longer current: its lease was lost to
    /// another holder or recovered, or it was already finished.
    NotHeld,
    /// The database stayed locked by others past the busy timeout.
    Busy,
    /// The operating system refused: disk full, read-only, permissions,
    /// an I/O error.
    Io,
    /// The file is not an SQLite database, is corrupt, carries a tq schema
    /// newer than this library, or its tq tables were changed outside tq.
    NotADatabase,
    /// A waiting pull was ended by [`crate::Queue::interrupt`] or by its
    /// [`crate::CancelToken`].
    Interrupted,
    /// A bug in tq, including a caught panic.
    Internal,
    /// The task was cancelled ([`crate::Queue::cancel_task`]) while this
    /// delivery held it: the delivery is over, the task is cancelled, and
    /// it is never delivered again.
    Cancelled,
    /// The write may or may not last: at [`crate::Durability::Full`] on an
    /// SQLite file, flushing the committed write to the disk failed (and
    /// this process then refuses writes to the file with [`ErrorKind::Io`]
    /// until every handle on it is closed); on PostgreSQL, the connection
    /// was lost while the write was being committed.
    UnknownOutcome,
    /// The push would take the queue's pending tasks over its cap
    /// ([`crate::Queue::set_max_pending`]); nothing was stored.
    Full,
}

/// An error from the queue: its [`ErrorKind`] and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// The result type of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `kind` with a message for people.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// Shorthand for an [`ErrorKind::InvalidArgument`] error.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// SQLite's messages (start, and a part) for a tq table missing, or
/// missing a column or index tq made: the file was changed outside tq.
const DAMAGE_MESSAGES: &[(&str, &str)] = &[
    ("no such table: tq_", ""),
    ("no such column: ", ""),
    ("table tq_", "has no column named"),
    ("no such index: tq_", ""),
    ("unsupported file format", ""),
];

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ffi::ErrorCode;
        use rusqlite::Error as E;
        // tq reads only its own tables: a value of the wrong type or out of
        // range, or a missing tq table, means the file was changed outside tq.
        let damaged = match &err {
            E::InvalidColumnType(..)
            | E::FromSqlConversionFailure(..)
            | E::IntegralValueOutOfRange(..)
            | E::Utf8Error(..) => true,
            // tq never breaks a constraint of its own tables: one added
            // from outside (a trigger, a check) refused the write. Nor does
            // it store a value of the wrong type: a mismatch comes from a
            // value it read (a task id floor at the largest integer, so
            // that the next id is not one).
            E::SqliteFailure(failure, _)
                if matches!(
                    failure.code,
                    ErrorCode::ConstraintViolation | ErrorCode::TypeMismatch
                ) =>
            {
                true
            }
            E::SqliteFailure(_, Some(message)) | E::SqlInputError { msg: message, .. } => {
                DAMAGE_MESSAGES
                    .iter()
                    .any(|(start, part)| message.starts_with(start) && message.contains(part))
            }
            _ => false,
        };
        if damaged {
            return Error::new(
                ErrorKind::NotADatabase,
                format!("tq's tables were changed outside tq: {err}"),
            );
        }
        let kind = match err.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => ErrorKind::Busy,
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => ErrorKind::NotADatabase,
            Some(
                ErrorCode::SystemIoFailure
                | ErrorCode::DiskFull
                | ErrorCode::ReadOnly
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::FileLockingProtocolFailed
                | ErrorCode::NoLargeFileSupport,
            ) => ErrorKind::Io,
            Some(ErrorCode::TooBig) => ErrorKind::InvalidArgument,
            _ => ErrorKind::Internal,
        };
        Error::new(kind, format!("sqlite: {err}"))
    }
}
