mod cli;
mod daemon;
mod eval;
mod milter;
mod model;
mod spamd;
mod util;
