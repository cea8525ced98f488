//! The MIME structure of a message as written, read as SpamAssassin's parser reads it:
//! where the header ends, each part's header fields and body, the part that holds it, and
//! what looked malformed on the way ([`ParseFlags`], which `check_msg_parse_flags` tests).
//! This is only the shape: decoding the parts' text is [`crate::message`]'s business, and
//! [`super::alternative`]'s for the parts of an alternative.
//!
//! One pass over the bytes, built only when a loaded rule asks for it: a body is skipped a
//! boundary-looking line at a time, and only header blocks are read line by line.

use std::ops::Range;

use memchr::memmem;

use crate::message::{ContentType, Message, TransferEncoding, line_end, without_envelope_line};

/// Parts one multipart may hold before SpamAssassin's parser stops reading it.
const PART_LIMIT: usize = 1000;
/// How deep multiparts and embedded messages are opened, as SpamAssassin's `subparse`: a
/// bound on the work a message nested for the purpose can make.
const MAX_DEPTH: usize = 20;
/// The fields of a part's header kept at most.
const MAX_PART_FIELDS: usize = 1000;
/// SpamAssassin's limits for one header field's name and value, and for the whole header.
const MAX_FIELD_NAME: usize = 256;
const MAX_FIELD_VALUE: usize = 8192;
const MAX_HEADER: usize = 65536;

/// One MIME part as written.
#[derive(Debug)]
pub(super) struct MimePart {
    /// Its header fields, unfolded.
    pub(super) headers: Vec<(String, String)>,
    /// Where its body is in the message's raw bytes: up to the line break before the
    /// boundary line that ends it.
    pub(super) body: Range<usize>,
    /// The part that holds it (a multipart, or a message/rfc822 for the header block of
    /// the message inside); `None` for a part of the message itself.
    pub(super) parent: Option<usize>,
    /// Its media type, lowercase and without parameters: as its Content-Type says, else the
    /// default of the part that holds it.
    pub(super) media_type: String,
    /// Its Content-Type and Content-Transfer-Encoding fields, read once for the MIME tests.
    pub(super) content_type: ContentType,
    pub(super) encoding: TransferEncoding,
    /// Parts between it and the message: 1 for a part of the message itself.
    depth: usize,
}

impl MimePart {
    /// The first value of header `name`.
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What SpamAssassin's parser records as malformed, by its name for it
/// (`check_msg_parse_flags('missing_mime_headers')`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseFlag {
    /// The header ended without an empty line (at the end of the message, at a `--` line,
    /// or at the fourth line that is no header field).
    MissingHeadBodySeparator,
    /// A field name over 256 bytes, a value over 8 KiB, or a header over 64 KiB in all.
    TruncatedHeader,
    /// A boundary line not followed by a header field.
    MissingMimeHeaders,
    /// A part's header fields end at a line of text, not an empty line.
    MissingMimeHeadBodySeparator,
    /// More than white space and dots after a closing boundary.
    MimeEpilogue,
    /// A multipart of 1000 parts or more.
    PartLimit,
}

impl ParseFlag {
    const NAMES: [(ParseFlag, &'static str); 6] = [
        (
            ParseFlag::MissingHeadBodySeparator,
            "missing_head_body_separator",
        ),
        (ParseFlag::TruncatedHeader, "truncated_header"),
        (ParseFlag::MissingMimeHeaders, "missing_mime_headers"),
        (
            ParseFlag::MissingMimeHeadBodySeparator,
            "missing_mime_head_body_separator",
        ),
        (ParseFlag::MimeEpilogue, "mime_epilogue_exists"),
        (ParseFlag::PartLimit, "mimepart_limit_exceeded"),
    ];

    /// The flag SpamAssassin calls `name`.
    pub(super) fn parse(name: &str) -> Option<ParseFlag> {
        (ParseFlag::NAMES.iter()).find_map(|&(flag, n)| (n == name).then_some(flag))
    }
}

/// The [`ParseFlag`]s set for a message.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct ParseFlags(u8);

impl ParseFlags {
    pub(super) fn set(&mut self, flag: ParseFlag) {
        self.0 |= 1 << flag as u8;
    }

