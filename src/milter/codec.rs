//! The milter wire format (Sendmail's libmilter protocol, version 6, as Postfix 3.x and
//! Sendmail 8.14+ speak it): frames to [`Command`]s and [`Response`]s to bytes. No I/O:
//! [`decode`] returns `Ok(None)` when the buffer holds less than one frame, which is the
//! normal state of a stream between reads, and refuses frames above a size limit before
//! any of them is buffered.
//!
//! A frame is a 32-bit big-endian length, then that many bytes: one command byte and
//! its data. The SMFIC_/SMFIR_/SMFIF_/SMFIP_ names of the protocol stay in this file.

/// The protocol version spoken: 6 is the last one, and the one whose negotiation carries
/// the "no reply" and "skip" steps.
pub const VERSION: u32 = 6;

/// Postfix sends body chunks of at most 64 KiB; Sendmail up to 1 MiB when asked
/// (SMFIP_MDS_1M, which spamnb never asks for). Headers are bounded by the MTA's own
/// header size limit, 100 KiB in Postfix. A frame beyond this is not from a sane MTA.
pub const DEFAULT_MAX_FRAME: usize = (1 << 20) + 1024;

// Commands, MTA to filter.
const SMFIC_ABORT: u8 = b'A';
const SMFIC_BODY: u8 = b'B';
const SMFIC_CONNECT: u8 = b'C';
const SMFIC_MACRO: u8 = b'D';
const SMFIC_BODYEOB: u8 = b'E';
const SMFIC_HELO: u8 = b'H';
const SMFIC_QUIT_NC: u8 = b'K';
const SMFIC_HEADER: u8 = b'L';
const SMFIC_MAIL: u8 = b'M';
const SMFIC_EOH: u8 = b'N';
const SMFIC_OPTNEG: u8 = b'O';
const SMFIC_QUIT: u8 = b'Q';
const SMFIC_RCPT: u8 = b'R';
const SMFIC_DATA: u8 = b'T';
const SMFIC_UNKNOWN: u8 = b'U';

// Responses, filter to MTA.
const SMFIR_ACCEPT: u8 = b'a';
const SMFIR_CONTINUE: u8 = b'c';
const SMFIR_ADDHEADER: u8 = b'h';
const SMFIR_CHGHEADER: u8 = b'm';
const SMFIR_QUARANTINE: u8 = b'q';
const SMFIR_SKIP: u8 = b's';
const SMFIR_TEMPFAIL: u8 = b't';
const SMFIR_REPLYCODE: u8 = b'y';

/// Actions a filter may take at end of message (SMFIF_*), offered by the MTA and
/// requested by the filter in option negotiation.
pub mod action {
    pub const ADD_HEADERS: u32 = 0x01;
    pub const CHANGE_HEADERS: u32 = 0x10;
    pub const QUARANTINE: u32 = 0x20;
}

/// Protocol steps (SMFIP_*): "don't send me X" (NO_*) and "I won't reply to X" (NR_*).
pub mod step {
    pub const NO_CONNECT: u32 = 0x01;
    pub const NO_HELO: u32 = 0x02;
    pub const NO_MAIL: u32 = 0x04;
    pub const NO_RCPT: u32 = 0x08;
    pub const NO_BODY: u32 = 0x10;
    pub const NO_HEADERS: u32 = 0x20;
    pub const NO_EOH: u32 = 0x40;
    pub const NR_HEADER: u32 = 0x80;
    pub const NO_UNKNOWN: u32 = 0x100;
    pub const NO_DATA: u32 = 0x200;
    pub const SKIP: u32 = 0x400;
    pub const RCPT_REJ: u32 = 0x800;
    pub const NR_CONNECT: u32 = 0x1000;
    pub const NR_HELO: u32 = 0x2000;
    pub const NR_MAIL: u32 = 0x4000;
    pub const NR_RCPT: u32 = 0x8000;
    pub const NR_DATA: u32 = 0x1_0000;
    pub const NR_UNKNOWN: u32 = 0x2_0000;
    pub const NR_EOH: u32 = 0x4_0000;
    pub const NR_BODY: u32 = 0x8_0000;
    pub const HEADER_LEADING_SPACE: u32 = 0x10_0000;
}

