//! HTML rendered as its reader sees it: the text, without tags, comments, scripts or
//! styles, entities decoded, white space collapsed, and the breaks that block elements make.
//!
//! The breaks follow SpamAssassin's renderer, since `body` rules are written against it:
//! `<br>` and `<div>` end a line, cells and list items are a space apart, and paragraphs,
//! rules, quotes and titles stand alone, a blank line around them. mail-parser's renderer
//! put a whole page on one line but for `<br>` and `</p>`, rendered style sheets as
//! words, and lost the space after an inline element that began a block.

use mail_parser::decoders::html::add_html_token;

/// Where a tag breaks the text, and how.
#[derive(Clone, Copy)]
enum Break {
    None,
    Space,
    Line,
    Paragraph,
}

/// Whether a reader shows `tag` (a name, any case) as a break or a space: text on either
/// side of it is not one word.
pub fn separates_words(tag: &[u8]) -> bool {
    !matches!(break_of(tag), Break::None)
}

fn break_of(tag: &[u8]) -> Break {
    let is = |name: &str| tag.eq_ignore_ascii_case(name.as_bytes());
    if is("br") || is("div") {
        Break::Line
    } else if ["li", "td", "th", "dt", "dd", "embed"].into_iter().any(is)
        || (tag.len() == 2 && tag[0].eq_ignore_ascii_case(&b'h') && (b'1'..=b'6').contains(&tag[1]))
    {
        Break::Space
    } else if [
        "p",
        "hr",
        "blockquote",
        "pre",
        "listing",
        "plaintext",
        "xmp",
        "title",
    ]
    .into_iter()
    .any(is)
    {
        Break::Paragraph
    } else {
        Break::None
    }
}

/// The rendered text, built a piece at a time.
struct Text {
    out: String,
    /// White space seen since the last word: one space, if a word follows on this line.
    space: bool,
}

impl Text {
    fn words(&mut self, text: &str) {
        let mut rest = text;
        while let Some(at) = rest.find(|c: char| c.is_ascii_whitespace() || c == '\u{a0}') {
            self.word(&rest[..at]);
            self.space = true;
            let ws = rest[at..].chars().next().map_or(1, char::len_utf8);
            rest = &rest[at + ws..];
        }
        self.word(rest);
    }

    fn word(&mut self, word: &str) {
        if word.is_empty() {
            return;
        }
        if self.space && !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push(' ');
        }
        self.space = false;
        self.out.push_str(word);
    }

    fn brk(&mut self, kind: Break) {
        match kind {
            Break::None => {}
            // A cell's space only separates: white space already does that.
            Break::Space => self.space = true,
            Break::Line => self.lines(1),
            Break::Paragraph => self.lines(2),
        }
    }

    fn lines(&mut self, n: usize) {
        self.space = false;
        if self.out.is_empty() {
            return;
        }
        let have = self.out.len() - self.out.trim_end_matches('\n').len();
        for _ in have..n {
            self.out.push('\n');
        }
    }
}

