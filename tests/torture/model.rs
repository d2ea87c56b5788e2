//! The checker for power loss. A power-loss child is one process with one
//! thread, so its history is the order of its commits; the database after
//! the power fails must be the state that some *prefix* of those commits
//! builds. Durability says which prefixes count:
//! - at `full`, every acknowledged call survives: only the last call,
//!   whose outcome is unknown, may or may not have taken effect;
//! - at `normal`, any prefix: a suffix of recent commits may be missing,
//!   never one from the middle (a hole), and never a state no prefix gives.
//!
//! Several runs on one file (a second power loss while recovering from the
//! first) chain: each run starts from a state some prefix of the runs
//! before it left, and its acknowledged answers must be consistent with
//! that state, which rules most prefixes out.
//!
//! The model replays tq's rules: ids increase by one (never reused), a
//! pull takes the oldest ready task (all tasks are due at once and leases
//! are long), a finish, fail or extend needs the current delivery, a fail
//! makes the task wait (its back-off outlasts the run) or, on its last
//! attempt, dead, recover frees the tasks of runs that are gone (dead when
//! that delivery was their last attempt).
//!
//! At `normal`, a checkpoint that answered complete has flushed every
//! commit before it: the prefixes that count start there.

use std::collections::BTreeMap;

use super::db::{Row, DEAD, DONE, LEASED, READY, WAITING};
use super::history::{Operation, Outcome};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Durable {
    /// `full`: every acknowledged call.
    All,
    /// `normal`: a prefix of the acknowledged calls.
    Prefix,
}

/// One process's calls, in order, and what its durability promises.
pub struct Run<'a> {
    pub ops: Vec<&'a Operation>,
    pub durable: Durable,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Task {
    key: String,
    state: i64,
    attempts: i64,
    max_attempts: i64,
    /// The run that holds it, when leased.
    holder: usize,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Model {
    tasks: BTreeMap<i64, Task>,
    /// The largest id ever given (`Queue::last_id`).
    last_id: i64,
}

/// How much of one run a state keeps.
#[derive(Clone, Copy, Debug)]
pub struct Kept {
    /// Acknowledged calls kept, of `acked`.
    pub kept: usize,
    pub acked: usize,
    /// The call of unknown outcome took effect.
    pub unknown: bool,
    /// Calls that a complete checkpoint had flushed (at `normal`, no
    /// prefix may keep fewer).
    pub flushed: usize,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}{}",
            self.kept,
            self.acked,
            if self.unknown { "+?" } else { "" }
        )
    }
}

fn describe(kept: &[Kept]) -> String {
    kept.iter()
        .map(Kept::to_string)
        .collect::<Vec<_>>()
        .join(" then ")
}

/// A state a run may have left, and how much of each run it keeps.
#[derive(Clone)]
struct Candidate {
    model: Model,
    kept: Vec<Kept>,
}

/// How much of each run survived, or the reason no prefix explains the
/// rows.
pub fn check(runs: &[Run], rows: &[Row], keep_history: bool) -> Result<Vec<Kept>, String> {
    let mut candidates = vec![Candidate {
        model: Model {
            tasks: BTreeMap::new(),
            last_id: 0,
        },
        kept: Vec::new(),
    }];
    for (index, run) in runs.iter().enumerate() {
        let mut next = Vec::new();
        let mut refusal = None;
        for start in &candidates {
            match ends(start, run, index, keep_history) {
                Ok(ends) => next.extend(ends),
                Err(why) => {
                    refusal.get_or_insert(why);
                }
            }
        }
        if next.is_empty() {
            return Err(format!(
                "run {index}: no state left by the runs before explains its answers: {}",
                refusal.unwrap_or_default()
            ));
        }
        // Of the prefixes that build one state, keep the longest: calls
        // that change nothing (an empty pull, the close) are not lost.
        let mut seen = std::collections::HashSet::new();
        next.reverse();
        next.retain(|c: &Candidate| seen.insert(c.model.clone()));
        next.reverse();
        candidates = next;
    }
    let stored: BTreeMap<i64, (&str, i64, i64)> = rows
        .iter()
        .map(|r| (r.id, (r.key.as_str(), r.state, r.attempts)))
        .collect();
    fn view(model: &Model) -> BTreeMap<i64, (&str, i64, i64)> {
        model
            .tasks
            .iter()
            .map(|(id, t)| (*id, (t.key.as_str(), t.state, t.attempts)))
            .collect()
    }
    if let Some(found) = candidates.iter().rev().find(|c| view(&c.model) == stored) {
        return Ok(found.kept.clone());
    }
    // No match: describe the difference from the state that keeps the most.
    let fullest = candidates.last().expect("at least one candidate");
    let expected = view(&fullest.model);
    let mut diff = Vec::new();
    for (id, (key, state, attempts)) in &expected {
        match stored.get(id) {
            None => diff.push(format!(
                "lost: task {id} ({key}, state {state}, attempts {attempts})"
            )),
            Some(row) if row != &(*key, *state, *attempts) => diff.push(format!(
                "changed: task {id} expected {:?}, stored {row:?}",
                (key, state, attempts)
            )),
            Some(_) => {}
        }
    }
    for (id, row) in &stored {
        if !expected.contains_key(id) {
            diff.push(format!("unexpected: task {id} {row:?}"));
        }
    }
    Err(format!(
        "the database is no state that a {} of the histories builds; against all of them ({}):\n  {}",
        if runs.iter().any(|r| r.durable == Durable::Prefix) { "prefix" } else { "complete run" },
        describe(&fullest.kept),
        diff.join("\n  ")
    ))
}

