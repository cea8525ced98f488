//! The milter server: accepts MTA connections, runs one [`Session`] per connection in its
//! own task, scores each message on the blocking pool, and fails open: a scoring error or
//! timeout answers "continue" and leaves the message as it was; a broken connection is
//! closed, and the MTA applies its `milter_default_action` (`accept` in `contrib/`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::MilterSettings;
use super::codec::{self, Command, DEFAULT_MAX_FRAME, Response};
use super::session::{Disposition, Session, Step};
use crate::daemon::listen::{Listener, Stream};
use crate::engine::Engine;
use crate::model::Verdict;

/// What the milter server needs from the daemon around it. A trait, so that tests and the
/// load generator run the server without a whole daemon.
pub trait Host: Send + Sync + 'static {
    /// The `[milter]` settings now in force; each connection keeps the ones it started with.
    fn settings(&self) -> Arc<MilterSettings>;
    /// The engine now in force; each message is scored by the one current at its end.
    fn engine(&self) -> Arc<Engine>;
    /// Called once per message, for metrics.
    fn record(&self, _record: &Record) {}
}

/// What happened to one message.
#[derive(Debug, Clone)]
pub struct Record {
    pub disposition: Disposition,
    /// None when scoring failed or timed out.
    pub verdict: Option<Verdict>,
    /// From end of message to the answer being written.
    pub latency: Duration,
}

/// Serves milter connections from `listener` until `shutdown`, then waits for sessions in
/// the middle of a message to finish theirs (idle ones close at once).
pub async fn serve(listener: Listener, host: Arc<dyn Host>, shutdown: CancellationToken) {
    let max_sessions = host.settings().max_sessions;
    // A permit is taken before accepting: past the limit, MTAs wait in the listen
    // backlog (and Postfix's milter_connect_timeout then applies its default action)
    // instead of spamnb holding unbounded connections.
    let limit = Arc::new(Semaphore::new(max_sessions));
    let tracker = TaskTracker::new();
    let address = listener.local_address();
    tracing::info!(%address, max_sessions, "milter listening");
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = shutdown.cancelled() => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = shutdown.cancelled() => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                let host = host.clone();
                let shutdown = shutdown.clone();
                tracker.spawn(async move {
                    let _permit = permit;
                    connection(stream, host, shutdown).await;
                    tracing::debug!(?peer, "milter connection closed");
                });
            }
            Err(e) => {
                // Out of file descriptors, most likely: back off instead of spinning.
                tracing::warn!(%address, "milter accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracker.close();
    tracker.wait().await;
    tracing::info!(%address, "milter stopped");
}

/// One MTA connection, to its end. Every failure is logged and closes the connection; the
/// MTA then passes the message on by its default action.
async fn connection(mut stream: Box<dyn Stream>, host: Arc<dyn Host>, shutdown: CancellationToken) {
    let settings = host.settings();
    let read_timeout = Duration::from_secs(settings.read_timeout_secs);
    let mut session = Session::new(settings.clone());
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    loop {
        // Every whole frame in the buffer first: an MTA may send several before it reads.
        let mut used = 0;
        loop {
            let (command, n) = match codec::decode(&buf[used..], DEFAULT_MAX_FRAME) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(session = %session.describe(), "milter protocol error, closing the connection: {e}");
                    return;
                }
            };
            used += n;
            match act(&mut session, command, &host, &settings).await {
                Ok(Some(responses)) => {
                    for r in &responses {
                        codec::encode(r, &mut out);
                    }
                }
                Ok(None) => {
                    let _ = write(&mut stream, &out, read_timeout).await;
                    return;
                }
                Err(e) => {
                    tracing::warn!(session = %session.describe(), "milter protocol error, closing the connection: {e}");
                    return;
                }
            }
        }
        buf.drain(..used);
        if !out.is_empty() {
            if let Err(e) = write(&mut stream, &out, read_timeout).await {
                tracing::warn!(session = %session.describe(), "cannot answer the MTA, closing the connection: {e}");
                return;
            }
            out.clear();
        }
        buf.reserve(16 * 1024);
        let read = tokio::select! {
            r = tokio::time::timeout(read_timeout, stream.read_buf(&mut buf)) => r,
            // Between messages a connection can close at once; in the middle of one it
            // is served to the end (the timeout still bounds that).
            () = shutdown.cancelled(), if !session.in_message() => return,
        };
        match read {
            Ok(Ok(0)) => {
                if session.in_message() {
                    tracing::info!(session = %session.describe(), "the MTA closed the connection in the middle of a message");
                }
                return;
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::info!(session = %session.describe(), "milter connection lost: {e}");
                return;
            }
            Err(_) => {
                tracing::info!(
                    session = %session.describe(),
                    "the MTA sent nothing for {}s (milter.read_timeout_secs), closing the connection",
                    settings.read_timeout_secs
                );
                return;
            }
        }
    }
}

/// Runs one command through the session; scores at end of message. `Ok(None)`: close.
async fn act(
    session: &mut Session,
    command: Command,
    host: &Arc<dyn Host>,
    settings: &MilterSettings,
) -> Result<Option<Vec<Response>>, codec::ProtocolError> {
    match session.handle(command)? {
        Step::Reply(responses) => Ok(Some(responses)),
        Step::Close => Ok(None),
        Step::Scan(raw) => {
            let started = Instant::now();
            let engine = host.engine();
            let verdict = score(engine.clone(), raw, settings, session).await;
            let (responses, disposition) =
                session.finish(verdict.as_ref().map(|v| (v, &engine.model)));
            let latency = started.elapsed();
            host.record(&Record {
                disposition,
                verdict: verdict.clone(),
                latency,
            });
            Ok(Some(responses))
        }
    }
}

/// The verdict on `raw`, or None (logged) when scoring failed or took too long.
async fn score(
    engine: Arc<Engine>,
    raw: Vec<u8>,
    settings: &MilterSettings,
    session: &Session,
) -> Option<Verdict> {
    let limit = Duration::from_millis(settings.scan_timeout_ms);
    let size = raw.len();
    // Scoring is CPU work and reads sled: it runs on the blocking pool, never on the
    // runtime's worker threads, so slow mail cannot stall other sessions' I/O.
    let task = tokio::task::spawn_blocking(move || engine.check(&raw));
    let who = session.describe();
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(verdict)) => {
            tracing::info!(
                session = %who,
                size,
                body_bytes = session.body_seen(),
                verdict = verdict.decision.name(),
                score = format_args!("{:.2}", verdict.score),
                "milter scored a message"
            );
            Some(verdict)
        }
        Ok(Err(e)) => {
            tracing::error!(session = %who, size, "scoring failed, passing the message on untouched: {e}");
            None
        }
        Err(_) => {
            tracing::warn!(
                session = %who,
                size,
                "scoring took over {} ms (milter.scan_timeout_ms), passing the message on untouched",
                settings.scan_timeout_ms
            );
            None
        }
    }
}

async fn write(stream: &mut Box<dyn Stream>, bytes: &[u8], limit: Duration) -> std::io::Result<()> {
    match tokio::time::timeout(limit, async {
        stream.write_all(bytes).await?;
        stream.flush().await
    })
    .await
    {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the MTA did not read the answer in time",
        )),
    }
}
