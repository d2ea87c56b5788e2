//! The objects tq hands to C: allocated here, checked here on every use,
//! freed here.
//!
//! Every handle, task and options object lives in a `Box` whose address is
//! recorded, with its type, until it is freed. A pointer C passes back is
//! used only if it is recorded with the expected type, so a handle used
//! after `tq_close`, a task freed twice, or a task passed where a queue is
//! expected gets `TQ_ERR_INVALID_ARGUMENT` instead of undefined behaviour.
//! Detection is best effort: if the allocator has since reused the address
//! for a new object of the same type, the stale pointer reaches that
//! object.

use std::any::type_name;
use std::collections::BTreeMap;
use std::ffi::{c_char, CString};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::global_lock;

/// Addresses of live objects and the type each was allocated as. (A B-tree
/// rather than a hash table: its nodes are pointed to from their start, so
/// leak checkers see the map as reachable at exit.)
static LIVE: Mutex<BTreeMap<usize, &'static str>> = Mutex::new(BTreeMap::new());

/// The registry; fails only in a child forked while another thread was
/// inside a tq call (see `global_lock.rs`). Only inserts and removes happen
/// under the lock, so a poisoned lock is still sound.
fn live() -> Result<MutexGuard<'static, BTreeMap<usize, &'static str>>> {
    global_lock::lock(&LIVE)
}

/// The C name of `T` (`tq_queue`, `tq_task`, ...), for messages.
fn c_name<T>() -> &'static str {
    type_name::<T>().rsplit("::").next().unwrap_or("object")
}

/// Moves `object` to the heap, records it, and returns the pointer for C.
pub(super) fn hand_out<T>(object: T) -> Result<*mut T> {
    let object = Box::new(object);
    let mut live = live()?;
    let ptr = Box::into_raw(object);
    live.insert(ptr as usize, type_name::<T>());
    Ok(ptr)
}

/// [`hand_out`] for functions that return the pointer: NULL, with the
/// thread's last error set, when the object cannot be recorded.
pub(super) fn hand_out_or_null<T>(object: T) -> *mut T {
    hand_out(object).unwrap_or_else(|err| {
        super::fail(&err);
        std::ptr::null_mut()
    })
}

/// [`hand_out`] for several objects at once: all of them, or none.
pub(super) fn hand_out_all<T>(objects: Vec<T>) -> Result<Vec<*mut T>> {
    let objects: Vec<Box<T>> = objects.into_iter().map(Box::new).collect();
    let mut live = live()?;
    Ok(objects
        .into_iter()
        .map(|object| {
            let ptr = Box::into_raw(object);
            live.insert(ptr as usize, type_name::<T>());
            ptr
        })
        .collect())
}

fn check_live<T>(ptr: *const T, name: &str) -> Result<()> {
    super::non_null(ptr, name)?;
    match live()?.get(&(ptr as usize)) {
        Some(&recorded) if recorded == type_name::<T>() => Ok(()),
        Some(_) => Err(Error::invalid_argument(format!(
            "{name} points to another kind of tq object, not a {}",
            c_name::<T>()
        ))),
        None => Err(Error::invalid_argument(format!(
            "{name} is not a live {}: it was already freed or closed, or never came from tq",
            c_name::<T>()
        ))),
    }
}

/// The object behind a pointer from C, or an error naming the argument when
/// the pointer is NULL, freed, or of another type.
///
/// Safety: C must not free the object while this call uses it, as every
/// function's contract requires.
pub(super) unsafe fn borrow<'a, T>(ptr: *const T, name: &str) -> Result<&'a T> {
    check_live(ptr, name)?;
    // SAFETY: recorded as a live `T` allocated by `hand_out`.
    Ok(unsafe { &*ptr })
}

/// Mutable variant of [`borrow`], for the option setters.
///
/// Safety: as for `borrow`, and no other thread uses the object during the
/// call, as the options' contract says.
pub(super) unsafe fn borrow_mut<'a, T>(ptr: *mut T, name: &str) -> Result<&'a mut T> {
    check_live(ptr.cast_const(), name)?;
    // SAFETY: as above.
    Ok(unsafe { &mut *ptr })
}

/// Like [`borrow`], for an argument where NULL means "the defaults".
pub(super) unsafe fn borrow_optional<'a, T>(ptr: *const T, name: &str) -> Result<Option<&'a T>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: as for `borrow`.
    unsafe { borrow(ptr, name) }.map(Some)
}

/// What a string handed to C is recorded as: it is freed by
/// [`free_string`], never as an object.
const STRING: &str = "string from tq";

/// Hands `text` to C as a NUL-terminated string it frees with
/// `tq_string_free`, recorded like an object.
pub(super) fn hand_out_string(text: CString) -> Result<*mut c_char> {
    let mut live = live()?;
    let ptr = text.into_raw();
    live.insert(ptr as usize, STRING);
    Ok(ptr)
}

/// Frees a string from [`hand_out_string`], as [`free`] frees an object:
/// NULL is a no-op, a pointer that is not a live string is left alone and
/// reported as the thread's last error.
pub(super) fn free_string(ptr: *mut c_char) {
    if ptr.is_null() {
        return;
    }
    let removed = match live() {
        Ok(mut live) => {
            live.get(&(ptr as usize)) == Some(&STRING) && live.remove(&(ptr as usize)).is_some()
        }
        Err(err) => {
            super::fail(&err);
            return;
        }
    };
    if removed {
        // SAFETY: made by `CString::into_raw` in `hand_out_string`, and now
        // unrecorded, so no other call can reach it again.
        drop(unsafe { CString::from_raw(ptr) });
    } else {
        super::fail(&Error::invalid_argument(
            "the string is not a live string from tq: it was already freed, or never came \
             from tq",
        ));
    }
}

/// Frees an object from [`hand_out`]. NULL is a no-op; a pointer that is
/// not live (freed twice, or foreign) is left alone and reported as the
/// thread's last error. In a child forked while another thread held the
/// registry, the object is left allocated (a leak in a process that cannot
/// use tq anyway) and the error is reported.
pub(super) fn free<T>(ptr: *mut T, name: &str) {
    if ptr.is_null() {
        return;
    }
    let removed = {
        let mut live = match live() {
            Ok(live) => live,
            Err(err) => {
                super::fail(&err);
                return;
            }
        };
        match live.get(&(ptr as usize)) {
            Some(&recorded) if recorded == type_name::<T>() => {
                live.remove(&(ptr as usize)).is_some()
            }
            _ => false,
        }
    };
    if removed {
        // SAFETY: allocated by `hand_out` as a `T`, and now unrecorded, so
        // no other call can reach it again.
        drop(unsafe { Box::from_raw(ptr) });
    } else if let Err(err) = check_live(ptr.cast_const(), name) {
        super::fail(&err);
    }
}
