//! Model-based fuzzing of tq's API.
//!
//! The input decodes to up to 64 operations on one or two handles (each
//! opened through the Rust API or the C ABI, on one of two named queues of
//! one file in a fresh directory): push, push_batch, pull, pull_batch,
//! finish, finish_batch, fail, extend, recover, count, list, retry_dead,
//! retry_all_dead, purge, oldest_ready_age, checkpoint, interrupt, open (or
//! reopen), close, cancel_task, set_concurrency_limit, set_rate_limit,
//! push_items (items waiting for earlier items, tasks, or unknown ids), and
//! three writes at once on three threads, so that tq commits some of them
//! in one group. Every result is checked against a small in-memory
//! model of the file's queues; any mismatch panics with the operation and
//! what was expected. At the end each queue used is counted, listed,
//! drained, its dead tasks retried and drained again, and counted again, so
//! a task stored by a call that failed, or lost by one that succeeded,
//! shows.
//!
//! What the model holds tq to (README.md, `include/tq.h`, the Rust docs):
//! - a push of valid JSON (per RFC 8259, checked by an independent checker)
//!   returns a new id, larger than every earlier one; invalid JSON fails
//!   with `InvalidJson`, bad UTF-8 (C ABI) or a payload over the handle's
//!   limit with `InvalidArgument`; none of these stores anything. A batch
//!   stores all its payloads or, with the error of its first bad payload,
//!   none;
//! - a unique key is held by its task while it is pending or leased, and,
//!   with a window, after it is done: a push with a held key stores nothing
//!   and answers `Duplicate` with the holder's id. A dead task, or a done
//!   one without a window, gives the key up to the next push with it (a
//!   retried dead task holds it again if nobody took it meanwhile). Keys
//!   are per queue; a batch with a key is refused;
//! - out-of-range options are refused by their setter and leave the options
//!   object as it was;
//! - a pull claims, of the handle's queue, the candidate first by priority
//!   (higher first), then by the time it became ready, then by id: a
//!   pending task that is due, or a leased one whose lease expired (it
//!   keeps its place in line). It returns the payload byte for byte, the
//!   attempt count (one more than before), max attempts, priority, ready
//!   time, and the last error (the reason of the last failure; some text
//!   after a lost lease; none after a failure without a reason). An expired
//!   lease that was its task's last attempt is not delivered: the claim
//!   that reaches it makes the task dead. With a wait, a pull that finds
//!   nothing returns none after the wait, or `Interrupted` on a handle that
//!   was interrupted or with a cancelled token;
//! - finishing, failing or extending the current delivery (even after its
//!   lease expired, as long as nobody took the task) succeeds through any
//!   handle on the file; any other delivery, or a task that was listed,
//!   answers `NotHeld`. A finished task is deleted, or kept as done by a
//!   handle with history or while its unique window runs. A failure makes
//!   the task dead once it used its attempts, else pending again after the
//!   failing handle's back-off (`min * 2^(attempts-1)` capped at `max`,
//!   less up to half of it), which `RetryAt` reports. A reason with a NUL
//!   (Rust) may be refused; once kept, C callers must still get the task;
//! - `recover` takes back exactly the expired leases of the handle's queue
//!   (this process holds every lease and is alive): pending again, or dead
//!   after their last attempt;
//! - counts and lists by state match; `retry_dead` revives a dead task of
//!   the handle's queue (attempts from zero, ready now) and refuses any
//!   other id; `purge` of done or dead tasks removes all of them at age 0
//!   and none at an hour or more, and refuses other states and ages over
//!   `i64::MAX`; `oldest_ready_age` is none without a ready task, else the
//!   age of the one ready longest; `checkpoint` leaves an empty log;
//! - everything survives closing and reopening handles;
//! - a task waiting for others (`after`) is never claimed until each has
//!   ended; one done releases it, one dead or cancelled releases it (run
//!   anyway) or cancels it, and so on down; `cancel_task` ends a task that
//!   is not leased at once, and marks a leased one, whose holder's next
//!   call answers `Cancelled` and ends it.
//!
//! And these invariants, across everything an input does (README.md): 1. no
//! id names two tasks; 2. a claim or extend never leaves more live leases
//! than a queue's concurrency limit; 3. no window of a rate's period surely
//! holds more claims than it allows (setting the same rate again keeps the
//! window's uses); 4. a task cancelled while leased is ended by the next
//! claim on the file once its lease ran out, whatever its holder does; 5.
//! the tasks waiting for an ended task are released or cancelled.
//!
//! Time. Each call's wall clock is read before and after it, and the model
//! keeps every ready time as the interval it is known to lie in (a pulled
//! or listed task pins it): the claim order is checked wherever it is
//! decided by what the model knows, and a task whose due time may have
//! passed during a call may or may not be claimed by it. Leases are either
//! 1 ms, after which the harness waits until the lease has certainly
//! expired, or 30 s and more, which never expire during an iteration. The
//! model assumes the wall clock does not step backwards during an
//! iteration.
#![no_main]

use std::ffi::{c_char, CStr, CString};
use std::fs;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use tq::ffi::{self, tq_queue, tq_status, tq_task};
use tq::{
    CancelToken, Cancelled, Durability, ErrorKind, Failed, OpenOptions, ParentFailure,
    PullOptions, PushOptions, Pushed, Queue, RateLimit, Receipt, TaskState, MAX_PAYLOAD_LEN,
    MAX_REASON_LEN, MAX_UNIQUE_KEY_LEN,
};
use tq_fuzz::{is_json_text, json_nest, json_value, trace, Scratch};

const MAX_OPS: usize = 64;
const DAY_MS: u64 = 24 * 3_600_000;
const HOUR_MS: u64 = 3_600_000;
/// The longest delay, lease, wait or window accepted (`options.rs`: one
/// year of 366 days).
const YEAR_MS: u64 = 366 * DAY_MS;
/// The queues of the file: tq's default and a second one.
const QUEUES: [&str; 2] = ["default", "second ✉"];
/// What the open options hold unless set (`options.rs`).
const DEFAULT_MAX_ATTEMPTS: u32 = 25;
const DEFAULT_BACKOFF: (u64, u64) = (1_000, HOUR_MS);
/// The page size of the final check's lists.
const FINAL_PAGE: usize = 3;

// ---------------------------------------------------------------------------
// The input

#[derive(Debug)]
struct Input {
    first: OpenSpec,
    ops: Vec<Op>,
}

// Enums are decoded by hand with one byte per choice (derived decoders
// take four), so that short inputs already hold many operations.

/// Old inputs: until the operations of cancels, limits, rates,
/// dependencies and writes at once came, an operation was one of 30, not
/// 40 (`Op::arbitrary`). With `TQ_FUZZ_CONVERT_OLD` set to a directory, the
/// target decodes each input it runs as such an old one and writes there
/// the input that means the same now, named as its source (see README.md).
struct OldInputs {
    /// The input's length, and where each operation's choice byte lies.
    len: usize,
    choices: Vec<usize>,
}

thread_local! {
    static OLD_INPUTS: std::cell::RefCell<Option<OldInputs>> = const { std::cell::RefCell::new(None) };
}

/// The operation chosen by the next byte: of 30 when decoding an old input
/// (noting where the byte lies), else of 40.
fn choose_op(u: &mut Unstructured) -> Result<usize> {
    OLD_INPUTS.with(|old| match old.borrow_mut().as_mut() {
        Some(old) => {
            if !u.is_empty() {
                old.choices.push(old.len - u.len());
            }
            u.choose_index(30)
        }
        None => u.choose_index(40),
    })
}

/// Rewrites `data`, an old input, so that it means the same now (each
/// operation's choice byte `b` becomes `b % 30`, which is the same choice
/// of 40).
fn convert_old(data: &[u8]) -> Vec<u8> {
    OLD_INPUTS.with(|old| {
        *old.borrow_mut() = Some(OldInputs {
            len: data.len(),
            choices: Vec::new(),
        })
    });
    let _ = Input::arbitrary_take_rest(Unstructured::new(data));
    let old = OLD_INPUTS.with(|old| old.borrow_mut().take()).unwrap();
    let mut new = data.to_vec();
    for at in old.choices {
        new[at] %= 30;
    }
    new
}

/// `TQ_FUZZ_CONVERT_OLD`, read once.
fn converting() -> Option<&'static std::path::Path> {
    static DIR: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| std::env::var_os("TQ_FUZZ_CONVERT_OLD").map(Into::into))
        .as_deref()
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let decoding_old = OLD_INPUTS.with(|old| old.borrow().is_some());
        if let (Some(dir), false) = (converting(), decoding_old) {
            // The whole input is still ahead.
            let data = u.peek_bytes(u.len()).unwrap_or_default().to_vec();
            let name = format!("{:016x}", {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                data.hash(&mut hasher);
                hasher.finish()
            });
            fs::write(dir.join(name), convert_old(&data)).expect("write the converted input");
        }
        let first = u.arbitrary()?;
        let mut ops = Vec::new();
        while !u.is_empty() && ops.len() < MAX_OPS {
            ops.push(u.arbitrary()?);
        }
        Ok(Input { first, ops })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Rust,
    C,
}

impl<'a> Arbitrary<'a> for Api {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(if u.arbitrary()? { Api::C } else { Api::Rust })
    }
}

/// How a handle is opened: each option left unset or given to its setter.
#[derive(Debug, Clone, Copy)]
struct OpenSpec {
    api: Api,
    keep_history: bool,
    limit: Limit,
    queue: QueueName,
    max_attempts: Attempts,
    backoff: Backoff,
}

impl<'a> Arbitrary<'a> for OpenSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(OpenSpec {
            api: u.arbitrary()?,
            keep_history: u.arbitrary()?,
            limit: u.arbitrary()?,
            queue: u.arbitrary()?,
            max_attempts: u.arbitrary()?,
            backoff: u.arbitrary()?,
        })
    }
}

/// `via` and `slot` name one of the two handles; an operation on a closed
/// handle goes to the other one, and is skipped when both are closed.
/// `which` values pick a delivery of this input (wrapped).
#[derive(Debug)]
enum Op {
    Push {
        via: bool,
        payload: Payload,
        settings: Vec<Setting>,
    },
    PushBatch {
        via: bool,
        payloads: Vec<Payload>,
        settings: Vec<Setting>,
    },
    Pull {
        via: bool,
        pull: PullSpec,
    },
    PullBatch {
        via: bool,
        pull: PullSpec,
        max: BatchMax,
    },
    Finish {
        via: bool,
        which: u8,
    },
    /// Finishes up to 4 deliveries of the handle's API in one batch.
    FinishBatch {
        via: bool,
        which: Vec<u8>,
    },
    Fail {
        via: bool,
        which: u8,
        reason: Reason,
    },
    Extend {
        via: bool,
        which: u8,
        lease: Lease,
    },
    Recover {
        via: bool,
    },
    /// Through the Rust API the state is taken modulo 4; through C any
    /// value other than 0 to 3 is refused.
    Count {
        via: bool,
        state: i8,
    },
    List {
        via: bool,
        state: i8,
        after: IdPick,
        max: BatchMax,
    },
    RetryDead {
        via: bool,
        id: IdPick,
    },
    RetryAllDead {
        via: bool,
    },
    /// As for `Count`, the state is any value through C.
    Purge {
        via: bool,
        state: i8,
        age: Age,
    },
    OldestReadyAge {
        via: bool,
    },
    Checkpoint {
        via: bool,
    },
    Interrupt {
        via: bool,
    },
    Open {
        slot: bool,
        spec: OpenSpec,
    },
    Close {
        slot: bool,
    },
    /// `cancel_task` of a task (a leased one first when `leased`), with a
    /// short reason or none.
    Cancel {
        via: bool,
        id: IdPick,
        leased: bool,
        reason: bool,
    },
    SetConcurrencyLimit {
        via: bool,
        limit: ConcurrencySpec,
    },
    SetRateLimit {
        via: bool,
        rate: RateSpec,
    },
    /// `push_items` of 0 to 4 items, each waiting for earlier items, stored
    /// tasks or unknown ids.
    PushItems {
        via: bool,
        items: Vec<ItemSpec>,
    },
    /// Three writes at once on three threads (through one handle or
    /// both), the second started `gaps[0]` µs after the first and the third
    /// `gaps[1]` µs after the second: while the first commits, the other
    /// two queue, in that order, and tq commits them in one group.
    Together {
        via: [bool; 3],
        subs: [Sub; 3],
        gaps: [u16; 2],
    },
    /// A push and a pull of every ready task through the first handle,
    /// then `Together` of a slow push_items and (100 µs or 1 ms later) a
    /// finish (of the newest task, mostly) through that handle, and (0 or
    /// 5 µs later) a push_items: the two queue behind the slow one and
    /// share a group commit. Then a push through the first handle again.
    Race {
        via: [bool; 3],
        finish: Sub,
        items: Vec<ItemSpec>,
        gaps: [u16; 2],
    },
    /// Claims every ready task with a 1 ms lease (they expire), sets a
    /// concurrency limit of `limit`, pulls with `lease`, then extends a
    /// delivery whose lease expired with `extend`, all through one handle.
    Squeeze {
        via: bool,
        limit: ConcurrencySpec,
        lease: Lease,
        which: u8,
        extend: Lease,
    },
    /// Extends a current delivery whose lease expired, if there is one
    /// (else any delivery, as `Extend`).
    ExtendExpired {
        via: bool,
        which: u8,
        lease: Lease,
    },
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let via = u.arbitrary()?;
        let state = |u: &mut Unstructured<'a>| -> Result<i8> {
            if u.ratio(7, 8)? {
                u.int_in_range(0..=3)
            } else {
                u.arbitrary()
            }
        };
        Ok(match choose_op(u)? {
            0..=3 => Op::Push {
                via,
                payload: u.arbitrary()?,
                settings: settings(u)?,
            },
            4 => Op::PushBatch {
                via,
                payloads: {
                    let n = u.int_in_range(0..=4)?;
                    (0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?
                },
                settings: settings(u)?,
            },
            5..=8 => Op::Pull {
                via,
                pull: u.arbitrary()?,
            },
            9 => Op::PullBatch {
                via,
                pull: u.arbitrary()?,
                max: u.arbitrary()?,
            },
            10..=12 => Op::Finish {
                via,
                which: u.arbitrary()?,
            },
            13 => Op::FinishBatch {
                via,
                which: {
                    let n = u.int_in_range(0..=4)?;
                    (0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?
                },
            },
            14..=16 => Op::Fail {
                via,
                which: u.arbitrary()?,
                reason: u.arbitrary()?,
            },
            17 => Op::Extend {
                via,
                which: u.arbitrary()?,
                lease: u.arbitrary()?,
            },
            18 => Op::Recover { via },
            19 => Op::Count {
                via,
                state: state(u)?,
            },
            20 => Op::List {
                via,
                state: state(u)?,
                after: u.arbitrary()?,
                max: u.arbitrary()?,
            },
            21 => Op::RetryDead {
                via,
                id: u.arbitrary()?,
            },
            22 => Op::RetryAllDead { via },
            23 => Op::Purge {
                via,
                state: state(u)?,
                age: u.arbitrary()?,
            },
            24 => Op::OldestReadyAge { via },
            25 => Op::Checkpoint { via },
            26 => Op::Interrupt { via },
            27 | 28 => Op::Open {
                slot: via,
                spec: u.arbitrary()?,
            },
            29 => Op::Close { slot: via },
            30 | 31 => Op::Cancel {
                via,
                id: u.arbitrary()?,
                leased: u.ratio(3, 4)?,
                reason: u.arbitrary()?,
            },
            32 => Op::SetConcurrencyLimit {
                via,
                limit: u.arbitrary()?,
            },
            33 => Op::SetRateLimit {
                via,
                rate: u.arbitrary()?,
            },
            34 | 35 => Op::PushItems {
                via,
                items: items(u)?,
            },
            37 => Op::Squeeze {
                via,
                limit: u.arbitrary()?,
                lease: u.arbitrary()?,
                which: u.arbitrary()?,
                extend: u.arbitrary()?,
            },
            36 => Op::Together {
                via: [via, u.arbitrary()?, u.arbitrary()?],
                subs: [u.arbitrary()?, u.arbitrary()?, u.arbitrary()?],
                gaps: [gap(u)?, gap(u)?],
            },
            38 => Op::Race {
                via: [via, u.arbitrary()?, u.arbitrary()?],
                finish: if u.ratio(3, 4)? {
                    Sub::FinishNewest
                } else {
                    Sub::Finish(u.arbitrary()?)
                },
                items: {
                    // At least two, so that one may fail after another
                    // was stored.
                    let n = u.int_in_range(2..=4)?;
                    (0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?
                },
                gaps: [*u.choose(&[1000, 100])?, *u.choose(&[5, 0])?],
            },
            _ => Op::ExtendExpired {
                via,
                which: u.arbitrary()?,
                lease: u.arbitrary()?,
            },
        })
    }
}

/// A pause between two writes of `Op::Together`, in µs.
fn gap(u: &mut Unstructured) -> Result<u16> {
    Ok(*u.choose(&[20, 0, 5, 100, 1000])?)
}

fn items(u: &mut Unstructured) -> Result<Vec<ItemSpec>> {
    let n = u.int_in_range(0..=4)?;
    (0..n).map(|_| u.arbitrary()).collect()
}

/// A concurrency limit given to its setter.
#[derive(Debug, Clone, Copy)]
enum ConcurrencySpec {
    /// Removes it.
    None,
    /// 1 or 2.
    Some(u8),
    /// Refused: 0.
    Zero,
}

impl<'a> Arbitrary<'a> for ConcurrencySpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(8)? {
            0 => ConcurrencySpec::None,
            1..=4 => ConcurrencySpec::Some(1),
            5 | 6 => ConcurrencySpec::Some(2),
            _ => ConcurrencySpec::Zero,
        })
    }
}

/// A rate limit given to its setter. Windows are an hour or more, so that
/// no slot comes free during an iteration and the model can say exactly
/// what each claim may take.
#[derive(Debug, Clone, Copy)]
enum RateSpec {
    /// Removes it.
    None,
    /// The rate in force on the queue again (one per hour if none).
    Same,
    /// 1 to 3 claims per hour or per day.
    Some { claims: u8, day: bool },
    /// Refused: 0 claims.
    ZeroClaims,
    /// Refused: a window of 0 ms.
    ZeroWindow,
}

impl<'a> Arbitrary<'a> for RateSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(10)? {
            0 => RateSpec::None,
            1..=4 => RateSpec::Same,
            5..=7 => RateSpec::Some {
                claims: u.int_in_range(1..=3)?,
                day: u.arbitrary()?,
            },
            8 => RateSpec::ZeroClaims,
            _ => RateSpec::ZeroWindow,
        })
    }
}

/// A rate: claims per window (ms).
type Rate = (u32, u64);

/// One item of a `push_items`.
#[derive(Debug, Clone)]
struct ItemSpec {
    payload: String,
    after: Vec<ParentPick>,
    run_anyway: bool,
}

impl<'a> Arbitrary<'a> for ItemSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let mut payload = String::new();
        json_value(u, 1, &mut payload)?;
        let n = u.int_in_range(0..=2)?;
        Ok(ItemSpec {
            payload,
            after: (0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?,
            run_anyway: u.arbitrary()?,
        })
    }
}

