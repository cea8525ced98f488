//! `spamnb stats`, `export` and `import`: looking into, saving and restoring the database.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::Format;
use crate::config::Config;
use crate::model::CountSource;
use crate::store;

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Where to write the dump [default: stdout]
    file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The dump to load [default: stdin]
    file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove tokens seen in fewer learned messages than this (spam and ham together)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    min_messages: u32,
    /// Say how many tokens would go, and change nothing
    #[arg(long)]
    dry_run: bool,
}

pub fn prune(config: &Config, args: &PruneArgs) -> anyhow::Result<ExitCode> {
    // The database here, or through the daemon that holds it.
    let route = super::route::Route::open(config)?;
    let p = route.prune(args.min_messages, args.dry_run)?;
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    println!(
        "{verb} {} of {} tokens (seen in fewer than {} messages; rule hits stay), {} left",
        p.removed,
        p.removed + p.kept,
        args.min_messages,
        p.kept
    );
    if !args.dry_run && p.removed > 0 {
        route.flush().context("saving the pruned database")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stats(config: &Config, args: &StatsArgs) -> anyhow::Result<ExitCode> {
    // The database here, or through the daemon that holds it.
    let s = super::route::Route::open(config)?.stats()?;
    let t = s.totals;
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::json!({
                "database": config.db,
                "schema_version": s.schema_version,
                "messages": { "spam": t.messages[1], "ham": t.messages[0] },
                "ledger_entries": s.ledger_entries,
                "tokens": t.vocabulary,
                "occurrences": { "spam": t.occurrences[1], "ham": t.occurrences[0] },
                "size_on_disk": s.size_on_disk,
            })
        ),
        Format::Text | Format::Tsv => {
            println!("database        {}", config.db.display());
            println!("schema version  {}", s.schema_version);
            println!("spam learned    {}", t.messages[1]);
            println!("ham learned     {}", t.messages[0]);
            println!("ledger entries  {}", s.ledger_entries);
            println!("distinct tokens {}", t.vocabulary);
            println!("size on disk    {:.1} MB", s.size_on_disk as f64 / 1e6);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn export(config: &Config, args: &ExportArgs) -> anyhow::Result<ExitCode> {
    // The database here, or through the daemon that holds it.
    let route = super::route::Route::open(config)?;
    let mut out: Box<dyn Write> = match &args.file {
        Some(p) => Box::new(BufWriter::new(
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    route.export(&mut out).context("writing the export")?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(config: &Config, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let store = super::open_store(config)?;
    let name = args
        .file
        .as_ref()
        .map_or("stdin".into(), |p| p.display().to_string());
    let tokens = match &args.file {
        Some(p) => {
            let f = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            store::import(&*store, &mut BufReader::new(f))
        }
        None => store::import(&*store, &mut std::io::stdin().lock()),
    }
    .with_context(|| format!("importing {name}"))?;
    let t = store.totals();
    eprintln!(
        "imported {tokens} tokens, {} spam and {} ham messages into {}",
        t.messages[1],
        t.messages[0],
        config.db.display()
    );
    Ok(ExitCode::SUCCESS)
}
