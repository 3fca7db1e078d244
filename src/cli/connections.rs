//! The connection limits shared by the commands that serve HTTP (`relay`, `serve`).

use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::time::Duration;

/// How long clients may take and how many may be connected at once (the relay and `serve`).
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionArgs {
    /// A client must send a complete request head within this many milliseconds (on a new
    /// connection and between kept-alive requests), else the connection is closed.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub header_timeout_ms: u64,
    /// A connection on which the client sends nothing (no request in progress) is closed after
    /// this many milliseconds.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    pub keep_alive_timeout_ms: u64,
    /// A request body must keep arriving: each further 64 KiB of it (or its rest) within this
    /// many milliseconds (the relay: the whole body within it), else 408.
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    pub body_timeout_ms: u64,
    /// Connections served at once (lowered to fit `ulimit -n`); more clients wait for a free slot.
    #[arg(long, default_value_t = 512, value_name = "N")]
    pub max_connections: usize,
    /// Request bodies held in memory at once, all connections together, in MiB (serve: its JSON
    /// bodies; the relay: every body it forwards or queues). A request that finds them taken waits
    /// up to half the body timeout, then gets 503 with Retry-After.
    #[arg(long, default_value_t = crate::http_server::DEFAULT_BODY_MEMORY_MIB, value_name = "MIB")]
    pub max_body_memory_mib: u32,
}

impl ConnectionArgs {
    /// The limits, each at least 1.
    pub fn limits(&self) -> Result<crate::http_server::ConnectionLimits> {
        for (flag, v) in [
            ("--header-timeout-ms", self.header_timeout_ms),
            ("--keep-alive-timeout-ms", self.keep_alive_timeout_ms),
            ("--body-timeout-ms", self.body_timeout_ms),
            ("--max-connections", self.max_connections as u64),
            ("--max-body-memory-mib", u64::from(self.max_body_memory_mib)),
        ] {
            if v == 0 {
                return Err(eyre!("{flag} must be at least 1"));
            }
        }
        let most = crate::http_server::MAX_BODY_MEMORY_MIB;
        if self.max_body_memory_mib > most {
            return Err(eyre!(
                "--max-body-memory-mib must be at most {most} (1 TiB)"
            ));
        }
        Ok(crate::http_server::ConnectionLimits {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            keep_alive_timeout: Duration::from_millis(self.keep_alive_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            max_connections: self.max_connections,
            body_memory_mib: self.max_body_memory_mib,
        })
    }
}
