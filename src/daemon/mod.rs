//! `spamnb daemon`: the listeners, and the servers of each protocol behind them.

pub mod listen;
