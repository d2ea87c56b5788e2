//! A test-only SQLite VFS that wraps the default unix VFS, registered as the
//! default in a child process so that every connection tq opens there goes
//! through it. It does one of two things:
//!
//! - **Power loss.** Every write and truncation reaches the real file at
//!   once (so reads, locks and shared memory behave as usual), and until
//!   the file is synced the VFS remembers the bytes it replaced. At the
//!   chosen sync the power fails instead: each write not yet synced is kept,
//!   dropped, or torn (each 512-byte sector kept or dropped on its own), as
//!   a disk's cache might leave it, and the process exits at once. What was
//!   synced stays. File creation and deletion are not simulated: they count
//!   as durable. A "lying" disk, which acknowledges a sync without
//!   flushing, stands for `synchronous=OFF` in the checker's own tests.
//! - **Crash.** SIGKILL at the chosen write or sync, before or after it
//!   runs: the process dies inside a commit, but what it wrote stays (the
//!   operating system keeps it).
//!
//! The shared-memory index (`-shm`) is not a durable file: SQLite rebuilds
//! it from the WAL after a crash, so it passes through untouched.

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use rusqlite::ffi;

use super::harness::Rng;

/// The exit status of a child whose power failed.
pub const POWER_LOST: i32 = 86;

/// What the VFS does to the process.
#[derive(Debug, Clone, Copy)]
pub enum Plan {
    /// Power fails at sync number `at` (from 1; never when `None`). From
    /// sync number `lie_from` on, syncs are acknowledged but flush nothing.
    PowerLoss {
        at: Option<u64>,
        loss: Loss,
        lie_from: Option<u64>,
    },
    /// SIGKILL at write-or-sync number `at` (from 1), before it runs or,
    /// with `after`, once it has.
    Crash { at: u64, after: bool },
}

/// What becomes of the writes not yet synced when the power fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// All reached the disk.
    Keep,
    /// None did.
    Drop,
    /// Each write, at random: kept, dropped, or torn by sector.
    Tear,
}

impl std::str::FromStr for Loss {
    type Err = String;
    fn from_str(text: &str) -> Result<Loss, String> {
        match text {
            "keep" => Ok(Loss::Keep),
            "drop" => Ok(Loss::Drop),
            "tear" => Ok(Loss::Tear),
            other => Err(format!("unknown loss {other}")),
        }
    }
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Loss::Keep => "keep",
            Loss::Drop => "drop",
            Loss::Tear => "tear",
        })
    }
}

const SECTOR: u64 = 512;

/// A change to a file not yet synced, with what it replaced.
enum Change {
    Write {
        path: String,
        offset: u64,
        old: Vec<u8>,
        new: Vec<u8>,
    },
    Truncate {
        path: String,
        size: u64,
        /// The bytes from `size` to the old end.
        old_tail: Vec<u8>,
    },
}

struct State {
    plan: Plan,
    rng: Rng,
    syncs: u64,
    io: u64,
    unsynced: Vec<Change>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The unix VFS that this one wraps.
static UNIX: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(ptr::null_mut());

/// Registers the VFS as the process's default, following `plan`. Must run
/// before the first connection opens.
pub fn install(plan: Plan, seed: u64) {
    *STATE.lock().unwrap() = Some(State {
        plan,
        rng: Rng::new(seed),
        syncs: 0,
        io: 0,
        unsynced: Vec::new(),
    });
    // SAFETY: the unix VFS lives as long as the process; the copy is
    // leaked, since SQLite keeps the pointer for as long too.
    unsafe {
        let unix = ffi::sqlite3_vfs_find(ptr::null());
        assert!(!unix.is_null(), "SQLite has a default VFS");
        UNIX.store(unix, Ordering::SeqCst);
        // The unix VFS's own methods serve everything but opening a file;
        // they read nothing of the VFS object but what is copied here.
        let mut vfs = *unix;
        vfs.zName = c"torture".as_ptr();
        vfs.pNext = ptr::null_mut();
        vfs.szOsFile = (HEADER + (*unix).szOsFile as usize) as c_int;
        vfs.xOpen = Some(open);
        let vfs = Box::leak(Box::new(vfs));
        assert_eq!(ffi::sqlite3_vfs_register(vfs, 1), ffi::SQLITE_OK);
    }
}

/// How many syncs the process has made.
pub fn syncs() -> u64 {
    STATE
        .lock()
        .unwrap()
        .as_ref()
        .map_or(0, |state| state.syncs)
}

/// Our file object: the unix file follows it in the same allocation.
#[repr(C)]
struct TortureFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    /// The file's path; null for temporary files, which need no tracking.
    path: *mut String,
}

