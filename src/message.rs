//! Raw bytes to a [`Message`]: the decoded view of a mail that tokens and rules read.
//!
//! Parsing never fails. mail-parser does the MIME work; what it cannot make sense of
//! (or a panic inside it) leaves a message scored as raw text, with the trouble recorded
//! in [`Message::anomalies`] so that it can itself count as evidence.

use std::borrow::Cow;
use std::sync::LazyLock;

use mail_parser::{HeaderValue, MessageParser, MimeHeaders, PartType};

pub mod content;
mod digest;
mod html;
mod html_color;
mod html_css;
pub mod image;
mod urls;

pub use content::{ContentType, TransferEncoding};
pub use digest::{Digest, DigestKind};
/// HTML as the text its reader sees: what [`Message::text`] holds of an HTML part.
pub use html::separates_words;
pub use html::to_text as html_to_text;
pub(crate) use html::{
    FONT_SIZE_PIXELS, attribute, attribute_values, css_declarations, font_px, legacy_font_px,
};
pub(crate) use html_color::{ColorFlags, ColorStack};

/// Where spamnb keeps the Subject of spam it tagged (`[model] subject_tag`), as it was sent;
/// empty when there was none. Learning and the ledger read the subject from it.
pub const PREV_SUBJECT: &str = "X-Spam-Prev-Subject";

/// `raw` without the [`PREV_SUBJECT`] fields of its header. On mail in transit such a
/// field is the sender's, not spamnb's: read as the subject as sent, it put words of the
/// sender's choosing in place of the Subject being delivered ("meeting notes" scored for
/// "cheap pills"). Stored mail keeps it: there it is what spamnb tagged.
pub fn without_prev_subject(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    // Copied only from the first such field on: most mail has none, and costs no copy.
    let mut copy: Option<Vec<u8>> = None;
    let mut dropping = false;
    let mut at = 0;
    while at < raw.len() {
        let end = memchr::memchr(b'\n', &raw[at..]).map_or(raw.len(), |i| at + i + 1);
        let line = &raw[at..end];
        if matches!(line, b"\n" | b"\r\n") {
            break;
        }
        if !matches!(line.first(), Some(b' ' | b'\t')) {
            dropping = starts_field(line, PREV_SUBJECT);
        }
        match (&mut copy, dropping) {
            (None, true) => copy = Some(raw[..at].to_vec()),
            (Some(copy), false) => copy.extend_from_slice(line),
            _ => {}
        }
        at = end;
    }
    match copy {
        None => std::borrow::Cow::Borrowed(raw),
        Some(mut copy) => {
            copy.extend_from_slice(&raw[at..]);
            std::borrow::Cow::Owned(copy)
        }
    }
}

/// The headers spamnb writes itself. They are removed from incoming mail (a sender could
/// forge them) and left out of a message's digest (so a tagged copy is the same message).
pub fn is_own_header(name: &str) -> bool {
    // Bytes, not a str slice: byte 7 of a name from mail need not be a char boundary.
    name.len() > 7 && name.as_bytes()[..7].eq_ignore_ascii_case(b"x-spam-")
}

/// One header field: its name as written and its value decoded (RFC 2047 words, folding).
#[derive(Debug, Clone)]
pub struct Header {
    pub name: String,
    pub value: String,
    /// Where the value is in the raw message, as sent: still folded and encoded.
    raw: std::ops::Range<usize>,
}

#[derive(Debug, Clone)]
pub struct Attachment {
    pub name: Option<String>,
    pub content_type: String,
    pub size: usize,
    /// A GIF, PNG or JPEG image, as its content type says.
    pub image: Option<image::Image>,
}

/// Something odd about a message's form, which spammers' tools produce more often than
/// mail clients do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anomaly {
    /// mail-parser found no message structure; the bytes are scored as raw text.
    Unparsed,
    /// mail-parser panicked; the bytes are scored as raw text.
    ParserPanic,
    /// More MIME boundaries than [`MAX_BOUNDARIES`], or one longer than RFC 2046 allows:
    /// the body is scored as raw text, as mail-parser takes seconds on such a message.
    ExcessiveMime,
    /// Only the first `scan_limit` bytes were looked at.
    Truncated,
    /// A part's transfer encoding or charset could not be decoded cleanly.
    EncodingProblem,
    /// The message holds HTML and no plain-text alternative.
    HtmlOnly,
    /// The bytes are not valid UTF-8 where text was expected outside a declared charset.
    BinaryGarbage,
}

impl Anomaly {
    pub fn name(self) -> &'static str {
        match self {
            Anomaly::Unparsed => "unparsed",
            Anomaly::ParserPanic => "parser_panic",
            Anomaly::ExcessiveMime => "excessive_mime",
            Anomaly::Truncated => "truncated",
            Anomaly::EncodingProblem => "encoding_problem",
            Anomaly::HtmlOnly => "html_only",
            Anomaly::BinaryGarbage => "binary_garbage",
        }
    }
}

/// A MIME part (the top-level block included) sent in base64 or quoted-printable: spammers'
/// tools encode text that mail clients send as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoded {
    Base64 { text: bool },
    QuotedPrintable,
}

/// A parsed mail, as plain data: what tokenizers and rules look at.
#[derive(Debug, Clone, Default)]
pub struct Message<'a> {
    /// The bytes that were parsed (at most the scan limit of the original).
    pub raw: &'a [u8],
    /// Top-level header fields in order.
    pub headers: Vec<Header>,
    /// Decoded text of every text part, and HTML parts rendered to text.
    pub text: String,
    /// Where in `text` the text parts are, as sent (not HTML rendered): with `html`, what
    /// rawbody rules read.
    pub plain: Vec<std::ops::Range<usize>>,
    /// The HTML parts as sent, for rules that look at markup.
    pub html: String,
    /// Where in `text` are words of HTML its reader is not shown (`display: none`, text in
    /// its background's colour…: `html::render`), in order: tokens keep them apart from
    /// the words shown. Body rules read them as text, as SpamAssassin's do.
    pub hidden: Vec<std::ops::Range<usize>>,
    /// Runs of hidden words that a style rule for some readers only shows: what those
    /// readers may see (`html::Rendered::maybe_shown`).
    pub maybe_shown: Vec<std::ops::Range<usize>>,
    /// Every URL found in the text and in the HTML's attributes.
    pub urls: Vec<String>,
    pub attachments: Vec<Attachment>,
    /// The parts sent encoded, in order.
    pub encoded: Vec<Encoded>,
    pub anomalies: Vec<Anomaly>,
    /// Where the body starts in `raw`, as the parser found it ([`body_offset`] for text it
    /// could not parse): header rules and evals ask for the raw header block a dozen times
    /// a message, and finding its end again in a CRLF message searched the whole message
    /// for a bare `\n\n` first.
    body_at: Option<usize>,
}

