//! SpamAssassin's MIME tests that read the parts as written: attachments, oddly named
//! charsets, over-long quoted-printable and base64 lines, how much text stands beside
//! the HTML of a multipart/alternative and how different it is, and what the parser found
//! malformed.

use std::sync::LazyLock;

use regex::Regex;

use super::eval::Facts;
use super::mime_tree::{MimeTree, ParseFlag};
use crate::message::{ContentType, Message, TransferEncoding};

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

/// A leaf of the message as written: its content type and transfer encoding, whether it is
/// an attachment, and its body.
struct Leaf<'m> {
    content_type: &'m ContentType,
    encoding: TransferEncoding,
    attachment: bool,
    body: &'m [u8],
}

fn lowercase(value: Option<&str>) -> String {
    value.unwrap_or_default().trim().to_ascii_lowercase()
}

/// The parts with a body of their own: the message itself when it has no parts.
fn leaves<'m>(msg: &'m Message, tree: &'m MimeTree) -> Vec<Leaf<'m>> {
    if tree.parts.is_empty() {
        return vec![Leaf {
            content_type: &tree.content_type,
            encoding: tree.encoding,
            attachment: lowercase(msg.header("content-disposition")).contains("attachment"),
            body: msg.raw_body(),
        }];
    }
    let raw = msg.raw;
    (tree.parts.iter())
        .filter(|p| !p.content_type.is_written_as("multipart/"))
        .map(|p| Leaf {
            content_type: &p.content_type,
            encoding: p.encoding,
            attachment: lowercase(p.header("content-disposition")).contains("attachment"),
            body: raw.get(p.body.clone()).unwrap_or_default(),
        })
        .collect()
}

/// The Content-Type of the message, then of each part.
fn content_types(tree: &MimeTree) -> impl Iterator<Item = &ContentType> {
    std::iter::once(&tree.content_type).chain(tree.parts.iter().map(|p| &p.content_type))
}

/// Lines of a body, their line ends taken off.
fn lines(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    body.split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
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
                self.holds_in_parts(msg, facts.mime_tree())
            }
        }
    }

    /// The tests that read each part on its own.
    fn holds_in_parts(&self, msg: &Message, tree: &MimeTree) -> bool {
        match self {
            Test::Attachment => {
                lowercase(msg.header("content-disposition")).contains("attachment")
                    || (tree.parts.iter())
                        .any(|p| lowercase(p.header("content-disposition")).contains("attachment"))
            }
            Test::BadIsoCharset => content_types(tree)
                .filter_map(|ct| Some(ct.charset.as_deref()?.to_ascii_lowercase()))
                .any(|c| ISO_CHARSET.is_match(&c) && !USUAL_ISO_CHARSET.is_match(&c)),
            Test::QpLongLine => leaves(msg, tree)
                .iter()
                .filter(|leaf| leaf.encoding == TransferEncoding::QuotedPrintable)
                .any(|leaf| lines(leaf.body).any(|line| line.len() > 78)),
            Test::Base64Length(min, max) => {
                let longest = (leaves(msg, tree).iter())
                    .filter(|leaf| leaf.encoding == TransferEncoding::Base64)
                    .filter(|leaf| !leaf.content_type.is_written_as("text/calendar"))
                    .flat_map(|leaf| lines(leaf.body).map(|line| line.len() + 1))
                    .max()
                    .unwrap_or(0) as f64;
                longest >= *min && longest <= *max
            }
            Test::MultipartRatio(min, max) => {
                let alternative =
                    content_types(tree).any(|ct| ct.is_written_as("multipart/alternative"));
                let leaves = leaves(msg, tree);
                // The last text and HTML parts, as SpamAssassin takes them.
                let last = |kind: &str| {
                    (leaves.iter().rev())
                        .find(|leaf| !leaf.attachment && leaf.content_type.is_written_as(kind))
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
    fn unusual_iso_charsets_are_bad() {
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
