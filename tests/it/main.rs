mod cli;
mod model;
mod util;
