//! Group commit: writes that arrive together share one transaction, and so
//! one flush of the disk.
//!
//! A thread with a write queues it. If no thread is writing, it becomes the
//! leader: it takes every queued write, runs them all in one transaction
//! and hands each its result. Writes that arrive meanwhile wait for the
//! leader to finish, then one of their threads leads the next group. A
//! thread alone leads a group of one at once: nothing ever waits for
//! company. Each write still returns only once the transaction holding it
//! has committed.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::{Error, ErrorKind, Result};

pub(super) struct Group<Op, Out> {
    state: Mutex<State<Op, Out>>,
    /// Signalled when a group is done: its writers take their results, and
    /// one of the others leads next.
    done: Condvar,
}

struct State<Op, Out> {
    queued: Vec<Arc<Request<Op, Out>>>,
    leading: bool,
}

/// One write: its operation until a leader takes it, then its result.
struct Request<Op, Out> {
    slot: Mutex<(Option<Op>, Option<Result<Out>>)>,
}

impl<Op, Out> Request<Op, Out> {
    fn slot(&self) -> MutexGuard<'_, (Option<Op>, Option<Result<Out>>)> {
        self.slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<Op, Out> Default for Group<Op, Out> {
    fn default() -> Self {
        Group {
            state: Mutex::new(State {
                queued: Vec::new(),
                leading: false,
            }),
            done: Condvar::new(),
        }
    }
}

impl<Op, Out> Group<Op, Out> {
    fn state(&self) -> MutexGuard<'_, State<Op, Out>> {
        // The state is a list and a flag, each changed in one step: a
        // panic cannot leave them half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `op` in the next group and returns its result. `run` runs a
    /// whole group in one transaction and returns one result per operation,
    /// in order; whichever thread leads calls it.
    pub(super) fn submit(&self, op: Op, run: impl Fn(Vec<Op>) -> Vec<Result<Out>>) -> Result<Out> {
        let request = Arc::new(Request {
            slot: Mutex::new((Some(op), None)),
        });
        let mut state = self.state();
        state.queued.push(Arc::clone(&request));
        loop {
            if let Some(result) = request.slot().1.take() {
                return result;
            }
            if state.leading {
                state = self
                    .done
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            state.leading = true;
            let group = std::mem::take(&mut state.queued);
            drop(state);
            let outcome = catch_unwind(AssertUnwindSafe(|| self.lead(&group, &run)));
            state = self.state();
            state.leading = false;
            self.done.notify_all();
            if let Err(panic) = outcome {
                // The others get an error; this thread carries the panic.
                for request in &group {
                    let mut slot = request.slot();
                    if slot.1.is_none() {
                        slot.1 = Some(Err(Error::new(
                            ErrorKind::Internal,
                            "the write was lost to a panic in the thread committing it",
                        )));
                    }
                }
                drop(state);
                resume_unwind(panic);
            }
        }
    }

    fn lead(&self, group: &[Arc<Request<Op, Out>>], run: &impl Fn(Vec<Op>) -> Vec<Result<Out>>) {
        let ops = group
            .iter()
            .map(|request| {
                request
                    .slot()
                    .0
                    .take()
                    .expect("a queued write has its operation")
            })
            .collect();
        let results = run(ops);
        assert_eq!(results.len(), group.len(), "one result per write");
        for (request, result) in group.iter().zip(results) {
            request.slot().1 = Some(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;
    use std::time::Duration;

    #[test]
    fn a_lone_write_runs_at_once_in_a_group_of_its_own() {
        let group = Group::<u32, u32>::default();
        let sizes = Mutex::new(Vec::new());
        let result = group.submit(7, |ops| {
            sizes.lock().unwrap().push(ops.len());
            ops.into_iter().map(|op| Ok(op * 2)).collect()
        });
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
                    group.submit(n, |ops| {
                        groups.fetch_add(1, Ordering::SeqCst);
                        // A slow commit, during which the others queue up.
                        thread::sleep(Duration::from_millis(20));
                        ops.into_iter()
                            .map(|op| {
                                if op == 3 {
                                    Err(Error::invalid_argument("three"))
                                } else {
                                    Ok(op + 100)
                                }
                            })
                            .collect()
                    })
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
    fn a_panic_while_leading_reaches_its_thread_and_fails_the_rest_of_its_group() {
        let group = Group::<u32, u32>::default();
        let panicked = catch_unwind(AssertUnwindSafe(|| group.submit(1, |_| panic!("boom"))));
        assert!(panicked.is_err());
        // The group is usable afterwards.
        assert_eq!(
            group
                .submit(2, |ops| ops.into_iter().map(Ok).collect())
                .unwrap(),
            2
        );
    }
}
