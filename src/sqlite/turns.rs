//! Fair turns at the write lock for the processes sharing a file.
//!
//! Design: `docs/internals.md`, "Turns at the write lock".

use std::fs::{File, Metadata};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::wake::WakeWords;

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

/// Futex words for the waiters, one per ticket modulo this.
const BELLS: u32 = 64;

/// More waiters than any set of processes has: a line longer than this
/// (either way) comes from damaged counters.
const MAX_LINE: u32 = 4096;

/// Where the shared pages live.
const SHARED_MEMORY_DIR: &str = "/dev/shm";

const MAGIC: u64 = u64::from_le_bytes(*b"tqturns\0");
/// Changes whenever the layout of [`Page`] or the protocol changes.
const LAYOUT: u32 = 2;
const MAPPED_LEN: usize = 4096;
const _: () = assert!(std::mem::size_of::<Page>() <= MAPPED_LEN);

/// The shared page: a header, then the counters.
#[repr(C)]
struct Page {
    magic: AtomicU64,
    layout: AtomicU32,
    size: AtomicU32,
    /// The next ticket to hand out.
    next: AtomicU32,
    /// The ticket whose turn it is.
    serving: AtomicU32,
    /// The waiter of a ticket sleeps on its bell, which is rung when the
    /// ticket comes next in line and when its turn comes.
    bells: [AtomicU32; BELLS as usize],
    /// Per bell, the last ticket whose waiter left the line, as
    /// [`gone_mark`] of it (0: none).
    gone: [AtomicU64; BELLS as usize],
    wake: WakeWords,
}

/// A ticket's mark in [`Page::gone`], never 0.
fn gone_mark(ticket: u32) -> u64 {
    1 << 32 | u64::from(ticket)
}

impl Page {
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

    /// Writes a fresh header and empty counters; only while nobody else
    /// uses the page.
    fn reset(&self) {
        self.next.store(0, Ordering::SeqCst);
        self.serving.store(0, Ordering::SeqCst);
        for word in &self.bells {
            word.store(0, Ordering::SeqCst);
        }
        for word in &self.gone {
            word.store(0, Ordering::SeqCst);
        }
        self.wake.reset();
        self.size.store(MAPPED_LEN as u32, Ordering::SeqCst);
        self.layout.store(LAYOUT, Ordering::SeqCst);
        self.magic.store(MAGIC, Ordering::SeqCst);
    }

    fn header_is_valid(&self) -> bool {
        self.magic.load(Ordering::SeqCst) == MAGIC
            && self.layout.load(Ordering::SeqCst) == LAYOUT
            && self.size.load(Ordering::SeqCst) == MAPPED_LEN as u32
    }
}

/// This process's use of the turns of one database file.
pub(super) struct Turns {
    page: NonNull<Page>,
    /// Holds the shared lock that says this process uses the page.
    file: File,
    path: PathBuf,
    /// The process that opened it: only it removes the file.
    opener: u32,
}

// SAFETY: the mapping is only reached through atomics, from any thread.
unsafe impl Send for Turns {}
unsafe impl Sync for Turns {}

impl Turns {
    /// Maps the turns of the database file at `db_path`, creating them if
    /// needed; `None` when that is not possible or not safe.
    pub(super) fn open(db_path: &str) -> Option<Turns> {
        // stat(), never open(): see SQLITE-NOTES on POSIX locks.
        let db = std::fs::metadata(db_path).ok()?;
        Turns::open_in(Path::new(SHARED_MEMORY_DIR), &db)
    }

    /// [`Turns::open`] with the page's file in `dir`, for the database
    /// file `db`.
    fn open_in(dir: &Path, db: &Metadata) -> Option<Turns> {
        let path = page_path(dir, db);
        // A retry follows a last user removing the file just after it was
        // opened here; three in a row would take a storm of closers.
        for _ in 0..3 {
            match Turns::try_open(&path, db) {
                Opened::Turns(turns) => return Some(turns),
                Opened::Unlinked => continue,
                Opened::Refused => return None,
            }
        }
        None
    }

