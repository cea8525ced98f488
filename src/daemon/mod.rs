//! `spamnb daemon`: binds the listeners, runs each protocol's server behind them, and owns
//! the process's life: readiness, SIGHUP reloads, SIGTERM drains, logs and metrics.
//!
//! # The contract between the daemon and a protocol
//!
//! Each protocol (`crate::spamd`, `crate::milter`) owns its server loop, with this signature:
//!
//! ```text
//! pub async fn run(listener: crate::daemon::listen::Listener,
//!                  ctx: std::sync::Arc<crate::daemon::Context>,
//!                  shutdown: tokio_util::sync::CancellationToken)
//! ```
//!
//! - The daemon binds the listener and calls `run` once per listener, as a task of its own.
//! - `run` accepts until `shutdown` is cancelled, then returns (dropping the listener, which
//!   removes a unix socket's file). It never returns an error: it logs and goes on.
//! - Each connection is admitted with [`Context::admit`] (the `max_connections` limit:
//!   `None` means close it at once) and spawned on [`Context::tasks`], so that SIGTERM can
//!   wait for it. A session in the middle of a message finishes it; one between messages
//!   (idle milter, keep-alive) ends when `shutdown` is cancelled.
//! - A session takes [`Context::config`] and [`crate::engine::SharedEngine::current`] once
//!   when it starts (or per message), so a reload never changes the rules under a message.
//! - Scoring is synchronous CPU work: run it through [`Context::check`] (a `max_sessions`
//!   slot, `spawn_blocking`, metrics), or at least on `spawn_blocking`.
//! - It reports what happened through [`Context::metrics`]: `scored` (decision and
//!   latency), `error`, `fail_open`, `learned`.
//! - Every read has `config.daemon.read_timeout`; a whole message `session_timeout`.
//! - Anything mail-borne that goes into a log passes through [`crate::message::escape_control`].
//!
//! The `[milter]` section is `milter_config::MilterConfig`, owned by the milter's author;
//! the daemon reads only its `listen` addresses.

pub mod config;
pub mod http;
pub mod learner;
pub mod listen;
pub mod metrics;
pub mod milter_config;
pub mod notify;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::config::{Bind, LogFormat};
use self::listen::{Address, Listener};
use self::metrics::{Metrics, Protocol};
use crate::config::Config;
use crate::engine::{Engine, SharedEngine};
use crate::model::Verdict;
use crate::store::{PidFile, SledStore};

/// How a message is read when scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Stored mail: a question, which teaches nothing.
    Stored,
    /// Mail being delivered, read as its sender sent it (see
    /// [`crate::spam_headers::as_sent`]); autolearning may learn it.
    InTransit,
    /// The start of a longer message being delivered: read so, and never learned, since
    /// no later correction of the whole message would find the cut copy.
    InTransitCut,
}

/// What every session of every protocol shares.
pub struct Context {
    /// Shared with the folder watcher, which learns through the daemon's own store.
    pub engine: Arc<SharedEngine>,
    /// TELL's and autolearning's lessons, written in groups.
    pub learner: Arc<learner::Learner>,
    /// Autolearning lessons not yet written; see [`AUTOLEARN_WAITING`].
    autolearn_waiting: Arc<AtomicUsize>,
    /// The configuration now in force; see [`Context::config`].
    config: RwLock<Arc<Config>>,
    pub metrics: Arc<Metrics>,
    /// Every connection's task, and every autolearning write, so that SIGTERM can wait
    /// for them to finish.
    pub tasks: TaskTracker,
    connections: Arc<Semaphore>,
    /// The share of `connections` that TCP peers may hold: see [`Context::admit_network`].
    network_connections: Arc<Semaphore>,
    sessions: Arc<Semaphore>,
}

/// A connection counted against `max_connections` (and as an open session in the
/// metrics) until it drops.
pub struct Admission {
    _permit: OwnedSemaphorePermit,
    _network: Option<OwnedSemaphorePermit>,
    ctx: Arc<Context>,
    protocol: Protocol,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.ctx.metrics.session_closed(self.protocol);
    }
}

/// A verdict and the engine that gave it: its `model` holds the thresholds it was judged by.
pub struct Scored {
    pub verdict: Verdict,
    pub engine: Arc<Engine>,
}

/// Scoring was not done: the session fails open and passes the message on.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("no scoring slot came free within the session timeout (overload)")]
    Overload,
    #[error("scoring took longer than the session timeout")]
    Timeout,
    #[error("scoring failed: {0}")]
    Internal(String),
}