    pub(super) fn contains(self, flag: ParseFlag) -> bool {
        self.0 & (1 << flag as u8) != 0
    }
}

/// The parts of a message in the order they are written (each after the part holding it),
/// and what was malformed.
#[derive(Debug, Default)]
pub(super) struct MimeTree {
    pub(super) parts: Vec<MimePart>,
    /// The message's own Content-Type and Content-Transfer-Encoding fields.
    pub(super) content_type: ContentType,
    pub(super) encoding: TransferEncoding,
    pub(super) flags: ParseFlags,
}

impl MimeTree {
    /// The media type of `node`: a part, or the message itself (`None`).
    pub(super) fn media_type(&self, node: Option<usize>) -> &str {
        match node {
            Some(i) => &self.parts[i].media_type,
            None => self.content_type.media_type("text/plain"),
        }
    }

    /// The message (`None`), then each part in order.
    pub(super) fn nodes(&self) -> impl Iterator<Item = Option<usize>> + use<> {
        std::iter::once(None).chain((0..self.parts.len()).map(Some))
    }

    /// The parts directly inside `node`.
    pub(super) fn children(&self, node: Option<usize>) -> impl Iterator<Item = usize> + '_ {
        self.descendants(node)
            .filter(move |&i| self.parts[i].parent == node)
    }

    /// The parts inside `node` at any depth, in order. A part's descendants follow it.
    pub(super) fn descendants(&self, node: Option<usize>) -> Range<usize> {
        let Some(node) = node else {
            return 0..self.parts.len();
        };
        let inside = |mut i: usize| loop {
            match self.parts[i].parent {
                Some(p) if p == node => return true,
                // A parent comes before its parts: once before `node`, never `node`.
                Some(p) if p > node => i = p,
                _ => return false,
            }
        };
        let end = (node + 1..self.parts.len())
            .find(|&i| !inside(i))
            .unwrap_or(self.parts.len());
        node + 1..end
    }

    /// Whether `node` holds no parts.
    pub(super) fn is_leaf(&self, node: Option<usize>) -> bool {
        match node {
            Some(i) => self.parts.get(i + 1).is_none_or(|p| p.parent != Some(i)),
            None => self.parts.is_empty(),
        }
    }
}

/// The MIME tree of `msg`; see the module's comment.
pub(super) fn mime_tree(msg: &Message) -> MimeTree {
    let raw = msg.raw;
    let head = read_head(raw);
    let content_type = ContentType::read(msg.header("content-type"));
    let media_type = content_type.media_type("text/plain");
    let mut scan = Scan {
        raw,
        media_type,
        parts: Vec::new(),
        open: Vec::new(),
        reading: Reading::Body,
        epilogue_from: None,
        flags: ParseFlags::default(),
    };
    if head.missing_separator {
        scan.flags.set(ParseFlag::MissingHeadBodySeparator);
    }
    if head.long_field || header_size(msg) > MAX_HEADER {
        scan.flags.set(ParseFlag::TruncatedHeader);
    }
    // Only a part's transfer encoding keeps the message inside it unread: the tree never
    // asked the message's own, and the MIME tests' hits stay as they were.
    scan.enter(
        None,
        media_type,
        &content_type,
        TransferEncoding::Unencoded,
        0,
    );
    scan.run(head.body_at);
    let (parts, flags) = (scan.parts, scan.flags);
    MimeTree {
        parts,
        content_type,
        encoding: TransferEncoding::read(msg.header("content-transfer-encoding")),
        flags,
    }
}

/// The header's size as SpamAssassin counts it when it lists all fields: name, value
/// and line end, with two bytes for `: `.
fn header_size(msg: &Message) -> usize {
    (msg.headers.iter())
        .map(|h| h.name.len() + h.value.len() + 3)
        .sum()
}

