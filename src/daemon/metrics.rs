//! The daemon's counters, as Prometheus text: messages and verdicts per protocol, a
//! latency histogram, errors, fail-opens, learned messages and open sessions.
//!
//! Plain atomics, no metrics crate: a dozen numbers do not need a registry, and a relaxed
//! atomic add is the cheapest thing a session can do on its hot path.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::model::Decision;

/// Which front end a number belongs to (the `protocol` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Milter = 0,
    Spamd = 1,
    Control = 2,
}

const PROTOCOLS: [(&str, Protocol); 3] = [
    ("milter", Protocol::Milter),
    ("spamd", Protocol::Spamd),
    ("control", Protocol::Control),
];
const DECISIONS: [(&str, Decision); 3] = [
    ("spam", Decision::Spam),
    ("ham", Decision::Ham),
    ("unsure", Decision::Unsure),
];

/// Upper bounds of the latency buckets, in seconds: a message is scored in about a
/// millisecond, so the interesting range is 0.1 ms to a second.
const BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

#[derive(Default)]
struct PerProtocol {
    /// Scored messages by decision.
    verdicts: [AtomicU64; 3],
    errors: AtomicU64,
    fail_open: AtomicU64,
    sessions_open: AtomicU64,
    sessions_total: AtomicU64,
    rejected_connections: AtomicU64,
    /// Cumulative counts per bucket, then +Inf.
    latency: [AtomicU64; BUCKETS.len() + 1],
    latency_micros: AtomicU64,
}

/// Picks one counter out of a protocol's set.
type Field = fn(&PerProtocol) -> &AtomicU64;

#[derive(Default)]
pub struct Metrics {
    protocols: [PerProtocol; 3],
    learned: AtomicU64,
    autolearned: AtomicU64,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
}

fn decision_index(d: Decision) -> usize {
    match d {
        Decision::Spam => 0,
        Decision::Ham => 1,
        Decision::Unsure => 2,
    }
}

impl Metrics {
    fn of(&self, p: Protocol) -> &PerProtocol {
        &self.protocols[p as usize]
    }

    /// A message was scored: its decision, and the time from its last byte to the verdict.
    pub fn scored(&self, p: Protocol, decision: Decision, latency: Duration) {
        let m = self.of(p);
        m.verdicts[decision_index(decision)].fetch_add(1, Relaxed);
        let secs = latency.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        m.latency[bucket].fetch_add(1, Relaxed);
        m.latency_micros.fetch_add(
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            Relaxed,
        );
    }

    /// A protocol error or an internal failure in a session.
    pub fn error(&self, p: Protocol) {
        self.of(p).errors.fetch_add(1, Relaxed);
    }

    /// A message was passed on unscored (timeout, overload, internal error).
    pub fn fail_open(&self, p: Protocol) {
        self.of(p).fail_open.fetch_add(1, Relaxed);
    }

    /// A message learned from the daemon's own firm verdict (`[model] autolearn`).
    pub fn autolearned(&self) {
        self.autolearned.fetch_add(1, Relaxed);
    }

    /// Messages learned or forgotten through TELL.
    pub fn learned(&self, n: u64) {
        self.learned.fetch_add(n, Relaxed);
    }

    /// A connection refused because `max_connections` were open.
    pub fn rejected_connection(&self, p: Protocol) {
        self.of(p).rejected_connections.fetch_add(1, Relaxed);
    }

    pub fn reloaded(&self, ok: bool) {
        if ok {
            &self.reloads
        } else {
            &self.reload_failures
        }
        .fetch_add(1, Relaxed);
    }

    /// A connection was admitted; counted open until [`Metrics::session_closed`].
    pub fn session_opened(&self, p: Protocol) {
        let m = self.of(p);
        m.sessions_open.fetch_add(1, Relaxed);
        m.sessions_total.fetch_add(1, Relaxed);
    }

    pub fn session_closed(&self, p: Protocol) {
        self.of(p).sessions_open.fetch_sub(1, Relaxed);
    }

    /// Messages scored so far, all protocols (for tests and the health endpoint).
    pub fn messages(&self) -> u64 {
        self.protocols
            .iter()
            .flat_map(|m| m.verdicts.iter())
            .map(|v| v.load(Relaxed))
            .sum()
    }

