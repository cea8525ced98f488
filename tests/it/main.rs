mod cli;
mod util;
mod watch;
