//! `spamnb rules check` (load and lint rule files) and `spamnb rules stats` (how often each
//! rule hits in spam and in ham, and the weight it has learned: whether it earns its place).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use rayon::prelude::*;

use super::{Format, RuleSource};
use crate::features::RULE_PREFIX;
use crate::mailbox;
use crate::message::Message;
use crate::rules::{LoadReport, Reason, RuleSet};

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Load rule files and report what loaded and what was skipped, and why; exit 1 when a
    /// rule fails (a plugin spamnb lacks is not a failure)
    Check(CheckArgs),
    /// For each rule: hits in spam, hits in ham, learned weight, most useful first
    Stats(StatsArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print only the totals, not each skipped rule
    #[arg(long)]
    summary: bool,
    /// Rule files or directories [default: the rules spamnb would load]
    paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Spam: files, Maildirs, folders or mbox files
    #[arg(long, num_args = 1.., required = true)]
    spam: Vec<PathBuf>,
    /// Ham: files, Maildirs, folders or mbox files
    #[arg(long, num_args = 1.., required = true)]
    ham: Vec<PathBuf>,
    /// Also list rules that never hit
    #[arg(long)]
    all: bool,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

pub fn run(args: &super::Args, cmd: &RulesCommand) -> anyhow::Result<ExitCode> {
    let config = super::load_settings(&args.settings)?;
    let source = match cmd {
        RulesCommand::Check(c) if !c.paths.is_empty() => RuleSource::Files(c.paths.clone()),
        _ => super::rule_source(&args.settings, &config),
    };
    let Some((set, report)) = super::on_thread_pool(|| source.load()) else {
        anyhow::bail!("no rules: rules are switched off (`--no-rules` or `none`)");
    };
    match cmd {
        RulesCommand::Check(c) => check(&set, &report, c),
        RulesCommand::Stats(s) => stats(&set, &config, s),
    }
}

fn check(set: &RuleSet, report: &LoadReport, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut lint = Vec::new();
    for r in set.rules() {
        if r.reported && r.describe.is_none() {
            lint.push(format!("{}: {}: no describe line", r.origin, r.name));
        }
    }
    if !args.summary {
        for p in &report.problems {
            writeln!(
                out,
                "{}: {}{}",
                p.origin,
                p.rule
                    .as_deref()
                    .map(|r| format!("{r}: "))
                    .unwrap_or_default(),
                p.reason
            )?;
        }
        for (name, kind, origin, reason) in &report.skipped {
            writeln!(out, "{origin}: {name} ({}) skipped: {reason}", kind.name())?;
        }
        for l in &lint {
            writeln!(out, "{l}")?;
        }
    }
    let loaded: Vec<String> = report
        .loaded
        .iter()
        .map(|(k, n)| format!("{} {n}", k.name()))
        .collect();
    writeln!(
        out,
        "{} file(s): loaded {} rules ({}); {} run as plain strings, {} by the bounded backtracker",
        report.files.len(),
        report.total_loaded(),
        loaded.join(", "),
        report.literal,
        report.backtracking
    )?;
    writeln!(out, "skipped {} rules", report.skipped.len())?;
    for (reason, n) in report.skipped_by_reason() {
        writeln!(out, "  {n:6}  {reason}")?;
    }
    // The compatibility figure: of the rules that are a regex (not eval, not meta, not
    // inside a plugin block spamnb lacks), how many load.
    let regex_skipped = report
        .skipped
        .iter()
        .filter(|(_, k, _, r)| *k != crate::rules::Kind::Meta && matches!(r, Reason::Regex(_)))
        .count();
    let regex_loaded = set
        .rules()
        .iter()
        .filter(|r| r.kind != crate::rules::Kind::Meta)
        .count()
        .saturating_sub(count_evals(set));
    let total = regex_loaded + regex_skipped;
    if total > 0 {
        writeln!(
            out,
            "regex rules: {regex_loaded} of {total} loaded ({:.1}%)",
            100.0 * regex_loaded as f64 / total as f64
        )?;
    }
    match (report.auth_readers, report.trusted_authserv.as_slice()) {
        (0, _) => {}
        (n, []) => writeln!(
            out,
            "note: {n} rule(s) read Authentication-Results, but no authres_trusted_authserv \
             names a server to trust: they cannot hit (README, \"Authentication results\")"
        )?,
        (n, trusted) => writeln!(
            out,
            "{n} rule(s) read the Authentication-Results of {}",
            trusted.join(", ")
        )?,
    }
    if !report.problems.is_empty() {
        writeln!(out, "{} line(s) with errors", report.problems.len())?;
    }
    if !lint.is_empty() {
        writeln!(out, "{} rule(s) without describe", lint.len())?;
    }
    out.flush()?;
    Ok(if report.has_errors() || !lint.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn count_evals(set: &RuleSet) -> usize {
    set.rules().iter().filter(|r| r.is_eval).count()
}

#[derive(serde::Serialize)]
struct Row<'a> {
    rule: &'a str,
    spam_hits: usize,
    ham_hits: usize,
    spam_pct: f64,
    ham_pct: f64,
    /// Spam hits over all hits, as SpamAssassin's hit-frequencies' S/O.
    s_o: f64,
    /// The weight learned for the rule's feature, `None` when it was never learned.
    weight: Option<f64>,
    /// Whether scores count that weight: one that leans too little either way
    /// (`min_token_weight`), or was learned from too few messages (`min_feature_messages`),
    /// is not evidence, and the rule moves no verdict.
    counted: bool,
}

fn stats(
    set: &RuleSet,
    config: &crate::config::Config,
    args: &StatsArgs,
) -> anyhow::Result<ExitCode> {
    let count = |paths: &[PathBuf]| -> (Vec<usize>, usize, Vec<mailbox::Unreadable>) {
        let inputs = mailbox::expand(paths);
        let mut problems = Vec::new();
        let mut hits = vec![0usize; set.len()];
        let mut n = 0;
        for chunk in inputs.chunks(256) {
            // What is not mail is named, as `learn` names it, and counts in no figure.
            let read = mailbox::read_all_mail(chunk);
            let per: Vec<Vec<u32>> = read
                .par_iter()
                .filter_map(|(_, raw)| raw.as_ref().ok())
                .map(|raw| set.evaluate_all(&Message::parse(raw, config.extractor.scan_limit)))
                .collect();
            n += per.len();
            for h in per {
                for (i, v) in h.into_iter().enumerate() {
                    hits[i] += usize::from(v > 0);
                }
            }
            problems.extend(read.into_iter().filter_map(|(_, r)| r.err()));
        }
        (hits, n, problems)
    };
    let (spam, n_spam, mut unreadable) = count(&args.spam);
    let (ham, n_ham, more) = count(&args.ham);
    unreadable.extend(more);
    // Weights come from the database when it can be read here (a `learn` that holds it is
    // waited for, as by the other commands; a daemon is not asked); without them the hits
    // still tell, and the warning says why every weight is `-`.
    let store = if !super::route::no_database_at(&config.db) {
        let daemon_away = || crate::store::holding_daemon(&config.db).is_none();
        crate::store::SledStore::open_waiting(&config.db, &config.store, daemon_away).map_err(|e| {
            match e {
                crate::store::Error::Locked { path } => format!(
                    "another process holds {} (a daemon, a `spamnb watch`, or a `learn` \
                     past --lock-wait), and rules stats reads weights from the database \
                     itself",
                    path.display()
                ),
                e => e.to_string(),
            }
        })
    } else {
        Err(format!(
            "there is no database at {} (`spamnb learn` makes one)",
            config.db.display()
        ))
    };
    if let Err(why) = &store {
        tracing::warn!("rules stats: no learned weights: {why}");
    }
    let weight = |name: &str| -> Option<(f64, bool)> {
        let feature = format!("{RULE_PREFIX}{name}");
        crate::model::feature_weight(&feature, store.as_ref().ok()?, &config.model)
    };
    let pct = |h: usize, n: usize| {
        if n == 0 {
            0.0
        } else {
            100.0 * h as f64 / n as f64
        }
    };
    let mut rows: Vec<Row> = set
        .rules()
        .iter()
        .enumerate()
        .filter(|(i, r)| r.reported && (args.all || spam[*i] + ham[*i] > 0))
        .map(|(i, r)| {
            let (sp, hp) = (pct(spam[i], n_spam), pct(ham[i], n_ham));
            let weight = weight(&r.name);
            Row {
                rule: &r.name,
                spam_hits: spam[i],
                ham_hits: ham[i],
                spam_pct: sp,
                ham_pct: hp,
                s_o: if sp + hp > 0.0 { sp / (sp + hp) } else { 0.5 },
                weight: weight.map(|(w, _)| w),
                counted: weight.is_some_and(|(_, counted)| counted),
            }
        })
        .collect();
    // Most useful first: how far S/O is from a coin toss, times how often the rule hits at all.
    let usefulness = |r: &Row| (r.s_o - 0.5).abs() * (r.spam_pct + r.ham_pct);
    rows.sort_by(|a, b| {
        usefulness(b)
            .total_cmp(&usefulness(a))
            .then(a.rule.cmp(b.rule))
    });
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = (|| -> anyhow::Result<()> {
        match args.format {
            Format::Json => {
                for r in &rows {
                    writeln!(out, "{}", serde_json::to_string(r)?)?;
                }
            }
            Format::Tsv => {
                writeln!(
                    out,
                    "rule\tspam_hits\tham_hits\tspam_pct\tham_pct\ts_o\tweight\tcounted"
                )?;
                for r in &rows {
                    let w = r.weight.map_or("-".into(), |w| format!("{w:.3}"));
                    let counted = if r.counted { "yes" } else { "no" };
                    writeln!(
                        out,
                        "{}\t{}\t{}\t{:.3}\t{:.3}\t{:.3}\t{w}\t{counted}",
                        r.rule, r.spam_hits, r.ham_hits, r.spam_pct, r.ham_pct, r.s_o
                    )?;
                }
            }
            Format::Text => {
                writeln!(out, "{n_spam} spam, {n_ham} ham")?;
                writeln!(
                    out,
                    "{:>8} {:>8} {:>6} {:>8}  RULE",
                    "SPAM%", "HAM%", "S/O", "WEIGHT"
                )?;
                for r in &rows {
                    let w = match r.weight {
                        None => "-".into(),
                        Some(w) if r.counted => format!("{w:+.3}"),
                        Some(w) => format!("({w:+.3})"),
                    };
                    writeln!(
                        out,
                        "{:>8.3} {:>8.3} {:>6.3} {w:>8}  {}",
                        r.spam_pct, r.ham_pct, r.s_o, r.rule
                    )?;
                }
                if rows.iter().any(|r| r.weight.is_some() && !r.counted) {
                    writeln!(
                        out,
                        "(a weight in parentheses does not count in scores: it leans too little \
                         either way, or was learned from too few messages; [model] \
                         min_token_weight = {}, min_feature_messages = {})",
                        config.model.min_token_weight, config.model.min_feature_messages
                    )?;
                }
                if store.is_ok() && rows.iter().any(|r| r.weight.is_none()) {
                    writeln!(out, "(-: not learned in this database)")?;
                }
            }
        }
        out.flush()?;
        Ok(())
    })();
    if let Err(e) = written {
        return super::output_failed(e);
    }
    Ok(super::report_unreadable(&unreadable))
}
