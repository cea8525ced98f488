//! The `[milter]` section of the configuration file.
//!
//! A placeholder owned by the milter protocol's author: it replaces this struct with its
//! own settings (thresholds' actions, reject reply, body limits, …). The daemon only reads
//! `listen`, to bind one listener per address and hand each to `crate::milter::server::run`.

use serde::Deserialize;

use super::listen::Address;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MilterConfig {
    /// Where Postfix and Sendmail connect (`inet:HOST:PORT`, `unix:PATH`); none by default.
    pub listen: Vec<Address>,
}
