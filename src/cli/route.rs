//! Where a command's learning and scoring happen: in this process, over the database
//! opened here, or — when a running daemon holds the database (sled admits one process) —
//! in the daemon, through its local control socket. Both routes give the same verdicts and
//! outcomes, so the commands print the same thing either way and the user never sees a
//! lock error.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rayon::prelude::*;

use crate::config::Config;
use crate::daemon::Reading;
use crate::engine::Engine;
use crate::model::{Class, Verdict};
use crate::spamd::client::{Client, ClientError};
use crate::store::{Error, LedgerEntry, Lesson, Outcome, SledStore, Store};

/// A batch of messages ready for [`Route::learn`].
pub enum Prepared {
    Lessons(Vec<Lesson>),
    Messages(Vec<Vec<u8>>),
}

/// What opening a database that is not there does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Learning starts one.
    Create,
    /// The commands that only read work on an empty one that goes with them, and say so:
    /// a database made at a mistyped path would answer "unsure" to every message from then
    /// on, and nobody would know why.
    Empty,
}

/// Whether `path` holds no database: nothing there, or an empty directory (made ready
/// for one, or a mount point whose file system is not mounted).
pub fn no_database_at(path: &std::path::Path) -> bool {
    match std::fs::read_dir(path) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => matches!(path.try_exists(), Ok(false)),
    }
}

pub enum Route {
    Local {
        store: Arc<SledStore>,
        engine: Engine,
    },
    Daemon {
        client: Client,
        /// Bytes of a message that scoring reads ([`crate::features::Extractor`]'s
        /// `scan_limit`), and one more, that says the rest was cut; no more than the
        /// daemon takes (`spamd.max_message_bytes`).
        scanned: usize,
        /// The largest message the daemon learns.
        max_message: usize,
    },
}

/// How long the CLI waits for one answer from the daemon: a message is scored in
/// milliseconds, but a busy daemon queues requests behind its `max_sessions`.
const DAEMON_TIMEOUT: Duration = Duration::from_secs(60);
/// Tries of a request the daemon answered "overloaded, try again".
const TRIES: u32 = 5;
/// TELLs sent at once: the daemon writes the lessons that wait together as one batch, so
/// more of them in flight than there are cores is what makes learning through it fast.
const TELLS_IN_FLIGHT: usize = 32;

