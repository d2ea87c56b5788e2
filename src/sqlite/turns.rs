//! Fair turns at the write lock for the processes sharing a file.
//!
//! SQLite's write lock has no queue: a process that waits for it sleeps and
//! tries again, while the process that holds it releases and takes it again
//! within microseconds, so a process writing in a tight loop can starve the
//! others almost completely. Before each write transaction, tq therefore
//! takes a ticket and waits for its turn, first come first served, on a
//! ticket counter shared through a small file next to the database
//! (`<database>-tqturn`, mapped into memory; waiting sleeps on a futex).
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

/// The counters, at the start of the shared file.
#[repr(C)]
struct Counters {
    /// The next ticket to hand out.
    next: AtomicU32,
    /// The ticket whose turn it is.
    serving: AtomicU32,
}

const MAPPED_LEN: usize = 4096;

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
        let ticket = counters.next.fetch_add(1, Ordering::SeqCst);
        let mut seen = counters.serving.load(Ordering::SeqCst);
        let mut progress_at = Instant::now();
        loop {
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
                let _ = counters.serving.compare_exchange(
                    serving,
                    serving.wrapping_add(1),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                wake_all(&counters.serving);
                progress_at = now;
                continue;
            }
            futex_wait(
                &counters.serving,
                serving,
                deadline.min(progress_at + STALE) - now,
            );
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
        if passed && counters.next.load(Ordering::SeqCst) != next {
            wake_all(&counters.serving);
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