/// A line without its line end (LF or CRLF).
fn content(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Whether `line` starts a header field: printable ASCII but `:`, then `:`, with spaces
/// or tabs before it where `space_before_colon` (an obsolete form header blocks allow; the
/// line after a boundary must do without).
fn starts_field(line: &[u8], space_before_colon: bool) -> bool {
    let name = (line.iter())
        .take_while(|&&b| b.is_ascii_graphic() && b != b':')
        .count();
    let rest = &line[name..];
    let rest = match space_before_colon {
        true => {
            let blank = rest
                .iter()
                .take_while(|&&b| b == b' ' || b == b'\t')
                .count();
            &rest[blank..]
        }
        false => rest,
    };
    name > 0 && rest.first() == Some(&b':')
}

/// What SpamAssassin's parser makes of a message's header block.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    /// Where the body starts in the raw bytes.
    body_at: usize,
    missing_separator: bool,
    /// A field name or value longer than SpamAssassin keeps.
    long_field: bool,
}

/// Reads the header block of `raw` as SpamAssassin does: an empty line ends it, and so do,
/// as malformed, the end of the message, a line starting `--` (a boundary, the body's first
/// line) and the fourth line that is neither a field nor a continuation (three are passed
/// over as broken fields).
///
/// Unlike SpamAssassin, an empty line ends the header whatever its line end: SpamAssassin
/// takes the message's line end from its first and last lines, so that in a message of LF
/// lines a CRLF empty line is a malformed field to it, and the body becomes header.
fn read_head(raw: &[u8]) -> Head {
    let mut head = Head {
        body_at: raw.len(),
        missing_separator: false,
        long_field: false,
    };
    // An empty message is an empty line to SpamAssassin: no header, nothing missing.
    if raw.is_empty() {
        return head;
    }
    let mut at = raw.len() - without_envelope_line(raw).len();
    let mut field: Option<usize> = None;
    let mut malformed = 0;
    loop {
        if at >= raw.len() {
            head.long_field |= field.is_some_and(|start| too_long(&raw[start..at]));
            head.missing_separator = true;
            return head;
        }
        let end = line_end(raw, at);
        let line = &raw[at..end];
        if line.starts_with(b" ") || line.starts_with(b"\t") {
            // A continuation, even of nothing: it is kept with what follows.
            field.get_or_insert(at);
            at = end;
            continue;
        }
        head.long_field |= field.is_some_and(|start| too_long(&raw[start..at]));
        if content(line).is_empty() {
            head.body_at = end;
            return head;
        }
        if !starts_field(line, true) {
            malformed += 1;
        }
        if line.starts_with(b"--") || malformed > 3 {
            head.missing_separator = true;
            head.body_at = at;
            return head;
        }
        field = Some(at);
        at = end;
    }
}

/// Whether a field (its lines, as written) has a name or value longer than SpamAssassin
/// keeps. A line without a colon is no field, and kept by nobody.
fn too_long(field: &[u8]) -> bool {
    let Some(colon) = memchr::memchr(b':', field) else {
        return false;
    };
    let name = field[..colon].trim_ascii_end();
    let value = &field[colon + 1..];
    // SpamAssassin counts a CRLF line end as one byte, as it keeps it.
    let crlf = memmem::find_iter(value, b"\r\n").count();
    name.len() > MAX_FIELD_NAME || value.len() - crlf > MAX_FIELD_VALUE
}

/// What the line being read belongs to.
#[derive(Debug, Clone, Copy)]
enum Reading {
    /// A body, where only boundary lines matter.
    Body,
    /// The header fields of a part, or of a message inside a message/rfc822 part
    /// (`embedded`: a message's header, which raises no MIME flags, and which ends, as a
    /// part's does, at its first line that is no field, where SpamAssassin passes over
    /// three).
    Headers { part: usize, embedded: bool },
    /// The body of a message/rfc822 part: the header block of the message inside.
    EmbeddedStart { parent: Option<usize> },
}

/// A multipart whose boundary lines are being looked for.
#[derive(Debug)]
struct Multipart {
    boundary: Vec<u8>,
    /// The multipart part, or the message (`None`).
    node: Option<usize>,
    /// Whether its first boundary line was found (before it is the preamble).
    opened: bool,
    parts: usize,
    /// The part being read.
    current: Option<usize>,
    depth: usize,
}

struct Scan<'m> {
    raw: &'m [u8],
    /// The message's own media type.
    media_type: &'m str,
    parts: Vec<MimePart>,
    /// Outermost first: a boundary line of one ends every multipart inside it.
    open: Vec<Multipart>,
    reading: Reading,
    /// Where the text after the last closing boundary starts, until the next boundary line.
    epilogue_from: Option<usize>,
    flags: ParseFlags,
}

