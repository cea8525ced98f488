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
    let config = super::load_config(args)?;
    let format = match daemon.log_format {
        Some(LogFormatArg::Text) => LogFormat::Text,
        Some(LogFormatArg::Json) => LogFormat::Json,
        None => config.daemon.log_format,
    };
    crate::daemon::init_logging(format, args.verbose);
    super::ensure_parent(&config.db)?;
    let (path, db) = (args.config.clone(), args.db.clone());
    let load = move || {
        let mut config = crate::config::Config::load(path.as_deref()).map_err(|e| e.to_string())?;
        if let Some(db) = &db {
            config.db = db.clone();
        }
        Ok(config)
    };
    crate::daemon::run(config, Box::new(load))?;
    Ok(ExitCode::SUCCESS)
}
