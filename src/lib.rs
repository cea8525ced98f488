//! spamnb: a spam filter for mail pipelines. Naive Bayes over word tokens and the hits of
//! handcrafted rules, with counts in an embedded sled database.
//!
//! The flow, one pure core and thin front ends around it:
//!
//! ```text
//! bytes ─ message ─▶ Message ─ tokenize ─▶ Features ─ model ─▶ Verdict ─ spam_headers ─▶ tagged mail
//!                                              │ learn
//!                                              ▼
//!                                            store (sled): counts, totals, ledger
//! ```
//!
//! - [`message`]: raw bytes to a decoded [`message::Message`] view (mail-parser).
//! - [`tokenize`]: words, header-tagged and URL tokens; `segment` finds the words, `domain`
//!   cuts host names to the domain above them (for rules too).
//! - [`features`]: the bag of features, and the [`features::Extractor`] that makes one.
//! - [`rules`]: SpamAssassin-style rule files, compiled once, evaluated per message.
//! - [`model`]: multinomial naive Bayes: scoring, decision, explanation.
//! - [`store`]: the [`store::Store`] trait and its sled implementation.
//! - [`engine`]: the one path from raw mail to a verdict or a lesson, for every front end.
//! - [`spam_headers`]: the `X-Spam-*` headers and the rewrite that adds them.
//! - [`milter`]: the milter protocol (Postfix, Sendmail): codec, session, server.
//! - [`mailbox`]: files, Maildirs, folders and mboxes given on the command line.
//! - [`daemon`]: `spamnb daemon`: listeners, reloads, metrics; [`spamd`]: the spamd protocol.
//! - [`watch`]: learning from the folders users move mail into and out of (Junk).
//! - [`eval`]: cross-validation, online and split evaluation in memory, through [`model`].
//! - [`config`], [`cli`]: the configuration file and the command line.

// spamnb is a program: its docs are read with `cargo doc --document-private-items`, where
// links from public items to private ones resolve.
#![allow(rustdoc::private_intra_doc_links)]

pub mod cli;
pub mod config;
pub mod daemon;
mod domain;
pub mod engine;
pub mod eval;
pub mod features;
pub mod mailbox;
pub mod message;
pub mod milter;
pub mod model;
mod quiet_panic;
pub mod rules;
mod segment;
pub mod spam_headers;
pub mod spamd;
pub mod store;
pub mod tokenize;
pub mod watch;

/// A seeded xorshift64 generator: repeatable random input for the tests that feed
/// mixtures and garbage to a parser.
#[cfg(test)]
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
