//! How far the plain text of a multipart/alternative differs from its HTML, in words, as
//! SpamAssassin's `multipart_alternative_difference` tests measure it: spam often sends an
//! HTML advert with a text part of innocent words.
//!
//! [`Message`] keeps the text of all parts together, not which alternative each belongs
//! to, so the text and HTML parts under the alternatives are decoded and rendered again
//! here, from the parts as written, and only for a rule set with such a test: each part
//! once, however many alternatives hold it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use mail_parser::decoders::base64::base64_decode;
use mail_parser::decoders::charsets::map::charset_decoder;
use mail_parser::decoders::quoted_printable::quoted_printable_decode;

use super::mime_tree::{MimePart, MimeTree};
use crate::message::content::parameter;
use crate::message::{Message, TransferEncoding, html_to_text};

/// What the words of a message's multipart/alternatives show.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Difference {
    /// Of the distinct words of an alternative's HTML, the percentage its text has fewer
    /// times, or not at all: the largest of any alternative.
    pub(super) percent: f64,
    /// Distinct words of the HTML and of the text, in the last alternative with HTML words.
    pub(super) html_words: usize,
    pub(super) text_words: usize,
}

/// The word difference of the alternatives in `msg`, whose parts are `tree`; nothing for a
/// calendar invitation (its HTML describes the event, which the text does not), as in
/// SpamAssassin.
pub(super) fn difference(msg: &Message, tree: &MimeTree) -> Difference {
    let mut out = Difference::default();
    if is_invitation(tree) {
        return out;
    }
    // Each alternative's parts, nested multiparts' included.
    let alternatives: Vec<Range<usize>> = (tree.nodes())
        .filter(|&n| tree.media_type(n) == "multipart/alternative")
        .map(|n| tree.descendants(n))
        .collect();
    // A part inside nested alternatives counts in each of them: it is rendered once, before
    // any is counted.
    let mut inside = vec![false; tree.parts.len()];
    for parts in &alternatives {
        inside[parts.clone()].fill(true);
    }
    let rendered: Vec<Option<Rendered>> = (tree.parts.iter().zip(inside))
        .map(|(part, inside)| inside.then(|| rendered(part, msg.raw)).flatten())
        .collect();
    for parts in alternatives {
        let (mut html, mut text) = (HashMap::new(), HashMap::new());
        for part in &rendered[parts] {
            match part {
                Some(Rendered::Html { text, image }) => {
                    count_words(&mut html, text);
                    // An HTML part of images alone counts as one word, which no text has.
                    if html.is_empty() && *image {
                        html.insert("\n", 1);
                    }
                }
                Some(Rendered::Text(words)) => count_words(&mut text, words),
                None => {}
            }
        }
        let distinct = html.len();
        if distinct == 0 {
            continue;
        }
        (out.html_words, out.text_words) = (distinct, text.len());
        html.retain(|word, n| text.get(word).is_none_or(|t| t < n));
        out.percent = out.percent.max(html.len() as f64 / distinct as f64 * 100.0);
    }
    out
}

/// Whether the message is an alternative of an HTML part and a text/calendar part alone,
/// as calendar programs send invitations.
fn is_invitation(tree: &MimeTree) -> bool {
    let children: Vec<usize> = tree.children(None).collect();
    let kinds: Vec<&str> = (children.iter())
        .map(|&c| tree.media_type(Some(c)))
        .collect();
    tree.media_type(None) == "multipart/alternative"
        && kinds == ["text/html", "text/calendar"]
        && children.iter().all(|&c| tree.is_leaf(Some(c)))
}

/// A text part as its reader sees it.
enum Rendered {
    Text(String),
    /// HTML rendered to text, and whether it shows an image.
    Html {
        text: String,
        image: bool,
    },
}

/// `part` rendered, if it is text/plain or HTML (text/html, or any text part with a file
/// name of a web page, as SpamAssassin takes it).
fn rendered(part: &MimePart, raw: &[u8]) -> Option<Rendered> {
    if part.media_type.split('/').next() != Some("text") {
        return None;
    }
    let is_html = part.media_type == "text/html" || named_as_web_page(part);
    if !is_html && part.media_type != "text/plain" {
        return None;
    }
    let text = decoded(part, raw);
    Some(match is_html {
        true => Rendered::Html {
            image: has_image(&text),
            text: html_to_text(&text),
        },
        false => Rendered::Text(text),
    })
}

/// Whether the part's file name ends `.htm`, `.html`, `.shtm` or `.shtml`.
fn named_as_web_page(part: &MimePart) -> bool {
    let filename = (part.header("content-disposition")).and_then(|d| parameter(d, "filename"));
    let name = filename.as_deref().or(part.content_type.name.as_deref());
    name.is_some_and(|name| {
        let name = name.to_ascii_lowercase();
        [".htm", ".html", ".shtm", ".shtml"]
            .iter()
            .any(|end| name.ends_with(end))
    })
}

/// Whether HTML has an `<img>` tag.
fn has_image(html: &str) -> bool {
    let bytes = html.as_bytes();
    memchr::memmem::find_iter(bytes, b"<").any(|at| {
        let tag = &bytes[at + 1..];
        tag.get(..3)
            .is_some_and(|name| name.eq_ignore_ascii_case(b"img"))
            && tag.get(3).is_none_or(|b| !b.is_ascii_alphanumeric())
    })
}