impl Route {
    /// The database, or the daemon that holds it; while a process that is no daemon
    /// holds it, the database once that process lets go (up to `--lock-wait`); a
    /// `spamnb watch`, which would not let go, fails it at once.
    pub fn open(config: &Config, missing: Missing) -> anyhow::Result<Route> {
        if missing == Missing::Empty && no_database_at(&config.db) {
            tracing::warn!(
                "no database at {}: going on as if nothing had been learned, and making \
                 none. Learn some mail first (spamnb learn --spam DIR, then --ham DIR), or \
                 name the database you meant with --db or SPAMNB_DB",
                config.db.display()
            );
            let store = Arc::new(SledStore::open_empty(&config.store)?);
            let engine = super::engine(config, store.clone());
            return Ok(Route::Local { store, engine });
        }
        super::ensure_parent(&config.db)?;
        // A database another process holds that is no daemon (a `learn`, a hook like
        // this one) is waited for: procmail starts a `filter` per delivery, and a second
        // one at the same moment used to pass its message on untagged.
        let mut wait = crate::store::LockWait::up_to(config.store.lock_wait);
        // Looked for when first needed, and once: each look at the runtime directory may
        // warn of it, and the wait for the lock looks again and again.
        let sockets = std::cell::OnceCell::new();
        let sockets = || sockets.get_or_init(|| control_sockets(config));
        loop {
            let unopened = match SledStore::open(&config.db, &config.store) {
                Ok(store) => {
                    let store = Arc::new(store);
                    let engine = super::engine(config, store.clone());
                    return Ok(Route::Local { store, engine });
                }
                // Locked: the daemon holds it. Open: this user may not write it, but may be
                // allowed the daemon's socket (group spamnb under systemd).
                Err(e @ (Error::Locked { .. } | Error::Open { .. })) => e,
                Err(e) => return Err(e.into()),
            };
            let unanswered = match Route::through_daemon(config, sockets()) {
                Ok(route) => return Ok(route),
                Err(e) => e,
            };
            let locked = matches!(unopened, Error::Locked { .. });
            let daemon = crate::store::holding_daemon(&config.db);
            if locked && daemon.is_none() && wait.again() {
                tracing::debug!("{unopened}; waiting for it");
                continue;
            }
            let why = match daemon {
                Some(pid) if !unanswered.is_absent() => format!(
                    "the daemon holding it is process {pid}, but this command could not use \
                     its socket: run it as the daemon's user or as a member of its group \
                     (spamnb, under the shipped unit); "
                ),
                Some(pid) => format!(
                    "the daemon holding it is process {pid}, but its socket is not where \
                     this command looks ({}): give this command the daemon's configuration \
                     (--config or SPAMNB_CONFIG), or set [control] listen, runtime_dir or \
                     XDG_RUNTIME_DIR as the daemon has them; ",
                    (sockets().iter())
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None if locked => format!(
                    "waited {}s (--lock-wait); ",
                    config.store.lock_wait.as_secs()
                ),
                None => String::new(),
            };
            return Err(anyhow::anyhow!(
                "{unopened}\n({why}no daemon answered on its control socket either: {unanswered})"
            ));
        }
    }

    /// The daemon that holds the database, through the first of `sockets` it answers on.
    fn through_daemon(config: &Config, sockets: &[PathBuf]) -> Result<Route, ClientError> {
        let client = Client::connect(sockets, DAEMON_TIMEOUT)?;
        tracing::info!(
            "the daemon holds {}; going through {}",
            config.db.display(),
            client.path().display()
        );
        let scanned =
            (config.extractor.scan_limit.saturating_add(1)).min(config.spamd.max_message_bytes);
        let max_message = crate::spamd::server::control_max_message(&config.spamd);
        Ok(Route::Daemon {
            client,
            scanned,
            max_message,
        })
    }

    /// Scores and learns with `rules` from now on: they compile while the database opens.
    /// The daemon uses its own.
    pub fn set_rules(&mut self, rules: Option<Arc<crate::rules::RuleSet>>) {
        if let Route::Local { engine, .. } = self {
            engine.extractor.rules = rules;
        }
    }

    /// Loads the counts into memory when many messages are to be scored here.
    pub fn preload(&self) -> anyhow::Result<()> {
        match self {
            Route::Local { store, .. } => Ok(store.preload()?),
            // The daemon always scores from memory.
            Route::Daemon { .. } => Ok(()),
        }
    }

    /// The first stage of learning a batch, run while the previous batch is written:
    /// locally the messages are tokenized (on every core); for the daemon they go as they are.
    pub fn prepare(
        &self,
        raws: Vec<Vec<u8>>,
        target: Option<Class>,
        user: Option<&str>,
    ) -> Prepared {
        match self {
            Route::Local { engine, .. } => {
                Prepared::Lessons(each(&raws, |raw| engine.lesson(raw, target, user)))
            }
            Route::Daemon { .. } => Prepared::Messages(raws),
        }
    }

    /// Why this route cannot learn `raw`, if it cannot: the daemon refuses a message above
    /// its limit, and the whole command would stop there.
    pub fn refusal(&self, raw: &[u8]) -> Option<String> {
        match self {
            Route::Daemon { max_message, .. } if raw.len() > *max_message => Some(format!(
                "{} bytes, above the {max_message} the daemon learns: not learned; raise \
                 [spamd] max_message_bytes for the daemon, or learn it while the daemon is \
                 stopped",
                raw.len()
            )),
            _ => None,
        }
    }

    /// Learns (`target` a class) or forgets each message, in order; all or nothing when
    /// local, one message at a time through the daemon.
    pub fn learn(
        &self,
        batch: &Prepared,
        target: Option<Class>,
        user: Option<&str>,
    ) -> anyhow::Result<Vec<Outcome>> {
        match (self, batch) {
            (Route::Local { engine, .. }, Prepared::Lessons(lessons)) => Ok(engine.learn(lessons)?),
            (Route::Daemon { client, .. }, Prepared::Messages(raws)) => {
                in_flight(raws, TELLS_IN_FLIGHT, |raw| {
                    retry(|| client.tell(raw, target, user))
                })
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
            }
            .with_context(|| format!("learning through the daemon at {}", client.path().display())),
            _ => unreachable!("a batch is prepared by the route that learns it"),
        }
    }

    /// The verdict on each message.
    pub fn check(&self, raws: &[&[u8]]) -> anyhow::Result<Vec<Verdict>> {
        match self {
            Route::Local { engine, .. } => Ok(each(raws, |raw| engine.check(raw))
                .into_iter()
                .collect::<Result<Vec<_>, _>>()?),
            Route::Daemon {
                client, scanned, ..
            } => each(raws, |raw| {
                ask_daemon(client, *scanned, raw, Reading::Stored)
            })
            .into_iter()
            .collect(),
        }
    }

    /// The verdict on a message being delivered (`spamnb filter`), which autolearning
    /// learns when the configuration says so, as the milter's and spamd's: here, before
    /// this returns; through the daemon, by the daemon. A failure to learn loses only the
    /// lesson.
    pub fn deliver(&self, raw: &[u8]) -> anyhow::Result<Verdict> {
        match self {
            Route::Local { store, engine } => {
                let (verdict, lesson) = engine.check_autolearning(raw)?;
                if let Some(lesson) = lesson {
                    let learned = engine.learn(&[lesson]).and_then(|_| store.flush());
                    if let Err(e) = learned {
                        tracing::warn!("autolearning failed, the message is not learned: {e}");
                    }
                }
                Ok(verdict)
            }
            Route::Daemon {
                client, scanned, ..
            } => {
                let reading = if raw.len() > *scanned {
                    Reading::InTransitCut
                } else {
                    Reading::InTransit
                };
                ask_daemon(client, *scanned, raw, reading)
            }
        }
    }

    pub fn stats(&self) -> anyhow::Result<crate::store::Stats> {
        match self {
            Route::Local { store, .. } => Ok(store.stats()?),
            Route::Daemon { client, .. } => Ok(client.stats()?),
        }
    }

    /// Removes rare tokens' counts, as [`crate::store::Store::prune`] says.
    pub fn prune(&self, min_messages: u32, dry_run: bool) -> anyhow::Result<crate::store::Pruned> {
        match self {
            Route::Local { store, .. } => Ok(store.prune(min_messages, dry_run)?),
            Route::Daemon { client, .. } => Ok(client.prune(min_messages, dry_run)?),
        }
    }

    /// Writes the whole model as `spamnb export` does.
    pub fn export(&self, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
        match self {
            Route::Local { store, .. } => Ok(crate::store::export(&**store, out)?),
            Route::Daemon { client, .. } => Ok(client.export(out)?),
        }
    }

    /// What the ledger holds of each message: whether it was learned, as what, when and for
    /// whom.
    pub fn learned(&self, raws: &[&[u8]]) -> anyhow::Result<Vec<Option<LedgerEntry>>> {
        match self {
            Route::Local { store, engine } => raws
                .iter()
                .map(|raw| Ok(store.ledger_entry(&engine.digest(raw))?))
                .collect(),
            // The digests are taken there of the whole message: a message sent to the
            // daemon for scoring is cut to what scoring reads.
            Route::Daemon { client, .. } => Ok(client.ledger(raws)?),
        }
    }

    /// Makes what was learned durable.
    pub fn flush(&self) -> anyhow::Result<()> {
        match self {
            Route::Local { store, .. } => Ok(store.flush()?),
            Route::Daemon { client, .. } => Ok(client.flush()?),
        }
    }
}

/// `f` of each item, in order: on every core, except for a single item, which needs no
/// thread pool — and a hook may run under limits (Dovecot's vsz_limit) where starting one fails.
fn each<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    if items.len() < 2 {
        items.iter().map(f).collect()
    } else {
        items.par_iter().map(f).collect()
    }
}