/// A task an item waits for.
#[derive(Debug, Clone, Copy)]
enum ParentPick {
    /// An earlier item of the same call (wrapped; none for the first).
    Item(u8),
    /// A task of the model (nudged as `IdPick` does).
    Task(IdPick),
    /// An id no task has had: the whole call fails.
    Unknown,
}

/// The id of a task that never exists.
const UNKNOWN_ID: i64 = 1_000_000_000_000_000;

impl<'a> Arbitrary<'a> for ParentPick {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(6)? {
            0 | 1 => ParentPick::Item(u.arbitrary()?),
            2..=4 => ParentPick::Task(u.arbitrary()?),
            _ => ParentPick::Unknown,
        })
    }
}

/// One of the writes of `Op::Together`.
#[derive(Debug, Clone)]
enum Sub {
    Nothing,
    /// Finishes a delivery of this input.
    Finish(u8),
    /// Finishes the current delivery of the newest task, if it is leased.
    FinishNewest,
    PushItems(Vec<ItemSpec>),
    /// A push_items that takes long in its transaction and stores
    /// nothing: `SLOW_ITEMS` small items, then one waiting for an unknown
    /// id. The writes started behind it queue meanwhile.
    Slow,
    /// Pushes a JSON text without options.
    Push(String),
}

/// How many items `Sub::Slow` stores before its bad one.
const SLOW_ITEMS: usize = 300;

impl<'a> Arbitrary<'a> for Sub {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(8)? {
            0 => Sub::Finish(u.arbitrary()?),
            1 => Sub::FinishNewest,
            2 | 3 => Sub::PushItems(items(u)?),
            4 => Sub::Nothing,
            5 => Sub::Slow,
            _ => {
                let mut text = String::new();
                json_value(u, 1, &mut text)?;
                Sub::Push(text)
            }
        })
    }
}

fn settings(u: &mut Unstructured) -> Result<Vec<Setting>> {
    let n = u.int_in_range(0..=4)?;
    (0..n).map(|_| u.arbitrary()).collect()
}

#[derive(Debug)]
enum Payload {
    /// Any bytes (through the Rust API, made UTF-8 with replacement
    /// characters).
    Raw(Vec<u8>),
    /// A generated valid JSON text.
    Json(String),
    /// A generated JSON text with one change, usually no longer valid.
    Broken(Vec<u8>),
    /// Arrays or objects nested `depth` deep, closed or not.
    Nest {
        depth: u16,
        objects: bool,
        closed: bool,
    },
}

impl<'a> Arbitrary<'a> for Payload {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        // Choice 0 (what an exhausted input gives) is valid JSON ("null").
        Ok(match u.choose_index(8)? {
            0..=3 => {
                let mut text = String::new();
                json_value(u, 3, &mut text)?;
                Payload::Json(text)
            }
            4 => {
                let len = u.int_in_range(0..=64)?;
                Payload::Raw(u.bytes(len.min(u.len()))?.to_vec())
            }
            5 | 6 => {
                let mut text = String::new();
                json_value(u, 2, &mut text)?;
                let mut bytes = text.into_bytes();
                let at = u.int_in_range(0..=bytes.len())?;
                match u.choose_index(5)? {
                    0 => bytes.truncate(at),
                    1 => bytes.insert(at, u.arbitrary()?),
                    2 if at < bytes.len() => bytes[at] = u.arbitrary()?,
                    3 => {
                        let junk: &str = u.choose(&[
                            ",", "]", "}", "x", " 1", "\0", "\"", "\\", "\u{feff}", "\x0b",
                            "/*c*/", "NaN", "01", "[", "{",
                        ])?;
                        bytes.splice(at..at, junk.bytes());
                    }
                    _ => bytes.clear(),
                }
                Payload::Broken(bytes)
            }
            _ => Payload::Nest {
                depth: u.int_in_range(1..=3000)?,
                objects: u.arbitrary()?,
                closed: u.ratio(3, 4)?,
            },
        })
    }
}

impl Payload {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Payload::Raw(bytes) | Payload::Broken(bytes) => bytes.clone(),
            Payload::Json(text) => text.clone().into_bytes(),
            Payload::Nest {
                depth,
                objects,
                closed,
            } => json_nest(*depth as usize, *objects, *closed).into_bytes(),
        }
    }
}

/// One push option setter call; several may be applied in turn. Values are
/// milliseconds unless said otherwise.
#[derive(Debug, Clone, Copy)]
enum Setting {
    /// 0 to 5 ms: due during the iteration.
    DelayShort(u8),
    /// One day to one year: never due during the iteration.
    DelayHuge(u64),
    /// Over one year: refused.
    DelayTooLong(u64),
    /// One year and this many nanoseconds (1 to 999,999): refused (through
    /// C, which counts whole milliseconds, one year and 1 ms).
    DelayOverByNanos(u32),
    /// A time long past (this many times 10^9 ms, so that ties happen): due
    /// at once, ahead of every task pushed without a delay.
    RunAtPast(u8),
    /// This long after a day from now, capped at `i64::MAX`.
    RunAtFuture(u64),
    /// Before 1970: refused.
    RunAtNegative(i64),
    Priority(i32),
    /// 0 is refused.
    MaxAttempts(u32),
    UniqueKey(Key),
    /// The unique window: needs a key, at most a year.
    UniqueFor(Window),
}

impl<'a> Arbitrary<'a> for Setting {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(14)? {
            0 => Setting::DelayShort(u.int_in_range(0..=5)?),
            1 => Setting::DelayHuge(if u.ratio(1, 4)? {
                YEAR_MS
            } else {
                u.int_in_range(DAY_MS..=YEAR_MS)?
            }),
            2 => Setting::DelayTooLong(u.int_in_range(YEAR_MS + 1..=u64::MAX)?),
            3 => Setting::DelayOverByNanos(u.int_in_range(1..=999_999)?),
            4 => Setting::RunAtPast(u.arbitrary()?),
            5 => Setting::RunAtFuture(u.arbitrary()?),
            6 => Setting::RunAtNegative(u.int_in_range(i64::MIN..=-1)?),
            7 | 8 => Setting::Priority(match u.choose_index(4)? {
                0 => u.int_in_range(-2..=2)?,
                1 => *u.choose(&[i32::MIN, i32::MAX, i32::MIN + 1, i32::MAX - 1])?,
                _ => u.arbitrary()?,
            }),
            9 => Setting::MaxAttempts(match u.choose_index(4)? {
                0 => 0,
                1 => u32::MAX,
                _ => u.int_in_range(1..=3)?,
            }),
            10..=12 => Setting::UniqueKey(u.arbitrary()?),
            _ => Setting::UniqueFor(u.arbitrary()?),
        })
    }
}

/// A unique key given to its setter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// One of a few short keys, so that keys meet.
    Short(u8),
    /// `MAX_UNIQUE_KEY_LEN` bytes: the longest accepted.
    Longest,
    /// Refused: empty.
    Empty,
    /// Refused: one byte too long.
    TooLong,
    /// Refused: with a NUL (Rust) or not UTF-8 (C).
    Invalid,
    /// Removes the key and its window (`clear_unique_key`; NULL through C).
    Clear,
}

const SHORT_KEYS: [&str; 3] = ["a", "b", "clé:1"];

impl<'a> Arbitrary<'a> for Key {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(10)? {
            0..=4 => Key::Short(u.int_in_range(0..=2)?),
            5 => Key::Longest,
            6 => Key::Empty,
            7 => Key::TooLong,
            8 => Key::Invalid,
            _ => Key::Clear,
        })
    }
}

impl Key {
    /// The key as the Rust API gets it, if it sets one.
    fn text(self) -> Option<String> {
        match self {
            Key::Short(k) => Some(SHORT_KEYS[k as usize % SHORT_KEYS.len()].to_owned()),
            Key::Longest => Some("k".repeat(MAX_UNIQUE_KEY_LEN)),
            Key::Empty => Some(String::new()),
            Key::TooLong => Some("k".repeat(MAX_UNIQUE_KEY_LEN + 1)),
            Key::Invalid => Some("a\0b".to_owned()),
            Key::Clear => None,
        }
    }

    /// The key as the C ABI gets it (NULL for none).
    fn c_text(self) -> Option<CString> {
        match self {
            Key::Invalid => Some(CString::new(b"\xff\xfe".to_vec()).unwrap()),
            _ => self.text().map(|key| CString::new(key).unwrap()),
        }
    }

    fn valid(self) -> bool {
        !matches!(self, Key::Empty | Key::TooLong | Key::Invalid)
    }
}

#[derive(Debug, Clone, Copy)]
enum Window {
    Zero,
    /// One day to one year: never over during the iteration.
    Long(u64),
    /// Over one year: refused.
    TooLong(u64),
}

impl<'a> Arbitrary<'a> for Window {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(4)? {
            0 => Window::Zero,
            1 | 2 => Window::Long(u.int_in_range(DAY_MS..=YEAR_MS)?),
            _ => Window::TooLong(u.int_in_range(YEAR_MS + 1..=u64::MAX)?),
        })
    }
}

impl Window {
    fn ms(self) -> u64 {
        match self {
            Window::Zero => 0,
            Window::Long(ms) | Window::TooLong(ms) => ms,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Lease {
    /// The options' default (30 s), or NULL options through the C ABI.
    Default,
    /// 1 ms: the harness then waits until it has certainly expired.
    Short,
    /// One hour to one year (ms).
    Long(u64),
    /// Refused: zero.
    Zero,
    /// Refused: this many nanoseconds, under one millisecond (the Rust API
    /// only; zero through C).
    SubMillisecond(u32),
    /// Refused: over one year (ms).
    TooLong(u64),
}

impl<'a> Arbitrary<'a> for Lease {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(10)? {
            0 | 1 => Lease::Default,
            2..=4 => Lease::Short,
            5 | 6 => Lease::Long(if u.ratio(1, 4)? {
                YEAR_MS
            } else {
                u.int_in_range(HOUR_MS..=YEAR_MS)?
            }),
            7 => Lease::Zero,
            8 => Lease::SubMillisecond(u.int_in_range(1..=999_999)?),
            _ => Lease::TooLong(u.int_in_range(YEAR_MS + 1..=u64::MAX)?),
        })
    }
}

impl Lease {
    /// The value a setter gets, in the Rust API's terms (`None`: not set).
    fn duration(self) -> Option<Duration> {
        match self {
            Lease::Default => None,
            Lease::Short => Some(Duration::from_millis(1)),
            Lease::Long(ms) | Lease::TooLong(ms) => Some(Duration::from_millis(ms)),
            Lease::Zero => Some(Duration::ZERO),
            Lease::SubMillisecond(nanos) => Some(Duration::from_nanos(u64::from(nanos))),
        }
    }

    /// The value a C setter gets, in milliseconds.
    fn c_ms(self) -> Option<u64> {
        self.duration().map(|d| d.as_millis() as u64)
    }

    fn valid(self) -> bool {
        matches!(self, Lease::Default | Lease::Short | Lease::Long(_))
    }
}

/// How a pull is made: its lease, how long it waits, and whether its
/// options carry a cancellation token that was already triggered.
#[derive(Debug, Clone, Copy)]
struct PullSpec {
    lease: Lease,
    wait: Wait,
    cancelled: bool,
}

impl<'a> Arbitrary<'a> for PullSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(PullSpec {
            lease: u.arbitrary()?,
            wait: u.arbitrary()?,
            cancelled: u.ratio(1, 8)?,
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Not set: answer at once.
    None,
    /// 1 to 3 ms.
    Short(u8),
    /// Refused: over one year.
    TooLong(u64),
}

impl<'a> Arbitrary<'a> for Wait {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(8)? {
            0..=5 => Wait::None,
            6 => Wait::Short(u.int_in_range(1..=3)?),
            _ => Wait::TooLong(u.int_in_range(YEAR_MS + 1..=u64::MAX)?),
        })
    }
}

impl Wait {
    /// The wait in force after the setter.
    fn ms(self) -> u64 {
        match self {
            Wait::Short(ms) => u64::from(ms),
            Wait::None | Wait::TooLong(_) => 0,
        }
    }
}

/// The room of a batch pull or a list page.
#[derive(Debug, Clone, Copy)]
enum BatchMax {
    /// 0 to 4 (0 is refused by a batch pull).
    Small(u8),
    /// `usize::MAX` (the Rust API only; 4 through C, whose caller must
    /// provide the room).
    Huge,
}

impl<'a> Arbitrary<'a> for BatchMax {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(if u.ratio(1, 8)? {
            BatchMax::Huge
        } else {
            BatchMax::Small(u.int_in_range(0..=4)?)
        })
    }
}

impl BatchMax {
    fn value(self, api: Api) -> usize {
        match (self, api) {
            (BatchMax::Small(n), _) => usize::from(n),
            (BatchMax::Huge, Api::Rust) => usize::MAX,
            (BatchMax::Huge, Api::C) => 4,
        }
    }
}

/// A failure reason.
#[derive(Debug, Clone)]
enum Reason {
    /// No reason: "" through Rust, NULL through C.
    None,
    Text(String),
    /// Over `MAX_REASON_LEN` bytes of two-byte characters, with `odd`
    /// putting one byte in front so the limit falls inside a character.
    Long {
        odd: bool,
    },
    /// With a NUL (Rust) or not UTF-8 (C).
    Invalid,
}

impl<'a> Arbitrary<'a> for Reason {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(8)? {
            0 => Reason::None,
            1..=4 => Reason::Text(u.arbitrary()?),
            5 => Reason::Long {
                odd: u.arbitrary()?,
            },
            _ => Reason::Invalid,
        })
    }
}

impl Reason {
    fn text(&self) -> String {
        match self {
            Reason::None => String::new(),
            Reason::Text(text) => text.clone(),
            Reason::Long { odd } => {
                let mut text = if *odd { "x".to_owned() } else { String::new() };
                text.push_str(&"é".repeat(MAX_REASON_LEN / 2 + 10));
                text
            }
            Reason::Invalid => "bad\0reason".to_owned(),
        }
    }

    /// The reason as the C ABI gets it (NULL for none; a text with a NUL
    /// is cut there, as C would see it).
    fn c_text(&self) -> Option<CString> {
        match self {
            Reason::None => None,
            Reason::Invalid => Some(CString::new(b"bad \xff reason".to_vec()).unwrap()),
            _ => {
                let text = self.text();
                let end = text.find('\0').unwrap_or(text.len());
                Some(CString::new(&text[..end]).unwrap())
            }
        }
    }

    /// The reason tq receives through `api` ("" for none); `None` when it
    /// is not UTF-8.
    fn received(&self, api: Api) -> Option<String> {
        match api {
            Api::Rust => Some(self.text()),
            Api::C => match self.c_text() {
                None => Some(String::new()),
                Some(text) => text.into_string().ok(),
            },
        }
    }
}

/// An id for `retry_dead` or a list's `after_id`: mostly one of the
/// model's tasks (nudged by -1, 0 or +1), else a fixed value.
#[derive(Debug, Clone, Copy)]
enum IdPick {
    Task { which: u8, nudge: i8 },
    Fixed(i64),
}

impl<'a> Arbitrary<'a> for IdPick {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(if u.ratio(3, 4)? {
            IdPick::Task {
                which: u.arbitrary()?,
                nudge: u.int_in_range(-1..=1)?,
            }
        } else {
            IdPick::Fixed(*u.choose(&[0, -1, 1, i64::MIN, i64::MAX])?)
        })
    }
}

/// A handle's payload limit (`max_payload_len`).
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// Not set: `MAX_PAYLOAD_LEN`.
    Default,
    /// This many bytes: 0 is refused (leaving the default).
    Bytes(u16),
    /// Over `MAX_PAYLOAD_LEN`: refused.
    TooBig(usize),
}

impl<'a> Arbitrary<'a> for Limit {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(4)? {
            0 | 1 => Limit::Default,
            2 => Limit::Bytes(u.int_in_range(0..=300)?),
            _ => Limit::TooBig(u.int_in_range(MAX_PAYLOAD_LEN + 1..=usize::MAX)?),
        })
    }
}

impl Limit {
    /// The value given to the setter, if any.
    fn value(self) -> Option<usize> {
        match self {
            Limit::Default => None,
            Limit::Bytes(n) => Some(usize::from(n)),
            Limit::TooBig(n) => Some(n),
        }
    }
}

/// The queue a handle is opened on.
#[derive(Debug, Clone, Copy)]
enum QueueName {
    /// Not set: "default".
    Unset,
    /// `QUEUES[0]` ("default") or `QUEUES[1]`, set explicitly.
    Named(usize),
    /// Refused: empty.
    Empty,
    /// Refused: 129 bytes.
    TooLong,
    /// Refused: with a NUL (Rust) or not UTF-8 (C).
    Invalid,
}

impl<'a> Arbitrary<'a> for QueueName {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(10)? {
            0..=2 => QueueName::Unset,
            3 => QueueName::Named(0),
            4..=6 => QueueName::Named(1),
            7 => QueueName::Empty,
            8 => QueueName::TooLong,
            _ => QueueName::Invalid,
        })
    }
}

impl QueueName {
    fn text(self) -> Option<String> {
        match self {
            QueueName::Unset => None,
            QueueName::Named(q) => Some(QUEUES[q].to_owned()),
            QueueName::Empty => Some(String::new()),
            QueueName::TooLong => Some("q".repeat(tq::MAX_QUEUE_NAME_LEN + 1)),
            QueueName::Invalid => Some("q\0".to_owned()),
        }
    }

    fn c_text(self) -> Option<CString> {
        match self {
            QueueName::Invalid => Some(CString::new(b"q\xff".to_vec()).unwrap()),
            _ => self.text().map(|name| CString::new(name).unwrap()),
        }
    }
}

/// A handle's default max attempts.
#[derive(Debug, Clone, Copy)]
enum Attempts {
    Unset,
    /// 1 to 3.
    Few(u8),
    /// Refused: 0.
    Zero,
}

impl<'a> Arbitrary<'a> for Attempts {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(6)? {
            0 | 1 => Attempts::Unset,
            2..=4 => Attempts::Few(u.int_in_range(1..=3)?),
            _ => Attempts::Zero,
        })
    }
}

/// A handle's retry back-off, (min, max) in ms.
#[derive(Debug, Clone, Copy)]
enum Backoff {
    /// Not set: 1 s doubling to 1 h.
    Unset,
    /// (0, 0): retried at once.
    Immediate,
    /// A pause of a few ms: ready again during the iteration.
    Short(u8, u8),
    /// An hour or more.
    Long(u64, u64),
    /// Refused: max below min.
    Inverted(u64, u64),
    /// Refused: over a year.
    TooLong(u64),
}

impl<'a> Arbitrary<'a> for Backoff {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(10)? {
            0 | 1 => Backoff::Unset,
            2..=4 => Backoff::Immediate,
            5 => Backoff::Short(u.int_in_range(1..=4)?, u.int_in_range(0..=8)?),
            6 | 7 => {
                let min = u.int_in_range(HOUR_MS..=DAY_MS)?;
                Backoff::Long(min, u.int_in_range(min..=YEAR_MS)?)
            }
            8 => {
                let max = u.int_in_range(0..=DAY_MS)?;
                Backoff::Inverted(max + u.int_in_range(1..=DAY_MS)?, max)
            }
            _ => Backoff::TooLong(u.int_in_range(YEAR_MS + 1..=u64::MAX)?),
        })
    }
}

