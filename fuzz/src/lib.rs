//! Helpers shared by tq's fuzz targets: a scratch directory per process that
//! is emptied on every iteration, and JSON texts (a generator driven by the
//! fuzzer's bytes, and an independent RFC 8259 checker used as the oracle
//! for what `Queue::push` must accept).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};

// ---------------------------------------------------------------------------
// Scratch directories

/// The per-process directory under which every iteration gets a fresh
/// `run/` directory. It lives on tmpfs (`/dev/shm`) when there is one, so
/// that SQLite's writes cost no disk I/O; `TQ_FUZZ_TMPDIR` overrides the
/// parent. Named after the target and the pid, so parallel jobs never share
/// one; directories left by processes that died (a crash aborts before
/// anything is cleaned) are removed when the next process starts, unless
/// `TQ_FUZZ_KEEP_FILES` is set.
pub struct Scratch {
    root: PathBuf,
    run: PathBuf,
}

static SCRATCH: OnceLock<Scratch> = OnceLock::new();

impl Scratch {
    /// The process's scratch directory for `target`, created on first use.
    pub fn get(target: &str) -> &'static Scratch {
        SCRATCH.get_or_init(|| {
            let parent = scratch_parent();
            let prefix = format!("tq-fuzz-{target}-");
            if std::env::var_os("TQ_FUZZ_KEEP_FILES").is_none() {
                remove_dead_process_dirs(&parent, &prefix);
            }
            let root = parent.join(format!("{prefix}{}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
            let scratch = Scratch {
                run: root.join("run"),
                root,
            };
            install_panic_note(scratch.run.clone());
            scratch
        })
    }

    /// The process's directory (which holds `run/`): for files that live as
    /// long as the process.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Empties and recreates this iteration's directory, and returns it.
    pub fn fresh(&self) -> &Path {
        self.clean();
        fs::create_dir(&self.run)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", self.run.display()));
        &self.run
    }

    /// Removes this iteration's directory and everything in it.
    pub fn clean(&self) {
        match fs::remove_dir_all(&self.run) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => panic!("cannot remove {}: {e}", self.run.display()),
        }
    }
}

fn scratch_parent() -> PathBuf {
    if let Some(dir) = std::env::var_os("TQ_FUZZ_TMPDIR") {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir()
        && fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
        && tempfile_probe(shm);
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn tempfile_probe(dir: &Path) -> bool {
    let probe = dir.join(format!("tq-fuzz-probe-{}", std::process::id()));
    let ok = fs::write(&probe, b"x").is_ok();
    let _ = fs::remove_file(&probe);
    ok
}

/// Removes `parent/PREFIX<pid>` directories whose process no longer exists.
fn remove_dead_process_dirs(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Chains a panic hook in front of libFuzzer's (which aborts): it says where
/// the failing iteration's files are, since they are left in place.
fn install_panic_note(run: PathBuf) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!(
            "tq-fuzz: the files of the failing iteration are left in {}",
            run.display()
        );
        previous(info);
    }));
}

/// Whether `TQ_FUZZ_TRACE` is set: the targets then print every operation
/// and its outcome to stderr (for reproducing a crash, not for fuzzing).
pub fn tracing() -> bool {
    static TRACING: OnceLock<bool> = OnceLock::new();
    *TRACING.get_or_init(|| std::env::var_os("TQ_FUZZ_TRACE").is_some())
}

/// Prints `what` and `outcome` when tracing.
pub fn trace<T: std::fmt::Debug>(what: impl std::fmt::Debug, outcome: &T) {
    if tracing() {
        eprintln!("tq-fuzz: {what:?} -> {outcome:?}");
    }
}

// ---------------------------------------------------------------------------
// JSON texts

/// Whether `text` is one JSON text as RFC 8259 defines it: optional
/// whitespace, one value, optional whitespace. Written independently of
/// serde_json (which tq uses) so that the fuzzer can hold tq to the RFC.
/// Iterative, so that deep nesting cannot overflow the stack.
pub fn is_json_text(text: &[u8]) -> bool {
    Checker { s: text, i: 0 }.text().is_some()
}

