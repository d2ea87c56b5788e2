//! Fair turns at the write lock for the processes sharing a file.
//!
//! SQLite's write lock has no queue: a process that waits for it sleeps and
//! tries again, while the process that holds it releases and takes it again
//! within microseconds, so a process writing in a tight loop can starve the
//! others almost completely. Before each write transaction, tq therefore
//! takes a ticket and waits for its turn, first come first served, on a
//! ticket counter shared through a small file next to the database
//! (`<database>-tqturn`, mapped into memory). Each waiter sleeps on a futex
//! word of its own ticket, so a turn passed on wakes only the process it
//! concerns; the process next in line spins for a moment instead, so that
//! the turn changes hands without a wake-up when a core is free. A process
//! that finds the turn taken yields its processor once before it takes a
//! ticket, in case the holder is waiting for it.
//!
//! The turns only order the attempts: SQLite's lock still keeps writers
//! apart, so the turns never have to be right to keep data safe. A turn
//! that makes no progress for [`STALE`] (its process died waiting, or is
//! stopped) is skipped; a waiter whose busy timeout runs out stops waiting
//! and leaves the decision to SQLite's lock. When the file cannot be
//! created or mapped (a read-only directory), tq works without turns.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a turn may go without progress before waiters skip it.
const STALE: Duration = Duration::from_millis(50);

/// How long the process next in line spins before it sleeps: about one
/// write transaction at `normal`.
const SPIN: Duration = Duration::from_micros(50);

/// Futex words for the waiters, one per ticket modulo this.
const BELLS: u32 = 64;

/// The counters, at the start of the shared file.
#[repr(C)]
struct Counters {
    /// The next ticket to hand out.
    next: AtomicU32,
    /// The ticket whose turn it is.
    serving: AtomicU32,
    /// The waiter of a ticket sleeps on its bell, which is rung when the
    /// ticket comes next in line and when its turn comes.
    bells: [AtomicU32; BELLS as usize],
}

impl Counters {
    fn bell(&self, ticket: u32) -> &AtomicU32 {
        &self.bells[(ticket % BELLS) as usize]
    }

    /// Wakes the waiter of `ticket`, if it sleeps.
    fn ring(&self, ticket: u32) {
        let bell = self.bell(ticket);
        bell.fetch_add(1, Ordering::SeqCst);
        wake_all(bell);
    }

    /// Wakes the waiters of the ticket now served and of the one after it,
    /// which then spins, when they exist; and any process of tq 0.2.0,
    /// which sleeps on the counter itself.
    fn ring_next(&self, serving: u32) {
        let next = self.next.load(Ordering::SeqCst);
        if next == serving {
            return;
        }
        for ticket in [serving, serving.wrapping_add(1)] {
            if (next.wrapping_sub(ticket) as i32) > 0 {
                self.ring(ticket);
            }
        }
        wake_all(&self.serving);
    }
}

const MAPPED_LEN: usize = 4096;
const _: () = assert!(std::mem::size_of::<Counters>() <= MAPPED_LEN);

pub(super) struct Turns {
    counters: NonNull<Counters>,
}

// SAFETY: the mapping is only reached through atomics, from any thread.
unsafe impl Send for Turns {}
unsafe impl Sync for Turns {}

