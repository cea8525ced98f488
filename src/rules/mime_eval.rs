//! SpamAssassin's MIME tests that read the parts as written: attachments, oddly named
//! charsets, over-long quoted-printable and base64 lines, how much text stands beside
//! the HTML of a multipart/alternative and how different it is, and what the parser found
//! malformed.

use std::sync::LazyLock;

use regex::Regex;

use super::eval::Facts;
use super::mime_tree::{MimePart, MimeTree, ParseFlag};
use super::target::content_type_param;
use crate::message::Message;

#[derive(Debug, Clone)]
pub enum Test {
    /// A part (or the message) with `Content-Disposition: attachment`.
    Attachment,
    /// A charset named `iso-…-…` that is neither ISO 8859 nor ISO 2022 for Japanese or
    /// Korean.
    BadIsoCharset,
    /// A quoted-printable line longer than 78 characters (RFC 5322's limit).
    QpLongLine,
    /// The longest line of a base64 part, its line end counted, in [min, max]
    /// (calendar invitations, which write long ones, passed over).
    Base64Length(f64, f64),
    /// The text part's bytes per byte of the HTML part in a multipart/alternative (1
    /// where there is no such pair), in [min, max).
    MultipartRatio(f64, f64),
    /// Something SpamAssassin's parser records as malformed.
    ParseFlag(ParseFlag),
    /// A multipart/alternative with a part of its own that is not text (an image, an
    /// attachment): nothing its reader can choose instead of the other parts.
    AlternativeNotText,
    /// Of the distinct words of a multipart/alternative's HTML, the percentage its text
    /// lacks, in (min, max] (from 0 for a min of 0).
    AlternativeDifference(f64, f64),
    /// An HTML part of more than `min_html` distinct words beside a text part of more than
    /// `ratio` times as many, in a multipart/alternative.
    AlternativeWordRatio { ratio: f64, min_html: f64 },
}

/// A leaf of the message as written: its content type and transfer encoding, lowercase,
/// whether it is an attachment, and its body.
struct Leaf<'m> {
    content_type: String,
    encoding: String,
    attachment: bool,
    body: &'m [u8],
}

fn lowercase(value: Option<&str>) -> String {
    value.unwrap_or_default().trim().to_ascii_lowercase()
}

/// The parts with a body of their own: the message itself when it has no parts.
fn leaves<'m>(msg: &'m Message, parts: &[MimePart]) -> Vec<Leaf<'m>> {
    if parts.is_empty() {
        return vec![Leaf {
            content_type: lowercase(msg.header("content-type")),
            encoding: lowercase(msg.header("content-transfer-encoding")),
            attachment: lowercase(msg.header("content-disposition")).contains("attachment"),
            body: msg.raw_body(),
        }];
    }
    let raw = msg.raw;
    (parts.iter())
        .map(|p| Leaf {
            content_type: lowercase(p.header("content-type")),
            encoding: lowercase(p.header("content-transfer-encoding")),
            attachment: lowercase(p.header("content-disposition")).contains("attachment"),
            body: raw.get(p.body.clone()).unwrap_or_default(),
        })
        .filter(|leaf| !leaf.content_type.starts_with("multipart/"))
        .collect()
}

/// Lines of a body, their line ends taken off.
fn lines(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    body.split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

/// The `charset` parameter of a Content-Type value, lowercase.
fn charset(content_type: &str) -> Option<String> {
    content_type_param(content_type, "charset").map(|c| c.to_ascii_lowercase())
}

static ISO_CHARSET: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"iso-\S+-\S+\b").expect("a valid pattern"));
static USUAL_ISO_CHARSET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"iso-(?:8859-\d{1,2}|2022-(?:jp|kr))\b").expect("a valid pattern")
});

impl Test {
    pub(super) fn holds(&self, facts: &mut Facts) -> bool {
        match self {
            Test::ParseFlag(flag) => facts.mime_tree().flags.contains(*flag),
            Test::AlternativeNotText => alternative_not_text(facts.mime_tree()),
            Test::AlternativeDifference(min, max) => {
                let percent = facts.alternative_difference().percent;
                (*min == 0.0 || percent > *min) && percent <= *max
            }
            Test::AlternativeWordRatio { ratio, min_html } => {
                let d = facts.alternative_difference();
                let (html, text) = (d.html_words as f64, d.text_words as f64);
                html > *min_html && text / html > *ratio
            }
            _ => {
                let msg = facts.msg;
                self.holds_in_parts(msg, facts.mime_parts())
            }
        }
    }

