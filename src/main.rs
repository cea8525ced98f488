use std::process::ExitCode;

use spamnb::cli;

fn main() -> ExitCode {
    let args = match cli::parse() {
        Ok(args) => args,
        Err(code) => return code,
    };
    if !args.command.sets_up_logging() {
        let default = ["warn", "info", "debug"][usize::from(args.verbose.min(2))];
        let filter = tracing_subscriber::EnvFilter::try_from_env("SPAMNB_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
        // Colours only for a person at a terminal: a hook's stderr ends up in Dovecot's or
        // procmail's log, where escape codes are noise.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_env_filter(filter)
            .init();
    }
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("spamnb: {e:#}");
            ExitCode::from(2)
        }
    }
}
