//! `spamnb stats`, `export` and `import`: looking into, saving and restoring the database.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::Format;
use super::route::Missing;
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
    let route = super::route::Route::open(config, Missing::Empty)?;
    let p = route.prune(args.min_messages, args.dry_run)?;
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    print(&format!(
        "{verb} {} of {} tokens (seen in fewer than {} messages; rule hits stay), {} left\n",
        p.removed,
        p.removed + p.kept,
        args.min_messages,
        p.kept
    ))?;
    if !args.dry_run && p.removed > 0 {
        route.flush().context("saving the pruned database")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stats(config: &Config, args: &StatsArgs) -> anyhow::Result<ExitCode> {
    // The database here, or through the daemon that holds it.
    let s = super::route::Route::open(config, Missing::Empty)?.stats()?;
    let t = s.totals;
    let text = match args.format {
        Format::Json => format!(
            "{}\n",
            serde_json::json!({
                "database": config.db,
                "schema_version": s.schema_version,
                "ledger_digest": s.ledger_digest.name(),
                "messages": { "spam": t.messages[1], "ham": t.messages[0] },
                "ledger_entries": s.ledger_entries,
                "tokens": t.vocabulary,
                "occurrences": { "spam": t.occurrences[1], "ham": t.occurrences[0] },
                "size_on_disk": s.size_on_disk,
            })
        ),
        Format::Text | Format::Tsv => format!(
            "database        {}\n\
             schema version  {}\n\
             ledger digest   {}\n\
             spam learned    {}\n\
             ham learned     {}\n\
             ledger entries  {}\n\
             distinct tokens {}\n\
             size on disk    {:.1} MB\n",
            config.db.display(),
            s.schema_version,
            s.ledger_digest.name(),
            t.messages[1],
            t.messages[0],
            s.ledger_entries,
            t.vocabulary,
            s.size_on_disk as f64 / 1e6
        ),
    };
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to stdout. A reader that has gone (`spamnb stats | head -1`) ends the
/// command quietly, as it ends `cat`: what it did not read, it did not want.
fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written.context("writing to stdout"),
    }
}

pub fn export(config: &Config, args: &ExportArgs) -> anyhow::Result<ExitCode> {
    // The database here, or through the daemon that holds it.
    let route = super::route::Route::open(config, Missing::Empty)?;
    match &args.file {
        Some(p) => export_to(&route, p)?,
        None => write_dump(&route, std::io::stdout().lock()).context("writing the export")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the dump beside `path` and renames it over `path` only once it is whole and on
/// disk: an export that fails (a full disk, a read error midway) leaves the backup made
/// before it as it was. What is not a regular file (a pipe, `/dev/stdout`) holds no backup
/// and is written in place.
fn export_to(route: &super::route::Route, path: &Path) -> anyhow::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let f = File::create(path).with_context(|| format!("cannot open {}", path.display()))?;
        return write_dump(route, f).context("writing the export");
    }
    // A link to the backup stays a link: the file it names is the one replaced.
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let Some(name) = path.file_name() else {
        anyhow::bail!("{} names no file to export to", path.display());
    };
    let mut partial = name.to_os_string();
    partial.push(format!(".{}.partial", std::process::id()));
    let partial = path.with_file_name(partial);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let written = (|| -> anyhow::Result<()> {
        // A backup kept private stays private.
        if let Ok(old) = std::fs::metadata(&path) {
            file.set_permissions(old.permissions())?;
        }
        write_dump(route, &file)?;
        file.sync_all()?;
        Ok(std::fs::rename(&partial, &path)?)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written.with_context(|| format!("writing the export to {}", path.display()))
}

fn write_dump(route: &super::route::Route, out: impl Write) -> anyhow::Result<()> {
    let mut out = BufWriter::new(out);
    route.export(&mut out)?;
    // Dropping a BufWriter would flush it and lose the error: a full disk must not leave
    // a cut dump behind an exit status of success.
    Ok(out.flush()?)
}

pub fn import(config: &Config, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let name = args
        .file
        .as_ref()
        .map_or("stdin".into(), |p| p.display().to_string());
    // The whole dump is read before the database is opened, so that one refused makes
    // none; but a database the daemon holds is named at once, before a dump it cannot take.
    let held = (crate::store::daemon_may_hold(&config.db))
        .then(|| super::open_store(config))
        .transpose()?;
    let dump = match &args.file {
        Some(p) => {
            let f = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            store::read_dump(&mut BufReader::new(f))
        }
        None => store::read_dump(&mut std::io::stdin().lock()),
    }
    .with_context(|| format!("importing {name}"))?;
    let store = match held {
        Some(store) => store,
        None => super::open_store(config)?,
    };
    let tokens = (dump.load_into(&*store)).with_context(|| format!("importing {name}"))?;
    let t = store.totals();
    eprintln!(
        "imported {tokens} tokens, {} spam and {} ham messages into {}",
        t.messages[1],
        t.messages[0],
        config.db.display()
    );
    Ok(ExitCode::SUCCESS)
}