impl Backoff {
    /// The values given to the setter, if any.
    fn value(self) -> Option<(u64, u64)> {
        match self {
            Backoff::Unset => None,
            Backoff::Immediate => Some((0, 0)),
            Backoff::Short(min, extra) => Some((u64::from(min), u64::from(min + extra))),
            Backoff::Long(min, max) | Backoff::Inverted(min, max) => Some((min, max)),
            Backoff::TooLong(ms) => Some((0, ms)),
        }
    }

    fn valid(self) -> bool {
        !matches!(self, Backoff::Inverted(..) | Backoff::TooLong(_))
    }
}

#[derive(Debug, Clone, Copy)]
enum Age {
    /// 0: every done or dead task.
    Zero,
    /// One hour to `i64::MAX` (ms): no task finished during the iteration.
    Old(u64),
    /// Over `i64::MAX`: refused.
    TooOld(u64),
}

impl<'a> Arbitrary<'a> for Age {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(match u.choose_index(4)? {
            0 | 1 => Age::Zero,
            2 => Age::Old(u.int_in_range(HOUR_MS..=i64::MAX as u64)?),
            _ => Age::TooOld(u.int_in_range(i64::MAX as u64 + 1..=u64::MAX)?),
        })
    }
}

impl Age {
    fn ms(self) -> u64 {
        match self {
            Age::Zero => 0,
            Age::Old(ms) | Age::TooOld(ms) => ms,
        }
    }
}

// ---------------------------------------------------------------------------
// Handles, through either API

enum Handle {
    Rust(Queue),
    C(*mut tq_queue),
}

// SAFETY: tq's C handles and tasks may be used from any thread (each call
// says so in `tq.h`); `Op::Together` uses a handle from two threads at once
// and a task from one of them.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}
unsafe impl Send for Token {}
unsafe impl Sync for Token {}

/// A task an item waits for, resolved: an earlier item, or an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Item(usize),
    Task(i64),
}

/// An item of `push_items` as sent.
#[derive(Clone)]
struct SentItem {
    payload: String,
    after: Vec<After>,
    run_anyway: bool,
}

impl std::fmt::Debug for SentItem {
    /// A long payload shows as its start and length.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let payload = if self.payload.len() > 40 {
            format!("{}... ({} bytes)", cut(&self.payload, 20), self.payload.len())
        } else {
            self.payload.clone()
        };
        f.debug_struct("SentItem")
            .field("payload", &payload)
            .field("after", &self.after)
            .field("run_anyway", &self.run_anyway)
            .finish()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Handle::C(queue) = *self {
            ffi::tq_close(queue);
        }
    }
}

/// One delivery, or a task listed through C (which is not held): what
/// finish, fail and extend take.
#[derive(Debug, Clone, Copy)]
enum Token {
    Rust(Receipt),
    C(*mut tq_task),
}

impl Token {
    fn api(&self) -> Api {
        match self {
            Token::Rust(_) => Api::Rust,
            Token::C(_) => Api::C,
        }
    }
}

/// A task as a pull or a list shows it.
#[derive(Debug)]
struct Seen {
    id: i64,
    payload: Vec<u8>,
    attempts: u32,
    max_attempts: u32,
    priority: i32,
    run_at: i64,
    last_error: Option<Vec<u8>>,
    /// `None` for a task pulled through the Rust API (leased by definition).
    state: Option<TaskState>,
    api: Api,
}

type Outcome<T> = std::result::Result<T, ErrorKind>;

fn kind_of(status: tq_status) -> ErrorKind {
    match status {
        tq_status::TQ_ERR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
        tq_status::TQ_ERR_INVALID_JSON => ErrorKind::InvalidJson,
        tq_status::TQ_ERR_NOT_HELD => ErrorKind::NotHeld,
        tq_status::TQ_ERR_BUSY => ErrorKind::Busy,
        tq_status::TQ_ERR_IO => ErrorKind::Io,
        tq_status::TQ_ERR_NOT_A_DATABASE => ErrorKind::NotADatabase,
        tq_status::TQ_ERR_INTERNAL => ErrorKind::Internal,
        tq_status::TQ_ERR_INTERRUPTED => ErrorKind::Interrupted,
        tq_status::TQ_ERR_CANCELLED => ErrorKind::Cancelled,
        other => panic!("status {other:?} is not an error"),
    }
}

/// A C call's status as an outcome (`TQ_OK` or a positive status is
/// success); an error must come with a message.
fn c_outcome(status: tq_status) -> Outcome<tq_status> {
    if (status as i32) >= 0 {
        return Ok(status);
    }
    let message = unsafe { CStr::from_ptr(ffi::tq_last_error()) };
    assert!(
        !message.to_bytes().is_empty(),
        "C call failed with {status:?} but tq_last_error() is empty"
    );
    Err(kind_of(status))
}

/// A setter's status: `TQ_OK` or an error.
fn c_setter(status: tq_status) -> Outcome<()> {
    c_outcome(status).map(|status| assert_eq!(status, tq_status::TQ_OK, "a setter's status"))
}

fn rust_outcome<T>(result: tq::Result<T>) -> Outcome<T> {
    result.map_err(|err| {
        assert!(
            !err.message().is_empty(),
            "error {:?} without a message",
            err.kind()
        );
        err.kind()
    })
}

fn c_state(state: i32) -> TaskState {
    match state {
        0 => TaskState::Pending,
        1 => TaskState::Leased,
        2 => TaskState::Done,
        3 => TaskState::Dead,
        4 => TaskState::Cancelled,
        other => panic!("tq_task_state returned {other}"),
    }
}

/// Reads every field of a task handed to C.
fn c_seen(task: *mut tq_task) -> Seen {
    let mut len = usize::MAX;
    let text = ffi::tq_task_payload(task, &mut len);
    assert!(!text.is_null(), "tq_task_payload returned NULL");
    // SAFETY: tq promises `len` bytes followed by a NUL.
    let with_nul = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len + 1) };
    assert_eq!(
        with_nul[len], 0,
        "tq_task_payload's text is not NUL-terminated"
    );
    let last_error = ffi::tq_task_last_error(task);
    Seen {
        id: ffi::tq_task_id(task),
        payload: with_nul[..len].to_vec(),
        attempts: ffi::tq_task_attempts(task),
        max_attempts: ffi::tq_task_max_attempts(task),
        priority: ffi::tq_task_priority(task),
        run_at: ffi::tq_task_run_at_unix_ms(task),
        last_error: (!last_error.is_null())
            .then(|| unsafe { CStr::from_ptr(last_error) }.to_bytes().to_vec()),
        state: Some(c_state(ffi::tq_task_state(task))),
        api: Api::C,
    }
}

fn rust_seen(task: &tq::Task) -> Seen {
    Seen {
        id: task.id(),
        payload: task.payload().as_bytes().to_vec(),
        attempts: task.attempts(),
        max_attempts: task.max_attempts(),
        priority: task.priority(),
        run_at: task.run_at_unix_ms(),
        last_error: task.last_error().map(|e| e.as_bytes().to_vec()),
        state: None,
        api: Api::Rust,
    }
}

/// The outcome of each option setter an operation called, in order.
type Setters = Vec<Outcome<()>>;

/// A push option setter with its values resolved (a future time is
/// computed once, so the model sees the same value as the handle).
#[derive(Debug, Clone, Copy)]
enum Set {
    Setting(Setting),
    RunAt(i64),
}

fn resolve(setting: Setting, now: i64) -> Set {
    match setting {
        Setting::RunAtPast(x) => Set::RunAt(past_ms(x)),
        Setting::RunAtFuture(after) => {
            Set::RunAt((now + DAY_MS as i64).saturating_add_unsigned(after))
        }
        Setting::RunAtNegative(at) => Set::RunAt(at),
        other => Set::Setting(other),
    }
}

impl Handle {
    fn open(path: &str, spec: &OpenSpec, setters: &mut Setters) -> Outcome<Handle> {
        match spec.api {
            Api::Rust => {
                let mut options = OpenOptions::new();
                options
                    .durability(Durability::Normal)
                    .keep_history(spec.keep_history)
                    .busy_timeout(Duration::from_secs(1))
                    .expect("a 1 s busy timeout is accepted");
                if let Some(n) = spec.limit.value() {
                    setters.push(rust_outcome(options.max_payload_len(n).map(drop)));
                }
                if let Some(name) = spec.queue.text() {
                    setters.push(rust_outcome(options.queue(&name).map(drop)));
                }
                if let Attempts::Few(n) = spec.max_attempts {
                    setters.push(rust_outcome(options.max_attempts(u32::from(n)).map(drop)));
                }
                if let Attempts::Zero = spec.max_attempts {
                    setters.push(rust_outcome(options.max_attempts(0).map(drop)));
                }
                if let Some((min, max)) = spec.backoff.value() {
                    let (min, max) = (Duration::from_millis(min), Duration::from_millis(max));
                    setters.push(rust_outcome(options.retry_backoff(min, max).map(drop)));
                }
                rust_outcome(Queue::open(path, &options)).map(Handle::Rust)
            }
            Api::C => {
                let options = ffi::tq_options_new();
                assert!(!options.is_null(), "tq_options_new returned NULL");
                c_setter(ffi::tq_options_set_durability(options, 1)).expect("durability");
                c_setter(ffi::tq_options_set_keep_history(options, spec.keep_history))
                    .expect("keep_history");
                c_setter(ffi::tq_options_set_busy_timeout_ms(options, 1000)).expect("busy timeout");
                if let Some(n) = spec.limit.value() {
                    setters.push(c_setter(ffi::tq_options_set_max_payload_len(options, n)));
                }
                if let Some(name) = spec.queue.c_text() {
                    setters.push(c_setter(ffi::tq_options_set_queue(options, name.as_ptr())));
                }
                match spec.max_attempts {
                    Attempts::Unset => {}
                    Attempts::Few(n) => setters.push(c_setter(ffi::tq_options_set_max_attempts(
                        options,
                        u32::from(n),
                    ))),
                    Attempts::Zero => {
                        setters.push(c_setter(ffi::tq_options_set_max_attempts(options, 0)))
                    }
                }
                if let Some((min, max)) = spec.backoff.value() {
                    setters.push(c_setter(ffi::tq_options_set_retry_backoff_ms(
                        options, min, max,
                    )));
                }
                let path = CString::new(path).expect("no NUL in the scratch path");
                let mut queue = std::ptr::null_mut();
                let status = ffi::tq_open(path.as_ptr(), options, &mut queue);
                ffi::tq_options_free(options);
                c_outcome(status)?;
                assert!(!queue.is_null(), "tq_open returned TQ_OK and a NULL handle");
                Ok(Handle::C(queue))
            }
        }
    }

    fn rust_push_options(sets: &[Set], setters: &mut Setters) -> PushOptions {
        let mut options = PushOptions::new();
        for set in sets {
            let outcome = match *set {
                Set::RunAt(at) => options.run_at_unix_ms(at).map(drop),
                Set::Setting(setting) => match setting {
                    Setting::DelayShort(ms) => options
                        .delay(Duration::from_millis(u64::from(ms)))
                        .map(drop),
                    Setting::DelayHuge(ms) | Setting::DelayTooLong(ms) => {
                        options.delay(Duration::from_millis(ms)).map(drop)
                    }
                    Setting::DelayOverByNanos(nanos) => options
                        .delay(
                            Duration::from_millis(YEAR_MS) + Duration::from_nanos(u64::from(nanos)),
                        )
                        .map(drop),
                    Setting::Priority(p) => {
                        options.priority(p);
                        Ok(())
                    }
                    Setting::MaxAttempts(n) => options.max_attempts(n).map(drop),
                    Setting::UniqueKey(key) => match key.text() {
                        Some(text) => options.unique_key(&text).map(drop),
                        None => {
                            options.clear_unique_key();
                            Ok(())
                        }
                    },
                    Setting::UniqueFor(window) => options
                        .unique_for(Duration::from_millis(window.ms()))
                        .map(drop),
                    Setting::RunAtPast(_) | Setting::RunAtFuture(_) | Setting::RunAtNegative(_) => {
                        unreachable!("resolved")
                    }
                },
            };
            setters.push(rust_outcome(outcome));
        }
        options
    }

    /// NULL when there are no setters (the defaults), else a new object.
    fn c_push_options(sets: &[Set], setters: &mut Setters) -> *mut ffi::tq_push_options {
        if sets.is_empty() {
            return std::ptr::null_mut();
        }
        let options = ffi::tq_push_options_new();
        assert!(!options.is_null(), "tq_push_options_new returned NULL");
        for set in sets {
            let status = match *set {
                Set::RunAt(at) => ffi::tq_push_options_set_run_at_unix_ms(options, at),
                Set::Setting(setting) => match setting {
                    Setting::DelayShort(ms) => {
                        ffi::tq_push_options_set_delay_ms(options, u64::from(ms))
                    }
                    Setting::DelayHuge(ms) | Setting::DelayTooLong(ms) => {
                        ffi::tq_push_options_set_delay_ms(options, ms)
                    }
                    Setting::DelayOverByNanos(_) => {
                        ffi::tq_push_options_set_delay_ms(options, YEAR_MS + 1)
                    }
                    Setting::Priority(p) => ffi::tq_push_options_set_priority(options, p),
                    Setting::MaxAttempts(n) => ffi::tq_push_options_set_max_attempts(options, n),
                    Setting::UniqueKey(key) => {
                        let text = key.c_text();
                        let pointer = text.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
                        ffi::tq_push_options_set_unique_key(options, pointer)
                    }
                    Setting::UniqueFor(window) => {
                        ffi::tq_push_options_set_unique_for_ms(options, window.ms())
                    }
                    Setting::RunAtPast(_) | Setting::RunAtFuture(_) | Setting::RunAtNegative(_) => {
                        unreachable!("resolved")
                    }
                },
            };
            setters.push(c_setter(status));
        }
        options
    }

    fn push(&self, payload: &[u8], sets: &[Set], setters: &mut Setters) -> Outcome<Pushed> {
        match self {
            Handle::Rust(queue) => {
                let options = Self::rust_push_options(sets, setters);
                let text = std::str::from_utf8(payload).expect("UTF-8 for the Rust API");
                rust_outcome(queue.push(text, &options))
            }
            Handle::C(queue) => {
                let options = Self::c_push_options(sets, setters);
                let mut id = 0;
                let status = ffi::tq_push(
                    *queue,
                    payload.as_ptr().cast(),
                    payload.len(),
                    options,
                    &mut id,
                );
                ffi::tq_push_options_free(options);
                match c_outcome(status)? {
                    tq_status::TQ_OK => Ok(Pushed::Stored(id)),
                    tq_status::TQ_DUPLICATE => Ok(Pushed::Duplicate(id)),
                    other => panic!("tq_push returned {other:?}"),
                }
            }
        }
    }

    fn push_batch(
        &self,
        payloads: &[Vec<u8>],
        sets: &[Set],
        setters: &mut Setters,
    ) -> Outcome<Vec<i64>> {
        match self {
            Handle::Rust(queue) => {
                let options = Self::rust_push_options(sets, setters);
                let texts: Vec<&str> = payloads
                    .iter()
                    .map(|p| std::str::from_utf8(p).expect("UTF-8 for the Rust API"))
                    .collect();
                rust_outcome(queue.push_batch(&texts, &options))
            }
            Handle::C(queue) => {
                let options = Self::c_push_options(sets, setters);
                let pointers: Vec<*const c_char> =
                    payloads.iter().map(|p| p.as_ptr().cast()).collect();
                let lens: Vec<usize> = payloads.iter().map(Vec::len).collect();
                let mut ids = vec![0; payloads.len()];
                let status = ffi::tq_push_batch(
                    *queue,
                    pointers.as_ptr(),
                    lens.as_ptr(),
                    payloads.len(),
                    options,
                    ids.as_mut_ptr(),
                );
                ffi::tq_push_options_free(options);
                c_setter(status)?;
                Ok(ids)
            }
        }
    }

    /// Pulls one task (`max` None) or a batch, after the option setters.
    fn pull(
        &self,
        spec: PullSpec,
        max: Option<usize>,
        setters: &mut Setters,
    ) -> Outcome<Vec<(Seen, Token)>> {
        match self {
            Handle::Rust(queue) => {
                let mut options = PullOptions::new();
                if let Some(lease) = spec.lease.duration() {
                    setters.push(rust_outcome(options.lease(lease).map(drop)));
                }
                match spec.wait {
                    Wait::None => {}
                    Wait::Short(ms) => setters.push(rust_outcome(
                        options.wait(Duration::from_millis(u64::from(ms))).map(drop),
                    )),
                    Wait::TooLong(ms) => setters.push(rust_outcome(
                        options.wait(Duration::from_millis(ms)).map(drop),
                    )),
                }
                if spec.cancelled {
                    let token = CancelToken::new();
                    token.cancel();
                    options.cancel_token(Some(token));
                }
                let tasks = match max {
                    None => rust_outcome(queue.pull(&options))?.into_iter().collect(),
                    Some(max) => rust_outcome(queue.pull_batch(max, &options))?,
                };
                Ok(tasks
                    .iter()
                    .map(|task| (rust_seen(task), Token::Rust(task.receipt())))
                    .collect())
            }
            Handle::C(queue) => {
                let defaults = matches!(spec.lease, Lease::Default)
                    && matches!(spec.wait, Wait::None)
                    && !spec.cancelled;
                let options = if defaults {
                    std::ptr::null_mut()
                } else {
                    let options = ffi::tq_pull_options_new();
                    assert!(!options.is_null(), "tq_pull_options_new returned NULL");
                    options
                };
                if let Some(ms) = spec.lease.c_ms() {
                    setters.push(c_setter(ffi::tq_pull_options_set_lease_ms(options, ms)));
                }
                match spec.wait {
                    Wait::None => {}
                    Wait::Short(ms) => setters.push(c_setter(ffi::tq_pull_options_set_wait_ms(
                        options,
                        u64::from(ms),
                    ))),
                    Wait::TooLong(ms) => {
                        setters.push(c_setter(ffi::tq_pull_options_set_wait_ms(options, ms)))
                    }
                }
                if spec.cancelled {
                    // The options keep their own reference to the token.
                    let cancel = ffi::tq_cancel_new();
                    assert!(!cancel.is_null(), "tq_cancel_new returned NULL");
                    c_setter(ffi::tq_cancel_trigger(cancel)).expect("tq_cancel_trigger");
                    c_setter(ffi::tq_pull_options_set_cancel(options, cancel))
                        .expect("tq_pull_options_set_cancel");
                    ffi::tq_cancel_free(cancel);
                }
                let result = match max {
                    None => {
                        let mut task = std::ptr::null_mut();
                        let status = ffi::tq_pull(*queue, options, &mut task);
                        match c_outcome(status) {
                            Ok(tq_status::TQ_OK) => {
                                assert!(!task.is_null(), "tq_pull returned TQ_OK and NULL");
                                Ok(vec![task])
                            }
                            Ok(tq_status::TQ_EMPTY) => {
                                assert!(task.is_null(), "tq_pull returned TQ_EMPTY and a task");
                                Ok(Vec::new())
                            }
                            Ok(other) => panic!("tq_pull returned {other:?}"),
                            Err(kind) => {
                                assert!(task.is_null(), "tq_pull failed but set a task");
                                Err(kind)
                            }
                        }
                    }
                    Some(max) => {
                        // Not NULL, so that tq must clear the slots it leaves.
                        let mut out = vec![std::ptr::dangling_mut::<tq_task>(); max];
                        let mut n = usize::MAX;
                        let status =
                            ffi::tq_pull_batch(*queue, options, max, out.as_mut_ptr(), &mut n);
                        let outcome = c_outcome(status);
                        let n = if outcome.is_ok() { n } else { 0 };
                        assert!(n <= max, "tq_pull_batch: {n} tasks in room for {max}");
                        assert!(
                            out[..n].iter().all(|t| !t.is_null())
                                && out[n..].iter().all(|t| t.is_null()),
                            "tq_pull_batch: the first {n} slots must hold tasks, the rest NULL"
                        );
                        match outcome {
                            Ok(tq_status::TQ_OK) if n > 0 => Ok(out[..n].to_vec()),
                            Ok(tq_status::TQ_EMPTY) if n == 0 => Ok(Vec::new()),
                            Ok(other) => panic!("tq_pull_batch returned {other:?} with {n} tasks"),
                            Err(kind) => Err(kind),
                        }
                    }
                };
                ffi::tq_pull_options_free(options);
                Ok(result?
                    .into_iter()
                    .map(|task| (c_seen(task), Token::C(task)))
                    .collect())
            }
        }
    }

