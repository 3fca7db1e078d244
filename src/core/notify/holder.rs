//! Who holds a delivery's claim: the host (name, boot id, PID namespace) and the process (pid and
//! start time) of the runner that claimed it, recorded beside the claim so that the next runner on
//! the same host can tell a claimer that is gone (SIGKILL, crash) from one still sending.
//!
//! A holder is *provably gone* only when it ran on this host (same host name, same boot id, same PID
//! namespace: a container's pids are not the host's) and its process no longer exists: `kill(pid, 0)`
//! says there is no such process, or `/proc/PID/stat` shows another process under the same pid (its
//! start time, field 22, differs: the pid was reused) or a zombie. Anything less certain (another
//! host, as on a shared PostgreSQL store; a holder recorded without these fields; a system without
//! `/proc`, a process that `kill` finds but whose `/proc/PID` is hidden from this one: another user's
//! under `hidepid=2` or `ProtectProc=invisible`) is not gone: its claim keeps the lease.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The claimer of a delivery, as recorded in `notify_deliveries.claim_holder` (compact JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Host name.
    pub host: String,
    /// `/proc/sys/kernel/random/boot_id` (changes at each boot), when readable.
    pub boot: Option<String>,
    /// The PID namespace (`/proc/self/ns/pid`, e.g. `pid:[4026531836]`), when readable.
    pub pidns: Option<String>,
    pub pid: u32,
    /// Start time of the process in clock ticks after boot (`/proc/PID/stat` field 22).
    pub start: Option<u64>,
}

impl Holder {
    /// This process (computed once).
    pub fn current() -> &'static Holder {
        static CURRENT: OnceLock<Holder> = OnceLock::new();
        CURRENT.get_or_init(|| {
            let pid = std::process::id();
            Holder {
                host: host_name(),
                boot: read_trimmed("/proc/sys/kernel/random/boot_id"),
                pidns: std::fs::read_link("/proc/self/ns/pid")
                    .ok()
                    .map(|p| p.display().to_string()),
                pid,
                start: proc_stat(pid).ok().flatten().map(|s| s.start),
            }
        })
    }

    /// The recorded text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A recorded holder (`None` when the text is not one).
    pub fn parse(text: &str) -> Option<Holder> {
        serde_json::from_str(text).ok()
    }

    /// Whether this holder ran on the same host, boot and PID namespace as this process (so its
    /// pid can be looked up here).
    pub fn is_on_this_host(&self) -> bool {
        let me = Holder::current();
        self.host == me.host
            && self.boot.is_some()
            && self.boot == me.boot
            && self.pidns.is_some()
            && self.pidns == me.pidns
    }

    /// The holder ran on this host and its process no longer exists (see the module text).
    pub fn is_gone(&self) -> bool {
        let Some(start) = self.start else {
            return false;
        };
        if !self.is_on_this_host() || self.pid == 0 || self.pid > i32::MAX as u32 {
            return false;
        }
        gone_by(start, &|| process_exists(self.pid), &|| proc_stat(self.pid))
    }
}

/// Whether a holder that started at `start` is gone, from `exists` (`kill(pid, 0)`) and `stat`
/// (its `/proc/PID/stat`). A `/proc/PID` that is missing while `kill` still finds the process is
/// one this process may not see (`hidepid=2`, systemd's `ProtectProc=invisible`: another user's
/// process), not a process that is gone.
fn gone_by(
    start: u64,
    exists: &dyn Fn() -> bool,
    stat: &dyn Fn() -> Result<Option<ProcStat>, ()>,
) -> bool {
    if !exists() {
        return true;
    }
    match stat() {
        // Gone between the two looks, or hidden from this process: asked again.
        Ok(None) => !exists(),
        Ok(Some(s)) => s.start != start || matches!(s.state, 'Z' | 'X' | 'x'),
        // Unreadable (not Linux, hidepid=1): not provably gone.
        Err(()) => false,
    }
}

/// A recorded claim holder's text is provably gone (see [`Holder::is_gone`]); unparsable text is not.
pub fn holder_gone(text: &str) -> bool {
    Holder::parse(text).is_some_and(|h| h.is_gone())
}