impl<'a> Message<'a> {
    /// Parses at most `scan_limit` bytes of `raw`. Never fails and never panics.
    pub fn parse(raw: &'a [u8], scan_limit: usize) -> Message<'a> {
        let truncated = raw.len() > scan_limit;
        let raw = &raw[..raw.len().min(scan_limit)];
        let parsed = if excessive_mime(raw) {
            Ok(Some(excessive_mime_message(raw)))
        } else {
            crate::quiet_panic::catch_quietly(|| parse_mime(raw))
        };
        let mut msg = match parsed {
            Ok(Some(msg)) => msg,
            Ok(None) => raw_text_message(raw, Anomaly::Unparsed),
            Err(_) => {
                tracing::warn!("the MIME parser failed on a message; it is read as plain text");
                raw_text_message(raw, Anomaly::ParserPanic)
            }
        };
        if truncated {
            msg.anomalies.push(Anomaly::Truncated);
        }
        msg
    }

    /// The decoded values of every header called `name` (case-insensitive), in order.
    pub fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s str> + 's {
        self.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }

    pub fn header<'s>(&'s self, name: &'s str) -> Option<&'s str> {
        self.header_values(name).next()
    }

    /// The raw header block: everything before the body, undecoded.
    pub fn raw_head(&self) -> &'a [u8] {
        &self.raw[..self.body_at.unwrap_or(self.raw.len())]
    }

    /// The raw (undecoded, still folded) values of every top-level header called `name`.
    pub fn raw_header_values(&self, name: &str) -> Vec<&'a [u8]> {
        let raw = self.raw;
        self.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| &raw[h.raw.clone()])
            .collect()
    }

    /// The raw (undecoded, still folded) value of `h`, one of [`Message::headers`].
    pub fn raw_value(&self, h: &Header) -> &'a [u8] {
        self.raw.get(h.raw.clone()).unwrap_or_default()
    }

    /// The raw body: everything after the header block, undecoded.
    pub fn raw_body(&self) -> &'a [u8] {
        self.body_at.map_or(&[][..], |at| &self.raw[at..])
    }
}

/// The header block of raw mail: everything before the body, undecoded. For the paths that
/// need a header or two without parsing the message.
pub fn raw_head(raw: &[u8]) -> &[u8] {
    &raw[..body_offset(raw).unwrap_or(raw.len())]
}

/// Whether header line `line` starts the field `name` (`Name:`, or `Name :` as old mail
/// writes it).
fn starts_field(line: &[u8], name: &str) -> bool {
    line.len() > name.len()
        && line[..name.len()].eq_ignore_ascii_case(name.as_bytes())
        && matches!(line[name.len()..].trim_ascii_start().first(), Some(b':'))
}

/// Where the first `name` field of `raw`'s header block is, its folded lines and line
/// end included.
pub fn first_field_span(raw: &[u8], name: &str) -> Option<std::ops::Range<usize>> {
    let mut start = None;
    let mut at = 0;
    while at < raw.len() {
        let end = line_end(raw, at);
        let line = &raw[at..end];
        let folded = matches!(line[0], b' ' | b'\t');
        if let Some(start) = start.filter(|_| !folded) {
            return Some(start..at);
        }
        if matches!(line, b"\n" | b"\r\n") {
            break;
        }
        if !folded && starts_field(line, name) {
            start = Some(at);
        }
        at = end;
    }
    start.map(|start| start..at)
}

/// Where the line that starts at `from` ends: past its LF, or at the end of `bytes`.
pub fn line_end(bytes: &[u8], from: usize) -> usize {
    memchr::memchr(b'\n', &bytes[from..]).map_or(bytes.len(), |n| from + n + 1)
}

/// The raw (undecoded, still folded) values of every header called `name` in the header
/// block `head`: for the paths that do not parse the message.
pub fn raw_header_values<'h>(head: &'h [u8], name: &str) -> Vec<&'h [u8]> {
    let mut out = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    let mut start = 0;
    while start < head.len() {
        let at = line_end(head, start);
        let line = &head[start..at];
        if line[0] == b' ' || line[0] == b'\t' {
            if let Some((_, end)) = &mut current {
                *end = at;
            }
        } else {
            if let Some((s, e)) = current.take() {
                out.push(trim_line_end(&head[s..e]));
            }
            // Most lines are not the one asked for: compare the name before looking for
            // the colon.
            let named = line.first().is_some_and(u8::is_ascii_whitespace)
                || (line.len() > name.len()
                    && line[..name.len()].eq_ignore_ascii_case(name.as_bytes()));
            if let Some(colon) = memchr::memchr(b':', line).filter(|_| named)
                && line[..colon]
                    .trim_ascii()
                    .eq_ignore_ascii_case(name.as_bytes())
            {
                current = Some((start + colon + 1, at));
            }
        }
        start = at;
    }
    if let Some((s, e)) = current {
        out.push(trim_line_end(&head[s..e]));
    }
    out
}

fn trim_line_end(v: &[u8]) -> &[u8] {
    let v = v.strip_prefix(b" ").unwrap_or(v);
    let v = v.strip_suffix(b"\n").unwrap_or(v);
    v.strip_suffix(b"\r").unwrap_or(v)
}

/// `raw` without an mbox `From ` envelope line: it belongs to the mailbox, not to the
/// message.
pub fn without_envelope_line(raw: &[u8]) -> &[u8] {
    // `From :` is a field, as once written, not an mbox line.
    if !raw.starts_with(b"From ") || raw.starts_with(b"From :") {
        return raw;
    }
    raw.iter()
        .position(|&b| b == b'\n')
        .map_or(&raw[raw.len()..], |i| &raw[i + 1..])
}

/// Where the body starts: after the first empty line (CRLF or LF).
pub fn body_offset(raw: &[u8]) -> Option<usize> {
    use memchr::memmem;
    match raw {
        [b'\n', ..] => return Some(1),
        [b'\r', b'\n', ..] => return Some(2),
        _ => {}
    }
    // The first empty line ends the headers, whichever line ending it has.
    let lf = memmem::find(raw, b"\n\n").map(|n| n + 2);
    let before_lf = &raw[..lf.unwrap_or(raw.len())];
    memmem::find(before_lf, b"\n\r\n").map(|n| n + 3).or(lf)
}

/// MIME headers parsed (bodies need them), every other header decoded as text: spamnb
/// reads addresses and Received lines itself, and parsing them twice cost a tenth of the
/// time of learning.
static PARSER: LazyLock<MessageParser> = LazyLock::new(|| {
    MessageParser::new()
        .with_mime_headers()
        .default_header_text()
});

/// The most `boundary` parameters a message given to mail-parser may have (mail has a
/// handful). mail-parser searches the rest of the message for a boundary that never comes,
/// once per multipart declaring it: thousands of them made 1 MB take ten seconds.
pub const MAX_BOUNDARIES: usize = 64;

/// RFC 2046 5.1.1. mail-parser compares a whole boundary at every `--`: one of 350,000
/// dashes over a body of dashes made 1 MB take ten seconds.
const MAX_BOUNDARY_LEN: usize = 70;

