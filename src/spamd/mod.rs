//! The spamd protocol (SPAMC/1.5), as SpamAssassin's `spamd` speaks it, so that `spamc`,
//! Exim's `spam =` condition and spamass-milter work unchanged.
//!
//! Three layers: [`codec`] (bytes ↔ requests and replies, no I/O), [`session`] (what a
//! request means: score, tag, learn), [`server`] (accept, limits, timeouts, one task per
//! connection). The control socket for the CLI is the same protocol on a unix socket, with
//! learning always allowed and spamnb's own extensions for its CLI: `VERDICT` (the full
//! verdict as JSON), `FLUSH`, `STATS`, `EXPORT` and `PRUNE` (the last three on local
//! sockets only).

pub mod client;
pub mod codec;
pub mod server;
pub mod session;