/// `html` as text: see the module's comment.
pub fn to_text(html: &str) -> String {
    let bytes = html.as_bytes();
    let mut text = Text {
        out: String::with_capacity(html.len() / 2),
        space: false,
    };
    let mut decoded = String::new();
    let mut unclosed = [usize::MAX; 2];
    let mut at = 0;
    while let Some(found) = memchr::memchr2(b'<', b'&', &bytes[at..]) {
        let start = at + found;
        text.words(&html[at..start]);
        at = start + 1;
        if bytes[start] == b'&' {
            decoded.clear();
            match entity(bytes, start, &mut decoded) {
                Some(len) => {
                    text.words(&decoded);
                    at = start + len;
                }
                None => text.words("&"),
            }
            continue;
        }
        let rest = &bytes[at..];
        if rest.starts_with(b"!--") {
            // From the comment's own dashes: `<!-->` and `<!--->` are whole, empty
            // comments to a browser, and text after them is shown. `--!>` ends one too.
            let end = memchr::memmem::find(&rest[1..], b"-->").map(|e| 1 + e + 3);
            let bang = memchr::memmem::find(&rest[3..end.unwrap_or(rest.len())], b"--!>");
            at = match bang.map(|e| 3 + e + 4).or(end) {
                Some(end) => at + end,
                None => bytes.len(),
            };
            continue;
        }
        let closing = rest.first() == Some(&b'/');
        let name = &rest[usize::from(closing)..];
        let name_len = name
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        let markup = name_len > 0 && name[0].is_ascii_alphabetic();
        if !markup {
            // `<!x ...>`, `<?x ...>` and `</ x>` are comments to a browser, to their first
            // `>` whatever the quotes; "<3" or "a < b" is text.
            if matches!(rest, [b'!' | b'?', ..] | [b'/', _, ..]) {
                at = memchr::memchr(b'>', rest).map_or(bytes.len(), |e| at + e + 1);
            } else {
                text.words("<");
            }
            continue;
        }
        let end = tag_end(bytes, at, &mut unclosed);
        let name = &name[..name_len];
        at = end;
        text.brk(break_of(name));
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        // Their content is text to the end tag, not markup: a `<!--` in a title opens no
        // comment. A browser shows that of a title, textarea and xmp.
        let raw_text = [&b"script"[..], b"style", b"iframe", b"noembed", b"noframes"];
        let shown = [&b"title"[..], b"textarea", b"xmp"];
        let raw_shown = shown.iter().position(|n| is(n));
        if closing
            || bytes[..end].ends_with(b"/>")
            || !(raw_shown.is_some() || raw_text.iter().any(|n| is(n)))
        {
            continue;
        }
        let (content_end, after) = end_of_element(bytes, end, name);
        match raw_shown {
            // Entities are decoded in a title and a textarea, not in xmp.
            Some(2) => text.words(&html[end..content_end]),
            Some(_) => text.words(&decode_entities(&html[end..content_end])),
            None => {}
        }
        text.brk(break_of(name));
        at = after;
    }
    text.words(&html[at..]);
    let trimmed = text.out.trim_end().len();
    text.out.truncate(trimmed);
    text.out
}

/// Just past the `>` that ends the tag whose name begins at `from`: a `>` inside a quoted
/// attribute value (`<img alt="a>b">`) is the value's, as a browser reads it. A quote
/// never closed ends at the first `>`, as broken mail is more common than a page whose
/// every remaining byte is one attribute. `unclosed` remembers, per quote, where the page
/// has no more of it, so that a page of unclosed quotes is not searched to its end per tag.
fn tag_end(bytes: &[u8], from: usize, unclosed: &mut [usize; 2]) -> usize {
    let mut at = from;
    while let Some(found) = memchr::memchr3(b'>', b'"', b'\'', &bytes[at..]) {
        let i = at + found;
        let quote = bytes[i];
        // A quote opens a value only after `=` (spaces allowed): `<b class=x"y>` has none.
        if quote == b'>' || !bytes[from..i].trim_ascii_end().ends_with(b"=") {
            if quote == b'>' {
                return i + 1;
            }
            at = i + 1;
            continue;
        }
        let none_from = &mut unclosed[usize::from(quote == b'"')];
        let close = (i < *none_from)
            .then(|| memchr::memchr(quote, &bytes[i + 1..]))
            .flatten();
        match close {
            Some(close) => at = i + 1 + close + 1,
            None => {
                *none_from = i;
                // No `>` came before the quote: the first after it ends the tag.
                return memchr::memchr(b'>', &bytes[i..]).map_or(bytes.len(), |e| i + e + 1);
            }
        }
    }
    bytes.len()
}

/// The entity (`&amp;`, `&#38;`, `&#x26;`) at `amp`, decoded into `into`, and its length;
/// `None` where the `&` begins none. An unknown name is kept as written. A numeric one
/// needs no `;` (`&#86&#105agra`): browsers show it, and spam writes it so.
fn entity(bytes: &[u8], amp: usize, into: &mut String) -> Option<usize> {
    let name = &bytes[amp + 1..];
    let len = name
        .iter()
        .take(32)
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'#')
        .count();
    if len == 0 {
        return None;
    }
    if name.get(len) == Some(&b';') {
        add_html_token(into, &bytes[amp..amp + len + 2], false);
        return Some(len + 2);
    }
    let (digits, radix) = match name {
        [b'#', b'x' | b'X', rest @ ..] => (rest, 16),
        [b'#', rest @ ..] => (rest, 10),
        _ => return None,
    };
    let count = digits
        .iter()
        .take_while(|b| (**b as char).is_digit(radix))
        .count();
    if count == 0 {
        return None;
    }
    let number = std::str::from_utf8(&digits[..count])
        .ok()
        .and_then(|d| u32::from_str_radix(d, radix).ok());
    into.push(
        number
            .and_then(char::from_u32)
            .filter(|&c| c != '\0')
            .unwrap_or(char::REPLACEMENT_CHARACTER),
    );
    Some(name.len() - digits.len() + count + 1)
}