impl Context {
    pub fn new(engine: Engine, config: Config) -> Arc<Context> {
        Arc::new(Context {
            engine: Arc::new(SharedEngine::new(engine)),
            learner: Arc::default(),
            autolearn_waiting: Arc::default(),
            connections: Arc::new(Semaphore::new(config.daemon.max_connections)),
            network_connections: Arc::new(Semaphore::new(network_share(
                config.daemon.max_connections,
            ))),
            sessions: Arc::new(Semaphore::new(config.daemon.max_sessions)),
            config: RwLock::new(Arc::new(config)),
            metrics: Arc::default(),
            tasks: TaskTracker::new(),
        })
    }

    /// The configuration now in force. Take it once per session (or per message) and keep
    /// the `Arc`: a reload swaps in a new one without touching the old.
    pub fn config(&self) -> Arc<Config> {
        // A std RwLock: held only to clone or replace an Arc, never across an await.
        self.config
            .read()
            .expect("config lock is never poisoned")
            .clone()
    }

    /// Admits a new connection, or `None` when `max_connections` are open: the caller
    /// closes it at once (a client retries; an MTA applies its default action).
    pub fn admit(self: &Arc<Self>, protocol: Protocol) -> Option<Admission> {
        self.admit_with(protocol, None)
    }

    /// Admits a connection from a TCP peer (spamd's clients), within a share of
    /// `max_connections` that leaves the rest to the MTA's milter and the local sockets:
    /// whoever may reach spamd's port (every local user, on loopback) could otherwise hold
    /// every connection open, trickling a byte at a time, and lock out the MTA (whose
    /// mail then passes unscored) and the control socket.
    pub fn admit_network(self: &Arc<Self>, protocol: Protocol) -> Option<Admission> {
        match self.network_connections.clone().try_acquire_owned() {
            Ok(network) => self.admit_with(protocol, Some(network)),
            Err(_) => {
                self.metrics.rejected_connection(protocol);
                None
            }
        }
    }

    fn admit_with(
        self: &Arc<Self>,
        protocol: Protocol,
        network: Option<OwnedSemaphorePermit>,
    ) -> Option<Admission> {
        match self.connections.clone().try_acquire_owned() {
            Ok(permit) => {
                self.metrics.session_opened(protocol);
                Some(Admission {
                    _permit: permit,
                    _network: network,
                    ctx: self.clone(),
                    protocol,
                })
            }
            Err(_) => {
                self.metrics.rejected_connection(protocol);
                None
            }
        }
    }

    /// Scores `raw` on a blocking thread within a `max_sessions` slot, and records the
    /// verdict and its latency. The engine is the one current when this is called; it
    /// comes back with the verdict, so that a reply states the thresholds that decided it
    /// even when SIGHUP swaps the configuration meanwhile.
    /// `reading`: as stored mail, or in transit, where autolearning may learn it.
    pub async fn check(
        &self,
        protocol: Protocol,
        raw: Arc<[u8]>,
        reading: Reading,
    ) -> Result<Scored, CheckError> {
        // One deadline for the wait for a slot and the scoring together: past it the
        // message goes on unscored (fail open) and the caller is not held up further.
        let deadline = tokio::time::Instant::now() + self.config().daemon.session_timeout();
        let slot = tokio::time::timeout_at(deadline, self.sessions.clone().acquire_owned())
            .await
            .map_err(|_| CheckError::Overload)?
            .map_err(|_| CheckError::Overload)?;
        let engine = self.engine.current();
        let started = Instant::now();
        let scorer = engine.clone();
        let scoring = tokio::task::spawn_blocking(move || {
            // The slot stays taken until the scoring ends, even when nobody waits for it
            // any more: the CPU is busy either way.
            let _slot = slot;
            match reading {
                Reading::Stored => scorer.check(&raw).map(|verdict| (verdict, None)),
                Reading::InTransit => scorer.check_autolearning(&raw),
                Reading::InTransitCut => scorer.check_in_transit(&raw).map(|v| (v, None)),
            }
        });
        let (verdict, lesson) = tokio::time::timeout_at(deadline, scoring)
            .await
            .map_err(|_| CheckError::Timeout)?
            .map_err(|e| CheckError::Internal(e.to_string()))?
            .map_err(|e| CheckError::Internal(e.to_string()))?;
        self.metrics
            .scored(protocol, verdict.decision, started.elapsed());
        if let Some(lesson) = lesson {
            self.autolearn(engine.clone(), lesson);
        }
        Ok(Scored { verdict, engine })
    }