    fn finish(&self, token: Token) -> Outcome<()> {
        match (self, token) {
            (Handle::Rust(queue), Token::Rust(receipt)) => rust_outcome(queue.finish(receipt)),
            (Handle::C(queue), Token::C(task)) => c_setter(ffi::tq_finish(*queue, task)),
            _ => unreachable!("a token is used through a handle of its own API"),
        }
    }

    fn finish_batch(&self, tokens: &[Token]) -> Outcome<Vec<bool>> {
        match self {
            Handle::Rust(queue) => {
                let receipts: Vec<Receipt> = tokens
                    .iter()
                    .map(|token| match token {
                        Token::Rust(receipt) => *receipt,
                        Token::C(_) => unreachable!("one API per batch"),
                    })
                    .collect();
                let held = rust_outcome(queue.finish_batch(&receipts))?;
                assert_eq!(held.len(), receipts.len(), "finish_batch: one answer each");
                Ok(held)
            }
            Handle::C(queue) => {
                let tasks: Vec<*mut tq_task> = tokens
                    .iter()
                    .map(|token| match token {
                        Token::C(task) => *task,
                        Token::Rust(_) => unreachable!("one API per batch"),
                    })
                    .collect();
                let mut statuses = vec![i32::MIN; tasks.len()];
                let status = ffi::tq_finish_batch(
                    *queue,
                    tasks.as_ptr(),
                    tasks.len(),
                    statuses.as_mut_ptr(),
                );
                c_setter(status)?;
                Ok(statuses
                    .iter()
                    .map(|&status| match status {
                        0 => true,
                        -3 => false,
                        other => panic!("tq_finish_batch: status {other} for a task"),
                    })
                    .collect())
            }
        }
    }

    /// `Some(RetryAt or Dead)` through Rust; `None` for success through C,
    /// which does not say which.
    fn fail(&self, token: Token, reason: &Reason) -> Outcome<Option<Failed>> {
        match (self, token) {
            (Handle::Rust(queue), Token::Rust(receipt)) => {
                rust_outcome(queue.fail(receipt, &reason.text())).map(Some)
            }
            (Handle::C(queue), Token::C(task)) => {
                let text = reason.c_text();
                let pointer = text.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
                c_setter(ffi::tq_fail(*queue, task, pointer)).map(|()| None)
            }
            _ => unreachable!("a token is used through a handle of its own API"),
        }
    }

    fn extend(&self, token: Token, lease: Lease) -> Outcome<()> {
        let duration = lease.duration().unwrap_or(Duration::from_secs(30));
        match (self, token) {
            (Handle::Rust(queue), Token::Rust(receipt)) => {
                rust_outcome(queue.extend(receipt, duration))
            }
            (Handle::C(queue), Token::C(task)) => {
                c_setter(ffi::tq_extend(*queue, task, duration.as_millis() as u64))
            }
            _ => unreachable!("a token is used through a handle of its own API"),
        }
    }

    fn recover(&self) -> Outcome<u64> {
        match self {
            Handle::Rust(queue) => rust_outcome(queue.recover()),
            Handle::C(queue) => {
                let mut n = -1;
                c_setter(ffi::tq_recover(*queue, &mut n))?;
                Ok(u64::try_from(n).expect("a non-negative count"))
            }
        }
    }

    /// `state` is any integer: through the Rust API it is taken modulo 4.
    fn count(&self, state: i32) -> Outcome<u64> {
        match self {
            Handle::Rust(queue) => rust_outcome(queue.count(task_state(state))),
            Handle::C(queue) => {
                let mut n = -1;
                c_setter(ffi::tq_count(*queue, state, &mut n))?;
                Ok(u64::try_from(n).expect("a non-negative count"))
            }
        }
    }

    /// Listed tasks, and through C their objects (to free, and to offer to
    /// finish, fail and extend).
    fn list(&self, state: i32, after: i64, max: usize) -> Outcome<Vec<(Seen, Option<Token>)>> {
        match self {
            Handle::Rust(queue) => {
                let tasks = rust_outcome(queue.list(task_state(state), after, max))?;
                Ok(tasks
                    .iter()
                    .map(|task| {
                        let seen = Seen {
                            id: task.id(),
                            payload: task.payload().as_bytes().to_vec(),
                            attempts: task.attempts(),
                            max_attempts: task.max_attempts(),
                            priority: task.priority(),
                            run_at: task.run_at_unix_ms(),
                            last_error: task.last_error().map(|e| e.as_bytes().to_vec()),
                            state: Some(task.state()),
                            api: Api::Rust,
                        };
                        (seen, None)
                    })
                    .collect())
            }
            Handle::C(queue) => {
                // Not NULL, so that tq must clear the slots it leaves.
                let mut out = vec![std::ptr::dangling_mut::<tq_task>(); max];
                let mut n = usize::MAX;
                let status = ffi::tq_list(*queue, state, after, max, out.as_mut_ptr(), &mut n);
                let outcome = c_setter(status);
                let n = if outcome.is_ok() { n } else { 0 };
                assert!(n <= max, "tq_list: {n} tasks in room for {max}");
                assert!(
                    out[..n].iter().all(|t| !t.is_null()) && out[n..].iter().all(|t| t.is_null()),
                    "tq_list: the first {n} slots must hold tasks, the rest NULL"
                );
                outcome?;
                Ok(out[..n]
                    .iter()
                    .map(|&task| (c_seen(task), Some(Token::C(task))))
                    .collect())
            }
        }
    }

    fn retry_dead(&self, id: i64) -> Outcome<()> {
        match self {
            Handle::Rust(queue) => rust_outcome(queue.retry_dead(id)),
            Handle::C(queue) => c_setter(ffi::tq_retry_dead(*queue, id)),
        }
    }

    fn retry_all_dead(&self) -> Outcome<u64> {
        match self {
            Handle::Rust(queue) => rust_outcome(queue.retry_all_dead()),
            Handle::C(queue) => {
                let mut n = -1;
                c_setter(ffi::tq_retry_all_dead(*queue, &mut n))?;
                Ok(u64::try_from(n).expect("a non-negative count"))
            }
        }
    }

    fn purge(&self, state: i32, age_ms: u64) -> Outcome<u64> {
        match self {
            Handle::Rust(queue) => {
                rust_outcome(queue.purge(task_state(state), Duration::from_millis(age_ms)))
            }
            Handle::C(queue) => {
                let mut n = -1;
                c_setter(ffi::tq_purge(*queue, state, age_ms, &mut n))?;
                Ok(u64::try_from(n).expect("a non-negative count"))
            }
        }
    }

    fn oldest_ready_age(&self) -> Outcome<Option<u64>> {
        match self {
            Handle::Rust(queue) => {
                rust_outcome(queue.oldest_ready_age()).map(|age| age.map(|a| a.as_millis() as u64))
            }
            Handle::C(queue) => {
                let mut age = -1;
                match c_outcome(ffi::tq_oldest_ready_age_ms(*queue, &mut age))? {
                    tq_status::TQ_OK => Ok(Some(u64::try_from(age).expect("a non-negative age"))),
                    tq_status::TQ_EMPTY => {
                        assert_eq!(age, 0, "tq_oldest_ready_age_ms: TQ_EMPTY with an age");
                        Ok(None)
                    }
                    other => panic!("tq_oldest_ready_age_ms returned {other:?}"),
                }
            }
        }
    }

    /// Checkpoints, and says the log's size afterwards by both accounts.
    fn checkpoint(&self) -> Outcome<(u64, u64)> {
        match self {
            Handle::Rust(queue) => {
                let checkpoint = rust_outcome(queue.checkpoint())?;
                assert!(checkpoint.complete, "checkpoint: no other reader exists");
                Ok((checkpoint.wal_bytes, rust_outcome(queue.wal_size())?))
            }
            Handle::C(queue) => {
                let (mut after, mut size) = (-1, -1);
                c_setter(ffi::tq_checkpoint(*queue, &mut after))?;
                c_setter(ffi::tq_wal_size(*queue, &mut size))?;
                Ok((after as u64, size as u64))
            }
        }
    }

    /// `Cancelled::Removed` or `Requested`; through C, from the state it
    /// reports (cancelled or leased).
    fn cancel_task(&self, id: i64, reason: &str) -> Outcome<Cancelled> {
        match self {
            Handle::Rust(queue) => rust_outcome(queue.cancel_task(id, reason)),
            Handle::C(queue) => {
                let text = CString::new(reason).expect("no NUL in a generated reason");
                let pointer = if reason.is_empty() {
                    std::ptr::null()
                } else {
                    text.as_ptr()
                };
                let mut state = -1;
                c_setter(ffi::tq_cancel_task(*queue, id, pointer, &mut state))?;
                Ok(match state {
                    4 => Cancelled::Removed,
                    1 => Cancelled::Requested,
                    other => panic!("tq_cancel_task: state {other}"),
                })
            }
        }
    }

    fn set_concurrency_limit(&self, limit: Option<u32>) -> Outcome<()> {
        match self {
            Handle::Rust(queue) => rust_outcome(queue.set_concurrency_limit(limit)),
            Handle::C(queue) => c_setter(match limit {
                Some(n) => ffi::tq_set_concurrency_limit(*queue, n),
                None => ffi::tq_clear_concurrency_limit(*queue),
            }),
        }
    }

    fn set_rate_limit(&self, rate: Option<Rate>) -> Outcome<()> {
        match self {
            Handle::Rust(queue) => rust_outcome(queue.set_rate_limit(rate.map(|(claims, per)| {
                RateLimit {
                    claims,
                    per: Duration::from_millis(per),
                }
            }))),
            Handle::C(queue) => c_setter(match rate {
                Some((claims, per)) => ffi::tq_set_rate_limit(*queue, claims, per),
                None => ffi::tq_clear_rate_limit(*queue),
            }),
        }
    }

    /// The ids `push_items` stored (its items hold no unique key).
    fn push_items(&self, items: &[SentItem]) -> Outcome<Vec<i64>> {
        match self {
            Handle::Rust(queue) => {
                let items: Vec<(&str, PushOptions)> = items
                    .iter()
                    .map(|item| {
                        let mut options = PushOptions::new();
                        for after in &item.after {
                            match *after {
                                After::Item(index) => options.after_item(index),
                                After::Task(id) => options.after(&[id]),
                            }
                            .expect("a parent the model sends is accepted");
                        }
                        if item.run_anyway {
                            options.on_parent_failure(ParentFailure::RunAnyway);
                        }
                        (item.payload.as_str(), options)
                    })
                    .collect();
                let pushed = rust_outcome(queue.push_items(&items))?;
                Ok(pushed
                    .into_iter()
                    .map(|pushed| match pushed {
                        Pushed::Stored(id) => id,
                        other => panic!("push_items without unique keys answered {other:?}"),
                    })
                    .collect())
            }
            Handle::C(queue) => {
                let options: Vec<*mut ffi::tq_push_options> = items
                    .iter()
                    .map(|item| {
                        let options = ffi::tq_push_options_new();
                        assert!(!options.is_null(), "tq_push_options_new returned NULL");
                        for after in &item.after {
                            c_setter(match *after {
                                After::Item(index) => {
                                    ffi::tq_push_options_add_after_item(options, index)
                                }
                                After::Task(id) => ffi::tq_push_options_add_after(options, id),
                            })
                            .expect("a parent the model sends is accepted");
                        }
                        if item.run_anyway {
                            c_setter(ffi::tq_push_options_set_on_parent_failure(options, 1))
                                .expect("TQ_PARENT_FAILURE_RUN_ANYWAY");
                        }
                        options
                    })
                    .collect();
                let pointers: Vec<*const c_char> =
                    items.iter().map(|i| i.payload.as_ptr().cast()).collect();
                let lens: Vec<usize> = items.iter().map(|i| i.payload.len()).collect();
                let constant: Vec<*const ffi::tq_push_options> =
                    options.iter().map(|&o| o.cast_const()).collect();
                let mut ids = vec![0; items.len()];
                let status = ffi::tq_push_items(
                    *queue,
                    pointers.as_ptr(),
                    lens.as_ptr(),
                    constant.as_ptr(),
                    items.len(),
                    ids.as_mut_ptr(),
                );
                for options in options {
                    ffi::tq_push_options_free(options);
                }
                c_setter(status)?;
                Ok(ids)
            }
        }
    }

    /// The state of task `id` of the handle's queue, `None` when it has no
    /// such task.
    fn task_state(&self, id: i64) -> Outcome<Option<TaskState>> {
        match self {
            Handle::Rust(queue) => {
                rust_outcome(queue.task(id)).map(|info| info.map(|info| info.state()))
            }
            Handle::C(queue) => {
                let mut task = std::ptr::null_mut();
                match c_outcome(ffi::tq_get_task(*queue, id, &mut task))? {
                    tq_status::TQ_OK => {
                        let state = c_state(ffi::tq_task_state(task));
                        ffi::tq_task_free(task);
                        Ok(Some(state))
                    }
                    tq_status::TQ_EMPTY => Ok(None),
                    other => panic!("tq_get_task returned {other:?}"),
                }
            }
        }
    }

    fn interrupt(&self) {
        match self {
            Handle::Rust(queue) => queue.interrupt(),
            Handle::C(queue) => c_setter(ffi::tq_interrupt(*queue)).expect("tq_interrupt"),
        }
    }
}

/// The Rust API's state for an integer, taken modulo 4.
fn task_state(state: i32) -> TaskState {
    match state.rem_euclid(4) {
        0 => TaskState::Pending,
        1 => TaskState::Leased,
        2 => TaskState::Done,
        _ => TaskState::Dead,
    }
}

/// The state a call through `api` names by the number `state`: the Rust
/// API's calls take [`task_state`] of any number; the C API takes the
/// `tq_state` values, up to TQ_STATE_CANCELLED (4), and refuses others
/// (`None`). The model cancels nothing, so it holds no cancelled task.
fn named_state(api: Api, state: i32) -> Option<TaskState> {
    match (api, state) {
        (Api::Rust, _) | (Api::C, 0..=3) => Some(task_state(state)),
        (Api::C, 4) => Some(TaskState::Cancelled),
        (Api::C, _) => None,
    }
}

fn past_ms(x: u8) -> i64 {
    i64::from(x) * 1_000_000_000
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis() as i64
}

// ---------------------------------------------------------------------------
// The model

/// A time known to lie in `lo..=hi` (ms since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    lo: i64,
    hi: i64,
}

impl Span {
    fn exact(at: i64) -> Span {
        Span { lo: at, hi: at }
    }

    /// `offset` ms after a time in `self`, as tq adds it (saturating).
    fn after(self, offset: u64) -> Span {
        Span {
            lo: self.lo.saturating_add_unsigned(offset),
            hi: self.hi.saturating_add_unsigned(offset),
        }
    }

    fn contains(self, at: i64) -> bool {
        (self.lo..=self.hi).contains(&at)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LastError {
    None,
    /// The reason given to `fail`, as kept (cut at `MAX_REASON_LEN`).
    Reason(String),
    /// tq's own words after a lease was lost.
    LeaseLost,
    /// Any, or none: a cancelled task's (the model does not follow which
    /// reason it keeps).
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    /// Leased under delivery number `delivery`; `expired` once its 1 ms
    /// lease has certainly passed.
    Leased {
        delivery: usize,
        expired: bool,
        /// Cancelled while leased: never delivered again; its holder's
        /// next call ends it, or, once the lease ran out, the next claim.
        cancelling: bool,
    },
    Done,
    Dead,
    /// Cancelled and kept as history.
    Cancelled,
}

/// How a task ended, for the tasks waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Done,
    Dead,
    Cancelled,
}

#[derive(Debug)]
struct ModelTask {
    id: i64,
    queue: usize,
    payload: Vec<u8>,
    /// When it became (or becomes) ready: its due time while pending.
    run_at: Span,
    priority: i32,
    attempts: u32,
    max_attempts: u32,
    last_error: LastError,
    /// Its unique key, until another push takes it.
    key: Option<String>,
    /// Whether the key stays held once the task is done.
    window: bool,
    state: State,
    /// The tasks it still waits for (`after`): blocked while any is left.
    waiting: Vec<i64>,
    /// Its parent failure policy is `RunAnyway`.
    run_anyway: bool,
}

impl ModelTask {
    fn holds_key(&self) -> bool {
        self.key.is_some()
            && match self.state {
                State::Pending | State::Leased { .. } => true,
                State::Done => self.window,
                State::Dead | State::Cancelled => false,
            }
    }

    fn public_state(&self) -> TaskState {
        match self.state {
            State::Pending => TaskState::Pending,
            State::Leased { .. } => TaskState::Leased,
            State::Done => TaskState::Done,
            State::Dead => TaskState::Dead,
            State::Cancelled => TaskState::Cancelled,
        }
    }

    /// An expired lease that may be claimed again or recovered.
    fn expired(&self) -> bool {
        matches!(
            self.state,
            State::Leased {
                expired: true,
                cancelling: false,
                ..
            }
        )
    }

    /// Cancelled while leased, and the lease ran out: the next claim on
    /// the file (or a recovery of its queue) ends it.
    fn abandoned_cancel(&self) -> bool {
        matches!(
            self.state,
            State::Leased {
                expired: true,
                cancelling: true,
                ..
            }
        )
    }

    /// A lease that has not expired: it holds a slot of a concurrency limit.
    fn live(&self) -> bool {
        matches!(self.state, State::Leased { expired: false, .. })
    }