const HEADER: usize = std::mem::size_of::<TortureFile>().next_multiple_of(16);

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 2: shared memory (WAL) but no memory mapping, as tq uses.
    iVersion: 2,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let unix = UNIX.load(Ordering::SeqCst);
    let wrap = file.cast::<TortureFile>();
    let inner = file.cast::<u8>().add(HEADER).cast::<ffi::sqlite3_file>();
    (*wrap).base.pMethods = ptr::null();
    let rc = ((*unix).xOpen.unwrap())(unix, name, inner, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        // SQLite will not close a file whose methods are null: close the
        // inner one here if it was opened half-way.
        if !(*inner).pMethods.is_null() {
            ((*(*inner).pMethods).xClose.unwrap())(inner);
        }
        return rc;
    }
    (*wrap).inner = inner;
    (*wrap).path = if name.is_null() {
        ptr::null_mut()
    } else {
        Box::into_raw(Box::new(
            CStr::from_ptr(name).to_string_lossy().into_owned(),
        ))
    };
    (*wrap).base.pMethods = &METHODS;
    ffi::SQLITE_OK
}

/// The unix file and its methods.
unsafe fn inner(
    file: *mut ffi::sqlite3_file,
) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
    let inner = (*file.cast::<TortureFile>()).inner;
    (inner, &*(*inner).pMethods)
}

unsafe fn path<'a>(file: *mut ffi::sqlite3_file) -> Option<&'a String> {
    (*file.cast::<TortureFile>()).path.as_ref()
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let (inner, methods) = inner(file);
    let rc = (methods.xClose.unwrap())(inner);
    let wrap = file.cast::<TortureFile>();
    if !(*wrap).path.is_null() {
        drop(Box::from_raw((*wrap).path));
        (*wrap).path = ptr::null_mut();
    }
    rc
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xRead.unwrap())(inner, buf, amount, offset)
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let (inner, methods) = inner(file);
    let mut guard = STATE.lock().unwrap();
    let state = guard.as_mut().expect("installed");
    let kill_after = state.tick_io();
    if let (Some(path), Plan::PowerLoss { .. }) = (path(file), state.plan) {
        // Remember what the write replaces; a short read fills with zeros.
        let mut old = vec![0u8; amount as usize];
        (methods.xRead.unwrap())(inner, old.as_mut_ptr().cast(), amount, offset);
        let new = std::slice::from_raw_parts(buf.cast::<u8>(), amount as usize).to_vec();
        state.unsynced.push(Change::Write {
            path: path.clone(),
            offset: offset as u64,
            old,
            new,
        });
    }
    let rc = (methods.xWrite.unwrap())(inner, buf, amount, offset);
    if kill_after {
        die();
    }
    rc
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let (inner, methods) = inner(file);
    let mut guard = STATE.lock().unwrap();
    let state = guard.as_mut().expect("installed");
    if let (Some(path), Plan::PowerLoss { .. }) = (path(file), state.plan) {
        let mut old_size = 0i64;
        (methods.xFileSize.unwrap())(inner, &mut old_size);
        let mut old_tail = vec![0u8; (old_size - size).max(0) as usize];
        if !old_tail.is_empty() {
            (methods.xRead.unwrap())(
                inner,
                old_tail.as_mut_ptr().cast(),
                old_tail.len() as c_int,
                size,
            );
        }
        state.unsynced.push(Change::Truncate {
            path: path.clone(),
            size: size as u64,
            old_tail,
        });
    }
    (methods.xTruncate.unwrap())(inner, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let (inner, methods) = inner(file);
    let mut guard = STATE.lock().unwrap();
    let state = guard.as_mut().expect("installed");
    let kill_after = state.tick_io();
    state.syncs += 1;
    if let Plan::PowerLoss { at, loss, lie_from } = state.plan {
        if at == Some(state.syncs) {
            power_loss(state, loss);
        }
        let lies = lie_from.is_some_and(|from| state.syncs >= from);
        if let (Some(path), false) = (path(file), lies) {
            state
                .unsynced
                .retain(|change| change.path() != path.as_str());
        }
    }
    // Under a power-loss plan the simulated disk is what counts: flushing
    // the real one would only cost time.
    let rc = match state.plan {
        Plan::PowerLoss { .. } => ffi::SQLITE_OK,
        Plan::Crash { .. } => (methods.xSync.unwrap())(inner, flags),
    };
    if kill_after {
        die();
    }
    rc
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xFileSize.unwrap())(inner, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xLock.unwrap())(inner, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xUnlock.unwrap())(inner, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xCheckReservedLock.unwrap())(inner, out)
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xFileControl.unwrap())(inner, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xSectorSize.unwrap())(inner)
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xDeviceCharacteristics.unwrap())(inner)
}

