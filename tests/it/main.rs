mod cli;
mod util;
