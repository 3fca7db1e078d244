//! Where airlock keeps its files: `--db PATH`, else `AIRLOCK_DB`, else `$XDG_DATA_HOME/airlock/airlock.db`
//! (falling back to `~/.local/share/airlock/airlock.db`).

use std::path::{Path, PathBuf};

/// The data directory: `$XDG_DATA_HOME/airlock`, else `~/.local/share/airlock`.
pub fn data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("airlock");
    }
    home_dir().join(".local/share/airlock")
}

/// The user's home directory (`$HOME`, else the current directory).
pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The store location: explicit path, else `AIRLOCK_DB`, else the data directory.
pub fn db_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("AIRLOCK_DB").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    data_dir().join("airlock.db")
}

/// The node id: explicit, else `AIRLOCK_NODE_ID`, else the host name.
pub fn node_id(explicit: Option<&str>) -> String {
    if let Some(n) = explicit {
        return n.to_string();
    }
    if let Ok(n) = std::env::var("AIRLOCK_NODE_ID") {
        if !n.is_empty() {
            return n;
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
