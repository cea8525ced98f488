//! A minimal HTTP/1.x endpoint for operations: `GET /metrics` (Prometheus text) and
//! `GET /health` (200 once serving). One request per connection, then close: a scraper
//! polls every few seconds, so keep-alive and a web framework would buy nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::Context;
use super::listen::{Listener, Stream};

/// Request heads beyond this are not a scraper's.
const MAX_HEAD: usize = 8 * 1024;
/// Connections at once, idle ones included: the sockets and memory the endpoint may take
/// from mail. Under a flood of idle connections each is closed once this many newer ones
/// have come, which is all the time a probe has between its connection and its request:
/// at ten thousand connections a second (a script floods that fast), 1024 leave it a
/// tenth of a second, where 16 left it under two milliseconds. Each costs a socket and a
/// few kilobytes: about 4 MB in all.
const MAX_CONNECTIONS: usize = 1024;
/// How long a client has for its request: a scraper or a probe sends it at once, and
/// sixteen idle connections held for the daemon's `read_timeout` (10 s) each kept
/// `/health` from answering a liveness check.
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// How long after its connection a request that has begun to arrive is spared when a
/// newer connection needs the slot: a probe's comes whole at once, and one that trickles
/// in for longer is as idle as one never sent.
const GRACE: Duration = Duration::from_millis(500);

/// The connections still waiting for their request, in the order they were accepted:
/// when every slot is taken, a new connection closes the oldest idle one. Idle
/// connections opened again and again then only displace each other, and a probe, which
/// sends its request at once, is served. The accept loop enters each connection before
/// its task runs, so that the order is that of arrival however late the task starts.
#[derive(Default)]
struct Waiting {
    next_id: u64,
    /// Ordered by `id`, which is the order of arrival.
    queue: VecDeque<Entry>,
}

struct Entry {
    id: u64,
    /// Until when the connection is spared, its request having begun to arrive; idle
    /// while none of it has, and once this has passed.
    spared: Option<Instant>,
    close: CancellationToken,
}

impl Waiting {
    fn push(&mut self) -> (u64, CancellationToken) {
        let id = self.next_id;
        self.next_id += 1;
        let close = CancellationToken::new();
        self.queue.push_back(Entry {
            id,
            spared: None,
            close: close.clone(),
        });
        (id, close)
    }

    fn spare(&mut self, id: u64, until: Instant) {
        if let Ok(at) = self.queue.binary_search_by_key(&id, |e| e.id) {
            self.queue[at].spared = Some(until);
        }
    }

    fn remove(&mut self, id: u64) {
        if let Ok(at) = self.queue.binary_search_by_key(&id, |e| e.id) {
            self.queue.remove(at);
        }
    }

    /// Closes the oldest idle connection; false when none is.
    fn close_oldest_idle(&mut self) -> bool {
        let now = Instant::now();
        let idle = |e: &Entry| e.spared.is_none_or(|until| until <= now);
        let Some(at) = self.queue.iter().position(idle) else {
            return false;
        };
        if let Some(e) = self.queue.remove(at) {
            e.close.cancel();
        }
        true
    }

    /// Enters again, in its place and spared until `until`, a connection closed as idle
    /// whose request had in fact begun to arrive before its task saw it; and closes the
    /// next oldest idle one instead, for the connection that asked for the slot.
    fn reinstate(&mut self, id: u64, until: Instant) -> CancellationToken {
        let close = CancellationToken::new();
        let at = self.queue.partition_point(|e| e.id < id);
        self.queue.insert(
            at,
            Entry {
                id,
                spared: Some(until),
                close: close.clone(),
            },
        );
        self.close_oldest_idle();
        close
    }
}

/// A connection's entry in [`Waiting`], left when its request has come or its task ends.
struct Place {
    waiting: Arc<Mutex<Waiting>>,
    id: u64,
    accepted: Instant,
}

impl Place {
    fn enter(waiting: &Arc<Mutex<Waiting>>) -> (Place, CancellationToken) {
        let (id, close) = lock(waiting).push();
        let place = Place {
            waiting: waiting.clone(),
            id,
            accepted: Instant::now(),
        };
        (place, close)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        lock(&self.waiting).remove(self.id);
    }
}

