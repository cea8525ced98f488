//! A message's identity in the ledger: SHA-256 (its first 16 bytes) of one reading of the
//! message, so that learning a message twice counts it once and learning it as the other
//! class moves it.
//!
//! A database keeps the reading its ledger was made with. Databases made before schema 4
//! read the whole message; newer ones read it as its sender's side wrote it, which the copy
//! the milter or spamc scored and the copy later delivered to a mailbox have in common.

use sha2::{Digest as _, Sha256};

use super::{PREV_SUBJECT, is_own_header, line_end};

pub type Digest = [u8; 16];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestKind {
    /// The fields that say who wrote what to whom and how it is encoded ([`AS_SENT`]),
    /// unfolded, with runs of white space made one space, and the body with LF line
    /// endings. What is added on the way in is left out: delivery's trace fields
    /// (`Received`, `Return-Path`, `Delivered-To`, an mbox `From ` line), other
    /// filters' verdicts (`Authentication-Results`, a virus scanner's), and spamnb's own;
    /// and so is a relay's refolding of a field.
    AsSent,
    /// Every header field as written but spamnb's own, and the body, line endings made LF.
    WholeMessage,
}

/// The fields of [`DigestKind::AsSent`], lowercase.
const AS_SENT: &[&str] = &[
    "from",
    "sender",
    "reply-to",
    "to",
    "cc",
    "subject",
    "date",
    "message-id",
    "in-reply-to",
    "references",
    "mime-version",
    "content-type",
    "content-transfer-encoding",
];

impl DigestKind {
    pub const ALL: [DigestKind; 2] = [DigestKind::AsSent, DigestKind::WholeMessage];

    /// Its name in an export and in `spamnb stats`.
    pub fn name(self) -> &'static str {
        match self {
            DigestKind::AsSent => "as-sent",
            DigestKind::WholeMessage => "whole-message",
        }
    }

    pub fn from_name(name: &str) -> Option<DigestKind> {
        DigestKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn of(self, raw: &[u8]) -> Digest {
        // An mbox `From ` line is the mailbox's, not the message's: procmail pipes mail to
        // spamc with the one it delivers with, and the copy it delivers to a Maildir has none.
        let raw = super::without_envelope_line(raw);
        let mut hasher = Sha256::new();
        match self {
            DigestKind::AsSent => {
                let body_at = hash_fields_as_sent(raw, &mut hasher);
                hash_body_unquoted(&raw[body_at..], &mut hasher);
            }
            DigestKind::WholeMessage => {
                let body_at = hash_fields_but_own(raw, &mut hasher);
                hash_body(&raw[body_at..], &mut hasher);
            }
        }
        let full = hasher.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }
}

/// Hashes the [`AS_SENT`] fields of the header block, one normalized line each, the
/// subject last; returns where the body begins. The block ends at an empty line, or at the
/// first line that is neither a field nor the continuation of one (left to the body, so
/// that text which is no header at all is not left out). A subject spamnb tagged counts
/// as it was sent: [`PREV_SUBJECT`] holds it (empty: there was none).
fn hash_fields_as_sent(raw: &[u8], hasher: &mut Sha256) -> usize {
    // The kept fields' names (lowercase) and words, in order.
    let mut fields: Vec<(&'static str, Vec<u8>)> = Vec::new();
    // Whether a field has begun, and whether the current one is kept.
    let (mut in_field, mut keeping) = (false, false);
    let mut at = 0;
    let ending: &[u8] = loop {
        if at >= raw.len() {
            break b"\0";
        }
        let end = line_end(raw, at);
        let line = &raw[at..end];
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            at = end;
            break b"\n";
        }
        // A CR inside a line belongs to no header field: bare-CR text is body.
        if line.contains(&b'\r') {
            break b"\0";
        }
        if matches!(line[0], b' ' | b'\t') {
            if !in_field {
                break b"\0";
            }
            if let Some((_, words)) = fields.last_mut().filter(|_| keeping) {
                push_words(words, line);
            }
        } else {
            let Some(colon) = field_name_end(line) else {
                break b"\0";
            };
            let name = line[..colon].trim_ascii_end();
            in_field = true;
            let kept = AS_SENT
                .iter()
                .chain([&PREV_SUBJECT])
                .find(|f| name.eq_ignore_ascii_case(f.as_bytes()));
            keeping = kept.is_some();
            if let Some(&kept) = kept {
                let mut words = Vec::new();
                push_words(&mut words, &line[colon + 1..]);
                fields.push((kept, words));
            }
        }
        at = end;
    };
    let sent_subject = fields
        .iter()
        .position(|(n, _)| *n == PREV_SUBJECT)
        .map(|i| fields.remove(i).1);
    let mut subjects = Vec::new();
    let mut out = Vec::new();
    for (name, words) in fields {
        if name == "subject" {
            subjects.push(words);
        } else {
            push_field(&mut out, name, &words);
        }
    }
    if let Some(sent) = sent_subject {
        match subjects.first_mut() {
            Some(first) => *first = sent,
            None => subjects.push(sent),
        }
    }
    for words in &subjects {
        push_field(&mut out, "subject", words);
    }
    hasher.update(&out);
    // How the block ended, so that a missing blank line is not the same message.
    hasher.update(b"\n");
    hasher.update(ending);
    at
}

