//! The URLs a message names: written in its text, and the targets of its HTML's links,
//! images and forms, as a browser would follow them.
//!
//! Found by hand from a byte `memchr` looks for, not by regex: a page of HTML names `href`
//! and `src` hundreds of times, and a regex with a word boundary before its literals ran a
//! forward and a reverse DFA from each (a fifth of the cost of reading such a message).
//! What is found is what these patterns would find, left to right without overlap (the
//! tests hold the scanners to them):
//!
//! - in text: `(?i)(?-u:\b)(?:https?://|www\.)[^\s<>"'()\[\]{}]+`
//! - in HTML: `(?i)(?-u:\b)(?:href|src|action)\s*=\s*["']?\s*[^"'\s>]+`, the value being the URL
//!
//! (`\s` is Unicode white space, as `char::is_whitespace`; the cases are ASCII's, so that
//! `(?i)`'s `ſ` for `s` is not a scheme.)

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;

use super::html;
use crate::segment::is_word_byte;

/// A message names at most this many distinct URLs: a page that is nothing but links must
/// not make one message cost more than the rest of a batch.
const MAX_URLS: usize = 1000;

/// Past [`MAX_URLS`], this many more links that show text: a thousand empty links the
/// reader never sees must not push out the one they click.
const MAX_SHOWN_LINKS: usize = 1000;

/// URLs written in the text, and the targets of links, images and forms in the HTML,
/// entities decoded, as a browser would follow them; `mailto:`, `javascript:` and `data:`
/// links as written, for `uri` rules (as SpamAssassin lists them). Each once, in the order
/// first found.
pub(super) fn find_urls<'t>(text: &'t str, html: &'t str) -> Vec<String> {
    let mut urls: Vec<String> = Vec::new();
    // A page of links names most of them many times: seen ones are found by hash, and
    // only what an entity changed is copied to be looked up.
    let mut seen: HashSet<Cow<'t, str>> = HashSet::new();
    let mut push = |u: Cow<'t, str>, shown: &dyn Fn() -> bool| {
        let end = ['.', ',', ';', ':', '!', '?'];
        let u = match u {
            Cow::Borrowed(u) => Cow::Borrowed(u.trim_end_matches(end)),
            Cow::Owned(mut u) => {
                u.truncate(u.trim_end_matches(end).len());
                Cow::Owned(u)
            }
        };
        if u.is_empty() || seen.contains(u.as_ref()) {
            return;
        }
        if urls.len() < MAX_URLS || (urls.len() < MAX_URLS + MAX_SHOWN_LINKS && shown()) {
            urls.push(u.to_string());
            seen.insert(u);
        }
    };
    for url in written(text) {
        push(Cow::Borrowed(url), &|| false);
    }
    let shown_text = ShownText {
        html,
        last: Cell::new(None),
    };
    for value in attribute_values(html) {
        let target = with_slashes(as_followed(value));
        if target.contains("://")
            || target.starts_with("www.")
            || super::is_mailto(&target)
            || super::is_script_or_data(&target)
        {
            push(target, &|| shown_text.after(value));
        }
    }
    for url in written(html) {
        push(as_followed(url), &|| false);
    }
    urls
}

/// Whether the tag that holds an attribute value is followed by text before the next tag,
/// as a link the reader sees is. Values are asked about in order, and the answer for the
/// last tag is kept: the values of one tag, however many, cost one look past its end.
struct ShownText<'h> {
    html: &'h str,
    /// Where the last look began, the first `>` at or after it, and what followed that.
    last: Cell<Option<(usize, Option<usize>, bool)>>,
}

impl ShownText<'_> {
    /// For `value`, a slice of the HTML.
    fn after(&self, value: &str) -> bool {
        let after = value.as_ptr() as usize - self.html.as_ptr() as usize + value.len();
        if let Some((from, gt, shown)) = self.last.get()
            && from <= after
            && gt.is_none_or(|gt| after <= gt)
        {
            return shown;
        }
        let rest = &self.html.as_bytes()[after..];
        let gt = memchr::memchr(b'>', rest);
        let shown = gt.is_some_and(|gt| {
            let text = &rest[gt + 1..];
            let text = &text[..memchr::memchr(b'<', text).unwrap_or(text.len())];
            !text.trim_ascii().is_empty()
        });
        self.last.set(Some((after, gt.map(|gt| after + gt), shown)));
        shown
    }
}