    /// Learns a message from its own firm verdict, after the reply: the mail never waits
    /// for it, and a failure only loses the lesson. The lessons of busy moments are
    /// written together, as TELLs are.
    fn autolearn(&self, engine: Arc<Engine>, lesson: crate::store::Lesson) {
        let waiting = self.autolearn_waiting.clone();
        if waiting.fetch_add(1, Ordering::Relaxed) >= AUTOLEARN_WAITING {
            waiting.fetch_sub(1, Ordering::Relaxed);
            tracing::debug!("autolearning behind: a lesson let go");
            return;
        }
        let learner = self.learner.clone();
        let metrics = self.metrics.clone();
        let class = lesson.target.map_or("", crate::model::Class::name);
        self.tasks.spawn_blocking(move || {
            let learned = learner.learn(&engine, lesson, learner::Durable::Eventually);
            waiting.fetch_sub(1, Ordering::Relaxed);
            match learned {
                Ok(crate::store::Outcome::Learned) => {
                    metrics.autolearned();
                    tracing::debug!(class, "autolearned");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("autolearning failed, the message is not learned: {e}"),
            }
        });
    }

    /// A slot of `max_sessions` for other blocking work (learning), or `None` on overload.
    pub async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        let timeout = self.config().daemon.session_timeout();
        tokio::time::timeout(timeout, self.sessions.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }

    fn replace(&self, config: Config, engine: Engine) {
        self.engine.replace(engine);
        *self.config.write().expect("config lock is never poisoned") = Arc::new(config);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    // The io::Error is part of the message, not a `source`: a cause chain printed whole
    // (`{:#}`) would say it twice.
    #[error(
        "cannot listen on {address}: {cause}; free it, or change the address in the configuration"
    )]
    Bind {
        address: Address,
        cause: std::io::Error,
    },
    #[error(
        "the database {0} is in use by another process (another daemon, or a `spamnb learn` \
         still running); the daemon needs it to itself: let that process finish or stop it"
    )]
    Busy(std::path::PathBuf),
    #[error(
        "the database {path} is held by a spamnb daemon already running (process {pid}); \
         stop that one first, or give this one a database of its own (--db)"
    )]
    HeldByDaemon { path: std::path::PathBuf, pid: u32 },
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error("cannot create the runtime directory {path}: {cause}")]
    RuntimeDir {
        path: std::path::PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Builds the engine a configuration asks for, over an already open store.
pub type EngineBuilder = dyn Fn(&Config) -> Engine + Send + Sync;
/// Reads the configuration again (SIGHUP), given the one in force: the file and the
/// command line's overrides.
pub type ConfigLoader = dyn Fn(&Config) -> Result<Config, String> + Send + Sync;

/// Autolearning lessons that may wait for the store at once. Each waits on a blocking
/// thread; under a flood the daemon lets lessons go rather than pile up threads, since
/// scoring, not learning, is what the mail waits on.
const AUTOLEARN_WAITING: usize = 64;

/// Runs the daemon until SIGTERM or SIGINT, with `config` as first loaded.
pub fn run(config: Config, load: Box<ConfigLoader>) -> Result<(), Error> {
    if config::uid() == 0 {
        tracing::warn!(
            "running as root, which spamnb never needs: it parses mail from strangers. Run \
             it as a user of its own, as systemd/spamnb.service does (port 783 needs only \
             CAP_NET_BIND_SERVICE)"
        );
    }
    raise_open_files_limit();
    let runtime_dir = config.daemon.runtime_dir();
    make_runtime_dir(&runtime_dir)?;
    let store = Arc::new(open_store(&config)?);
    // Removed on return, after the flush below.
    let _holding = PidFile::write(&config.db, crate::store::DAEMON_PID_FILE);
    // The daemon scores many messages: counts from memory, never from disk.
    store.preload()?;
    let build = {
        let store = store.clone();
        move |c: &Config| crate::cli::engine(c, store.clone())
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("spamnb")
        .build()
        .map_err(Error::Runtime)?;
    let result = runtime.block_on(serve(config, &runtime_dir, Box::new(build), load));
    if let Err(e) = crate::store::Store::flush(&*store) {
        tracing::error!("cannot save the database on exit: {e}");
    }
    result
}

/// The database, once no other process holds it: a `learn` or a hook that has it while
/// the daemon (re)starts lets go in moments, and so does the daemon before this one.
fn open_store(config: &Config) -> Result<SledStore, Error> {
    match SledStore::open_waiting(&config.db, &config.store, || true) {
        // A daemon already running is named: "another daemon, or a learn" left the one
        // who started a second by mistake to find which.
        Err(crate::store::Error::Locked { path }) => match crate::store::holding_daemon(&path) {
            Some(pid) => Err(Error::HeldByDaemon { path, pid }),
            None => Err(Error::Busy(path)),
        },
        opened => Ok(opened?),
    }
}

async fn serve(
    config: Config,
    runtime_dir: &Path,
    build: Box<EngineBuilder>,
    load: Box<ConfigLoader>,
) -> Result<(), Error> {
    // Handlers first: systemd may send SIGHUP as soon as it hears READY, and an
    // unhandled SIGHUP would end the process.
    let signals = Signals::install();
    let binds = binds(&config, runtime_dir);
    let ctx = Context::new(build(&config), config);
    let shutdown = CancellationToken::new();
    let servers = TaskTracker::new();
    for (kind, bind) in binds {
        let listener = match Listener::bind(&bind.address).await {
            Ok(l) => l,
            Err(e) if bind.optional => {
                tracing::warn!(
                    "not listening on {} ({kind}, a default): {e}; {}",
                    bind.address,
                    default_bind_hint(kind, &e)
                );
                continue;
            }
            Err(cause) => {
                shutdown.cancel();
                return Err(Error::Bind {
                    address: bind.address,
                    cause,
                });
            }
        };
        tracing::info!("{kind} listening on {}", listener.local_address());
        let (ctx, token) = (ctx.clone(), shutdown.clone());
        match kind {
            Kind::Spamd => servers.spawn(crate::spamd::server::run(listener, ctx, token)),
            Kind::Control => servers.spawn(crate::spamd::server::run_control(listener, ctx, token)),
            Kind::Http => servers.spawn(http::run(listener, ctx, token)),
            Kind::Milter => servers.spawn(crate::milter::server::run(listener, ctx, token)),
        };
    }
    if let Some(settings) = ctx.config().watch.clone() {
        let (engine, token) = (ctx.engine.clone(), shutdown.clone());
        servers.spawn(async move {
            if let Err(e) = crate::watch::run(settings, engine, token).await {
                tracing::error!("the folder watcher stopped: {e}");
            }
        });
    }
    servers.close();
    notify::notify("READY=1\nSTATUS=serving");
    let rules = ctx
        .config()
        .extractor
        .rules
        .as_ref()
        .map_or(0, |r| r.rules().len());
    tracing::info!(rules, "spamnb {} ready", env!("CARGO_PKG_VERSION"));

    signals.wait(&ctx, &*build, &*load).await;

    notify::notify("STOPPING=1\nSTATUS=draining");
    tracing::info!("stopping: no new connections; waiting for open sessions");
    shutdown.cancel();
    servers.wait().await;
    ctx.tasks.close();
    let drain = ctx.config().daemon.drain_timeout();
    if tokio::time::timeout(drain, ctx.tasks.wait()).await.is_err() {
        tracing::warn!(
            "{} sessions still open after {}s; exiting anyway",
            ctx.tasks.len(),
            drain.as_secs()
        );
    }
    tracing::info!("stopped");
    Ok(())
}

/// The signals the daemon acts on, installed before it says it is ready.
struct Signals(
    Option<(
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
    )>,
);

impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(term), Ok(int), Ok(hup)) => Signals(Some((term, int, hup))),
            _ => {
                tracing::error!("cannot install signal handlers; stop the daemon with SIGKILL");
                Signals(None)
            }
        }
    }

    /// Waits for SIGTERM or SIGINT; reloads on SIGHUP meanwhile.
    async fn wait(self, ctx: &Context, build: &EngineBuilder, load: &ConfigLoader) {
        let Some((mut term, mut int, mut hup)) = self.0 else {
            return std::future::pending().await;
        };
        loop {
            tokio::select! {
                _ = term.recv() => return,
                _ = int.recv() => return,
                // Reading and compiling a configuration is blocking work: let the
                // runtime move the sessions on this thread elsewhere meanwhile.
                _ = hup.recv() => tokio::task::block_in_place(|| reload(ctx, build, load)),
            }
        }
    }
}

