//! The `spamnb` command line: argument parsing, configuration, and one module per command.

mod check;
mod daemon;
mod db;
mod eval;
mod filter;
mod learn;
mod route;
mod rules;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use crate::config::Config;
use crate::engine::Engine;
use crate::store::SledStore;

#[derive(Debug, Parser)]
#[command(
    name = "spamnb",
    version,
    about = "Spam filtering with naive Bayes over words and handcrafted rules"
)]
pub struct Args {
    #[command(flatten)]
    pub settings: Settings,
    /// Log more (-v info, -vv debug); SPAMNB_LOG takes a full filter
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// Where the configuration, the database and the rules come from: everything needed to
/// load the configuration, again on SIGHUP.
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Configuration file [default: ~/.config/spamnb/spamnb.toml, then /etc/spamnb/spamnb.toml]
    #[arg(long, global = true, env = "SPAMNB_CONFIG")]
    pub config: Option<PathBuf>,
    /// Database directory [default: from the configuration, else ~/.local/share/spamnb/db]
    #[arg(long, global = true, env = "SPAMNB_DB")]
    pub db: Option<PathBuf>,
    /// Rule files or directories, separated by ':'; "none" for no rules
    /// [default: the configuration's `rules`, else /etc/spamnb/rules, /usr/share/spamnb/rules,
    /// ./rules, else the built-in copy of spamnb's own]
    #[arg(long, global = true, env = "SPAMNB_RULES")]
    pub rules: Option<String>,
    /// Score with words alone: load no rules
    #[arg(long, global = true)]
    pub no_rules: bool,
    /// Seconds to wait for the database while another spamnb process holds it [default: 20]
    #[arg(long, global = true, env = "SPAMNB_LOCK_WAIT", value_name = "SECONDS")]
    pub lock_wait: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Learn messages as spam or ham, or forget them
    Learn(learn::LearnArgs),
    /// Classify messages and print a verdict for each
    Check(check::CheckArgs),
    /// Read a message on stdin, write it to stdout with X-Spam-* headers added
    Filter(filter::FilterArgs),
    /// Show what the database holds
    Stats(db::StatsArgs),
    /// Write the whole model and ledger as plain text
    Export(db::ExportArgs),
    /// Load a plain-text export into a new database
    Import(db::ImportArgs),
    /// Remove the counts of rare tokens, so that the database stops growing
    Prune(db::PruneArgs),
    /// Run the daemon: milter, spamd protocol, control socket, metrics
    Daemon(daemon::DaemonArgs),
    /// Learn from the folders users move mail into and out of (Junk), without the daemon
    Watch(watch::WatchArgs),
    /// Measure how well spamnb sorts labelled mail (cross-validation, split, online)
    Eval(Box<eval::EvalArgs>),
    /// Lint rule files, or measure how often each rule hits in spam and ham
    #[command(subcommand)]
    Rules(rules::RulesCommand),
}

impl Command {
    /// Whether the command sets up its own logging (the daemon: text or JSON, from its
    /// configuration) instead of main's plain stderr logger.
    pub fn sets_up_logging(&self) -> bool {
        matches!(self, Command::Daemon(_))
    }

    /// Whether the command handles one message, as a mail server's hook runs it.
    fn handles_one_message(&self) -> bool {
        match self {
            Command::Filter(_) => true,
            Command::Learn(a) => one_message(a.paths()),
            Command::Check(a) => one_message(a.paths()),
            _ => false,
        }
    }
}

/// Whether `paths` name one message: `-` (stdin) or one file.
fn one_message(paths: &[PathBuf]) -> bool {
    matches!(paths, [p] if p.as_os_str() == "-" || p.is_file())
}

/// Makes every thread allocate from glibc's main malloc arena. By default glibc gives each
/// thread that allocates an arena of its own, each a 64 MB reservation of address space;
/// sled starts eight threads however little it is asked to do, so a one-message `learn`
/// reserved some 650 MB while it used 15. Under an address-space limit (Dovecot runs its
/// pipe programs under `default_vsz_limit`, 256 MB) the arenas took the room the message
/// needed, and spamnb aborted. One message gains nothing from threads allocating side by
/// side; many messages on every core would, so they keep glibc's default.
fn malloc_in_one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: no other thread runs yet; mallopt only sets what glibc reads when a thread
    // first allocates.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Tsv,
    Json,
}

