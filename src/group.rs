//! Group commit: writes that arrive together share one transaction (on
//! SQLite, and so one flush of the disk), or one statement (on PostgreSQL:
//! the claims or finishes of a handle's threads), and each caller still
//! gets its own result.
//!
//! Design: `docs/internals.md`, "Group commit".

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;

use crate::error::{Error, ErrorKind, Result};

pub(crate) struct Group<Op, Out> {
    state: Mutex<GroupState<Op, Out>>,
    /// Threads in [`Group::submit`], whether queued, leading, or woken and
    /// not yet returned.
    inside: AtomicUsize,
}

/// A thread counted in [`Group::submit`], until dropped.
struct Inside<'a>(&'a AtomicUsize);

impl<'a> Inside<'a> {
    fn enter(count: &'a AtomicUsize) -> Inside<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Inside(count)
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The writes waiting for a leader, and whether one leads.
struct GroupState<Op, Out> {
    queued: Vec<Arc<Request<Op, Out>>>,
    /// A thread is leading: it runs a group or is about to.
    leading: bool,
}

/// One write, and what its thread waits for.
struct Request<Op, Out> {
    handover: Mutex<Handover<Op, Out>>,
    /// Wakes the write's thread (and only it): its result is in, or it may
    /// lead.
    woken: Condvar,
}

/// What passes between a write's thread and its leader: the operation
/// one way, the result (or the lead) the other.
struct Handover<Op, Out> {
    /// The operation, until a leader takes it.
    op: Option<Op>,
    /// The lead was given up while this write was first in the queue.
    may_lead: bool,
    result: Option<Result<Out>>,
}

impl<Op, Out> Request<Op, Out> {
    fn handover(&self) -> MutexGuard<'_, Handover<Op, Out>> {
        // Each change is one assignment: a panic cannot leave half of one.
        self.handover
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands the request its result and wakes its thread.
    fn finish(&self, result: Result<Out>) {
        self.handover().result = Some(result);
        self.woken.notify_one();
    }
}

impl<Op, Out> Default for Group<Op, Out> {
    fn default() -> Self {
        Group {
            state: Mutex::new(GroupState {
                queued: Vec::new(),
                leading: false,
            }),
            inside: AtomicUsize::new(0),
        }
    }
}

impl<Op, Out> Group<Op, Out> {
    fn state(&self) -> MutexGuard<'_, GroupState<Op, Out>> {
        // The state is a list and a flag, each changed in one step.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `op` in the next group and returns its result.
    ///
    /// Whichever thread leads the group calls `run`, which runs the whole
    /// group in one transaction and returns one result per operation, in
    /// order, with what the group needs to settle; then, once the next
    /// group may start, `settle` with that. When settling fails, every
    /// operation of the group that succeeded gets its error instead.
    pub(crate) fn submit<C>(
        &self,
        op: Op,
        run: impl FnOnce(Vec<Op>) -> (Vec<Result<Out>>, C),
        settle: impl FnOnce(C) -> Result<()>,
    ) -> Result<Out> {
        let _inside = Inside::enter(&self.inside);
        let request = Arc::new(Request {
            handover: Mutex::new(Handover {
                op: Some(op),
                may_lead: false,
                result: None,
            }),
            woken: Condvar::new(),
        });
        let leads_now = {
            let mut state = self.state();
            state.queued.push(Arc::clone(&request));
            !std::mem::replace(&mut state.leading, true)
        };
        if !leads_now {
            if let Some(result) = self.wait_for_result_or_lead(&request) {
                return result;
            }
        }
        let group = self.lead(run, settle, &request);
        hand_out(group, &request)
    }

    /// Waits, as a write that another thread leads, until the write's
    /// result is in (`Some`) or this thread is to lead (`None`, having
    /// taken the lead).
    fn wait_for_result_or_lead(&self, request: &Request<Op, Out>) -> Option<Result<Out>> {
        let mut handover = request.handover();
        loop {
            if let Some(result) = handover.result.take() {
                return Some(result);
            }
            if std::mem::take(&mut handover.may_lead) {
                drop(handover);
                // Still queued, and no one leads: this thread does. (An
                // operation is taken only while its leader leads.)
                let mut state = self.state();
                if !state.leading && request.handover().op.is_some() {
                    state.leading = true;
                    return None;
                }
                drop(state);
                handover = request.handover();
                continue;
            }
            handover = request
                .woken
                .wait(handover)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Takes every queued write (`own` among them), runs them as one
    /// group, passes the lead on, settles the group, and returns each write
    /// with its result. On a panic, the other writes get an error and this
    /// thread carries the panic on.
    fn lead<C>(
        &self,
        run: impl FnOnce(Vec<Op>) -> (Vec<Result<Out>>, C),
        settle: impl FnOnce(C) -> Result<()>,
        own: &Arc<Request<Op, Out>>,
    ) -> Settled<Op, Out> {
        // Threads that are ready to run (woken by the last group, about to
        // queue their next write) get to queue it first, so they join this
        // group rather than trickling into groups of one behind it. A
        // thread alone does not yield at all.
        if self.inside.load(Ordering::SeqCst) > 1 {
            thread::yield_now();
        }
        let group = std::mem::take(&mut self.state().queued);
        let mut lead_passed = false;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let ops = group
                .iter()
                .map(|request| {
                    request
                        .handover()
                        .op
                        .take()
                        .expect("a queued write has its operation")
                })
                .collect();
            let (results, settlement) = run(ops);
            assert_eq!(results.len(), group.len(), "one result per write");
            self.pass_lead();
            lead_passed = true;
            match settle(settlement) {
                Ok(()) => results,
                Err(err) => results
                    .into_iter()
                    .map(|result| result.and(Err(err.clone())))
                    .collect(),
            }
        }));
        match outcome {
            Ok(results) => group.into_iter().zip(results).collect(),
            Err(panic) => {
                if !lead_passed {
                    self.pass_lead();
                }
                for other in group.iter().filter(|other| !Arc::ptr_eq(other, own)) {
                    other.finish(Err(Error::new(
                        ErrorKind::Internal,
                        "the write was lost to a panic in the thread committing it",
                    )));
                }
                resume_unwind(panic);
            }
        }
    }

    /// [`Group::submit`] for a group that has nothing to settle once it is
    /// committed: `run` commits it, and each call gets its result then.
    #[cfg(feature = "postgres")]
    pub(crate) fn submit_committed(
        &self,
        op: Op,
        run: impl FnOnce(Vec<Op>) -> Vec<Result<Out>>,
    ) -> Result<Out> {
        self.submit(op, |ops| (run(ops), ()), |()| Ok(()))
    }

    /// Ends this thread's lead, waking the thread of the first write
    /// queued meanwhile to lead next (unless a running thread arrives
    /// first and leads: it then takes that write into its group).
    fn pass_lead(&self) {
        let mut state = self.state();
        state.leading = false;
        if let Some(next) = state.queued.first() {
            next.handover().may_lead = true;
            next.woken.notify_one();
        }
    }
}

/// The writes of a group that ran, each with its result.
type Settled<Op, Out> = Vec<(Arc<Request<Op, Out>>, Result<Out>)>;

/// Gives each write of a led group its result, waking its thread, and
/// returns the leader's own (`own`).
fn hand_out<Op, Out>(group: Settled<Op, Out>, own: &Arc<Request<Op, Out>>) -> Result<Out> {
    let mut own_result = None;
    for (request, result) in group {
        if Arc::ptr_eq(&request, own) {
            own_result = Some(result);
        } else {
            request.finish(result);
        }
    }
    own_result.expect("the leader's own write is in its group")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::time::Duration;

    /// A group whose every write succeeds with its own value.
    fn each_ok(ops: Vec<u32>) -> (Vec<Result<u32>>, ()) {
        (ops.into_iter().map(Ok).collect(), ())
    }

    fn settled((): ()) -> Result<()> {
        Ok(())
    }

    fn flush_failed((): ()) -> Result<()> {
        Err(Error::new(ErrorKind::UnknownOutcome, "the flush failed"))
    }

    #[test]
    fn a_lone_write_runs_at_once_in_a_group_of_its_own() {
        let group = Group::<u32, u32>::default();
        let sizes = Mutex::new(Vec::new());
        let result = group.submit(
            7,
            |ops| {
                sizes.lock().unwrap().push(ops.len());
                (ops.into_iter().map(|op| Ok(op * 2)).collect(), ())
            },
            settled,
        );
        assert_eq!(result.unwrap(), 14);
        assert_eq!(*sizes.lock().unwrap(), [1]);
    }

    #[test]
    fn writes_arriving_during_a_group_share_the_next_one_and_each_gets_its_result() {
        let group = Arc::new(Group::<u32, u32>::default());
        let groups = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..16)
            .map(|n| {
                let group = Arc::clone(&group);
                let groups = Arc::clone(&groups);
                thread::spawn(move || {
                    group.submit(
                        n,
                        |ops| {
                            groups.fetch_add(1, Ordering::SeqCst);
                            // A slow commit, during which the others queue up.
                            thread::sleep(Duration::from_millis(20));
                            let results = ops
                                .into_iter()
                                .map(|op| {
                                    if op == 3 {
                                        Err(Error::invalid_argument("three"))
                                    } else {
                                        Ok(op + 100)
                                    }
                                })
                                .collect();
                            (results, ())
                        },
                        settled,
                    )
                })
            })
            .collect();
        for (n, thread) in threads.into_iter().enumerate() {
            let result = thread.join().unwrap();
            if n == 3 {
                assert_eq!(result.unwrap_err().kind(), ErrorKind::InvalidArgument);
            } else {
                assert_eq!(result.unwrap(), n as u32 + 100);
            }
        }
        assert!(
            groups.load(Ordering::SeqCst) < 16,
            "some writes shared a group"
        );
    }