/// Swaps in a new configuration and engine, or keeps the old ones when the new file is
/// broken. Listeners, limits and the database path stay as started (they need a restart).
fn reload(ctx: &Context, build: &EngineBuilder, load: &ConfigLoader) {
    notify::notify("RELOADING=1");
    match load(&ctx.config()) {
        Ok(new) => {
            let old = ctx.config();
            if new.db != old.db {
                tracing::warn!(
                    "reload: the database path changed ({} → {}); that takes a restart, the daemon keeps {}",
                    old.db.display(),
                    new.db.display(),
                    old.db.display()
                );
            }
            // What takes a restart stays as the daemon started, so that the next reload
            // compares with what runs: it warns again while the file still differs, and not
            // once the file is put back.
            let mut new = new;
            new.db.clone_from(&old.db);
            let restart = [
                keep(&mut new.spamd.listen, &old.spamd.listen),
                keep(&mut new.control.listen, &old.control.listen),
                keep(&mut new.http.listen, &old.http.listen),
                keep(&mut new.milter.listen, &old.milter.listen),
                keep(&mut new.milter.max_sessions, &old.milter.max_sessions),
                keep(&mut new.daemon.max_connections, &old.daemon.max_connections),
                keep(&mut new.daemon.max_sessions, &old.daemon.max_sessions),
                keep(&mut new.daemon.runtime_dir, &old.daemon.runtime_dir),
                keep(&mut new.store.cache_bytes, &old.store.cache_bytes),
            ];
            if restart.contains(&true) {
                tracing::warn!(
                    "reload: listeners, connection limits and cache_mb take a restart; the daemon keeps the ones it started with"
                );
            }
            if keep(&mut new.watch, &old.watch) {
                tracing::warn!(
                    "reload: [watch] takes a restart; the folder watcher keeps the users and settings it started with"
                );
            }
            let engine = build(&new);
            ctx.replace(new, engine);
            ctx.metrics.reloaded(true);
            tracing::info!("reloaded the configuration");
        }
        Err(e) => {
            ctx.metrics.reloaded(false);
            tracing::error!("reload refused, keeping the configuration in force: {e}");
        }
    }
    notify::notify("READY=1");
}

