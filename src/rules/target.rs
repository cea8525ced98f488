//! The header text that header rules read: `Subject`, `From:addr`, `ALL`, `ToCc`… (each
//! MIME part's fields, which mimeheader rules read, are `mime_tree`'s).

use std::borrow::Cow;

use mail_parser::HeaderValue;
use mail_parser::parsers::MessageStream;

use crate::message::{Message, unfolded};

/// Which header text a header rule reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// All values of the header, joined by newlines; with modifiers.
    Header {
        name: String,
        raw: bool,
        part: Part,
    },
    /// Every header as `Name: value` lines.
    All,
    /// The To and Cc fields, raw and unfolded, as `part` reads them.
    ToCc(Part),
    EnvelopeFrom,
    MessageId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    Whole,
    /// `:addr`: the first mail address.
    Addr,
    /// `:addrs` (spamnb's own): every mail address of every value, one a line.
    Addrs,
    /// `:name`: the first display name.
    Name,
    /// `:host`/`:domain`: the domain of the first address.
    Host,
}

impl Target {
    pub(super) fn parse(spec: &str) -> Result<Target, String> {
        let mut parts = spec.split(':');
        let name = parts.next().unwrap_or_default().trim();
        let (mut raw, mut part) = (false, Part::Whole);
        for m in parts {
            match m {
                "raw" => raw = true,
                "addr" => part = Part::Addr,
                "addrs" => part = Part::Addrs,
                "name" => part = Part::Name,
                "host" | "domain" => part = Part::Host,
                "first" | "last" | "" => {}
                m => return Err(format!("header modifier :{m} is not supported")),
            }
        }
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(format!("bad header name {name:?}"));
        }
        Ok(match (name, part) {
            ("ALL", Part::Whole) => Target::All,
            ("ToCc", part) => Target::ToCc(part),
            ("EnvelopeFrom", _) => Target::EnvelopeFrom,
            ("MESSAGEID", _) => Target::MessageId,
            _ => Target::Header {
                name: name.to_string(),
                raw,
                part,
            },
        })
    }

    /// The first mail address in a header value, in angle brackets or bare. Never one
    /// written in a quoted display name or a comment: those are the sender's free text,
    /// which no check authenticates (`"<boss@partner.example>" <spam@evil.example>`
    /// would pass for the partner), so such values go to mail-parser's address parser.
    pub fn address(value: &str) -> Option<String> {
        let quotes = memchr::memchr2(b'"', b'(', value.as_bytes()).is_some();
        if quotes && !is_quoted_name_address(value) {
            return parsed_addresses(value).into_iter().next();
        }
        plain_address(value)
    }
    /// The text, borrowed from the message when it is one header value as it stands (most
    /// are): a header rule set reads a dozen of them from every message.
    pub(super) fn text<'m>(&'m self, msg: &'m Message) -> Option<Cow<'m, str>> {
        match self {
            Target::All => joined(
                msg.headers
                    .iter()
                    .map(|h| format!("{}: {}", h.name, h.value)),
            ),
            // Raw, unfolded: re-rendered address lists lose group names such as
            // "undisclosed-recipients:;".
            Target::ToCc(part) => {
                let mut fields = msg.raw_header_values("to");
                fields.extend(msg.raw_header_values("cc"));
                part.of(fields.into_iter().map(unfolded))
            }
            Target::EnvelopeFrom => msg
                .header("return-path")
                .or_else(|| msg.header("x-envelope-from"))
                .map(|v| Cow::Owned(Target::address(v).unwrap_or_else(|| v.to_string()))),
            Target::MessageId => joined(
                ["message-id", "resent-message-id", "x-message-id"]
                    .iter()
                    .flat_map(|h| msg.header_values(h))
                    .map(Cow::Borrowed),
            ),
            Target::Header {
                name,
                raw: true,
                part,
            } => part.of(msg
                .raw_header_values(name)
                .into_iter()
                .map(String::from_utf8_lossy)),
            // Addresses from the field as sent: RFC 2047 allows no encoded word in one, and
            // one that decodes to `<service@paypal.com> "` would lend its address.
            Target::Header {
                name,
                raw: false,
                part: part @ (Part::Addr | Part::Addrs | Part::Host),
            } => part.of(msg.raw_header_values(name).into_iter().map(unfolded)),
            Target::Header {
                name,
                raw: false,
                part,
            } => part.of(msg.header_values(name).map(Cow::Borrowed)),
        }
    }

    /// The addresses of the text `:addrs` reads, lowercase, without joining them into a
    /// text to split again.
    pub(super) fn addresses(&self, msg: &Message) -> Vec<String> {
        let lowercase = |mut a: String| {
            a.make_ascii_lowercase();
            a
        };
        match self {
            Target::Header {
                name,
                raw: false,
                part: Part::Addrs,
            } => msg
                .raw_header_values(name)
                .into_iter()
                .flat_map(|v| addresses(&unfolded(v)))
                .filter(|a| !a.is_empty())
                .map(lowercase)
                .collect(),
            _ => self.text(msg).map_or_else(Vec::new, |t| {
                t.lines()
                    .map(|a| a.trim().to_ascii_lowercase())
                    .filter(|a| !a.is_empty())
                    .collect()
            }),
        }
    }
}

