//! The `[milter]` section of the configuration file: [`crate::milter::MilterSettings`],
//! under the name the daemon's configuration uses.

pub use crate::milter::MilterSettings as MilterConfig;