/// A URL written in HTML as a browser follows it: entities decoded, the spaces and control
/// characters around it (`&#32;http://…`) and the tabs and line breaks it drops inside a URL
/// (`ex&#10;ample.com`) gone.
fn as_followed(written: &str) -> Cow<'_, str> {
    let mut decoded = html::decode_entities(written);
    let trim = |c: char| c <= ' ';
    if decoded.starts_with(trim) || decoded.ends_with(trim) {
        decoded = Cow::Owned(decoded.trim_matches(trim).to_string());
    }
    if !decoded.contains(['\t', '\r', '\n']) {
        return decoded;
    }
    Cow::Owned(
        decoded
            .chars()
            .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
            .collect(),
    )
}

/// An http(s) link whose slashes after the scheme a browser reads as `//`: missing
/// (`http:host`), or written with `\` (`http:\\host`, `http:/\host`), as `\` is `/` in
/// such a URL (WHATWG URL; SpamAssassin's uri_list_canonicalize reads them so too). Only
/// up to its query or fragment: a browser keeps a `\` there as written.
fn with_slashes(target: Cow<'_, str>) -> Cow<'_, str> {
    let Some((scheme, rest)) = target.split_once(':') else {
        return target;
    };
    let http = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    let (place, query) = rest.split_at(rest.find(['?', '#']).unwrap_or(rest.len()));
    if !http || (place.starts_with("//") && !place.contains('\\')) {
        return target;
    }
    let place = place.trim_start_matches(['/', '\\']).replace('\\', "/");
    Cow::Owned(format!("{scheme}://{place}{query}"))
}

/// The URLs written in `text`: from `http://`, `https://` or `www.` at the start of a word
/// to the first white space, bracket or quote.
fn written(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut from = 0;
    // A scheme is found by its `://`, which text seldom holds otherwise, and `www.` by its
    // first letter; each is one byte to look for.
    memchr::memchr3_iter(b':', b'w', b'W', bytes).filter_map(move |at| {
        let (start, prefix_end) = if bytes[at] == b':' {
            if !bytes[at..].starts_with(b"://") {
                return None;
            }
            let scheme = ["https", "http"].into_iter().find(|s| {
                at.checked_sub(s.len())
                    .is_some_and(|start| bytes[start..at].eq_ignore_ascii_case(s.as_bytes()))
            })?;
            (at - scheme.len(), at + 3)
        } else if bytes.get(at..at + 4)?.eq_ignore_ascii_case(b"www.") {
            (at, at + 4)
        } else {
            return None;
        };
        if start < from || !starts_word(text, start) {
            return None;
        }
        let rest = &text[prefix_end..];
        let len = rest
            .find(|c: char| c.is_whitespace() || "<>\"'()[]{}".contains(c))
            .unwrap_or(rest.len());
        (len > 0).then(|| {
            from = prefix_end + len;
            &text[start..from]
        })
    })
}

/// The values of the `href`, `src` and `action` attributes in `html`, as written: after
/// `=`, white space, an opening quote and white space (which browsers strip), to the first
/// quote, white space or `>`.
fn attribute_values(html: &str) -> impl Iterator<Item = &str> {
    let mut from = 0;
    // Found by their `=`, one byte to look for, and the name before it.
    memchr::memchr_iter(b'=', html.as_bytes()).filter_map(move |eq| {
        let name_end = html[..eq].trim_end().len();
        let start = ["href", "src", "action"].into_iter().find_map(|name| {
            let start = name_end.checked_sub(name.len())?;
            html.as_bytes()[start..name_end]
                .eq_ignore_ascii_case(name.as_bytes())
                .then_some(start)
        })?;
        if start < from || !starts_word(html, start) {
            return None;
        }
        let rest = html[eq + 1..].trim_start();
        let rest = rest.strip_prefix(['"', '\'']).unwrap_or(rest).trim_start();
        let len = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '>'))
            .unwrap_or(rest.len());
        (len > 0).then(|| {
            from = html.len() - rest.len() + len;
            &rest[..len]
        })
    })
}