/// Puts `old` back in place of `new`, a setting that takes a restart; whether they differed.
fn keep<T: PartialEq + Clone>(new: &mut T, old: &T) -> bool {
    let differed = new != old;
    new.clone_from(old);
    differed
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Spamd,
    Control,
    Http,
    Milter,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Spamd => "spamd",
            Kind::Control => "control",
            Kind::Http => "http",
            Kind::Milter => "milter",
        })
    }
}

/// What to do when a default address cannot be had: an unprivileged daemon started by
/// hand cannot bind spamd's port 783, and the `spamc` of a mail recipe then passes mail on
/// untagged without a word.
fn default_bind_hint(kind: Kind, e: &std::io::Error) -> String {
    let section = match kind {
        Kind::Spamd => "[spamd] listen",
        _ => "[http] listen",
    };
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "a port below 1024 needs CAP_NET_BIND_SERVICE (systemd/spamnb.service grants it); \
             or set {section} to a higher port (spamc -p PORT) or a unix socket"
        ),
        std::io::ErrorKind::AddrInUse => format!(
            "another program listens there (a spamd?); stop it, or set {section} to another \
             address"
        ),
        _ => format!("set {section} to an address this host has"),
    }
}

fn binds(config: &Config, runtime_dir: &Path) -> Vec<(Kind, Bind)> {
    let mut binds: Vec<(Kind, Bind)> = Vec::new();
    for a in &config.milter.listen {
        binds.push((
            Kind::Milter,
            Bind {
                address: a.clone(),
                optional: false,
            },
        ));
    }
    for b in config.spamd.binds(runtime_dir) {
        binds.push((Kind::Spamd, b));
    }
    binds.push((
        Kind::Control,
        Bind {
            address: config.control.address(runtime_dir),
            optional: false,
        },
    ));
    if let Ok(Some(b)) = config.http.bind() {
        binds.push((Kind::Http, b));
    }
    binds
}

/// How many of `max_connections` TCP peers may hold together: all but a sixteenth (at
/// least one), kept for the milter and the unix sockets.
fn network_share(max_connections: usize) -> usize {
    let kept = (max_connections / 16).max(1);
    max_connections.saturating_sub(kept).max(1)
}