    #[test]
    fn the_next_group_commits_while_the_last_one_settles() {
        let group = Arc::new(Group::<u32, u32>::default());
        let settling = Arc::new(Barrier::new(2));
        let first = {
            let (group, settling) = (Arc::clone(&group), Arc::clone(&settling));
            thread::spawn(move || {
                group.submit(1, each_ok, |()| {
                    // Settles only once the second write has committed.
                    settling.wait();
                    settling.wait();
                    Ok(())
                })
            })
        };
        settling.wait();
        let second = group.submit(
            2,
            |ops| {
                settling.wait();
                each_ok(ops)
            },
            settled,
        );
        assert_eq!(second.unwrap(), 2);
        assert_eq!(first.join().unwrap().unwrap(), 1);
    }

    #[test]
    fn a_failed_settlement_fails_the_writes_that_succeeded() {
        let group = Group::<u32, u32>::default();
        let result = group.submit(1, each_ok, flush_failed);
        assert_eq!(result.unwrap_err().kind(), ErrorKind::UnknownOutcome);
        let failed = group.submit(
            1,
            |_| (vec![Err(Error::invalid_argument("bad"))], ()),
            flush_failed,
        );
        assert_eq!(failed.unwrap_err().kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn a_panic_while_leading_reaches_its_thread_and_fails_the_rest_of_its_group() {
        let group = Arc::new(Group::<u32, u32>::default());
        let entered = Arc::new(Barrier::new(2));
        let leader = {
            let (group, entered) = (Arc::clone(&group), Arc::clone(&entered));
            thread::spawn(move || {
                catch_unwind(AssertUnwindSafe(|| {
                    group.submit(
                        1,
                        |_| {
                            entered.wait();
                            // Let the other write queue behind this group.
                            thread::sleep(Duration::from_millis(50));
                            (Vec::new(), ())
                        },
                        settled,
                    )
                }))
                .is_err()
            })
        };
        entered.wait();
        // Queued during the group that panics: it leads the next one.
        let next = group.submit(2, each_ok, settled);
        assert!(leader.join().unwrap(), "the panic reached its thread");
        assert_eq!(next.unwrap(), 2);
        // The group is usable afterwards.
        assert_eq!(group.submit(3, each_ok, settled).unwrap(), 3);
    }
}