/// The command line, parsed; or, when it does not parse, the exit code after clap has
/// said why. A `filter` that cannot parse its own (a bad `SPAMNB_FILTER_TIMEOUT` in a
/// hook's environment) passes the message on unchanged: procmail without `w` delivered
/// the empty output of a filter that failed, and maildrop deferred the mail.
pub fn parse() -> Result<Args, ExitCode> {
    use clap::CommandFactory;
    let e = match Args::try_parse() {
        Ok(args) => return Ok(args),
        Err(e) => e,
    };
    let filtering = e.use_stderr()
        && (Args::command().ignore_errors(true).try_get_matches())
            .is_ok_and(|m| m.subcommand_name() == Some("filter"));
    let blamed = empty_variable_blamed(&e.to_string());
    if filtering {
        let why = blamed.unwrap_or_else(|| e.to_string());
        return Err(filter::pass_through(why.trim_end()));
    }
    match blamed {
        Some(why) => {
            eprintln!("{why}");
            Err(ExitCode::from(2))
        }
        None => e.exit(),
    }
}

/// The options an environment variable may give, by variable.
const OPTION_VARIABLES: [(&str, &str); 5] = [
    ("SPAMNB_CONFIG", "--config"),
    ("SPAMNB_DB", "--db"),
    ("SPAMNB_RULES", "--rules"),
    ("SPAMNB_LOCK_WAIT", "--lock-wait"),
    ("SPAMNB_FILTER_TIMEOUT", "--timeout"),
];

