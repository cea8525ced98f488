mod cli;
mod milter;
mod util;
