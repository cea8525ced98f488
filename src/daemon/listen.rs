//! Listening addresses as Postfix writes them (`inet:HOST:PORT`, `unix:PATH`), bound to
//! one [`Listener`] type so that every protocol's server loop accepts from either.

use std::fmt;
use std::os::fd::{AsFd, AsRawFd};
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
        let Some((_, port)) = hostport.rsplit_once(':') else {
            return Err(format!(
                "{s:?} is not an address: write inet:HOST:PORT or unix:PATH"
            ));
        };
        // Checked here, where the configuration's file is named: at bind time it was
        // "invalid port value; free it", as if the port were taken.
        if port.parse::<u16>().is_err() {
            return Err(format!(
                "{s:?}: the port {port:?} is not a number from 0 to 65535"
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

/// `listen` of `[spamd]` and `[milter]`: a list of addresses, or one written as a plain
/// string, as `[control]` and `[http]` take theirs (`listen = "inet:127.0.0.1:11332"` was
/// refused as "expected a sequence").
pub fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Address>, D::Error> {
    struct OneOrMany;
    impl<'de> serde::de::Visitor<'de> for OneOrMany {
        type Value = Vec<Address>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an address (\"inet:HOST:PORT\" or \"unix:PATH\") or a list of them")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Vec<Address>, E> {
            s.parse().map(|a| vec![a]).map_err(E::custom)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(a) = seq.next_element()? {
                all.push(a);
            }
            Ok(all)
        }
    }
    d.deserialize_any(OneOrMany)
}

/// As [`one_or_many`], for a `listen` whose absence means the defaults.
pub fn some_one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<Address>>, D::Error> {
    one_or_many(d).map(Some)
}

/// A stream from either kind of listener.
pub trait Stream: AsyncRead + AsyncWrite + AsFd + Unpin + Send {
    /// Whether bytes from the peer wait unread, asked of the socket itself: the runtime
    /// learns of them only when its reactor next looks, which under a burst of new
    /// connections can be well after they arrived.
    fn has_unread(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: recv writes at most one byte, into `byte` on this stack frame; the
        // descriptor is the stream's own, open while `self` is borrowed. MSG_DONTWAIT
        // keeps the call from blocking, and MSG_PEEK leaves the byte to the next read.
        let n = unsafe {
            libc::recv(
                self.as_fd().as_raw_fd(),
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n > 0
    }
}
impl<T: AsyncRead + AsyncWrite + AsFd + Unpin + Send> Stream for T {}

/// Every unix socket's mode: read and write (connecting takes write) for its owner and group.
const SOCKET_MODE: u32 = 0o660;

pub enum Listener {
    Tcp(TcpListener),
    /// The socket, its path, and the file it made there (device and inode): what its drop
    /// may remove.
    Unix(UnixListener, PathBuf, (u64, u64)),
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
                    // Only a refused connection says nobody listens: one that may not be
                    // made (its mode, say) is no sign the listener is gone.
                    match std::os::unix::net::UnixStream::connect(path) {
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                            std::fs::remove_file(path)?
                        }
                        Ok(_) => {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::AddrInUse,
                                "another process is listening on it",
                            ));
                        }
                        Err(e) => {
                            return Err(std::io::Error::new(
                                e.kind(),
                                format!(
                                    "a socket is there, and whether anyone listens on it cannot be told ({e}): remove it if it is stale"
                                ),
                            ));
                        }
                    }
                }
                let listener = UnixListener::bind(path)?;
                // For the owner and its group (Postfix, a mail server's hook), never for
                // others, whatever the umask: the control socket teaches and exports the
                // model. Who may reach the socket at all, the directory decides. The
                // umask is left to the database's files, which the group need not write.
                use std::os::unix::fs::{MetadataExt, PermissionsExt};
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))?;
                let made = std::fs::symlink_metadata(path)?;
                Ok(Listener::Unix(
                    listener,
                    path.clone(),
                    (made.dev(), made.ino()),
                ))
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
            Listener::Unix(l, _, _) => {
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
            Listener::Unix(_, p, _) => Address::Unix(p.clone()),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Only the file this listener made: another daemon may have taken the path since.
        if let Listener::Unix(_, path, made) = self {
            use std::os::unix::fs::MetadataExt;
            let ours = std::fs::symlink_metadata(&*path).is_ok_and(|m| (m.dev(), m.ino()) == *made);
            if ours {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket is for its owner and group, and only them, whatever the umask (the
    /// tests' is commonly 022, which alone would deny the group); and a listener that
    /// goes removes its own socket file, not one another daemon has put at the path since.
    #[tokio::test]
    async fn unix_sockets_are_kept_from_others_and_removed_only_by_their_maker() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let address = Address::Unix(path.clone());
        let first = Listener::bind(&address).await.unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, SOCKET_MODE, "{mode:o}");
        // A live socket is not taken over.
        assert!(Listener::bind(&address).await.is_err());
        std::fs::remove_file(&path).unwrap();
        let second = Listener::bind(&address).await.unwrap();
        drop(first);
        assert!(
            path.exists(),
            "the first listener removed the second's socket"
        );
        drop(second);
        assert!(!path.exists());
    }

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
            ("inet:127.0.0.1:99999", None),
            ("inet:127.0.0.1:", None),
            ("inet:smtp@localhost", None),
            ("inet:[::1]:783", Some(Address::Inet("[::1]:783".into()))),
        ] {
            assert_eq!(s.parse::<Address>().ok(), want, "{s}");
        }
    }
}