/// When clap's `error` is about an option the command line did not give and whose
/// variable is set but empty, an error that names the variable: clap blames the option.
fn empty_variable_blamed(error: &str) -> Option<String> {
    let given: Vec<String> = std::env::args().skip(1).collect();
    OPTION_VARIABLES.iter().find_map(|&(variable, option)| {
        let empty = std::env::var_os(variable).is_some_and(|v| v.is_empty());
        let named = error.contains(&format!("'{option} "));
        let on_the_line = given
            .iter()
            .any(|a| a == option || a.starts_with(&format!("{option}=")));
        (empty && named && !on_the_line).then(|| {
            format!(
                "error: {variable} is set but empty: unset it, or set it to a value for {option}"
            )
        })
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.command.handles_one_message() {
        malloc_in_one_arena();
    }
    match &args.command {
        // The filter loads its configuration itself: its errors must not lose the mail.
        Command::Filter(a) => Ok(filter::run(&args, a)),
        Command::Learn(a) => learn::run(&args.settings, a),
        Command::Check(a) => check::run(&args.settings, a),
        // Commands that read no mail load no rules.
        Command::Stats(a) => db::stats(&load_settings(&args.settings)?, a),
        Command::Export(a) => db::export(&load_settings(&args.settings)?, a),
        Command::Import(a) => db::import(&load_settings(&args.settings)?, a),
        Command::Prune(a) => db::prune(&load_settings(&args.settings)?, a),
        Command::Daemon(a) => daemon::run(&args, a),
        Command::Watch(a) => watch::run(&load_config(&args.settings)?, a),
        Command::Eval(a) => eval::run(&load_config(&args.settings)?, a),
        Command::Rules(a) => rules::run(&args, a),
    }
}

/// The configuration file, with `--db` laid over it; no rules loaded.
pub fn load_settings(args: &Settings) -> anyhow::Result<Config> {
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(db) = &args.db {
        config.db = db.clone();
    }
    if let Some(secs) = args.lock_wait {
        config.store.lock_wait = std::time::Duration::from_secs(secs);
    }
    Ok(config)
}

/// The configuration, with the rules that `--rules`, `SPAMNB_RULES`, the file or the
/// default places name loaded and compiled: for the commands that turn mail into features.
pub fn load_config(args: &Settings) -> anyhow::Result<Config> {
    let mut config = load_settings(args)?;
    config.extractor.rules = held_to_exit(load_rules(args, &config, IfLost::Fail)?);
    Ok(config)
}

/// Rules for a command that holds them until it exits, which frees them at once. Dropping
/// a compiled rule set, thousands of allocations, took a millisecond of a one-message
/// `filter`'s 18, spent before it wrote the message out. (The daemon, which replaces its
/// rules, loads them otherwise.)
fn held_to_exit(rules: Option<Arc<crate::rules::RuleSet>>) -> Option<Arc<crate::rules::RuleSet>> {
    if let Some(rules) = &rules {
        std::mem::forget(Arc::clone(rules));
    }
    rules
}

/// Runs `f` on rayon's thread pool, so that rules it loads compile on every core:
/// SpamAssassin's take a second on one. Not for hooks: see `open_meanwhile`.
pub fn on_thread_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    rayon::scope(|_| f())
}

/// What loading rules does about a rule file or directory named that cannot be read at
/// all (a path that is not there, a file without permission).
#[derive(Clone, Copy)]
pub enum IfLost<'r> {
    /// Stops the command, naming the path: a mistyped one ran every command without the
    /// rules it named, the GTUBE test and the welcome and block lists among them, and
    /// said so in one log line.
    Fail,
    /// Logs it and goes on with the rules read: mail in transit (`filter`) does not stop
    /// for it.
    Warn,
    /// Keeps the rules in force (a daemon's reload), also when nothing loads where they
    /// ran: a rule file being rewritten, or a directory moved, must not leave mail
    /// unfiltered; an administrator who wants no rules says `rules = []`.
    Keep(&'r Arc<crate::rules::RuleSet>),
}

/// The rules the configuration names, compiled; `None` when it names none. A rule that
/// cannot be used is skipped with a warning; a file that cannot be read, as `if_lost` says.
pub fn load_rules(
    args: &Settings,
    config: &Config,
    if_lost: IfLost,
) -> anyhow::Result<Option<Arc<crate::rules::RuleSet>>> {
    let source = rule_source(args, config);
    let started = std::time::Instant::now();
    let loaded = source.load();
    let count = loaded
        .as_ref()
        .map_or(0, |(_, report)| report.total_loaded());
    // How long the rules take to be ready (a reload's, in the daemon's log), for whoever
    // tunes a big rule set.
    tracing::info!(
        loaded = count,
        compile_ms = started.elapsed().as_millis() as u64,
        "rules: {}",
        source.describe()
    );
    let Some((set, report)) = loaded else {
        return Ok(None);
    };
    if report.auth_readers > 0 && !report.trusted_authserv.is_empty() {
        tracing::info!(
            rules = report.auth_readers,
            "rules: reading the Authentication-Results of {}",
            report.trusted_authserv.join(", ")
        );
    }
    let lost: Vec<String> = (report.lost_files())
        .map(|p| format!("{}: {}", p.origin.file.display(), p.reason))
        .collect();
    if matches!(if_lost, IfLost::Fail) && !lost.is_empty() {
        anyhow::bail!(
            "cannot read the rules named ({}); correct the path (--rules, SPAMNB_RULES or \
             `rules` in the configuration), or switch rules off with --no-rules",
            lost.join("; ")
        );
    }
    for l in &lost {
        tracing::error!("rules: {l}");
    }
    if let IfLost::Keep(kept) = if_lost
        && (!lost.is_empty() || set.is_empty())
    {
        tracing::error!(
            kept = kept.rules().len(),
            "rules: the new rules could not be read whole; keeping the ones in force"
        );
        return Ok(Some(kept.clone()));
    }
    if !report.skipped.is_empty() || !report.problems.is_empty() {
        tracing::warn!(
            loaded = report.total_loaded(),
            skipped = report.skipped.len(),
            problems = report.problems.len(),
            "some rules were not loaded; `spamnb rules check` lists them"
        );
    }
    Ok((!set.is_empty()).then(|| Arc::new(set)))
}

/// The configuration with its rules, the route to its database, and what `meanwhile` made
/// with the route, all while the rules compiled on another core: compiling takes about as
/// long as opening the database and listing the messages, and a `check` of a few thousand
/// messages would otherwise spend a tenth of its time waiting for one or the other. For
/// one message `paths` (a hook, perhaps under a memory limit that a thread pool would
/// break) on one thread beside this one. Not at all when the daemon holds the database: it
/// scores with its own rules, and compiling them took three quarters of a hook's time
/// through it (with SpamAssassin's, a second before any command through it began).
pub fn open_meanwhile<T: Send>(
    args: &Settings,
    paths: &[PathBuf],
    missing: route::Missing,
    if_lost: IfLost,
    meanwhile: impl FnOnce(&route::Route) -> anyhow::Result<T> + Send,
) -> anyhow::Result<(Config, route::Route, T)> {
    let mut config = load_settings(args)?;
    let open = || -> anyhow::Result<(route::Route, T)> {
        // The database here, or through the daemon that holds it.
        let route = route::Route::open(&config, missing)?;
        let made = meanwhile(&route)?;
        Ok((route, made))
    };
    // The rules compiled while the database opens (`None`: not compiled), unless the
    // daemon holds it.
    let (compiled, opened) = if crate::store::daemon_may_hold(&config.db) {
        (None, open())
    } else if one_message(paths) {
        // A local hook took 18.7 ms with the rules compiled before the database opened,
        // 16.7 beside it (sled's threads keep the other core busy meanwhile).
        std::thread::scope(|s| {
            let beside =
                std::thread::Builder::new().spawn_scoped(s, || load_rules(args, &config, if_lost));
            let opened = open();
            let compiled =
                (beside.ok()).map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            (compiled, opened)
        })
    } else {
        let (rules, opened) = rayon::join(|| load_rules(args, &config, if_lost), open);
        (Some(rules), opened)
    };
    // Compiled now where the database turned out to be this command's after all: the daemon
    // let go of it between the look and the open, or no thread was to be had beside it.
    let local = matches!(&opened, Ok((route::Route::Local { .. }, _)));
    let rules = match compiled {
        Some(rules) => rules?,
        None if local => load_rules(args, &config, if_lost)?,
        None => None,
    };
    let rules = held_to_exit(rules);
    let (mut route, made) = opened?;
    if matches!(route, route::Route::Daemon { .. }) && (args.no_rules || args.rules.is_some()) {
        // A `check --no-rules` answered with the daemon's GTUBE hit, or a mistyped
        // `--rules` path taken without a word, looked like the flag doing nothing.
        tracing::warn!(
            "the daemon holding {} scores and learns with the rules it loaded: --rules, \
             --no-rules and SPAMNB_RULES go unused through it; give the daemon these rules \
             (`rules` in its configuration, then SIGHUP), or stop it to use them here",
            config.db.display()
        );
    }
    route.set_rules(rules.clone());
    config.extractor.rules = rules;
    Ok((config, route, made))
}

/// Which rules to load.
pub enum RuleSource {
    /// `--no-rules`, or `none`.
    Nothing,
    Files(Vec<PathBuf>),
    /// No rules named and none installed: spamnb's own, built in.
    BuiltIn,
}

impl RuleSource {
    /// Where the rules come from, for the log.
    pub fn describe(&self) -> String {
        match self {
            RuleSource::Nothing => "none (switched off)".into(),
            RuleSource::Files(paths) => paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            RuleSource::BuiltIn => "spamnb's own, built into the binary".into(),
        }
    }

    pub fn load(&self) -> Option<(crate::rules::RuleSet, crate::rules::LoadReport)> {
        match self {
            RuleSource::Nothing => None,
            RuleSource::Files(paths) => Some(crate::rules::RuleSet::load(paths)),
            RuleSource::BuiltIn => Some(crate::rules::RuleSet::built_in()),
        }
    }
}

/// The rules to load: `--no-rules`, `--rules`/`SPAMNB_RULES`, the configuration's
/// `rules`, the default places, the built-in ones, in that order.
pub fn rule_source(args: &Settings, config: &Config) -> RuleSource {
    if args.no_rules {
        return RuleSource::Nothing;
    }
    let paths: Vec<PathBuf> = match (args.rules.as_deref().map(str::trim), &config.rules) {
        (Some("" | "none"), _) => return RuleSource::Nothing,
        (Some(list), _) => list
            .split(':')
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect(),
        (None, Some(paths)) => paths.clone(),
        (None, None) => match crate::config::default_rules() {
            installed if installed.is_empty() => return RuleSource::BuiltIn,
            installed => installed,
        },
    };
    if paths.is_empty() {
        RuleSource::Nothing
    } else {
        RuleSource::Files(paths)
    }
}

/// The database for a command that holds it itself (`watch`, `import`). A holder that is
/// no daemon (a `learn`, a hook, a watcher that is stopping) lets go in moments and is
/// waited for, up to `--lock-wait`, as `learn` and the daemon wait; a daemon keeps it.
pub fn open_store(config: &Config) -> anyhow::Result<Arc<SledStore>> {
    ensure_parent(&config.db)?;
    let store = SledStore::open_waiting(&config.db, &config.store, || {
        crate::store::holding_daemon(&config.db).is_none()
    })?;
    Ok(Arc::new(store))
}

pub fn engine(config: &Config, store: Arc<SledStore>) -> Engine {
    Engine {
        extractor: config.extractor.clone(),
        model: config.model.clone(),
        store,
    }
}

pub(crate) fn ensure_parent(db: &Path) -> anyhow::Result<()> {
    if let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| {
            format!(
                "cannot create the directory {} for the database",
                parent.display()
            )
        })?;
    }
    Ok(())
}

/// How a command ends when writing its output failed: quietly and successfully when the
/// reader has gone (`spamnb check … | head -1`), as `cat` ends: what it did not read, it
/// did not want.
fn output_failed(e: anyhow::Error) -> anyhow::Result<ExitCode> {
    match e.downcast_ref::<std::io::Error>() {
        Some(io) if io.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        _ => Err(e.context("writing to stdout")),
    }
}

/// Names each input that could not be read, one a line on stderr; exit 2 if there were
/// any (as grep and ripgrep do), so scripts notice without parsing the output.
fn report_unreadable(unreadable: &[crate::mailbox::Unreadable]) -> ExitCode {
    for u in unreadable {
        eprintln!("spamnb: {u}");
    }
    if unreadable.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
fn progress(len: usize, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() || len < 2 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} {bar:40} {pos}/{len} {per_sec} eta {eta}",
        )
        .expect("progress template is valid"),
    );
    bar.set_prefix(what.to_string());
    bar
}
