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
/// tenth of a second, where 16 left it under two milliseconds. Each costs a socket and up
/// to 9 KB (a request head of [`MAX_HEAD`] and a read buffer): 9 MB in all, at most.
const MAX_CONNECTIONS: usize = 1024;
/// How long a client has for its request: a scraper or a probe sends it at once, and
/// sixteen idle connections held for the daemon's `read_timeout` (10 s) each kept
/// `/health` from answering a liveness check.
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a connection closed as idle whose request was in fact waiting, unseen, is
/// spared: a probe's comes whole at once, and is read well within it.
const GRACE: Duration = Duration::from_millis(500);

/// The connections still waiting for their request, in the order they were accepted:
/// when every slot is taken, a new connection closes the oldest one. Idle connections, or
/// requests begun and never finished, opened again and again then only displace each
/// other, and a probe, which sends its request at once, is served. Age alone decides: a
/// request begun that is spared for it lets a flood of them, each of one byte, displace
/// only the few connections whose first bytes have not come, the probe among them. The
/// accept loop enters each connection before its task runs, so that the order is that of
/// arrival however late the task starts.
#[derive(Default)]
struct Waiting {
    next_id: u64,
    /// Ordered by `id`, which is the order of arrival.
    queue: VecDeque<Entry>,
}

struct Entry {
    id: u64,
    /// Until when the connection is spared, closed as idle while its request waited
    /// unseen ([`Waiting::reinstate`]); idle before, and once this has passed.
    spared: Option<Instant>,
    close: CancellationToken,
    /// Closes it for good, spared or not: a newer connection needed the slot, and none
    /// was idle.
    evict: CancellationToken,
}

impl Waiting {
    fn push(&mut self) -> (u64, CancellationToken, CancellationToken) {
        let id = self.next_id;
        self.next_id += 1;
        let (close, evict) = (CancellationToken::new(), CancellationToken::new());
        self.queue.push_back(Entry {
            id,
            spared: None,
            close: close.clone(),
            evict: evict.clone(),
        });
        (id, close, evict)
    }

    fn remove(&mut self, id: u64) {
        if let Ok(at) = self.queue.binary_search_by_key(&id, |e| e.id) {
            self.queue.remove(at);
        }
    }

    /// Closes the oldest idle connection, or when none is, evicts the oldest waiting
    /// connection but `keep`, spared or not, rather than turn away the one that asked for
    /// a slot. False when no connection waits: every slot is answering a request.
    fn make_room(&mut self, keep: Option<u64>) -> bool {
        let now = Instant::now();
        let idle = |e: &Entry| e.spared.is_none_or(|until| until <= now);
        if let Some(at) = self.queue.iter().position(idle) {
            if let Some(e) = self.queue.remove(at) {
                e.close.cancel();
            }
            return true;
        }
        let Some(at) = self.queue.iter().position(|e| Some(e.id) != keep) else {
            return false;
        };
        if let Some(e) = self.queue.remove(at) {
            e.evict.cancel();
        }
        true
    }

    /// Enters again, in its place and spared until `until`, a connection closed as idle
    /// whose request had in fact begun to arrive before its task saw it; and makes room
    /// another way for the connection that asked for the slot.
    fn reinstate(
        &mut self,
        id: u64,
        until: Instant,
        evict: &CancellationToken,
    ) -> CancellationToken {
        let close = CancellationToken::new();
        let at = self.queue.partition_point(|e| e.id < id);
        self.queue.insert(
            at,
            Entry {
                id,
                spared: Some(until),
                close: close.clone(),
                evict: evict.clone(),
            },
        );
        self.make_room(Some(id));
        close
    }
}

/// A connection's entry in [`Waiting`], left when its request has come or its task ends.
struct Place {
    waiting: Arc<Mutex<Waiting>>,
    id: u64,
    evict: CancellationToken,
}

impl Place {
    fn enter(waiting: &Arc<Mutex<Waiting>>) -> (Place, CancellationToken) {
        let (id, close, evict) = lock(waiting).push();
        let place = Place {
            waiting: waiting.clone(),
            id,
            evict,
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
                if !lock(&waiting).make_room(None) {
                    // Every slot holds a request being answered: this client is turned
                    // away.
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
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        // Reading first, so that bytes the runtime has seen are read before a close. A read
        // given up for the close loses nothing: it had taken no bytes.
        let n = tokio::select! {
            biased;
            n = stream.read(&mut buf) => n.ok()?,
            _ = place.evict.cancelled() => return None,
            _ = close.cancelled() => {
                // Taken for idle while its request may wait unseen: the runtime learns of
                // bytes only when its reactor next looks, which under a burst of new
                // connections can be after they were all accepted.
                if !stream.has_unread() {
                    return None;
                }
                let until = Instant::now() + GRACE;
                close = lock(&place.waiting).reinstate(place.id, until, &place.evict);
                continue;
            }
        };
        if n == 0 || head.len() + n > MAX_HEAD {
            return None;
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

    /// A new connection closes the oldest idle one in the order of arrival; one closed as
    /// idle that turns out to have its request waiting keeps its place, spared, and the
    /// next idle one goes. When none is idle, the oldest is evicted, but the one making
    /// room.
    #[test]
    fn the_oldest_idle_connection_is_closed_and_a_waiting_request_is_spared() {
        let mut waiting = Waiting::default();
        let pushed: Vec<_> = (0..4).map(|_| waiting.push()).collect();
        let closed = || -> Vec<bool> { pushed.iter().map(|p| p.1.is_cancelled()).collect() };
        let evicted = || -> Vec<bool> { pushed.iter().map(|p| p.2.is_cancelled()).collect() };
        assert!(waiting.make_room(None));
        assert_eq!(closed(), [true, false, false, false]);
        // Connection 0 had its request waiting after all: it is back in its place, and
        // connection 1 goes instead; then, 0 spared, the next oldest.
        let again = waiting.reinstate(0, Instant::now() + GRACE, &pushed[0].2);
        assert_eq!(closed(), [true, true, false, false]);
        assert!(waiting.make_room(None));
        assert!(waiting.make_room(None));
        assert_eq!(closed(), [true, true, true, true]);
        let order: Vec<u64> = waiting.queue.iter().map(|e| e.id).collect();
        assert_eq!(order, [0]);
        // Nothing idle: the oldest but the one making room is evicted for good.
        assert!(!waiting.make_room(Some(0)));
        assert!(!again.is_cancelled());
        assert_eq!(evicted(), [false; 4]);
        assert!(waiting.make_room(None));
        assert_eq!(evicted(), [true, false, false, false]);
        assert!(!waiting.make_room(None));
    }
}
