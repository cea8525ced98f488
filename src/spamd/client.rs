//! A blocking client of the control socket, for the CLI: while the daemon holds the
//! database, `spamnb learn` and `spamnb check` send their messages through it and print
//! what they would have printed with the database open themselves.
//!
//! Blocking std I/O on purpose: the CLI has no runtime, and a unix socket round trip per
//! message is far below the cost of reading and scoring it.

use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::session::{LedgerAsk, OUTCOME_HEADER, PruneRequest};
use crate::daemon::Reading;
use crate::message::DigestKind;
use crate::model::{Class, Verdict};
use crate::store::Outcome;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    // The io::Error is part of the message, not a `source`: a cause chain printed whole
    // (`{:#}`) would say it twice.
    #[error("the daemon's control socket {path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the daemon at {path} answered {line}")]
    Refused { path: PathBuf, line: String },
    #[error("the daemon at {path} sent a reply this spamnb cannot read: {reason}")]
    Garbled { path: PathBuf, reason: String },
    #[error("the daemon at {path} did not answer within {}s (is it stopped or stuck?)", .waited.as_secs())]
    NoAnswer { path: PathBuf, waited: Duration },
}

impl ClientError {
    /// Whether no daemon is there at all: no socket file, or one that nothing listens on.
    pub fn is_absent(&self) -> bool {
        matches!(self, ClientError::Io { cause, .. } if matches!(
            cause.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
        ))
    }
}

/// Replies beyond this are not the daemon's: verdicts and status lines are small, and an
/// export of a large model is some hundreds of megabytes at most.
const MAX_REPLY: usize = 1 << 30;

#[derive(Debug, Clone)]
pub struct Client {
    path: PathBuf,
    timeout: Duration,
}

