//! Concurrent calls of one kind on one handle share a statement: the
//! claims (or finishes) of a process's workers arriving together go to the
//! server as one, and each caller still gets its own result.
//!
//! A thread with a call queues it. If no thread is leading, it leads: it
//! takes every queued call, runs them all as one statement, gives up the
//! lead (waking the first call queued meanwhile, which leads next), and
//! hands each call of its group its result. So at most one statement of a
//! kind is in flight per handle, and the calls that arrive while it runs
//! make up the next one. Before it takes the queue, a leader yields the
//! processor once if other threads are in the middle of a call, so that
//! threads just handed their last results queue their next calls into its
//! group. A thread alone leads at once: nothing ever waits for company, or
//! on a timer. A result is handed out only once the statement that
//! produced it has committed.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;

use crate::error::{Error, ErrorKind, Result};

pub(super) struct Coalescer<Op, Out> {
    state: Mutex<State<Op, Out>>,
    /// Threads in [`Coalescer::submit`], queued, leading or returning.
    inside: AtomicUsize,
}

/// A thread counted in [`Coalescer::submit`], until dropped.
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

struct State<Op, Out> {
    queued: Vec<Arc<Request<Op, Out>>>,
    /// A thread is leading: it runs a group or is about to.
    leading: bool,
}

/// One call, and what its thread waits for.
struct Request<Op, Out> {
    slot: Mutex<Slot<Op, Out>>,
    /// Wakes the call's thread (and only it): its result is in, or it may
    /// lead.
    woken: Condvar,
}

struct Slot<Op, Out> {
    /// The call, until a leader takes it.
    op: Option<Op>,
    /// The lead was given up while this call was first in the queue.
    may_lead: bool,
    result: Option<Result<Out>>,
}

impl<Op, Out> Request<Op, Out> {
    fn slot(&self) -> MutexGuard<'_, Slot<Op, Out>> {
        // Each change is one assignment: a panic cannot leave half of one.
        self.slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands the call its result and wakes its thread.
    fn finish(&self, result: Result<Out>) {
        self.slot().result = Some(result);
        self.woken.notify_one();
    }
}

impl<Op, Out> Default for Coalescer<Op, Out> {
    fn default() -> Self {
        Coalescer {
            state: Mutex::new(State {
                queued: Vec::new(),
                leading: false,
            }),
            inside: AtomicUsize::new(0),
        }
    }
}

impl<Op, Out> Coalescer<Op, Out> {
    fn state(&self) -> MutexGuard<'_, State<Op, Out>> {
        // A list and a flag, each changed in one step.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `op` with the calls that arrive with it and returns its result.
    /// Whichever thread leads the group calls `run` with all of its calls,
    /// in the order they came, and `run` returns one result per call, in
    /// that order.
    pub(super) fn submit(
        &self,
        op: Op,
        run: impl FnOnce(Vec<Op>) -> Vec<Result<Out>>,
    ) -> Result<Out> {
        let _inside = Inside::enter(&self.inside);
        let request = Arc::new(Request {
            slot: Mutex::new(Slot {
                op: Some(op),
                may_lead: false,
                result: None,
            }),
            woken: Condvar::new(),
        });
        let follows = {
            let mut state = self.state();
            state.queued.push(Arc::clone(&request));
            std::mem::replace(&mut state.leading, true)
        };
        if follows {
            let mut slot = request.slot();
            loop {
                if let Some(result) = slot.result.take() {
                    return result;
                }
                if slot.may_lead {
                    break;
                }
                slot = request
                    .woken
                    .wait(slot)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
        if self.inside.load(Ordering::SeqCst) > 1 {
            thread::yield_now();
        }
        let group = std::mem::take(&mut self.state().queued);
        let ops = group
            .iter()
            .map(|queued| queued.slot().op.take().expect("taken by one leader only"))
            .collect();
        let outcome = catch_unwind(AssertUnwindSafe(|| run(ops)));
        {
            let mut state = self.state();
            match state.queued.first() {
                Some(next) => {
                    next.slot().may_lead = true;
                    next.woken.notify_one();
                }
                None => state.leading = false,
            }
        }
        match outcome {
            Ok(results) => {
                debug_assert_eq!(results.len(), group.len());
                for (queued, result) in group.iter().zip(results) {
                    queued.finish(result);
                }
            }
            Err(panic) => {
                for queued in &group {
                    queued.finish(Err(Error::new(
                        ErrorKind::Internal,
                        "the call that ran this one with others panicked",
                    )));
                }
                resume_unwind(panic);
            }
        }
        let result = request.slot().result.take();
        result.expect("a leader's group holds its own call")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    #[test]
    fn each_caller_gets_its_own_result_and_calls_arriving_together_share_a_run() {
        const THREADS: usize = 8;
        const CALLS: usize = 200;
        let coalescer = Coalescer::<usize, usize>::default();
        let runs = AtomicUsize::new(0);
        let start = Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let (coalescer, runs, start) = (&coalescer, &runs, &start);
                scope.spawn(move || {
                    start.wait();
                    for call in 0..CALLS {
                        let op = thread * CALLS + call;
                        let out = coalescer.submit(op, |ops| {
                            runs.fetch_add(1, Ordering::SeqCst);
                            // Long enough that other threads queue meanwhile.
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            ops.into_iter().map(|op| Ok(op * 2)).collect()
                        });
                        assert_eq!(out.unwrap(), op * 2);
                    }
                });
            }
        });
        let runs = runs.load(Ordering::SeqCst);
        assert!(
            runs < THREADS * CALLS,
            "{runs} runs for {} calls: none was shared",
            THREADS * CALLS
        );
    }

    #[test]
    fn an_error_reaches_every_call_of_its_group_and_the_next_group_runs() {
        let coalescer = Coalescer::<u32, u32>::default();
        let err = coalescer
            .submit(1, |ops| {
                ops.iter()
                    .map(|_| Err(Error::new(ErrorKind::Io, "lost")))
                    .collect()
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Io);
        assert_eq!(
            coalescer
                .submit(2, |ops| ops.into_iter().map(Ok).collect())
                .unwrap(),
            2
        );
    }
}