/// One field, `name:words`, on a line of its own; a field with no words says nothing.
fn push_field(out: &mut Vec<u8>, name: &str, words: &[u8]) {
    if words.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push(b'\n');
    }
    out.extend_from_slice(name.as_bytes());
    out.push(b':');
    out.extend_from_slice(words);
}

/// Where the name of the field `line` ends: at its colon, when what comes before is a
/// field name (printable ASCII, no space, white space allowed before the colon).
fn field_name_end(line: &[u8]) -> Option<usize> {
    let colon = memchr::memchr(b':', line)?;
    let name = line[..colon].trim_ascii_end();
    (!name.is_empty() && name.iter().all(|b| b.is_ascii_graphic())).then_some(colon)
}

/// Appends the words of `text` to a field's, one space between each and the one before:
/// how a field is folded and spaced does not count.
fn push_words(words: &mut Vec<u8>, text: &[u8]) {
    for word in text
        .split(|b| matches!(b, b' ' | b'\t'))
        .filter(|w| !w.is_empty())
    {
        if !words.is_empty() {
            words.push(b' ');
        }
        words.extend_from_slice(word);
    }
}

/// Hashes every header line but those of spamnb's own fields; returns where the body
/// begins (past the empty line, or the end when there is none).
fn hash_fields_but_own(raw: &[u8], hasher: &mut Sha256) -> usize {
    let mut skipping = false;
    let mut at = 0;
    while at < raw.len() {
        let end = line_end(raw, at);
        let line = &raw[at..end];
        at = end;
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if content.is_empty() {
            hasher.update(b"\n");
            break;
        }
        if content[0] == b' ' || content[0] == b'\t' {
            if skipping {
                continue;
            }
        } else {
            let name = content.split(|&b| b == b':').next().unwrap_or_default();
            skipping = std::str::from_utf8(name).is_ok_and(is_own_header);
            if skipping {
                continue;
            }
        }
        hasher.update(content);
        hasher.update(b"\n");
    }
    at
}

/// [`hash_body`], a line of `>`s and `From ` read as `From `: an mbox quotes such lines,
/// mboxo writers (Postfix's local, procmail) do not unquote `>From `, and an mbox is read as
/// mboxrd, so a copy from an mbox and one from a file differ in them and nowhere else. A
/// body without such a line (most mail) hashes as it always has.
fn hash_body_unquoted(body: &[u8], hasher: &mut Sha256) {
    hash_body(&super::from_lines_unquoted(body, true), hasher);
}