impl<'m> Scan<'m> {
    fn run(&mut self, mut at: usize) {
        let raw = self.raw;
        while at < raw.len() {
            // In a body only a boundary line matters: the next line that starts with `--`
            // is found with memmem, past the base64 of attachments a line at a time.
            if matches!(self.reading, Reading::Body) && !raw[at..].starts_with(b"--") {
                match memmem::find(&raw[at..], b"\n--") {
                    Some(n) => at += n + 1,
                    None => break,
                }
            }
            let end = line_end(raw, at);
            let line = content(&raw[at..end]);
            if let Some((level, closing)) = self.boundary(line) {
                self.boundary_line(level, closing, at, end);
                at = end;
                continue;
            }
            match self.reading {
                Reading::Body => at = end,
                Reading::Headers { part, embedded } => {
                    if self.header_line(part, embedded, line) {
                        at = end;
                    } else {
                        // Headers ended: an empty line is theirs, a line of text is the
                        // body's first (which may be a boundary of the part's own).
                        let blank = line.is_empty();
                        if !blank && !embedded {
                            self.flags.set(ParseFlag::MissingMimeHeadBodySeparator);
                        }
                        let body_at = if blank { end } else { at };
                        self.end_headers(part, body_at);
                        at = body_at;
                    }
                }
                Reading::EmbeddedStart { parent } => {
                    // The line is read again, as the embedded message's first header line.
                    let depth = parent.map_or(0, |p| self.parts[p].depth) + 1;
                    let part = self.push_part(parent, depth);
                    self.reading = Reading::Headers {
                        part,
                        embedded: true,
                    };
                }
            }
        }
        self.end_part_headers();
        self.end_epilogue(raw.len());
    }

    /// Where a part ends in its header (a boundary line, the end of the message), it is a
    /// part without a body.
    fn end_part_headers(&mut self) {
        if let Reading::Headers { part, .. } = self.reading {
            self.end_headers(part, self.raw.len());
        }
    }

    /// The open multipart `line` is a boundary line of (innermost first), and whether it
    /// closes it (`--B--`). Before a multipart's first part only its opening line counts.
    fn boundary(&self, line: &[u8]) -> Option<(usize, bool)> {
        let delimiter = line.strip_prefix(b"--")?.trim_ascii_end();
        (self.open.iter().enumerate().rev()).find_map(|(level, m)| {
            if delimiter == m.boundary {
                Some((level, false))
            } else if m.opened && delimiter.strip_suffix(b"--") == Some(&m.boundary[..]) {
                Some((level, true))
            } else {
                None
            }
        })
    }

    /// A boundary line of multipart `level` at `start..end`: it ends the part being read
    /// there and everything inside it, and opens the next part or closes the multipart.
    fn boundary_line(&mut self, level: usize, closing: bool, start: usize, end: usize) {
        let raw = self.raw;
        self.end_part_headers();
        self.end_epilogue(start);
        // The line break before a boundary line belongs to the boundary.
        let before = content(&raw[..start]).len();
        if let Some(current) = self.open[level].current {
            for part in &mut self.parts[current..] {
                if part.body.end == raw.len() {
                    part.body.end = before.max(part.body.start);
                }
            }
        }
        self.open.truncate(level + 1);
        self.reading = Reading::Body;
        if closing {
            self.open.pop();
            self.epilogue_from = Some(end);
            return;
        }
        // A next line inside this multipart must start the part's header.
        let next = content(&raw[end..line_end(raw, end)]);
        let next_is_outside =
            end == raw.len() || self.boundary(next).is_some_and(|(outer, _)| outer < level);
        if !next_is_outside && !starts_field(next, false) {
            self.flags.set(ParseFlag::MissingMimeHeaders);
        }
        let multipart = &mut self.open[level];
        multipart.opened = true;
        multipart.parts += 1;
        // SpamAssassin's parser stops reading a multipart at its 1000th part (counted as it
        // ends, so that 1000 parts closed by a closing boundary line stay under its limit);
        // spamnb reads on and flags any multipart of 1000 parts or more.
        if multipart.parts >= PART_LIMIT {
            self.flags.set(ParseFlag::PartLimit);
        }
        // Past that many parts in the whole message, the rest are read as no part's: a
        // boundary line every few bytes must not cost a part each.
        if self.parts.len() >= PART_LIMIT {
            return;
        }
        let (node, depth) = (multipart.node, multipart.depth + 1);
        let part = self.push_part(node, depth);
        self.open[level].current = Some(part);
        self.reading = Reading::Headers {
            part,
            embedded: false,
        };
    }