/// `f` of each item, in order, with up to `width` calls running at once: for calls that
/// mostly wait (on the daemon), where `each`'s one thread per core would leave it idle.
fn in_flight<T: Sync, R: Send>(
    items: &[T],
    width: usize,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    match rayon::ThreadPoolBuilder::new().num_threads(width).build() {
        Ok(pool) => pool.install(|| items.par_iter().map(f).collect()),
        // No threads to be had (a process limit): one call at a time still works.
        Err(_) => items.iter().map(f).collect(),
    }
}

/// The daemon's verdict on what scoring reads of `raw` (`scanned` bytes), as here: a
/// message over its `max_message_bytes` would be refused whole, and its mail passed on
/// untagged.
fn ask_daemon(
    client: &Client,
    scanned: usize,
    raw: &[u8],
    reading: Reading,
) -> anyhow::Result<Verdict> {
    retry(|| client.verdict(&raw[..raw.len().min(scanned)], reading))
        .with_context(|| format!("scoring through the daemon at {}", client.path().display()))
}

/// Runs `f` again while the daemon answers "temporarily unavailable" (overload), with a
/// growing pause; any other error ends at once.
fn retry<T>(f: impl Fn() -> Result<T, ClientError>) -> Result<T, ClientError> {
    let mut pause = Duration::from_millis(50);
    for _ in 1..TRIES {
        match f() {
            Err(ClientError::Refused { line, .. }) if line.contains(" 75 ") => {
                std::thread::sleep(pause);
                pause *= 2;
            }
            other => return other,
        }
    }
    f()
}