/// The states `run` may leave from `start`.
fn ends(
    start: &Candidate,
    run: &Run,
    index: usize,
    keep_history: bool,
) -> Result<Vec<Candidate>, String> {
    let (last, acked) = match run.ops.split_last() {
        Some((last, rest)) if last.outcome == Outcome::Unknown => (Some(*last), rest),
        _ => (None, &run.ops[..]),
    };
    assert!(
        acked.iter().all(|op| op.outcome != Outcome::Unknown),
        "only a run's last call can be of unknown outcome"
    );
    let mut model = start.model.clone();
    // A prefix keeps at least every call up to the last complete checkpoint.
    let flushed = acked
        .iter()
        .rposition(|op| op.op == "checkpoint" && op.get("complete") == Some("1"))
        .map_or(0, |at| at + 1);
    let with = |kept: usize, unknown: bool| -> Vec<Kept> {
        let mut list = start.kept.clone();
        list.push(Kept {
            kept,
            acked: acked.len(),
            unknown,
            flushed,
        });
        list
    };
    let mut out = Vec::new();
    if run.durable == Durable::Prefix && flushed == 0 {
        out.push(Candidate {
            model: model.clone(),
            kept: with(0, false),
        });
    }
    for (i, op) in acked.iter().enumerate() {
        model.apply(op, index, keep_history)?;
        if run.durable == Durable::Prefix && i + 1 < acked.len() && i + 1 >= flushed {
            out.push(Candidate {
                model: model.clone(),
                kept: with(i + 1, false),
            });
        }
    }
    if run.durable == Durable::All || !acked.is_empty() {
        out.push(Candidate {
            model: model.clone(),
            kept: with(acked.len(), false),
        });
    }
    if let Some(op) = last {
        let mut applied = model.clone();
        if applied.apply_unknown(op, index, keep_history) {
            out.push(Candidate {
                model: applied,
                kept: with(acked.len(), true),
            });
        }
    }
    Ok(out)
}

impl Model {
    /// The oldest ready task.
    fn first_pending(&self) -> Option<i64> {
        self.tasks
            .iter()
            .find(|(_, t)| t.state == READY)
            .map(|(id, _)| *id)
    }

    fn held_by(&self, id: i64, attempt: i64, run: usize) -> bool {
        self.tasks
            .get(&id)
            .is_some_and(|t| t.state == LEASED && t.attempts == attempt && t.holder == run)
    }

    fn push(&mut self, op: &Operation) {
        self.last_id += 1;
        let max_attempts = op.num("max").unwrap_or(i64::from(tq::DEFAULT_MAX_ATTEMPTS));
        self.tasks.insert(
            self.last_id,
            Task {
                key: op.get("key").unwrap().to_owned(),
                state: READY,
                attempts: 0,
                max_attempts,
                holder: 0,
            },
        );
    }

    fn claim(&mut self, id: i64, run: usize) {
        let task = self.tasks.get_mut(&id).expect("a pending task");
        task.attempts += 1;
        task.state = LEASED;
        task.holder = run;
    }

    fn finish(&mut self, id: i64, keep_history: bool) {
        if keep_history {
            let task = self.tasks.get_mut(&id).expect("held");
            task.state = DONE;
        } else {
            self.tasks.remove(&id);
        }
    }

