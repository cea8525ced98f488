//! The milter server: accepts MTA connections, runs one [`Session`] per connection in its
//! own task, scores each message on the blocking pool, and fails open: a scoring error or
//! timeout answers "continue" and leaves the message as it was; a broken connection is
//! closed, and the MTA applies its `milter_default_action` (`accept` in `contrib/`).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::MilterSettings;
use super::codec::{self, Command, DEFAULT_MAX_FRAME, Response};
use super::session::{Disposition, Session, Step, Who};
use crate::daemon::listen::{Listener, Stream};
use crate::daemon::metrics::Protocol;
use crate::daemon::{CheckError, Context, Reading, Scored};

/// Logs at `level` naming whom the session serves, a field for each of queue ID, client and
/// sender (those known), then the rest as `tracing` takes it.
macro_rules! log_for {
    ($level:ident, $who:expr, $($rest:tt)+) => {{
        let who: &Who = &$who;
        tracing::$level!(
            queue_id = who.queue_id.as_deref().map(tracing::field::display),
            client = who.client.as_deref().map(tracing::field::display),
            from = who.from.as_deref().map(tracing::field::display),
            $($rest)+
        )
    }};
}

/// Serves milter connections from `listener` until `shutdown` (the daemon's contract, see
/// [`crate::daemon`]). Sessions in the middle of a message finish it; idle ones close.
pub async fn run(listener: Listener, ctx: Arc<Context>, shutdown: CancellationToken) {
    let max_sessions = ctx.config().milter.max_sessions;
    // A permit is taken before accepting: past the limit, MTAs wait in the listen
    // backlog (and Postfix's milter_connect_timeout then applies its default action)
    // instead of spamnb holding unbounded connections. The limit is per listener and
    // fixed at start; a reload does not resize it.
    let limit = Arc::new(Semaphore::new(max_sessions));
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
                // The daemon-wide connection limit: past it the connection closes at once
                // and the MTA applies its default action.
                let Some(admission) = ctx.admit(Protocol::Milter) else {
                    tracing::warn!(%address, "milter connection refused: daemon.max_connections are open");
                    continue;
                };
                let ctx2 = ctx.clone();
                let shutdown = shutdown.clone();
                ctx.tasks.spawn(async move {
                    let _permit = permit;
                    let _admission = admission;
                    connection(stream, ctx2, shutdown).await;
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
    tracing::info!(%address, "milter stopped accepting");
}

/// One MTA connection, to its end. Every failure is logged and closes the connection; the
/// MTA then passes the message on by its default action.
async fn connection(mut stream: Box<dyn Stream>, ctx: Arc<Context>, shutdown: CancellationToken) {
    let settings = Arc::new(ctx.config().milter.clone());
    let read_timeout = Duration::from_secs(settings.read_timeout_secs);
    // An MTA negotiates as soon as it connects. Until then the peer may be any local user
    // (the milter listens on TCP), and read_timeout_secs, as long as Postfix's own timeouts,
    // would let idle connections hold every session slot, the MTA's mail then passing
    // unscored: a silent newcomer gets the daemon's read_timeout.
    let first_timeout = ctx.config().daemon.read_timeout().min(read_timeout);
    let mut session = Session::new(settings.clone());
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    loop {
        // Every whole frame in the buffer first: an MTA may send several before it reads.
        let mut used = 0;
        loop {
            let acted = match codec::decode(&buf[used..], DEFAULT_MAX_FRAME) {
                Ok(None) => break,
                Ok(Some((command, n))) => {
                    used += n;
                    act(&mut session, command, &ctx, &settings).await
                }
                Err(e) => Err(e),
            };
            match acted {
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
                    log_for!(
                        warn,
                        session.who(),
                        "milter protocol error, closing the connection: {e}"
                    );
                    return;
                }
            }
        }
        buf.drain(..used);
        if !out.is_empty() {
            if let Err(e) = write(&mut stream, &out, read_timeout).await {
                log_for!(
                    warn,
                    session.who(),
                    "cannot answer the MTA, closing the connection: {e}"
                );
                return;
            }
            out.clear();
        }
        buf.reserve(16 * 1024);
        let read = tokio::select! {
            r = tokio::time::timeout(
                if session.negotiated() { read_timeout } else { first_timeout },
                stream.read_buf(&mut buf),
            ) => r,
            // Between messages a connection can close at once; in the middle of one it
            // is served to the end (the timeout still bounds that).
            () = shutdown.cancelled(), if !session.in_message() => return,
        };
        match read {
            Ok(Ok(0)) => {
                if session.in_message() {
                    log_for!(
                        info,
                        session.who(),
                        "the MTA closed the connection in the middle of a message"
                    );
                }
                return;
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                log_for!(info, session.who(), "milter connection lost: {e}");
                return;
            }
            Err(_) if !session.negotiated() => {
                tracing::info!(
                    "a milter client sent no negotiation within {}s (daemon.read_timeout), \
                     closing the connection",
                    first_timeout.as_secs()
                );
                return;
            }
            Err(_) => {
                log_for!(
                    info,
                    session.who(),
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
    ctx: &Arc<Context>,
    settings: &MilterSettings,
) -> Result<Option<Vec<Response>>, codec::ProtocolError> {
    match session.handle(command)? {
        Step::Reply(responses) => Ok(Some(responses)),
        Step::Close => Ok(None),
        Step::Scan(raw) => {
            let scored = score(ctx, raw, settings, session).await;
            let (responses, disposition) =
                session.finish(scored.as_ref().map(|s| (&s.verdict, &s.engine.model)));
            if disposition == Disposition::PassedUnscored {
                ctx.metrics.fail_open(Protocol::Milter);
            }
            Ok(Some(responses))
        }
    }
}

/// The verdict on `raw`, or None (logged) when scoring failed or took too long.
async fn score(
    ctx: &Context,
    raw: Vec<u8>,
    settings: &MilterSettings,
    session: &Session,
) -> Option<Scored> {
    let limit = Duration::from_millis(settings.scan_timeout_ms);
    let size = raw.len();
    let who = session.who();
    // Context::check scores on the blocking pool (CPU work and sled reads must not stall
    // other sessions' I/O) within a scoring slot, and records the latency.
    let started = std::time::Instant::now();
    let reading = if session.body_cut() {
        Reading::InTransitCut
    } else {
        Reading::InTransit
    };
    match tokio::time::timeout(limit, ctx.check(Protocol::Milter, raw.into(), reading)).await {
        Ok(Ok(scored)) => {
            let verdict = &scored.verdict;
            log_for!(
                info,
                who,
                size,
                ms = format_args!("{:.2}", started.elapsed().as_secs_f64() * 1000.0),
                body_bytes = session.body_seen(),
                verdict = verdict.decision.name(),
                score = format_args!("{:.2}", verdict.score),
                "milter scored a message"
            );
            Some(scored)
        }
        Ok(Err(e)) => {
            // Overload and the daemon's deadline are counted as fail-open (by the caller);
            // only a failure inside scoring is an error.
            if matches!(e, CheckError::Internal(_)) {
                ctx.metrics.error(Protocol::Milter);
            }
            log_for!(error, who, size, "passing the message on untouched: {e}");
            None
        }
        Err(_) => {
            log_for!(
                warn,
                who,
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
