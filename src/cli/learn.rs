//! `spamnb learn`: messages from files, Maildirs, folders and mboxes into the store.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::route::{Missing, Prepared, Route};
use super::{IfLost, Settings};
use crate::mailbox::{self, Input, Unreadable};
use crate::model::Class;
use crate::store::Outcome;

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

impl LearnArgs {
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

/// Messages per store batch: each batch is one atomic write, which rewrites the buckets of
/// counts it touches; 500 messages already touch nearly all of them, so a batch costs about
/// a rewrite of the whole table (~40 ms of CPU on the benchmark's). 1,000 messages take
/// ~20 MB to hold; against 500 they cut learning's CPU by 8% and leave the pipeline two
/// batches to overlap in a 2,000-message run.
const BATCH: usize = 1000;

#[derive(Default)]
struct Tally {
    learned: usize,
    relearned: usize,
    known: usize,
    forgotten: usize,
    not_learned: usize,
    unreadable: Vec<Unreadable>,
}

impl Tally {
    fn count(&mut self, outcomes: &[Outcome]) {
        for o in outcomes {
            match o {
                Outcome::Learned => self.learned += 1,
                Outcome::Relearned => self.relearned += 1,
                Outcome::AlreadyKnown => self.known += 1,
                Outcome::Forgotten => self.forgotten += 1,
                Outcome::NotLearned => self.not_learned += 1,
            }
        }
    }
}

/// Reads one batch and prepares it for the route: its messages, and the inputs that could
/// not be read.
fn prepare(
    route: &Route,
    chunk: &[Input],
    target: Option<Class>,
    user: Option<&str>,
) -> (Prepared, Vec<Unreadable>) {
    let mut raws = Vec::with_capacity(chunk.len());
    let mut unreadable = Vec::new();
    for (name, read) in mailbox::read_all_mail(chunk) {
        match read {
            Ok(raw) => match route.refusal(&raw) {
                Some(reason) => unreadable.push(Unreadable { name, reason }),
                None => raws.push(raw),
            },
            Err(e) => unreadable.push(e),
        }
    }
    (route.prepare(raws, target, user), unreadable)
}

pub fn run(settings: &Settings, args: &LearnArgs) -> anyhow::Result<ExitCode> {
    let target = match (args.spam, args.ham) {
        (true, _) => Some(Class::Spam),
        (_, true) => Some(Class::Ham),
        _ => None,
    };
    let (config, route, inputs) =
        super::open_meanwhile(settings, &args.paths, Missing::Create, IfLost::Fail, |_| {
            Ok(mailbox::expand(&args.paths))
        })?;
    let mut tally = Tally::default();
    let bar = super::progress(inputs.len(), "learning");
    // A pipeline: while one batch is written to the store (one thread: writes are
    // serial), the next is read and tokenized on the others.
    let user = args.user.as_deref();
    let mut pending: Option<(Prepared, u64)> = None;
    for chunk in inputs.chunks(BATCH).map(Some).chain([None]) {
        let mut write = || {
            pending
                .take()
                .map(|(batch, n)| (route.learn(&batch, target, user), n))
        };
        let read = || chunk.map(|chunk| (prepare(&route, chunk, target, user), chunk.len() as u64));
        // One message (a Sieve or procmail hook) needs no thread pool, and a hook may run
        // under limits (Dovecot's vsz_limit) where starting one fails.
        let (written, next) = if inputs.len() < 2 {
            (write(), read())
        } else {
            rayon::join(write, read)
        };
        if let Some((outcomes, n)) = written {
            let outcomes =
                outcomes.with_context(|| format!("learning into {}", config.db.display()))?;
            tally.count(&outcomes);
            bar.inc(n);
        }
        pending = next.map(|((raws, unreadable), n)| {
            tally.unreadable.extend(unreadable);
            (raws, n)
        });
    }
    route
        .flush()
        .with_context(|| format!("saving {}", config.db.display()))?;
    bar.finish_and_clear();

    let code = super::report_unreadable(&tally.unreadable);
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
    Ok(code)
}
