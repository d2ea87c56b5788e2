//! One delivery of one task.

/// Proof of one delivery: the task id and the lease token drawn at claim
/// time. Finishing with a receipt whose delivery is no longer current fails
/// with [`crate::ErrorKind::NotHeld`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    pub(crate) id: i64,
    pub(crate) token: i64,
}

impl Receipt {
    /// The task's id.
    pub fn id(&self) -> i64 {
        self.id
    }
}

/// A claimed task, as returned by [`crate::Queue::pull`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub(crate) receipt: Receipt,
    pub(crate) attempts: u32,
    pub(crate) payload: String,
}

impl Task {
    /// The id given by [`crate::Queue::push`]; ids are never reused.
    pub fn id(&self) -> i64 {
        self.receipt.id
    }

    /// The JSON text exactly as pushed.
    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// How many times the task has been claimed, this delivery included:
    /// 1 on the first delivery.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// This delivery's receipt, for [`crate::Queue::finish`].
    pub fn receipt(&self) -> Receipt {
        self.receipt
    }
}

/// The state of a stored task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Waiting to be claimed (possibly not yet due).
    Pending,
    /// Claimed under a lease (possibly expired, not yet taken back).
    Leased,
    /// Finished and kept as history (only on queues opened with history).
    Done,
}
