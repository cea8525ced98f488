mod cli;
mod daemon;
mod milter;
mod model;
mod spamd;
mod util;
