//! Load generator for the milter: N concurrent sessions hand corpus messages to a running
//! `spamnb daemon` as Postfix would (one connection per message, negotiation included),
//! and report messages per second and the end-of-message latency percentiles.
//!
//! ```text
//! cargo run --release --example milter_load -- 127.0.0.1:11332 [--sessions 50] \
//!     [--messages 5000] [--rate MSGS_PER_SEC] DIR_OR_FILE...
//! ```
//!
//! Without `--rate` every session sends its next message as soon as the last is answered
//! (closed loop: the most the daemon can do, latency is then mostly queueing for the
//! CPU). With `--rate` the sessions together offer that many messages per second, as an
//! MTA's SMTP sessions do, and the latency is the daemon's own.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use spamnb::milter::client::Client;
use spamnb::milter::codec::Response;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let addr = args
        .next()
        .ok_or("usage: milter_load HOST:PORT [--sessions N] [--messages N] PATH...")?;
    let (mut sessions, mut total, mut paths) = (50usize, 5000usize, Vec::new());
    let mut rate: Option<f64> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sessions" => {
                sessions = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--sessions needs a number")?
            }
            "--rate" => {
                rate = Some(
                    args.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or("--rate needs a number")?,
                )
            }
            "--messages" => {
                total = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--messages needs a number")?
            }
            _ => paths.push(PathBuf::from(a)),
        }
    }
    let mut files = Vec::new();
    for p in &paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            files.extend(entries);
        } else {
            files.push(p.clone());
        }
    }
    let messages: Arc<Vec<Vec<u8>>> =
        Arc::new(files.iter().filter_map(|f| std::fs::read(f).ok()).collect());
    if messages.is_empty() {
        return Err("no messages: give corpus directories or files".into());
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..sessions)
        .map(|w| {
            let (addr, messages, next) = (addr.clone(), messages.clone(), next.clone());
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                let mut outcomes = [0usize; 4]; // tagged spam, tagged other, rejected, failed
                // Each session's share of the rate, started at a random-ish offset.
                let interval = rate.map(|r| Duration::from_secs_f64(sessions as f64 / r));
                let mut due = Instant::now() + interval.map_or(Duration::ZERO, |d| d.mul_f64((w as f64 * 0.618).fract()));
                loop {
                    if let Some(interval) = interval {
                        let now = Instant::now();
                        if due > now {
                            std::thread::sleep(due - now);
                        }
                        due += interval;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let raw = &messages[i % messages.len()];
                    let result = Client::connect(&addr, Duration::from_secs(30)).and_then(|mut c| {
                        let r = c.message(raw)?;
                        latencies.push(c.eom_latency);
                        let _ = c.quit();
                        Ok(r)
                    });
                    let slot = match result {
                        Ok(r) if r.iter().any(|r| matches!(r, Response::ReplyCode(_))) => 2,
                        Ok(r) if r.iter().any(|r| matches!(r, Response::AddHeader { name, value } if name == "X-Spam-Flag" && value.trim() == "YES")) => 0,
                        Ok(_) => 1,
                        Err(e) => {
                            eprintln!("message {i}: {e}");
                            3
                        }
                    };
                    outcomes[slot] += 1;
                }
                (latencies, outcomes)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut outcomes = [0usize; 4];
    for w in workers {
        let (l, o) = w.join().map_err(|_| "a worker panicked")?;
        latencies.extend(l);
        for (a, b) in outcomes.iter_mut().zip(o) {
            *a += b;
        }
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{} messages, {sessions} sessions, {:.2}s: {:.0} messages/s; end-of-message latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; spam {}, not spam {}, rejected {}, failed {}",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(1.0),
        outcomes[0],
        outcomes[1],
        outcomes[2],
        outcomes[3],
    );
    Ok(())
}
