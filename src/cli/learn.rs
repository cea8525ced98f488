//! `spamnb learn`: messages from files, Maildirs, folders and mboxes into the store.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use rayon::prelude::*;

use crate::config::Config;
use crate::mailbox::{self, Unreadable};
use crate::model::Class;
use crate::store::{Outcome, Store};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["spam", "ham", "forget"])))]
pub struct LearnArgs {
    /// Learn the messages as spam
    #[arg(long)]
    spam: bool,
    /// Learn the messages as ham (good mail)
    #[arg(long)]
    ham: bool,
    /// Remove what was learned from the messages
    #[arg(long)]
    forget: bool,
    /// Whose mail this is (recorded in the ledger)
    #[arg(long)]
    user: Option<String>,
    /// Files, Maildirs, folders, mbox files, or - for one message on stdin
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Messages per store batch: each batch is one atomic write.
const BATCH: usize = 500;

#[derive(Default)]
struct Tally {
    learned: usize,
    relearned: usize,
    known: usize,
    forgotten: usize,
    not_learned: usize,
    unreadable: Vec<Unreadable>,
}

pub fn run(config: &Config, args: &LearnArgs) -> anyhow::Result<ExitCode> {
    let target = match (args.spam, args.ham) {
        (true, _) => Some(Class::Spam),
        (_, true) => Some(Class::Ham),
        _ => None,
    };
    let store = super::open_store(config)?;
    let engine = super::engine(config, store.clone());
    let (sources, problems) = mailbox::expand(&args.paths);
    let mut tally = Tally {
        unreadable: problems,
        ..Tally::default()
    };
    let bar = super::progress(sources.len(), "learning");
    for chunk in sources.chunks(BATCH) {
        let mut raws = Vec::with_capacity(chunk.len());
        for (source, read) in mailbox::read_all(chunk) {
            match read {
                Ok(raw) if raw.iter().all(u8::is_ascii_whitespace) => {
                    tally.unreadable.push(Unreadable {
                        name: source.name(),
                        reason: "empty: not a message".into(),
                    })
                }
                Ok(raw) => raws.push(raw),
                Err(e) => tally.unreadable.push(e),
            }
        }
        let lessons: Vec<_> = raws
            .par_iter()
            .map(|raw| engine.lesson(raw, target, args.user.as_deref()))
            .collect();
        let outcomes = engine
            .learn(&lessons)
            .with_context(|| format!("learning into {}", config.db.display()))?;
        for o in outcomes {
            match o {
                Outcome::Learned => tally.learned += 1,
                Outcome::Relearned => tally.relearned += 1,
                Outcome::AlreadyKnown => tally.known += 1,
                Outcome::Forgotten => tally.forgotten += 1,
                Outcome::NotLearned => tally.not_learned += 1,
            }
        }
        bar.inc(chunk.len() as u64);
    }
    store
        .flush()
        .with_context(|| format!("saving {}", config.db.display()))?;
    bar.finish_and_clear();

    for u in &tally.unreadable {
        eprintln!("spamnb: {u}");
    }
    let class = target.map_or("", |c| c.name());
    let summary = match target {
        Some(_) => format!(
            "learned {} as {class}, relearned {} as {class}, {} already known",
            tally.learned, tally.relearned, tally.known
        ),
        None => format!(
            "forgot {}, {} were never learned",
            tally.forgotten, tally.not_learned
        ),
    };
    let unreadable = match tally.unreadable.len() {
        0 => String::new(),
        n => format!(", {n} unreadable (listed above)"),
    };
    eprintln!("{summary}{unreadable}");
    Ok(if tally.unreadable.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