/// The envelope sender as delivery recorded it (Return-Path), lowercase.
pub(super) fn envelope_sender(msg: &Message) -> Option<String> {
    let text = Target::EnvelopeFrom.text(msg)?;
    let sender = text.trim().to_ascii_lowercase();
    sender.contains('@').then_some(sender)
}

impl Part {
    /// This part of a header's `values`: all of them one a line, or of the first one.
    fn of<'m>(self, mut values: impl Iterator<Item = Cow<'m, str>>) -> Option<Cow<'m, str>> {
        let text = match self {
            Part::Whole => return joined(values),
            Part::Addr => Target::address(&values.next()?).unwrap_or_default(),
            Part::Addrs => {
                let all: Vec<String> = values.flat_map(|v| addresses(&v)).collect();
                if all.is_empty() {
                    return None;
                }
                all.join("\n")
            }
            Part::Host => Target::address(&values.next()?)?
                .rsplit('@')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase(),
            Part::Name => {
                let first = values.next()?;
                match first.find('<') {
                    Some(at) => first[..at].trim().trim_matches('"').to_string(),
                    None => String::new(),
                }
            }
        };
        Some(Cow::Owned(text))
    }
}

/// The first mail address in a value with no quotes or comments.
fn plain_address(value: &str) -> Option<String> {
    if let Some(start) = value.find('<') {
        let rest = &value[start + 1..];
        let end = rest.find('>').unwrap_or(rest.len());
        return Some(rest[..end].trim().to_string());
    }
    value
        .split([' ', ',', ';'])
        .find(|w| w.contains('@'))
        .map(|w| w.trim_matches(')').to_string())
}

/// Every mail address in an address list value, as mail-parser reads the list (quoted
/// names with commas, groups, comments); the first address by [`Target::address`] when
/// it reads none.
fn addresses(value: &str) -> Vec<String> {
    // Most fields are one address, bare or in angle brackets after a plain name: read as
    // the parser would read them, without its allocations. Quotes, comments and lists go
    // to the parser.
    let simple = memchr::memchr(b'@', value.as_bytes())
        .is_some_and(|at| !value[at + 1..].contains('@'))
        && !(value.bytes()).any(|b| matches!(b, b'"' | b',' | b';' | b'(' | b'\\' | b':'));
    if simple || is_quoted_name_address(value) {
        return plain_address(value).into_iter().collect();
    }
    let parsed = parsed_addresses(value);
    if parsed.is_empty() {
        Target::address(value).into_iter().collect()
    } else {
        parsed
    }
}

