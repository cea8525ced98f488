mod cli;
mod model;
mod util;
mod watch;
mod watch_e2e;
