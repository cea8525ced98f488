//! `spamnb daemon`: loads the configuration, sets up logging, and hands over to
//! [`crate::daemon::run`], giving it the way to load the configuration again on SIGHUP.

use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::{Args, IfLost};
use crate::daemon::config::LogFormat;

#[derive(Debug, Clone, ClapArgs)]
pub struct DaemonArgs {
    /// Log format, overriding daemon.log_format
    #[arg(long, value_enum)]
    log_format: Option<LogFormatArg>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

pub fn run(args: &Args, daemon: &DaemonArgs) -> anyhow::Result<ExitCode> {
    let mut config = super::load_settings(&args.settings)?;
    let format = match daemon.log_format {
        Some(LogFormatArg::Text) => LogFormat::Text,
        Some(LogFormatArg::Json) => LogFormat::Json,
        None => config.daemon.log_format,
    };
    // Logging first, so that what loading the rules has to say reaches the log.
    crate::daemon::init_logging(format, args.verbose);
    config.extractor.rules =
        super::on_thread_pool(|| super::load_rules(&args.settings, &config, IfLost::Fail))?;
    super::ensure_parent(&config.db)?;
    // A reload is a load: configuration, database and rules, as at start-up, but rules
    // that cannot be read leave the ones in force.
    let settings = args.settings.clone();
    let load = move |in_force: &crate::config::Config| {
        super::on_thread_pool(|| {
            let mut config = super::load_settings(&settings)?;
            let if_lost = (in_force.extractor.rules.as_ref()).map_or(IfLost::Warn, IfLost::Keep);
            config.extractor.rules = super::load_rules(&settings, &config, if_lost)?;
            anyhow::Ok(config)
        })
        .map_err(|e| format!("{e:#}"))
    };
    crate::daemon::run(config, Box::new(load))?;
    Ok(ExitCode::SUCCESS)
}