/// What the MTA says, one frame each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Option negotiation: the MTA's version, the actions and protocol steps it offers.
    Negotiate {
        version: u32,
        actions: u32,
        steps: u32,
    },
    /// Macros (`{name}` → value) defined for the stage whose command byte is `stage`.
    Macros {
        stage: u8,
        pairs: Vec<(String, String)>,
    },
    /// A new SMTP client: its host name, and its address when the family is known.
    Connect {
        hostname: String,
        address: Option<String>,
    },
    Helo(String),
    /// MAIL FROM: the sender and ESMTP arguments.
    Mail(Vec<String>),
    /// RCPT TO: the recipient and ESMTP arguments.
    Rcpt(Vec<String>),
    Data,
    /// One header field: its name and value as the MTA passes them (no line ending).
    Header {
        name: Vec<u8>,
        value: Vec<u8>,
    },
    EndOfHeaders,
    Body(Vec<u8>),
    /// End of message, sometimes carrying a last body chunk.
    EndOfMessage(Vec<u8>),
    /// The current message is abandoned; the connection goes on.
    Abort,
    Quit,
    /// Quit this SMTP connection's session; another one follows on the same socket.
    QuitNewConnection,
    /// An SMTP command the MTA did not know.
    Unknown(Vec<u8>),
}

impl Command {
    /// The command's byte on the wire, for error messages.
    pub fn code(&self) -> u8 {
        match self {
            Command::Negotiate { .. } => SMFIC_OPTNEG,
            Command::Macros { .. } => SMFIC_MACRO,
            Command::Connect { .. } => SMFIC_CONNECT,
            Command::Helo(_) => SMFIC_HELO,
            Command::Mail(_) => SMFIC_MAIL,
            Command::Rcpt(_) => SMFIC_RCPT,
            Command::Data => SMFIC_DATA,
            Command::Header { .. } => SMFIC_HEADER,
            Command::EndOfHeaders => SMFIC_EOH,
            Command::Body(_) => SMFIC_BODY,
            Command::EndOfMessage(_) => SMFIC_BODYEOB,
            Command::Abort => SMFIC_ABORT,
            Command::Quit => SMFIC_QUIT,
            Command::QuitNewConnection => SMFIC_QUIT_NC,
            Command::Unknown(_) => SMFIC_UNKNOWN,
        }
    }
}

/// What the filter answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Negotiate {
        version: u32,
        actions: u32,
        steps: u32,
    },
    Continue,
    Accept,
    TempFail,
    /// Stop sending body chunks (only after SMFIP_SKIP was negotiated).
    Skip,
    /// A final reply with an SMTP code, e.g. `550 5.7.1 …`: rejects the message.
    ReplyCode(String),
    AddHeader {
        name: String,
        value: String,
    },
    /// Changes the `index`-th (from 1) header called `name`; an empty value deletes it.
    ChangeHeader {
        index: u32,
        name: String,
        value: String,
    },
    /// Puts the message on hold (Postfix's hold queue, Sendmail's quarantine).
    Quarantine(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("milter frame of {len} bytes is above the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("empty milter frame (no command byte)")]
    EmptyFrame,
    #[error("milter command {:?} (0x{code:02x}) is not one spamnb knows", *code as char)]
    UnknownCommand { code: u8 },
    #[error("malformed milter command {:?}: {why}", *code as char)]
    Malformed { code: u8, why: &'static str },
    #[error("milter command {:?} came before option negotiation", *code as char)]
    BeforeNegotiation { code: u8 },
}

/// One command from the front of `buf`: `Ok(Some((command, bytes used)))`, or `Ok(None)`
/// when `buf` does not yet hold a whole frame. A frame above `max_frame` is refused as
/// soon as its length is read, so a hostile length prefix never makes anyone buffer it.
pub fn decode(buf: &[u8], max_frame: usize) -> Result<Option<(Command, usize)>, ProtocolError> {
    Ok(match frame(buf, max_frame)? {
        Some((code, data, used)) => Some((parse(code, data)?, used)),
        None => None,
    })
}

/// A frame's code byte, its data and the bytes it takes in the buffer.
type Frame<'b> = (u8, &'b [u8], usize);

/// The frame at the front of `buf`, either way, or `None` when more bytes are needed.
fn frame(buf: &[u8], max_frame: usize) -> Result<Option<Frame<'_>>, ProtocolError> {
    let Some(prefix) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*prefix) as usize;
    if len > max_frame {
        return Err(ProtocolError::FrameTooLarge {
            len,
            max: max_frame,
        });
    }
    if len == 0 {
        return Err(ProtocolError::EmptyFrame);
    }
    Ok(buf
        .get(4..4 + len)
        .map(|frame| (frame[0], &frame[1..], 4 + len)))
}