unsafe extern "C" fn shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xShmMap.unwrap())(inner, region, size, extend, out)
}

unsafe extern "C" fn shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xShmLock.unwrap())(inner, offset, n, flags)
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    let (inner, methods) = inner(file);
    (methods.xShmBarrier.unwrap())(inner)
}

unsafe extern "C" fn shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    let (inner, methods) = inner(file);
    (methods.xShmUnmap.unwrap())(inner, delete)
}

impl Change {
    fn path(&self) -> &str {
        match self {
            Change::Write { path, .. } | Change::Truncate { path, .. } => path,
        }
    }
}

impl State {
    /// Counts a write or sync; under a crash plan, kills the process at
    /// the chosen one, or returns true when it is to die right after.
    fn tick_io(&mut self) -> bool {
        self.io += 1;
        match self.plan {
            Plan::Crash { at, after } if at == self.io => {
                if !after {
                    die();
                }
                true
            }
            _ => false,
        }
    }
}

/// SIGKILL to this process: nothing after it runs.
fn die() -> ! {
    // SAFETY: signals this process; SIGKILL cannot be caught.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
        loop {
            libc::pause();
        }
    }
}

/// The power fails: the files go back to their last synced content, then
/// get the parts of the unsynced writes that `loss` says reached the disk,
/// in the order they were made; then the process ends at once.
fn power_loss(state: &mut State, loss: Loss) -> ! {
    let mut files: HashMap<String, Option<File>> = HashMap::new();
    let mut file = |path: &str| -> Option<File> {
        files
            .entry(path.to_owned())
            .or_insert_with(|| std::fs::OpenOptions::new().write(true).open(path).ok())
            .as_ref()
            .map(|f| f.try_clone().expect("clone a descriptor"))
    };
    for change in state.unsynced.iter().rev() {
        match change {
            Change::Write {
                path, offset, old, ..
            } => {
                if let Some(f) = file(path) {
                    f.write_all_at(old, *offset).expect("restore a write");
                }
            }
            Change::Truncate {
                path,
                size,
                old_tail,
            } => {
                if let Some(f) = file(path) {
                    f.write_all_at(old_tail, *size)
                        .expect("restore a truncation");
                }
            }
        }
    }
    for change in &state.unsynced {
        let verdict = match loss {
            Loss::Keep => 0,
            Loss::Drop => 1,
            Loss::Tear => state.rng.range(0, 2),
        };
        match change {
            Change::Write {
                path, offset, new, ..
            } => {
                let Some(f) = file(path) else { continue };
                let end = offset + new.len() as u64;
                let mut at = *offset;
                while at < end {
                    let sector_end = ((at / SECTOR) + 1) * SECTOR;
                    let piece = at..sector_end.min(end);
                    let kept = match verdict {
                        0 => true,
                        1 => false,
                        _ => state.rng.chance(0.5),
                    };
                    if kept {
                        let bytes =
                            &new[(piece.start - offset) as usize..(piece.end - offset) as usize];
                        f.write_all_at(bytes, piece.start).expect("replay a write");
                    }
                    at = piece.end;
                }
            }
            Change::Truncate { path, size, .. } => {
                if verdict == 0 || (verdict == 2 && state.rng.chance(0.5)) {
                    if let Some(f) = file(path) {
                        f.set_len(*size).expect("replay a truncation");
                    }
                }
            }
        }
    }
    // SAFETY: ends the process without running anything else of it.
    unsafe { libc::_exit(POWER_LOST) }
}
