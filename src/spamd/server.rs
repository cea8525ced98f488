//! The spamd protocol's server loops: the public listeners (`run`) and the local control
//! socket for the CLI (`run_control`). One task per connection, one request per
//! connection, as spamd has it; every read under a timeout, every buffer under a limit.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::codec::{Code, Decoder, Reply, Step};
use super::session;
use crate::daemon::listen::{Listener, Peer, Stream};
use crate::daemon::metrics::Protocol;
use crate::daemon::{Admission, Context};

/// Bytes read at a time: a whole spamc head, and big messages in few reads.
const READ_CHUNK: usize = 16 * 1024;

/// Largest message the control socket takes, whatever `spamd.max_message_bytes` says:
/// that limit is for mail in transit, which is passed on unscored above it, while a
/// `spamnb learn` through the daemon must learn what it learns without one (a big spam
/// included) and only the CLI's user can reach that socket.
const CONTROL_MAX_MESSAGE: usize = 64 << 20;

/// Largest message the control socket takes under `spamd`: what a `spamnb learn` through
/// the daemon leaves out, naming it, rather than have it refused.
pub fn control_max_message(spamd: &crate::daemon::config::SpamdConfig) -> usize {
    spamd.max_message_bytes.max(CONTROL_MAX_MESSAGE)
}

/// Serves spamc, Exim and spamass-milter on `listener` until `shutdown`.
pub async fn run(listener: Listener, ctx: Arc<Context>, shutdown: CancellationToken) {
    accept_loop(listener, ctx, shutdown, Protocol::Spamd).await;
}

/// Serves the CLI on the local control socket until `shutdown`: the same protocol, its
/// numbers counted apart so that a `spamnb learn` of a whole folder does not look like mail.
pub async fn run_control(listener: Listener, ctx: Arc<Context>, shutdown: CancellationToken) {
    accept_loop(listener, ctx, shutdown, Protocol::Control).await;
}

async fn accept_loop(
    listener: Listener,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
    protocol: Protocol,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors, most likely: back off instead of spinning.
                tracing::warn!("spamd: accept on {} failed: {e}", listener.local_address());
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let admission = match peer {
            Peer::Network(_) => ctx.admit_network(protocol),
            Peer::Local => ctx.admit(protocol),
        };
        let Some(admission) = admission else {
            tracing::debug!("spamd: max_connections reached; closing a new connection");
            drop(stream);
            continue;
        };
        let (ctx2, token) = (ctx.clone(), shutdown.clone());
        ctx.tasks
            .spawn(connection(stream, peer, ctx2, admission, protocol, token));
    }
}

async fn connection(
    mut stream: Box<dyn Stream>,
    peer: Peer,
    ctx: Arc<Context>,
    _admission: Admission,
    protocol: Protocol,
    shutdown: CancellationToken,
) {
    let config = ctx.config();
    let read_timeout = config.daemon.read_timeout();
    let deadline = Instant::now() + config.daemon.session_timeout();
    let limit = match protocol {
        Protocol::Control => control_max_message(&config.spamd),
        _ => config.spamd.max_message_bytes,
    };
    let mut decoder = Decoder::new(limit);
    // Small until the client shows it has something to say: idle connections cost little.
    let mut buf = vec![0u8; 1024];
    let mut received = 0usize;
    let request = loop {
        let want = decoder.wants().clamp(1, buf.len());
        let until = deadline.min(Instant::now() + read_timeout);
        let read = tokio::select! {
            // A client that has sent nothing yet is idle: it goes when the daemon does.
            _ = shutdown.cancelled(), if received == 0 => return,
            r = tokio::time::timeout_at(until, stream.read(&mut buf[..want])) => r,
        };
        let step = match read {
            Err(_) => {
                if received > 0 {
                    ctx.metrics.error(protocol);
                }
                tracing::debug!(?peer, received, "spamd: client too slow; closing");
                let reply = Reply::error(Code::Timeout, "Timeout: (no complete request in time)");
                let _ = write(&mut stream, &reply, read_timeout).await;
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(?peer, "spamd: read failed: {e}");
                return;
            }
            Ok(Ok(0)) => decoder.finish().map(Step::Request),
            Ok(Ok(n)) => {
                received += n;
                if buf.len() < READ_CHUNK {
                    buf.resize(READ_CHUNK, 0);
                }
                decoder.feed(&buf[..n])
            }
        };
        match step {
            Ok(Step::NeedMore) => continue,
            Ok(Step::Request(r)) => break r,
            Err(e) => {
                if received == 0 {
                    // Connected and closed without a word: a port check, not an error.
                    return;
                }
                ctx.metrics.error(protocol);
                tracing::info!(?peer, "spamd: refused a request: {}", e);
                let _ = write(&mut stream, &session::protocol_error(&e), read_timeout).await;
                return;
            }
        }
    };
    drop(buf);
    let reply = session::serve(request, peer, &ctx, &config, protocol).await;
    if let Err(e) = write(&mut stream, &reply, read_timeout).await {
        tracing::debug!(?peer, "spamd: could not send the reply: {e}");
    }
}

/// Writes the reply and closes the connection's sending side, within `timeout`.
async fn write(
    stream: &mut Box<dyn Stream>,
    reply: &Reply,
    timeout: Duration,
) -> std::io::Result<()> {
    let bytes = reply.encode();
    let sent = async {
        stream.write_all(&bytes).await?;
        stream.flush().await?;
        stream.shutdown().await
    };
    tokio::time::timeout(timeout, sent).await.map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client did not read the reply",
        )
    })?
}