    fn blocked(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Whether a claim starting at `now` may take it (or, for an expired
    /// last attempt, bury it): pending and possibly due, or expired.
    fn may_be_candidate(&self, now: Span) -> bool {
        match self.state {
            State::Pending => !self.blocked() && self.run_at.lo <= now.hi,
            State::Leased { .. } => self.expired(),
            State::Done | State::Dead | State::Cancelled => false,
        }
    }

    /// Whether a claim in `now` must consider it: pending and certainly
    /// due, or expired.
    fn is_candidate(&self, now: Span) -> bool {
        match self.state {
            State::Pending => !self.blocked() && self.run_at.hi <= now.lo,
            State::Leased { .. } => self.expired(),
            State::Done | State::Dead | State::Cancelled => false,
        }
    }

    fn last_attempt(&self) -> bool {
        self.attempts >= self.max_attempts
    }

    /// Whether it certainly comes before a task of `priority`, ready at
    /// `run_at`, with id `id` in the claim order.
    fn surely_before(&self, priority: i32, run_at: i64, id: i64) -> bool {
        (std::cmp::Reverse(self.priority), self.run_at.hi, self.id)
            < (std::cmp::Reverse(priority), run_at, id)
    }
}

#[derive(Default)]
struct Model {
    tasks: Vec<ModelTask>,
    last_id: i64,
    /// Each queue's concurrency limit.
    limits: [Option<u32>; 2],
    /// Each queue's rate limit.
    rates: [Option<RateState>; 2],
}

/// A queue's rate limit and its claims. Its window is an hour or more, so
/// every claim of the iteration is in it.
#[derive(Debug, Clone)]
struct RateState {
    rate: Rate,
    /// When the slots in use were used (each claim's call).
    uses: Vec<Span>,
    /// The claims that count against this rate: those since it was set,
    /// and the uses it kept from the rate before. For the invariant.
    counted: Vec<Span>,
}

impl Model {
    fn task(&self, id: i64) -> Option<&ModelTask> {
        self.tasks.iter().find(|t| t.id == id)
    }

    fn task_mut(&mut self, id: i64) -> Option<&mut ModelTask> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    fn count(&self, queue: usize, state: TaskState) -> u64 {
        self.tasks
            .iter()
            .filter(|t| t.queue == queue && t.public_state() == state)
            .count() as u64
    }

    /// The task that currently holds `key` in `queue`.
    fn key_holder(&self, queue: usize, key: &str) -> Option<&ModelTask> {
        self.tasks
            .iter()
            .find(|t| t.queue == queue && t.key.as_deref() == Some(key) && t.holds_key())
    }

    /// A dead task (or a done one without a window) gives its key up to a
    /// new task.
    fn take_key(&mut self, queue: usize, key: &str) {
        for task in &mut self.tasks {
            if task.queue == queue && task.key.as_deref() == Some(key) {
                task.key = None;
            }
        }
    }

    /// Ends a delivery as dead, at `now`, through a handle that keeps
    /// history or not.
    fn bury(&mut self, id: i64, last_error: LastError, keep_history: bool, now: Span) {
        let task = self.task_mut(id).unwrap();
        task.state = State::Dead;
        task.last_error = last_error;
        self.release(id, Ended::Dead, keep_history, now);
    }

    /// Task `parent` ended during `now`: each task waiting for it stops
    /// waiting for it if it ended done or the task runs anyway (ready,
    /// from `now` at the earliest, once it waits for nothing more); else
    /// it is cancelled, and so in turn are the tasks waiting for it.
    fn release(&mut self, parent: i64, ended: Ended, keep_history: bool, now: Span) {
        let mut ends = vec![(parent, ended)];
        while let Some((parent, ended)) = ends.pop() {
            let waiting: Vec<i64> = self
                .tasks
                .iter()
                .filter(|t| t.waiting.contains(&parent))
                .map(|t| t.id)
                .collect();
            for id in waiting {
                let task = self.task_mut(id).unwrap();
                if ended == Ended::Done || task.run_anyway {
                    task.waiting.retain(|&p| p != parent);
                    if task.waiting.is_empty() {
                        task.run_at = Span {
                            lo: task.run_at.lo.max(now.lo),
                            hi: task.run_at.hi.max(now.hi),
                        };
                    }
                } else {
                    self.cancel_row(id, keep_history);
                    ends.push((id, Ended::Cancelled));
                }
            }
        }
    }

    /// Ends task `id` as cancelled: kept as such with history, else gone.
    fn cancel_row(&mut self, id: i64, keep_history: bool) {
        if keep_history {
            let task = self.task_mut(id).unwrap();
            task.state = State::Cancelled;
            task.waiting.clear();
            task.key = None;
            task.last_error = LastError::Any;
        } else {
            self.tasks.retain(|t| t.id != id);
        }
    }

    /// Ends task `id` as cancelled and tells the tasks waiting for it.
    fn end_cancelled(&mut self, id: i64, keep_history: bool, now: Span) {
        self.cancel_row(id, keep_history);
        self.release(id, Ended::Cancelled, keep_history, now);
    }

    /// The live leases of `queue`.
    fn live(&self, queue: usize) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.queue == queue && t.live())
            .count()
    }

