//! `spamnb filter`: the MTA/MDA hook. The message comes in on stdin and always goes out on
//! stdout, tagged when scoring worked and unchanged when anything failed: a filter that
//! loses mail is worse than no filter. It is mail in transit: with `[model] autolearn` its
//! firm verdicts are learned, as the milter's are.
//!
//! Exit status, as `spamc` has it: 0 always, unless `-E` is given, and then 1 for spam.
//! procmail's `:0fw` treats any other status as a failed filter, hence the opt-in.

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::Args;
use super::route::Missing;
use crate::model::Decision;
use crate::spam_headers::tagged;

#[derive(Debug, ClapArgs)]
pub struct FilterArgs {
    /// Exit 1 when the message is spam, 0 otherwise (as spamc -E)
    #[arg(short = 'E', long)]
    exit_code: bool,
}

/// EX_TEMPFAIL: the MTA keeps the message and tries again.
const TEMPFAIL: u8 = 75;

pub fn run(args: &Args, filter: &FilterArgs) -> ExitCode {
    let mut raw = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut raw) {
        // What was read is incomplete; passing it on would truncate the mail.
        eprintln!("spamnb filter: cannot read the message from stdin: {e}");
        return ExitCode::from(TEMPFAIL);
    }
    let (output, is_spam) = match tag(args, &raw) {
        Ok(tagged) => tagged,
        Err(e) => {
            eprintln!("spamnb filter: passing the message on unchanged: {e:#}");
            (raw, false)
        }
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(&output).and_then(|()| stdout.flush()) {
        eprintln!("spamnb filter: cannot write the message to stdout: {e}");
        return ExitCode::from(TEMPFAIL);
    }
    if filter.exit_code && is_spam {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn tag(args: &Args, raw: &[u8]) -> anyhow::Result<(Vec<u8>, bool)> {
    // The database here, or through the daemon that holds it; the rules compiled only for
    // the first, as the daemon scores with its own.
    let stdin = [std::path::PathBuf::from("-")];
    let (config, route, ()) =
        super::open_meanwhile(&args.settings, &stdin, Missing::Empty, |_| Ok(()))?;
    // Scored as `check -` reads it, without an envelope line; the output keeps it.
    let message = crate::message::without_envelope_line(raw);
    let verdict = route.deliver(message)?;
    Ok((
        tagged(raw, &verdict, &config.model),
        verdict.decision == Decision::Spam,
    ))
}
