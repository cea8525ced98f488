mod cli;
mod daemon;
mod milter;
mod model;
mod spamd;
mod util;
mod watch;
mod watch_e2e;
