//! Versions: which library is loaded, for a program to compare with the
//! header's `TQ_VERSION*`.

use std::ffi::c_char;

use super::guard_or;

/// Versions: the version of the library loaded at run time
/// =======================================================
///
/// The library's version, as a string.
///
/// Returns the library's version as "MAJOR.MINOR.PATCH", a static string.
/// Compare with the header's `TQ_VERSION` to detect a mismatch.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn tq_version() -> *const c_char {
    guard_or("tq_version", c"".as_ptr(), || {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
    })
}

/// The library's version, as a number.
///
/// Returns the library's version as MAJOR * 10000 + MINOR * 100 + PATCH,
/// the same encoding as the header's `TQ_VERSION_NUMBER`.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn tq_version_number() -> u32 {
    const fn parse(digits: &str) -> u32 {
        let bytes = digits.as_bytes();
        let mut value = 0;
        let mut i = 0;
        while i < bytes.len() {
            value = value * 10 + (bytes[i] - b'0') as u32;
            i += 1;
        }
        value
    }
    const NUMBER: u32 = parse(env!("CARGO_PKG_VERSION_MAJOR")) * 10_000
        + parse(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + parse(env!("CARGO_PKG_VERSION_PATCH"));
    guard_or("tq_version_number", 0, || NUMBER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_number_matches_the_version_string() {
        let parts: Vec<u32> = crate::VERSION
            .split('.')
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(
            tq_version_number(),
            parts[0] * 10_000 + parts[1] * 100 + parts[2]
        );
    }
}
