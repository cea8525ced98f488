//! A minimal HTTP/1.x endpoint for operations: `GET /metrics` (Prometheus text) and
//! `GET /health` (200 once serving). One request per connection, then close: a scraper
//! polls every few seconds, so keep-alive and a web framework would buy nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::Context;
use super::listen::Listener;

/// Request heads beyond this are not a scraper's.
const MAX_HEAD: usize = 8 * 1024;
/// Scrapers at once, so the endpoint can never crowd out mail.
const MAX_CLIENTS: usize = 16;
/// How long a client has for its request: a scraper or a probe sends it at once, and
/// sixteen idle connections held for the daemon's `read_timeout` (10 s) each kept
/// `/health` from answering a liveness check.
const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The connections still waiting for their request, oldest first: when every slot is
/// taken, a new one closes the oldest of them. Idle connections opened again and again
/// then only displace each other, and a probe, which sends its request at once, is served.
#[derive(Default)]
struct Waiting {
    next_id: u64,
    queue: VecDeque<(u64, CancellationToken)>,
}

impl Waiting {
    fn push(&mut self) -> (u64, CancellationToken) {
        let id = self.next_id;
        self.next_id += 1;
        let token = CancellationToken::new();
        self.queue.push_back((id, token.clone()));
        (id, token)
    }

    fn remove(&mut self, id: u64) {
        self.queue.retain(|(i, _)| *i != id);
    }

    fn close_oldest(&mut self) -> bool {
        self.queue.pop_front().map(|(_, t)| t.cancel()).is_some()
    }
}

pub async fn run(listener: Listener, ctx: Arc<Context>, shutdown: CancellationToken) {
    let limit = Arc::new(Semaphore::new(MAX_CLIENTS));
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
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let permit = match limit.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !lock(&waiting).close_oldest() {
                    // Every slot is writing a reply: this client is turned away.
                    continue;
                }
                match tokio::time::timeout(HEAD_TIMEOUT, limit.clone().acquire_owned()).await {
                    Ok(Ok(permit)) => permit,
                    _ => continue,
                }
            }
        };
        let ctx = ctx.clone();
        let waiting = waiting.clone();
        ctx.tasks.clone().spawn(async move {
            let _permit = permit;
            let timeout = ctx.config().daemon.read_timeout().min(HEAD_TIMEOUT);
            let (id, closed) = lock(&waiting).push();
            let path = tokio::select! {
                _ = closed.cancelled() => None,
                read = tokio::time::timeout(timeout, read_path(&mut stream)) => read.ok().flatten(),
            };
            lock(&waiting).remove(id);
            let Some(path) = path else {
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

/// The path of a `GET` request, once its head has arrived; `None` for anything else.
async fn read_path(stream: &mut Box<dyn super::listen::Stream>) -> Option<String> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await.ok()?;
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