/// Whether a word starts at `at` (where a word character is): an ASCII word boundary, as
/// the byte before it is none.
fn starts_word(text: &str, at: usize) -> bool {
    at == 0 || !is_word_byte(text.as_bytes()[at - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    /// Texts where the scanners could part from the patterns they stand for: case, word
    /// boundaries (ASCII and not), empty values, URLs inside URLs, quotes, Unicode white
    /// space, attribute names inside words and values.
    const TRICKY: &[&str] = &[
        "see http://example.com/a, and HTTPS://Ex.org/b. or www.shop.example!",
        "xhttp://www.inner.example/path and _www.no.example and 9www.no.example",
        "héwww.after-non-ascii.example http:// www. https://\u{a0}x",
        "http://a.example/http://b.example (www.c.example) [http://d.example]{www.e.example}",
        "wwww.four.example hTtP://MiXeD.example/\u{2003}tail \"http://q.example\"",
        "<a href=\"http://x.example/1\">x</a><img SRC='http://y.example/2'><form action=/go>",
        "<a href = \"\" src= 'http://z.example' href\t=\n http://w.example>",
        "<a hrefx=\"http://no.example\" transaction=\"no\" data-src=\"http://dash.example\">",
        "<a href=http://v.example?src=http://inner.example>next src=\u{3000}http://ws.example",
        "<a href=\"javascript:go()\" href='mailto:me@example.org' action>ḩref=x",
        "",
        "href",
        "www.",
    ];

    /// The fixed texts, then random ones made of the pieces the scanners look at, in any
    /// order and case.
    fn texts() -> impl Iterator<Item = String> {
        let pieces = [
            "http://", "HTTPS://", "hTtp", "s://", "://", "www.", "wWw", "w", ".", "href", "SRC",
            "action", "=", "\"", "'", ">", "<", "(", "]", "x", "_", "9", "é", " ", "\t", "\n",
            "\u{a0}", "\u{3000}",
        ];
        let mut next = crate::xorshift(0x5eed);
        let random = (0..30_000).map(move |_| {
            let len = next() % 12;
            (0..len)
                .map(|_| pieces[next() as usize % pieces.len()])
                .collect()
        });
        TRICKY.iter().map(|t| t.to_string()).chain(random)
    }

    fn by_regex<'t>(re: &Regex, text: &'t str) -> Vec<&'t str> {
        re.find_iter(text).map(|m| m.as_str()).collect()
    }

    #[test]
    fn written_urls_are_what_the_text_pattern_finds() {
        let re = Regex::new(r#"(?i)(?-u:\b)(?:https?://|www\.)[^\s<>"'()\[\]{}]+"#).unwrap();
        for text in texts() {
            assert_eq!(
                written(&text).collect::<Vec<_>>(),
                by_regex(&re, &text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn attribute_values_are_what_the_attribute_pattern_finds() {
        let re = Regex::new(r#"(?i)(?-u:\b)(?:href|src|action)\s*=\s*["']?\s*[^"'\s>]+"#).unwrap();
        for html in texts() {
            let values: Vec<&str> = by_regex(&re, &html)
                .into_iter()
                .map(|m| {
                    let value = m.split_once('=').unwrap().1.trim_start();
                    value
                        .strip_prefix(['"', '\''])
                        .unwrap_or(value)
                        .trim_start()
                })
                .collect();
            assert_eq!(
                attribute_values(&html).collect::<Vec<_>>(),
                values,
                "{html:?}"
            );
        }
    }

    #[test]
    fn urls_are_found_once_as_followed_and_trimmed() {
        let html = "<a href=\"http://example.com/?a=1&amp;b=2\">http://example.com/?a=1&amp;b=2</a>\
                    <a href=\"http://ex&#10;ample.net/\">x</a><a href=\"/relative\">y</a>\
                    <a href=\"JavaScript:go()\">z</a><a href=\"#top\">up</a>";
        let urls = find_urls(
            "Visit www.example.org. Now: http://example.com/?a=1&b=2",
            html,
        );
        assert_eq!(
            urls,
            [
                "www.example.org",
                "http://example.com/?a=1&b=2",
                "http://example.net/",
                "JavaScript:go()"
            ]
        );
    }

    /// Links a browser follows, written so that no `://` follows the scheme as written.
    #[test]
    fn obfuscated_links_are_found_as_followed() {
        for (href, url) in [
            (" &#104;ttp://spam.example/buy", "http://spam.example/buy"),
            (
                "&#32;http://spam.example/buy&#9;",
                "http://spam.example/buy",
            ),
            ("http:/\\spam.example/buy", "http://spam.example/buy"),
            ("https:\\\\spam.example/buy", "https://spam.example/buy"),
            ("HTTP:spam.example/buy", "HTTP://spam.example/buy"),
            ("mailto:me@example.org", "mailto:me@example.org"),
        ] {
            let html = format!("<a href=\"{href}\">order now</a>");
            assert_eq!(find_urls("", &html), [url], "{html:?}");
        }
    }

    /// A browser reads `\` as `/` up to the query, not in the query or the fragment: a
    /// `\` there was made a `/` too, a URL no browser follows.
    #[test]
    fn backslashes_in_a_query_or_fragment_stay() {
        for (href, url) in [
            (
                "http://spam.example/buy?next=a\\b#c\\d",
                "http://spam.example/buy?next=a\\b#c\\d",
            ),
            (
                "http:\\\\spam.example\\buy?next=a\\b",
                "http://spam.example/buy?next=a\\b",
            ),
            ("https:spam.example\\x#a\\b", "https://spam.example/x#a\\b"),
            ("http:/\\spam.example#\\?\\", "http://spam.example#\\?\\"),
        ] {
            let html = format!("<a href=\"{href}\">order now</a>");
            assert_eq!(find_urls("", &html), [url], "{html:?}");
        }
    }

    /// Past [`MAX_URLS`], each link asked whether its tag shows text, and each look went on
    /// to the next `>`: one tag of many links and no end was searched once per link.
    #[test]
    fn links_past_the_limit_are_found_in_linear_time() {
        let mut html: String = (0..MAX_URLS)
            .map(|i| format!("<a href=\"http://d{i}.example/\"></a>"))
            .collect();
        html.push_str("<p ");
        for i in 0..300_000 {
            html.push_str(&format!(" src=a://{i} src=a://0"));
        }
        let started = std::time::Instant::now();
        let urls = find_urls("", &html);
        assert_eq!(urls.len(), MAX_URLS);
        // Linear takes milliseconds; this guards against the square, it measures nothing.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    /// The link a reader sees is found past a flood of empty ones.
    #[test]
    fn empty_links_do_not_push_out_one_that_shows_text() {
        let mut html: String = (0..MAX_URLS + 10)
            .map(|i| format!("<a href=\"http://d{i}.example/\"></a>"))
            .collect();
        html.push_str("<a href=\"http://shop.example/buy\">click</a>");
        html.push_str("<a href=\"http://hidden.example/\"> </a>");
        let urls = find_urls("", &html);
        assert_eq!(urls.len(), MAX_URLS + 1);
        assert_eq!(
            urls.last().map(String::as_str),
            Some("http://shop.example/buy")
        );
    }

    #[test]
    fn a_page_of_links_names_at_most_max_urls() {
        let text: String = (0..MAX_URLS + 50)
            .map(|i| format!("http://host{i}.example/ "))
            .collect();
        assert_eq!(find_urls(&text, "").len(), MAX_URLS);
    }
}