/// Version, actions and steps: the twelve bytes of a negotiation, either way.
fn negotiation(data: &[u8]) -> Option<(u32, u32, u32)> {
    let word = |i: usize| {
        data.get(i * 4..i * 4 + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    Some((word(0)?, word(1)?, word(2)?))
}

fn parse(code: u8, data: &[u8]) -> Result<Command, ProtocolError> {
    let malformed = |why| ProtocolError::Malformed { code, why };
    Ok(match code {
        SMFIC_OPTNEG => {
            let (version, actions, steps) =
                negotiation(data).ok_or(malformed("negotiation needs 12 bytes"))?;
            Command::Negotiate {
                version,
                actions,
                steps,
            }
        }
        SMFIC_MACRO => {
            let (&stage, rest) = data.split_first().ok_or(malformed("no stage byte"))?;
            let strings = c_strings(rest);
            let pairs = strings
                .chunks(2)
                .map(|p| (text(p[0]), p.get(1).map_or_else(String::new, |v| text(v))))
                .collect();
            Command::Macros { stage, pairs }
        }
        SMFIC_CONNECT => {
            let nul = data
                .iter()
                .position(|&b| b == 0)
                .ok_or(malformed("host name is not terminated"))?;
            let hostname = text(&data[..nul]);
            let rest = &data[nul + 1..];
            // Family 'U' (unknown) carries nothing more; '4', '6' and 'L' a port and an address.
            let address = match rest.split_first() {
                Some((b'4' | b'6' | b'L', tail)) if tail.len() >= 2 => {
                    c_strings(&tail[2..]).first().map(|a| text(a))
                }
                _ => None,
            };
            Command::Connect { hostname, address }
        }
        SMFIC_HELO => Command::Helo(c_strings(data).first().map(|h| text(h)).unwrap_or_default()),
        SMFIC_MAIL => Command::Mail(c_strings(data).iter().map(|s| text(s)).collect()),
        SMFIC_RCPT => Command::Rcpt(c_strings(data).iter().map(|s| text(s)).collect()),
        SMFIC_DATA => Command::Data,
        SMFIC_HEADER => {
            let nul = data
                .iter()
                .position(|&b| b == 0)
                .ok_or(malformed("header name is not terminated"))?;
            let value = &data[nul + 1..];
            let value = value.strip_suffix(&[0]).unwrap_or(value);
            Command::Header {
                name: data[..nul].to_vec(),
                value: value.to_vec(),
            }
        }
        SMFIC_EOH => Command::EndOfHeaders,
        SMFIC_BODY => Command::Body(data.to_vec()),
        SMFIC_BODYEOB => Command::EndOfMessage(data.to_vec()),
        SMFIC_ABORT => Command::Abort,
        SMFIC_QUIT => Command::Quit,
        SMFIC_QUIT_NC => Command::QuitNewConnection,
        SMFIC_UNKNOWN => Command::Unknown(data.strip_suffix(&[0]).unwrap_or(data).to_vec()),
        _ => return Err(ProtocolError::UnknownCommand { code }),
    })
}

/// NUL-terminated strings one after another; a last one without its NUL still counts.
fn c_strings(data: &[u8]) -> Vec<&[u8]> {
    let data = data.strip_suffix(&[0]).unwrap_or(data);
    if data.is_empty() {
        return Vec::new();
    }
    data.split(|&b| b == 0).collect()
}

/// Mail is not always UTF-8; logs and macros only need to be readable.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Appends `response` as one frame to `out`.
pub fn encode(response: &Response, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    match response {
        Response::Negotiate {
            version,
            actions,
            steps,
        } => {
            out.push(SMFIC_OPTNEG);
            for word in [version, actions, steps] {
                out.extend_from_slice(&word.to_be_bytes());
            }
        }
        Response::Continue => out.push(SMFIR_CONTINUE),
        Response::Accept => out.push(SMFIR_ACCEPT),
        Response::TempFail => out.push(SMFIR_TEMPFAIL),
        Response::Skip => out.push(SMFIR_SKIP),
        Response::ReplyCode(reply) => {
            out.push(SMFIR_REPLYCODE);
            push_c_string(out, reply);
        }
        Response::AddHeader { name, value } => {
            out.push(SMFIR_ADDHEADER);
            push_c_string(out, name);
            push_c_string(out, value);
        }
        Response::ChangeHeader { index, name, value } => {
            out.push(SMFIR_CHGHEADER);
            out.extend_from_slice(&index.to_be_bytes());
            push_c_string(out, name);
            push_c_string(out, value);
        }
        Response::Quarantine(reason) => {
            out.push(SMFIR_QUARANTINE);
            push_c_string(out, reason);
        }
    }
    let len = u32::try_from(out.len() - start - 4).expect("a response frame is far below 4 GiB");
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// A NUL inside would cut the string short at the MTA: it cannot be sent, so it goes.
fn push_c_string(out: &mut Vec<u8>, s: &str) {
    out.extend(s.bytes().filter(|&b| b != 0));
    out.push(0);
}

/// The bytes of `command` as an MTA would send them: for tests and the load generator.
pub fn encode_command(command: &Command, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let strings = |out: &mut Vec<u8>, items: &[&[u8]]| {
        for item in items {
            out.extend_from_slice(item);
            out.push(0);
        }
    };
    match command {
        Command::Negotiate {
            version,
            actions,
            steps,
        } => {
            out.push(SMFIC_OPTNEG);
            for word in [version, actions, steps] {
                out.extend_from_slice(&word.to_be_bytes());
            }
        }
        Command::Macros { stage, pairs } => {
            out.push(SMFIC_MACRO);
            out.push(*stage);
            for (k, v) in pairs {
                strings(out, &[k.as_bytes(), v.as_bytes()]);
            }
        }
        Command::Connect { hostname, address } => {
            out.push(SMFIC_CONNECT);
            strings(out, &[hostname.as_bytes()]);
            match address {
                Some(a) => {
                    out.push(b'4');
                    out.extend_from_slice(&25u16.to_be_bytes());
                    strings(out, &[a.as_bytes()]);
                }
                None => out.push(b'U'),
            }
        }
        Command::Helo(h) => {
            out.push(SMFIC_HELO);
            strings(out, &[h.as_bytes()]);
        }
        Command::Mail(args) | Command::Rcpt(args) => {
            out.push(if matches!(command, Command::Mail(_)) {
                SMFIC_MAIL
            } else {
                SMFIC_RCPT
            });
            for a in args {
                strings(out, &[a.as_bytes()]);
            }
        }
        Command::Data => out.push(SMFIC_DATA),
        Command::Header { name, value } => {
            out.push(SMFIC_HEADER);
            strings(out, &[name, value]);
        }
        Command::EndOfHeaders => out.push(SMFIC_EOH),
        Command::Body(chunk) => {
            out.push(SMFIC_BODY);
            out.extend_from_slice(chunk);
        }
        Command::EndOfMessage(chunk) => {
            out.push(SMFIC_BODYEOB);
            out.extend_from_slice(chunk);
        }
        Command::Abort => out.push(SMFIC_ABORT),
        Command::Quit => out.push(SMFIC_QUIT),
        Command::QuitNewConnection => out.push(SMFIC_QUIT_NC),
        Command::Unknown(c) => {
            out.push(SMFIC_UNKNOWN);
            strings(out, &[c]);
        }
    }
    let len =
        u32::try_from(out.len() - start - 4).expect("a test command frame is far below 4 GiB");
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// One response from the front of `buf`, as an MTA reads it: for tests and the load
/// generator. `Ok(None)` when more bytes are needed.
pub fn decode_response(
    buf: &[u8],
    max_frame: usize,
) -> Result<Option<(Response, usize)>, ProtocolError> {
    let Some((code, data, used)) = frame(buf, max_frame)? else {
        return Ok(None);
    };
    let malformed = |why| ProtocolError::Malformed { code, why };
    let strings = c_strings(data);
    let string = |i: usize| strings.get(i).map(|s| text(s)).unwrap_or_default();
    let response = match code {
        SMFIC_OPTNEG => {
            let (version, actions, steps) =
                negotiation(data).ok_or(malformed("negotiation needs 12 bytes"))?;
            Response::Negotiate {
                version,
                actions,
                steps,
            }
        }
        SMFIR_CONTINUE => Response::Continue,
        SMFIR_ACCEPT => Response::Accept,
        SMFIR_TEMPFAIL => Response::TempFail,
        SMFIR_SKIP => Response::Skip,
        SMFIR_REPLYCODE => Response::ReplyCode(string(0)),
        SMFIR_ADDHEADER => Response::AddHeader {
            name: string(0),
            value: string(1),
        },
        SMFIR_CHGHEADER => {
            let (index, rest) = data
                .split_first_chunk::<4>()
                .ok_or(malformed("no header index"))?;
            let strings = c_strings(rest);
            Response::ChangeHeader {
                index: u32::from_be_bytes(*index),
                name: strings.first().map(|s| text(s)).unwrap_or_default(),
                value: strings.get(1).map(|s| text(s)).unwrap_or_default(),
            }
        }
        SMFIR_QUARANTINE => Response::Quarantine(string(0)),
        _ => return Err(ProtocolError::UnknownCommand { code }),
    };
    Ok(Some((response, used)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands() -> Vec<Command> {
        vec![
            Command::Negotiate {
                version: 6,
                actions: 0x1ff,
                steps: 0x1f_ffff,
            },
            Command::Macros {
                stage: b'C',
                pairs: vec![
                    ("j".into(), "mx.example.net".into()),
                    ("{daemon_name}".into(), "smtpd".into()),
                ],
            },
            Command::Connect {
                hostname: "client.example.org".into(),
                address: Some("192.0.2.7".into()),
            },
            Command::Connect {
                hostname: "unknown".into(),
                address: None,
            },
            Command::Helo("client.example.org".into()),
            Command::Mail(vec!["<a@example.org>".into(), "SIZE=100".into()]),
            Command::Rcpt(vec!["<b@example.net>".into()]),
            Command::Data,
            Command::Header {
                name: b"Subject".to_vec(),
                value: b" hello\r\n\tworld".to_vec(),
            },
            Command::Header {
                name: b"X-Empty".to_vec(),
                value: Vec::new(),
            },
            Command::EndOfHeaders,
            Command::Body(b"line one\r\nline two\r\n".to_vec()),
            Command::Body(vec![0, 1, 2, 255]),
            Command::EndOfMessage(Vec::new()),
            Command::Abort,
            Command::Unknown(b"XFOO bar".to_vec()),
            Command::QuitNewConnection,
            Command::Quit,
        ]
    }

    /// Decodes everything `stream` holds when it arrives `chunk` bytes at a time.
    fn decode_in_chunks(stream: &[u8], chunk: usize) -> Vec<Command> {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for piece in stream.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some((command, used)) =
                decode(&buf, DEFAULT_MAX_FRAME).unwrap_or_else(|e| panic!("chunk {chunk}: {e}"))
            {
                out.push(command);
                buf.drain(..used);
            }
        }
        assert!(
            buf.is_empty(),
            "chunk {chunk}: {} bytes left over",
            buf.len()
        );
        out
    }

    #[test]
    fn every_chunk_size_decodes_the_same() {
        let want = commands();
        let mut stream = Vec::new();
        for c in &want {
            encode_command(c, &mut stream);
        }
        for chunk in 1..=stream.len() {
            assert_eq!(decode_in_chunks(&stream, chunk), want, "chunk size {chunk}");
        }
    }

    #[test]
    fn short_input_needs_more() {
        let mut frame = Vec::new();
        encode_command(
            &Command::Header {
                name: b"A".to_vec(),
                value: b"b".to_vec(),
            },
            &mut frame,
        );
        for end in 0..frame.len() {
            assert_eq!(
                decode(&frame[..end], DEFAULT_MAX_FRAME),
                Ok(None),
                "{end} of {} bytes",
                frame.len()
            );
        }
        assert!(matches!(decode(&frame, DEFAULT_MAX_FRAME), Ok(Some((_, n))) if n == frame.len()));
    }

    #[test]
    fn bad_frames_are_errors() {
        for (input, want) in [
            (
                &[0xff, 0xff, 0xff, 0xff][..],
                ProtocolError::FrameTooLarge {
                    len: u32::MAX as usize,
                    max: DEFAULT_MAX_FRAME,
                },
            ),
            (&[0, 0, 0, 0][..], ProtocolError::EmptyFrame),
            (
                &[0, 0, 0, 1, b'Z'][..],
                ProtocolError::UnknownCommand { code: b'Z' },
            ),
            (
                &[0, 0, 0, 3, b'O', 0, 6][..],
                ProtocolError::Malformed {
                    code: b'O',
                    why: "negotiation needs 12 bytes",
                },
            ),
            (
                &[0, 0, 0, 4, b'L', b'a', b'b', b'c'][..],
                ProtocolError::Malformed {
                    code: b'L',
                    why: "header name is not terminated",
                },
            ),
        ] {
            assert_eq!(decode(input, DEFAULT_MAX_FRAME), Err(want), "{input:?}");
        }
        // Refused from the length alone: nothing after the prefix is needed.
        assert!(decode(&[0, 0x10, 0, 2], 1 << 20).is_err());
        // Garbage never panics.
        let mut seed = 0x2545_f491_u32;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..32)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    (seed % 7) as u8 + if seed.is_multiple_of(3) { b'A' } else { 0 }
                })
                .collect();
            let _ = decode(&bytes, DEFAULT_MAX_FRAME);
            let _ = decode_response(&bytes, DEFAULT_MAX_FRAME);
        }
    }

    #[test]
    fn responses_round_trip() {
        let responses = vec![
            Response::Negotiate {
                version: 6,
                actions: 0x31,
                steps: 0x1f_0000,
            },
            Response::Continue,
            Response::Accept,
            Response::TempFail,
            Response::Skip,
            Response::ReplyCode("550 5.7.1 Message rejected as spam".into()),
            Response::AddHeader {
                name: "X-Spam-Flag".into(),
                value: "YES".into(),
            },
            Response::ChangeHeader {
                index: 2,
                name: "X-Spam-Status".into(),
                value: String::new(),
            },
            Response::Quarantine("spam".into()),
        ];
        let mut stream = Vec::new();
        for r in &responses {
            encode(r, &mut stream);
        }
        let mut at = 0;
        let mut got = Vec::new();
        while let Some((r, used)) =
            decode_response(&stream[at..], DEFAULT_MAX_FRAME).expect("valid")
        {
            got.push(r);
            at += used;
        }
        assert_eq!(got, responses);
        // The exact bytes of one, as libmilter would write them.
        let mut one = Vec::new();
        encode(
            &Response::ChangeHeader {
                index: 1,
                name: "X-Spam-Flag".into(),
                value: String::new(),
            },
            &mut one,
        );
        assert_eq!(one, b"\0\0\0\x12m\0\0\0\x01X-Spam-Flag\0\0");
    }
}