    /// How many tasks a claim of `queue` may take: `None` for no bound.
    fn room(&self, queue: usize) -> Option<usize> {
        let by_limit = self.limits[queue].map(|limit| (limit as usize).saturating_sub(self.live(queue)));
        let by_rate = self.rates[queue]
            .as_ref()
            .map(|rate| (rate.rate.0 as usize).saturating_sub(rate.uses.len()));
        match (by_limit, by_rate) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The effective options of a push after its setters, and whether each
/// setter must succeed. A refused setter leaves the options as they were.
#[derive(Debug, Clone, Default)]
struct PushEffect {
    due: Due,
    priority: i32,
    max_attempts: Option<u32>,
    key: Option<String>,
    window: u64,
}

#[derive(Debug, Clone, Copy, Default)]
enum Due {
    #[default]
    Now,
    Delay(u64),
    At(i64),
}

fn expected_push(sets: &[Set]) -> (PushEffect, Vec<Outcome<()>>) {
    let mut effect = PushEffect::default();
    let mut outcomes = Vec::new();
    for set in sets {
        let ok = match *set {
            Set::RunAt(at) => {
                let ok = at >= 0;
                if ok {
                    effect.due = Due::At(at);
                }
                ok
            }
            Set::Setting(setting) => match setting {
                Setting::DelayShort(ms) => {
                    effect.due = Due::Delay(u64::from(ms));
                    true
                }
                Setting::DelayHuge(ms) => {
                    effect.due = Due::Delay(ms);
                    true
                }
                Setting::DelayTooLong(_) | Setting::DelayOverByNanos(_) => false,
                Setting::Priority(p) => {
                    effect.priority = p;
                    true
                }
                Setting::MaxAttempts(n) => {
                    if n > 0 {
                        effect.max_attempts = Some(n);
                    }
                    n > 0
                }
                Setting::UniqueKey(key) => {
                    match key {
                        Key::Clear => {
                            effect.key = None;
                            effect.window = 0;
                        }
                        _ if key.valid() => effect.key = key.text(),
                        _ => {}
                    }
                    key.valid()
                }
                Setting::UniqueFor(window) => {
                    let ok = effect.key.is_some() && window.ms() <= YEAR_MS;
                    if ok {
                        effect.window = window.ms();
                    }
                    ok
                }
                Setting::RunAtPast(_) | Setting::RunAtFuture(_) | Setting::RunAtNegative(_) => {
                    unreachable!("resolved")
                }
            },
        };
        outcomes.push(if ok {
            Ok(())
        } else {
            Err(ErrorKind::InvalidArgument)
        });
    }
    (effect, outcomes)
}

/// The back-off (min, max) a handle was opened with.
fn expected_backoff(backoff: Backoff) -> (u64, u64) {
    match backoff.value() {
        Some(value) if backoff.valid() => value,
        _ => DEFAULT_BACKOFF,
    }
}

/// The shortest and longest pause before the retry after delivery number
/// `attempts` (README: `min` doubling with each attempt up to `max`, with
/// up to half of each pause taken off at random).
fn pause_range((min, max): (u64, u64), attempts: u32) -> (u64, u64) {
    let full = min
        .saturating_mul(1u64 << attempts.saturating_sub(1).min(63))
        .min(max);
    (full - full / 2, full)
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

// ---------------------------------------------------------------------------
// The run

struct Slot {
    handle: Handle,
    api: Api,
    keep_history: bool,
    /// The largest payload this handle pushes.
    limit: usize,
    /// Its queue: an index into `QUEUES`.
    queue: usize,
    max_attempts: u32,
    backoff: (u64, u64),
    interrupted: bool,
}

/// A task a push stored, to add to the model.
struct NewStored {
    s: usize,
    id: i64,
    payload: Vec<u8>,
    waiting: Vec<i64>,
    run_anyway: bool,
}

/// One write of `Op::Together`, resolved.
#[derive(Debug)]
enum Plan {
    Skip,
    Finish(usize),
    Items(Vec<SentItem>),
    Push(String),
}

/// What one write of `Op::Together` answered.
enum Done {
    Nothing,
    Finish(Outcome<()>),
    Items(Outcome<Vec<i64>>),
    Push(Outcome<Pushed>),
}

struct Delivery {
    task_id: i64,
    token: Token,
    /// False for a task listed through C: never held.
    pulled: bool,
}

struct Run {
    path: String,
    slots: [Option<Slot>; 2],
    model: Model,
    deliveries: Vec<Delivery>,
    /// Which queues a handle was opened on.
    used: [bool; 2],
    /// Operations so far, for messages.
    trace: Vec<String>,
    /// Tasks the model ended as cancelled once their lease ran out, with
    /// no handle open on their queue to ask tq then: asked at the end.
    unasked: Vec<(i64, usize)>,
}

/// Gives the fuzzer a branch of its own for a state worth reaching: each use
/// is a separate edge in the coverage map, so inputs that reach it are kept
/// in the corpus even when tq's own code takes no new path there.
macro_rules! hint {
    ($cond:expr) => {
        if $cond {
            std::hint::black_box(line!());
        }
    };
}

macro_rules! fail {
    ($run:expr, $($arg:tt)*) => {{
        let recent: Vec<&String> = $run.trace.iter().rev().take(16).collect::<Vec<_>>().into_iter().rev().collect();
        panic!(
            "model mismatch: {}\nlast operations (of {}):\n  {}",
            format!($($arg)*),
            $run.trace.len(),
            recent.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
        )
    }};
}

impl Run {
    /// The slot an operation addressed to `want` runs on.
    fn pick(&self, want: bool) -> Option<usize> {
        let want = want as usize;
        [want, 1 - want]
            .into_iter()
            .find(|&s| self.slots[s].is_some())
    }

    fn slot(&self, s: usize) -> &Slot {
        self.slots[s].as_ref().expect("picked an open slot")
    }

    fn check_setters(&self, what: &str, got: &Setters, expected: &Setters) {
        if got != expected {
            fail!(
                self,
                "{what}: expected the option setters to give {expected:?}, got {got:?}"
            );
        }
    }

    fn open(&mut self, s: usize, spec: &OpenSpec) {
        self.slots[s] = None;
        let mut setters = Vec::new();
        let result = Handle::open(&self.path, spec, &mut setters);
        let refused = |ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(ErrorKind::InvalidArgument)
            }
        };
        let mut expected = Vec::new();
        let mut limit = MAX_PAYLOAD_LEN;
        if let Some(n) = spec.limit.value() {
            let ok = (1..=MAX_PAYLOAD_LEN).contains(&n);
            if ok {
                limit = n;
            }
            expected.push(refused(ok));
        }
        let mut queue = 0;
        match spec.queue {
            QueueName::Unset => {}
            QueueName::Named(q) => {
                queue = q;
                expected.push(Ok(()));
            }
            QueueName::Empty | QueueName::TooLong | QueueName::Invalid => {
                expected.push(refused(false))
            }
        }
        let max_attempts = match spec.max_attempts {
            Attempts::Unset => DEFAULT_MAX_ATTEMPTS,
            Attempts::Few(n) => {
                expected.push(Ok(()));
                u32::from(n)
            }
            Attempts::Zero => {
                expected.push(refused(false));
                DEFAULT_MAX_ATTEMPTS
            }
        };
        if spec.backoff.value().is_some() {
            expected.push(refused(spec.backoff.valid()));
        }
        self.check_setters(&format!("open {spec:?}"), &setters, &expected);
        match result {
            Ok(handle) => {
                self.used[queue] = true;
                self.slots[s] = Some(Slot {
                    handle,
                    api: spec.api,
                    keep_history: spec.keep_history,
                    limit,
                    queue,
                    max_attempts,
                    backoff: expected_backoff(spec.backoff),
                    interrupted: false,
                })
            }
            Err(kind) => fail!(self, "open {spec:?} failed with {kind:?}"),
        }
    }

    fn step(&mut self, op: &Op) {
        self.trace.push(format!("{op:?}"));
        trace("op", op);
        match op {
            Op::Open { slot, spec } => self.open(*slot as usize, spec),
            Op::Close { slot } => self.slots[*slot as usize] = None,
            Op::Push {
                via,
                payload,
                settings,
            } => {
                let Some(s) = self.pick(*via) else { return };
                self.push(s, &payload.bytes(), settings);
            }
            Op::PushBatch {
                via,
                payloads,
                settings,
            } => {
                let Some(s) = self.pick(*via) else { return };
                let payloads: Vec<Vec<u8>> = payloads.iter().map(Payload::bytes).collect();
                self.push_batch(s, &payloads, settings);
            }
            Op::Pull { via, pull } => {
                let Some(s) = self.pick(*via) else { return };
                self.pull(s, *pull, None);
            }
            Op::PullBatch { via, pull, max } => {
                let Some(s) = self.pick(*via) else { return };
                let max = max.value(self.slot(s).api);
                self.pull(s, *pull, Some(max));
            }
            Op::Finish { via, which } => {
                let Some((s, d)) = self.delivery_and_slot(*via, *which) else {
                    return;
                };
                self.finish(s, d);
            }
            Op::FinishBatch { via, which } => {
                let Some(s) = self.pick(*via) else { return };
                let api = self.slot(s).api;
                let mine: Vec<usize> = (0..self.deliveries.len())
                    .filter(|&d| self.deliveries[d].token.api() == api)
                    .collect();
                if mine.is_empty() && !which.is_empty() {
                    return;
                }
                let picked: Vec<usize> = which
                    .iter()
                    .map(|&w| mine[w as usize % mine.len()])
                    .collect();
                self.finish_batch(s, &picked);
            }
            Op::Fail { via, which, reason } => {
                let Some((s, d)) = self.delivery_and_slot(*via, *which) else {
                    return;
                };
                self.fail_delivery(s, d, reason);
            }
            Op::Extend { via, which, lease } => {
                let Some((s, d)) = self.delivery_and_slot(*via, *which) else {
                    return;
                };
                self.extend(s, d, *lease);
            }
            Op::Recover { via } => {
                let Some(s) = self.pick(*via) else { return };
                self.recover(s);
            }
            Op::Count { via, state } => {
                let Some(s) = self.pick(*via) else { return };
                self.count(s, i32::from(*state));
            }
            Op::List {
                via,
                state,
                after,
                max,
            } => {
                let Some(s) = self.pick(*via) else { return };
                let after = self.id_of(*after, false);
                let max = max.value(self.slot(s).api);
                self.list(s, i32::from(*state), after, max);
            }
            Op::RetryDead { via, id } => {
                let Some(s) = self.pick(*via) else { return };
                let id = self.id_of(*id, true);
                self.retry_dead(s, id);
            }
            Op::RetryAllDead { via } => {
                let Some(s) = self.pick(*via) else { return };
                self.retry_all_dead(s);
            }
            Op::Purge { via, state, age } => {
                let Some(s) = self.pick(*via) else { return };
                self.purge(s, i32::from(*state), *age);
            }
            Op::OldestReadyAge { via } => {
                let Some(s) = self.pick(*via) else { return };
                self.oldest_ready_age(s);
            }
            Op::Checkpoint { via } => {
                let Some(s) = self.pick(*via) else { return };
                let got = self.slot(s).handle.checkpoint();
                if got != Ok((0, 0)) {
                    fail!(
                        self,
                        "checkpoint: expected an empty log after it, got {got:?}"
                    );
                }
            }
            Op::Interrupt { via } => {
                let Some(s) = self.pick(*via) else { return };
                self.slot(s).handle.interrupt();
                self.slots[s].as_mut().unwrap().interrupted = true;
            }
            Op::Cancel {
                via,
                id,
                leased,
                reason,
            } => {
                let Some(s) = self.pick(*via) else { return };
                let held: Vec<i64> = self
                    .model
                    .tasks
                    .iter()
                    .filter(|t| matches!(t.state, State::Leased { .. }))
                    .map(|t| t.id)
                    .collect();
                let id = match *id {
                    IdPick::Task { which, .. } if *leased && !held.is_empty() => {
                        held[which as usize % held.len()]
                    }
                    pick => self.id_of(pick, false),
                };
                self.cancel(s, id, *reason);
            }
            Op::SetConcurrencyLimit { via, limit } => {
                let Some(s) = self.pick(*via) else { return };
                self.set_concurrency_limit(s, *limit);
            }
            Op::SetRateLimit { via, rate } => {
                let Some(s) = self.pick(*via) else { return };
                self.set_rate_limit(s, *rate);
            }
            Op::PushItems { via, items } => {
                let Some(s) = self.pick(*via) else { return };
                self.push_items(s, items);
            }
            Op::Together { via, subs, gaps } => self.together(*via, subs, *gaps),
            Op::Race {
                via,
                finish,
                items,
                gaps,
            } => {
                let Some(s) = self.pick(via[0]) else { return };
                let claim_all = PullSpec {
                    lease: Lease::Long(HOUR_MS),
                    wait: Wait::None,
                    cancelled: false,
                };
                self.push(s, b"0", &[]);
                self.pull(s, claim_all, Some(BatchMax::Huge.value(self.slot(s).api)));
                let subs = [Sub::Slow, finish.clone(), Sub::PushItems(items.clone())];
                self.together([via[0], via[0], via[2]], &subs, *gaps);
                if self.slots[s].is_some() {
                    self.push(s, b"0", &[]);
                }
            }
            Op::Squeeze {
                via,
                limit,
                lease,
                which,
                extend,
            } => {
                let Some(s) = self.pick(*via) else { return };
                let api = self.slot(s).api;
                let short = PullSpec {
                    lease: Lease::Short,
                    wait: Wait::None,
                    cancelled: false,
                };
                self.pull(s, short, Some(BatchMax::Huge.value(api)));
                self.set_concurrency_limit(s, *limit);
                let pull = PullSpec {
                    lease: *lease,
                    wait: Wait::None,
                    cancelled: false,
                };
                self.pull(s, pull, None);
                self.step(&Op::ExtendExpired {
                    via: *via,
                    which: *which,
                    lease: *extend,
                });
            }
            Op::ExtendExpired { via, which, lease } => {
                let expired: Vec<usize> = (0..self.deliveries.len())
                    .filter(|&d| {
                        self.current(d)
                            && self
                                .model
                                .task(self.deliveries[d].task_id)
                                .is_some_and(|t| t.expired())
                    })
                    .collect();
                let found = match expired.len() {
                    0 => self.delivery_and_slot(*via, *which),
                    n => self.slot_for(*via, expired[*which as usize % n]),
                };
                let Some((s, d)) = found else { return };
                self.extend(s, d, *lease);
            }
        }
    }

    /// Delivery number `which` (wrapped) and the slot to use it through:
    /// the addressed handle if it has the token's API, else the other one
    /// if it does.
    fn delivery_and_slot(&self, via: bool, which: u8) -> Option<(usize, usize)> {
        if self.deliveries.is_empty() {
            return None;
        }
        self.slot_for(via, which as usize % self.deliveries.len())
    }

    /// Delivery `d` and the slot to use it through, as
    /// [`Run::delivery_and_slot`] picks it.
    fn slot_for(&self, via: bool, d: usize) -> Option<(usize, usize)> {
        let api = self.deliveries[d].token.api();
        let want = via as usize;
        let s = [want, 1 - want]
            .into_iter()
            .find(|&s| self.slots[s].as_ref().is_some_and(|slot| slot.api == api))?;
        Some((s, d))
    }

    /// The id `pick` names: a task's (a dead one's, when `dead_first` and
    /// there is one), nudged, or a fixed value.
    fn id_of(&self, pick: IdPick, dead_first: bool) -> i64 {
        let dead: Vec<&ModelTask> = self
            .model
            .tasks
            .iter()
            .filter(|t| dead_first && t.state == State::Dead)
            .collect();
        let all: Vec<&ModelTask> = self.model.tasks.iter().collect();
        let tasks = if dead.is_empty() { all } else { dead };
        match pick {
            IdPick::Task { which, nudge } if !tasks.is_empty() => {
                tasks[which as usize % tasks.len()].id + i64::from(nudge)
            }
            IdPick::Task { .. } => 1,
            IdPick::Fixed(id) => id,
        }
    }

    /// Whether the current delivery of its task is `d`.
    fn current(&self, d: usize) -> bool {
        let delivery = &self.deliveries[d];
        delivery.pulled
            && self
                .model
                .task(delivery.task_id)
                .is_some_and(|t| matches!(t.state, State::Leased { delivery, .. } if delivery == d))
    }

    /// Runs `call` between two readings of the clock.
    fn timed<T>(call: impl FnOnce() -> T) -> (T, Span) {
        let before = now_ms();
        let result = call();
        (
            result,
            Span {
                lo: before,
                hi: now_ms(),
            },
        )
    }

    /// Waits until every 1 ms lease given before `now.hi` has expired, and
    /// marks those of `ids` expired.
    fn let_short_leases_expire(&mut self, now: Span, ids: &[i64]) {
        while now_ms() <= now.hi {
            std::thread::sleep(Duration::from_micros(200));
        }
        for &id in ids {
            if let Some(State::Leased { expired, .. }) =
                self.model.task_mut(id).map(|t| &mut t.state)
            {
                *expired = true;
            }
        }
    }

    /// What a push of `payload` must answer, before the store is looked at:
    /// `None` when it is acceptable.
    fn payload_error(&self, s: usize, payload: &[u8]) -> Option<ErrorKind> {
        if std::str::from_utf8(payload).is_err() || payload.len() > self.slot(s).limit {
            Some(ErrorKind::InvalidArgument)
        } else if !is_json_text(payload) {
            Some(ErrorKind::InvalidJson)
        } else {
            None
        }
    }

    /// What the Rust API gets for `payload`: it takes a `&str`.
    fn sent(&self, s: usize, payload: &[u8]) -> Vec<u8> {
        match self.slot(s).api {
            Api::Rust => String::from_utf8_lossy(payload).into_owned().into_bytes(),
            Api::C => payload.to_vec(),
        }
    }

    /// Adds a newly stored task to the model.
    fn store(&mut self, s: usize, id: i64, payload: Vec<u8>, effect: &PushEffect, now: Span) {
        self.store_waiting(s, id, payload, effect, now, Vec::new(), false);
    }

    /// Adds a newly stored task that waits for the tasks `waiting`.
    #[allow(clippy::too_many_arguments)]
    fn store_waiting(
        &mut self,
        s: usize,
        id: i64,
        payload: Vec<u8>,
        effect: &PushEffect,
        now: Span,
        waiting: Vec<i64>,
        run_anyway: bool,
    ) {
        if id <= self.model.last_id {
            fail!(
                self,
                "invariant 1 (an id names one task): push stored id {id}, not above every id \
                 given before (the last: {})",
                self.model.last_id
            );
        }
        self.model.last_id = id;
        let (queue, default_attempts) = (self.slot(s).queue, self.slot(s).max_attempts);
        if let Some(key) = &effect.key {
            self.model.take_key(queue, key);
        }
        let run_at = match effect.due {
            Due::Now => now,
            Due::Delay(ms) => now.after(ms),
            Due::At(at) => Span::exact(at),
        };
        let max_attempts = effect.max_attempts.unwrap_or(default_attempts);
        self.model.tasks.push(ModelTask {
            id,
            queue,
            payload,
            run_at,
            priority: effect.priority,
            attempts: 0,
            max_attempts,
            last_error: LastError::None,
            key: effect.key.clone(),
            window: effect.key.is_some() && effect.window > 0,
            state: State::Pending,
            waiting,
            run_anyway,
        });
    }

    fn push(&mut self, s: usize, payload: &[u8], settings: &[Setting]) {
        let sent = self.sent(s, payload);
        let sets: Vec<Set> = settings.iter().map(|&x| resolve(x, now_ms())).collect();
        let mut setters = Vec::new();
        let (got, now) = Self::timed(|| self.slot(s).handle.push(&sent, &sets, &mut setters));
        let (effect, expected_setters) = expected_push(&sets);
        self.check_setters("push", &setters, &expected_setters);
        let queue = self.slot(s).queue;
        let holder = effect
            .key
            .as_deref()
            .and_then(|key| self.model.key_holder(queue, key))
            .map(|t| t.id);
        hint!(holder.is_some());
        hint!(
            effect.key.is_some()
                && holder.is_none()
                && self.model.tasks.iter().any(|t| t.key == effect.key)
        );
        let expected = match self.payload_error(s, &sent) {
            Some(kind) => Err(kind),
            None => Ok(holder.map(Pushed::Duplicate)),
        };
        match (expected, got) {
            (Ok(None), Ok(Pushed::Stored(id))) => self.store(s, id, sent, &effect, now),
            (Ok(Some(want)), Ok(got)) if want == got => {}
            (Err(want), Err(kind)) if want == kind => {}
            (want, got) => fail!(
                self,
                "push of {} bytes {:?} with {effect:?}: expected {want:?} (None: stored), got {got:?}",
                sent.len(),
                String::from_utf8_lossy(&sent[..sent.len().min(200)])
            ),
        }
    }

    fn push_batch(&mut self, s: usize, payloads: &[Vec<u8>], settings: &[Setting]) {
        let sent: Vec<Vec<u8>> = payloads.iter().map(|p| self.sent(s, p)).collect();
        let sets: Vec<Set> = settings.iter().map(|&x| resolve(x, now_ms())).collect();
        let mut setters = Vec::new();
        let (got, now) = Self::timed(|| self.slot(s).handle.push_batch(&sent, &sets, &mut setters));
        let (effect, expected_setters) = expected_push(&sets);
        self.check_setters("push_batch", &setters, &expected_setters);
        // A batch is all or nothing: the first bad payload decides.
        let first_bad = sent.iter().find_map(|p| self.payload_error(s, p));
        let expected = if effect.key.is_some() {
            Err(ErrorKind::InvalidArgument)
        } else if let Some(kind) = first_bad {
            Err(kind)
        } else {
            Ok(sent.len())
        };
        hint!(sent.len() > 1 && first_bad.is_some());
        match (expected, got) {
            (Ok(n), Ok(ids)) if ids.len() == n => {
                if ids.windows(2).any(|w| w[0] >= w[1]) {
                    fail!(self, "push_batch: ids not in increasing order: {ids:?}");
                }
                for (id, payload) in ids.into_iter().zip(sent) {
                    self.store(s, id, payload, &effect, now);
                }
            }
            (Err(want), Err(kind)) if want == kind => {}
            (want, got) => fail!(
                self,
                "push_batch of {} payloads with {effect:?}: expected {want:?} (the count stored), got {got:?}",
                sent.len()
            ),
        }
    }

    fn pull(&mut self, s: usize, spec: PullSpec, max: Option<usize>) {
        let mut setters = Vec::new();
        let (got, now) = Self::timed(|| self.slot(s).handle.pull(spec, max, &mut setters));
        let mut expected_setters = Vec::new();
        if spec.lease.duration().is_some() {
            expected_setters.push(if spec.lease.valid() {
                Ok(())
            } else {
                Err(ErrorKind::InvalidArgument)
            });
        }
        match spec.wait {
            Wait::None => {}
            Wait::Short(_) => expected_setters.push(Ok(())),
            Wait::TooLong(_) => expected_setters.push(Err(ErrorKind::InvalidArgument)),
        }
        // Record the deliveries first, so their tokens are freed even on a
        // mismatch.
        let got = got.map(|tasks| {
            tasks
                .into_iter()
                .map(|(seen, token)| {
                    self.deliveries.push(Delivery {
                        task_id: seen.id,
                        token,
                        pulled: true,
                    });
                    (seen, self.deliveries.len() - 1)
                })
                .collect::<Vec<_>>()
        });
        self.check_setters("pull", &setters, &expected_setters);
        if max == Some(0) {
            if !matches!(got, Err(ErrorKind::InvalidArgument)) {
                fail!(
                    self,
                    "pull_batch of 0: expected InvalidArgument, got {:?}",
                    got.map(|tasks| tasks.len())
                );
            }
            return;
        }
        let queue = self.slot(s).queue;
        // The claim first ends every task of the file cancelled while
        // leased whose lease ran out.
        self.end_abandoned_cancels(s, None, now);
        let room = self.model.room(queue);
        let live_before = self.model.live(queue);
        if let Ok(tasks) = &got {
            self.check_bounds(queue, tasks.len(), live_before, now, "claim");
        }
        let max = Some(room.map_or(max.unwrap_or(1), |room| max.unwrap_or(1).min(room)));
        hint!(room == Some(0));
        hint!(room.is_some_and(|room| room > 0) && room < Some(max.unwrap()));
        let waits = spec.wait.ms() > 0;
        let stopped = waits && (spec.cancelled || self.slot(s).interrupted);
        let tasks = match got {
            Ok(tasks) => tasks,
            Err(ErrorKind::Interrupted) if stopped => {
                // Nothing was ready: the claim found nothing to take.
                if max != Some(0) {
                    self.claim_nothing(s, queue, now);
                }
                return;
            }
            Err(kind) => fail!(self, "pull (max {max:?}): failed with {kind:?}"),
        };
        let ids: Vec<i64> = tasks.iter().map(|(seen, _)| seen.id).collect();
        for (seen, d) in &tasks {
            self.claim(s, queue, seen, *d, now);
        }
        if tasks.len() < max.unwrap_or(1) {
            self.claim_nothing(s, queue, now);
        }
        if let Some(rate) = &mut self.model.rates[queue] {
            for _ in &tasks {
                rate.uses.push(now);
            }
        }
        // A full queue beside an expired lease its holder may still extend.
        hint!(
            self.model.limits[queue].is_some_and(|limit| self.model.live(queue) >= limit as usize)
                && self.model.tasks.iter().any(|t| t.queue == queue && t.expired())
        );
        if matches!(spec.lease, Lease::Short) && !ids.is_empty() {
            self.let_short_leases_expire(now, &ids);
        }
    }

    /// Checks a task a claim in `now` returned, and updates the model: the
    /// task must be a candidate, and no candidate may certainly come first
    /// but an expired last attempt, which the claim makes dead.
    fn claim(&mut self, s: usize, queue: usize, seen: &Seen, d: usize, now: Span) {
        let keep_history = self.slot(s).keep_history;
        let Some(task) = self.model.task(seen.id) else {
            fail!(
                self,
                "pull returned task {}, which the model does not hold",
                seen.id
            )
        };
        if task.blocked() {
            // It may wait for an expired last attempt this claim buries
            // first: tq meets those in claim order, whatever their
            // priority.
            let buried: Vec<i64> = self
                .model
                .tasks
                .iter()
                .filter(|t| t.queue == queue && t.is_candidate(now) && t.expired() && t.last_attempt())
                .map(|t| t.id)
                .collect();
            hint!(!buried.is_empty());
            for id in buried {
                self.model.bury(id, LastError::LeaseLost, keep_history, now);
            }
        }
        let Some(task) = self.model.task(seen.id) else {
            fail!(self, "pull returned task {}, which the model no longer holds", seen.id)
        };
        if task.queue != queue
            || !task.may_be_candidate(now)
            || task.expired() && task.last_attempt()
        {
            fail!(
                self,
                "pull returned task {} ({:?} in queue {}, attempts {}/{}), which is not claimable",
                seen.id,
                task.state,
                task.queue,
                task.attempts,
                task.max_attempts
            );
        }
        if !task.run_at.contains(seen.run_at) || seen.run_at > now.hi {
            fail!(
                self,
                "pull of task {}: ready at {}, expected within {:?} and by {}",
                seen.id,
                seen.run_at,
                task.run_at,
                now.hi
            );
        }
        let before: Vec<(i64, bool)> = self
            .model
            .tasks
            .iter()
            .filter(|t| {
                t.queue == queue
                    && t.id != seen.id
                    && t.is_candidate(now)
                    && t.surely_before(task.priority, seen.run_at, seen.id)
            })
            .map(|t| (t.id, t.expired() && t.last_attempt()))
            .collect();
        hint!(task.expired());
        hint!(!before.is_empty());
        hint!(self
            .model
            .tasks
            .iter()
            .any(|t| t.queue == queue && t.id < seen.id && t.is_candidate(now)));
        hint!(self.model.tasks.iter().any(|t| t.queue == queue
            && t.id != seen.id
            && t.is_candidate(now)
            && t.priority == task.priority
            && t.run_at.hi == seen.run_at));
        if let Some(&(first, _)) = before.iter().find(|(_, buried)| !buried) {
            fail!(
                self,
                "pull returned task {} (priority {}, ready at {}), but task {first} comes first: {:?}",
                seen.id,
                task.priority,
                seen.run_at,
                self.model.task(first).unwrap()
            );
        }
        for (id, _) in before {
            if self.model.task(id).is_some_and(|t| t.expired()) {
                self.model.bury(id, LastError::LeaseLost, keep_history, now);
            }
        }
        let task = self.model.task(seen.id).unwrap();
        let was_expired = task.expired();
        let expected_error = if was_expired {
            LastError::LeaseLost
        } else {
            task.last_error.clone()
        };
        self.check_seen(
            "pull",
            seen,
            task,
            task.attempts + 1,
            &expected_error,
            TaskState::Leased,
        );
        let task = self.model.task_mut(seen.id).unwrap();
        task.run_at = Span::exact(seen.run_at);
        task.attempts += 1;
        task.last_error = expected_error;
        task.state = State::Leased {
            delivery: d,
            expired: false,
            cancelling: false,
        };
    }

    /// A claim in `now` found nothing more to deliver: no candidate may
    /// remain but expired last attempts, which it makes dead.
    fn claim_nothing(&mut self, s: usize, queue: usize, now: Span) {
        let keep_history = self.slot(s).keep_history;
        let candidates: Vec<(i64, bool)> = self
            .model
            .tasks
            .iter()
            .filter(|t| t.queue == queue && t.is_candidate(now))
            .map(|t| (t.id, t.expired() && t.last_attempt()))
            .collect();
        if let Some(&(id, _)) = candidates.iter().find(|(_, buried)| !buried) {
            fail!(
                self,
                "pull returned no (more) task, but task {id} is claimable: {:?}",
                self.model.task(id).unwrap()
            );
        }
        hint!(!candidates.is_empty());
        for (id, _) in candidates {
            if self.model.task(id).is_some_and(|t| t.expired()) {
                self.model.bury(id, LastError::LeaseLost, keep_history, now);
            }
        }
        // A burial may have released a task the claim then took: the
        // claim found none, so there must be none.
        if let Some(t) = self
            .model
            .tasks
            .iter()
            .find(|t| t.queue == queue && t.is_candidate(now) && !t.expired())
        {
            fail!(
                self,
                "pull returned no (more) task, but task {} is claimable: {t:?}",
                t.id
            );
        }
    }

    /// Compares what tq showed of a task with the model.
    fn check_seen(
        &self,
        what: &str,
        seen: &Seen,
        task: &ModelTask,
        attempts: u32,
        last_error: &LastError,
        state: TaskState,
    ) {
        if seen.payload != task.payload {
            fail!(
                self,
                "{what} of task {}: payload differs: pushed {:?}, got {:?}",
                task.id,
                String::from_utf8_lossy(&task.payload),
                String::from_utf8_lossy(&seen.payload)
            );
        }
        let error_matches = match (last_error, &seen.last_error) {
            (LastError::None, None) => true,
            (LastError::Reason(reason), Some(got)) => {
                // C cannot show a reason with a NUL whole.
                got == reason.as_bytes() || reason.contains('\0') && seen.api == Api::C
            }
            (LastError::LeaseLost, Some(got)) => !got.is_empty(),
            (LastError::Any, _) => true,
            _ => false,
        };
        let fields = (
            seen.attempts,
            seen.max_attempts,
            seen.priority,
            seen.state.unwrap_or(TaskState::Leased),
        );
        let expected = (attempts, task.max_attempts, task.priority, state);
        if fields != expected || !error_matches {
            fail!(
                self,
                "{what} of task {}: expected (attempts, max_attempts, priority, state) {expected:?} \
                 and last error {last_error:?}, got {fields:?} and {:?}",
                task.id,
                seen.last_error.as_ref().map(|e| String::from_utf8_lossy(&e[..e.len().min(100)]))
            );
        }
    }

    fn finish(&mut self, s: usize, d: usize) {
        let current = self.current(d);
        let cancelling = self.cancelling(d);
        let (got, now) = Self::timed(|| self.slot(s).handle.finish(self.deliveries[d].token));
        hint!(
            current
                && self
                    .model
                    .task(self.deliveries[d].task_id)
                    .unwrap()
                    .expired()
        );
        hint!(
            current
                && self.model.task(self.deliveries[d].task_id).unwrap().queue != self.slot(s).queue
        );
        hint!(!self.deliveries[d].pulled);
        self.finish_outcome(s, d, current, cancelling, got, now);
    }

    /// Checks a finish of delivery `d` through slot `s` during `now`, and
    /// updates the model.
    fn finish_outcome(
        &mut self,
        s: usize,
        d: usize,
        current: bool,
        cancelling: bool,
        got: Outcome<()>,
        now: Span,
    ) {
        match (current, cancelling, got) {
            (true, false, Ok(())) => self.finished(s, d, now),
            (true, true, Err(ErrorKind::Cancelled)) => self.holder_saw_cancel(s, d, now),
            (false, _, Err(ErrorKind::NotHeld)) => {}
            (current, cancelling, got) => fail!(
                self,
                "finish of delivery {d} of task {} (current: {current}, cancelled while held: \
                 {cancelling}): expected Ok if current, Cancelled if cancelled, else NotHeld; \
                 got {got:?}",
                self.deliveries[d].task_id
            ),
        }
    }

    /// The holder of delivery `d`, whose task was cancelled while it held
    /// it, called through slot `s`, which ended the task as cancelled.
    fn holder_saw_cancel(&mut self, s: usize, d: usize, now: Span) {
        hint!(true);
        let keep_history = self.slot(s).keep_history;
        self.model
            .end_cancelled(self.deliveries[d].task_id, keep_history, now);
    }

    /// The current delivery `d` was finished through slot `s` during `now`.
    fn finished(&mut self, s: usize, d: usize, now: Span) {
        let id = self.deliveries[d].task_id;
        let keep_history = self.slot(s).keep_history;
        let task = self.model.task_mut(id).unwrap();
        if task.window {
            hint!(!keep_history);
            task.state = State::Done;
        } else if keep_history {
            task.state = State::Done;
            task.key = None;
        } else {
            self.model.tasks.retain(|t| t.id != id);
        }
        hint!(self.model.tasks.iter().any(|t| t.waiting.contains(&id)));
        self.model.release(id, Ended::Done, keep_history, now);
    }

    fn finish_batch(&mut self, s: usize, picked: &[usize]) {
        let tokens: Vec<Token> = picked.iter().map(|&d| self.deliveries[d].token).collect();
        let (got, now) = Self::timed(|| self.slot(s).handle.finish_batch(&tokens));
        let mut expected = Vec::new();
        let mut cancelled = Vec::new();
        for &d in picked {
            let current = self.current(d);
            if current && !self.cancelling(d) {
                self.finished(s, d, now);
                expected.push(true);
            } else {
                if current && !cancelled.contains(&self.deliveries[d].task_id) {
                    cancelled.push(self.deliveries[d].task_id);
                }
                expected.push(false);
            }
        }
        // Those cancelled while held end once the batch is done.
        let keep_history = self.slot(s).keep_history;
        for id in cancelled {
            if self.model.task(id).is_some_and(|t| matches!(t.state, State::Leased { .. })) {
                self.model.end_cancelled(id, keep_history, now);
            }
        }
        hint!(expected.iter().filter(|&&held| held).count() > 1);
        hint!(expected.contains(&true) && expected.contains(&false));
        if got != Ok(expected.clone()) {
            fail!(
                self,
                "finish_batch of deliveries {picked:?}: expected {expected:?}, got {got:?}"
            );
        }
    }

    fn fail_delivery(&mut self, s: usize, d: usize, reason: &Reason) {
        let current = self.current(d);
        let cancelling = self.cancelling(d);
        let api = self.slot(s).api;
        let (got, now) = Self::timed(|| self.slot(s).handle.fail(self.deliveries[d].token, reason));
        let id = self.deliveries[d].task_id;
        let received = reason.received(api);
        match (current, got, &received) {
            // Not UTF-8 (C): refused.
            (_, Err(ErrorKind::InvalidArgument), None) => {}
            (false, Err(ErrorKind::NotHeld), _) => {}
            // With a NUL (Rust): C callers could not be shown it, so
            // refusing it is as right as keeping it.
            (_, Err(ErrorKind::InvalidArgument), Some(text)) if text.contains('\0') => {}
            (true, Err(ErrorKind::Cancelled), Some(_)) if cancelling => {
                self.holder_saw_cancel(s, d, now)
            }
            (true, Ok(failed), Some(text)) if !cancelling => {
                let backoff = self.slot(s).backoff;
                let keep_history = self.slot(s).keep_history;
                let task = self.model.task_mut(id).unwrap();
                let kept = cut(text, MAX_REASON_LEN);
                task.last_error = if kept.is_empty() {
                    LastError::None
                } else {
                    LastError::Reason(kept.to_owned())
                };
                if task.last_attempt() {
                    task.state = State::Dead;
                    self.model.release(id, Ended::Dead, keep_history, now);
                    if failed.is_some_and(|f| f != Failed::Dead) {
                        fail!(self, "fail of task {id} on its last attempt: expected Dead, got {failed:?}");
                    }
                    return;
                }
                let (shortest, longest) = pause_range(backoff, task.attempts);
                let due = Span {
                    lo: now.lo.saturating_add_unsigned(shortest),
                    hi: now.hi.saturating_add_unsigned(longest),
                };
                task.state = State::Pending;
                task.run_at = due;
                match failed {
                    None => {}
                    Some(Failed::RetryAt(at)) if due.contains(at) => {
                        task.run_at = Span::exact(at);
                    }
                    Some(other) => fail!(
                        self,
                        "fail of task {id}: expected a retry within {due:?} (back-off {backoff:?}), got {other:?}"
                    ),
                }
                hint!(shortest == 0);
            }
            (current, got, _) => fail!(
                self,
                "fail of delivery {d} of task {id} (current: {current}, cancelled while held: \
                 {cancelling}) with {reason:?}: got {got:?}"
            ),
        }
    }

    fn extend(&mut self, s: usize, d: usize, lease: Lease) {
        let current = self.current(d);
        let cancelling = self.cancelling(d);
        let id = self.deliveries[d].task_id;
        let queue = self.model.task(id).map_or(0, |t| t.queue);
        let expired = current && self.model.task(id).unwrap().expired();
        let live_before = self.model.live(queue);
        let limit = self.model.limits[queue];
        // An expired lease holds no slot: extending it takes one, if one
        // is free.
        let full = expired && limit.is_some_and(|limit| live_before >= limit as usize);
        let (got, now) =
            Self::timed(|| self.slot(s).handle.extend(self.deliveries[d].token, lease));
        hint!(expired);
        hint!(full);
        if full && got.is_ok() {
            self.check_bounds(queue, 1, live_before, now, "extend of an expired lease");
        }
        match (current, lease.valid(), got) {
            (true, true, Err(ErrorKind::Cancelled)) if cancelling => {
                self.holder_saw_cancel(s, d, now)
            }
            (true, true, Err(ErrorKind::NotHeld)) if full && !cancelling => {}
            (true, true, Ok(())) if !full && !cancelling => {
                let short = matches!(lease, Lease::Short);
                if let Some(State::Leased { expired, .. }) =
                    self.model.task_mut(id).map(|t| &mut t.state)
                {
                    *expired = false;
                }
                if short {
                    self.let_short_leases_expire(now, &[id]);
                }
            }
            (false, true, Err(ErrorKind::NotHeld)) => {}
            (true, false, Err(ErrorKind::InvalidArgument)) => {}
            // Which of two errors wins is not specified.
            (false, false, Err(ErrorKind::InvalidArgument | ErrorKind::NotHeld)) => {}
            (current, valid, got) => fail!(
                self,
                "extend of delivery {d} of task {id} (current: {current}, expired: {expired}, \
                 cancelled while held: {cancelling}, concurrency limit {limit:?} full: {full}) \
                 by {lease:?} (valid: {valid}): got {got:?}"
            ),
        }
    }

    fn recover(&mut self, s: usize) {
        let queue = self.slot(s).queue;
        let keep_history = self.slot(s).keep_history;
        let (got, now) = Self::timed(|| self.slot(s).handle.recover());
        let expired: Vec<i64> = self
            .model
            .tasks
            .iter()
            .filter(|t| t.queue == queue && t.expired())
            .map(|t| t.id)
            .collect();
        hint!(!expired.is_empty());
        if got != Ok(expired.len() as u64) {
            fail!(
                self,
                "recover: expected Ok({}) (the expired leases {expired:?}), got {got:?}",
                expired.len()
            );
        }
        for id in expired {
            let task = self.model.task_mut(id).unwrap();
            task.last_error = LastError::LeaseLost;
            if task.last_attempt() {
                task.state = State::Dead;
                self.model.release(id, Ended::Dead, keep_history, now);
            } else {
                task.state = State::Pending;
            }
        }
        self.end_abandoned_cancels(s, Some(queue), now);
    }

    /// Ends, through slot `s` during `now`, every task (of `queue`, if
    /// given) cancelled while leased whose lease ran out, as a claim (or a
    /// recovery) does; then checks that tq did.
    fn end_abandoned_cancels(&mut self, s: usize, queue: Option<usize>, now: Span) {
        let keep_history = self.slot(s).keep_history;
        let ended: Vec<(i64, usize)> = self
            .model
            .tasks
            .iter()
            .filter(|t| t.abandoned_cancel() && queue.is_none_or(|q| q == t.queue))
            .map(|t| (t.id, t.queue))
            .collect();
        hint!(!ended.is_empty());
        for &(id, _) in &ended {
            hint!(self.model.tasks.iter().any(|t| t.waiting.contains(&id)));
            self.model.end_cancelled(id, keep_history, now);
        }
        for (id, queue) in ended {
            let Some(s) = (0..2).find(|&s| self.slots[s].as_ref().is_some_and(|x| x.queue == queue))
            else {
                self.unasked.push((id, queue));
                continue;
            };
            self.ask_ended(s, id, keep_history.then_some(TaskState::Cancelled));
        }
    }

    /// Asks tq, through slot `s`, for task `id`, which the model ended as
    /// cancelled once its lease ran out: it must be `expected`.
    fn ask_ended(&mut self, s: usize, id: i64, expected: Option<TaskState>) {
        let got = self.slot(s).handle.task_state(id);
        if got != Ok(expected) {
            fail!(
                self,
                "invariant 4 (a cancelled task ends once its lease ran out): task {id} was \
                 cancelled while leased, its holder stopped using it, its lease ran out and \
                 then a claim (or recovery) ran: the task must have ended ({expected:?}), \
                 but task({id}) answers {got:?}"
            );
        }
    }

    /// Checks invariants 2 and 3 for `n` more leases taken in `queue`
    /// (whose live leases were `live_before`) during `now`, and counts
    /// the claims against the queue's rate.
    fn check_bounds(&mut self, queue: usize, n: usize, live_before: usize, now: Span, what: &str) {
        if n == 0 {
            return;
        }
        if let Some(limit) = self.model.limits[queue] {
            if live_before + n > limit as usize {
                fail!(
                    self,
                    "invariant 2 (concurrency limit): queue {queue} has a limit of {limit} and \
                     {live_before} live leases; the {what} took {n} more, so {} leases are live \
                     at once",
                    live_before + n
                );
            }
        }
        if what != "claim" {
            return;
        }
        let Some(rate) = &mut self.model.rates[queue] else {
            return;
        };
        for _ in 0..n {
            rate.counted.push(now);
        }
        let (claims, per) = rate.rate;
        let mut times = rate.counted.clone();
        times.sort_by_key(|span| span.lo);
        // Claims i..=j surely lie in one window when the last one ended
        // less than a window after the first one began.
        for i in 0..times.len() {
            let within = times[i..]
                .iter()
                .take_while(|t| t.hi - times[i].lo < per as i64)
                .count();
            if within > claims as usize {
                let times = times.clone();
                fail!(
                    self,
                    "invariant 3 (rate limit): queue {queue} allows {claims} claims per {per} ms, \
                     but {within} claims fall in one window (claim calls at {times:?})"
                );
            }
        }
    }

    /// Whether delivery `d` is current and its task was cancelled meanwhile.
    fn cancelling(&self, d: usize) -> bool {
        self.current(d)
            && self.model.task(self.deliveries[d].task_id).is_some_and(|t| {
                matches!(
                    t.state,
                    State::Leased {
                        cancelling: true,
                        ..
                    }
                )
            })
    }

    fn cancel(&mut self, s: usize, id: i64, reason: bool) {
        let queue = self.slot(s).queue;
        let keep_history = self.slot(s).keep_history;
        let text = if reason { "stopped by an operator" } else { "" };
        let (got, now) = Self::timed(|| self.slot(s).handle.cancel_task(id, text));
        let state = self
            .model
            .task(id)
            .filter(|t| t.queue == queue)
            .map(|t| t.state);
        let expected = match state {
            None | Some(State::Done) => Err(ErrorKind::InvalidArgument),
            Some(State::Cancelled) => Ok(Cancelled::Removed),
            Some(State::Leased { .. }) => Ok(Cancelled::Requested),
            Some(State::Pending | State::Dead) => Ok(Cancelled::Removed),
        };
        hint!(matches!(state, Some(State::Leased { expired: false, cancelling: false, .. })));
        hint!(matches!(state, Some(State::Leased { expired: true, cancelling: false, .. })));
        hint!(self.model.task(id).is_some_and(|t| t.blocked()));
        hint!(self.model.tasks.iter().any(|t| t.waiting.contains(&id)));
        if got != expected {
            fail!(
                self,
                "cancel_task({id}) in queue {queue} (the task: {state:?}): expected {expected:?}, got {got:?}"
            );
        }
        match state {
            Some(State::Leased {
                delivery, expired, ..
            }) => {
                let task = self.model.task_mut(id).unwrap();
                task.state = State::Leased {
                    delivery,
                    expired,
                    cancelling: true,
                };
                task.last_error = LastError::Any;
            }
            Some(State::Pending | State::Dead) => self.model.end_cancelled(id, keep_history, now),
            _ => {}
        }
    }

    fn set_concurrency_limit(&mut self, s: usize, spec: ConcurrencySpec) {
        let queue = self.slot(s).queue;
        let limit = match spec {
            ConcurrencySpec::None => None,
            ConcurrencySpec::Some(n) => Some(u32::from(n)),
            ConcurrencySpec::Zero => Some(0),
        };
        let got = self.slot(s).handle.set_concurrency_limit(limit);
        let ok = limit != Some(0);
        let expected = if ok { Ok(()) } else { Err(ErrorKind::InvalidArgument) };
        hint!(ok && limit.is_some_and(|limit| self.model.live(queue) >= limit as usize));
        if got != expected {
            fail!(
                self,
                "set_concurrency_limit({limit:?}) of queue {queue}: expected {expected:?}, got {got:?}"
            );
        }
        if ok {
            self.model.limits[queue] = limit;
        }
    }

    fn set_rate_limit(&mut self, s: usize, spec: RateSpec) {
        let queue = self.slot(s).queue;
        let current = self.model.rates[queue].as_ref().map(|r| r.rate);
        let (rate, ok) = match spec {
            RateSpec::None => (None, true),
            RateSpec::Same => (Some(current.unwrap_or((1, HOUR_MS))), true),
            RateSpec::Some { claims, day } => (
                Some((u32::from(claims), if day { DAY_MS } else { HOUR_MS })),
                true,
            ),
            RateSpec::ZeroClaims => (Some((0, HOUR_MS)), false),
            RateSpec::ZeroWindow => (Some((1, 0)), false),
        };
        let got = self.slot(s).handle.set_rate_limit(rate);
        let expected = if ok { Ok(()) } else { Err(ErrorKind::InvalidArgument) };
        let used = self.model.rates[queue]
            .as_ref()
            .map_or(0, |r| r.uses.len());
        hint!(ok && rate == current && used > 0);
        hint!(ok && rate.is_some() && current.is_some() && rate != current && used > 0);
        if got != expected {
            fail!(
                self,
                "set_rate_limit({rate:?}) of queue {queue}: expected {expected:?}, got {got:?}"
            );
        }
        if !ok {
            return;
        }
        // The same rate changes nothing; a new one keeps the newest uses
        // it has room for; none forgets them.
        let old = self.model.rates[queue].take();
        self.model.rates[queue] = match (rate, old) {
            (None, _) => None,
            (Some(rate), Some(old)) if old.rate == rate => Some(old),
            (Some(rate), Some(old)) => {
                let keep = old.uses.len().min(rate.0 as usize);
                let uses = old.uses[old.uses.len() - keep..].to_vec();
                Some(RateState {
                    rate,
                    counted: uses.clone(),
                    uses,
                })
            }
            (Some(rate), None) => Some(RateState {
                rate,
                uses: Vec::new(),
                counted: Vec::new(),
            }),
        };
    }

    /// The items of a `push_items` as sent: a parent that would be an
    /// item's own new id, or is in `exclude`, is an unknown one instead.
    fn resolve_items(&self, items: &[ItemSpec], exclude: &[i64]) -> Vec<SentItem> {
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let mut after = Vec::new();
                for pick in &item.after {
                    let resolved = match *pick {
                        ParentPick::Item(_) if i == 0 => continue,
                        ParentPick::Item(k) => After::Item(k as usize % i),
                        ParentPick::Task(pick) => {
                            let id = self.id_of(pick, false);
                            if id <= 0 || id > self.model.last_id || exclude.contains(&id) {
                                After::Task(UNKNOWN_ID)
                            } else {
                                After::Task(id)
                            }
                        }
                        ParentPick::Unknown => After::Task(UNKNOWN_ID),
                    };
                    if !after.contains(&resolved) {
                        after.push(resolved);
                    }
                }
                SentItem {
                    payload: item.payload.clone(),
                    after,
                    run_anyway: item.run_anyway,
                }
            })
            .collect()
    }

