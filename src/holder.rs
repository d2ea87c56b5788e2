//! Who holds a task: the identity of a process, and whether it is alive.
//!
//! Design: `docs/internals.md`, "Holders".

use std::fs;
use std::path::Path;

/// Where the kernel shows its processes.
const PROC: &str = "/proc";

/// The identity of one process on one boot of one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessId {
    pub boot_id: String,
    pub pid_namespace: String,
    pub pid: i64,
    /// Clock ticks after boot at which the process started (`/proc/PID/stat`
    /// field 22); 0 when unknown.
    pub start_time: i64,
}

/// What can be said of a recorded holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    Alive,
    Dead,
    /// Cannot be judged from here; treated as alive.
    Unknown,
}

impl ProcessId {
    /// The calling process. Read afresh on each call, so a child after
    /// `fork()` gets its own identity.
    pub fn current() -> ProcessId {
        let pid = std::process::id() as i64;
        ProcessId {
            boot_id: boot_id(),
            pid_namespace: pid_namespace("self"),
            pid,
            start_time: read_stat(Path::new(PROC), pid)
                .map(|s| s.start_time)
                .unwrap_or(0),
        }
    }

    /// Whether the process `self` names is still running, judged by `observer`.
    pub fn liveness(&self, observer: &ProcessId) -> Liveness {
        self.liveness_in(Path::new(PROC), observer)
    }

    /// [`ProcessId::liveness`], reading processes under `proc` (a mount of
    /// procfs).
    fn liveness_in(&self, proc: &Path, observer: &ProcessId) -> Liveness {
        if !self.is_known() || !observer.is_known() {
            // A part of either identity could not be read from /proc, so a
            // mismatch would prove nothing: leave the tasks to their leases.
            return Liveness::Unknown;
        }
        if self.boot_id != observer.boot_id {
            // Same file, another boot: every process of that boot is gone.
            return Liveness::Dead;
        }
        if self.pid_namespace != observer.pid_namespace {
            return Liveness::Unknown;
        }
        match read_stat(proc, self.pid) {
            // Missing from /proc is not proof: with hidepid=2, other users'
            // processes are hidden. Only the kernel's "no such process" is.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                if exists(self.pid) {
                    Liveness::Unknown
                } else {
                    Liveness::Dead
                }
            }
            Err(_) => Liveness::Unknown,
            Ok(stat) if stat.start_time != self.start_time || stat.zombie => Liveness::Dead,
            Ok(_) => Liveness::Alive,
        }
    }
}

impl ProcessId {
    /// Whether every part of the identity was read.
    fn is_known(&self) -> bool {
        !self.boot_id.is_empty() && !self.pid_namespace.is_empty() && self.start_time != 0
    }
}

fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn pid_namespace(which: &str) -> String {
    fs::read_link(format!("/proc/{which}/ns/pid"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether a process with this pid exists in the caller's pid namespace,
/// whoever owns it: `kill(pid, 0)` sends nothing and fails with `ESRCH`
/// only when there is none (`EPERM` means it exists).
fn exists(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        // 0 and negative pids name process groups, not one process.
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

struct Stat {
    start_time: i64,
    zombie: bool,
}

fn read_stat(proc: &Path, pid: i64) -> std::io::Result<Stat> {
    let text = fs::read_to_string(proc.join(pid.to_string()).join("stat"))?;
    parse_stat(&text).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "unreadable /proc stat")
    })
}

/// Parses `/proc/PID/stat`. The command name (field 2) is in parentheses
/// and may itself hold spaces and parentheses, so fields are counted from
/// the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let after_name = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
    Some(Stat {
        zombie: matches!(*fields.first()?, "Z" | "X"),
        start_time: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_command_name() {
        let line =
            "1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.start_time, 987654);
        assert!(!stat.zombie);
        let zombie = line.replace(") S ", ") Z ");
        assert!(parse_stat(&zombie).unwrap().zombie);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn current_process_is_alive_and_a_reused_pid_is_not() {
        let me = ProcessId::current();
        assert!(me.start_time > 0, "start time read from /proc");
        assert_eq!(me.liveness(&me), Liveness::Alive);
        let reused = ProcessId {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert_eq!(reused.liveness(&me), Liveness::Dead);
        let other_boot = ProcessId {
            boot_id: "another boot".into(),
            ..me.clone()
        };
        assert_eq!(other_boot.liveness(&me), Liveness::Dead);
        let other_namespace = ProcessId {
            pid_namespace: "pid:[1]".into(),
            ..me.clone()
        };
        assert_eq!(other_namespace.liveness(&me), Liveness::Unknown);
    }

    #[test]
    fn a_live_process_missing_from_proc_is_never_judged_dead() {
        // A procfs mounted with hidepid=2 shows only the observer's own
        // processes: an empty directory stands for it here.
        let hidden = tempfile::tempdir().unwrap();
        let me = ProcessId::current();
        let parent = ProcessId {
            pid: i64::from(std::os::unix::process::parent_id()),
            ..me.clone()
        };
        assert_ne!(parent.liveness_in(hidden.path(), &me), Liveness::Dead);

        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = ProcessId {
            pid: i64::from(child.id()),
            ..me.clone()
        };
        child.wait().unwrap();
        assert_eq!(gone.liveness_in(hidden.path(), &me), Liveness::Dead);
    }

    #[test]
    fn an_identity_read_only_in_part_is_never_judged_dead() {
        let me = ProcessId::current();
        let dead_if_known = ProcessId {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert_eq!(dead_if_known.liveness(&me), Liveness::Dead);
        for unknown in [
            ProcessId {
                boot_id: String::new(),
                ..dead_if_known.clone()
            },
            ProcessId {
                pid_namespace: String::new(),
                ..dead_if_known.clone()
            },
            ProcessId {
                start_time: 0,
                ..dead_if_known.clone()
            },
        ] {
            assert_eq!(unknown.liveness(&me), Liveness::Unknown, "{unknown:?}");
            assert_eq!(
                me.liveness(&unknown),
                Liveness::Unknown,
                "observer {unknown:?}"
            );
        }
    }
}
