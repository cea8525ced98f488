//! Listening addresses as Postfix writes them (`inet:HOST:PORT`, `unix:PATH`), bound to
//! one [`Listener`] type so that every protocol's server loop accepts from either.

use std::fmt;
use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Inet(String),
    Unix(PathBuf),
}

impl std::str::FromStr for Address {
    type Err = String;

    fn from_str(s: &str) -> Result<Address, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            return Ok(Address::Unix(PathBuf::from(path)));
        }
        let hostport = s.strip_prefix("inet:").unwrap_or(s);
        // Postfix writes inet:PORT@HOST too; accept both spellings.
        let hostport = match hostport.split_once('@') {
            Some((port, host)) => format!("{host}:{port}"),
            None => hostport.to_string(),
        };
        if !hostport.contains(':') {
            return Err(format!(
                "{s:?} is not an address: write inet:HOST:PORT or unix:PATH"
            ));
        }
        Ok(Address::Inet(hostport))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Inet(a) => write!(f, "inet:{a}"),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Address {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Address, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A stream from either kind of listener.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// Whether a connection may be trusted with more than scoring (learning over the spamd
/// protocol's TELL): local sockets are, TCP peers only when configured so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Local,
    Network(std::net::SocketAddr),
}

impl Listener {
    pub async fn bind(address: &Address) -> std::io::Result<Listener> {
        match address {
            Address::Inet(a) => Ok(Listener::Tcp(TcpListener::bind(a).await?)),
            Address::Unix(path) => {
                // A socket file left by a daemon that died would make bind fail; one that
                // a live process still answers on is not ours to take.
                if std::fs::symlink_metadata(path).is_ok_and(|m| {
                    use std::os::unix::fs::FileTypeExt;
                    m.file_type().is_socket()
                }) {
                    if std::os::unix::net::UnixStream::connect(path).is_ok() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AddrInUse,
                            "another process is listening on it",
                        ));
                    }
                    std::fs::remove_file(path)?;
                }
                Ok(Listener::Unix(UnixListener::bind(path)?, path.clone()))
            }
        }
    }

    pub async fn accept(&self) -> std::io::Result<(Box<dyn Stream>, Peer)> {
        match self {
            Listener::Tcp(l) => {
                let (s, addr) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok((Box::new(s), Peer::Network(addr)))
            }
            Listener::Unix(l, _) => {
                let (s, _) = l.accept().await?;
                Ok((Box::new(s), Peer::Local))
            }
        }
    }

    /// The address actually bound (port 0 resolved), for logs and tests.
    pub fn local_address(&self) -> Address {
        match self {
            Listener::Tcp(l) => Address::Inet(
                l.local_addr()
                    .map_or_else(|_| "?".into(), |a| a.to_string()),
            ),
            Listener::Unix(_, p) => Address::Unix(p.clone()),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_postfix_spellings() {
        for (s, want) in [
            (
                "inet:127.0.0.1:11332",
                Some(Address::Inet("127.0.0.1:11332".into())),
            ),
            (
                "inet:11332@localhost",
                Some(Address::Inet("localhost:11332".into())),
            ),
            ("127.0.0.1:783", Some(Address::Inet("127.0.0.1:783".into()))),
            (
                "unix:/run/spamnb/milter.sock",
                Some(Address::Unix("/run/spamnb/milter.sock".into())),
            ),
            ("inet:nohost", None),
        ] {
            assert_eq!(s.parse::<Address>().ok(), want, "{s}");
        }
    }
}