/// How a holder is shown in reasons: `pid 1234 on edge-1`.
pub fn describe(text: &str) -> String {
    match Holder::parse(text) {
        Some(h) => format!("pid {} on {}", h.pid, h.host),
        None => "an unknown process".into(),
    }
}

fn host_name() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
        .or_else(|| read_trimmed("/etc/hostname"))
        .unwrap_or_else(|| "localhost".into())
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `kill(pid, 0)`: false only when there is no such process (ESRCH); a process of another user
/// (EPERM) exists.
fn process_exists(pid: u32) -> bool {
    #[cfg(unix)]
    {
        // SAFETY: signal 0 sends nothing; it only checks that the process exists.
        let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// The state and start time of a process from `/proc/PID/stat`.
struct ProcStat {
    state: char,
    start: u64,
}

/// `Ok(None)`: no such process; `Err`: cannot tell (no `/proc`, unreadable, unexpected format).
fn proc_stat(pid: u32) -> Result<Option<ProcStat>, ()> {
    let text = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(t) => t,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && std::path::Path::new("/proc/self/stat").exists() =>
        {
            return Ok(None)
        }
        Err(_) => return Err(()),
    };
    parse_stat(&text).map(Some).ok_or(())
}

/// Field 3 (state) and field 22 (starttime) of a `/proc/PID/stat` line; the command name (field
/// 2) is in parentheses and may hold spaces and parentheses, so fields are counted after the last `)`.
fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let line =
            "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.state, s.start), ('S', 987654));
        assert!(parse_stat("garbage").is_none());
    }

    /// A process `kill` still finds but whose `/proc/PID` this process cannot see (another user's,
    /// under `hidepid=2` or systemd's `ProtectProc=invisible`) is not gone: its claim keeps its
    /// lease (it used to be taken over while that runner was still sending). One that `kill` no
    /// longer finds after the missing `/proc` entry is.
    #[test]
    fn a_process_hidden_from_proc_is_not_gone() {
        let hidden = || Ok(None);
        assert!(!gone_by(7, &|| true, &hidden));
        let looks = std::cell::Cell::new(0);
        let exits_between = || {
            looks.set(looks.get() + 1);
            looks.get() == 1
        };
        assert!(gone_by(7, &exits_between, &hidden));
        assert!(gone_by(7, &|| false, &|| Err(())));
        assert!(!gone_by(7, &|| true, &|| Err(())));
        let stat = |state, start| move || Ok(Some(ProcStat { state, start }));
        assert!(!gone_by(7, &|| true, &stat('S', 7)));
        assert!(gone_by(7, &|| true, &stat('S', 8)));
        assert!(gone_by(7, &|| true, &stat('Z', 7)));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_not_gone_but_a_dead_or_reused_pid_is() {
        let me = Holder::current().clone();
        assert!(me.start.is_some() && me.boot.is_some(), "{me:?}");
        assert!(!holder_gone(&me.to_text()), "this process is alive");
        // The same pid with another start time: the pid was reused, the holder is gone.
        let reused = Holder {
            start: me.start.map(|s| s + 1),
            ..me.clone()
        };
        assert!(holder_gone(&reused.to_text()));
        // A process that exited (and was reaped).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = proc_stat(pid).ok().flatten().map(|s| s.start).unwrap_or(0);
        child.wait().unwrap();
        let dead = Holder {
            pid,
            start: Some(start),
            ..me.clone()
        };
        assert!(holder_gone(&dead.to_text()));
        // Another host (or boot, or PID namespace), or a holder without a start time: never
        // provably gone, whatever its pid.
        for other in [
            Holder {
                host: format!("{}-other", me.host),
                ..dead.clone()
            },
            Holder {
                boot: Some("00000000-0000-0000-0000-000000000000".into()),
                ..dead.clone()
            },
            Holder {
                pidns: Some("pid:[1]".into()),
                ..dead.clone()
            },
            Holder {
                start: None,
                ..dead.clone()
            },
        ] {
            assert!(!holder_gone(&other.to_text()), "{other:?}");
        }
        assert!(!holder_gone("not a holder"));
    }
}