impl Turns {
    /// Maps the turn file of the database at `db_path`, creating it if
    /// needed; `None` when that is not possible.
    pub(super) fn open(db_path: &str) -> Option<Turns> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(libc::O_CLOEXEC)
            .open(format!("{db_path}-tqturn"))
            .ok()?;
        if file.metadata().ok()?.len() < MAPPED_LEN as u64 {
            // Every process extends it to the same size: a new file is zeros.
            file.set_len(MAPPED_LEN as u64).ok()?;
        }
        // SAFETY: a fresh shared mapping of a file at least MAPPED_LEN long;
        // the descriptor may be closed afterwards, the mapping stays.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAPPED_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return None;
        }
        Some(Turns {
            counters: NonNull::new(address.cast())?,
        })
    }

    fn counters(&self) -> &Counters {
        // SAFETY: mapped for the life of `self`, page-aligned, and only
        // accessed through atomics.
        unsafe { self.counters.as_ref() }
    }

    /// Takes a ticket and waits until its turn comes, a stale turn is
    /// skipped, or `deadline` passes. The turn ends when the result drops.
    pub(super) fn wait(&self, deadline: Instant) -> Turn<'_> {
        let counters = self.counters();
        if counters.next.load(Ordering::SeqCst) != counters.serving.load(Ordering::SeqCst) {
            // Another process holds the turn or waits for it, and this one
            // would wait behind it anyway: it may need this processor to
            // finish its write and pass the turn on (with more processes
            // than cores, the holder is often one that lost its core).
            std::thread::yield_now();
        }
        let ticket = counters.next.fetch_add(1, Ordering::SeqCst);
        let bell = counters.bell(ticket);
        let mut seen = counters.serving.load(Ordering::SeqCst);
        let mut progress_at = Instant::now();
        let mut spin_until = None;
        loop {
            // The bell before the counter: a ring in between is not missed.
            let rung = bell.load(Ordering::SeqCst);
            let serving = counters.serving.load(Ordering::SeqCst);
            // Our turn, or already skipped past it.
            if (ticket.wrapping_sub(serving) as i32) <= 0 {
                break;
            }
            let now = Instant::now();
            if serving != seen {
                (seen, progress_at) = (serving, now);
            }
            if now >= deadline {
                break;
            }
            if now >= progress_at + STALE {
                let skipped = counters.serving.compare_exchange(
                    serving,
                    serving.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                if skipped.is_ok() {
                    counters.ring_next(serving.wrapping_add(1));
                }
                progress_at = now;
                continue;
            }
            if ticket.wrapping_sub(serving) == 1 {
                if now < *spin_until.get_or_insert(now + SPIN) {
                    std::hint::spin_loop();
                    continue;
                }
            } else {
                spin_until = None;
            }
            futex_wait(bell, rung, deadline.min(progress_at + STALE) - now);
        }
        Turn {
            turns: self,
            ticket,
        }
    }
}

impl Drop for Turns {
    fn drop(&mut self) {
        // SAFETY: mapped by `open` with this length.
        unsafe { libc::munmap(self.counters.as_ptr().cast(), MAPPED_LEN) };
    }
}

/// A writer's turn; dropping it passes the turn to the next ticket.
pub(super) struct Turn<'a> {
    turns: &'a Turns,
    ticket: u32,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let counters = self.turns.counters();
        let next = self.ticket.wrapping_add(1);
        // Only if the turn is still ours: a skipped one was passed on already.
        let passed = counters
            .serving
            .compare_exchange(self.ticket, next, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if passed {
            counters.ring_next(next);
        }
    }
}

/// Sleeps while `word` holds `expected`, at most `timeout` (a shared futex:
/// it works across processes mapping the same file).
fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let timeout = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &timeout as *const libc::timespec,
        );
    }
}

fn wake_all(word: &AtomicU32) {
    // SAFETY: as above.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::thread;

    #[test]
    fn turns_come_in_ticket_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db").to_str().unwrap().to_owned();
        let turns = Arc::new(Turns::open(&path).unwrap());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = turns.wait(Instant::now() + Duration::from_secs(10));
        let waiters: Vec<_> = (0..3)
            .map(|n| {
                let (turns, order) = (Arc::clone(&turns), Arc::clone(&order));
                let waiter = thread::spawn(move || {
                    let _turn = turns.wait(Instant::now() + Duration::from_secs(10));
                    order.lock().unwrap().push(n);
                });
                // Let each take its ticket before the next one starts.
                thread::sleep(Duration::from_millis(20));
                waiter
            })
            .collect();
        drop(first);
        for waiter in waiters {
            waiter.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
    }

    #[test]
    fn a_turn_passed_on_wakes_its_waiter_without_waiting_for_it_to_go_stale() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db").to_str().unwrap().to_owned();
        let turns = Arc::new(Turns::open(&path).unwrap());
        let first = turns.wait(Instant::now() + Duration::from_secs(10));
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let turns = Arc::clone(&turns);
                let waiter = thread::spawn(move || {
                    drop(turns.wait(Instant::now() + Duration::from_secs(10)));
                });
                // Each takes its ticket and goes to sleep before the next
                // one starts (all well within a stale turn's time).
                thread::sleep(Duration::from_millis(2));
                waiter
            })
            .collect();
        let started = Instant::now();
        drop(first);
        for waiter in waiters {
            waiter.join().unwrap();
        }
        // Woken only by their futex's timeout, the sleepers would wait
        // until the first turn went stale, over 40 ms from here.
        assert!(
            started.elapsed() < STALE / 2,
            "4 turns passed on in {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_turn_that_is_never_released_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db").to_str().unwrap().to_owned();
        let turns = Turns::open(&path).unwrap();
        // A ticket taken by a process that then died: never released.
        std::mem::forget(turns.wait(Instant::now()));
        let started = Instant::now();
        let _turn = turns.wait(Instant::now() + Duration::from_secs(10));
        assert!(started.elapsed() >= STALE);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
