mod cli;
mod util;
mod watch;
mod watch_e2e;