/// Creates the directory for the default sockets, private to this user when it is ours
/// to make, and refuses one that someone else owns or may write in (a planted directory in
/// /tmp): whoever may write there may replace the sockets, root's too.
fn make_runtime_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    let err = |cause| Error::RuntimeDir {
        path: dir.into(),
        cause,
    };
    let me = config::uid();
    // Root's /run/spamnb is reached by other users' spamc (the sockets' own modes guard
    // them); a user's daemon keeps its directory to itself.
    let mode = if me == 0 { 0o755 } else { 0o700 };
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) => return Err(err(e)),
    }
    if !config::is_private_dir(dir) {
        return Err(err(std::io::Error::other(
            "it exists but is not a directory that this user owns and only it may write in; \
             remove it or set daemon.runtime_dir",
        )));
    }
    Ok(())
}

/// Raises the soft limit of open files to the hard one, as daemons do: every connection
/// is a descriptor, and the common soft default of 1024 would let a thousand idle clients
/// starve the listeners. Under systemd `LimitNOFILE=` has done it already (and the unit's
/// system-call filter refuses this call, which is harmless).
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed by pointer,
    // which lives on this stack frame for the duration of the calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 || limit.rlim_cur >= limit.rlim_max
        {
            return;
        }
        let wanted = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 {
            tracing::debug!("cannot raise the open-files limit above {}", limit.rlim_cur);
        }
    }
}

/// Sets up `tracing` for the daemon: text or JSON lines on stderr (journald picks them up).
pub fn init_logging(format: LogFormat, verbose: u8) {
    let default = ["info", "debug", "trace"][usize::from(verbose.min(2))];
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPAMNB_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colours only for a person at a terminal; journald and log files get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_env_filter(filter);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A default address the daemon cannot have is a warning that says what to do: an
    /// unprivileged daemon started by hand is refused port 783, and spamc then passes
    /// mail on untagged.
    #[test]
    fn a_default_address_not_had_says_what_to_do() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let hint = default_bind_hint(Kind::Spamd, &denied);
        assert!(hint.contains("CAP_NET_BIND_SERVICE") && hint.contains("[spamd] listen"));
        let taken = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        assert!(default_bind_hint(Kind::Http, &taken).contains("[http] listen"));
    }

    /// main prints an error with its causes (`{:#}`): the cause written into the message
    /// is not printed again after it.
    #[test]
    fn an_error_names_its_cause_once() {
        let cause = || std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let said = cause().to_string();
        for e in [
            Error::Bind {
                address: "inet:127.0.0.1:11332".parse().unwrap(),
                cause: cause(),
            },
            Error::RuntimeDir {
                path: "/run/spamnb".into(),
                cause: cause(),
            },
            Error::Store(crate::store::Error::Io(cause())),
        ] {
            let shown = format!("{:#}", anyhow::Error::new(e));
            assert_eq!(shown.matches(&said).count(), 1, "{shown}");
        }
    }

    /// Slow TCP clients of spamd, as many as may connect, leave room for the MTA's milter
    /// and the control socket.
    #[tokio::test]
    async fn tcp_clients_cannot_take_every_connection() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(crate::store::SledStore::open(dir.path(), &Default::default()).unwrap());
        for max in [2, 16, 100] {
            let engine = crate::engine::Engine {
                extractor: Default::default(),
                model: Default::default(),
                store: store.clone(),
            };
            let mut config = Config::default();
            config.daemon.max_connections = max;
            let ctx = Context::new(engine, config);
            let held: Vec<Admission> = std::iter::from_fn(|| ctx.admit_network(Protocol::Spamd))
                .take(max + 1)
                .collect();
            assert!(
                !held.is_empty() && held.len() < max,
                "max {max}: {}",
                held.len()
            );
            assert!(
                ctx.admit(Protocol::Milter).is_some(),
                "max {max}: milter locked out"
            );
            assert!(
                ctx.admit(Protocol::Control).is_some() || max == 2,
                "max {max}"
            );
        }
    }

    /// Whoever may write in the sockets' directory may replace them: a directory others
    /// may write in is refused, as one someone else owns is.
    #[test]
    fn a_runtime_directory_others_may_write_in_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        make_runtime_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = make_runtime_dir(&run).unwrap_err();
        assert!(e.to_string().contains("only it may write in"), "{e}");
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o750)).unwrap();
        make_runtime_dir(&run).unwrap();
    }
}
