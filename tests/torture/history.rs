//! The history log: every process appends to its own file, outside the
//! database, an `invoke` record before each tq call and an `ok` or `fail`
//! record after it. A call with an invoke and no completion (its process was
//! killed or lost power inside it) is *unknown*: it may or may not have
//! taken effect.
//!
//! One record is one line, written with one `write()` to a file opened with
//! `O_APPEND`, so threads never interleave inside a line and a SIGKILL
//! leaves whole lines; a torn last line (a write cut short) is ignored.
//!
//! Line: `TIME_NS PROCESS THREAD SEQ PHASE OP key=value...`, where TIME_NS
//! comes from [`now_ns`] (one real clock for every process), SEQ pairs an
//! invoke with its completion, and PHASE is `invoke`, `ok`, `fail` or
//! `info` (an event that is not a call). The event `kill target=P` says
//! that process P is dead from that moment (killed by the driver, or by
//! its own hand): from then on `recover` may take back what P held. The
//! event `reaped target=P`, logged once the driver has reaped P, says that
//! P did nothing later (its calls cut short read the clock before it).
//!
//! `finish_pull` (one call to `finish_and_pull`, one transaction) is read
//! back as the two operations it is: a `finish` of the delivery it names,
//! then, unless the finish was refused, a `pull` whose answer is in the
//! completion's `next_*` fields.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::harness::now_ns;

pub struct History {
    file: File,
    process: String,
    seq: AtomicU64,
}

/// An invoked call awaiting its completion record.
#[must_use]
pub struct Call {
    thread: u32,
    seq: u64,
    op: &'static str,
}

impl History {
    /// Opens `DIR/PROCESS.log` for appending; `process` names one
    /// incarnation of one process and must be unique in the directory.
    pub fn create(dir: &Path, process: &str) -> History {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("{process}.log")))
            .expect("open the history file");
        History {
            file,
            process: process.to_owned(),
            seq: AtomicU64::new(0),
        }
    }

    pub fn process(&self) -> &str {
        &self.process
    }

    pub fn invoke(&self, thread: u32, op: &'static str, fields: &str) -> Call {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.append(thread, seq, "invoke", op, fields);
        Call { thread, seq, op }
    }

    pub fn ok(&self, call: Call, fields: &str) {
        self.append(call.thread, call.seq, "ok", call.op, fields);
    }

    pub fn fail(&self, call: Call, err: &tq::Error) {
        self.append(
            call.thread,
            call.seq,
            "fail",
            call.op,
            &format!("err={:?}", err.kind()),
        );
    }

    /// An event that is not a call (for example `kill target=PROCESS`).
    pub fn info(&self, op: &'static str, fields: &str) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.append(0, seq, "info", op, fields);
    }

    fn append(&self, thread: u32, seq: u64, phase: &str, op: &str, fields: &str) {
        let line = format!(
            "{} {} {thread} {seq} {phase} {op} {fields}\n",
            now_ns(),
            self.process
        );
        // One write() per record: O_APPEND places it whole at the end.
        let written = (&self.file)
            .write(line.as_bytes())
            .expect("append to the history");
        assert_eq!(written, line.len(), "a history record was written in part");
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The error kind, as `ErrorKind`'s Debug name.
    Fail(String),
    /// No completion record: the process died inside the call.
    Unknown,
}

/// One call: its invoke record paired with its completion, if any.
#[derive(Debug, Clone)]
pub struct Operation {
    pub process: String,
    pub op: String,
    pub invoked: i64,
    pub completed: Option<i64>,
    pub outcome: Outcome,
    /// The invoke's fields, then the completion's.
    fields: HashMap<String, String>,
}

impl Operation {
    pub fn new(process: &str, op: &str, invoked: i64, outcome: Outcome, fields: &str) -> Operation {
        Operation {
            process: process.to_owned(),
            op: op.to_owned(),
            invoked,
            completed: (outcome != Outcome::Unknown).then_some(invoked + 1),
            outcome,
            fields: parse_fields(fields),
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    pub fn num(&self, key: &str) -> Option<i64> {
        self.get(key).map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{key}={v} is not a number"))
        })
    }

    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    pub fn failed_with(&self, kind: &str) -> bool {
        self.outcome == Outcome::Fail(kind.to_owned())
    }
}

/// An `info` record.
#[derive(Debug, Clone)]
pub struct Event {
    pub time: i64,
    pub op: String,
    fields: HashMap<String, String>,
}