struct Checker<'a> {
    s: &'a [u8],
    i: usize,
}

impl Checker<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.i += 1)
    }

    fn text(&mut self) -> Option<()> {
        // Open containers, innermost last.
        let mut open: Vec<u8> = Vec::new();
        'value: loop {
            self.ws();
            match self.peek()? {
                b'{' => {
                    self.i += 1;
                    self.ws();
                    if self.eat(b'}').is_none() {
                        open.push(b'{');
                        self.member_key()?;
                        continue 'value;
                    }
                }
                b'[' => {
                    self.i += 1;
                    self.ws();
                    if self.eat(b']').is_none() {
                        open.push(b'[');
                        continue 'value;
                    }
                }
                b'"' => self.string()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return None,
            }
            // A value is complete: close containers or move to the next one.
            loop {
                self.ws();
                let Some(&inner) = open.last() else {
                    return (self.i == self.s.len()).then_some(());
                };
                match (self.peek()?, inner) {
                    (b',', b'[') => {
                        self.i += 1;
                        continue 'value;
                    }
                    (b',', b'{') => {
                        self.i += 1;
                        self.ws();
                        self.member_key()?;
                        continue 'value;
                    }
                    (b']', b'[') | (b'}', b'{') => {
                        self.i += 1;
                        open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// `"key" ws :` (the whitespace before the key is already skipped).
    fn member_key(&mut self) -> Option<()> {
        if self.peek()? != b'"' {
            return None;
        }
        self.string()?;
        self.ws();
        self.eat(b':')
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }

    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            self.i += 1;
                            for _ in 0..4 {
                                if !self.peek()?.is_ascii_hexdigit() {
                                    return None;
                                }
                                self.i += 1;
                            }
                        }
                        _ => return None,
                    }
                }
                0x00..=0x1f => return None,
                _ => self.i += 1,
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.eat(b'.').is_some() && self.digits() == 0 {
            return None;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }
}

/// Appends to `out` a valid JSON text built from the fuzzer's bytes:
/// objects, arrays, strings with every kind of escape (surrogate pairs and
/// lone surrogates included) and raw non-ASCII characters, numbers in every
/// form the grammar allows, literals, and whitespace between tokens.
pub fn json_value(u: &mut Unstructured, depth: u32, out: &mut String) -> Result<()> {
    ws(u, out)?;
    let kinds = if depth == 0 { 5 } else { 7 };
    match u.choose_index(kinds)? {
        0 => out.push_str("null"),
        1 => out.push_str(if u.arbitrary()? { "true" } else { "false" }),
        2 => json_number(u, out)?,
        3 | 4 => json_string(u, out)?,
        5 => {
            out.push('[');
            let n = u.int_in_range(0..=4)?;
            for k in 0..n {
                if k > 0 {
                    ws(u, out)?;
                    out.push(',');
                }
                json_value(u, depth - 1, out)?;
            }
            ws(u, out)?;
            out.push(']');
        }
        _ => {
            out.push('{');
            let n = u.int_in_range(0..=4)?;
            for k in 0..n {
                if k > 0 {
                    ws(u, out)?;
                    out.push(',');
                }
                ws(u, out)?;
                json_string(u, out)?;
                ws(u, out)?;
                out.push(':');
                json_value(u, depth - 1, out)?;
            }
            ws(u, out)?;
            out.push('}');
        }
    }
    ws(u, out)
}

/// A nest of `depth` arrays or objects around a scalar, closed or not.
pub fn json_nest(depth: usize, objects: bool, closed: bool) -> String {
    let (open, close) = if objects {
        ("{\"k\":", "}")
    } else {
        ("[", "]")
    };
    let mut out = String::with_capacity(depth * (open.len() + close.len()) + 1);
    for _ in 0..depth {
        out.push_str(open);
    }
    out.push('0');
    if closed {
        for _ in 0..depth {
            out.push_str(close);
        }
    }
    out
}

