//! `spamnb daemon`: loads the configuration, sets up logging, and hands over to
//! [`crate::daemon::run`], giving it the way to load the configuration again on SIGHUP.

use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::Args;
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
    // At start and at each reload.
    let config = super::on_thread_pool(|| super::load_config(&args.settings))?;
    let format = match daemon.log_format {
        Some(LogFormatArg::Text) => LogFormat::Text,
        Some(LogFormatArg::Json) => LogFormat::Json,
        None => config.daemon.log_format,
    };
    crate::daemon::init_logging(format, args.verbose);
    super::ensure_parent(&config.db)?;
    // A reload is a load: configuration, database and rules, as at start-up.
    let settings = args.settings.clone();
    let load = move || {
        super::on_thread_pool(|| super::load_config(&settings)).map_err(|e| format!("{e:#}"))
    };
    crate::daemon::run(config, Box::new(load))?;
    Ok(ExitCode::SUCCESS)
}