/// Whether `raw` has more `boundary` parameters than [`MAX_BOUNDARIES`] or one longer than
/// [`MAX_BOUNDARY_LEN`], where mail-parser's time grows with the square of the size.
fn excessive_mime(raw: &[u8]) -> bool {
    static BOUNDARY: LazyLock<memchr::memmem::Finder> =
        LazyLock::new(|| memchr::memmem::Finder::new(b"boundary"));
    const WORD: usize = b"boundary".len();
    // Searched in lowercased chunks on the stack: a case-blind search (the name may be
    // written in any case) went at a tenth of the speed, and this runs on every message.
    let mut chunk = [0u8; 4096];
    let mut count = 0;
    let mut at = 0;
    loop {
        let end = raw.len().min(at + chunk.len());
        let folded = &mut chunk[..end - at];
        // Only `B` and `b` become `b`, and so on: no other byte turns into a letter.
        for (f, &b) in folded.iter_mut().zip(&raw[at..end]) {
            *f = b | 0x20;
        }
        for i in BOUNDARY.find_iter(folded) {
            // The word in text (`the boundary of our offer`) names no parameter.
            let len = boundary_len(&raw[at + i + WORD..]);
            count += usize::from(len > 0);
            if count > MAX_BOUNDARIES || len > MAX_BOUNDARY_LEN {
                return true;
            }
        }
        if end == raw.len() {
            return false;
        }
        // The next chunk starts with the last bytes of this one, which can begin the word
        // but not hold it all: each is found once.
        at = end - (WORD - 1);
    }
}

/// The length of the boundary written at `rest`, just after a `boundary` (0 where it names
/// no parameter), counted as sent, as far as one past [`MAX_BOUNDARY_LEN`]: decoding it
/// (RFC 2047 and 2231) only shortens it.
fn boundary_len(rest: &[u8]) -> usize {
    const TOO_LONG: usize = MAX_BOUNDARY_LEN + 1;
    const LOOK: usize = 4 * MAX_BOUNDARY_LEN;
    // Up to the value: `*0*` (RFC 2231), comments, `=` and white space. So much of them is
    // no mail client's, and would hide a long boundary from a look that stops.
    let mut in_comment = false;
    let mut after_eq = false;
    let mut start = None;
    for (i, &b) in rest.iter().enumerate().take(LOOK) {
        match b {
            b'\n' => return 0,
            b')' if in_comment => in_comment = false,
            _ if in_comment => {}
            b'(' => in_comment = true,
            b' ' | b'\t' | b'\r' => {}
            _ if after_eq => {
                start = Some(i);
                break;
            }
            b'=' => after_eq = true,
            b'*' | b'0'..=b'9' => {}
            _ => return 0,
        }
    }
    let Some(start) = start else {
        return if rest.len() > LOOK { TOO_LONG } else { 0 };
    };
    // To where mail-parser ends it: a `;`, a comment or the line's end, past any quoted
    // stretch (which runs on over folded lines, to a quote not escaped).
    let (mut len, mut quoted, mut escaped) = (0, false, false);
    for &b in &rest[start..] {
        match b {
            b'"' if !escaped && quoted => break,
            b'"' if !escaped => quoted = true,
            b';' | b'(' | b'\n' if !quoted => break,
            _ => len += 1,
        }
        escaped = b == b'\\' && !escaped;
        if len == TOO_LONG {
            break;
        }
    }
    len
}

fn parse_mime(raw: &[u8]) -> Option<Message<'_>> {
    let parsed = PARSER.parse(raw)?;
    // mail-parser accepts almost anything; a "message" with no header at all is text.
    if parsed.headers().is_empty() {
        return None;
    }
    let mut msg = Message {
        raw,
        body_at: Some((parsed.root_part().offset_body as usize).min(raw.len())),
        ..Message::default()
    };
    let mut sent_subject = None;
    for h in parsed.headers() {
        let name = h.name.as_str().to_string();
        // spamnb's own headers are no evidence: a tagged copy (as delivered through the
        // milter or the filter) must score as the message did before it was tagged.
        if is_own_header(&name) {
            // Only a field that starts a line, as [`without_prev_subject`] finds them:
            // mail-parser also reads a name after white space or a CR, and such a field,
            // left by the cut of mail in transit, is the sender's.
            let at = h.offset_field as usize;
            let starts_line = at == 0 || raw.get(at - 1) == Some(&b'\n');
            if name.eq_ignore_ascii_case(PREV_SUBJECT) && sent_subject.is_none() && starts_line {
                sent_subject = Some(h);
            }
            continue;
        }
        let (value, span) = header_value(raw, h);
        msg.headers.push(Header {
            name,
            value,
            raw: span,
        });
    }
    // A subject spamnb tagged counts as it was sent (empty: there was none).
    if let Some(sent) = sent_subject {
        let first = msg
            .headers
            .iter()
            .position(|h| h.name.eq_ignore_ascii_case("subject"));
        let (value, span) = header_value(raw, sent);
        match first {
            Some(i) if value.trim().is_empty() => {
                msg.headers.remove(i);
            }
            Some(i) => {
                msg.headers[i].value = value;
                msg.headers[i].raw = span;
            }
            None => {}
        }
    }

    let mut has_plain = false;
    for part in parsed.parts.iter() {
        if part.is_encoding_problem && !msg.anomalies.contains(&Anomaly::EncodingProblem) {
            msg.anomalies.push(Anomaly::EncodingProblem);
        }
        let text = || {
            part.content_type()
                .is_none_or(|ct| ct.c_type.eq_ignore_ascii_case("text"))
        };
        match TransferEncoding::read(part.content_transfer_encoding()) {
            TransferEncoding::Base64 => msg.encoded.push(Encoded::Base64 { text: text() }),
            TransferEncoding::QuotedPrintable => msg.encoded.push(Encoded::QuotedPrintable),
            TransferEncoding::Unencoded => {}
        }
    }
    read_parts(&mut msg, &parsed, &mut has_plain, 0);
    if !has_plain && !msg.html.is_empty() {
        msg.anomalies.push(Anomaly::HtmlOnly);
    }
    msg.urls = urls::find_urls(&msg.text, &msg.html);
    Some(msg)
}

/// How deep in forwarded messages (message/rfc822) their parts are read: mail-parser nests
/// them as deep as they are sent.
const MAX_FORWARDED: usize = 3;