/// Hashes the body as it is but for its line endings: a CR before each LF is left out,
/// and the last line ends in LF whether or not it did.
fn hash_body(body: &[u8], hasher: &mut Sha256) {
    let mut from = 0;
    for cr in memchr::memmem::find_iter(body, b"\r\n") {
        hasher.update(&body[from..cr]);
        from = cr + 1;
    }
    let tail = &body[from..];
    if !tail.is_empty() && !tail.ends_with(b"\n") {
        hasher.update(tail.strip_suffix(b"\r").unwrap_or(tail));
        hasher.update(b"\n");
    } else {
        hasher.update(tail);
    }
}

#[cfg(test)]
mod tests {
    use super::DigestKind::{AsSent, WholeMessage};
    use super::*;

    fn hex(d: Digest) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Both readings are keys of ledgers on disk: a change to either loses what every
    /// database made with it knows. The values are SHA-256 of `Received: from a\nSubject:
    /// Hello\n  there\nFrom: a@b\n\nbody\n` and of `from:a@b\nsubject:Hello there\n\nbody\n`.
    #[test]
    fn digests_never_change() {
        let raw = b"Received: from a\r\nSubject: Hello\r\n  there\r\nFrom: a@b\r\n\r\nbody\r\n";
        assert_eq!(
            hex(WholeMessage.of(raw)),
            "a6a108ab0f195fcd3ef86925473a786b"
        );
        assert_eq!(hex(AsSent.of(raw)), "b5c6e31191056169d336b2b3f8e91abb");
    }

    /// The copy Postfix hands the milter and the one it delivers: the delivered one has
    /// delivery's trace fields, other filters' verdicts, spamnb's headers, LF line endings
    /// and a subject refolded; the scored one Postfix's own Received line and CRLF.
    #[test]
    fn as_sent_digest_is_the_scored_copy_and_the_delivered_one() {
        let scored = b"Received: from mx.example.net by mail.example.org (Postfix) id 1\r\n\
From: Alice <a@example.net>\r\nTo: b@example.org\r\nSubject: the quarterly\r\n report\r\n\
Date: Mon, 1 Jan 2024 10:00:00 +0000\r\nMessage-ID: <1@example.net>\r\n\
Content-Type: text/plain\r\n\r\nHello,\r\nthe report.\r\n";
        let delivered = b"Return-Path: <a@example.net>\nDelivered-To: b@example.org\n\
Received: from mail.example.org by imap.example.org with LMTP id 2\n\
Received: from mx.example.net by mail.example.org (Postfix) id 1\n\
Authentication-Results: mail.example.org; dkim=pass\nX-Virus-Scanned: clean\n\
From: Alice <a@example.net>\nTo: b@example.org\nSubject:   the quarterly report\n\
Date: Mon, 1 Jan 2024 10:00:00 +0000\nMessage-ID: <1@example.net>\n\
Content-Type: text/plain\nX-Spam-Flag: NO\nX-Spam-Status: No, score=-3.1\n\ttests=none\n\
\nHello,\nthe report.\n";
        assert_eq!(AsSent.of(scored), AsSent.of(delivered));
        assert_ne!(WholeMessage.of(scored), WholeMessage.of(delivered));
    }

    /// The copy procmail pipes to a filter, after the `From ` line it delivers with, and the
    /// copy it delivers to a Maildir, without one.
    #[test]
    fn an_envelope_line_is_no_part_of_the_digest() {
        let delivered = b"From: a@b\nSubject: hi\n\nbody\n";
        let piped = b"From a@b  Mon Dec  7 16:27:57 2026\nFrom: a@b\nSubject: hi\n\nbody\n";
        for kind in DigestKind::ALL {
            assert_eq!(kind.of(piped), kind.of(delivered), "{}", kind.name());
        }
    }

