//! The spamd protocol's wire format, with no I/O: requests decoded from bytes as they
//! arrive ("need more" is a normal answer), replies encoded to bytes.
//!
//! A request is a line `METHOD SPAMC/x.y`, header lines `Name: value`, an empty line, and
//! for the methods that carry one, a message of `Content-length` bytes (or up to EOF when
//! the client sends no length). Every part is bounded: the head by [`MAX_HEAD`] bytes and
//! [`MAX_HEADERS`] lines, the message by the configured limit, checked against the
//! announced length before a byte of it is buffered.

use crate::model::Class;

/// Bytes of request line and headers together; spamc sends about a hundred.
pub const MAX_HEAD: usize = 8 * 1024;
/// Header lines in one request (spamd's own limit is 255).
pub const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Check,
    Symbols,
    Report,
    ReportIfSpam,
    Process,
    Headers,
    Ping,
    Skip,
    Tell,
    /// spamnb's extension for its own CLI: the full verdict as JSON.
    Verdict,
    /// spamnb's extension for `spamnb filter`: VERDICT for a message being delivered, which
    /// the daemon autolearns from as from the milter's and spamd's.
    Deliver,
    /// spamnb's extension for its own CLI: make everything learned durable.
    Flush,
    /// spamnb's extension for its own CLI: the database's figures as JSON.
    Stats,
    /// spamnb's extension for its own CLI: the whole model as `spamnb export` writes it.
    Export,
    /// spamnb's extension for its own CLI: `spamnb prune`, its settings as JSON in the body.
    Prune,
    /// spamnb's extension for its own CLI: the ledger's entries for the digests (a JSON
    /// array) in the body, for `check --explain`.
    Ledger,
}

impl Method {
    fn parse(name: &str) -> Option<Method> {
        Some(match name {
            "CHECK" => Method::Check,
            "SYMBOLS" => Method::Symbols,
            "REPORT" => Method::Report,
            "REPORT_IFSPAM" => Method::ReportIfSpam,
            "PROCESS" => Method::Process,
            "HEADERS" => Method::Headers,
            "PING" => Method::Ping,
            "SKIP" => Method::Skip,
            "TELL" => Method::Tell,
            "VERDICT" => Method::Verdict,
            "DELIVER" => Method::Deliver,
            "FLUSH" => Method::Flush,
            "STATS" => Method::Stats,
            "EXPORT" => Method::Export,
            "PRUNE" => Method::Prune,
            "LEDGER" => Method::Ledger,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Check => "CHECK",
            Method::Symbols => "SYMBOLS",
            Method::Report => "REPORT",
            Method::ReportIfSpam => "REPORT_IFSPAM",
            Method::Process => "PROCESS",
            Method::Headers => "HEADERS",
            Method::Ping => "PING",
            Method::Skip => "SKIP",
            Method::Tell => "TELL",
            Method::Verdict => "VERDICT",
            Method::Deliver => "DELIVER",
            Method::Flush => "FLUSH",
            Method::Stats => "STATS",
            Method::Export => "EXPORT",
            Method::Prune => "PRUNE",
            Method::Ledger => "LEDGER",
        }
    }

    /// Whether a message follows the head.
    pub fn has_body(self) -> bool {
        !matches!(
            self,
            Method::Ping | Method::Skip | Method::Flush | Method::Stats | Method::Export
        )
    }
}

/// Which databases a TELL's `Set` or `Remove` names; spamnb has only the local one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Targets {
    pub local: bool,
}