/// Where the daemon's control socket may be: the configured one, else the default in this
/// user's runtime directory and the system daemon's.
pub fn control_sockets(config: &Config) -> Vec<PathBuf> {
    use crate::daemon::listen::Address;
    if let Some(Address::Unix(path)) = &config.control.listen {
        return vec![path.clone()];
    }
    let runtime_dir = config.daemon.runtime_dir();
    let (paths, passed_over) = control_sockets_in(
        &runtime_dir,
        config.daemon.runtime_dir.is_some(),
        std::path::Path::new(crate::daemon::config::SYSTEM_RUNTIME_DIR),
    );
    if let Some(dir) = passed_over {
        tracing::warn!(
            "not using {}: it is not a directory that only this user owns and writes",
            dir.display()
        );
    }
    paths
}

/// The control sockets in `runtime_dir` and in `system_dir`, and the runtime directory
/// passed over, if one was. A runtime directory the configuration did not name is this
/// user's own (`/tmp/spamnb-UID` where nothing else says): one that another user made, or
/// may write in, is passed over, as the daemon refuses to serve from it. Another local user
/// could make /tmp/spamnb-UID before this user's daemon ever starts and listen there, and
/// would then read every message a `filter`, `check` or `learn` sends and write the
/// verdicts it returns. The system's is trusted whoever owns it: only root makes
/// directories in /run, and the system daemon's user owns it under the shipped unit.
fn control_sockets_in<'d>(
    runtime_dir: &'d std::path::Path,
    configured: bool,
    system_dir: &std::path::Path,
) -> (Vec<PathBuf>, Option<&'d std::path::Path>) {
    let mut paths = Vec::new();
    let mut passed_over = None;
    if configured || runtime_dir == system_dir || crate::daemon::config::is_private_dir(runtime_dir)
    {
        paths.push(runtime_dir.join("control.sock"));
    } else if runtime_dir.exists() {
        passed_over = Some(runtime_dir);
    }
    let system = system_dir.join("control.sock");
    if !paths.contains(&system) {
        paths.push(system);
    }
    (paths, passed_over)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory where this user's daemon would put its socket, made first by someone
    /// else (here: made writable by all, as a planted one in /tmp is), is not trusted; the
    /// system daemon's is, whoever owns it.
    #[test]
    fn a_runtime_directory_others_may_write_in_is_no_place_for_the_control_socket() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let system = dir.path().join("run-spamnb");
        let found = |run: &std::path::Path, configured| {
            let (paths, passed_over) = control_sockets_in(run, configured, &system);
            assert!(paths.contains(&system.join("control.sock")), "{paths:?}");
            let trusted = paths.contains(&run.join("control.sock"));
            assert_eq!(passed_over.is_some(), !trusted, "{run:?}: {paths:?}");
            trusted
        };
        let run = dir.path().join("spamnb-1");
        for (mode, trusted) in [(0o700, true), (0o750, true), (0o777, false), (0o770, false)] {
            for d in [&run, &system] {
                std::fs::create_dir_all(d).unwrap();
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            assert_eq!(found(&run, false), trusted, "mode {mode:o}");
            // Named in the configuration, the directory is the administrator's choice.
            assert!(found(&run, true), "mode {mode:o}");
            // Root's default is the system daemon's directory, the unit's user's.
            assert!(found(&system, false), "mode {mode:o}");
        }
        // One that another user owns (only root may give a directory away).
        if crate::daemon::config::uid() == 0 {
            std::os::unix::fs::chown(&run, Some(65534), None).unwrap();
            assert!(!found(&run, false));
            std::os::unix::fs::chown(&run, Some(0), None).unwrap();
        }
        // A link to this user's own directory is not that directory.
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&run, &link).unwrap();
        assert!(!found(&link, false));
    }
}