    /// A subject spamnb tagged is read from where it kept the original: the tagged copy
    /// is the message that was scored, with a subject or without one.
    #[test]
    fn as_sent_digest_reads_a_tagged_subject_as_it_was_sent() {
        let sent = b"From: a@b\nSubject: cheap\n  pills\nTo: c@d\n\nbuy\n";
        let tagged = b"From: a@b\nSubject: [SPAM 9.1] cheap\n  pills\nTo: c@d\n\
X-Spam-Flag: YES\nX-Spam-Prev-Subject: cheap pills\n\nbuy\n";
        assert_eq!(AsSent.of(sent), AsSent.of(tagged));
        // Wherever the record stands among the fields, the others keep their order.
        let amid = b"From: a@b\nX-Spam-Prev-Subject: cheap pills\nSubject: [SPAM] cheap pills\n\
To: c@d\nCc: e@f\nDate: today\n\nbuy\n";
        let sent = b"From: a@b\nSubject: cheap pills\nTo: c@d\nCc: e@f\nDate: today\n\nbuy\n";
        assert_eq!(AsSent.of(amid), AsSent.of(sent));
        let none = b"From: a@b\nTo: c@d\n\nbuy\n";
        let tagged = b"From: a@b\nTo: c@d\nSubject: [SPAM]\nX-Spam-Prev-Subject:\n\nbuy\n";
        assert_eq!(AsSent.of(none), AsSent.of(tagged));
        assert_ne!(AsSent.of(sent), AsSent.of(none));
    }

    #[test]
    fn as_sent_digest_tells_messages_apart() {
        let base = "From: a@example.net\nTo: b@example.org\nSubject: hi\nDate: Mon, 1 Jan 2024 \
10:00:00 +0000\nMessage-ID: <1@x>\nContent-Type: text/plain\n\nbody\n";
        let digest = AsSent.of(base.as_bytes());
        for (what, from, to) in [
            ("sender", "a@example.net", "c@example.net"),
            ("recipient", "b@example.org", "c@example.org"),
            ("subject", "hi", "hi!"),
            ("date", "10:00", "10:01"),
            ("message id", "<1@x>", "<2@x>"),
            ("content type", "plain", "html"),
            ("body", "body", "bodies"),
            ("a word boundary", "Subject: hi", "Subject: h i"),
            ("the blank line", "\n\nbody", "\nbody"),
        ] {
            let other = base.replacen(from, to, 1);
            assert_ne!(digest, AsSent.of(other.as_bytes()), "{what}");
        }
        // Text that is no header is content: it is never left out as an unknown field.
        for (a, b) in [
            (&b"just some text\n"[..], &b"other text\n"[..]),
            (
                b"Received: x\r y\rSubject: a\r\rbody",
                b"Received: x\r y\rSubject: b\r\rbody",
            ),
            (b" leading: space\n\nx", b" leading: blank\n\nx"),
            (b"\xff\xfe: binary\n\nx", b"\xff\xfd: binary\n\nx"),
        ] {
            assert_ne!(
                AsSent.of(a),
                AsSent.of(b),
                "{:?}",
                String::from_utf8_lossy(a)
            );
        }
    }

    /// Fields added above any message (trace, verdicts, spamnb's own) never change its
    /// digest, whatever the message: mixes of fields, folds, bare CRs and garbage.
    #[test]
    fn as_sent_digest_ignores_fields_added_above() {
        let pieces: [&[u8]; 12] = [
            b"a",
            b"\r",
            b"\n",
            b"\r\n",
            b" ",
            b"\t",
            b"Subject: x",
            b"From:y",
            b"X-Spam-Flag: YES",
            b"Received: z",
            b":",
            b"\xc3",
        ];
        let added = b"Return-Path: <a@b>\r\nDelivered-To: c@d\nReceived: from e\n\tby f\n\
X-Spam-Status: Yes\nAuthentication-Results: g\n";
        let mut next = crate::xorshift(777);
        for _ in 0..20_000 {
            let mut raw = Vec::new();
            for _ in 0..next() % 20 {
                raw.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
            }
            // A message that begins with white space has no first field to stand before.
            if raw.first().is_some_and(|b| matches!(b, b' ' | b'\t')) {
                continue;
            }
            let with = [&added[..], &raw].concat();
            assert_eq!(
                AsSent.of(&raw),
                AsSent.of(&with),
                "{:?}",
                String::from_utf8_lossy(&raw)
            );
        }
    }