impl Targets {
    fn parse(value: &str) -> Targets {
        let v = value.to_ascii_lowercase();
        Targets {
            local: v.contains("local"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: Method,
    /// Protocol version times ten (SPAMC/1.5 is 15): replies differ below 1.3.
    pub version: u32,
    pub content_length: Option<u64>,
    pub user: Option<String>,
    pub message_class: Option<Class>,
    pub set: Targets,
    pub remove: Targets,
    /// `Compress: zlib` (spamc -z): the body as sent is the message deflated.
    pub compressed: bool,
    /// `Cut: yes`, spamnb's own: the body is the start of a longer message in transit,
    /// scored but never learned (no correction of the whole message would find it).
    pub cut: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub head: Head,
    pub body: Vec<u8>,
}

/// A request that cannot be served, and why: the reply puts it in parentheses, spamd's way
/// ([`crate::spamd::session::protocol_error`]), the log as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("request line is not METHOD SPAMC/x.y")]
    BadRequestLine,
    #[error("unknown method {0}")]
    UnknownMethod(String),
    #[error("header not in 'Name: value' format")]
    BadHeader,
    #[error("too many headers")]
    TooManyHeaders,
    #[error("request head longer than {MAX_HEAD} bytes")]
    HeadTooLong,
    #[error("Content-Length contains non-numeric bytes")]
    BadLength,
    #[error("Message-class header contains invalid class")]
    BadClass,
    #[error("User header contains control chars")]
    BadUser,
    #[error("compression type not supported")]
    Compressed,
    #[error("the compressed message is not zlib data, or is cut short")]
    BadCompressed,
    #[error("message of {0} bytes is above this server's limit of {1}")]
    TooLarge(u64, usize),
    #[error("Content-Length mismatch: Expected {expected} bytes, got {got} bytes")]
    LengthMismatch { expected: u64, got: usize },
    #[error("Unable to set local and remove local in the same operation.")]
    SetAndRemove,
    #[error("TELL needs Content-length: without it, a message cut short would be learned as whole")]
    TellWithoutLength,
}

impl ProtocolError {
    /// The sysexits code spamd answers with.
    pub fn code(&self) -> Code {
        match self {
            ProtocolError::TooLarge(..) => Code::DataErr,
            _ => Code::Protocol,
        }
    }
}

/// Where decoding stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Feed more bytes (or call [`Decoder::finish`] at end of input).
    NeedMore,
    Request(Request),
}

/// Decodes one request from bytes fed in any chunking.
/// The most a decoder reserves for a body before its bytes come.
const READ_AHEAD_LIMIT: usize = 1 << 20;

#[derive(Debug)]
pub struct Decoder {
    max_message: usize,
    buf: Vec<u8>,
    head: Option<Head>,
}

impl Decoder {
    pub fn new(max_message: usize) -> Decoder {
        Decoder {
            max_message,
            buf: Vec::with_capacity(512),
            head: None,
        }
    }

    /// Adds `bytes` and decodes as far as they go.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Step, ProtocolError> {
        self.buf.extend_from_slice(bytes);
        self.step()
    }

    /// How many more bytes the decoder can use at most: a read never needs to be larger.
    pub fn wants(&self) -> usize {
        match &self.head {
            None => MAX_HEAD + 1 - self.buf.len().min(MAX_HEAD),
            Some(h) => match h.content_length {
                Some(n) => (n as usize).saturating_sub(self.buf.len()),
                None => self.max_message + 1 - self.buf.len().min(self.max_message),
            },
        }
    }

    fn step(&mut self) -> Result<Step, ProtocolError> {
        if self.head.is_none() {
            let Some((head, used)) = decode_head(&self.buf)? else {
                return Ok(Step::NeedMore);
            };
            if let Some(n) = head.content_length
                && n > self.max_message as u64
            {
                return Err(ProtocolError::TooLarge(n, self.max_message));
            }
            self.buf.drain(..used);
            if let Some(n) = head.content_length {
                // Reserve what was announced, now that it is known to be within the limit,
                // up to a megabyte: past that the buffer grows as the bytes come, so that
                // an announced length nobody sends holds no memory.
                let announced = (n as usize).min(READ_AHEAD_LIMIT);
                self.buf.reserve(announced.saturating_sub(self.buf.len()));
            }
            self.head = Some(head);
        }
        let head = self.head.as_ref().expect("the head was decoded above");
        if !head.method.has_body() {
            return Ok(Step::Request(self.take()));
        }
        match head.content_length {
            Some(n) if self.buf.len() as u64 >= n => {
                let n = n as usize;
                // spamd reads whole lines: a length that ends inside one is a client's
                // miscount (characters for bytes, say), and the mail must not be scored, let
                // alone handed back, cut there. A client that sent exactly that many bytes
                // ends the line with its end of input (`finish`).
                if n > 0 && self.buf[n - 1] != b'\n' && !head.compressed {
                    if self.buf.len() > n {
                        return Err(ProtocolError::LengthMismatch {
                            expected: n as u64,
                            got: self.buf.len(),
                        });
                    }
                    return Ok(Step::NeedMore);
                }
                // Bytes past the announced length, after a line's end, are not part of the
                // request (spamd does not read them either).
                self.buf.truncate(n);
                Ok(Step::Request(self.take_inflated()?))
            }
            None if self.buf.len() > self.max_message => Err(ProtocolError::TooLarge(
                self.buf.len() as u64,
                self.max_message,
            )),
            _ => Ok(Step::NeedMore),
        }
    }