/// Reads the text and attachments of `parsed`'s parts into `msg`, and those of the messages
/// forwarded in it, `forwarded` deep; `has_plain` is set when one of its own is a text part
/// that is no attachment.
fn read_parts(
    msg: &mut Message,
    parsed: &mail_parser::Message,
    has_plain: &mut bool,
    forwarded: usize,
) {
    for (i, part) in parsed.parts.iter().enumerate() {
        // mail-parser lists attachments in the order of their parts: a linear search
        // here made a message of many parts quadratic.
        let is_attachment = if part.is_encoding_problem {
            // mail-parser lists a part it gave up decoding as an attachment, whatever it
            // was sent as.
            part.content_disposition()
                .is_some_and(|d| d.is_attachment())
        } else {
            parsed.attachments.binary_search(&(i as u32)).is_ok()
        };
        let body = match &part.body {
            PartType::Multipart(_) => continue,
            PartType::Text(text) | PartType::Html(text) if is_shown_text(part) => {
                // mail-parser gives up on a part at one bad escape or stray character, and
                // hands over the body undecoded; mail clients decode the rest.
                // Its offsets count in the buffer mail-parser parsed: the whole mail for a
                // forwarded message sent as it is, the decoded bytes for one sent encoded.
                // `raw_message()` is the forwarded message's own stretch of it.
                let lenient;
                let text = if part.is_encoding_problem {
                    lenient = decode_leniently(&parsed.raw_message, part);
                    &lenient
                } else {
                    text.as_ref()
                };
                if part.content_type().and_then(|ct| ct.subtype()) == Some("html") {
                    msg.html.push_str(text);
                    msg.html.push('\n');
                    let rendered = html::render(text);
                    push_text(&mut msg.text, &rendered.text);
                    let at = msg.text.len() - rendered.text.len();
                    let hidden = rendered.hidden.into_iter();
                    msg.hidden.extend(hidden.map(|r| r.start + at..r.end + at));
                    let maybe_shown = rendered.maybe_shown.into_iter();
                    msg.maybe_shown
                        .extend(maybe_shown.map(|r| r.start + at..r.end + at));
                } else {
                    *has_plain |= !is_attachment;
                    push_text(&mut msg.text, text);
                    msg.plain.push(msg.text.len() - text.len()..msg.text.len());
                }
                // Read as mail clients show it, and described as what it was sent as.
                if !is_attachment {
                    continue;
                }
                &part.body
            }
            // A forwarded message's text is shown with the rest, as SpamAssassin renders it.
            PartType::Message(inner) if forwarded < MAX_FORWARDED => {
                read_parts(msg, inner, &mut false, forwarded + 1);
                &part.body
            }
            body => body,
        };
        let content_type = part
            .content_type()
            .map(|ct| match &ct.c_subtype {
                Some(sub) => format!("{}/{}", ct.c_type, sub),
                None => ct.c_type.to_string(),
            })
            .unwrap_or_else(|| "application/octet-stream".into())
            .to_ascii_lowercase();
        let image = image::ImageKind::of_content_type(&content_type).map(|kind| {
            let data = match body {
                PartType::Binary(data) | PartType::InlineBinary(data) => data.as_ref(),
                _ => &[],
            };
            image::Image::read(kind, data)
        });
        msg.attachments.push(Attachment {
            name: part.attachment_name().map(str::to_string),
            content_type,
            size: body.len(),
            image,
        });
    }
}

/// Whether `part` (which mail-parser gives as text) is text a mail client shows: any
/// text/* part, attachment or not, as SpamAssassin renders them and Thunderbird and Apple
/// Mail show them inline (RFC 2046 4.1.4: an unknown subtype is read as plain), but data
/// sent as text, which clients open in other programs.
fn is_shown_text(part: &mail_parser::MessagePart) -> bool {
    let Some(ct) = part.content_type() else {
        return true;
    };
    ct.ctype().eq_ignore_ascii_case("text")
        && !ct.subtype().is_some_and(|sub| {
            [
                "calendar",
                "x-vcalendar",
                "vcard",
                "x-vcard",
                "directory",
                "csv",
                "tab-separated-values",
                "css",
                "javascript",
                "xml",
            ]
            .iter()
            .any(|data| sub.eq_ignore_ascii_case(data))
        })
}

/// The body of text part `part`, whose offsets count in `raw`, decoded as mail clients do where
/// mail-parser found it malformed: a bad quoted-printable escape is left as it is, and a
/// character that is no base64 is skipped.
fn decode_leniently(raw: &[u8], part: &mail_parser::MessagePart) -> String {
    let body = raw
        .get(part.offset_body as usize..part.offset_end as usize)
        .unwrap_or_default();
    let bytes = match TransferEncoding::read(part.content_transfer_encoding()) {
        TransferEncoding::Base64 => {
            let base64: Vec<u8> = body
                .iter()
                .copied()
                .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                .collect();
            mail_parser::decoders::base64::base64_decode(&base64).unwrap_or_default()
        }
        TransferEncoding::QuotedPrintable => {
            let mut out = Vec::with_capacity(body.len());
            let mut at = 0;
            while let Some(&b) = body.get(at) {
                at += 1;
                if b != b'=' {
                    out.push(b);
                    continue;
                }
                let rest = &body[at..];
                let hex = rest.get(..2).and_then(|hex| {
                    mail_parser::decoders::quoted_printable::quoted_printable_decode_char(
                        hex[0], hex[1],
                    )
                });
                if let Some(byte) = hex {
                    out.push(byte);
                    at += 2;
                } else if let Some(soft) =
                    [&b"\r\n"[..], b"\n"].iter().find(|e| rest.starts_with(e))
                {
                    at += soft.len();
                } else {
                    out.push(b);
                }
            }
            out
        }
        TransferEncoding::Unencoded => body.to_vec(),
    };
    let charset = part.content_type().and_then(|ct| ct.attribute("charset"));
    match charset.and_then(|c| mail_parser::decoders::charsets::map::charset_decoder(c.as_bytes()))
    {
        Some(decode) => decode(&bytes),
        None => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A message that could not be parsed as MIME: all of it is text.
/// A message whose MIME would cost mail-parser the square of its size: its header block
/// is read as ever (a sender who writes `boundary=` often enough must not hide the
/// Subject, From and Received from words and rules), its body as raw text.
fn excessive_mime_message(raw: &[u8]) -> Message<'_> {
    let body_at = body_offset(raw);
    let head = &raw[..body_at.unwrap_or(raw.len())];
    let read = crate::quiet_panic::catch_quietly(|| parse_mime(head));
    let Ok(Some(mut msg)) = read else {
        return raw_text_message(raw, Anomaly::ExcessiveMime);
    };
    let body = String::from_utf8_lossy(&raw[head.len()..]);
    msg.raw = raw;
    msg.body_at = body_at;
    msg.urls = urls::find_urls(&body, "");
    let all_of_it = 0..body.len();
    msg.plain = vec![all_of_it];
    msg.text = body.into_owned();
    msg.html.clear();
    msg.hidden.clear();
    msg.maybe_shown.clear();
    msg.attachments.clear();
    msg.encoded.clear();
    msg.anomalies.push(Anomaly::ExcessiveMime);
    msg
}

fn raw_text_message(raw: &[u8], why: Anomaly) -> Message<'_> {
    let text = String::from_utf8_lossy(raw);
    let mut anomalies = vec![why];
    if matches!(text, Cow::Owned(_)) && looks_binary(raw) {
        anomalies.push(Anomaly::BinaryGarbage);
    }
    let urls = urls::find_urls(&text, "");
    let all_of_it = 0..text.len();
    Message {
        raw,
        body_at: body_offset(raw),
        plain: vec![all_of_it],
        text: text.into_owned(),
        urls,
        anomalies,
        ..Message::default()
    }
}

fn looks_binary(raw: &[u8]) -> bool {
    let control = raw
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t'))
        .count();
    control * 20 > raw.len()
}

fn push_text(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

/// `text` with its lines of `>`s and then `From ` unquoted (as an mbox quotes them): one
/// `>` off, as mboxrd reads them, or with `every_quote`, all of them. Borrowed where there
/// is none (most mail).
pub(crate) fn from_lines_unquoted(text: &[u8], every_quote: bool) -> Cow<'_, [u8]> {
    if memchr::memmem::find(text, b">From ").is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        let quotes = line.iter().take_while(|&&b| b == b'>').count();
        let cut = if every_quote { quotes } else { 1 };
        let quoted = quotes > 0 && line[quotes..].starts_with(b"From ");
        out.extend_from_slice(if quoted { &line[cut..] } else { line });
    }
    Cow::Owned(out)
}

