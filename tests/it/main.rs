mod cli;
mod util;
mod rules;
