//! The display form of a location, for bindings that show it in messages.

use std::ffi::c_char;

use super::{guard, out_pointer, tq_status, utf8_string, write_optional};
use crate::location::redacted_location;
use crate::queue::cut_at_char_boundary;

/// Locations: a file path or URL as messages may show it
/// =====================================================
///
/// A location as it may be shown, without its password.
///
/// Writes `location` (a file path or a URL, UTF-8) as it may be shown in
/// messages into `buf`: a URL without the password of its user information
/// and without any `password` query parameter; a file path unchanged. At
/// most `cap - 1` bytes are written (cut at a character boundary), then a
/// NUL; `*len` (when `len` is not NULL) receives the length of the whole
/// result without its NUL, so a result was cut when `*len >= cap`. With
/// `cap` 0, `buf` may be NULL and only `*len` is set: call once to learn
/// the size, then again with a buffer of `*len + 1` bytes.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL or non-UTF-8
/// `location`, NULL `buf` with `cap` above 0); then `buf` is untouched.
///
/// Ownership: `buf` belongs to the caller; tq keeps no pointer. Thread
/// safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn tq_location_redacted(
    location: *const c_char,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> tq_status {
    guard("tq_location_redacted", || {
        // SAFETY: the caller passes a NUL-terminated string or NULL.
        let location = unsafe { utf8_string(location, "location") }?;
        let shown = redacted_location(location);
        if cap > 0 {
            let buf = out_pointer(buf, "buf")?;
            let written = cut_at_char_boundary(&shown, cap - 1);
            // SAFETY: the caller's `buf` holds `cap` writable bytes, and
            // `written.len() < cap` leaves room for the NUL.
            unsafe {
                std::ptr::copy_nonoverlapping(written.as_ptr(), buf.cast::<u8>(), written.len());
                buf.add(written.len()).write(0);
            }
        }
        // SAFETY: a non-NULL `len` is writable per the contract above.
        unsafe { write_optional(len, shown.len()) };
        Ok(tq_status::TQ_OK)
    })
}