    /// A part whose header is about to be read, its body not yet found.
    fn push_part(&mut self, parent: Option<usize>, depth: usize) -> usize {
        let at = self.raw.len();
        self.parts.push(MimePart {
            headers: Vec::new(),
            body: at..at,
            parent,
            media_type: String::new(),
            content_type: ContentType::default(),
            encoding: TransferEncoding::default(),
            depth,
        });
        self.parts.len() - 1
    }

    /// Takes `line` into the header of `part`; false if it is none of it (the header ended).
    fn header_line(&mut self, part: usize, embedded: bool, line: &[u8]) -> bool {
        let part = &mut self.parts[part];
        if starts_field(line, true) {
            // Fields past the first thousand are read over, not kept.
            if part.headers.len() < MAX_PART_FIELDS {
                let line = String::from_utf8_lossy(line);
                let (name, value) = line.split_once(':').unwrap_or_default();
                (part.headers).push((name.trim().to_string(), value.trim().to_string()));
            }
            return true;
        }
        // A message's header may start with a continuation line; a part's may not.
        let continued = !part.headers.is_empty() || embedded;
        if continued && (line.starts_with(b" ") || line.starts_with(b"\t")) {
            if let Some((_, value)) = part.headers.last_mut() {
                value.push(' ');
                value.push_str(String::from_utf8_lossy(line).trim());
            }
            return true;
        }
        false
    }

    /// The header of `part` ended; its body starts at `body_at`.
    fn end_headers(&mut self, part: usize, body_at: usize) {
        let content_type = ContentType::read(self.parts[part].header("content-type"));
        let encoding = TransferEncoding::read(self.parts[part].header("content-transfer-encoding"));
        // A part of a digest is a message unless it says otherwise (RFC 2046).
        let parent = self.parts[part].parent;
        let parent_type = parent.map_or(self.media_type, |p| &self.parts[p].media_type);
        let default = match parent_type {
            "multipart/digest" => "message/rfc822",
            _ => "text/plain",
        };
        let kind = content_type.media_type(default).to_string();
        let depth = self.parts[part].depth;
        self.reading = Reading::Body;
        self.enter(Some(part), &kind, &content_type, encoding, depth);
        let p = &mut self.parts[part];
        p.body = body_at..self.raw.len();
        p.media_type = kind;
        p.content_type = content_type;
        p.encoding = encoding;
    }

    /// Prepares to read what `node` holds, if it is a multipart with a boundary or a
    /// message/rfc822 (not encoded: SpamAssassin decodes one sent in base64 first, which
    /// spamnb leaves as a leaf).
    fn enter(
        &mut self,
        node: Option<usize>,
        kind: &str,
        content_type: &ContentType,
        encoding: TransferEncoding,
        depth: usize,
    ) {
        if depth >= MAX_DEPTH {
            return;
        }
        if kind.starts_with("multipart/") {
            // A part may not reuse a boundary of the multipart around it: its lines end the
            // outer part, as SpamAssassin reads them too.
            let boundary = (content_type.boundary.as_ref())
                .filter(|b| !self.open.iter().any(|m| m.boundary == b.as_bytes()));
            if let Some(boundary) = boundary {
                self.open.push(Multipart {
                    boundary: boundary.clone().into_bytes(),
                    node,
                    opened: false,
                    parts: 0,
                    current: None,
                    depth,
                });
            }
        } else if (kind == "message/rfc822" || kind == "message/global") && !encoding.is_encoded() {
            self.reading = Reading::EmbeddedStart { parent: node };
        }
    }