    /// The Prometheus text exposition format, version 0.0.4.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let mut family = |name: &str, kind: &str, help: &str, rows: &mut dyn FnMut(&mut String)| {
            let _ = writeln!(
                out,
                "# HELP spamnb_{name} {help}\n# TYPE spamnb_{name} {kind}"
            );
            rows(&mut out);
        };
        family(
            "messages_total",
            "counter",
            "Messages scored, by protocol and verdict.",
            &mut |o| {
                for (pn, p) in PROTOCOLS {
                    for (dn, d) in DECISIONS {
                        let v = self.of(p).verdicts[decision_index(d)].load(Relaxed);
                        let _ = writeln!(
                            o,
                            "spamnb_messages_total{{protocol=\"{pn}\",verdict=\"{dn}\"}} {v}"
                        );
                    }
                }
            },
        );
        let simple: [(&str, &str, &str, Field); 5] = [
            (
                "errors_total",
                "counter",
                "Protocol errors and internal failures.",
                |m| &m.errors,
            ),
            (
                "fail_open_total",
                "counter",
                "Messages passed on unscored.",
                |m| &m.fail_open,
            ),
            ("sessions_open", "gauge", "Sessions open now.", |m| {
                &m.sessions_open
            }),
            ("sessions_total", "counter", "Sessions accepted.", |m| {
                &m.sessions_total
            }),
            (
                "connections_rejected_total",
                "counter",
                "Connections closed at once because max_connections were open.",
                |m| &m.rejected_connections,
            ),
        ];
        for (name, kind, help, field) in simple {
            family(name, kind, help, &mut |o| {
                for (pn, p) in PROTOCOLS {
                    let _ = writeln!(
                        o,
                        "spamnb_{name}{{protocol=\"{pn}\"}} {}",
                        field(self.of(p)).load(Relaxed)
                    );
                }
            });
        }
        family(
            "scan_duration_seconds",
            "histogram",
            "Time from a message's last byte to its verdict.",
            &mut |o| {
                for (pn, p) in PROTOCOLS {
                    let m = self.of(p);
                    let mut cumulative = 0;
                    for (i, bound) in BUCKETS.iter().enumerate() {
                        cumulative += m.latency[i].load(Relaxed);
                        let _ = writeln!(
                            o,
                            "spamnb_scan_duration_seconds_bucket{{protocol=\"{pn}\",le=\"{bound}\"}} {cumulative}"
                        );
                    }
                    cumulative += m.latency[BUCKETS.len()].load(Relaxed);
                    let sum = m.latency_micros.load(Relaxed) as f64 / 1e6;
                    let _ = writeln!(
                        o,
                        "spamnb_scan_duration_seconds_bucket{{protocol=\"{pn}\",le=\"+Inf\"}} {cumulative}"
                    );
                    let _ = writeln!(
                        o,
                        "spamnb_scan_duration_seconds_sum{{protocol=\"{pn}\"}} {sum}"
                    );
                    let _ = writeln!(
                        o,
                        "spamnb_scan_duration_seconds_count{{protocol=\"{pn}\"}} {cumulative}"
                    );
                }
            },
        );
        for (name, help, v) in [
            (
                "learned_total",
                "Messages learned or forgotten through the daemon.",
                &self.learned,
            ),
            (
                "autolearned_total",
                "Messages learned from the daemon's own firm verdicts ([model] autolearn).",
                &self.autolearned,
            ),
            (
                "reloads_total",
                "Configuration reloads that took effect.",
                &self.reloads,
            ),
            (
                "reload_failures_total",
                "Reloads refused because the new configuration was broken.",
                &self.reload_failures,
            ),
        ] {
            family(name, "counter", help, &mut |o| {
                let _ = writeln!(o, "spamnb_{name} {}", v.load(Relaxed));
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_and_histogram() {
        let m = Metrics::default();
        m.scored(Protocol::Spamd, Decision::Spam, Duration::from_micros(700));
        m.scored(Protocol::Spamd, Decision::Ham, Duration::from_secs(3));
        m.learned(2);
        m.session_opened(Protocol::Milter);
        assert!(
            m.render()
                .contains("spamnb_sessions_open{protocol=\"milter\"} 1")
        );
        m.session_closed(Protocol::Milter);
        let text = m.render();
        for want in [
            "spamnb_messages_total{protocol=\"spamd\",verdict=\"spam\"} 1",
            "spamnb_scan_duration_seconds_bucket{protocol=\"spamd\",le=\"0.0005\"} 0",
            "spamnb_scan_duration_seconds_bucket{protocol=\"spamd\",le=\"0.001\"} 1",
            "spamnb_scan_duration_seconds_bucket{protocol=\"spamd\",le=\"1\"} 1",
            "spamnb_scan_duration_seconds_bucket{protocol=\"spamd\",le=\"+Inf\"} 2",
            "spamnb_scan_duration_seconds_count{protocol=\"spamd\"} 2",
            "spamnb_learned_total 2",
            "spamnb_sessions_open{protocol=\"milter\"} 0",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert_eq!(m.messages(), 2);
    }
}
