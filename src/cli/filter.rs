//! `spamnb filter`: the MTA/MDA hook. The message comes in on stdin and always goes out on
//! stdout, tagged when scoring worked and unchanged when anything failed or took too long:
//! a filter that loses or holds up mail is worse than no filter. It is mail in transit:
//! with `[model] autolearn` its firm verdicts are learned, as the milter's are.
//!
//! Exit status, as `spamc` has it: 0 always, unless `-E` is given, and then 1 for spam.
//! procmail's `:0fw` treats any other status as a failed filter, hence the opt-in.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args as ClapArgs;

use super::route::Missing;
use super::{Args, IfLost};
use crate::model::Decision;
use crate::spam_headers::tagged;

#[derive(Debug, ClapArgs)]
pub struct FilterArgs {
    /// Exit 1 when the message is spam, 0 otherwise (as spamc -E)
    #[arg(short = 'E', long)]
    exit_code: bool,
    /// Pass the message on unchanged if it has no verdict after this many seconds (0: wait
    /// as long as it takes)
    #[arg(
        long,
        env = "SPAMNB_FILTER_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 30
    )]
    timeout: u64,
}

/// EX_TEMPFAIL: the MTA keeps the message and tries again.
const TEMPFAIL: u8 = 75;

pub fn run(args: &Args, filter: &FilterArgs) -> ExitCode {
    let raw = match read_message() {
        Ok(raw) => Arc::new(raw),
        Err(code) => return code,
    };
    let written = Arc::new(AtomicBool::new(false));
    if filter.timeout > 0 {
        let deadline = pass_on_after(
            Duration::from_secs(filter.timeout),
            Arc::clone(&raw),
            Arc::clone(&written),
        );
        // Where no thread can start, opening the database fails at once (it checks), and the
        // message passes on unchanged; through a daemon it is scored.
        if let Err(e) = deadline {
            tracing::warn!("filter: no deadline for this message, no thread to keep it: {e}");
        }
    }
    let tagged = tag(args, &raw);
    // The tagged header block, then the body as it came: a copy of a whole big message
    // would not fit under a hook's memory limit.
    let (head, body, is_spam) = match &tagged {
        Ok((head, body_at, is_spam)) => (head.as_slice(), &raw[*body_at..], *is_spam),
        Err(e) => {
            eprintln!("spamnb filter: passing the message on unchanged: {e:#}");
            (&[][..], raw.as_slice(), false)
        }
    };
    if written.swap(true, Ordering::SeqCst) {
        // Too late: the deadline is passing the message on, and ends the process.
        loop {
            std::thread::park();
        }
    }
    match write_out(&[head, body]) {
        Ok(()) if filter.exit_code && is_spam => ExitCode::from(1),
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => ExitCode::from(code),
    }
}

/// A deadline for the verdict: when it passes first, the message goes out unchanged and
/// the process ends, whatever holds up the scoring (a database on a stalled disk, a daemon
/// that stopped answering). Mail must not wait on spamnb, and procmail and maildrop give a
/// filter no deadline of their own. Whichever of the two sets `written` first writes. An
/// error when the thread that keeps the deadline cannot start.
fn pass_on_after(
    timeout: Duration,
    raw: Arc<Vec<u8>>,
    written: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let deadline = move || {
        std::thread::sleep(timeout);
        if written.swap(true, Ordering::SeqCst) {
            return;
        }
        eprintln!(
            "spamnb filter: no verdict after {}s (--timeout): passing the message on unchanged",
            timeout.as_secs()
        );
        std::process::exit(write_out(&[&raw]).map_or_else(i32::from, |()| 0));
    };
    // A thread that waits needs little of the usual 2 MB of stack: under a hook's memory
    // limit (Dovecot's vsz_limit) it must not be what fails.
    std::thread::Builder::new()
        .name("spamnb-deadline".into())
        .stack_size(64 << 10)
        .spawn(deadline)
        .map(drop)
}

/// For a `filter` whose command line or environment does not parse: the message goes
/// out unchanged, as on any other error of the filter.
pub fn pass_through(why: &str) -> ExitCode {
    eprintln!("spamnb filter: passing the message on unchanged: {why}");
    let raw = match read_message() {
        Ok(raw) => raw,
        Err(code) => return code,
    };
    match write_out(&[&raw]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => ExitCode::from(code),
    }
}

/// The message on stdin, whole; EX_TEMPFAIL when it could not be read whole, for what was
/// read is incomplete and passing it on would truncate the mail.
fn read_message() -> Result<Vec<u8>, ExitCode> {
    let mut raw = Vec::new();
    match std::io::stdin().read_to_end(&mut raw) {
        Ok(_) => {
            // The buffer grew by doubling: up to twice the message, which a hook's memory
            // limit (Dovecot's vsz_limit) counts whether touched or not.
            raw.shrink_to_fit();
            Ok(raw)
        }
        Err(e) => {
            eprintln!("spamnb filter: cannot read the message from stdin: {e}");
            Err(ExitCode::from(TEMPFAIL))
        }
    }
}

/// Writes the message, in `parts`, to stdout, or says why it could not (EX_TEMPFAIL: the
/// MTA keeps it).
fn write_out(parts: &[&[u8]]) -> Result<(), u8> {
    let mut stdout = std::io::stdout().lock();
    (parts.iter().try_for_each(|part| stdout.write_all(part)))
        .and_then(|()| stdout.flush())
        .map_err(|e| {
            eprintln!("spamnb filter: cannot write the message to stdout: {e}");
            TEMPFAIL
        })
}

/// The message's header block tagged with its verdict, where its body starts in `raw`,
/// and whether it is spam.
fn tag(args: &Args, raw: &[u8]) -> anyhow::Result<(Vec<u8>, usize, bool)> {
    // The database here, or through the daemon that holds it; the rules compiled only for
    // the first, as the daemon scores with its own.
    let stdin = [std::path::PathBuf::from("-")];
    let (config, route, ()) =
        super::open_meanwhile(&args.settings, &stdin, Missing::Empty, IfLost::Warn, |_| {
            Ok(())
        })?;
    // Scored as `check -` reads it, without an envelope line; the output keeps it.
    let message = crate::message::without_envelope_line(raw);
    let verdict = route.deliver(message)?;
    // Tagging rewrites the header block alone and leaves the body as it is.
    let head = crate::message::raw_head(raw);
    Ok((
        tagged(head, &verdict, &config.model),
        head.len(),
        verdict.decision == Decision::Spam,
    ))
}