/// Whether `value` is `"Display Name" <local@domain>` and no more, as most From fields
/// are: the parser reads the address in the brackets, and so does [`plain_address`]
/// without its allocations (the parser took 9 M instructions over 2,000 messages, which
/// read From three times each; 1 M with this). Only where nothing could make the parser
/// read it otherwise: no backslash, line break, bracket or encoded word in the name, and
/// in the brackets one `@` among characters that are an address's own.
fn is_quoted_name_address(value: &str) -> bool {
    // Trimmed as the parser skips: spaces and tabs.
    let Some(rest) = value.trim_matches([' ', '\t']).strip_prefix('"') else {
        return false;
    };
    let Some((name, rest)) = rest.split_once('"') else {
        return false;
    };
    let rest = rest.trim_start_matches([' ', '\t']);
    let Some(address) = rest.strip_prefix('<').and_then(|r| r.strip_suffix('>')) else {
        return false;
    };
    let mut before = b' ';
    let plain_name = name.bytes().all(|b| {
        let encoded_word = before == b'=' && b == b'?';
        before = b;
        !encoded_word && !matches!(b, b'\\' | b'\n' | b'\r' | b'<' | b'>')
    });
    let plain = |b: u8| b.is_ascii_graphic() && !b"\"(),:;<>?[]\\".contains(&b);
    plain_name && address.bytes().all(plain) && address.bytes().filter(|&b| b == b'@').count() == 1
}

/// The mail addresses mail-parser reads in an address list value.
fn parsed_addresses(value: &str) -> Vec<String> {
    // The parser reads a field to its line end.
    let field = format!("{value}\n");
    match MessageStream::new(field.as_bytes()).parse_address() {
        HeaderValue::Address(list) => list
            .iter()
            .filter_map(|a| a.address())
            .filter(|a| a.contains('@'))
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    }
}

/// Values one a line; one value as it is.
pub(super) fn joined<'m, S: Into<Cow<'m, str>>>(
    values: impl Iterator<Item = S>,
) -> Option<Cow<'m, str>> {
    let mut values = values.map(Into::into);
    let first = values.next()?;
    let Some(second) = values.next() else {
        return Some(first);
    };
    let mut out = first.into_owned();
    for v in std::iter::once(second).chain(values) {
        out.push('\n');
        out.push_str(&v);
    }
    Some(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_name_before_an_address_reads_as_the_parser_reads_it() {
        // (value, whether it takes the short way)
        for (value, short) in [
            ("\"Jane Doe\" <jane@example.com>", true),
            (
                "  \"Doe, Jane (HR)\"\t<jane.doe+x=y@mail.example.org>  ",
                true,
            ),
            ("\"\" <jane@example.com>", true),
            ("\"boss@partner.example\" <spam@evil.example>", true),
            ("\"Jane\"<jane@example.com>", true),
            // The parser's own cases: escapes, encoded words, comments, lists, brackets
            // in the name, what follows the address.
            ("\"Jane \\\" Doe\" <jane@example.com>", false),
            ("\"=?utf-8?q?Jane?=\" <jane@example.com>", false),
            ("\"Jane\" <jane@example.com> (home)", false),
            (
                "\"Jane\" <jane@example.com>, \"Joe\" <joe@example.com>",
                false,
            ),
            ("\"<boss@partner.example>\" <spam@evil.example>", false),
            ("\"Jane\" <jane(x)@example.com>", false),
            ("\"Jane\" <jane @example.com>", false),
            ("\"Jane\" <jane@a@example.com>", false),
            ("\"Jane\" <jane?=@example.com>", false),
            ("\"Jane\" x <jane@example.com>", false),
            ("\"Jane <jane@example.com>", false),
        ] {
            assert_eq!(is_quoted_name_address(value), short, "{value:?}");
            let parsed = parsed_addresses(value);
            assert_eq!(Target::address(value), parsed.first().cloned(), "{value:?}");
            if short {
                assert_eq!(addresses(value), parsed, "{value:?}");
            }
        }
    }
}