struct Response {
    code: u32,
    line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Client {
    /// A client of the first of `candidates` where a daemon answers PING. When none does,
    /// the error is the first from a socket that is there (one this user may not connect
    /// to, say), else the last: "no such file" at the system's path said nothing of the
    /// socket that refused.
    pub fn connect(candidates: &[PathBuf], timeout: Duration) -> Result<Client, ClientError> {
        let (mut present, mut last) = (None, None);
        for path in candidates {
            let client = Client {
                path: path.clone(),
                timeout,
            };
            match client.ping() {
                Ok(()) => return Ok(client),
                Err(e) if present.is_none() && !e.is_absent() => present = Some(e),
                Err(e) => last = Some(e),
            }
        }
        Err(present.or(last).unwrap_or_else(|| ClientError::Io {
            path: PathBuf::from("(none configured)"),
            cause: std::io::Error::from(std::io::ErrorKind::NotFound),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn ping(&self) -> Result<(), ClientError> {
        let r = self.request("PING", &[], None)?;
        if r.line.ends_with("PONG") {
            Ok(())
        } else {
            Err(self.refused(&r))
        }
    }

    /// The full verdict on `raw`, as the daemon's engine gives it, read as `reading` says.
    pub fn verdict(&self, raw: &[u8], reading: Reading) -> Result<Verdict, ClientError> {
        let (method, headers) = match reading {
            Reading::Stored => ("VERDICT", vec![]),
            Reading::InTransit => ("DELIVER", vec![]),
            Reading::InTransitCut => ("DELIVER", vec![("Cut", "yes".to_string())]),
        };
        let r = self.request(method, &headers, Some(raw))?;
        if r.code != 0 {
            return Err(self.refused(&r));
        }
        serde_json::from_slice(&r.body).map_err(|e| self.garbled(e.to_string()))
    }

    /// Learns `raw` as `target`, or forgets it (`None`).
    pub fn tell(
        &self,
        raw: &[u8],
        target: Option<Class>,
        user: Option<&str>,
    ) -> Result<Outcome, ClientError> {
        let mut headers = Vec::new();
        match target {
            Some(class) => {
                headers.push(("Message-class", class.name().to_string()));
                headers.push(("Set", "local".to_string()));
            }
            None => headers.push(("Remove", "local".to_string())),
        }
        if let Some(user) = user {
            headers.push(("User", user.to_string()));
        }
        let r = self.request("TELL", &headers, Some(raw))?;
        if r.code != 0 {
            return Err(self.refused(&r));
        }
        let outcome = r
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(OUTCOME_HEADER))
            .map(|(_, v)| v.as_str());
        outcome
            .and_then(Outcome::from_name)
            .ok_or_else(|| self.garbled(format!("TELL outcome {outcome:?}")))
    }

    /// The database's figures, as `Store::stats` gives them.
    pub fn stats(&self) -> Result<crate::store::Stats, ClientError> {
        let r = self.request("STATS", &[], None)?;
        if r.code != 0 {
            return Err(self.refused(&r));
        }
        let w: WireStats =
            serde_json::from_slice(&r.body).map_err(|e| self.garbled(e.to_string()))?;
        Ok(crate::store::Stats {
            totals: crate::model::Totals {
                messages: w.messages,
                occurrences: w.occurrences,
                presences: w.presences,
                vocabulary: w.vocabulary,
            },
            ledger_entries: w.ledger_entries,
            size_on_disk: w.size_on_disk,
            schema_version: w.schema_version,
            ledger_digest: crate::message::DigestKind::from_name(&w.ledger_digest)
                .ok_or_else(|| self.garbled(format!("ledger digest {:?}", w.ledger_digest)))?,
        })
    }

    /// The whole model, as `spamnb export` writes it, onto `out`.
    pub fn export(&self, out: &mut dyn Write) -> Result<(), ClientError> {
        let r = self.request("EXPORT", &[], None)?;
        if r.code != 0 {
            return Err(self.refused(&r));
        }
        out.write_all(&r.body).map_err(|cause| ClientError::Io {
            path: PathBuf::from("(output)"),
            cause,
        })
    }

    /// Removes rare tokens' counts in the daemon's database (see `Store::prune`).
    pub fn prune(
        &self,
        min_messages: u32,
        dry_run: bool,
    ) -> Result<crate::store::Pruned, ClientError> {
        let ask = PruneRequest {
            min_messages,
            dry_run,
        };
        let ask = serde_json::to_vec(&ask).expect("a prune request serializes");
        let r = self.request("PRUNE", &[], Some(&ask))?;
        if r.code != 0 {
            return Err(self.refused(&r));
        }
        serde_json::from_slice(&r.body).map_err(|e| self.garbled(e.to_string()))
    }

    /// What the daemon's ledger holds of each message (see `Store::ledger_entry`). Each goes
    /// as its digests of every kind, taken here of the whole message, for the daemon to look
    /// up the one its ledger is keyed by.
    pub fn ledger(
        &self,
        raws: &[&[u8]],
    ) -> Result<Vec<Option<crate::store::LedgerEntry>>, ClientError> {
        let digests: Vec<LedgerAsk> = raws
            .iter()
            .map(|raw| {
                DigestKind::ALL
                    .into_iter()
                    .map(|kind| (kind.name().to_string(), kind.of(raw)))
                    .collect()
            })
            .collect();
        let ask = serde_json::to_vec(&digests).expect("digests serialize");
        let r = self.request("LEDGER", &[], Some(&ask))?;
        if r.code != 0 {
            return Err(self.refused(&r));
        }
        let entries: Vec<_> =
            serde_json::from_slice(&r.body).map_err(|e| self.garbled(e.to_string()))?;
        if entries.len() != raws.len() {
            return Err(self.garbled(format!(
                "{} ledger entries for {} messages",
                entries.len(),
                raws.len()
            )));
        }
        Ok(entries)
    }

    /// Makes everything learned so far durable.
    pub fn flush(&self) -> Result<(), ClientError> {
        let r = self.request("FLUSH", &[], None)?;
        if r.code != 0 {
            Err(self.refused(&r))
        } else {
            Ok(())
        }
    }

    fn refused(&self, r: &Response) -> ClientError {
        ClientError::Refused {
            path: self.path.clone(),
            line: r.line.clone(),
        }
    }

    fn garbled(&self, reason: String) -> ClientError {
        ClientError::Garbled {
            path: self.path.clone(),
            reason,
        }
    }

    fn request(
        &self,
        method: &str,
        headers: &[(&str, String)],
        body: Option<&[u8]>,
    ) -> Result<Response, ClientError> {
        // A socket timeout reads as "resource temporarily unavailable": say what it means.
        let io = |cause: std::io::Error| match cause.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                ClientError::NoAnswer {
                    path: self.path.clone(),
                    waited: self.timeout,
                }
            }
            _ => ClientError::Io {
                path: self.path.clone(),
                cause,
            },
        };
        let mut stream = UnixStream::connect(&self.path).map_err(io)?;
        stream.set_read_timeout(Some(self.timeout)).map_err(io)?;
        stream.set_write_timeout(Some(self.timeout)).map_err(io)?;
        let mut head = format!("{method} SPAMC/1.5\r\n");
        if let Some(body) = body {
            head.push_str(&format!("Content-length: {}\r\n", body.len()));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(body.unwrap_or_default());
        // As spamc does, the sending side is shut once the request is out: the end of
        // input ends a message whose last line has no newline, which the server otherwise
        // waits on (it reads whole lines, as spamd does).
        let sent = (stream.write_all(&out)).and_then(|()| stream.shutdown(Shutdown::Write));
        // A daemon that refuses a request (too large, say) answers and hangs up before
        // reading the rest: its answer says why, where the broken pipe does not. One that
        // stopped reading is not waited on a second time.
        let sent = match sent {
            Err(e) if !matches!(e.kind(), BrokenPipe | ConnectionReset) => return Err(io(e)),
            sent => sent,
        };
        let mut reply = Vec::new();
        let read = (&mut stream).take(MAX_REPLY as u64).read_to_end(&mut reply);
        match (sent, parse_response(&reply)) {
            (Err(e), Err(_)) => Err(io(e)),
            (Err(_), Ok(refusal)) => Ok(refusal),
            (Ok(()), parsed) => {
                read.map_err(io)?;
                parsed.map_err(|reason| self.garbled(reason))
            }
        }
    }
}

fn parse_response(bytes: &[u8]) -> Result<Response, String> {
    let end = bytes
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or_else(|| format!("no status line in {} bytes", bytes.len()))?;
    let line = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut parts = line.splitn(3, ' ');
    let code = match (parts.next(), parts.next()) {
        (Some(p), Some(code)) if p.starts_with("SPAMD/") => {
            code.parse().map_err(|_| format!("status line {line:?}"))?
        }
        _ => return Err(format!("status line {line:?}")),
    };
    let mut at = end + 2;
    let mut headers = Vec::new();
    // Error replies are a status line alone: the loop ends when no line is left.
    while let Some(len) = bytes[at..].windows(2).position(|w| w == b"\r\n") {
        let h = String::from_utf8_lossy(&bytes[at..at + len]).into_owned();
        at += len + 2;
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(Response {
        code,
        line,
        headers,
        body: bytes[at.min(bytes.len())..].to_vec(),
    })
}

#[derive(Deserialize)]
struct WireStats {
    schema_version: u32,
    ledger_digest: String,
    ledger_entries: u64,
    size_on_disk: u64,
    messages: [u64; 2],
    occurrences: [u64; 2],
    presences: [u64; 2],
    vocabulary: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Decision, Reason, ScoreParts};

    /// main prints an error with its causes (`{:#}`): the cause written into the message
    /// is not printed again after it.
    #[test]
    fn an_error_names_its_cause_once() {
        let cause = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let said = cause.to_string();
        let e = ClientError::Io {
            path: "/run/spamnb/control.sock".into(),
            cause,
        };
        let shown = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(shown.matches(&said).count(), 1, "{shown}");
    }

    /// Of the places a daemon's socket may be, the error shown is from the one where a
    /// socket is: a user refused the daemon's socket was told only that there was none at
    /// the system's path.
    #[test]
    fn connect_names_the_socket_that_is_there_over_one_that_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let there = dir.path().join("control.sock");
        let listener = std::os::unix::net::UnixListener::bind(&there).unwrap();
        // Something that is no daemon: it hangs up without a word.
        let hanger = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let absent = dir.path().join("none/control.sock");
        let e = Client::connect(&[there.clone(), absent], Duration::from_secs(5)).unwrap_err();
        assert!(!e.is_absent(), "{e}");
        assert!(e.to_string().contains(&there.display().to_string()), "{e}");
        hanger.join().unwrap();
    }

    /// A daemon that takes the message and never answers (stopped, stuck) is named as
    /// such, not as "resource temporarily unavailable".
    #[test]
    fn a_daemon_that_never_answers_is_said_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let holder = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_secs(2));
            drop(conn);
        });
        let client = Client {
            path,
            timeout: Duration::from_millis(200),
        };
        let e = client
            .verdict(b"Subject: x\n\nx\n", Reading::Stored)
            .unwrap_err();
        assert!(matches!(e, ClientError::NoAnswer { .. }), "{e}");
        assert!(e.to_string().contains("did not answer within"), "{e}");
        holder.join().unwrap();
    }

    /// A daemon that refuses a request before reading it all (too large) is heard out: its
    /// reason, not the broken pipe of the write it cut short.
    #[test]
    fn a_refusal_before_the_message_is_read_is_reported() {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let refuser = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&conn).read_line(&mut line).unwrap();
            (&conn)
                .write_all(b"SPAMD/1.5 65 Bad header line: (message too large)\r\n")
                .unwrap();
        });
        let client = Client {
            path,
            timeout: Duration::from_secs(5),
        };
        let big = vec![b'x'; 32 << 20];
        let e = client.tell(&big, Some(Class::Spam), None).unwrap_err();
        assert!(e.to_string().contains("message too large"), "{e}");
        refuser.join().unwrap();
    }

    #[test]
    fn verdicts_survive_the_wire_to_the_bit() {
        let v = Verdict {
            decision: Decision::Unsure,
            score: 0.1 + 0.2,
            probability: 1.0 / 3.0,
            reasons: vec![Reason {
                feature: "subj:héllo\u{7}".into(),
                count: 3,
                weight: -std::f64::consts::PI,
            }],
            rules: vec!["R1".into()],
            note: Some("n".into()),
            parts: Some(ScoreParts {
                strongest: 0.1 + 0.7,
                strongest_count: 15,
                all: -1.0 / 7.0,
                all_count: 40,
                all_share: 0.3,
            }),
            decided_by: vec!["GTUBE".into()],
        };
        let back: Verdict = serde_json::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn parses_replies() {
        let r = parse_response(
            b"SPAMD/1.1 0 EX_OK\r\nContent-length: 2\r\nSpam: True ; 1.0 / 5.0\r\n\r\nab",
        )
        .unwrap();
        assert_eq!(
            (r.code, r.headers.len(), r.body.as_slice()),
            (0, 2, &b"ab"[..])
        );
        let r = parse_response(b"SPAMD/1.0 76 Bad header line: (x)\r\n").unwrap();
        assert_eq!(r.code, 76);
        assert!(parse_response(b"HTTP/1.0 200 OK\r\n\r\n").is_err());
    }
}
