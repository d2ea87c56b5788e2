//! The page of memory the processes using a file share: its layout (the
//! turns' counters and the wake words) and its mapping.
//!
//! Design: `docs/internals.md`, "The page shared by processes".

use std::fs::{File, Metadata};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Futex words for the waiters, one per ticket modulo this.
pub(super) const BELLS: u32 = 64;

/// Counters for the queues, one per queue name modulo this: one per bit of
/// a futex bitset, but for the bit that wakes every watcher (`wake.rs`).
pub(super) const QUEUE_WORDS: usize = 31;

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
    turns: TurnWords,
    wake: WakeWords,
}

/// The counters of the turns at the write lock (see `turns.rs`).
#[repr(C)]
pub(super) struct TurnWords {
    /// The next ticket to hand out.
    pub(super) next: AtomicU32,
    /// The ticket whose turn it is.
    pub(super) serving: AtomicU32,
    /// The waiter of a ticket sleeps on its bell, which is rung when the
    /// ticket comes next in line and when its turn comes.
    pub(super) bells: [AtomicU32; BELLS as usize],
    /// Per bell, the last ticket whose waiter left the line, as
    /// `gone_mark` of it (0: none; see `turns.rs`).
    pub(super) gone: [AtomicU64; BELLS as usize],
}

/// The wake words (see `wake.rs`).
#[repr(C)]
pub(super) struct WakeWords {
    /// Bumped by every ring: the watchers sleep on it.
    pub(super) file: AtomicU32,
    /// How many watchers sleep on `file`, or are about to.
    pub(super) sleepers: AtomicU32,
    /// Bumped by every ring of a queue whose name hashes here.
    pub(super) queues: [AtomicU32; QUEUE_WORDS],
}