impl Event {
    pub fn new(time: i64, op: &str, fields: &str) -> Event {
        Event {
            time,
            op: op.to_owned(),
            fields: parse_fields(fields),
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }
}

/// Every history of a run.
#[derive(Default)]
pub struct Histories {
    /// In each process's order; processes one after another.
    pub ops: Vec<Operation>,
    pub events: Vec<Event>,
}

impl Histories {
    /// Reads every `*.log` file in `dir`.
    pub fn read(dir: &Path) -> Histories {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .expect("read the history directory")
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "log"))
            .collect();
        paths.sort();
        let mut all = Histories::default();
        for path in paths {
            all.read_file(&path);
        }
        all
    }

    /// The history of one process so far, to watch a child while it runs.
    pub fn read_process(dir: &Path, process: &str) -> Histories {
        let mut all = Histories::default();
        let path = dir.join(format!("{process}.log"));
        if path.exists() {
            all.read_file(&path);
        }
        all
    }

    /// The tasks this history's pulls were given, in order.
    pub fn delivered(&self) -> Vec<&Operation> {
        self.ops
            .iter()
            .filter(|op| op.op == "pull" && op.num("id").is_some())
            .collect()
    }

    /// The ids of the tasks this history's pulls were given, in order.
    pub fn delivered_ids(&self) -> Vec<i64> {
        self.delivered()
            .iter()
            .map(|op| op.num("id").expect("a delivered id"))
            .collect()
    }

    fn read_file(&mut self, path: &Path) {
        let text = std::fs::read_to_string(path).expect("read a history file");
        let complete = match text.rfind('\n') {
            Some(end) => &text[..=end],
            None => "",
        };
        let mut open: HashMap<(u32, u64), usize> = HashMap::new();
        for line in complete.lines() {
            let mut parts = line.splitn(7, ' ');
            let mut next = || {
                parts
                    .next()
                    .unwrap_or_else(|| panic!("{}: bad line {line}", path.display()))
            };
            let time: i64 = next().parse().expect("a time");
            let process = next().to_owned();
            let thread: u32 = next().parse().expect("a thread");
            let seq: u64 = next().parse().expect("a sequence number");
            let phase = next().to_owned();
            let op = next().to_owned();
            let fields = parse_fields(parts.next().unwrap_or(""));
            match phase.as_str() {
                "invoke" => {
                    open.insert((thread, seq), self.ops.len());
                    self.ops.push(Operation {
                        process,
                        op,
                        invoked: time,
                        completed: None,
                        outcome: Outcome::Unknown,
                        fields,
                    });
                }
                "ok" | "fail" => {
                    let index = open.remove(&(thread, seq)).unwrap_or_else(|| {
                        panic!("{}: completion without invoke: {line}", path.display())
                    });
                    let operation = &mut self.ops[index];
                    operation.completed = Some(time);
                    operation.outcome = if phase == "ok" {
                        Outcome::Ok
                    } else {
                        Outcome::Fail(fields.get("err").cloned().unwrap_or_default())
                    };
                    operation.fields.extend(fields);
                }
                "info" => self.events.push(Event { time, op, fields }),
                other => panic!("{}: unknown phase {other}", path.display()),
            }
        }
        let calls = std::mem::take(&mut self.ops);
        self.ops = calls.into_iter().flat_map(split_finish_pull).collect();
    }

    /// When the driver had reaped each process it killed and reaped
    /// (`reaped target=P` events).
    pub fn reaped(&self) -> HashMap<String, i64> {
        self.events
            .iter()
            .filter(|e| e.op == "reaped")
            .map(|e| {
                (
                    e.get("target").expect("reaped names its target").to_owned(),
                    e.time,
                )
            })
            .collect()
    }

    /// When each process was killed (the driver's `kill target=P` events).
    pub fn kills(&self) -> HashMap<String, i64> {
        let mut kills = HashMap::new();
        for event in self.events.iter().filter(|e| e.op == "kill") {
            let target = event
                .get("target")
                .expect("kill names its target")
                .to_owned();
            kills.entry(target).or_insert(event.time);
        }
        kills
    }
}

/// A `finish_pull` call as its finish and its pull (see the module's
/// comment); any other call as it is.
fn split_finish_pull(call: Operation) -> Vec<Operation> {
    if call.op != "finish_pull" {
        return vec![call];
    }
    let pick = |keys: &[(&str, &str)]| -> HashMap<String, String> {
        keys.iter()
            .filter_map(|(from, to)| Some((to.to_string(), call.fields.get(*from)?.clone())))
            .collect()
    };
    let finish = Operation {
        op: "finish".to_owned(),
        fields: pick(&[
            ("id", "id"),
            ("attempt", "attempt"),
            ("queue", "queue"),
            ("err", "err"),
        ]),
        ..call.clone()
    };
    if matches!(call.outcome, Outcome::Fail(_)) {
        return vec![finish];
    }
    let pull = Operation {
        op: "pull".to_owned(),
        fields: pick(&[
            ("lease", "lease"),
            ("queue", "queue"),
            ("next_id", "id"),
            ("next_attempt", "attempt"),
            ("next_max", "max"),
            ("next_key", "key"),
            ("next_sum", "sum"),
        ]),
        ..call
    };
    vec![finish, pull]
}

fn parse_fields(text: &str) -> HashMap<String, String> {
    text.split_whitespace()
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key.to_owned(), value.to_owned())
        })
        .collect()
}