pub async fn run(listener: Listener, ctx: Arc<Context>, shutdown: CancellationToken) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let waiting = Arc::new(Mutex::new(Waiting::default()));
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let (mut stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("http: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let permit = match limit.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !lock(&waiting).close_oldest_idle() {
                    // Every slot holds a request arriving or being answered: this client
                    // is turned away.
                    continue;
                }
                match tokio::time::timeout(HEAD_TIMEOUT, limit.clone().acquire_owned()).await {
                    Ok(Ok(permit)) => permit,
                    _ => continue,
                }
            }
        };
        let (place, close) = Place::enter(&waiting);
        let ctx = ctx.clone();
        ctx.tasks.clone().spawn(async move {
            let _permit = permit;
            let timeout = ctx.config().daemon.read_timeout().min(HEAD_TIMEOUT);
            let path = tokio::time::timeout(timeout, read_path(&mut stream, &place, close)).await;
            drop(place);
            let Ok(Some(path)) = path else {
                return;
            };
            let (status, body) = respond(&ctx, &path);
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tokio::time::timeout(timeout, stream.write_all(reply.as_bytes())).await;
            let _ = stream.shutdown().await;
        });
    }
}

fn lock(waiting: &Mutex<Waiting>) -> std::sync::MutexGuard<'_, Waiting> {
    waiting
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn respond(ctx: &Context, path: &str) -> (&'static str, String) {
    match path.split('?').next().unwrap_or_default() {
        "/metrics" => ("200 OK", ctx.metrics.render()),
        "/health" | "/healthz" => {
            let totals = crate::model::CountSource::totals(&*ctx.engine.current().store);
            let body = format!(
                "ok\nlearned_spam {}\nlearned_ham {}\nmessages_scored {}\n",
                totals.messages[1],
                totals.messages[0],
                ctx.metrics.messages()
            );
            ("200 OK", body)
        }
        _ => ("404 Not Found", "try /metrics or /health\n".into()),
    }
}

/// The path of a `GET` request, once its head has arrived; `None` for anything else, or
/// when the connection is closed as idle for a newer one.
async fn read_path(
    stream: &mut Box<dyn Stream>,
    place: &Place,
    mut close: CancellationToken,
) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let mut spared = None;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        // Reading first, so that bytes the runtime has seen spare the connection. A read
        // given up for the close loses nothing: it had taken no bytes.
        let n = tokio::select! {
            biased;
            n = stream.read(&mut buf) => n.ok()?,
            _ = close.cancelled() => {
                // Taken for idle while its request may wait unseen: the runtime learns of
                // bytes only when its reactor next looks, which under a burst of new
                // connections can be after they were all accepted.
                let now = Instant::now();
                let until = if head.is_empty() && stream.has_unread() {
                    now + GRACE
                } else {
                    spared.filter(|until| *until > now)?
                };
                spared = Some(until);
                close = lock(&place.waiting).reinstate(place.id, until);
                continue;
            }
        };
        if n == 0 || head.len() + n > MAX_HEAD {
            return None;
        }
        if spared.is_none() {
            let until = place.accepted + GRACE;
            spared = Some(until);
            lock(&place.waiting).spare(place.id, until);
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET" | "HEAD"), Some(path)) => Some(path.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new connection closes the oldest idle one in the order of arrival, passing over
    /// one whose request has begun until its grace is spent; one closed as idle that
    /// turns out to have its request waiting keeps its place, and the next idle one goes.
    #[test]
    fn the_oldest_idle_connection_is_closed_and_a_begun_request_is_spared() {
        let mut waiting = Waiting::default();
        let tokens: Vec<CancellationToken> = (0..4).map(|_| waiting.push().1).collect();
        let closed = |tokens: &[CancellationToken]| -> Vec<bool> {
            tokens.iter().map(CancellationToken::is_cancelled).collect()
        };
        let now = Instant::now();
        waiting.spare(0, now + GRACE);
        waiting.spare(2, now);
        assert!(waiting.close_oldest_idle());
        assert_eq!(closed(&tokens), [false, true, false, false]);
        // Its grace spent, a begun request is as idle as one never sent.
        assert!(waiting.close_oldest_idle());
        assert_eq!(closed(&tokens), [false, true, true, false]);
        // Connection 2 had its request waiting after all: it is back in its place, and
        // connection 3 goes instead.
        let again = waiting.reinstate(2, now + GRACE);
        assert_eq!(closed(&tokens), [false, true, true, true]);
        assert!(!again.is_cancelled());
        let order: Vec<u64> = waiting.queue.iter().map(|e| e.id).collect();
        assert_eq!(order, [0, 2]);
        // Every request left has begun within its grace: nothing is idle.
        assert!(!waiting.close_oldest_idle());
        assert!(!again.is_cancelled() && !tokens[0].is_cancelled());
    }
}
