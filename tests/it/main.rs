mod cli;
// Shared helpers: not every test module uses every one.
mod eval;
#[allow(dead_code)]
mod util;