    fn try_open(path: &Path, db: &Metadata) -> Opened {
        let Some(file) = open_or_create(path, db) else {
            return Opened::Refused;
        };
        let Ok(found) = file.metadata() else {
            return Opened::Refused;
        };
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        let trusted_owner = found.uid() == db.uid() || found.uid() == euid;
        if !found.file_type().is_file() || !trusted_owner || found.nlink() != 1 {
            return Opened::Refused;
        }
        let alone = flock(&file, libc::LOCK_EX | libc::LOCK_NB);
        if !alone && !flock(&file, libc::LOCK_SH) {
            return Opened::Refused;
        }
        match file.metadata() {
            Ok(locked) if locked.nlink() == 0 => return Opened::Unlinked,
            Ok(_) => {}
            Err(_) => return Opened::Refused,
        }
        if alone {
            // Nobody maps it: give it exactly its length, with its space
            // allocated for real (never map a sparse file: touching a page
            // that cannot be allocated is SIGBUS).
            if !allocate(&file) {
                remove_if_same(path, &file);
                return Opened::Refused;
            }
        }
        let Some(turns) = Turns::map(file, path) else {
            return Opened::Refused;
        };
        if alone {
            turns.page().reset();
            // Not atomic: another opener may find itself alone in between
            // and reset the page again, harmless as this process has not
            // waited yet (its lock waits for that opener's reset).
            if !flock(&turns.file, libc::LOCK_SH) {
                return Opened::Refused;
            }
        } else if !turns.page().header_is_valid() {
            return Opened::Refused;
        }
        Opened::Turns(turns)
    }

    /// Maps `file` when it is exactly one page long.
    fn map(file: File, path: &Path) -> Option<Turns> {
        let has_page_len = |file: &File| {
            file.metadata()
                .is_ok_and(|metadata| metadata.len() == MAPPED_LEN as u64)
        };
        if !has_page_len(&file) {
            return None;
        }
        // SAFETY: a fresh shared mapping of a file MAPPED_LEN long.
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
        let turns = Turns {
            page: NonNull::new(address.cast())?,
            file,
            path: path.to_owned(),
            opener: std::process::id(),
        };
        // Its owner may have shrunk it in between.
        has_page_len(&turns.file).then_some(turns)
    }

    fn page(&self) -> &Page {
        // SAFETY: mapped for the life of `self`, page-aligned, and only
        // accessed through atomics.
        unsafe { self.page.as_ref() }
    }

    /// The wake words of the page (see `wake.rs`).
    pub(super) fn wake_words(&self) -> &WakeWords {
        &self.page().wake
    }

    /// Takes a ticket and waits until its turn comes, a stale turn is
    /// skipped, or `deadline` passes. The turn ends when the result drops.
    pub(super) fn wait(&self, deadline: Instant) -> Turn<'_> {
        let page = self.page();
        if Instant::now() >= deadline {
            // It would only leave the line at once.
            return Turn {
                turns: self,
                ticket: None,
            };
        }
        if page.next.load(Ordering::SeqCst) != page.serving.load(Ordering::SeqCst) {
            // Another process holds the turn or waits for it, and this one
            // would wait behind it anyway: it may need this processor to
            // finish its write and pass the turn on (with more processes
            // than cores, the holder is often one that lost its core).
            std::thread::yield_now();
        }
        let ticket = page.next.fetch_add(1, Ordering::SeqCst);
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
        let page = self.page();
        let bell = page.bell(ticket);
        let mut seen = page.serving.load(Ordering::SeqCst);
        let mut progress_at = Instant::now();
        let mut spin_until = None;
        loop {
            // The bell before the counter: a ring in between is not missed.
            let rung = bell.load(Ordering::SeqCst);
            let serving = page.serving.load(Ordering::SeqCst);
            let ahead = ticket.wrapping_sub(serving) as i32;
            if ahead == 0 {
                return true;
            }
            if ahead.unsigned_abs() > MAX_LINE {
                let _ = page.serving.compare_exchange(
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
                page.leave(ticket);
                return false;
            }
            if now >= progress_at + STALE {
                page.pass(serving);
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

impl Drop for Turns {
    fn drop(&mut self) {
        // SAFETY: mapped by `map` with this length.
        unsafe { libc::munmap(self.page.as_ptr().cast(), MAPPED_LEN) };
        // The last user removes the file, holding it exclusively so that
        // nobody starts using it meanwhile. A forked child shares the
        // opener's lock, so its attempt could succeed while the opener
        // still uses the page.
        if self.opener == std::process::id() && flock(&self.file, libc::LOCK_EX | libc::LOCK_NB) {
            remove_if_same(&self.path, &self.file);
        }
    }
}

#[cfg(test)]
impl Turns {
    /// The next ticket to hand out: how many turns were taken, for tests.
    pub(super) fn next_ticket(&self) -> u32 {
        self.page().next.load(Ordering::SeqCst)
    }
}

/// The page's file in `dir` for the database file `db`.
fn page_path(dir: &Path, db: &Metadata) -> PathBuf {
    dir.join(format!("tq-turns-{:x}-{:x}", db.dev(), db.ino()))
}

/// What one attempt at opening the page gave.
enum Opened {
    Turns(Turns),
    /// Removed by its last user after we opened it: open again.
    Unlinked,
    Refused,
}

/// Opens the page's file at `path`, creating it with the permissions and
/// owner of the database file `db` if it does not exist.
fn open_or_create(path: &Path, db: &Metadata) -> Option<File> {
    let open = |create: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create)
            .mode(db.mode() & 0o666)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
            .open(path)
    };
    match open(true) {
        Ok(file) => {
            // The umask must not narrow it: every user of the database
            // needs it.
            file.set_permissions(PermissionsExt::from_mode(db.mode() & 0o666))
                .ok()?;
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } == 0 {
                std::os::unix::fs::fchown(&file, Some(db.uid()), Some(db.gid())).ok()?;
            }
            Some(file)
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => open(false).ok(),
        Err(_) => None,
    }
}

/// Gives `file` exactly one page, with its space allocated for real.
fn allocate(file: &File) -> bool {
    // SAFETY: a valid descriptor.
    let allocate =
        || unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, MAPPED_LEN as libc::off_t) };
    file.set_len(MAPPED_LEN as u64).is_ok() && allocate() == 0
}

