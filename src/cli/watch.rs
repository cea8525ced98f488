//! `spamnb watch`: the folder watcher in the foreground, without the daemon, for the users
//! of the `[watch]` section or for one Maildir given on the command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::engine::SharedEngine;
use crate::watch::{UserMaildir, WatchSettings, Watcher};

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Watch this Maildir (the folder holding INBOX's cur/) instead of the `[watch]` section's users
    maildir: Option<PathBuf>,
    /// Whose Maildir it is (recorded in the ledger) [default: $USER]
    #[arg(long, requires = "maildir")]
    user: Option<String>,
    /// Rescan once, learn what moved since the last run, and exit
    #[arg(long)]
    once: bool,
}

pub fn run(config: &Config, args: &WatchArgs) -> anyhow::Result<ExitCode> {
    let mut settings = config.watch.clone().unwrap_or_default();
    if let Some(maildir) = &args.maildir {
        let root = std::path::absolute(maildir)
            .with_context(|| format!("cannot resolve the Maildir path {}", maildir.display()))?;
        anyhow::ensure!(
            root.is_dir(),
            "the Maildir {} does not exist; give the folder that holds INBOX's cur/ and new/",
            root.display()
        );
        let user = args
            .user
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "default".into());
        settings.users = vec![UserMaildir { user, root }];
    }
    anyhow::ensure!(
        !settings.users.is_empty(),
        "nothing to watch: give a Maildir (`spamnb watch ~/Maildir`) or list users in the [watch] \
         section of the configuration ([watch.users] NAME = \"/path/to/Maildir\")"
    );
    let store = super::open_store(config)?;
    // The watcher holds the database until it stops: other commands (a Dovecot hook that
    // Dovecot kills after 10 s) learn from this file that waiting for it is in vain.
    let _holding = crate::store::PidFile::write(&config.db, crate::store::WATCHER_PID_FILE);
    let engine = Arc::new(SharedEngine::new(super::engine(config, store.clone())));
    let counters;
    if args.once {
        let watcher = start(settings, engine)?;
        counters = watcher.counters();
        watcher.run(&cancelled())?;
    } else {
        let shutdown = CancellationToken::new();
        spawn_signal_thread(shutdown.clone())?;
        let watcher = start(settings, engine)?;
        counters = watcher.counters();
        eprintln!("spamnb: watching; stop with Ctrl-C");
        watcher.run(&shutdown)?;
    }
    let n = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "learned {}, relearned {}, {} over the burst limit, {} unreadable",
        n(&counters.learned),
        n(&counters.relearned),
        n(&counters.over_limit),
        n(&counters.unreadable)
    );
    Ok(ExitCode::SUCCESS)
}

fn start(settings: WatchSettings, engine: Arc<SharedEngine>) -> anyhow::Result<Watcher> {
    Watcher::start(settings, engine).context("starting the folder watcher")
}

fn cancelled() -> CancellationToken {
    let token = CancellationToken::new();
    token.cancel();
    token
}

/// SIGINT and SIGTERM cancel `shutdown`; the watcher then flushes the store and returns.
fn spawn_signal_thread(shutdown: CancellationToken) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal handler")?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let Ok(mut term) = signal(SignalKind::terminate()) else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            shutdown.cancel();
        });
    });
    Ok(())
}
