//! systemd's readiness protocol (`sd_notify`): one datagram to `$NOTIFY_SOCKET`. Twenty
//! lines of std instead of a crate: the protocol is a line of text on a unix socket.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (`READY=1`, `RELOADING=1`, `STOPPING=1`, `STATUS=…`) to systemd when it
/// is listening; without `$NOTIFY_SOCKET` (not under systemd) this does nothing.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let result = UnixDatagram::unbound().and_then(|socket| {
        let bytes = path.as_encoded_bytes();
        // A leading '@' names a socket in the abstract namespace (Linux).
        if let Some(name) = bytes.strip_prefix(b"@") {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(state.as_bytes(), &addr)
        } else {
            socket.send_to(state.as_bytes(), &path)
        }
    });
    if let Err(e) = result {
        tracing::warn!("cannot tell systemd {state:?} through NOTIFY_SOCKET: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_a_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        // SAFETY of set_var: this test is the only one in the crate touching NOTIFY_SOCKET.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &path) };
        notify("READY=1");
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}