/// An attribute's value as the page means it: its entities decoded (`&amp;` in a link).
pub fn decode_entities(value: &str) -> std::borrow::Cow<'_, str> {
    let bytes = value.as_bytes();
    if memchr::memchr(b'&', bytes).is_none() {
        return value.into();
    }
    let mut out = String::with_capacity(value.len());
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'&', &bytes[at..]) {
        let amp = at + found;
        out.push_str(&value[at..amp]);
        match entity(bytes, amp, &mut out) {
            Some(len) => at = amp + len,
            None => {
                out.push('&');
                at = amp + 1;
            }
        }
    }
    out.push_str(&value[at..]);
    out.into()
}

/// Where the text content of a script, style, title or like element that starts at `from`
/// ends, and where its end tag does: at the end of the page when it has none. The end tag's
/// name is followed by white space, `/` or `>`: `</scripts>` ends no script.
fn end_of_element(bytes: &[u8], from: usize, name: &[u8]) -> (usize, usize) {
    let mut at = from;
    while let Some(found) = memchr::memmem::find(&bytes[at..], b"</") {
        let tag = at + found + 2;
        let matches = bytes
            .get(tag..tag + name.len())
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
            && bytes
                .get(tag + name.len())
                .is_some_and(|&b| b.is_ascii_whitespace() || matches!(b, b'/' | b'>'));
        if matches {
            let after = memchr::memchr(b'>', &bytes[tag..]).map_or(bytes.len(), |e| tag + e + 1);
            return (tag - 2, after);
        }
        at = tag;
    }
    (bytes.len(), bytes.len())
}

/// What follows each `name =` in a tag's attributes (the name matched without regard to
/// case, at the start of a word): the raw rest of the tag, quote and all.
pub(crate) fn attribute_values<'t>(
    attributes: &'t str,
    name: &'t str,
) -> impl Iterator<Item = &'t str> {
    let bytes = attributes.as_bytes();
    let first = name.as_bytes()[0];
    // Where the name's first letter is, in either case: few places in a tag.
    memchr::memchr2_iter(
        first.to_ascii_lowercase(),
        first.to_ascii_uppercase(),
        bytes,
    )
    .filter_map(move |i| {
        let starts_word = i == 0 || !crate::segment::is_word_byte(bytes[i - 1]);
        let candidate = bytes.get(i..i + name.len())?;
        if !starts_word || !candidate.eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        let value =
            attributes[i + name.len()..].trim_start_matches(|c: char| c.is_ascii_whitespace());
        let value = value.strip_prefix('=')?;
        Some(value.trim_start_matches(|c: char| c.is_ascii_whitespace()))
    })
}

/// The first value of attribute `name`: inside its quotes, or up to a space.
pub(crate) fn attribute<'t>(attributes: &'t str, name: &'t str) -> Option<&'t str> {
    let raw = attribute_values(attributes, name).next()?;
    Some(match raw.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let inside = &raw[1..];
            &inside[..inside.find(quote).unwrap_or(inside.len())]
        }
        _ => &raw[..raw.find(char::is_whitespace).unwrap_or(raw.len())],
    })
}

/// A `style` attribute's declarations, in order: each property, trimmed, and its value
/// without `!important`.
pub(crate) fn css_declarations(style: &str) -> impl Iterator<Item = (&str, &str)> {
    style.split(';').filter_map(|declaration| {
        let (property, value) = declaration.split_once(':')?;
        Some((property.trim(), without_important(value)))
    })
}

