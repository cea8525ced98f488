//! The daemon's sections of the configuration file: `[daemon]`, `[spamd]`, `[control]` and
//! `[http]` (the `[milter]` section lives in `milter_config.rs`, owned by the milter).
//!
//! Every listener defaults to loopback or a unix socket in the runtime directory, so that
//! `spamnb daemon` runs on a fresh machine with no configuration at all.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::listen::Address;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `[daemon]`: what every protocol shares.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// `text` or `json` (one object a line, for log shippers).
    pub log_format: LogFormat,
    /// Open connections, all protocols together; beyond it new ones are closed at once.
    pub max_connections: usize,
    /// Messages being scored or learned at once; further sessions wait for a slot.
    pub max_sessions: usize,
    /// Seconds a client may stay silent while the daemon waits for its next bytes.
    pub read_timeout: u64,
    /// Seconds one whole request (or milter message) may take from its first byte.
    pub session_timeout: u64,
    /// Seconds SIGTERM waits for open sessions to finish before the daemon exits anyway.
    pub drain_timeout: u64,
    /// Directory for the default unix sockets; default: $RUNTIME_DIRECTORY (systemd),
    /// else $XDG_RUNTIME_DIR/spamnb, else /run/spamnb for root, else /tmp/spamnb-UID.
    pub runtime_dir: Option<PathBuf>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            log_format: LogFormat::Text,
            max_connections: 4096,
            max_sessions: 64,
            read_timeout: 10,
            session_timeout: 60,
            drain_timeout: 30,
            runtime_dir: None,
        }
    }
}

impl DaemonConfig {
    pub fn read_timeout(&self) -> Duration {
        Duration::from_secs(self.read_timeout)
    }

    pub fn session_timeout(&self) -> Duration {
        Duration::from_secs(self.session_timeout)
    }

    pub fn drain_timeout(&self) -> Duration {
        Duration::from_secs(self.drain_timeout)
    }

    /// Where default sockets go; see [`DaemonConfig::runtime_dir`].
    pub fn runtime_dir(&self) -> PathBuf {
        if let Some(dir) = &self.runtime_dir {
            return dir.clone();
        }
        if let Some(dir) = std::env::var_os("RUNTIME_DIRECTORY").filter(|d| !d.is_empty()) {
            // systemd may list several, separated by colons; the first is ours.
            let first = dir
                .to_string_lossy()
                .split(':')
                .next()
                .unwrap_or_default()
                .to_string();
            return PathBuf::from(first);
        }
        if let Some(dir) = dirs::runtime_dir() {
            return dir.join("spamnb");
        }
        let uid = uid();
        if uid == 0 {
            PathBuf::from(SYSTEM_RUNTIME_DIR)
        } else {
            std::env::temp_dir().join(format!("spamnb-{uid}"))
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        // Upper bounds too: past them a number passed the check and then failed where it
        // was used (a semaphore's permits, a deadline past what a clock can hold).
        const DAY: u64 = 24 * 3600;
        for (name, value, most) in [
            (
                "daemon.max_connections",
                self.max_connections as u64,
                1_000_000,
            ),
            ("daemon.max_sessions", self.max_sessions as u64, 100_000),
            ("daemon.read_timeout", self.read_timeout, DAY),
            ("daemon.session_timeout", self.session_timeout, DAY),
        ] {
            if value == 0 {
                return Err(format!("{name} must be at least 1"));
            }
            if value > most {
                return Err(format!("{name} must be at most {most}, not {value}"));
            }
        }
        if self.drain_timeout > DAY {
            return Err(format!(
                "daemon.drain_timeout must be at most {DAY}, not {}",
                self.drain_timeout
            ));
        }
        Ok(())
    }
}

/// The system daemon's runtime directory: systemd's `RuntimeDirectory=` under the shipped
/// unit, root's default, and where the commands look for the daemon last.
pub(crate) const SYSTEM_RUNTIME_DIR: &str = "/run/spamnb";

/// Whether `dir` is a directory (not a link to one) that this user owns and no one else
/// may write in: the daemon serves its default sockets from no other, and a client trusts
/// no other, since a name like /tmp/spamnb-UID is anyone's to take first.
pub(crate) fn is_private_dir(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid() && m.mode() & 0o022 == 0)
}

/// This process's effective user id: whose files it may write, and who owns those it makes.
pub(crate) fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `[spamd]`: SpamAssassin's protocol, for spamc, Exim and spamass-milter.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpamdConfig {
    /// Addresses; default: inet:127.0.0.1:783 (where spamc looks; bound only when the
    /// daemon may) and unix:RUNTIME_DIR/spamd.sock.
    #[serde(deserialize_with = "super::listen::some_one_or_many")]
    pub listen: Option<Vec<Address>>,
    /// Whether TCP clients may TELL (learn); the unix sockets always may.
    pub allow_tell: bool,
    /// Largest message accepted, in bytes; a larger one is refused and spamc passes it on.
    pub max_message_bytes: usize,
}

impl Default for SpamdConfig {
    fn default() -> Self {
        SpamdConfig {
            listen: None,
            allow_tell: false,
            max_message_bytes: 4 << 20,
        }
    }
}

/// `[control]`: the local socket through which `spamnb learn` and `spamnb check` reach a
/// running daemon that holds the database.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// A unix socket; default unix:RUNTIME_DIR/control.sock.
    pub listen: Option<Address>,
}