/// A header's value decoded, and where it is in `raw`.
fn header_value(raw: &[u8], h: &mail_parser::Header) -> (String, std::ops::Range<usize>) {
    let span = trimmed(raw, h.offset_start as usize..h.offset_end as usize);
    let value = match &h.value {
        HeaderValue::Text(t) => t.to_string(),
        HeaderValue::TextList(ts) => ts.join(", "),
        // Content-Type and its kind, which lose their original spelling when
        // re-rendered: the raw field, unfolded, keeps what the sender wrote.
        _ => unfold(&raw[span.clone()]),
    };
    (value, span)
}

/// `span` of `raw` (cut to it) as [`trim_line_end`] trims a value; empty when it is no
/// span of `raw`.
fn trimmed(raw: &[u8], span: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let Some(field) = raw.get(span.start..span.end.min(raw.len())) else {
        return 0..0;
    };
    let start = span.start + usize::from(field.starts_with(b" "));
    start..start + trim_line_end(field).len()
}

/// A raw header value as one line: its words, one space apart.
pub fn unfold(value: &[u8]) -> String {
    let mut out = String::with_capacity(value.len());
    for word in String::from_utf8_lossy(value).split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// [`unfold`], borrowing `value` where it is one line already, as most are: ASCII, its
/// words one space apart. Header rules read To and Cc unfolded in every message.
pub fn unfolded(value: &[u8]) -> Cow<'_, str> {
    // A space before the first byte, so that a leading space (and an empty value) fail.
    let mut before = b' ';
    let one_line = value.iter().all(|&b| {
        let fits = b.is_ascii() && !(b'\t'..=b'\r').contains(&b) && !(b == b' ' && before == b' ');
        before = b;
        fits
    }) && before != b' ';
    if one_line && let Ok(line) = std::str::from_utf8(value) {
        return Cow::Borrowed(line);
    }
    Cow::Owned(unfold(value))
}

/// Whether `url` is a `mailto:` link: an address, not a place.
pub fn is_mailto(url: &str) -> bool {
    url.get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("mailto:"))
}

/// Whether `url` is a `javascript:` or `data:` link: code or content, no place.
pub fn is_script_or_data(url: &str) -> bool {
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    scheme.eq_ignore_ascii_case("javascript") || scheme.eq_ignore_ascii_case("data")
}

