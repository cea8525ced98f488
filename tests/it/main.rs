mod cli;
mod milter;
mod util;
mod daemon;
mod spamd;
