//! Fair turns at the write lock for the processes sharing a file.
//!
//! Design: `docs/internals.md`, "Turns at the write lock".

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::page::{TurnWords, BELLS};

/// How long a turn may go without progress before waiters skip it. Chosen
/// far above a write transaction (which holds a turn for well under a
/// millisecond at `normal`), so a live holder is never skipped, yet short
/// enough that a holder that died costs the others one pause; the turns'
/// fairness and rate are measured by `bench/concurrency.rs`.
const STALE: Duration = Duration::from_millis(50);

/// How long the process next in line spins before it sleeps: about one
/// write transaction at `normal`, so that on a free core a turn passed on
/// changes hands without a futex wake-up, while a spin that fails costs no
/// more than one transaction (`bench/concurrency.rs`, processes sharing a
/// file).
const SPIN: Duration = Duration::from_micros(50);

/// More waiters than any set of processes has: a line longer than this
/// (either way) comes from damaged counters.
const MAX_LINE: u32 = 4096;

/// A ticket's mark in [`TurnWords::gone`], never 0.
fn gone_mark(ticket: u32) -> u64 {
    1 << 32 | u64::from(ticket)
}

impl TurnWords {
    fn slot(ticket: u32) -> usize {
        (ticket % BELLS) as usize
    }

    fn bell(&self, ticket: u32) -> &AtomicU32 {
        &self.bells[Self::slot(ticket)]
    }

    fn is_gone(&self, ticket: u32) -> bool {
        self.gone[Self::slot(ticket)].load(Ordering::SeqCst) == gone_mark(ticket)
    }

    /// Passes the turn from `ticket`, if it is still its turn, to the next
    /// ticket whose waiter is still in line, and wakes that one.
    fn pass(&self, ticket: u32) {
        let mut serving = ticket;
        loop {
            let next = serving.wrapping_add(1);
            let passed = self
                .serving
                .compare_exchange(serving, next, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
            if !passed {
                // Passed on by someone else, who carries on from there.
                return;
            }
            serving = next;
            if !self.is_gone(serving) {
                break;
            }
        }
        self.ring_next(serving);
    }

    /// Takes `ticket` out of the line: the turn passes over it.
    fn leave(&self, ticket: u32) {
        self.gone[Self::slot(ticket)].store(gone_mark(ticket), Ordering::SeqCst);
        // The turn may have come to it before the passer could see the
        // mark: then nobody else will pass it on. (The passer moves the
        // counter before it reads the mark, and this reads the counter
        // after setting the mark, so one of them sees the other.)
        if self.serving.load(Ordering::SeqCst) == ticket {
            self.pass(ticket);
        }
    }

    /// Wakes the waiter of `ticket`, if it sleeps.
    fn ring(&self, ticket: u32) {
        let bell = self.bell(ticket);
        bell.fetch_add(1, Ordering::SeqCst);
        wake_all(bell);
    }

    /// Wakes the waiters of the ticket now served and of the one after it,
    /// which then spins, when they exist.
    fn ring_next(&self, serving: u32) {
        let next = self.next.load(Ordering::SeqCst);
        for ticket in [serving, serving.wrapping_add(1)] {
            if (next.wrapping_sub(ticket) as i32) > 0 {
                self.ring(ticket);
            }
        }
    }

    /// Takes a ticket and waits until its turn comes, a stale turn is
    /// skipped, or `deadline` passes. The turn ends when the result drops.
    pub(super) fn wait(&self, deadline: Instant) -> Turn<'_> {
        if Instant::now() >= deadline {
            // It would only leave the line at once.
            return Turn {
                turns: self,
                ticket: None,
            };
        }
        if self.next.load(Ordering::SeqCst) != self.serving.load(Ordering::SeqCst) {
            // Another process holds the turn or waits for it, and this one
            // would wait behind it anyway: it may need this processor to
            // finish its write and pass the turn on (with more processes
            // than cores, the holder is often one that lost its core).
            std::thread::yield_now();
        }
        let ticket = self.next.fetch_add(1, Ordering::SeqCst);
        Turn {
            turns: self,
            ticket: self.wait_in_line(ticket, deadline).then_some(ticket),
        }
    }