/// The host part of a URL, lowercased, without port or credentials, as a browser reads it
/// (percent-escapes decoded, a number in hex or octal an IPv4 address); none for a
/// `javascript:` or `data:` link.
pub fn url_host(url: &str) -> Option<String> {
    if is_script_or_data(url) {
        return None;
    }
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    // `\` is `/` to a browser: `http://evil.example\@paypal.com/` leads to evil.example.
    let authority = rest.split(['/', '\\', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if host.starts_with('[') {
        host.split(']').next().map(|h| &h[1..])?
    } else {
        host.split(':').next()?
    };
    let decoded;
    let host = if host.contains('%') {
        decoded = percent_decoded(host);
        &decoded
    } else {
        host
    };
    let host = host.trim_end_matches('.');
    let host = ipv4(host).unwrap_or_else(|| host.to_ascii_lowercase());
    (!host.is_empty()).then_some(host)
}

/// `text` with its `%XX` escapes decoded.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        // Two hex digits, checked first: the number parser would take `+f` for one.
        let hex = bytes
            .get(at + 1..at + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) if b == b'%' => {
                out.push(byte);
                at += 3;
            }
            _ => {
                out.push(b);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A host of one to four numbers (decimal, `0x` hex or `0` octal) as the IPv4 address a
/// browser reads in it, dotted; none when it is a name.
fn ipv4(host: &str) -> Option<String> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 || !host.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let numbers = parts.iter().map(|part| {
        let (digits, radix) = match part.as_bytes() {
            [b'0', b'x' | b'X', ..] => (&part[2..], 16),
            [b'0', _, ..] => (&part[1..], 8),
            _ => (*part, 10),
        };
        if digits.is_empty() && radix == 16 {
            return Some(0);
        }
        // Digits only, checked first: the number parser would take `+2` for one.
        if !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        u64::from_str_radix(digits, radix).ok()
    });
    let mut address: u64 = 0;
    for (i, number) in numbers.enumerate() {
        let number = number?;
        let last = i == parts.len() - 1;
        // Every number but the last is one byte; the last fills the bytes left.
        let room = if last { 1u64 << (8 * (4 - i)) } else { 256 };
        if number >= room {
            return None;
        }
        address = if last {
            (address << (8 * (4 - i))) | number
        } else {
            (address << 8) | number
        };
    }
    let [a, b, c, d] = (address as u32).to_be_bytes();
    Some(format!("{a}.{b}.{c}.{d}"))
}

/// Text from a message made safe for one log line or terminal: control characters
/// (CR and LF among them, which would let a sender forge log lines), the Unicode line and
/// paragraph separators (which JSON leaves as they are, and viewers break lines at) and the
/// bidirectional overrides (which make a line read other than it is) become `\u{..}` escapes.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    fn unsafe_in_log(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !text.chars().any(unsafe_in_log) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if unsafe_in_log(c) {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mbox_line_is_left_out_and_an_obsolete_from_field_is_not() {
        for (raw, want) in [
            (
                &b"From a@b.example Mon Jan  1 00:00:00 2024\nA: 1\n"[..],
                &b"A: 1\n"[..],
            ),
            (b"From : a@b.example\nA: 1\n", b"From : a@b.example\nA: 1\n"),
            (b"From: a@b.example\n", b"From: a@b.example\n"),
            (b"From a@b.example", b""),
        ] {
            let text = String::from_utf8_lossy(raw);
            assert_eq!(without_envelope_line(raw), want, "{text:?}");
        }
    }

    const LIMIT: usize = 1 << 20;

    #[test]
    fn the_body_begins_after_the_first_empty_line_of_either_ending() {
        let cases: [(&[u8], Option<usize>); 7] = [
            (b"A: 1\nB: 2\n\nbody\n\n", Some(11)),
            (b"A: 1\r\nB: 2\r\n\r\nbody", Some(14)),
            // An LF header block with a CRLF empty line, and the other way round.
            (b"A: 1\n\r\nbody\n\n", Some(7)),
            (b"A: 1\r\n\nbody\r\n\r\n", Some(7)),
            (b"\nbody", Some(1)),
            (b"\r\nbody", Some(2)),
            (b"A: 1\nB: 2\n", None),
        ];
        for (raw, at) in cases {
            assert_eq!(body_offset(raw), at, "{:?}", String::from_utf8_lossy(raw));
            // What rules read takes the parser's word for it, which must agree.
            let msg = Message::parse(raw, LIMIT);
            let at = at.unwrap_or(raw.len());
            assert_eq!(
                msg.raw_head(),
                &raw[..at],
                "{:?}",
                String::from_utf8_lossy(raw)
            );
            assert_eq!(
                msg.raw_body(),
                &raw[at..],
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn raw_header_values_are_every_folded_value_of_that_name() {
        let head = b"To: a@x\nX-To: no\nSubject: hi\n\tto: no\nto : b@y,\n c@z\nTOO: no\n";
        assert_eq!(
            raw_header_values(head, "to"),
            [&b"a@x"[..], &b"b@y,\n c@z"[..]]
        );
        assert!(raw_header_values(head, "cc").is_empty());
        // A parsed message finds the same values where the parser found its headers.
        let raw = b"To: a@x\r\nX-To: no\r\nSubject: hi\r\n\tto: no\r\nto : b@y,\r\n c@z\r\nTo:\r\n\r\nbody\r\n";
        let msg = Message::parse(raw, 1 << 20);
        assert_eq!(
            msg.raw_header_values("to"),
            [&b"a@x"[..], &b"b@y,\r\n c@z"[..], &b""[..]]
        );
        assert_eq!(
            msg.raw_header_values("to"),
            raw_header_values(msg.raw_head(), "to")
        );
    }

    #[test]
    fn a_value_on_one_line_is_borrowed_as_it_unfolds() {
        for (value, borrowed) in [
            (&b"a@x, b@y"[..], true),
            (b"Joe <j@x>", true),
            (b"", false),
            (b" a@x", false),
            (b"a@x ", false),
            (b"a@x,  b@y", false),
            (b"a@x,\r\n b@y", false),
            (b"a@x,\n\tb@y", false),
            (b"a\x0bb", false),
            (b"J\xc3\xbcrgen <j@x>", false),
            (b"bad \xff byte", false),
        ] {
            let text = String::from_utf8_lossy(value);
            let got = unfolded(value);
            assert_eq!(got, unfold(value), "{text:?}");
            assert_eq!(matches!(got, Cow::Borrowed(_)), borrowed, "{text:?}");
        }
    }

    #[test]
    fn own_headers_are_not_part_of_the_view() {
        let raw = b"Subject: hi\r\nX-Spam-Flag: YES\r\nx-spam-status: Yes, score=9\r\nX-Spamish: kept\r\n\r\nbody\r\n";
        let msg = Message::parse(raw, LIMIT);
        let names: Vec<&str> = msg.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["Subject", "X-Spamish"], "{names:?}");
        assert!(
            !is_own_header("abcdef\u{e9}xyz"),
            "a name cut inside a character is no panic"
        );
    }

    /// A subject spamnb tagged reads as it was sent: a tagged copy scores, and teaches, as
    /// the message did before it was tagged.
    #[test]
    fn a_tagged_subject_reads_as_it_was_sent() {
        let subjects = |raw: &[u8]| -> Vec<String> {
            let msg = Message::parse(raw, LIMIT);
            msg.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("subject"))
                .map(|h| h.value.clone())
                .collect()
        };
        let tagged = b"Subject: [SPAM 9.1] =?utf-8?q?cheap_p=C3=AFlls?=\r\n\
X-Spam-Prev-Subject: =?utf-8?q?cheap_p=C3=AFlls?=\r\n\r\nbuy\r\n";
        assert_eq!(subjects(tagged), ["cheap p\u{ef}lls"]);
        let had_none = b"Subject: [SPAM]\r\nX-Spam-Prev-Subject:\r\nFrom: a@b\r\n\r\nbuy\r\n";
        assert!(subjects(had_none).is_empty());
        let untagged = b"Subject: [SPAM] is our list's tag\r\n\r\nhi\r\n";
        assert_eq!(subjects(untagged), ["[SPAM] is our list's tag"]);
    }

    /// In transit the sender's X-Spam-Prev-Subject fields are cut ([`without_prev_subject`]),
    /// which finds fields at the start of a line; mail-parser also reads a name after white
    /// space or a CR. Such a field left by the cut must not be read as the subject as sent.
    #[test]
    fn a_prev_subject_not_starting_a_line_is_no_subject() {
        for raw in [
            &b"From: z@example.net\r\nSubject: cheap pills\r\n\rX-Spam-Prev-Subject: notes\r\n\r\nhi\r\n"[..],
            b" X-Spam-Prev-Subject: notes\r\nFrom: z@example.net\r\nSubject: cheap pills\r\n\r\nhi\r\n",
            b"Subject: cheap pills\nX-Spam-Flag: NO\n\tX-Spam-Prev-Subject: notes\n\nhi\n",
        ] {
            let text = String::from_utf8_lossy(raw);
            let cut = without_prev_subject(raw);
            let msg = Message::parse(&cut, LIMIT);
            assert_eq!(msg.header("subject"), Some("cheap pills"), "{text:?}");
        }
    }

    #[test]
    fn decodes_headers_text_and_html() {
        let raw = b"From: =?utf-8?q?J=C3=BCrgen?= <j@example.org>\r\n\
Subject: =?utf-8?b?SGVsbG8gd29ybGQ=?=\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/alternative; boundary=XX\r\n\
\r\n\
--XX\r\n\
Content-Type: text/plain; charset=iso-8859-1\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
Gr=FC=DFe, see http://example.com/a.\r\n\
--XX\r\n\
Content-Type: text/html\r\n\
\r\n\
<html><body><p>Hi <a href=\"https://evil.example.net/x\">click</a></p>\
<a href=\"http://ex&#10;ample.com/?a=1&amp;b=2\">x</a> <a href=\"mailto:me@example.org\">m</a>\
</body></html>\r\n\
--XX--\r\n";
        let msg = Message::parse(raw, LIMIT);
        assert_eq!(msg.header("subject"), Some("Hello world"));
        assert!(
            msg.header("from").unwrap().contains("Jürgen"),
            "{:?}",
            msg.headers
        );
        assert!(msg.text.contains("Grüße"), "{}", msg.text);
        assert!(msg.text.contains("click"), "{}", msg.text);
        assert!(msg.html.contains("<a href"), "{}", msg.html);
        // Links as a browser follows them: entities decoded, line breaks dropped.
        assert_eq!(
            msg.urls,
            [
                "http://example.com/a",
                "https://evil.example.net/x",
                "http://example.com/?a=1&b=2",
                "mailto:me@example.org"
            ]
        );
        assert!(msg.anomalies.is_empty(), "{:?}", msg.anomalies);
    }

    #[test]
    fn attachments_are_described_not_read() {
        let raw = b"Subject: doc\nContent-Type: multipart/mixed; boundary=B\n\n--B\n\
Content-Type: text/plain\n\nsee attached\n--B\nContent-Type: application/zip; name=\"inv.zip\"\n\
Content-Disposition: attachment; filename=\"inv.zip\"\nContent-Transfer-Encoding: base64\n\nUEsDBA==\n--B--\n";
        let msg = Message::parse(raw, LIMIT);
        assert_eq!(msg.attachments.len(), 1, "{:?}", msg.attachments);
        assert_eq!(msg.attachments[0].name.as_deref(), Some("inv.zip"));
        assert_eq!(msg.attachments[0].content_type, "application/zip");
        assert!(!msg.text.contains("UEsDBA"));
    }

    /// Text mail clients show is read, whatever mail-parser makes of it: a part it gave up
    /// decoding, a text subtype it does not know, a text part that names a file or is sent
    /// as an attachment (SpamAssassin renders every text part; Thunderbird and Apple Mail
    /// show them inline). Attachments are still described as such.
    #[test]
    fn every_text_part_a_client_shows_is_read() {
        let mixed = |part: &str| {
            format!(
                "From: a@example.com\nSubject: hi\nMIME-Version: 1.0\n\
                 Content-Type: multipart/mixed; boundary=\"b\"\n\n\
                 --b\nContent-Type: text/plain\n\nsee below\n--b\n{part}\n--b--\n"
            )
        };
        let head = "From: a@example.com\nSubject: hi\nMIME-Version: 1.0\n";
        for (raw, attachment) in [
            (
                format!(
                    "{head}Content-Type: text/html\nContent-Transfer-Encoding: quoted-printable\n\n\
                     <p>cheap pills=\n here</p><a href=3D\"http://x.example/?id=zz\">order</a>\n"
                ),
                None,
            ),
            (
                mixed(
                    "Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\nY2hlYXAgcGls!bHMgaGVyZQo=\n",
                ),
                None,
            ),
            (
                format!("{head}Content-Type: text/x-note\n\ncheap pills here\n"),
                Some("text/x-note"),
            ),
            (
                mixed("Content-Type: text/html; name=\"offer.html\"\n\n<b>cheap pills here</b>\n"),
                Some("text/html"),
            ),
            (
                mixed(
                    "Content-Type: text/plain\nContent-Disposition: attachment; filename=\"a.txt\"\n\n\
                     cheap pills here\n",
                ),
                Some("text/plain"),
            ),
        ] {
            let msg = Message::parse(raw.as_bytes(), LIMIT);
            assert!(
                msg.text.contains("cheap pills here"),
                "{raw}\n{:?}",
                msg.text
            );
            let described: Vec<&str> = msg
                .attachments
                .iter()
                .map(|a| a.content_type.as_str())
                .collect();
            assert_eq!(described, Vec::from_iter(attachment), "{raw}");
            // The one part, in HTML, is HTML-only mail.
            let html_only = !raw.contains("multipart") && raw.contains("text/html");
            assert_eq!(
                msg.anomalies.contains(&Anomaly::HtmlOnly),
                html_only,
                "{raw}"
            );
        }
        // An invitation or a card is data the client shows in its own way.
        let raw = mixed("Content-Type: text/calendar\n\nBEGIN:VCALENDAR\nSUMMARY:cheap pills\n");
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        assert!(!msg.text.contains("VCALENDAR"), "{:?}", msg.text);
        assert_eq!(msg.attachments.len(), 1);
        // HTML beside a text part sent as an attachment is still HTML-only mail.
        let raw = mixed("Content-Type: text/html\n\n<b>hi</b>").replace(
            "Content-Type: text/plain\n\nsee",
            "Content-Type: text/plain\nContent-Disposition: attachment\n\nsee",
        );
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        assert!(msg.text.contains("see below"), "{:?}", msg.text);
        assert_eq!(msg.anomalies, [Anomaly::HtmlOnly]);
    }

    /// A message forwarding `inner` (its message/rfc822 part's fields `fields` more, each
    /// ending in a line break) after a line of its own.
    fn forwarding(inner: &str, fields: &str) -> String {
        format!(
            "From: a@example.com\nSubject: fyi\nMIME-Version: 1.0\n\
             Content-Type: multipart/mixed; boundary=\"b\"\n\n\
             --b\nContent-Type: text/plain\n\nsee below\n\
             --b\nContent-Type: message/rfc822\n{fields}\n{inner}--b--\n"
        )
    }

    /// A forwarded message (message/rfc822) is shown inline by mail clients and rendered
    /// with the rest by SpamAssassin: its words are read, and it is described as attached.
    #[test]
    fn a_forwarded_message_s_text_is_read() {
        let forward = |inner: &str| forwarding(inner, "");
        let inner =
            "From: x@example.net\nSubject: offer\nContent-Type: text/html\n\n<b>cheap pills</b>\n";
        let raw = forward(inner);
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        assert!(msg.text.contains("cheap pills"), "{:?}", msg.text);
        assert!(msg.html.contains("<b>cheap pills</b>"), "{:?}", msg.html);
        let described: Vec<&str> = msg
            .attachments
            .iter()
            .map(|a| a.content_type.as_str())
            .collect();
        assert_eq!(described, ["message/rfc822"]);
        assert!(msg.anomalies.is_empty(), "{:?}", msg.anomalies);
        // Forwarded in a forwarded message.
        let nested = format!("From: y@example.net\nContent-Type: message/rfc822\n\n{inner}");
        let raw = forward(&nested);
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        assert!(msg.html.contains("<b>cheap pills</b>"), "{:?}", msg.html);
    }

    #[test]
    fn garbage_is_scored_as_text() {
        let raw: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 256) as u8).collect();
        let msg = Message::parse(&raw, LIMIT);
        assert!(msg.anomalies.contains(&Anomaly::Unparsed) || !msg.headers.is_empty());
        let empty = Message::parse(b"", LIMIT);
        assert!(
            empty.anomalies.contains(&Anomaly::Unparsed),
            "{:?}",
            empty.anomalies
        );
    }

    #[test]
    fn scan_limit_truncates_and_says_so() {
        let mut raw = b"Subject: big\n\n".to_vec();
        raw.extend(std::iter::repeat_n(b'a', 10_000));
        let msg = Message::parse(&raw, 100);
        assert_eq!(msg.raw.len(), 100);
        assert!(msg.anomalies.contains(&Anomaly::Truncated));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_control("plain text"), "plain text");
        assert_eq!(
            escape_control("a\r\nfake: line\x1b[31m"),
            "a\\u{d}\\u{a}fake: line\\u{1b}[31m"
        );
        for (text, want) in [
            ("a\u{85}b", "a\\u{85}b"),
            ("a\u{2028}fake: line", "a\\u{2028}fake: line"),
            ("a\u{2029}b", "a\\u{2029}b"),
            ("user \u{202e}gnp.exe", "user \\u{202e}gnp.exe"),
            ("\u{2067}x\u{2069}", "\\u{2067}x\\u{2069}"),
        ] {
            assert_eq!(escape_control(text), want, "{text:?}");
        }
    }

    #[test]
    fn url_hosts() {
        for (url, host) in [
            ("http://Example.COM/path", Some("example.com")),
            ("https://user:pw@host.net:8080/x?y", Some("host.net")),
            ("www.shop.example.", Some("www.shop.example")),
            ("http://[::1]/", Some("::1")),
            ("http:///", None),
            // As a browser reads them: `\` ends the host, escapes decoded, numbers an address.
            ("http://evil.example\\@paypal.com/", Some("evil.example")),
            ("http://sp%61m.Example/", Some("spam.example")),
            ("http://0xd8.0x3a.0xd6.0xce/", Some("216.58.214.206")),
            ("http://0330.072.0326.0316/", Some("216.58.214.206")),
            ("http://3627734734/", Some("216.58.214.206")),
            ("http://216.58.54990/", Some("216.58.214.206")),
            ("http://1.2.3.4/", Some("1.2.3.4")),
            ("http://1.2.3.256/", Some("1.2.3.256")),
            ("http://123.example/", Some("123.example")),
            // A sign is no digit (the number parser takes one): no browser's address.
            ("http://1.+2.3.4/", Some("1.+2.3.4")),
            ("http://1.0+7.0x+f.4/", Some("1.0+7.0x+f.4")),
            // Code and content name no place: no `url:javascript` token, no listed host.
            ("JavaScript:window.location='https://x.example/'", None),
            ("data:text/html,<a href=http://x.example/>", None),
        ] {
            assert_eq!(url_host(url).as_deref(), host, "{url}");
        }
    }

    /// `%` and two hex digits is an escape; a sign is no digit, though Rust's number parser
    /// takes one first: `%+f` was read as the byte 0x0f.
    #[test]
    fn a_sign_after_a_percent_is_no_escape() {
        for (url, host) in [
            ("http://sp%+1am.example/", "sp%+1am.example"),
            ("http://sp%-1am.example/", "sp%-1am.example"),
            ("http://sp%+a%61m.example/", "sp%+aam.example"),
        ] {
            assert_eq!(url_host(url).as_deref(), Some(host), "{url}");
        }
    }

    /// mail-parser searches the rest of the message for each boundary that never comes, and
    /// compares a whole boundary at each `--`: a megabyte of either took ten seconds. Past
    /// RFC 2046's 70 characters or [`MAX_BOUNDARIES`], the body is read as text; the header
    /// fields are read as ever. The word in text is no boundary, however often it comes.
    #[test]
    fn boundaries_too_many_or_too_long_leave_the_message_as_text() {
        let head = "From: a@example.com\nSubject: hi\nMIME-Version: 1.0\n";
        let declared = |part: &str, n: usize| {
            let mut raw = format!("{head}Content-Type: multipart/mixed; boundary=\"b\"\n\n");
            for _ in 0..n {
                raw.push_str(part);
            }
            raw + "--b--\n"
        };
        let missing = "--b\nContent-Type: multipart/mixed; boundary=\"z\"\n\nx\n";
        let long = |len: usize, quote: &str| {
            let b = "-".repeat(len - 1) + "x";
            format!(
                "{head}Content-Type: multipart/mixed;\n BoUnDaRy *0* = {quote}{b}{quote}\n\n\
                 --{b}\nContent-Type: text/plain\n\nwords\n--{b}--\n"
            )
        };
        let costly = [
            declared(missing, MAX_BOUNDARIES),
            long(71, "\""),
            long(71, ""),
            long(10_000, "\""),
            format!(
                "{head}Content-Type: multipart/mixed; boundary{}=\"b\"\n\n--b\n",
                " ".repeat(300)
            ),
        ];
        for raw in &costly {
            let msg = Message::parse(raw.as_bytes(), LIMIT);
            assert_eq!(msg.anomalies, [Anomaly::ExcessiveMime], "{:.200}", raw);
            assert_eq!(msg.header("subject"), Some("hi"), "{:.200}", raw);
            assert!(msg.text.starts_with("--"), "{:.200}", raw);
            assert_eq!(msg.raw_body(), &raw.as_bytes()[msg.body_at.unwrap()..]);
        }
        let parsed = [
            declared(missing, MAX_BOUNDARIES - 1),
            declared("--b\nContent-Type: text/plain\n\nx\n", 10_000),
            long(70, "\""),
            long(70, ""),
            format!(
                "{head}Content-Type: text/plain\n\nthe boundary (of a field) is at {}\n",
                "x".repeat(100)
            ),
            format!(
                "{head}Content-Type: text/plain\n\n{}\n",
                "the boundary of our offer ".repeat(MAX_BOUNDARIES + 1)
            ),
        ];
        for raw in &parsed {
            let msg = Message::parse(raw.as_bytes(), LIMIT);
            assert!(msg.anomalies.is_empty(), "{:?} {:.200}", msg.anomalies, raw);
        }
    }

    /// The word `boundary` written often in a body made the whole message raw text: no
    /// Subject, no From, and a base64 part never decoded.
    #[test]
    fn the_word_boundary_in_a_body_leaves_the_mime_read() {
        let words = "the boundary of our offer ".repeat(65);
        let raw = format!(
            "From: a@example.com\nSubject: cheap pills\nMIME-Version: 1.0\n\
             Content-Type: multipart/mixed; boundary=\"b\"\n\n\
             --b\nContent-Type: text/plain\n\n{words}\n\
             --b\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\n\
             Y2hlYXAgcGlsbHMgaGVyZQo=\n--b--\n"
        );
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        assert_eq!(
            msg.header("subject"),
            Some("cheap pills"),
            "{:?}",
            msg.anomalies
        );
        assert!(msg.text.contains("cheap pills here"), "{:?}", msg.anomalies);
    }

    /// Found by `fuzz/` (the `message` target): mail-parser 0.11.1 panics (a slice index
    /// past the end of its list of HTML parts) on an alternative nested in one with the same
    /// boundary, after two HTML parts. spamnb catches it and reads the message as text.
    #[test]
    fn a_message_that_panics_the_mime_parser_is_read_as_text() {
        let raw = b"From: a@example.com\n\
            Content-Type: multipart/alternative; boundary=\"b\"\n\n\
            --b\nContent-Type: text/html\n\nalpha\n\
            --b\nContent-Type: text/html\n\nbeta\n\
            --b\nContent-Type: multipart/alternative; boundary=\"b\"\n\ngamma\n\
            --b\nContent-Type: text/plain\n\nomega\n--b--\n";
        let msg = Message::parse(raw, 1 << 20);
        assert_eq!(msg.anomalies, [Anomaly::ParserPanic]);
        assert!(msg.text.contains("alpha") && msg.text.contains("omega"));
    }

    // A forwarded message's text part that mail-parser gave up decoding (one stray character
    // in its base64) was read by `decode_leniently(parsed.raw_message(), part)`, with `parsed`
    // the forwarded message: its raw_message() is the inner message's own bytes, but the
    // part's offsets count from the start of the whole mail (here 265..290 in an inner
    // message of 120 bytes). The text is lost, or, when the inner message is long enough,
    // other bytes of the sender's choosing are decoded in its place. Mail clients show it.
    #[test]
    fn a_forwarded_part_badly_encoded_is_read() {
        let inner = "From: x@example.net\nSubject: offer\nContent-Type: text/plain\n\
                     Content-Transfer-Encoding: base64\n\nY2hlYXAgcGls!bHMgaGVyZQo=\n";
        let raw = forwarding(inner, "");
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        assert!(msg.text.contains("cheap pills here"), "{:?}", msg.text);
    }

    /// A forwarded message sent encoded is parsed again from its decoded bytes, and the
    /// offsets of its parts count in those, not in the whole mail.
    #[test]
    fn a_forwarded_part_badly_encoded_in_a_forward_sent_encoded_is_read() {
        // The inner message of `a_forwarded_part_badly_encoded_is_read`, in base64.
        let inner = "RnJvbTogeEBleGFtcGxlLm5ldApTdWJqZWN0OiBvZmZlcgpDb250ZW50LVR5cGU6IHRleHQv\n\
                     cGxhaW4KQ29udGVudC1UcmFuc2Zlci1FbmNvZGluZzogYmFzZTY0CgpZMmhsWVhBZ2NHbHMh\n\
                     YkhNZ2FHVnlaUW89Cg==\n";
        let raw = forwarding(inner, "Content-Transfer-Encoding: base64\n");
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        assert!(msg.text.contains("cheap pills here"), "{:?}", msg.text);
    }
}