fn ws(u: &mut Unstructured, out: &mut String) -> Result<()> {
    if u.ratio(1, 4)? {
        for _ in 0..u.int_in_range(1..=3)? {
            out.push(*u.choose(&[' ', '\t', '\n', '\r'])?);
        }
    }
    Ok(())
}

fn json_number(u: &mut Unstructured, out: &mut String) -> Result<()> {
    if u.arbitrary()? {
        out.push('-');
    }
    if u.ratio(1, 4)? {
        out.push('0');
    } else {
        out.push_str(&u.int_in_range(1..=u64::MAX)?.to_string());
        if u.ratio(1, 8)? {
            // Longer than any integer type: still a JSON number.
            out.push_str("000000000000000000000000");
        }
    }
    if u.ratio(1, 3)? {
        out.push('.');
        out.push_str(&u.int_in_range(0..=999_999u32)?.to_string());
    }
    if u.ratio(1, 3)? {
        out.push(*u.choose(&['e', 'E'])?);
        out.push_str(u.choose(&["", "+", "-"])?);
        out.push_str(&u.int_in_range(0..=99_999u32)?.to_string());
    }
    Ok(())
}

fn json_string(u: &mut Unstructured, out: &mut String) -> Result<()> {
    out.push('"');
    for _ in 0..u.int_in_range(0..=12)? {
        match u.choose_index(8)? {
            0 => {
                out.push_str(u.choose(&["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"])?)
            }
            1 => {
                // Any \u escape: the grammar allows lone surrogates too.
                let unit: u16 = u.arbitrary()?;
                let upper: bool = u.arbitrary()?;
                if upper {
                    out.push_str(&format!("\\u{unit:04X}"));
                } else {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            2 => {
                // A surrogate pair.
                let hi = u.int_in_range(0xD800u16..=0xDBFF)?;
                let lo = u.int_in_range(0xDC00u16..=0xDFFF)?;
                out.push_str(&format!("\\u{hi:04x}\\u{lo:04x}"));
            }
            3 => {
                // Any character that needs no escape, non-ASCII included.
                let c: char = u.arbitrary()?;
                if c == '"' || c == '\\' || (c as u32) < 0x20 {
                    out.push('x');
                } else {
                    out.push(c);
                }
            }
            _ => match char::from(u.int_in_range(b' '..=b'~')?) {
                '"' | '\\' => out.push('_'),
                c => out.push(c),
            },
        }
    }
    out.push('"');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checker_follows_rfc_8259() {
        for ok in [
            "0",
            "-0",
            "-0.5e+7",
            "1E9",
            "123456789012345678901234567890",
            " \t\r\n[] ",
            "{}",
            "{\"a\":[1,{\"b\":null}],\"a\":true}",
            "\"\\u0000\\ud800\\uDFFF\\/\"",
            "\"é😀\"",
            "[[[[]]]]",
            "false",
        ] {
            assert!(is_json_text(ok.as_bytes()), "{ok:?} is JSON");
        }
        for bad in [
            "",
            " ",
            "01",
            "1.",
            ".5",
            "1e",
            "+1",
            "-",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":1,}",
            "{1:2}",
            "\"\u{1}\"",
            "\"\\x\"",
            "\"\\u12G4\"",
            "[1 2]",
            "1 2",
            "nul",
            "truefalse",
            "\u{feff}1",
            "[",
            "]",
            "[}",
            "NaN",
            "\"unterminated",
            "\x0b1",
        ] {
            assert!(!is_json_text(bad.as_bytes()), "{bad:?} is not JSON");
        }
    }

    #[test]
    fn generated_values_are_json() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..256)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let mut u = Unstructured::new(&bytes);
            let mut out = String::new();
            json_value(&mut u, 3, &mut out).unwrap();
            assert!(is_json_text(out.as_bytes()), "{out:?}");
        }
        assert!(is_json_text(json_nest(3000, false, true).as_bytes()));
        assert!(is_json_text(json_nest(3000, true, true).as_bytes()));
        assert!(!is_json_text(json_nest(5, true, false).as_bytes()));
    }
}