    /// What `push_items` of `items` through slot `s` must do: the tasks
    /// each item waits for (stored ones, or earlier items), or the error.
    fn expected_items(&self, s: usize, items: &[SentItem]) -> Outcome<Vec<Vec<After>>> {
        for item in items {
            if let Some(kind) = self.payload_error(s, item.payload.as_bytes()) {
                return Err(kind);
            }
        }
        let queue = self.slot(s).queue;
        let mut waits = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let mut waiting = Vec::new();
            for &after in &item.after {
                match after {
                    After::Item(_) => waiting.push(after),
                    After::Task(id) => {
                        let Some(task) = self.model.task(id).filter(|t| t.queue == queue) else {
                            hint!(i > 0);
                            return Err(ErrorKind::InvalidArgument);
                        };
                        match task.state {
                            State::Done => {}
                            State::Dead | State::Cancelled if item.run_anyway => {}
                            State::Dead | State::Cancelled => {
                                return Err(ErrorKind::InvalidArgument)
                            }
                            _ => waiting.push(after),
                        }
                    }
                }
            }
            waits.push(waiting);
        }
        Ok(waits)
    }

    /// Checks the outcome of `push_items`; returns the tasks to store.
    fn check_items(
        &self,
        s: usize,
        items: &[SentItem],
        expected: Outcome<Vec<Vec<After>>>,
        got: Outcome<Vec<i64>>,
    ) -> Vec<NewStored> {
        match (expected, got) {
            (Ok(waits), Ok(ids)) if ids.len() == items.len() => {
                if ids.windows(2).any(|w| w[0] >= w[1]) {
                    fail!(self, "push_items: ids not in increasing order: {ids:?}");
                }
                hint!(waits.iter().any(|w| !w.is_empty()));
                items
                    .iter()
                    .zip(waits)
                    .zip(&ids)
                    .map(|((item, waits), &id)| {
                        let mut waiting: Vec<i64> = waits
                            .into_iter()
                            .map(|after| match after {
                                After::Item(k) => ids[k],
                                After::Task(id) => id,
                            })
                            .collect();
                        waiting.sort_unstable();
                        waiting.dedup();
                        NewStored {
                            s,
                            id,
                            payload: item.payload.clone().into_bytes(),
                            waiting,
                            run_anyway: item.run_anyway,
                        }
                    })
                    .collect()
            }
            (Err(want), Err(kind)) if want == kind => Vec::new(),
            (want, got) => fail!(
                self,
                "push_items of {items:?}: expected {want:?} (the tasks each waits for), got {got:?}"
            ),
        }
    }

    /// Stores new tasks, in the order of their ids.
    fn store_all(&mut self, mut stored: Vec<NewStored>, now: Span) {
        stored.sort_by_key(|new| new.id);
        for new in stored {
            self.store_waiting(
                new.s,
                new.id,
                new.payload,
                &PushEffect::default(),
                now,
                new.waiting,
                new.run_anyway,
            );
        }
    }

    fn push_items(&mut self, s: usize, items: &[ItemSpec]) {
        let sent = self.resolve_items(items, &[]);
        let expected = self.expected_items(s, &sent);
        let (got, now) = Self::timed(|| self.slot(s).handle.push_items(&sent));
        let stored = self.check_items(s, &sent, expected, got);
        self.store_all(stored, now);
    }

    /// What one write of `Op::Together` does through slot `s`.
    fn plan(&self, s: usize, sub: &Sub, exclude: &[i64]) -> Plan {
        let api = self.slot(s).api;
        let finish = |d: usize| {
            // A task cancelled while held ends as cancelled, which would
            // cancel the tasks waiting for it: the other write's parents
            // would then depend on the order.
            if self.deliveries[d].token.api() == api && !self.cancelling(d) {
                Plan::Finish(d)
            } else {
                Plan::Skip
            }
        };
        match sub {
            Sub::Finish(which) => {
                let mine: Vec<usize> = (0..self.deliveries.len())
                    .filter(|&d| self.deliveries[d].token.api() == api)
                    .collect();
                if mine.is_empty() {
                    return Plan::Skip;
                }
                finish(mine[*which as usize % mine.len()])
            }
            Sub::FinishNewest => match self.model.tasks.iter().max_by_key(|t| t.id) {
                Some(ModelTask {
                    state: State::Leased { delivery, .. },
                    ..
                }) => finish(*delivery),
                _ => Plan::Skip,
            },
            Sub::PushItems(items) => Plan::Items(self.resolve_items(items, exclude)),
            Sub::Push(text) => Plan::Push(text.clone()),
            Sub::Slow => {
                let item = |after| SentItem {
                    payload: "0".to_owned(),
                    after,
                    run_anyway: false,
                };
                let mut items = vec![item(Vec::new()); SLOW_ITEMS];
                items.push(item(vec![After::Task(UNKNOWN_ID)]));
                Plan::Items(items)
            }
            Sub::Nothing => Plan::Skip,
        }
    }

    fn together(&mut self, via: [bool; 3], subs: &[Sub; 3], gaps: [u16; 2]) {
        let (Some(sa), Some(sb), Some(sc)) =
            (self.pick(via[0]), self.pick(via[1]), self.pick(via[2]))
        else {
            return;
        };
        let slots = [sa, sb, sc];
        let finishes = |sub: &Sub| matches!(sub, Sub::Finish(_) | Sub::FinishNewest);
        // Finishes first, so that the pushes wait for none of their tasks.
        let mut plans = [Plan::Skip, Plan::Skip, Plan::Skip];
        for i in 0..3 {
            if finishes(&subs[i]) {
                let plan = self.plan(slots[i], &subs[i], &[]);
                // Each delivery once.
                if !plans.iter().any(|p| matches!((p, &plan), (Plan::Finish(a), Plan::Finish(b)) if a == b)) {
                    plans[i] = plan;
                }
            }
        }
        let finishing: Vec<i64> = plans
            .iter()
            .filter_map(|plan| match plan {
                Plan::Finish(d) => Some(self.deliveries[*d].task_id),
                _ => None,
            })
            .collect();
        for i in 0..3 {
            if !finishes(&subs[i]) {
                plans[i] = self.plan(slots[i], &subs[i], &finishing);
            }
        }
        self.trace.push(format!("  as {plans:?} through slots {slots:?}"));
        // What each write must do, from the model before both.
        let states: Vec<(bool, bool)> = plans
            .iter()
            .map(|plan| match plan {
                Plan::Finish(d) => (self.current(*d), self.cancelling(*d)),
                _ => (false, false),
            })
            .collect();
        let expected: Vec<Option<Outcome<Vec<Vec<After>>>>> = (0..3)
            .map(|i| match &plans[i] {
                Plan::Items(items) => Some(self.expected_items(slots[i], items)),
                Plan::Push(text) => Some(match self.payload_error(slots[i], text.as_bytes()) {
                    Some(kind) => Err(kind),
                    None => Ok(vec![Vec::new()]),
                }),
                _ => None,
            })
            .collect();
        let newest = self.model.tasks.iter().map(|t| t.id).max();
        hint!(finishing.len() == 1 && newest == Some(finishing[0]) && newest == Some(self.model.last_id));
        hint!(
            finishing.len() == 1
                && expected.iter().any(|e| matches!(e, Some(Err(_))))
                && plans.iter().any(|p| matches!(p, Plan::Items(items) if items.len() > 1))
        );
        // Each thread starts at its own time after a common one, late
        // enough for all three to be running by then.
        let offsets = [0, u64::from(gaps[0]), u64::from(gaps[0]) + u64::from(gaps[1])];
        let start = std::time::Instant::now() + Duration::from_micros(300);
        let run = |i: usize| {
            let handle = &self.slot(slots[i]).handle;
            let token = match plans[i] {
                Plan::Finish(d) => Some(self.deliveries[d].token),
                _ => None,
            };
            let plan = &plans[i];
            let at = start + Duration::from_micros(offsets[i]);
            move || {
                // Yielding, so that the three threads share two cores.
                while std::time::Instant::now() < at {
                    std::thread::yield_now();
                }
                match plan {
                    Plan::Skip => Done::Nothing,
                    Plan::Finish(_) => Done::Finish(handle.finish(token.unwrap())),
                    Plan::Items(items) => Done::Items(handle.push_items(items)),
                    Plan::Push(text) => {
                        let mut setters = Vec::new();
                        Done::Push(handle.push(text.as_bytes(), &[], &mut setters))
                    }
                }
            }
        };
        let before = now_ms();
        let done: Vec<Done> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..3).map(|i| scope.spawn(run(i))).collect();
            threads
                .into_iter()
                .map(|thread| thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect()
        });
        let now = Span {
            lo: before,
            hi: now_ms(),
        };
        let mut stored = Vec::new();
        for i in 0..3 {
            match (&plans[i], &done[i]) {
                (Plan::Finish(d), Done::Finish(got)) => {
                    let (current, cancelling) = states[i];
                    self.finish_outcome(slots[i], *d, current, cancelling, got.clone(), now);
                }
                (Plan::Items(items), Done::Items(got)) => {
                    let expected = expected[i].clone().unwrap();
                    stored.extend(self.check_items(slots[i], items, expected, got.clone()));
                }
                (Plan::Push(text), Done::Push(got)) => match (&expected[i], got) {
                    (Some(Ok(_)), Ok(Pushed::Stored(id))) => stored.push(NewStored {
                        s: slots[i],
                        id: *id,
                        payload: text.clone().into_bytes(),
                        waiting: Vec::new(),
                        run_anyway: false,
                    }),
                    (Some(Err(want)), Err(kind)) if want == kind => {}
                    (want, got) => fail!(
                        self,
                        "push of {text:?} beside another write: expected {want:?}, got {got:?}"
                    ),
                },
                _ => {}
            }
        }
        self.store_all(stored, now);
    }

    fn count(&mut self, s: usize, state: i32) {
        let slot = self.slot(s);
        let got = slot.handle.count(state);
        let expected = match named_state(slot.api, state) {
            None => Err(ErrorKind::InvalidArgument),
            Some(named) => Ok(self.model.count(slot.queue, named)),
        };
        hint!(state == 3 && expected.is_ok_and(|n| n > 1));
        if got != expected {
            fail!(
                self,
                "count of state {state} in queue {}: expected {expected:?}, got {got:?}",
                slot.queue
            );
        }
    }

    fn list(&mut self, s: usize, state: i32, after: i64, max: usize) {
        let slot = self.slot(s);
        let queue = slot.queue;
        let got = slot.handle.list(state, after, max);
        // Record C tasks first, so they are freed even on a mismatch.
        let got = got.map(|tasks| {
            tasks
                .into_iter()
                .map(|(seen, token)| {
                    if let Some(token) = token {
                        self.deliveries.push(Delivery {
                            task_id: seen.id,
                            token,
                            pulled: false,
                        });
                    }
                    seen
                })
                .collect::<Vec<_>>()
        });
        let Some(wanted) = named_state(self.slot(s).api, state) else {
            if !matches!(got, Err(ErrorKind::InvalidArgument)) {
                fail!(
                    self,
                    "list of state {state}: expected InvalidArgument, got {:?}",
                    got.map(|tasks| tasks.len())
                );
            }
            return;
        };
        let expected: Vec<i64> = self
            .model
            .tasks
            .iter()
            .filter(|t| t.queue == queue && t.public_state() == wanted && t.id > after)
            .map(|t| t.id)
            .take(max)
            .collect();
        let got = match got {
            Ok(tasks) => tasks,
            Err(kind) => fail!(
                self,
                "list of {wanted:?} after {after}: failed with {kind:?}"
            ),
        };
        let got_ids: Vec<i64> = got.iter().map(|seen| seen.id).collect();
        hint!(expected.len() > 1);
        if got_ids != expected {
            fail!(
                self,
                "list of {wanted:?} after {after}, max {max}: expected {expected:?}, got {got_ids:?}"
            );
        }
        for seen in &got {
            let task = self.model.task(seen.id).unwrap();
            if !task.run_at.contains(seen.run_at) {
                fail!(
                    self,
                    "list of task {}: ready at {}, expected within {:?}",
                    seen.id,
                    seen.run_at,
                    task.run_at
                );
            }
            self.check_seen("list", seen, task, task.attempts, &task.last_error, wanted);
            self.model.task_mut(seen.id).unwrap().run_at = Span::exact(seen.run_at);
        }
    }

    fn retry_dead(&mut self, s: usize, id: i64) {
        let queue = self.slot(s).queue;
        let (got, now) = Self::timed(|| self.slot(s).handle.retry_dead(id));
        let dead = self
            .model
            .task(id)
            .is_some_and(|t| t.queue == queue && t.state == State::Dead);
        hint!(dead);
        hint!(self
            .model
            .task(id)
            .is_some_and(|t| t.state == State::Dead && t.queue != queue));
        match (dead, got) {
            (true, Ok(())) => self.revive(id, now),
            (false, Err(ErrorKind::InvalidArgument)) => {}
            (dead, got) => fail!(
                self,
                "retry_dead({id}) in queue {queue} (dead there: {dead}): expected Ok if dead, else InvalidArgument; got {got:?}"
            ),
        }
    }

    /// A dead task was retried during `now`: pending, attempts from zero,
    /// ready now, holding its key again if nobody took it meanwhile.
    fn revive(&mut self, id: i64, now: Span) {
        let task = self.model.task_mut(id).unwrap();
        task.state = State::Pending;
        task.attempts = 0;
        task.run_at = now;
    }

    fn retry_all_dead(&mut self, s: usize) {
        let queue = self.slot(s).queue;
        let (got, now) = Self::timed(|| self.slot(s).handle.retry_all_dead());
        let dead: Vec<i64> = self
            .model
            .tasks
            .iter()
            .filter(|t| t.queue == queue && t.state == State::Dead)
            .map(|t| t.id)
            .collect();
        if got != Ok(dead.len() as u64) {
            fail!(
                self,
                "retry_all_dead in queue {queue}: expected Ok({}), got {got:?}",
                dead.len()
            );
        }
        for id in dead {
            self.revive(id, now);
        }
    }

    fn purge(&mut self, s: usize, state: i32, age: Age) {
        let slot = self.slot(s);
        let queue = slot.queue;
        let got = slot.handle.purge(state, age.ms());
        let named = named_state(slot.api, state);
        let wanted = named.unwrap_or_else(|| task_state(state));
        let purgeable = named.is_some_and(|state| {
            matches!(
                state,
                TaskState::Done | TaskState::Dead | TaskState::Cancelled
            )
        });
        let expected = match age {
            _ if !purgeable => Err(ErrorKind::InvalidArgument),
            Age::TooOld(_) => Err(ErrorKind::InvalidArgument),
            Age::Old(_) => Ok(0),
            Age::Zero => Ok(self.model.count(queue, wanted)),
        };
        hint!(expected.is_ok_and(|n| n > 0) && wanted == TaskState::Dead);
        hint!(
            expected.is_ok_and(|n| n > 0)
                && self
                    .model
                    .tasks
                    .iter()
                    .any(|t| t.state == State::Done && t.window)
        );
        if got != expected {
            fail!(
                self,
                "purge of state {state} ({wanted:?}), age {age:?}, in queue {queue}: expected {expected:?}, got {got:?}"
            );
        }
        if purgeable && matches!(age, Age::Zero) {
            self.model
                .tasks
                .retain(|t| t.queue != queue || t.public_state() != wanted);
        }
    }

    fn oldest_ready_age(&mut self, s: usize) {
        let queue = self.slot(s).queue;
        let (got, now) = Self::timed(|| self.slot(s).handle.oldest_ready_age());
        let pending = || {
            self.model
                .tasks
                .iter()
                .filter(|t| t.queue == queue && t.state == State::Pending && !t.blocked())
        };
        // Due for certain, and perhaps due, during the call.
        let due: Vec<Span> = pending()
            .filter(|t| t.is_candidate(now))
            .map(|t| t.run_at)
            .collect();
        let maybe: Vec<Span> = pending()
            .filter(|t| t.may_be_candidate(now))
            .map(|t| t.run_at)
            .collect();
        let expired = self
            .model
            .tasks
            .iter()
            .any(|t| t.queue == queue && (t.expired() || t.abandoned_cancel()));
        let got = match got {
            Ok(age) => age,
            Err(kind) => fail!(self, "oldest_ready_age: failed with {kind:?}"),
        };
        let ok = match got {
            // Whether an expired lease counts as ready here is not specified.
            None => due.is_empty(),
            Some(age) => {
                let age = age as i64;
                let earliest = maybe.iter().map(|span| span.lo).min();
                let oldest_due = due.iter().map(|span| span.hi).min();
                let low_ok = oldest_due.is_none_or(|hi| age >= (now.lo - hi).max(0));
                let high_ok = expired || earliest.is_some_and(|lo| age <= (now.hi - lo).max(0));
                (!maybe.is_empty() || expired) && low_ok && high_ok
            }
        };
        hint!(due.len() > 1);
        if !ok {
            fail!(
                self,
                "oldest_ready_age in {now:?}: got {got:?} with due ready times {due:?}, \
                 perhaps due {maybe:?}, expired leases: {expired}"
            );
        }
    }

    /// For each queue a handle was opened on (no other can hold a task),
    /// through a handle open on it (or one opened for the check): counts
    /// every state, lists each state in pages, claims every
    /// claimable task in one batch, retries the dead (if any) and claims
    /// again, and counts again.
    fn check_final(&mut self) {
        self.trace.push("final check".into());
        let used = self.used;
        for queue in (0..QUEUES.len()).filter(|&q| used[q]) {
            let on_queue =
                |slot: &Option<Slot>| slot.as_ref().is_some_and(|slot| slot.queue == queue);
            let s = match (0..2).find(|&s| on_queue(&self.slots[s])) {
                Some(s) => s,
                None => {
                    let s = (0..2).find(|&s| self.slots[s].is_none()).unwrap_or(0);
                    let spec = OpenSpec {
                        api: Api::Rust,
                        keep_history: false,
                        limit: Limit::Default,
                        queue: QueueName::Named(queue),
                        max_attempts: Attempts::Unset,
                        backoff: Backoff::Unset,
                    };
                    self.open(s, &spec);
                    s
                }
            };
            let unasked: Vec<(i64, usize)> = std::mem::take(&mut self.unasked);
            for (id, of) in unasked {
                if of != queue {
                    self.unasked.push((id, of));
                    continue;
                }
                // Kept as cancelled, unless purged since.
                let expected = self.model.task(id).map(|_| TaskState::Cancelled);
                self.ask_ended(s, id, expected);
            }
            // Limits would hold tasks back from the drain.
            if self.model.limits[queue].is_some() {
                self.set_concurrency_limit(s, ConcurrencySpec::None);
            }
            if self.model.rates[queue].is_some() {
                self.set_rate_limit(s, RateSpec::None);
            }
            for state in 0..4 {
                self.count(s, state);
                // The count vouches for an empty state.
                if self.model.count(queue, task_state(state)) == 0 {
                    continue;
                }
                let mut after = 0;
                loop {
                    self.list(s, state, after, FINAL_PAGE);
                    let page: Vec<i64> = self
                        .model
                        .tasks
                        .iter()
                        .filter(|t| {
                            t.queue == queue
                                && t.public_state() == task_state(state)
                                && t.id > after
                        })
                        .map(|t| t.id)
                        .take(FINAL_PAGE)
                        .collect();
                    match page.last() {
                        Some(&last) if page.len() == FINAL_PAGE => after = last,
                        _ => break,
                    }
                }
            }
            let drain = PullSpec {
                lease: Lease::Long(HOUR_MS),
                wait: Wait::None,
                cancelled: false,
            };
            loop {
                let now = Span::exact(now_ms());
                let claimable = self
                    .model
                    .tasks
                    .iter()
                    .filter(|t| t.queue == queue && t.is_candidate(now))
                    .count();
                // One more than there is, so the batch must come back short.
                self.pull(s, drain, Some(claimable + 1));
                if self.model.count(queue, TaskState::Dead) == 0 {
                    break;
                }
                self.retry_all_dead(s);
            }
            for state in 0..4 {
                self.count(s, state);
            }
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.slots = [None, None];
        for delivery in &self.deliveries {
            if let Token::C(task) = delivery.token {
                ffi::tq_task_free(task);
            }
        }
    }
}