    /// The text after a closing boundary ends at `end`: an epilogue if it is more than
    /// white space and dots (a line of a lone dot is common in ham).
    fn end_epilogue(&mut self, end: usize) {
        if let Some(from) = self.epilogue_from.take() {
            let text = &self.raw[from..end.max(from)];
            if text.iter().any(|&b| !b.is_ascii_whitespace() && b != b'.') {
                self.flags.set(ParseFlag::MimeEpilogue);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(raw: &str) -> MimeTree {
        mime_tree(&Message::parse(raw.as_bytes(), 1 << 20))
    }

    /// The flags set, by SpamAssassin's names.
    fn flag_names(flags: &ParseFlags) -> Vec<&'static str> {
        (ParseFlag::NAMES.iter())
            .filter(|(flag, _)| flags.contains(*flag))
            .map(|(_, name)| *name)
            .collect()
    }

    #[test]
    fn the_header_ends_as_spamassassin_ends_it() {
        let long_value = |n: usize, end: &str| format!("A: {}{end}{end}b", "x".repeat(n));
        let cases: Vec<(String, Option<&str>, bool, bool)> = vec![
            // (message, the body's first line (None: no body), separator missing, field too long)
            ("A: 1\n\nbody\n".into(), Some("body\n"), false, false),
            (
                "A: 1\r\nB: 2\r\n\r\nbody".into(),
                Some("body"),
                false,
                false,
            ),
            ("A: 1\n \tfolded\n\nbody".into(), Some("body"), false, false),
            ("\nbody".into(), Some("body"), false, false),
            ("".into(), None, false, false),
            (
                "From a@b.example Mon Jan  1 00:00:00 2024\nA: 1\n\nb".into(),
                Some("b"),
                false,
                false,
            ),
            (" folded first\nA: 1\n\nb".into(), Some("b"), false, false),
            // Obsolete: white space before the colon.
            ("A : 1\nB\t: 2\n\nb".into(), Some("b"), false, false),
            ("A: 1\nB: 2".into(), None, true, false),
            ("A: 1\nB: 2\n".into(), None, true, false),
            ("A: 1\n--b\nx\n".into(), Some("--b\nx\n"), true, false),
            // Three lines that are no field are passed over; the fourth is the body.
            (
                "A: 1\nbad\nworse\nworst\n\nb".into(),
                Some("b"),
                false,
                false,
            ),
            (
                "A: 1\nbad\nworse\nworst\nbody\n\nb".into(),
                Some("body\n\nb"),
                true,
                false,
            ),
            (
                format!("{}: 1\n\nb", "N".repeat(256)),
                Some("b"),
                false,
                false,
            ),
            (
                format!("{}: 1\n\nb", "N".repeat(257)),
                Some("b"),
                false,
                true,
            ),
            // The value with its line end: 8192 bytes are kept, a CRLF counted as one.
            (long_value(8190, "\n"), Some("b"), false, false),
            (long_value(8191, "\n"), Some("b"), false, true),
            (long_value(8190, "\r\n"), Some("b"), false, false),
            (
                format!("A: {}\n {}\n\nb", "x".repeat(5000), "x".repeat(5000)),
                Some("b"),
                false,
                true,
            ),
        ];
        for (raw, body, missing, long) in cases {
            let head = read_head(raw.as_bytes());
            let body_at = body.map_or(raw.len(), |b| raw.len() - b.len());
            let expected = Head {
                body_at,
                missing_separator: missing,
                long_field: long,
            };
            assert_eq!(head, expected, "{raw:?}");
        }
    }

    #[test]
    fn parse_flags_are_raised_where_spamassassin_raises_them() {
        let mixed = |body: &str| {
            format!("Subject: a\nContent-Type: multipart/mixed; boundary=\"b\"\n\n{body}")
        };
        let text = "Content-Type: text/plain\n\n";
        let cases: Vec<(String, Vec<&str>)> = vec![
            (
                mixed(&format!("pre\n--b\n{text}x\n--b\n{text}y\n--b--\n")),
                vec![],
            ),
            (mixed(&format!("--b\r\n{text}x\r\n--b--\r\n")), vec![]),
            // The epilogue: white space and dots are none, a stray boundary line is one.
            (mixed(&format!("--b\n{text}x\n--b--\n\n.\n \t\n")), vec![]),
            (
                mixed(&format!("--b\n{text}x\n--b--\nbye\n")),
                vec!["mime_epilogue_exists"],
            ),
            (
                mixed(&format!("--b\n{text}x\n--b--\n--b\n")),
                vec!["mime_epilogue_exists"],
            ),
            // A nested multipart's epilogue runs to the next boundary line of its parent.
            (
                mixed(&format!(
                    "--b\nContent-Type: multipart/alternative; boundary=c\n\n--c\n{text}x\n\
                     --c--\nafter c\n--b--\n"
                )),
                vec!["mime_epilogue_exists"],
            ),
            (
                mixed(&format!(
                    "--b\nContent-Type: multipart/alternative; boundary=c\n\n--c\n{text}x\n\
                     --c--\n--b--\n"
                )),
                vec![],
            ),
            // A part without header fields, as the empty line shows.
            (mixed("--b\n\nx\n--b--\n"), vec!["missing_mime_headers"]),
            (
                mixed(&format!("--b\n{text}x\n--b\nno header\n--b--\n")),
                vec!["missing_mime_headers", "missing_mime_head_body_separator"],
            ),
            (
                mixed("--b\nContent-Type: text/plain\nno empty line\n--b--\n"),
                vec!["missing_mime_head_body_separator"],
            ),
            // The obsolete space before a colon is a field, but not right after a boundary.
            (
                mixed("--b\nContent-Type : text/plain\n\nx\n--b--\n"),
                vec!["missing_mime_headers"],
            ),
            (
                mixed("--b\nX-A: 1\nContent-Type : text/plain\n\nx\n--b--\n"),
                vec![],
            ),
            // A boundary line while a part's header is read: a part without a body.
            (mixed("--b\nContent-Type: text/plain\n--b--\n"), vec![]),
            // A boundary line last in its multipart, whose parent goes on: no line is missing.
            (
                mixed(&format!(
                    "--b\nContent-Type: multipart/alternative; boundary=c\n\n--c\n--b\n{text}x\n--b--\n"
                )),
                vec![],
            ),
            // A multipart inside a forwarded message is read too.
            (
                mixed(
                    "--b\nContent-Type: message/rfc822\n\nSubject: fwd\n\
                     Content-Type: multipart/mixed; boundary=f\n\n--f\nforwarded text\n--f--\n--b--\n",
                ),
                vec!["missing_mime_headers", "missing_mime_head_body_separator"],
            ),
            // Each field under 8 KiB, all of them over 64 KiB.
            (
                format!(
                    "{}\nx\n",
                    format!("X-Long: {}\n", "y".repeat(8000)).repeat(9)
                ),
                vec!["truncated_header"],
            ),
            (
                format!(
                    "{}\nx\n",
                    format!("X-Long: {}\n", "y".repeat(8000)).repeat(8)
                ),
                vec![],
            ),
            // Not multipart: boundary-like lines are text.
            ("Subject: a\n\n--b\nno header\n--b--\nbye\n".into(), vec![]),
        ];
        for (raw, expected) in cases {
            assert_eq!(flag_names(&tree(&raw).flags), expected, "{raw}");
        }
    }

    #[test]
    fn parts_know_the_part_that_holds_them() {
        let raw = "Subject: a\nContent-Type: multipart/mixed; boundary=b\n\n\
                   --b\nContent-Type: multipart/alternative; boundary=c\n\n\
                   --c\nContent-Type: text/plain\n\nhi\n\
                   --c\nContent-Type: text/html; charset=utf-8\n\n<p>hi</p>\n--c--\n\
                   --b\nContent-Type: message/rfc822\n\n\
                   Subject: fwd\nContent-Type: multipart/digest; boundary=d\n\n\
                   --d\n\nSubject: inner\n\ndigested\n--d--\n\
                   --b\nContent-Type: image/gif\n\nGIF89a\n--b--\n";
        let tree = tree(raw);
        let shape: Vec<(&str, Option<usize>)> = (tree.parts.iter())
            .map(|p| (p.media_type.as_str(), p.parent))
            .collect();
        assert_eq!(
            shape,
            [
                ("multipart/alternative", None),
                ("text/plain", Some(0)),
                ("text/html", Some(0)),
                ("message/rfc822", None),
                // The forwarded message's header, then the message its digest holds.
                ("multipart/digest", Some(3)),
                ("message/rfc822", Some(4)),
                ("text/plain", Some(5)),
                ("image/gif", None),
            ],
            "{raw}"
        );
        assert_eq!(tree.media_type(None), "multipart/mixed");
        assert_eq!(tree.parts[4].header("subject"), Some("fwd"));
        assert_eq!(tree.parts[6].header("subject"), Some("inner"));
        assert_eq!(tree.children(None).collect::<Vec<_>>(), [0, 3, 7]);
        assert_eq!(tree.children(Some(0)).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(tree.descendants(Some(3)), 4..7);
        assert_eq!(tree.descendants(Some(7)), 8..8);
        let leaves: Vec<usize> = (0..tree.parts.len())
            .filter(|&i| tree.is_leaf(Some(i)))
            .collect();
        assert_eq!(leaves, [1, 2, 6, 7]);
        let body = |i: usize| &raw[tree.parts[i].body.clone()];
        assert_eq!(body(2), "<p>hi</p>");
        assert_eq!(body(6), "digested");
        assert!(
            body(0).starts_with("--c\n") && body(0).ends_with("--c--"),
            "{}",
            body(0)
        );
        assert!(
            body(3).starts_with("Subject: fwd\n") && body(3).ends_with("--d--"),
            "{}",
            body(3)
        );
        assert_eq!(body(7), "GIF89a");
        // A digest's parts have no header of their own, which SpamAssassin flags too.
        assert_eq!(flag_names(&tree.flags), ["missing_mime_headers"]);
    }

    /// A part whose header ends at a line of text begins its body with that line, which may
    /// open the part's own multipart.
    #[test]
    fn a_body_may_start_without_its_empty_line() {
        let raw = "Subject: a\nContent-Type: multipart/mixed; boundary=b\n--b\n\
                   Content-Type: multipart/alternative; boundary=c\n--c\n\
                   Content-Type: text/plain\n\nhi\n--c--\n--b--\n";
        let tree = tree(raw);
        let shape: Vec<(&str, Option<usize>)> = (tree.parts.iter())
            .map(|p| (p.media_type.as_str(), p.parent))
            .collect();
        assert_eq!(
            shape,
            [("multipart/alternative", None), ("text/plain", Some(0))],
            "{raw}"
        );
        assert_eq!(
            flag_names(&tree.flags),
            [
                "missing_head_body_separator",
                "missing_mime_head_body_separator"
            ]
        );
    }

    /// Nesting is bounded, as SpamAssassin bounds it: deeper multiparts are leaves.
    #[test]
    fn nesting_stops_at_twenty_levels() {
        let mut raw = "Subject: a\nContent-Type: multipart/mixed; boundary=b0\n\n".to_string();
        for depth in 1..30 {
            raw.push_str(&format!(
                "--b{}\nContent-Type: multipart/mixed; boundary=b{depth}\n\n",
                depth - 1
            ));
        }
        let tree = tree(&raw);
        assert_eq!(tree.parts.len(), MAX_DEPTH);
    }

    #[test]
    fn a_boundary_every_few_bytes_costs_no_part_past_the_limit() {
        let mut raw = "Subject: a\nContent-Type: multipart/mixed; boundary=b\n\n".to_string();
        raw.push_str(&"--b\nA: b\n\nx\n".repeat(5000));
        let mut fields = "--b\n".to_string();
        fields.push_str(&"A: b\n".repeat(5000));
        raw.push_str(&fields);
        let tree = tree(&raw);
        assert_eq!(tree.parts.len(), PART_LIMIT);
        assert!(tree.flags.contains(ParseFlag::PartLimit));
        let crowded = mime_tree(&Message::parse(
            format!(
                "Subject: a\nContent-Type: multipart/mixed; boundary=b\n\n{fields}\nx\n--b--\n"
            )
            .as_bytes(),
            1 << 20,
        ));
        assert_eq!(crowded.parts[0].headers.len(), MAX_PART_FIELDS);
    }
}