/// The text of a part: its transfer encoding undone (where that fails, the bytes as they
/// are) and its charset decoded (an unknown one read as UTF-8).
fn decoded(part: &MimePart, raw: &[u8]) -> String {
    let body = raw.get(part.body.clone()).unwrap_or_default();
    let bytes = match part.encoding {
        TransferEncoding::Base64 => base64_decode(body).map_or(Cow::Borrowed(body), Cow::Owned),
        TransferEncoding::QuotedPrintable => {
            quoted_printable_decode(body).map_or(Cow::Borrowed(body), Cow::Owned)
        }
        TransferEncoding::Unencoded => Cow::Borrowed(body),
    };
    let charset = part.content_type.charset.as_deref();
    match charset.and_then(|c| charset_decoder(c.as_bytes())) {
        Some(decode) => decode(&bytes),
        None => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// Counts the words of `text` into `counts`: what stands between white space, if it has a
/// letter, a digit or `_` of any script (a bullet or a rule of dashes is no word). Case and
/// punctuation are kept: they are the same in both parts of a message written once.
///
/// SpamAssassin looks for an ASCII letter in the undecoded bytes, which finds one in most
/// Big5 or Shift JIS characters (their second byte) and none in UTF-8 Chinese: text decoded
/// here, a letter of any script is what it means.
fn count_words<'t>(counts: &mut HashMap<&'t str, usize>, text: &'t str) {
    let words = text.split(|c: char| c.is_ascii_whitespace());
    for word in words.filter(|w| w.chars().any(|c| c.is_alphanumeric() || c == '_')) {
        *counts.entry(word).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_what_has_a_word_character() {
        let mut counts = HashMap::new();
        count_words(
            &mut counts,
            "Buy  now\t- buy NOW, *** now\n_ 42 \u{7acb}\u{5373} \u{2022}",
        );
        let mut words: Vec<(&str, usize)> = counts.iter().map(|(w, n)| (*w, *n)).collect();
        words.sort();
        assert_eq!(
            words,
            [
                ("42", 1),
                ("Buy", 1),
                ("NOW,", 1),
                ("_", 1),
                ("buy", 1),
                ("now", 2),
                ("\u{7acb}\u{5373}", 1)
            ]
        );
    }

    #[test]
    fn alternatives_are_compared_in_words_decoded() {
        let alternative = |parts: &[(&str, &str)]| {
            let mut m =
                "Subject: a\nContent-Type: multipart/alternative; boundary=b\n\n".to_string();
            for (headers, body) in parts {
                m.push_str(&format!("--b\n{headers}\n\n{body}\n"));
            }
            m + "--b--\n"
        };
        let (plain, html) = ("Content-Type: text/plain", "Content-Type: text/html");
        let cases: Vec<(String, (f64, usize, usize))> = vec![
            // (message, (percent, distinct HTML words, distinct text words))
            (alternative(&[(plain, "Hello there"), (html, "<p>Hello <b>there</b></p>")]), (0.0, 2, 2)),
            (alternative(&[(plain, "Hello"), (html, "<p>Hello there</p>")]), (50.0, 2, 1)),
            // A word more often in the HTML than in the text is one the text lacks.
            (alternative(&[(plain, "buy"), (html, "buy buy")]), (100.0, 1, 1)),
            // Decoded: base64 Latin-1 beside quoted-printable UTF-8.
            (
                alternative(&[
                    (
                        "Content-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: base64",
                        "R3L832Ug\r\nZnJvbQ==",
                    ),
                    (
                        "Content-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: quoted-printable",
                        "<p>Gr=C3=BC=C3=9Fe fr=\nom</p>",
                    ),
                ]),
                (0.0, 2, 2),
            ),
            // An HTML part of an image alone is one word, which no text has.
            (alternative(&[(plain, "Hello"), (html, "<img src=a.gif>")]), (100.0, 1, 1)),
            // No HTML words, nothing to compare; a calendar part is not rendered.
            (alternative(&[(plain, "Hello"), (html, "<p></p>")]), (0.0, 0, 0)),
            (alternative(&[(html, "<p>Meeting</p>"), ("Content-Type: text/calendar", "BEGIN")]), (0.0, 0, 0)),
            (
                alternative(&[(plain, "x"), (html, "<p>Meeting</p>"), ("Content-Type: text/calendar", "BEGIN")]),
                (100.0, 1, 1),
            ),
            // A text part named as a web page is HTML.
            (
                alternative(&[(plain, "Hello"), ("Content-Type: text/plain; name=\"a.HTML\"", "<p>Bye</p>")]),
                (100.0, 1, 1),
            ),
            // A part inside two alternatives counts in both: the inner one lacks "there"
            // (50%), the outer "there" and "Bye"; the sizes are the inner one's, read last.
            (
                alternative(&[
                    (
                        "Content-Type: multipart/alternative; boundary=c",
                        "--c\nContent-Type: text/plain\n\nHello\n\
                         --c\nContent-Type: text/html\n\n<p>Hello there</p>\n--c--",
                    ),
                    (html, "<p>Bye</p>"),
                ]),
                (2.0 / 3.0 * 100.0, 2, 1),
            ),
            // Not in an alternative: not compared.
            (
                "Subject: a\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\
                 Content-Type: text/plain\n\nHello\n--b\nContent-Type: text/html\n\n<p>Bye</p>\n--b--\n"
                    .into(),
                (0.0, 0, 0),
            ),
        ];
        for (raw, (percent, html_words, text_words)) in cases {
            let msg = Message::parse(raw.as_bytes(), 1 << 20);
            let tree = super::super::mime_tree::mime_tree(&msg);
            let expected = Difference {
                percent,
                html_words,
                text_words,
            };
            assert_eq!(difference(&msg, &tree), expected, "{raw}");
        }
    }

    #[test]
    fn images_are_img_tags() {
        for (html, image) in [
            ("<p><IMG src=a.gif></p>", true),
            ("<img/>", true),
            ("<img", true),
            ("<imgs>", false),
            ("an img", false),
            ("<p>x</p>", false),
        ] {
            assert_eq!(has_image(html), image, "{html}");
        }
    }
}