    /// An mboxo copy of a message (its `>From ` lines left quoted by the writer, and losing
    /// a `>` when read as mboxrd) and its copy in a file are one message as sent.
    #[test]
    fn as_sent_digest_reads_quoted_from_lines_as_from_lines() {
        let head = "From: a@b\r\nSubject: re: archive\r\n\r\nquoted below\r\n";
        let digest =
            |kind: DigestKind, line: &str| kind.of(format!("{head}{line}\r\nbye").as_bytes());
        for line in [
            "From the archive",
            ">From the archive",
            ">>From the archive",
        ] {
            assert_eq!(
                digest(AsSent, line),
                digest(AsSent, "From the archive"),
                "{line:?}"
            );
        }
        for line in [
            "> From the archive",
            ">From: the archive",
            "x>From the archive",
        ] {
            assert_ne!(
                digest(AsSent, line),
                digest(AsSent, "From the archive"),
                "{line:?}"
            );
        }
        // The whole message is read as it always was: old ledgers keep it.
        assert_ne!(
            digest(WholeMessage, ">From the archive"),
            digest(WholeMessage, "From the archive")
        );
    }

    #[test]
    fn kinds_are_named_both_ways() {
        for kind in [AsSent, WholeMessage] {
            assert_eq!(DigestKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(DigestKind::from_name("sha1"), None);
    }

    #[test]
    fn whole_message_digest_ignores_own_headers_and_line_endings() {
        let plain = b"Subject: hi\nFrom: a@b\n\nbody\n";
        let tagged = b"X-Spam-Flag: YES\r\nSubject: hi\r\nX-Spam-Status: Yes, score=9\r\n tests=A,B\r\nFrom: a@b\r\n\r\nbody\r\n";
        assert_eq!(WholeMessage.of(plain), WholeMessage.of(tagged));
        assert_ne!(
            WholeMessage.of(plain),
            WholeMessage.of(b"Subject: hi\nFrom: a@b\n\nbody!\n")
        );
        // A body line that looks like our header is content, not ours.
        assert_ne!(
            WholeMessage.of(b"S: x\n\nX-Spam-Flag: YES\n"),
            WholeMessage.of(b"S: x\n\n")
        );
    }

    /// A digest is a ledger's key, so it may never change: the body hashed in runs
    /// between CRLFs is what hashing it a line at a time gave, for every mix of line
    /// endings (lone CRs, CR CR LF, no final newline, a final CR, no body, no blank line).
    #[test]
    fn whole_message_digest_is_the_line_by_line_digest() {
        fn by_lines(raw: &[u8]) -> Digest {
            let mut lines = raw.split_inclusive(|&b| b == b'\n').map(|line| {
                let line = line.strip_suffix(b"\n").unwrap_or(line);
                line.strip_suffix(b"\r").unwrap_or(line)
            });
            let mut kept: Vec<&[u8]> = Vec::new();
            let mut ours = false;
            for line in lines.by_ref() {
                if line.is_empty() {
                    kept.push(line);
                    break;
                }
                if !matches!(line[0], b' ' | b'\t') {
                    let name = line.split(|&b| b == b':').next().unwrap_or_default();
                    ours = std::str::from_utf8(name).is_ok_and(is_own_header);
                }
                if !ours {
                    kept.push(line);
                }
            }
            kept.extend(lines);
            let mut hasher = Sha256::new();
            for line in kept {
                hasher.update(line);
                hasher.update(b"\n");
            }
            hasher.finalize()[..16].try_into().unwrap()
        }
        let pieces: [&[u8]; 9] = [
            b"a",
            b"\r",
            b"\n",
            b"\r\n",
            b" ",
            b"X-Spam-Flag: YES",
            b"Subject: x",
            b"\t",
            b"",
        ];
        let mut next = crate::xorshift(12345);
        for _ in 0..20_000 {
            let mut raw = Vec::new();
            for _ in 0..next() % 16 {
                raw.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
            }
            assert_eq!(
                WholeMessage.of(&raw),
                by_lines(&raw),
                "{:?}",
                String::from_utf8_lossy(&raw)
            );
        }
    }
}
