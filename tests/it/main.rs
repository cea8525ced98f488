mod cli;
mod util;
mod eval;