    /// End of input: the request if it is complete (a body without `Content-length`
    /// ends here), an error if it was cut short.
    pub fn finish(&mut self) -> Result<Request, ProtocolError> {
        match &self.head {
            None => Err(ProtocolError::BadRequestLine),
            Some(h) => match h.content_length {
                Some(expected) if (self.buf.len() as u64) < expected && h.method.has_body() => {
                    Err(ProtocolError::LengthMismatch {
                        expected,
                        got: self.buf.len(),
                    })
                }
                _ => self.take_inflated(),
            },
        }
    }

    /// The request, its body inflated when it came compressed: no larger than the limit,
    /// which holds for the message, not for the bytes that carried it.
    fn take_inflated(&mut self) -> Result<Request, ProtocolError> {
        let mut request = self.take();
        if request.head.compressed {
            use std::io::Read;
            let mut message = Vec::new();
            flate2::read::ZlibDecoder::new(request.body.as_slice())
                .take(self.max_message as u64 + 1)
                .read_to_end(&mut message)
                .map_err(|_| ProtocolError::BadCompressed)?;
            if message.len() > self.max_message {
                return Err(ProtocolError::TooLarge(
                    message.len() as u64,
                    self.max_message,
                ));
            }
            request.body = message;
        }
        Ok(request)
    }

    fn take(&mut self) -> Request {
        Request {
            head: self
                .head
                .take()
                .expect("take is called once the head is decoded"),
            body: std::mem::take(&mut self.buf),
        }
    }
}

/// The head and the bytes it took, or `None` when its end has not arrived yet.
fn decode_head(buf: &[u8]) -> Result<Option<(Head, usize)>, ProtocolError> {
    let mut lines = Vec::new();
    let mut at = 0;
    loop {
        let Some(nl) = buf[at..].iter().position(|&b| b == b'\n') else {
            if buf.len() > MAX_HEAD {
                return Err(ProtocolError::HeadTooLong);
            }
            // The request line alone can already be judged, so that garbage is refused
            // before the client sends more of it.
            if lines.is_empty() && buf.len() >= 16 && !buf.contains(&b' ') {
                return Err(ProtocolError::BadRequestLine);
            }
            return Ok(None);
        };
        let line = &buf[at..at + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        at += nl + 1;
        if at > MAX_HEAD {
            return Err(ProtocolError::HeadTooLong);
        }
        if lines.is_empty() {
            lines.push(line);
            // SPAMC/1.2 and older PING/SKIP have no header block at all.
            let (method, version) = request_line(line)?;
            if version < 15 && !method.has_body() {
                return Ok(Some((head_of(method, version, &[])?, at)));
            }
            continue;
        }
        if line.is_empty() {
            let (method, version) = request_line(lines[0])?;
            return Ok(Some((head_of(method, version, &lines[1..])?, at)));
        }
        if lines.len() > MAX_HEADERS {
            return Err(ProtocolError::TooManyHeaders);
        }
        lines.push(line);
    }
}

fn request_line(line: &[u8]) -> Result<(Method, u32), ProtocolError> {
    let line = std::str::from_utf8(line).map_err(|_| ProtocolError::BadRequestLine)?;
    let (name, proto) = line.split_once(' ').ok_or(ProtocolError::BadRequestLine)?;
    let version = proto
        .trim()
        .strip_prefix("SPAMC/")
        .and_then(|v| v.split_once('.'))
        .and_then(|(major, minor)| {
            let major = major.parse::<u32>().ok()?.checked_mul(10)?;
            major.checked_add(minor.parse::<u32>().ok()?.min(9))
        })
        .ok_or(ProtocolError::BadRequestLine)?;
    let method = Method::parse(name).ok_or_else(|| {
        ProtocolError::UnknownMethod(
            crate::message::escape_control(&name.chars().take(32).collect::<String>()).into(),
        )
    })?;
    Ok((method, version))
}

fn head_of(method: Method, version: u32, lines: &[&[u8]]) -> Result<Head, ProtocolError> {
    let mut head = Head {
        method,
        version,
        content_length: None,
        user: None,
        message_class: None,
        set: Targets::default(),
        remove: Targets::default(),
        compressed: false,
        cut: false,
    };
    for line in lines {
        let line = String::from_utf8_lossy(line);
        let (name, value) = line.split_once(':').ok_or(ProtocolError::BadHeader)?;
        let value = value.trim();
        // spamd matches names exactly; clients vary in case, so match without it.
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(ProtocolError::BadLength);
                }
                // Twenty digits overflow u64: too large either way.
                head.content_length = Some(value.parse().unwrap_or(u64::MAX));
            }
            "user" => {
                if value.chars().any(char::is_control) {
                    return Err(ProtocolError::BadUser);
                }
                head.user = Some(value.chars().take(256).collect());
            }
            "message-class" => {
                head.message_class = Some(match value.to_ascii_lowercase().as_str() {
                    "spam" => Class::Spam,
                    "ham" => Class::Ham,
                    _ => return Err(ProtocolError::BadClass),
                })
            }
            "set" => head.set = Targets::parse(value),
            "remove" => head.remove = Targets::parse(value),
            "compress" if value.eq_ignore_ascii_case("zlib") => head.compressed = true,
            "compress" => return Err(ProtocolError::Compressed),
            "cut" => head.cut = value.eq_ignore_ascii_case("yes"),
            // Unknown headers are ignored, as spamd does.
            _ => {}
        }
    }
    if head.set.local && head.remove.local {
        return Err(ProtocolError::SetAndRemove);
    }
    // A body without a length ends where the client stops sending, which a client that
    // dies halfway does too; spamc always sends one.
    if method == Method::Tell && head.content_length.is_none() {
        return Err(ProtocolError::TellWithoutLength);
    }
    Ok(head)
}