    /// Ends a held task's delivery as failed; true when it is now dead.
    fn fail(&mut self, id: i64) -> bool {
        let task = self.tasks.get_mut(&id).expect("held");
        let dead = task.attempts >= task.max_attempts;
        task.state = if dead { DEAD } else { WAITING };
        dead
    }

    fn release_dead(&mut self, run: usize) -> i64 {
        let mut released = 0;
        for task in self
            .tasks
            .values_mut()
            .filter(|t| t.state == LEASED && t.holder != run)
        {
            task.state = if task.attempts >= task.max_attempts {
                DEAD
            } else {
                READY
            };
            released += 1;
        }
        released
    }

    /// Whether a call on a delivery (finish, fail, extend) answered as the
    /// model says: accepted exactly when the delivery is current.
    fn judge(&self, op: &Operation, run: usize) -> Result<bool, String> {
        let (id, attempt) = (op.num("id").unwrap(), op.num("attempt").unwrap());
        match (self.held_by(id, attempt, run), op.is_ok()) {
            (held, accepted) if held == accepted => Ok(held),
            (true, _) => Err(format!(
                "{} of task {id} was refused, but its delivery was current",
                op.op
            )),
            (false, _) => Err(format!(
                "{} of task {id} was accepted, but it was not held",
                op.op
            )),
        }
    }

    /// Applies an answered call; an answer the model cannot give is an
    /// error.
    fn apply(&mut self, op: &Operation, run: usize, keep_history: bool) -> Result<(), String> {
        let failed = !op.is_ok();
        match op.op.as_str() {
            "open" | "close" | "checkpoint" => Ok(()),
            _ if failed && !op.failed_with("NotHeld") => Ok(()), // changed nothing
            "push" => {
                let id = op.num("id").expect("a push answers its id");
                if id != self.last_id + 1 {
                    return Err(format!(
                        "push of {} got id {id}, the next id is {}",
                        op.get("key").unwrap(),
                        self.last_id + 1
                    ));
                }
                self.push(op);
                Ok(())
            }
            "pull" => match (op.num("id"), self.first_pending()) {
                (None, None) => Ok(()),
                (Some(id), Some(first)) if id == first => {
                    let task = &self.tasks[&id];
                    if op.num("attempt") != Some(task.attempts + 1) {
                        return Err(format!(
                            "pull of task {id} answered attempt {:?}, expected {}",
                            op.num("attempt"),
                            task.attempts + 1
                        ));
                    }
                    self.claim(id, run);
                    Ok(())
                }
                (got, first) => Err(format!(
                    "pull answered {got:?}, the oldest pending task is {first:?}"
                )),
            },
            "finish" => {
                if self.judge(op, run)? {
                    self.finish(op.num("id").unwrap(), keep_history);
                }
                Ok(())
            }
            "fail" => {
                if self.judge(op, run)? {
                    let id = op.num("id").unwrap();
                    if self.fail(id) != op.get("dead").is_some() {
                        return Err(format!(
                            "fail of task {id} answered {}, but the model says otherwise",
                            if op.get("dead").is_some() {
                                "dead"
                            } else {
                                "a retry"
                            }
                        ));
                    }
                }
                Ok(())
            }
            "extend" => self.judge(op, run).map(|_| ()),
            "recover" => {
                let released = self.release_dead(run);
                if Some(released) != op.num("n") {
                    return Err(format!(
                        "recover answered {:?}, the runs that are gone held {released}",
                        op.num("n")
                    ));
                }
                Ok(())
            }
            other => panic!("the model has no rule for {other}"),
        }
    }

    /// Applies a call of unknown outcome as if it committed; false when
    /// it would change nothing.
    fn apply_unknown(&mut self, op: &Operation, run: usize, keep_history: bool) -> bool {
        let held = || self.held_by(op.num("id").unwrap(), op.num("attempt").unwrap(), run);
        match op.op.as_str() {
            "push" => {
                self.push(op);
                true
            }
            "pull" => match self.first_pending() {
                Some(id) => {
                    self.claim(id, run);
                    true
                }
                None => false,
            },
            "finish" if held() => {
                self.finish(op.num("id").unwrap(), keep_history);
                true
            }
            "fail" if held() => {
                self.fail(op.num("id").unwrap());
                true
            }
            "recover" => self.release_dead(run) > 0,
            _ => false,
        }
    }
}