/// `[http]`: Prometheus metrics at /metrics and a health check at /health.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Default inet:127.0.0.1:9783 (bound only when free); "" turns it off.
    pub listen: Option<String>,
}

/// The listeners the daemon binds, resolved from the sections and their defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Bind {
    pub address: Address,
    /// A default the user did not ask for: failing to bind it is a warning, not an error.
    pub optional: bool,
}

pub const DEFAULT_HTTP: &str = "inet:127.0.0.1:9783";
pub const DEFAULT_SPAMD_TCP: &str = "inet:127.0.0.1:783";

impl SpamdConfig {
    pub fn binds(&self, runtime: &std::path::Path) -> Vec<Bind> {
        match &self.listen {
            Some(list) => list
                .iter()
                .map(|a| Bind {
                    address: a.clone(),
                    optional: false,
                })
                .collect(),
            None => vec![
                Bind {
                    address: DEFAULT_SPAMD_TCP
                        .parse()
                        .expect("the default spamd address parses"),
                    optional: true,
                },
                Bind {
                    address: Address::Unix(runtime.join("spamd.sock")),
                    optional: false,
                },
            ],
        }
    }
}

impl ControlConfig {
    pub fn address(&self, runtime: &std::path::Path) -> Address {
        self.listen
            .clone()
            .unwrap_or_else(|| Address::Unix(runtime.join("control.sock")))
    }
}

impl HttpConfig {
    pub fn bind(&self) -> Result<Option<Bind>, String> {
        match self.listen.as_deref() {
            None => Ok(Some(Bind {
                address: DEFAULT_HTTP
                    .parse()
                    .expect("the default http address parses"),
                optional: true,
            })),
            Some("") => Ok(None),
            Some(a) => Ok(Some(Bind {
                address: a.parse()?,
                optional: false,
            })),
        }
    }
}

/// Checks the daemon's sections of a configuration file (called by `Config::parse`).
pub fn validate(
    daemon: &DaemonConfig,
    spamd: &SpamdConfig,
    http: &HttpConfig,
) -> Result<(), String> {
    daemon.validate()?;
    if !(1024..=1 << 30).contains(&spamd.max_message_bytes) {
        return Err(format!(
            "spamd.max_message_bytes must be from 1024 to 1073741824 (1 GiB), not {}",
            spamd.max_message_bytes
        ));
    }
    http.bind().map_err(|e| format!("http.listen: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;
    use crate::daemon::listen::Address;

    #[test]
    fn sections_parse_default_and_validate() {
        let p = Path::new("spamnb.toml");
        let c = Config::parse("", p).unwrap();
        let run = Path::new("/r");
        let binds = c.spamd.binds(run);
        assert_eq!(binds.len(), 2);
        assert!(
            binds[0].optional,
            "the default TCP port may be taken or privileged"
        );
        assert_eq!(binds[1].address, Address::Unix("/r/spamd.sock".into()));
        assert_eq!(
            c.control.address(run),
            Address::Unix("/r/control.sock".into())
        );
        assert!(c.http.bind().unwrap().unwrap().optional);

        let c = Config::parse(
            "[daemon]\nlog_format = \"json\"\nruntime_dir = \"/x\"\nmax_sessions = 3\n\
             [spamd]\nlisten = [\"inet:0.0.0.0:783\"]\nallow_tell = true\n[http]\nlisten = \"\"\n\
             [control]\nlisten = \"unix:/c.sock\"\n",
            p,
        )
        .unwrap();
        assert_eq!(c.daemon.log_format, super::LogFormat::Json);
        assert_eq!(c.daemon.runtime_dir(), Path::new("/x"));
        assert_eq!(c.daemon.max_sessions, 3);
        let binds = c.spamd.binds(run);
        assert_eq!(binds.len(), 1);
        assert!(!binds[0].optional, "what the user asks for must bind");
        assert!(c.spamd.allow_tell);
        assert_eq!(c.http.bind().unwrap(), None);
        assert_eq!(c.control.address(run), Address::Unix("/c.sock".into()));

        for (text, wanted) in [
            (
                "[daemon]\nmax_sessions = 0\n",
                "daemon.max_sessions must be at least 1",
            ),
            ("[daemon]\nlog_format = \"xml\"\n", "unknown variant"),
            (
                "[spamd]\nmax_message_bytes = 10\n",
                "spamd.max_message_bytes",
            ),
            (
                "[spamd]\nmax_message_bytes = 1000000000000000\n",
                "spamd.max_message_bytes must be from 1024",
            ),
            (
                "[daemon]\nmax_connections = 4000000000000000000\n",
                "daemon.max_connections must be at most",
            ),
            (
                "[daemon]\nsession_timeout = 9223372036854775807\n",
                "daemon.session_timeout must be at most",
            ),
            (
                "[daemon]\ndrain_timeout = 100000000\n",
                "daemon.drain_timeout must be at most",
            ),
            ("[spamd]\nlisten = [\"nowhere\"]\n", "is not an address"),
            ("[http]\nlisten = \"nowhere\"\n", "http.listen"),
            ("[spamd]\nallow_tel = true\n", "unknown field"),
        ] {
            let e = Config::parse(text, p).unwrap_err().to_string();
            assert!(e.contains(wanted), "{text:?}: {e}");
        }
    }
}
