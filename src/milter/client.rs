//! The MTA's side of the milter protocol, blocking and minimal: enough to hand a message
//! to a milter the way Postfix does and read the answer. For the integration tests and
//! the load generator (`examples/milter_load.rs`), not for production mail.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::codec::{self, Command, DEFAULT_MAX_FRAME, Response};

/// What Postfix 3.x offers in negotiation: every action, every protocol step.
pub const POSTFIX_ACTIONS: u32 = 0x1ff;
pub const POSTFIX_STEPS: u32 = 0x1f_ffff;

pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    out: Vec<u8>,
    pub actions: u32,
    pub steps: u32,
    /// From sending end of message to reading the final answer, for the last message.
    pub eom_latency: std::time::Duration,
}

impl Client {
    /// Connects to `addr` (`HOST:PORT`) and negotiates as Postfix 3.x does.
    pub fn connect(addr: &str, timeout: Duration) -> std::io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let mut client = Client {
            stream,
            buf: Vec::new(),
            out: Vec::new(),
            actions: 0,
            steps: 0,
            eom_latency: Duration::ZERO,
        };
        client.send(&Command::Negotiate {
            version: codec::VERSION,
            actions: POSTFIX_ACTIONS,
            steps: POSTFIX_STEPS,
        })?;
        match client.read()? {
            Response::Negotiate { actions, steps, .. } => {
                client.actions = actions;
                client.steps = steps;
                Ok(client)
            }
            other => Err(std::io::Error::other(format!(
                "negotiation answered with {other:?}"
            ))),
        }
    }

    /// Sends `command` now (with anything queued before it).
    pub fn send(&mut self, command: &Command) -> std::io::Result<()> {
        self.queue(command);
        self.flush()
    }

    /// Queues `command` until a reply is awaited, as an MTA's buffered stream does: the
    /// commands that get no reply (SMFIP_NR_*) go out together.
    fn queue(&mut self, command: &Command) {
        codec::encode_command(command, &mut self.out);
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.out.is_empty() {
            self.stream.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// The next response; an error when the milter closes the connection.
    pub fn read(&mut self) -> std::io::Result<Response> {
        self.flush()?;
        loop {
            match codec::decode_response(&self.buf, DEFAULT_MAX_FRAME) {
                Ok(Some((r, used))) => {
                    self.buf.drain(..used);
                    return Ok(r);
                }
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends `command` and reads a reply unless the negotiated `no_reply` step bit says
    /// the milter does not send one.
    fn step(&mut self, command: &Command, no_reply: u32) -> std::io::Result<Option<Response>> {
        self.queue(command);
        if no_reply != 0 && self.steps & no_reply != 0 {
            return Ok(None);
        }
        self.read().map(Some)
    }

    /// Hands one whole message (header block and body, as stored) to the milter as Postfix
    /// would, and returns the responses to end of message, the final one last.
    pub fn message(&mut self, raw: &[u8]) -> std::io::Result<Vec<Response>> {
        use super::codec::step;
        if self.steps & step::NO_CONNECT == 0 {
            self.step(
                &Command::Connect {
                    hostname: "client.example".into(),
                    address: Some("127.0.0.1".into()),
                },
                step::NR_CONNECT,
            )?;
        }
        self.queue(&Command::Macros {
            stage: b'M',
            pairs: vec![("i".into(), "4ABC123".into())],
        });
        self.step(
            &Command::Mail(vec!["<sender@example.org>".into()]),
            step::NR_MAIL,
        )?;
        let (header, body) = split(raw);
        for (name, value) in header_fields(header) {
            let value = if self.steps & step::HEADER_LEADING_SPACE != 0 {
                value
            } else {
                value.strip_prefix(b" ").unwrap_or(value)
            };
            self.step(
                &Command::Header {
                    name: name.to_vec(),
                    value: value.to_vec(),
                },
                step::NR_HEADER,
            )?;
        }
        if self.steps & step::NO_EOH == 0 {
            self.step(&Command::EndOfHeaders, step::NR_EOH)?;
        }
        let body = crlf(body);
        for chunk in body.chunks(65535) {
            if let Some(Response::Skip) =
                self.step(&Command::Body(chunk.to_vec()), step::NR_BODY)?
            {
                break;
            }
        }
        self.end_of_message()
    }

    /// Sends end of message and returns its responses: the header changes first, the
    /// final answer (continue, accept, tempfail or a reply code) last.
    pub fn end_of_message(&mut self) -> std::io::Result<Vec<Response>> {
        let eom_sent = std::time::Instant::now();
        self.send(&Command::EndOfMessage(Vec::new()))?;
        let mut out = Vec::new();
        loop {
            let r = self.read()?;
            let last = matches!(
                r,
                Response::Continue | Response::Accept | Response::TempFail | Response::ReplyCode(_)
            );
            out.push(r);
            if last {
                self.eom_latency = eom_sent.elapsed();
                return Ok(out);
            }
        }
    }

    pub fn quit(mut self) -> std::io::Result<()> {
        self.send(&Command::Quit)
    }
}

/// The header block and the body of a stored message (an mbox `From ` line dropped).
fn split(raw: &[u8]) -> (&[u8], &[u8]) {
    let raw = crate::message::without_envelope_line(raw);
    raw.split_at(crate::message::body_offset(raw).unwrap_or(raw.len()))
}

/// Header fields as (name, value after the colon), folded lines kept with `\n`.
fn header_fields(header: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut fields: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    for line in header.split_inclusive(|&b| b == b'\n') {
        let continuation = matches!(line.first(), Some(b' ' | b'\t'));
        if continuation && !fields.is_empty() {
            if let Some(last) = fields.last_mut() {
                last.1 = at + line.len();
            }
        } else {
            fields.push((at, at + line.len()));
        }
        at += line.len();
    }
    fields
        .into_iter()
        .filter_map(|(start, end)| {
            let field = &header[start..end];
            let field = field.strip_suffix(b"\n").unwrap_or(field);
            let field = field.strip_suffix(b"\r").unwrap_or(field);
            let colon = field.iter().position(|&b| b == b':')?;
            Some((&field[..colon], &field[colon + 1..]))
        })
        .collect()
}

/// The body with CRLF line endings, as an MTA passes it.
fn crlf(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 32);
    let mut previous = 0u8;
    for &b in body {
        if b == b'\n' && previous != b'\r' {
            out.push(b'\r');
        }
        out.push(b);
        previous = b;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_into_fields() {
        let raw = b"From x@y Mon\nSubject: a\n b\nTo: c\n\nbody\nline\n";
        let (h, b) = split(raw);
        assert_eq!(b, b"body\nline\n");
        let f = header_fields(h);
        assert_eq!(
            f,
            vec![(&b"Subject"[..], &b" a\n b"[..]), (&b"To"[..], &b" c"[..])]
        );
        assert_eq!(crlf(b"a\nb\r\n"), b"a\r\nb\r\n");
    }
}
