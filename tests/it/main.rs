mod cli;
mod util;
mod daemon;
mod spamd;