impl Page {
    /// Writes a fresh header and empty counters; only while nobody else
    /// uses the page.
    fn reset(&self) {
        self.turns.reset();
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

impl TurnWords {
    /// Clears every counter; only while nobody else uses the page.
    fn reset(&self) {
        self.next.store(0, Ordering::SeqCst);
        self.serving.store(0, Ordering::SeqCst);
        for word in &self.bells {
            word.store(0, Ordering::SeqCst);
        }
        for word in &self.gone {
            word.store(0, Ordering::SeqCst);
        }
    }
}

impl WakeWords {
    /// Clears every word; only while nobody else uses the page.
    fn reset(&self) {
        self.file.store(0, Ordering::SeqCst);
        self.sleepers.store(0, Ordering::SeqCst);
        for word in &self.queues {
            word.store(0, Ordering::SeqCst);
        }
    }
}

/// This process's mapping of the page shared by the users of one database
/// file.
pub(super) struct SharedPage {
    page: NonNull<Page>,
    /// Holds the shared lock that says this process uses the page.
    file: File,
    path: PathBuf,
    /// The process that opened it: only it removes the file.
    opener: u32,
}

// SAFETY: the mapping is only reached through atomics, from any thread.
unsafe impl Send for SharedPage {}
unsafe impl Sync for SharedPage {}

impl SharedPage {
    /// Maps the page of the database file at `db_path`, creating it if
    /// needed; `None` when that is not possible or not safe.
    pub(super) fn open(db_path: &str) -> Option<SharedPage> {
        // stat(), never open(): see SQLITE-NOTES on POSIX locks.
        let db = std::fs::metadata(db_path).ok()?;
        SharedPage::open_in(Path::new(SHARED_MEMORY_DIR), &db)
    }

    /// [`SharedPage::open`] with the page's file in `dir`, for the database
    /// file `db`.
    fn open_in(dir: &Path, db: &Metadata) -> Option<SharedPage> {
        let path = page_path(dir, db);
        // A retry follows a last user removing the file just after it was
        // opened here; three in a row would take a storm of closers.
        for _ in 0..3 {
            match SharedPage::try_open(&path, db) {
                Opened::Page(page) => return Some(page),
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
        let Some(page) = SharedPage::map(file, path) else {
            return Opened::Refused;
        };
        if alone {
            page.page().reset();
            // Not atomic: another opener may find itself alone in between
            // and reset the page again, harmless as this process has not
            // waited yet (its lock waits for that opener's reset).
            if !flock(&page.file, libc::LOCK_SH) {
                return Opened::Refused;
            }
        } else if !page.page().header_is_valid() {
            return Opened::Refused;
        }
        Opened::Page(page)
    }

    /// Maps `file` when it is exactly one page long.
    fn map(file: File, path: &Path) -> Option<SharedPage> {
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
        let page = SharedPage {
            page: NonNull::new(address.cast())?,
            file,
            path: path.to_owned(),
            opener: std::process::id(),
        };
        // Its owner may have shrunk it in between.
        has_page_len(&page.file).then_some(page)
    }

    fn page(&self) -> &Page {
        // SAFETY: mapped for the life of `self`, page-aligned, and only
        // accessed through atomics.
        unsafe { self.page.as_ref() }
    }

    /// The counters of the turns at the write lock (see `turns.rs`).
    pub(super) fn turns(&self) -> &TurnWords {
        &self.page().turns
    }

    /// The wake words of the page (see `wake.rs`).
    pub(super) fn wake_words(&self) -> &WakeWords {
        &self.page().wake
    }
}

impl Drop for SharedPage {
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

/// The page's file in `dir` for the database file `db`.
fn page_path(dir: &Path, db: &Metadata) -> PathBuf {
    dir.join(format!("tq-turns-{:x}-{:x}", db.dev(), db.ino()))
}

/// What one attempt at opening the page gave.
enum Opened {
    Page(SharedPage),
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

/// A directory for the page's file, with a database file in it, for tests.
#[cfg(test)]
pub(super) struct Scratch {
    dir: tempfile::TempDir,
    db: Metadata,
}

#[cfg(test)]
impl Scratch {
    pub(super) fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let db_path = dir.path().join("db");
        std::fs::write(&db_path, "").unwrap();
        let db = std::fs::metadata(&db_path).unwrap();
        Scratch { dir, db }
    }

    /// Maps the page, as a process of its own would.
    pub(super) fn open(&self) -> Option<SharedPage> {
        SharedPage::open_in(self.dir.path(), &self.db)
    }

    fn page_path(&self) -> PathBuf {
        page_path(self.dir.path(), &self.db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Whether the turns' line is empty, as on a fresh page: the next
    /// ticket is served at once.
    fn has_an_empty_line(page: &SharedPage) -> bool {
        let turns = page.turns();
        turns.next.load(Ordering::SeqCst) == 0 && turns.serving.load(Ordering::SeqCst) == 0
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
    fn the_words_lie_where_every_process_of_this_layout_looks_for_them() {
        // Processes of other builds share the page when its header agrees:
        // a layout that moves a word must change `LAYOUT`.
        use std::mem::offset_of;
        let turns = offset_of!(Page, turns);
        assert_eq!(turns + offset_of!(TurnWords, next), 16);
        assert_eq!(turns + offset_of!(TurnWords, serving), 20);
        assert_eq!(turns + offset_of!(TurnWords, bells), 24);
        assert_eq!(turns + offset_of!(TurnWords, gone), 280);
        assert_eq!(offset_of!(Page, wake), 792);
        assert_eq!(offset_of!(Page, wake) + offset_of!(WakeWords, queues), 800);
    }

    #[test]
    fn an_opener_alone_clears_the_counters_a_crash_left() {
        let scratch = Scratch::new();
        // Five holes left in the line by processes that died.
        std::fs::write(scratch.page_path(), page_image(5, 0)).unwrap();
        let page = scratch.open().unwrap();
        assert!(has_an_empty_line(&page));
    }

    #[test]
    fn the_page_is_allocated_with_a_header_and_the_databases_permissions() {
        let scratch = Scratch::new();
        let db_path = scratch.dir.path().join("db");
        std::fs::set_permissions(&db_path, PermissionsExt::from_mode(0o660)).unwrap();
        let db = std::fs::metadata(&db_path).unwrap();
        let page = SharedPage::open_in(scratch.dir.path(), &db).unwrap();
        let file = std::fs::metadata(page_path(scratch.dir.path(), &db)).unwrap();
        assert_eq!(file.mode() & 0o777, 0o660);
        assert_eq!(file.len(), MAPPED_LEN as u64);
        assert!(file.blocks() * 512 >= MAPPED_LEN as u64, "sparse");
        assert!(page.page().header_is_valid());
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
            let page = scratch.open().expect("rebuilt");
            assert!(page.page().header_is_valid());
            let file = std::fs::metadata(scratch.page_path()).unwrap();
            assert_eq!(file.len(), MAPPED_LEN as u64);
            assert!(has_an_empty_line(&page));
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
        let page = scratch.open().expect("rebuilt once nobody uses it");
        assert!(page.page().header_is_valid());
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
        let page = scratch.open().expect("rebuilt once nobody uses it");
        assert!(has_an_empty_line(&page));
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
        assert!(SharedPage::open_in(mount.0.path(), &db.db).is_none());
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
        let page = scratch.open().unwrap();
        // SAFETY: the child only unmaps, closes and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            drop(page);
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(scratch.page_path().exists());
        // Still shared: a new opener is not alone and keeps the counters
        // (a ticket taken).
        page.turns().next.fetch_add(1, Ordering::SeqCst);
        let other = scratch.open().unwrap();
        assert_eq!(other.turns().next.load(Ordering::SeqCst), 1);
    }
}
