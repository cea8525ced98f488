//! `spamnb check`: a verdict for each message, as text, TSV or JSON lines.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::Format;
use super::route::Missing;
use super::{IfLost, Settings};
use crate::mailbox;
use crate::model::Verdict;
use crate::store::LedgerEntry;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Output format; tsv is PATH, VERDICT, SCORE, PROBABILITY separated by tabs
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Show the features that moved each verdict most, with their weights
    #[arg(long)]
    explain: bool,
    /// Files, Maildirs, folders, mbox files, or - for one message on stdin
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

impl CheckArgs {
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

/// Below this many messages, reading counts from sled's cache beats loading the table.
const PRELOAD_FROM: usize = 20;
const CHUNK: usize = 256;

pub fn run(settings: &Settings, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let (_, route, (inputs, first)) = super::open_meanwhile(
        settings,
        &args.paths,
        Missing::Empty,
        IfLost::Fail,
        |route| {
            // The first chunk is read here too, while the rules compile, rather than after.
            let listed_and_read = || {
                let inputs = mailbox::expand(&args.paths);
                let first = mailbox::read_all(&inputs[..inputs.len().min(CHUNK)]);
                (inputs, first)
            };
            // Many messages are scored from the counts loaded into memory; when the arguments
            // promise many, loading them overlaps listing and reading the messages.
            let many = args.paths.len() >= PRELOAD_FROM || args.paths.iter().any(|p| p.is_dir());
            if many {
                let (listed, loaded) = rayon::join(listed_and_read, || route.preload());
                loaded?;
                Ok(listed)
            } else {
                let (inputs, first) = listed_and_read();
                if inputs.len() >= PRELOAD_FROM {
                    route.preload()?;
                }
                Ok((inputs, first))
            }
        },
    )?;
    let mut unreadable = Vec::new();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // A pipeline: while one chunk is scored, the next is read, so that neither core waits
    // on the file system.
    let chunks: Vec<&[mailbox::Input]> = inputs.chunks(CHUNK).collect();
    let mut next = Some(first);
    for i in 0..chunks.len() {
        let read = next.take().expect("each chunk is read before it is scored");
        let score = || -> anyhow::Result<Vec<(Verdict, Option<LedgerEntry>)>> {
            let readable: Vec<&[u8]> = read
                .iter()
                .filter_map(|(_, raw)| raw.as_deref().ok())
                .collect();
            let verdicts = route.check(&readable)?;
            let learned = if args.explain {
                route.learned(&readable)?
            } else {
                vec![None; readable.len()]
            };
            Ok(verdicts.into_iter().zip(learned).collect())
        };
        let read_next = || chunks.get(i + 1).map(|c| mailbox::read_all(c));
        // One message (a hook) needs no thread pool.
        let (scored, following) = if inputs.len() < 2 {
            (score(), read_next())
        } else {
            rayon::join(score, read_next)
        };
        next = following;
        let mut scored = scored?.into_iter();
        for (name, raw) in read {
            match raw {
                Ok(_) => {
                    let (v, learned) = scored
                        .next()
                        .expect("a readable message always has a verdict");
                    let printed = print(
                        &mut out,
                        &name,
                        v.decision.name(),
                        &v,
                        learned.as_ref(),
                        args,
                    );
                    if let Err(e) = printed {
                        return super::output_failed(e.into());
                    }
                }
                Err(e) => {
                    // One line per input still: scripts pair lines with their inputs. Its
                    // word is `error`: the numbers of no evidence would pass for a verdict.
                    let unreadable_verdict = Verdict::unsure(Vec::new(), "unreadable".into());
                    let printed = print(&mut out, &name, "error", &unreadable_verdict, None, args);
                    if let Err(e) = printed {
                        return super::output_failed(e.into());
                    }
                    unreadable.push(e);
                }
            }
        }
    }
    if let Err(e) = out.flush() {
        return super::output_failed(e.into());
    }
    Ok(super::report_unreadable(&unreadable))
}

/// `decision`: the verdict's word, or `error` for an input that could not be read.
/// `learned`: the message's ledger entry, looked up for `--explain` only.
fn print(
    out: &mut impl Write,
    name: &str,
    decision: &str,
    v: &Verdict,
    learned: Option<&LedgerEntry>,
    args: &CheckArgs,
) -> std::io::Result<()> {
    match args.format {
        Format::Tsv => writeln!(
            out,
            "{name}\t{decision}\t{:.4}\t{:.6}",
            v.score, v.probability
        )?,
        Format::Json => {
            let mut obj = serde_json::json!({
                "path": name,
                "verdict": decision,
                "score": v.score,
                "probability": v.probability,
                "rules": v.rules,
            });
            if let Some(note) = &v.note {
                obj["note"] = note.as_str().into();
            }
            if args.explain {
                obj["reasons"] = serde_json::to_value(&v.reasons).expect("reasons serialize");
                obj["parts"] = serde_json::to_value(v.parts).expect("parts serialize");
                obj["learned"] = serde_json::to_value(learned).expect("ledger entry serializes");
            }
            writeln!(out, "{obj}")?;
        }
        Format::Text => {
            write!(
                out,
                "{name}: {decision} (score {:.2}, probability {:.4})",
                v.score, v.probability
            )?;
            if let Some(note) = &v.note {
                write!(out, " — {note}")?;
            }
            writeln!(out)?;
            if args.explain {
                if let Some(parts) = &v.parts {
                    writeln!(out, "  {}", parts.describe())?;
                }
                if !v.rules.is_empty() {
                    writeln!(out, "  rules: {}", v.rules.join(", "))?;
                }
                if let Some(e) = learned {
                    writeln!(out, "  {}", describe_learned(e))?;
                }
                for r in &v.reasons {
                    let towards = if r.weight > 0.0 { "spam" } else { "ham " };
                    writeln!(
                        out,
                        "  {towards} {:+8.3}  {} ×{}",
                        r.weight,
                        crate::message::escape_control(&r.feature),
                        r.count
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// A ledger entry for a person: the message's own words are in the counts that scored it.
fn describe_learned(e: &LedgerEntry) -> String {
    let when = i64::try_from(e.learned_at)
        .map(|t| mail_parser::DateTime::from_timestamp(t).to_rfc3339())
        .unwrap_or_else(|_| e.learned_at.to_string());
    let user = e.user.as_ref().map_or(String::new(), |u| {
        format!(" for {}", crate::message::escape_control(u))
    });
    format!(
        "learned as {} at {when}{user}: its own words count in this verdict",
        e.class.name()
    )
}