/// The sysexits codes spamd replies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Ok = 0,
    DataErr = 65,
    Unavailable = 69,
    Software = 70,
    TempFail = 75,
    Protocol = 76,
    NoPerm = 77,
    Timeout = 79,
}

impl Code {
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "EX_OK",
            Code::DataErr => "EX_DATAERR",
            Code::Unavailable => "EX_UNAVAILABLE",
            Code::Software => "EX_SOFTWARE",
            Code::TempFail => "EX_TEMPFAIL",
            Code::Protocol => "EX_PROTOCOL",
            Code::NoPerm => "EX_NOPERM",
            Code::Timeout => "EX_TIMEOUT",
        }
    }
}

/// One reply, encoded by [`Reply::encode`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `SPAMD/1.5 0 PONG`.
    Pong,
    /// Nothing at all (SKIP): the connection just closes.
    Nothing,
    /// An error line, as spamd writes them: `SPAMD/1.0 76 Bad header line: (…)`.
    Error { code: Code, message: String },
    /// A verdict with optional headers and body: CHECK, SYMBOLS, REPORT, PROCESS, …
    Result {
        version: u32,
        /// `Spam: True ; 9.4 / 5.0` (None for TELL and FLUSH).
        spam: Option<SpamLine>,
        headers: Vec<(&'static str, String)>,
        /// Whether the body is announced with Content-length (everything but CHECK).
        body: Option<Vec<u8>>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpamLine {
    pub is_spam: bool,
    /// REPORT_IFSPAM says Yes/No where the others say True/False.
    pub yes_no: bool,
    pub score: f64,
    pub threshold: f64,
}

impl SpamLine {
    fn encode(&self) -> String {
        let word = match (self.yes_no, self.is_spam) {
            (true, true) => "Yes",
            (true, false) => "No",
            (false, true) => "True",
            (false, false) => "False",
        };
        format!("Spam: {word} ; {:.1} / {:.1}", self.score, self.threshold)
    }
}

impl Reply {
    pub fn error(code: Code, message: impl Into<String>) -> Reply {
        Reply::Error {
            code,
            message: message.into(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            Reply::Pong => b"SPAMD/1.5 0 PONG\r\n".to_vec(),
            Reply::Nothing => Vec::new(),
            Reply::Error { code, message } => {
                let message = message.replace(['\r', '\n'], " ");
                format!("SPAMD/1.0 {} {message}\r\n", *code as u8).into_bytes()
            }
            Reply::Result {
                version,
                spam,
                headers,
                body,
            } => {
                let mut out = format!("SPAMD/1.1 0 {}\r\n", Code::Ok.name());
                // Before SPAMC/1.3 a reply carried one header only; before 1.2 no length.
                let multi = *version >= 13;
                if let Some(body) = body
                    && (multi || (*version >= 12 && spam.is_none()))
                {
                    out.push_str(&format!("Content-length: {}\r\n", body.len()));
                }
                if let Some(spam) = spam {
                    out.push_str(&spam.encode());
                    out.push_str("\r\n");
                }
                for (name, value) in headers {
                    out.push_str(&format!("{name}: {value}\r\n"));
                }
                out.push_str("\r\n");
                let mut out = out.into_bytes();
                if let Some(body) = body {
                    out.extend_from_slice(body);
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_chunks(bytes: &[u8], chunk: usize, max: usize) -> Result<Request, ProtocolError> {
        let mut d = Decoder::new(max);
        for piece in bytes.chunks(chunk) {
            if let Step::Request(r) = d.feed(piece)? {
                return Ok(r);
            }
        }
        d.finish()
    }

    /// spamc -z sends the message deflated (zlib's format); it is scored as sent, and
    /// the limit holds for the message, however small it was deflated.
    #[test]
    fn a_compressed_message_is_inflated_within_the_limit() {
        use std::io::Write;
        let deflate = |message: &[u8]| {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(message).unwrap();
            z.finish().unwrap()
        };
        let request = |body: &[u8]| {
            let mut wire = format!(
                "PROCESS SPAMC/1.5\r\nCompress: zlib\r\nContent-length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            wire.extend_from_slice(body);
            wire
        };
        let message = b"Subject: hi\r\n\r\nno newline at the end";
        let wire = request(&deflate(message));
        for chunk in [1, 7, wire.len()] {
            let r = decode_in_chunks(&wire, chunk, 1024).unwrap();
            assert_eq!(r.body, message, "chunk {chunk}");
        }
        // Cut short anywhere, it is refused: PROCESS would hand the cut message back.
        let whole = deflate(message);
        for cut in 1..whole.len() {
            assert_eq!(
                decode_in_chunks(&request(&whole[..cut]), 1000, 1024),
                Err(ProtocolError::BadCompressed),
                "cut to {cut} of {}",
                whole.len()
            );
        }
        let bomb = deflate(&vec![b'x'; 4096]);
        assert!(bomb.len() < 1024);
        assert_eq!(
            decode_in_chunks(&request(&bomb), 100, 1024),
            Err(ProtocolError::TooLarge(1025, 1024))
        );
    }

    #[test]
    fn a_message_without_a_last_newline_ends_with_the_input() {
        let wire = b"CHECK SPAMC/1.5\r\nContent-length: 21\r\n\r\nSubject: hi\r\n\r\nno end";
        let mut d = Decoder::new(1024);
        // The line may go on: the decoder waits, as spamd reading lines does...
        assert_eq!(d.feed(wire).unwrap(), Step::NeedMore);
        // ...until the client's end of input (spamc shuts its side once it has sent).
        assert_eq!(d.finish().unwrap().body, b"Subject: hi\r\n\r\nno end");
    }

    #[test]
    fn decodes_in_every_chunk_size() {
        let body = b"Subject: hi\r\n\r\nhello\r\n";
        let wire = format!(
            "TELL SPAMC/1.5\r\nContent-length: {}\r\nUser: bob\r\nMessage-class: spam\r\nSet: local\r\n\r\n",
            body.len()
        );
        let mut bytes = wire.into_bytes();
        bytes.extend_from_slice(body);
        for chunk in 1..=bytes.len() {
            let r = decode_in_chunks(&bytes, chunk, 1 << 20)
                .unwrap_or_else(|e| panic!("chunk {chunk}: {e}"));
            assert_eq!(r.head.method, Method::Tell, "chunk {chunk}");
            assert_eq!(r.head.version, 15);
            assert_eq!(r.head.user.as_deref(), Some("bob"));
            assert_eq!(r.head.message_class, Some(Class::Spam));
            assert!(r.head.set.local && !r.head.remove.local);
            assert_eq!(r.body, body, "chunk {chunk}");
        }
    }

    #[test]
    fn requests_and_their_errors() {
        let ok: &[(&str, Method, Option<u64>, &[u8])] = &[
            ("PING SPAMC/1.5\r\n\r\n", Method::Ping, None, b""),
            ("PING SPAMC/1.2\r\n", Method::Ping, None, b""),
            ("SKIP SPAMC/1.5\r\n\r\n", Method::Skip, None, b""),
            (
                "CHECK SPAMC/1.5\r\ncontent-length: 2\r\n\r\nab",
                Method::Check,
                Some(2),
                b"ab",
            ),
            (
                "PROCESS SPAMC/1.2\nContent-length: 4\n\nabc\ndef",
                Method::Process,
                Some(4),
                b"abc\n",
            ),
            (
                "SYMBOLS SPAMC/1.5\r\n\r\nuntil eof",
                Method::Symbols,
                None,
                b"until eof",
            ),
            (
                "REPORT_IFSPAM SPAMC/1.5\r\nX-Whatever: 1\r\nContent-length: 0\r\n\r\n",
                Method::ReportIfSpam,
                Some(0),
                b"",
            ),
        ];
        for (wire, method, len, body) in ok {
            let r = decode_in_chunks(wire.as_bytes(), 7, 1024)
                .unwrap_or_else(|e| panic!("{wire:?}: {e}"));
            assert_eq!(
                (r.head.method, r.head.content_length, r.body.as_slice()),
                (*method, *len, *body),
                "{wire:?}"
            );
        }
        let four_gb = "CHECK SPAMC/1.5\r\nContent-length: 4294967296\r\n\r\n".to_string();
        let huge = format!(
            "CHECK SPAMC/1.5\r\nContent-length: {}\r\n\r\n",
            "9".repeat(40)
        );
        let many = format!("CHECK SPAMC/1.5\r\n{}\r\n", "X: y\r\n".repeat(100));
        let long = format!("CHECK SPAMC/1.5\r\nX: {}\r\n\r\n", "y".repeat(MAX_HEAD));
        let bad: &[(&str, ProtocolError)] = &[
            (
                "\x00\x01\x02garbage-garbage-garbage\r\n\r\n",
                ProtocolError::BadRequestLine,
            ),
            ("garbagegarbagegarbage", ProtocolError::BadRequestLine),
            ("GET / HTTP/1.0\r\n\r\n", ProtocolError::BadRequestLine),
            (
                "FROB SPAMC/1.5\r\n\r\n",
                ProtocolError::UnknownMethod("FROB".into()),
            ),
            (
                "CHECK SPAMC/1.5\r\nContent-length: -5\r\n\r\n",
                ProtocolError::BadLength,
            ),
            (
                "CHECK SPAMC/1.5\r\nContent-length: 12abc\r\n\r\n",
                ProtocolError::BadLength,
            ),
            (
                "CHECK SPAMC/1.5\r\nno colon\r\n\r\n",
                ProtocolError::BadHeader,
            ),
            (
                "CHECK SPAMC/1.5\r\nCompress: gzip\r\n\r\n",
                ProtocolError::Compressed,
            ),
            (
                "CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: 5\r\n\r\nxxxxx",
                ProtocolError::BadCompressed,
            ),
            (
                "TELL SPAMC/1.5\r\nMessage-class: eggs\r\n\r\n",
                ProtocolError::BadClass,
            ),
            (
                "TELL SPAMC/1.5\r\nSet: local\r\nRemove: local\r\n\r\n",
                ProtocolError::SetAndRemove,
            ),
            // A TELL is learned from: one without its length might be a message cut short.
            (
                "TELL SPAMC/1.5\r\nMessage-class: spam\r\nSet: local\r\n\r\nSubject: hi\r\n",
                ProtocolError::TellWithoutLength,
            ),
            (&four_gb, ProtocolError::TooLarge(1 << 32, 1024)),
            (&huge, ProtocolError::TooLarge(u64::MAX, 1024)),
            (&many, ProtocolError::TooManyHeaders),
            (&long, ProtocolError::HeadTooLong),
            (
                "CHECK SPAMC/1.5\r\nContent-length: 10\r\n\r\nshort",
                ProtocolError::LengthMismatch {
                    expected: 10,
                    got: 5,
                },
            ),
            (
                "CHECK SPAMC/1.5\r\nContent-len",
                ProtocolError::BadRequestLine,
            ),
            // A miscounted length ends inside a line: the mail is not cut there.
            (
                "PROCESS SPAMC/1.5\r\nContent-length: 19\r\n\r\nSubject: hi\r\n\r\nbody line one\r\n",
                ProtocolError::LengthMismatch {
                    expected: 19,
                    got: 0,
                },
            ),
            (
                "CHECK SPAMC/429496730.5\r\n\r\n",
                ProtocolError::BadRequestLine,
            ),
        ];
        for (wire, want) in bad {
            for chunk in [1, 5, wire.len()] {
                let got = decode_in_chunks(wire.as_bytes(), chunk, 1024);
                let got = match got {
                    Err(e) => e,
                    Ok(r) => panic!("{wire:?} in chunks of {chunk}: decoded {r:?}"),
                };
                // An unterminated head ends as "no request line" at EOF; how far past a
                // miscounted length the decoder read depends on how the bytes came.
                if let ProtocolError::LengthMismatch { expected, .. } = want
                    && *expected == 19
                {
                    assert!(
                        matches!(got, ProtocolError::LengthMismatch { expected: 19, got } if got > 19),
                        "{wire:?} in chunks of {chunk}: {got}"
                    );
                } else if matches!(want, ProtocolError::BadRequestLine) {
                    assert!(
                        matches!(got, ProtocolError::BadRequestLine),
                        "{wire:?}: {got}"
                    );
                } else {
                    assert_eq!(&got, want, "{wire:?} in chunks of {chunk}");
                }
            }
        }
        let unbounded = format!("CHECK SPAMC/1.5\r\n\r\n{}", "x".repeat(2000));
        let e = decode_in_chunks(unbounded.as_bytes(), 100, 1024).unwrap_err();
        assert!(
            matches!(e, ProtocolError::TooLarge(n, 1024) if n > 1024),
            "{e:?}"
        );
    }

    #[test]
    fn replies_as_spamd_writes_them() {
        let spam = Some(SpamLine {
            is_spam: true,
            yes_no: false,
            score: 9.44,
            threshold: 5.0,
        });
        let check = Reply::Result {
            version: 15,
            spam: spam.clone(),
            headers: vec![],
            body: None,
        };
        assert_eq!(
            check.encode(),
            b"SPAMD/1.1 0 EX_OK\r\nSpam: True ; 9.4 / 5.0\r\n\r\n"
        );
        let symbols = Reply::Result {
            version: 15,
            spam,
            headers: vec![],
            body: Some(b"A,B".to_vec()),
        };
        assert_eq!(
            symbols.encode(),
            b"SPAMD/1.1 0 EX_OK\r\nContent-length: 3\r\nSpam: True ; 9.4 / 5.0\r\n\r\nA,B"
        );
        assert_eq!(Reply::Pong.encode(), b"SPAMD/1.5 0 PONG\r\n");
        assert_eq!(
            Reply::error(
                Code::Protocol,
                format!("Bad header line: ({})", ProtocolError::BadLength)
            )
            .encode(),
            b"SPAMD/1.0 76 Bad header line: (Content-Length contains non-numeric bytes)\r\n"
        );
    }

    /// Random bytes and mutated requests, in random chunks: the decoder never panics,
    /// never holds more than the head limit plus the message limit, and always ends.
    #[test]
    fn survives_random_input() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1d);
        let valid = b"PROCESS SPAMC/1.5\r\nContent-length: 12\r\nUser: x\r\n\r\nSubject: a\r\n";
        for round in 0..3000 {
            let mut bytes: Vec<u8> = if round % 2 == 0 {
                (0..next() % 600).map(|_| next() as u8).collect()
            } else {
                let mut v = valid.to_vec();
                for _ in 0..1 + next() % 4 {
                    let at = (next() as usize) % v.len();
                    v[at] = next() as u8;
                }
                v
            };
            if round % 7 == 0 {
                bytes.extend_from_slice(b"\r\n\r\n");
            }
            let mut d = Decoder::new(256);
            let mut at = 0;
            let mut done = false;
            while at < bytes.len() && !done {
                let n = 1 + (next() as usize) % 64;
                let piece = &bytes[at..(at + n).min(bytes.len())];
                at += piece.len();
                match d.feed(piece) {
                    Ok(Step::NeedMore) => assert!(d.buf.len() <= MAX_HEAD + 256 + 64, "{bytes:?}"),
                    Ok(Step::Request(r)) => {
                        assert!(r.body.len() <= 256, "{bytes:?}");
                        done = true;
                    }
                    Err(_) => done = true,
                }
            }
            if !done {
                let _ = d.finish();
            }
        }
    }
}
