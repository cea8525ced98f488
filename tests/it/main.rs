mod cli;
mod daemon;
mod model;
mod spamd;
mod util;