    /// Waits with `ticket` until its turn comes (true), or until it was
    /// skipped as stale or `deadline` passed (false: the ticket has then
    /// left the line). The one next in line spins for [`SPIN`] before it
    /// sleeps, so that a turn changes hands without a wake-up when a core
    /// is free; a turn that makes no progress for [`STALE`] is passed over.
    fn wait_in_line(&self, ticket: u32, deadline: Instant) -> bool {
        let bell = self.bell(ticket);
        let mut seen = self.serving.load(Ordering::SeqCst);
        let mut progress_at = Instant::now();
        let mut spin_until = None;
        loop {
            // The bell before the counter: a ring in between is not missed.
            let rung = bell.load(Ordering::SeqCst);
            let serving = self.serving.load(Ordering::SeqCst);
            let ahead = ticket.wrapping_sub(serving) as i32;
            if ahead == 0 {
                return true;
            }
            if ahead.unsigned_abs() > MAX_LINE {
                let _ = self.serving.compare_exchange(
                    serving,
                    ticket,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                continue;
            }
            if ahead < 0 {
                // Skipped as stale while this thread did not run.
                return false;
            }
            let now = Instant::now();
            if serving != seen {
                (seen, progress_at) = (serving, now);
            }
            if now >= deadline {
                self.leave(ticket);
                return false;
            }
            if now >= progress_at + STALE {
                self.pass(serving);
                progress_at = now;
                continue;
            }
            if ahead == 1 {
                if now < *spin_until.get_or_insert(now + SPIN) {
                    std::hint::spin_loop();
                    continue;
                }
            } else {
                spin_until = None;
            }
            futex_wait(bell, rung, deadline.min(progress_at + STALE) - now);
        }
    }
}

#[cfg(test)]
impl TurnWords {
    /// The next ticket to hand out: how many turns were taken, for tests.
    pub(super) fn next_ticket(&self) -> u32 {
        self.next.load(Ordering::SeqCst)
    }
}

/// A writer's turn; dropping it passes the turn to the next ticket.
pub(super) struct Turn<'a> {
    turns: &'a TurnWords,
    /// `None` when the wait ended without the turn.
    ticket: Option<u32>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            // Only if the turn is still ours: a skipped one was passed on.
            self.turns.pass(ticket);
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
    use crate::sqlite::page::Scratch;
    use std::sync::{Arc, Mutex};
    use std::thread;

    fn in_ten_seconds() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    #[test]
    fn turns_come_in_ticket_order() {
        let scratch = Scratch::new();
        let page = Arc::new(scratch.open().unwrap());
        let order = Arc::new(Mutex::new(Vec::new()));
        let tickets_before = page.turns().next.load(Ordering::SeqCst);
        let first = page.turns().wait(in_ten_seconds());
        let waiters: Vec<_> = (0..3u32)
            .map(|n| {
                let (waiter_page, order) = (Arc::clone(&page), Arc::clone(&order));
                let waiter = thread::spawn(move || {
                    let _turn = waiter_page.turns().wait(in_ten_seconds());
                    order.lock().unwrap().push(n);
                });
                // Each takes its ticket before the next one starts: the
                // first turn's ticket and those of the waiters before.
                let taken = tickets_before.wrapping_add(n + 2);
                while page.turns().next.load(Ordering::SeqCst) != taken {
                    thread::yield_now();
                }
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
        let scratch = Scratch::new();
        let page = Arc::new(scratch.open().unwrap());
        let first = page.turns().wait(in_ten_seconds());
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let page = Arc::clone(&page);
                let waiter = thread::spawn(move || {
                    drop(page.turns().wait(in_ten_seconds()));
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
        let scratch = Scratch::new();
        let page = scratch.open().unwrap();
        // A ticket taken by a process that then died: never released.
        std::mem::forget(page.turns().wait(in_ten_seconds()));
        let turn = page.turns().wait(in_ten_seconds());
        assert_eq!(turn.ticket, Some(1));
        assert_eq!(page.turns().serving.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn tickets_abandoned_at_their_deadline_are_passed_over_at_once() {
        let scratch = Scratch::new();
        // Separate mappings, as separate processes have.
        let holder = scratch.open().unwrap();
        let held = holder.turns().wait(in_ten_seconds());
        let quitters: Vec<_> = (0..3)
            .map(|_| {
                let page = scratch.open().unwrap();
                thread::spawn(move || {
                    let turn = page.turns().wait(Instant::now() + Duration::from_millis(2));
                    assert_eq!(turn.ticket, None, "got a turn that was held");
                })
            })
            .collect();
        for quitter in quitters {
            quitter.join().unwrap();
        }
        let turns = holder.turns();
        assert_eq!(turns.next.load(Ordering::SeqCst), 4, "each took a ticket");
        drop(held);
        // Nobody is left in line: a lone writer's ticket is served at once.
        assert_eq!(turns.serving.load(Ordering::SeqCst), 4);
        let lone = holder.turns().wait(in_ten_seconds());
        assert_eq!(lone.ticket, Some(4));
    }

    #[test]
    fn a_waiter_whose_deadline_has_passed_takes_no_ticket() {
        let scratch = Scratch::new();
        let page = scratch.open().unwrap();
        let held = page.turns().wait(in_ten_seconds());
        assert_eq!(page.turns().wait(Instant::now()).ticket, None);
        assert_eq!(page.turns().next.load(Ordering::SeqCst), 1);
        drop(held);
        assert_eq!(page.turns().serving.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn damaged_counters_are_resynchronised() {
        let scratch = Scratch::new();
        let first = scratch.open().unwrap();
        let second = scratch.open().unwrap();
        let turns = first.turns();
        // A line of a billion (skipping them would take years), then a
        // counter served past every ticket handed out.
        turns.next.store(1_000_000_000, Ordering::SeqCst);
        let turn = second.turns().wait(in_ten_seconds());
        assert_eq!(turn.ticket, Some(1_000_000_000));
        drop(turn);
        turns.serving.store(2_000_000_000, Ordering::SeqCst);
        assert_eq!(
            second.turns().wait(in_ten_seconds()).ticket,
            Some(1_000_000_001)
        );
    }
}