    /// The tests that read each part on its own.
    fn holds_in_parts(&self, msg: &Message, parts: &[MimePart]) -> bool {
        match self {
            Test::Attachment => {
                lowercase(msg.header("content-disposition")).contains("attachment")
                    || (parts.iter())
                        .any(|p| lowercase(p.header("content-disposition")).contains("attachment"))
            }
            Test::BadIsoCharset => std::iter::once(msg.header("content-type"))
                .chain(parts.iter().map(|p| p.header("content-type")))
                .filter_map(|ct| charset(ct?))
                .any(|c| ISO_CHARSET.is_match(&c) && !USUAL_ISO_CHARSET.is_match(&c)),
            Test::QpLongLine => leaves(msg, parts)
                .iter()
                .filter(|leaf| leaf.encoding == "quoted-printable")
                .any(|leaf| lines(leaf.body).any(|line| line.len() > 78)),
            Test::Base64Length(min, max) => {
                let longest = (leaves(msg, parts).iter())
                    .filter(|leaf| leaf.encoding == "base64")
                    .filter(|leaf| !leaf.content_type.starts_with("text/calendar"))
                    .flat_map(|leaf| lines(leaf.body).map(|line| line.len() + 1))
                    .max()
                    .unwrap_or(0) as f64;
                longest >= *min && longest <= *max
            }
            Test::MultipartRatio(min, max) => {
                let alternative = std::iter::once(msg.header("content-type"))
                    .chain(parts.iter().map(|p| p.header("content-type")))
                    .any(|ct| lowercase(ct).starts_with("multipart/alternative"));
                let leaves = leaves(msg, parts);
                // The last text and HTML parts, as SpamAssassin takes them.
                let last = |kind: &str| {
                    (leaves.iter().rev())
                        .find(|leaf| !leaf.attachment && leaf.content_type.starts_with(kind))
                        .map(|leaf| leaf.body.len() as f64)
                };
                let ratio = match (alternative, last("text/plain"), last("text/html")) {
                    (true, Some(text), Some(html)) if html > 0.0 => text / html,
                    _ => 1.0,
                };
                ratio >= *min && ratio < *max
            }
            // Read by `holds`, from the whole tree.
            Test::ParseFlag(_)
            | Test::AlternativeNotText
            | Test::AlternativeDifference(..)
            | Test::AlternativeWordRatio { .. } => false,
        }
    }
}

/// Whether a multipart/alternative directly holds a part (not a multipart) that is
/// neither text, RTF nor a multipart/related.
fn alternative_not_text(tree: &MimeTree) -> bool {
    (tree.nodes())
        .filter(|&n| tree.media_type(n) == "multipart/alternative")
        .flat_map(|n| tree.children(n))
        // A part holding parts is no choice of its own (SpamAssassin does not look inside).
        .filter(|&c| tree.is_leaf(Some(c)))
        .map(|c| tree.media_type(Some(c)))
        .any(|kind| {
            !kind.starts_with("text/")
                && !kind.starts_with("multipart/")
                && kind != "application/rtf"
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charsets_are_read_from_content_types() {
        assert_eq!(
            charset("text/plain; charset=\"ISO-8859-1\"").as_deref(),
            Some("iso-8859-1")
        );
        assert_eq!(
            charset("text/html;charset=utf-8; format=flowed").as_deref(),
            Some("utf-8")
        );
        assert_eq!(charset("text/plain"), None);
        for (name, bad) in [
            ("iso-8859-15", false),
            ("iso-2022-jp", false),
            ("iso-10646-ucs-2", true),
            ("iso-ir-111", true),
            ("utf-8", false),
        ] {
            assert_eq!(
                ISO_CHARSET.is_match(name) && !USUAL_ISO_CHARSET.is_match(name),
                bad,
                "{name}"
            );
        }
    }
}