/// Removes `path` if it is still `file` (its owner may have replaced it).
fn remove_if_same(path: &Path, file: &File) {
    let same = match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(at_path), Ok(ours)) => at_path.dev() == ours.dev() && at_path.ino() == ours.ino(),
        _ => false,
    };
    if same {
        let _ = std::fs::remove_file(path);
    }
}

/// Takes or changes this descriptor's `flock`; whether that succeeded.
fn flock(file: &File, operation: libc::c_int) -> bool {
    loop {
        // SAFETY: a valid descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return true;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// A writer's turn; dropping it passes the turn to the next ticket.
pub(super) struct Turn<'a> {
    turns: &'a Turns,
    /// `None` when the wait ended without the turn.
    ticket: Option<u32>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            // Only if the turn is still ours: a skipped one was passed on.
            self.turns.page().pass(ticket);
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
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use std::thread;

    /// A directory for the page's file, with a database file in it.
    struct Scratch {
        dir: tempfile::TempDir,
        db: Metadata,
    }

    impl Scratch {
        fn new() -> Scratch {
            let dir = tempfile::tempdir().unwrap();
            let db_path = dir.path().join("db");
            std::fs::write(&db_path, "").unwrap();
            let db = std::fs::metadata(&db_path).unwrap();
            Scratch { dir, db }
        }

        fn open(&self) -> Option<Turns> {
            Turns::open_in(self.dir.path(), &self.db)
        }

        fn page_path(&self) -> PathBuf {
            page_path(self.dir.path(), &self.db)
        }
    }

    fn in_ten_seconds() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    /// A page as written by `reset`, with the counters given.
    fn page_image(next: u32, serving: u32) -> Vec<u8> {
        let mut image = Vec::new();
        image.extend(MAGIC.to_le_bytes());
        image.extend(LAYOUT.to_le_bytes());
        image.extend((MAPPED_LEN as u32).to_le_bytes());
        image.extend(next.to_le_bytes());
        image.extend(serving.to_le_bytes());
        image.resize(MAPPED_LEN, 0);
        image
    }

    fn is_root() -> bool {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    fn skipped(test: &str, reason: &str) {
        let _ = writeln!(std::io::stderr(), "skipped {test}: {reason}");
    }

    #[test]
    fn turns_come_in_ticket_order() {
        let scratch = Scratch::new();
        let turns = Arc::new(scratch.open().unwrap());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = turns.wait(in_ten_seconds());
        let waiters: Vec<_> = (0..3)
            .map(|n| {
                let (turns, order) = (Arc::clone(&turns), Arc::clone(&order));
                let waiter = thread::spawn(move || {
                    let _turn = turns.wait(in_ten_seconds());
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
        let scratch = Scratch::new();
        let turns = Arc::new(scratch.open().unwrap());
        let first = turns.wait(in_ten_seconds());
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let turns = Arc::clone(&turns);
                let waiter = thread::spawn(move || {
                    drop(turns.wait(in_ten_seconds()));
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
        let turns = scratch.open().unwrap();
        // A ticket taken by a process that then died: never released.
        std::mem::forget(turns.wait(in_ten_seconds()));
        let turn = turns.wait(in_ten_seconds());
        assert_eq!(turn.ticket, Some(1));
        assert_eq!(turns.page().serving.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn tickets_abandoned_at_their_deadline_are_passed_over_at_once() {
        let scratch = Scratch::new();
        // Separate mappings, as separate processes have.
        let holder = scratch.open().unwrap();
        let held = holder.wait(in_ten_seconds());
        let quitters: Vec<_> = (0..3)
            .map(|_| {
                let turns = scratch.open().unwrap();
                thread::spawn(move || {
                    let turn = turns.wait(Instant::now() + Duration::from_millis(2));
                    assert_eq!(turn.ticket, None, "got a turn that was held");
                })
            })
            .collect();
        for quitter in quitters {
            quitter.join().unwrap();
        }
        let page = holder.page();
        assert_eq!(page.next.load(Ordering::SeqCst), 4, "each took a ticket");
        drop(held);
        // Nobody is left in line: a lone writer's ticket is served at once.
        assert_eq!(page.serving.load(Ordering::SeqCst), 4);
        let lone = holder.wait(in_ten_seconds());
        assert_eq!(lone.ticket, Some(4));
    }

    #[test]
    fn a_waiter_whose_deadline_has_passed_takes_no_ticket() {
        let scratch = Scratch::new();
        let turns = scratch.open().unwrap();
        let held = turns.wait(in_ten_seconds());
        assert_eq!(turns.wait(Instant::now()).ticket, None);
        assert_eq!(turns.page().next.load(Ordering::SeqCst), 1);
        drop(held);
        assert_eq!(turns.page().serving.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_opener_alone_clears_the_counters_a_crash_left() {
        let scratch = Scratch::new();
        // Five holes left in the line by processes that died.
        std::fs::write(scratch.page_path(), page_image(5, 0)).unwrap();
        let turns = scratch.open().unwrap();
        let page = turns.page();
        assert_eq!(page.next.load(Ordering::SeqCst), 0);
        assert_eq!(page.serving.load(Ordering::SeqCst), 0);
        assert_eq!(turns.wait(in_ten_seconds()).ticket, Some(0));
    }

    #[test]
    fn damaged_counters_are_resynchronised() {
        let scratch = Scratch::new();
        let first = scratch.open().unwrap();
        let second = scratch.open().unwrap();
        let page = first.page();
        // A line of a billion (skipping them would take years), then a
        // counter served past every ticket handed out.
        page.next.store(1_000_000_000, Ordering::SeqCst);
        let turn = second.wait(in_ten_seconds());
        assert_eq!(turn.ticket, Some(1_000_000_000));
        drop(turn);
        page.serving.store(2_000_000_000, Ordering::SeqCst);
        assert_eq!(second.wait(in_ten_seconds()).ticket, Some(1_000_000_001));
    }

    #[test]
    fn the_page_is_allocated_with_a_header_and_the_databases_permissions() {
        let scratch = Scratch::new();
        let db_path = scratch.dir.path().join("db");
        std::fs::set_permissions(&db_path, PermissionsExt::from_mode(0o660)).unwrap();
        let db = std::fs::metadata(&db_path).unwrap();
        let turns = Turns::open_in(scratch.dir.path(), &db).unwrap();
        let file = std::fs::metadata(page_path(scratch.dir.path(), &db)).unwrap();
        assert_eq!(file.mode() & 0o777, 0o660);
        assert_eq!(file.len(), MAPPED_LEN as u64);
        assert!(file.blocks() * 512 >= MAPPED_LEN as u64, "sparse");
        assert!(turns.page().header_is_valid());
    }

    #[test]
    fn a_symlink_at_the_path_is_refused_and_its_target_untouched() {
        let scratch = Scratch::new();
        let target = scratch.dir.path().join("precious");
        std::fs::write(&target, "precious bytes").unwrap();
        std::os::unix::fs::symlink(&target, scratch.page_path()).unwrap();
        assert!(scratch.open().is_none());
        assert_eq!(std::fs::read(&target).unwrap(), b"precious bytes");
        assert!(std::fs::symlink_metadata(scratch.page_path())
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_hard_link_at_the_path_is_refused() {
        let scratch = Scratch::new();
        let other = scratch.dir.path().join("other");
        std::fs::write(&other, page_image(0, 0)).unwrap();
        std::fs::hard_link(&other, scratch.page_path()).unwrap();
        assert!(scratch.open().is_none());
        assert_eq!(std::fs::read(&other).unwrap(), page_image(0, 0));
    }

    #[test]
    fn a_foreign_file_nobody_uses_is_rebuilt() {
        for foreign in [
            vec![0xa5; MAPPED_LEN],
            vec![1; 10],
            vec![2; 1 << 20],
            vec![],
        ] {
            let scratch = Scratch::new();
            std::fs::write(scratch.page_path(), &foreign).unwrap();
            let turns = scratch.open().expect("rebuilt");
            assert!(turns.page().header_is_valid());
            let file = std::fs::metadata(scratch.page_path()).unwrap();
            assert_eq!(file.len(), MAPPED_LEN as u64);
            assert_eq!(turns.wait(in_ten_seconds()).ticket, Some(0));
        }
    }

    #[test]
    fn a_damaged_file_in_use_is_refused_by_the_next_opener() {
        let scratch = Scratch::new();
        let user = scratch.open().unwrap();
        // Another header: a different layout of the same magic.
        let mut image = page_image(0, 0);
        image[8] = LAYOUT as u8 + 1;
        std::fs::OpenOptions::new()
            .write(true)
            .open(scratch.page_path())
            .unwrap()
            .write_all(&image[..16])
            .unwrap();
        assert!(scratch.open().is_none());
        drop(user);
    }

    #[test]
    fn a_page_of_the_previous_layout_in_use_is_refused_then_rebuilt() {
        let scratch = Scratch::new();
        // Layout 1: turns only, before the wake words.
        let mut image = page_image(0, 0);
        image[8..12].copy_from_slice(&1u32.to_le_bytes());
        std::fs::write(scratch.page_path(), &image).unwrap();
        // A process of the previous layout maps it, holding its lock.
        let old_user = std::fs::File::open(scratch.page_path()).unwrap();
        assert!(flock(&old_user, libc::LOCK_SH));
        assert!(scratch.open().is_none());
        assert_eq!(std::fs::read(scratch.page_path()).unwrap(), image);
        drop(old_user);
        let turns = scratch.open().expect("rebuilt once nobody uses it");
        assert!(turns.page().header_is_valid());
    }

    #[test]
    fn a_file_truncated_in_use_is_refused_by_the_next_opener_then_rebuilt() {
        let scratch = Scratch::new();
        let user = scratch.open().unwrap();
        std::fs::File::create(scratch.page_path()).unwrap();
        // Never mapped, so never touched past its end.
        assert!(scratch.open().is_none());
        // The user must not touch its page any more; dropping it does not.
        drop(user);
        let turns = scratch.open().expect("rebuilt once nobody uses it");
        assert_eq!(turns.wait(in_ten_seconds()).ticket, Some(0));
    }

    #[test]
    fn a_file_owned_by_another_user_is_refused_and_untouched() {
        if !is_root() {
            return skipped(
                "a_file_owned_by_another_user_is_refused_and_untouched",
                "needs root to give a file to another user",
            );
        }
        let scratch = Scratch::new();
        std::fs::write(scratch.page_path(), page_image(7, 3)).unwrap();
        std::os::unix::fs::chown(scratch.page_path(), Some(54321), Some(54321)).unwrap();
        assert!(scratch.open().is_none());
        assert_eq!(
            std::fs::read(scratch.page_path()).unwrap(),
            page_image(7, 3)
        );
    }

    /// A tmpfs mounted for one test, unmounted on drop.
    struct Mount(tempfile::TempDir);

    impl Drop for Mount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg(self.0.path())
                .status();
        }
    }

    #[test]
    fn a_full_filesystem_means_no_turns() {
        let test = "a_full_filesystem_means_no_turns";
        if !is_root() {
            return skipped(test, "needs root to mount a small tmpfs");
        }
        let mount = Mount(tempfile::tempdir().unwrap());
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16k", "tmpfs"])
            .arg(mount.0.path())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            std::mem::forget(mount);
            return skipped(test, "cannot mount a tmpfs here");
        }
        // Fill it up.
        let mut filler = std::fs::File::create(mount.0.path().join("filler")).unwrap();
        while filler.write_all(&[0; 1024]).is_ok() {}
        let db = Scratch::new();
        assert!(Turns::open_in(mount.0.path(), &db.db).is_none());
        assert!(!page_path(mount.0.path(), &db.db).exists(), "left behind");
    }

    #[test]
    fn the_last_user_removes_the_file() {
        let scratch = Scratch::new();
        let (first, second) = (scratch.open().unwrap(), scratch.open().unwrap());
        drop(first);
        assert!(scratch.page_path().exists());
        drop(second);
        assert!(!scratch.page_path().exists());
    }

    #[test]
    fn a_forked_child_does_not_remove_the_file_its_parent_uses() {
        let scratch = Scratch::new();
        let turns = scratch.open().unwrap();
        // SAFETY: the child only unmaps, closes and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            drop(turns);
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(scratch.page_path().exists());
        // Still shared: a new opener is not alone and keeps the counters.
        drop(turns.wait(in_ten_seconds()));
        let other = scratch.open().unwrap();
        assert_eq!(other.page().next.load(Ordering::SeqCst), 1);
    }
}