/// A CSS value, trimmed, without its `!important`.
fn without_important(value: &str) -> &str {
    let value = value.trim();
    let cut = value.len().saturating_sub("!important".len());
    match value.get(cut..) {
        Some(end) if end.eq_ignore_ascii_case("!important") => value[..cut].trim_end(),
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_entities, to_text};

    #[test]
    fn paragraphs_stand_alone_and_lines_break() {
        assert_eq!(
            to_text("<p>Greetings.</p>\n<p>Dear friend, I am a prince.</p>"),
            "Greetings.\n\nDear friend, I am a prince."
        );
        assert_eq!(
            to_text("one<br>two<div>three</div>four"),
            "one\ntwo\nthree\nfour"
        );
        assert_eq!(
            to_text("<table><tr><td>a</td><td>b</td></tr></table>"),
            "a b"
        );
        assert_eq!(to_text("<h1>Title</h1>text"), "Title text");
    }

    #[test]
    fn inline_elements_keep_the_spaces_around_them() {
        assert_eq!(
            to_text("<p><i>word1</i> word2 &hellip;</p>"),
            "word1 word2 \u{2026}"
        );
        assert_eq!(
            to_text("<td><font size=2>word1</font> word2 &amp; more</td>"),
            "word1 word2 & more"
        );
        // No space where the page has none: a word split by markup stays one word.
        assert_eq!(
            to_text("Mort<!-- x -->gage and V<b>ia</b>gra"),
            "Mortgage and Viagra"
        );
    }

    #[test]
    fn entities_decode_and_a_non_breaking_space_is_a_space() {
        assert_eq!(to_text("price:&nbsp;100"), "price: 100");
        assert_eq!(
            to_text("&#72;&#x49; AT&T &bogus; &lt;b&gt;"),
            "HI AT&T &bogus; <b>"
        );
        assert_eq!(to_text("a\u{a0}\u{a0} b"), "a b");
        // Numeric ones without their `;`, as browsers show them.
        assert_eq!(
            to_text("&#86&#105agra &#x56iagra &#0 &#"),
            "Viagra Viagra \u{fffd} &#"
        );
        assert_eq!(decode_entities("/?id=&#49&#x32"), "/?id=12");
    }

    #[test]
    fn a_tag_ends_outside_its_quoted_values() {
        assert_eq!(
            to_text("<img alt=\"1 > 2\" src='a>b.gif'>text <a title = \"x>y\">link</a>"),
            "text link"
        );
        // A quote never closed: the tag ends at its first `>`.
        assert_eq!(to_text("<font face=\"arial>shown"), "shown");
        assert_eq!(to_text("<b class=x\"y>bold"), "bold");
    }

    #[test]
    fn attribute_values_decode_their_entities() {
        assert_eq!(
            decode_entities("http://a.example/?a=1&amp;b=2&c&#61;3"),
            "http://a.example/?a=1&b=2&c=3"
        );
        assert_eq!(decode_entities("no entities"), "no entities");
    }

    #[test]
    fn scripts_styles_and_comments_are_not_text() {
        assert_eq!(
            to_text(
                "<style>p { color: red }</style><p>shown</p><SCRIPT type=x>var a = '</p>';\
                 </Script >after <!-- hidden -->end"
            ),
            "shown\n\nafter end"
        );
        assert_eq!(to_text("before<script>never closed"), "before");
        assert_eq!(to_text("a <!-- never closed"), "a");
        assert_eq!(to_text("<!-->shown<!--->too<!---->"), "showntoo");
    }

    /// As WHATWG's tokenizer reads them, as browsers and the mail views built on them do.
    #[test]
    fn comments_and_raw_text_end_where_a_browser_ends_them() {
        for (html, text) in [
            ("<!-- a --!>shown<!-- b -->", "shown"),
            ("<!-- a --!- b -->shown", "shown"),
            ("<!x a=\">shown<i b=\">\"> too", "shown too"),
            ("<?x a=\">shown", "shown"),
            ("</ hidden words>shown", "shown"),
            ("a </>b </", "a b </"),
            ("<title><!--</title>shown<!-- -->", "<!--\n\nshown"),
            ("<title>A &amp; B</title>x", "A & B\n\nx"),
            ("<xmp><!--&amp;<b></xmp>shown", "<!--&amp;<b>\n\nshown"),
            ("<textarea><!--</textarea >shown", "<!--shown"),
            ("<iframe><p>never shown</p></iframe>shown", "shown"),
            ("<script>var a;</scripts>hidden</script>shown", "shown"),
            ("<style>p{}</style/>shown", "shown"),
        ] {
            assert_eq!(to_text(html), text, "{html:?}");
        }
    }

    #[test]
    fn text_that_only_looks_like_markup_is_text() {
        assert_eq!(to_text("1 < 2 and I <3 you"), "1 < 2 and I <3 you");
        assert_eq!(to_text("<!DOCTYPE html><?xml x?>hi"), "hi");
        assert_eq!(to_text("unfinished <b"), "unfinished");
    }
}
