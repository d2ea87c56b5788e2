//! Waking pulls that wait for a task.
//!
//! Design: `docs/internals.md`, "Waking pulls in a process".

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::registry::Registry;

/// How often a waiter checks for writes from other processes when nothing
/// rings for them: a push from another process then wakes a waiter within
/// this time. Used only by a process that could not map the wake words:
/// a delay below human notice, for 50 reads of the change counter a second
/// per waiter (`bench/batches.rs` measures the wake-up of waiting pulls).
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Wakes the threads of this process waiting on one queue of one file.
#[derive(Debug, Default)]
pub(crate) struct Bell {
    state: Mutex<BellState>,
    rung: Condvar,
}

#[derive(Debug, Default)]
struct BellState {
    /// Bumped by every ring, so a waiter can tell it was rung while it was
    /// busy trying to claim.
    rings: u64,
    /// Threads asleep in [`Bell::sleep`]: with none, a ring makes no
    /// system call (every push rings).
    sleepers: usize,
}

/// The bells of the queues open in this process, by the device and inode
/// of their file and their name: two paths to one file share its bells,
/// and one file's bells are found together.
static BELLS: Registry<BellKey, Bell> = Registry::new();

/// A file's device and inode numbers, and a queue's name.
type BellKey = ((u64, u64), String);

impl Bell {
    /// The bell of the queue named `queue` in the file with this device
    /// and inode number; fails only in a child forked while another thread
    /// was inside a tq call (see `global_lock.rs`).
    pub(crate) fn for_queue(file_id: (u64, u64), queue: &str) -> Result<Arc<Bell>> {
        let key = (file_id, queue.to_owned());
        match BELLS.find(&key)? {
            Some(bell) => Ok(bell),
            None => BELLS.adopt(key, Arc::new(Bell::default())),
        }
    }

    /// Rings the bells of the queues of the file `file_id` for which
    /// `rung` says so; fails as [`Bell::for_queue`] does.
    pub(crate) fn ring_queues(file_id: (u64, u64), rung: impl Fn(&str) -> bool) -> Result<()> {
        let bells = BELLS.entries()?;
        let of_file = bells
            .range((file_id, String::new())..)
            .take_while(|((file, _), _)| *file == file_id);
        for ((_, queue), bell) in of_file {
            if rung(queue) {
                if let Some(bell) = bell.upgrade() {
                    bell.ring();
                }
            }
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, BellState> {
        // Only counters are guarded, each changed in one step.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes every waiter.
    pub(crate) fn ring(&self) {
        let mut state = self.lock();
        state.rings += 1;
        if state.sleepers > 0 {
            self.rung.notify_all();
        }
    }

    /// How many times the bell has rung so far.
    pub(crate) fn rings(&self) -> u64 {
        self.lock().rings
    }

    /// Sleeps until the bell rings after `seen` rings, `stop` says to stop,
    /// or `until` passes. Checking under the bell's lock means a ring or a
    /// stop that comes just before the sleep is not missed.
    pub(crate) fn sleep(&self, seen: u64, until: Instant, stop: impl Fn() -> bool) {
        let mut state = self.lock();
        while state.rings == seen && !stop() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            state.sleepers += 1;
            state = self
                .rung
                .wait_timeout(state, until - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
            state.sleepers -= 1;
        }
    }
}

/// Ends the waits of the pulls it is given to (see
/// [`crate::PullOptions::cancel_token`]), from any thread. Clones share one
/// token. Cancelling is permanent: a cancelled token ends every later wait
/// at once too, so use a new token for each operation to cancel.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    cancelled: AtomicBool,
    /// The bells of the pulls waiting with this token.
    waiting_on: Mutex<Vec<Arc<Bell>>>,
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends every wait using this token, now and later: the pull returns
    /// [`crate::ErrorKind::Interrupted`].
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        let bells = self.waiting_on().clone();
        for bell in bells {
            bell.ring();
        }
    }

    /// Whether [`CancelToken::cancel`] has been called.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Makes `cancel` ring `bell` while the returned guard lives.
    pub(crate) fn watch(&self, bell: &Arc<Bell>) -> impl Drop + '_ {
        self.waiting_on().push(Arc::clone(bell));
        Watch {
            token: self,
            bell: Arc::clone(bell),
        }
    }

    fn waiting_on(&self) -> MutexGuard<'_, Vec<Arc<Bell>>> {
        self.0
            .waiting_on
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct Watch<'a> {
    token: &'a CancelToken,
    bell: Arc<Bell>,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut bells = self.token.waiting_on();
        if let Some(at) = bells.iter().position(|bell| Arc::ptr_eq(bell, &self.bell)) {
            bells.swap_remove(at);
        }
    }
}

impl PartialEq for CancelToken {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CancelToken {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn a_ring_wakes_a_sleeper_and_an_early_ring_is_not_missed() {
        let bell = Arc::new(Bell::default());
        let seen = bell.rings();
        bell.ring();
        let started = Instant::now();
        bell.sleep(seen, started + Duration::from_secs(10), || false);
        assert!(started.elapsed() < Duration::from_secs(5));

        let seen = bell.rings();
        let ringer = {
            let bell = Arc::clone(&bell);
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50));
                bell.ring();
            })
        };
        bell.sleep(seen, Instant::now() + Duration::from_secs(10), || false);
        assert!(started.elapsed() < Duration::from_secs(5));
        ringer.join().unwrap();
    }

    #[test]
    fn cancel_wakes_the_sleepers_watching_the_token() {
        let bell = Bell::for_queue((u64::MAX, 1), "default").unwrap();
        let token = CancelToken::new();
        let canceller = {
            let token = token.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50));
                token.cancel();
            })
        };
        let started = Instant::now();
        {
            let _watch = token.watch(&bell);
            let seen = bell.rings();
            bell.sleep(seen, started + Duration::from_secs(10), || {
                token.is_cancelled()
            });
        }
        assert!(token.is_cancelled());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(token.waiting_on().is_empty());
        canceller.join().unwrap();
    }
}