/// The bytes of a new queue file, made by tq once per process: copying them
/// is much faster than creating the schema in every iteration.
fn empty_queue() -> &'static [u8] {
    static EMPTY: OnceLock<Vec<u8>> = OnceLock::new();
    EMPTY.get_or_init(|| {
        let dir = Scratch::get("api_model").root().join("empty");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a directory for the empty queue");
        let path = dir.join("queue.db");
        drop(
            Queue::open(path.to_str().expect("UTF-8 path"), &OpenOptions::new())
                .expect("create a queue"),
        );
        let wal = fs::metadata(dir.join("queue.db-wal")).map_or(0, |m| m.len());
        assert_eq!(wal, 0, "closing the last handle leaves the log empty");
        let bytes = fs::read(&path).expect("the new queue file");
        let _ = fs::remove_dir_all(&dir);
        bytes
    })
}

/// With `TQ_FUZZ_FINDINGS` set to a file, appends to it a line for each
/// panic: the time (ms since the epoch) and the first line of its message,
/// so that a run that carries on past crashes (`-fork=1
/// -ignore_crashes=1`) says what it found when.
fn note_findings() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let Some(path) = std::env::var_os("TQ_FUZZ_FINDINGS") else {
            return;
        };
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            let first = message.lines().next().unwrap_or("");
            if let Ok(mut file) = fs::OpenOptions::new().append(true).create(true).open(&path) {
                use std::io::Write;
                let _ = writeln!(file, "{} {first}", now_ms());
            }
            default(info);
        }));
    });
}

fuzz_target!(|input: Input| {
    if converting().is_some() {
        return;
    }
    note_findings();
    let scratch = Scratch::get("api_model");
    let dir = scratch.fresh();
    let file = dir.join("queue.db");
    fs::write(&file, empty_queue()).expect("copy the empty queue");
    let path = file.to_str().expect("UTF-8 path").to_owned();
    {
        let mut run = Run {
            path,
            slots: [None, None],
            model: Model::default(),
            deliveries: Vec::new(),
            used: [false; 2],
            trace: Vec::new(),
            unasked: Vec::new(),
        };
        run.trace.push(format!("open slot 0 {:?}", input.first));
        run.open(0, &input.first);
        for op in &input.ops {
            run.step(op);
        }
        run.check_final();
    }
    scratch.clean();
});
