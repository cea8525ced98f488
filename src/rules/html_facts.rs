//! What a message's HTML shows the eval tests, read in one pass: tags, images, links, and
//! the statistics SpamAssassin's HTML tests read (`html_range`, `html_eval`, `html_test`,
//! `html_text_match`), as its HTML reader defines them, and the colours of the text
//! ([`crate::message::ColorStack`]).

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

use super::eval::HtmlExtras;
use crate::message::{
    ColorFlags, ColorStack, FONT_SIZE_PIXELS, attribute, attribute_values, css_declarations,
    font_px, legacy_font_px,
};

/// The facts of one message's HTML parts.
#[derive(Default)]
pub(super) struct HtmlFacts {
    pub(super) image_area: f64,
    pub(super) images: usize,
    pub(super) text_chars: usize,
    pub(super) tags: TagCounts,
    pub(super) anchors: Vec<Anchor>,
    /// An `<iframe>` with a `src` that is not blank: a page the mail pulls in when shown.
    pub(super) iframe_src: bool,
    pub(super) stats: Stats,
    /// Read only when a test asks for them ([`HtmlExtras::colors`]).
    pub(super) colors: ColorFlags,
}

/// A link with a target.
pub(super) struct Anchor {
    pub(super) href: String,
    /// What it shows, trimmed.
    pub(super) text: String,
    /// Images inside it.
    pub(super) images: usize,
}

/// Counts SpamAssassin's HTML tests are written against.
#[derive(Default)]
pub(super) struct Stats {
    /// Start and end tags, and `<!doctype>`.
    pub(super) tags: usize,
    /// Of them, those of HTML 4's elements (and Office's `o:p` kind).
    pub(super) elements: usize,
    /// Tag names, each counted where first met.
    pub(super) tags_seen: usize,
    pub(super) elements_seen: usize,
    /// End tags with none of their name open.
    pub(super) closed_extra: usize,
    /// Words a tag splits (`fr<b></b>ee`): text that begins inside a word the text before
    /// it ended in.
    pub(super) obfuscation: usize,
    /// The largest font size asked for, in pixels (16, a reader's default, at least).
    pub(super) max_size: f64,
    pub(super) embeds: bool,
    pub(super) form_action_mailto: bool,
    /// A `<font face>` that is no list of font names.
    pub(super) font_face_bad: bool,
    /// Each comment, `<!--` and `-->` included.
    pub(super) comments: Vec<String>,
    pub(super) titles: Vec<String>,
}

/// The font size in pixels a reader starts with.
const DEFAULT_FONT_PX: f64 = 16.0;

/// HTML 4's elements, strict and loose, and `nobr`, which mail programs write; sorted.
const ELEMENTS: &[&[u8]] = &[
    b"a",
    b"abbr",
    b"acronym",
    b"address",
    b"applet",
    b"area",
    b"b",
    b"base",
    b"basefont",
    b"bdo",
    b"big",
    b"blockquote",
    b"body",
    b"br",
    b"button",
    b"caption",
    b"center",
    b"cite",
    b"code",
    b"col",
    b"colgroup",
    b"dd",
    b"del",
    b"dfn",
    b"dir",
    b"div",
    b"dl",
    b"dt",
    b"em",
    b"fieldset",
    b"font",
    b"form",
    b"frame",
    b"frameset",
    b"h1",
    b"h2",
    b"h3",
    b"h4",
    b"h5",
    b"h6",
    b"head",
    b"hr",
    b"html",
    b"i",
    b"iframe",
    b"img",
    b"input",
    b"ins",
    b"isindex",
    b"kbd",
    b"label",
    b"legend",
    b"li",
    b"link",
    b"map",
    b"menu",
    b"meta",
    b"nobr",
    b"noframes",
    b"noscript",
    b"object",
    b"ol",
    b"optgroup",
    b"option",
    b"p",
    b"param",
    b"pre",
    b"q",
    b"s",
    b"samp",
    b"script",
    b"select",
    b"small",
    b"span",
    b"strike",
    b"strong",
    b"style",
    b"sub",
    b"sup",
    b"table",
    b"tbody",
    b"td",
    b"textarea",
    b"tfoot",
    b"th",
    b"thead",
    b"title",
    b"tr",
    b"tt",
    b"u",
    b"ul",
    b"var",
];

/// Opening and closing tags by name, without regard to case. A name (at most 16 bytes) is
/// packed into a number and found by a hash of it ([`TagCounts::hash`]): a message has a
/// few dozen names, and a search through them for each tag was a seventh of this pass.
#[derive(Default)]
pub(super) struct TagCounts(hashbrown::HashTable<(u128, Tag)>);

/// What the markup did with one tag name.
#[derive(Default, Clone, Copy)]
pub(super) struct Tag {
    pub(super) opened: usize,
    pub(super) closed: usize,
    /// Opened again after it had been closed.
    pub(super) reopened: bool,
    /// Open now: openings less closings, never below none.
    open: usize,
}

/// What adding a tag told of it.
struct Added {
    first: bool,
    closed_extra: bool,
}

impl TagCounts {
    fn key(name: &[u8]) -> Option<u128> {
        let mut key = [0u8; 16];
        for (k, b) in key.get_mut(..name.len())?.iter_mut().zip(name) {
            *k = b.to_ascii_lowercase();
        }
        Some(u128::from_le_bytes(key))
    }

    /// A packed name's two halves folded into one word and spread by a multiply, its high
    /// bits brought down: the table picks a bucket by the low ones.
    fn hash(key: u128) -> u64 {
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        let spread = folded.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        spread ^ (spread >> 29)
    }

    fn add(&mut self, key: u128, closing: bool) -> Added {
        let entry = self.0.entry(
            TagCounts::hash(key),
            |e| e.0 == key,
            |e| TagCounts::hash(e.0),
        );
        let (tag, first) = match entry {
            hashbrown::hash_table::Entry::Occupied(seen) => (&mut seen.into_mut().1, false),
            hashbrown::hash_table::Entry::Vacant(new) => {
                (&mut new.insert((key, Tag::default())).into_mut().1, true)
            }
        };
        let mut closed_extra = false;
        if closing {
            tag.closed += 1;
            closed_extra = tag.open == 0;
            tag.open = tag.open.saturating_sub(1);
        } else {
            tag.reopened |= tag.closed > 0;
            tag.opened += 1;
            tag.open += 1;
        }
        Added {
            first,
            closed_extra,
        }
    }

    pub(super) fn get(&self, name: &[u8]) -> Tag {
        TagCounts::key(name)
            .and_then(|key| self.0.find(TagCounts::hash(key), |e| e.0 == key))
            .map_or(Tag::default(), |e| e.1)
    }
}

/// The bytes of `text` that are not ASCII white space. Counted in runs of 255 into a byte,
/// which the compiler does 16 bytes a step: the text between tags is most of an HTML part,
/// and counting it a byte a step was a sixth of this pass.
fn non_space_bytes(text: &str) -> usize {
    (text.as_bytes().chunks(255))
        .map(|run| {
            let n = run
                .iter()
                .fold(0u8, |n, b| n + u8::from(!b.is_ascii_whitespace()));
            usize::from(n)
        })
        .sum()
}

/// A character of a word, as SpamAssassin tells split words: neither space nor ASCII
/// punctuation.
fn in_word(c: char) -> bool {
    !c.is_whitespace() && !c.is_ascii_punctuation()
}

/// One pass over the markup's bytes, the way a lenient reader sees it: a tag runs from
/// `<` to the next `>`, a comment to `-->`, text is what lies between. Tag counts, text
/// bytes outside tags (UTF-8 bytes, not characters: a ratio does not need more), image
/// areas from `width`/`height`, each link's target and visible text, and what `extras`
/// asks for: [`Stats`], the text's colours.
pub(super) fn html_facts(html: &str, extras: HtmlExtras) -> HtmlFacts {
    let stats_wanted = extras.stats;
    // Text can hide in its background only where the HTML sets a colour: most set none.
    let mut colors = (extras.colors && sets_colors(html)).then(ColorStack::new);
    let mut facts = HtmlFacts::default();
    let stats = &mut facts.stats;
    stats.max_size = DEFAULT_FONT_PX;
    // The link being read: its target, the text so far and its images. A link opened
    // inside another belongs to the outer one, which the first `</a>` closes.
    let mut link: Option<(&str, String, usize)> = None;
    let mut in_title = false;
    // Inside a script or style: no text a reader shows.
    let mut hidden = 0usize;
    // Whether the text shown last ended inside a word.
    let mut word_open = false;
    let mut rest = html;
    loop {
        let lt = memchr::memchr(b'<', rest.as_bytes()).unwrap_or(rest.len());
        let text = &rest[..lt];
        // A style sheet or a script is no text a reader sees, as SpamAssassin counts it:
        // else an image alone passes for a mail of text behind a long enough <style>.
        if hidden == 0 {
            facts.text_chars += non_space_bytes(text);
        }
        if let Some((_, shown, _)) = &mut link {
            shown.push_str(text);
        }
        if in_title && let Some(title) = stats.titles.last_mut() {
            title.push_str(text);
        }
        if hidden == 0
            && let Some(colors) = &mut colors
        {
            colors.text(text);
        }
        if stats_wanted && hidden == 0 && !text.is_empty() {
            if word_open && text.starts_with(in_word) {
                stats.obfuscation += 1;
            }
            word_open = text.ends_with(in_word);
        }
        if lt == rest.len() {
            break;
        }
        let after = &rest[lt + 1..];
        if let Some(declaration) = after.strip_prefix('!') {
            // `<!-- … -->`, a short `<!…>` (a comment to a lenient reader), `<!DOCTYPE …>`.
            let len = match declaration.strip_prefix("--") {
                Some(comment) => comment.find("-->").map_or(declaration.len(), |e| e + 5),
                None => memchr::memchr(b'>', declaration.as_bytes())
                    .map_or(declaration.len(), |e| e + 1),
            };
            let whole = &rest[lt..lt + 2 + len];
            if !stats_wanted {
            } else if declaration
                .get(..7)
                .is_some_and(|d| d.eq_ignore_ascii_case("doctype"))
            {
                stats.tags += 1;
                stats.elements += 1;
            } else {
                stats.comments.push(whole.to_string());
            }
            rest = &rest[lt + 2 + len..];
            continue;
        }
        let (tag, closed) = match memchr::memchr(b'>', after.as_bytes()) {
            Some(e) => (&after[..e], true),
            None => (after, false),
        };
        rest = &after[(tag.len() + usize::from(closed)).min(after.len())..];
        let (closing, tag) = tag.strip_prefix('/').map_or((false, tag), |t| (true, t));
        let bytes = tag.as_bytes();
        let n = bytes
            .iter()
            .take(16)
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if n == 0 {
            continue;
        }
        let Some(key) = TagCounts::key(&bytes[..n]) else {
            continue;
        };
        let added = facts.tags.add(key, closing);
        let lowercase = key.to_le_bytes();
        let name = &lowercase[..n];
        let attributes = &tag[n..];
        let closed = closed && !attributes.starts_with('_');
        if let Some(colors) = &mut colors {
            if closing {
                colors.close(name);
            } else if closed {
                colors.open(name, attributes);
            }
        }
        if stats_wanted {
            // Office's `<o:p>`, `<st1:place>`: elements of their own.
            let namespaced = bytes.get(n) == Some(&b':')
                && (name == b"o" || (name.len() == 3 && name.starts_with(b"st")));
            let element = namespaced || ELEMENTS.binary_search(&name).is_ok();
            stats.tags += 1;
            stats.tags_seen += usize::from(added.first);
            stats.elements += usize::from(element);
            stats.elements_seen += usize::from(element && added.first);
            stats.closed_extra += usize::from(added.closed_extra);
            if namespaced {
                continue;
            }
            if crate::message::separates_words(name) {
                word_open = false;
            }
            if closed && !closing {
                read_stats_attributes(name, attributes, stats);
            }
        }
        match (name, closing) {
            (b"script" | b"style", false) => hidden += 1,
            (b"script" | b"style", true) => hidden = hidden.saturating_sub(1),
            (b"title", false) if stats_wanted => {
                stats.titles.push(String::new());
                in_title = true;
            }
            (b"title", true) => in_title = false,
            _ => {}
        }
        if !closed {
            continue;
        }
        match (name, closing) {
            (b"img", false) => {
                facts.images += 1;
                if let Some((_, _, images)) = &mut link {
                    *images += 1;
                }
                // From the attribute, else from inline CSS (`style="width:600px"`), as
                // mail written by today's tools gives it.
                let dimension = |attr: &str| {
                    attribute_values(attributes, attr)
                        .filter_map(|v| {
                            let v = v.strip_prefix(['"', '\'']).unwrap_or(v);
                            let digits = v.bytes().take(5).take_while(u8::is_ascii_digit).count();
                            v[..digits].parse::<f64>().ok()
                        })
                        .last()
                        .or_else(|| {
                            attribute(attributes, "style").and_then(|s| css_pixels(s, attr))
                        })
                        .unwrap_or(0.0)
                };
                facts.image_area += dimension("width") * dimension("height");
            }
            (b"a", false) if link.is_none() => {
                link = attribute_values(attributes, "href")
                    .map(|v| {
                        let v = v.strip_prefix(['"', '\'']).unwrap_or(v);
                        let end = v.find(|c: char| matches!(c, '"' | '\'') || c.is_whitespace());
                        &v[..end.unwrap_or(v.len())]
                    })
                    .find(|href| !href.is_empty())
                    .map(|href| (href, String::new(), 0));
            }
            (b"iframe", false) => {
                // A `src` of spaces loads nothing; NBSP counts as a space, as SpamAssassin
                // trims it too.
                facts.iframe_src |= attribute(attributes, "src")
                    .is_some_and(|src| !src.trim_matches(char::is_whitespace).is_empty());
            }
            (b"a", true) if attributes.trim().is_empty() => {
                if let Some((href, shown, images)) = link.take() {
                    facts.anchors.push(Anchor {
                        href: href.to_string(),
                        text: shown.trim().to_string(),
                        images,
                    });
                }
            }
            _ => {}
        }
    }
    facts.colors = colors.map_or_else(ColorFlags::default, |c| c.flags);
    facts
}

/// What an opening tag's name and attributes tell [`Stats`].
fn read_stats_attributes(name: &[u8], attributes: &str, stats: &mut Stats) {
    if let Some(size) = attribute(attributes, "style").and_then(css_font_size) {
        stats.max_size = stats.max_size.max(size);
    }
    match name {
        b"object" | b"embed" => stats.embeds = true,
        b"form" => {
            stats.form_action_mailto |= attribute(attributes, "action")
                .is_some_and(|a| a.to_ascii_lowercase().contains("mailto:"));
        }
        b"font" => {
            if let Some(face) = attribute(attributes, "face") {
                stats.font_face_bad |= !is_font_list(face);
            }
            if let Some(size) = attribute(attributes, "size").and_then(legacy_font_px) {
                stats.max_size = stats.max_size.max(f64::from(size));
            }
        }
        b"big" => stats.max_size = stats.max_size.max(DEFAULT_FONT_PX * 1.2),
        _ => {}
    }
}

/// Whether HTML names a colour anywhere (`color`, `bgcolor`, CSS `color` and `background`,
/// `<body text=… link=…>`), in any case: where none is named, all text is the reader's
/// default, black on white, and links blue.
fn sets_colors(html: &str) -> bool {
    static COLOR_WORDS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(["color", "background"])
            .expect("plain words make a valid automaton")
    });
    // `<body text=… link=…>`, read as the colour stack reads attributes.
    COLOR_WORDS.is_match(html)
        || attribute_values(html, "text").next().is_some()
        || attribute_values(html, "link").next().is_some()
}

/// A size in pixels as the `<font size>`, 1 to 7, it is at least: SpamAssassin's rules
/// give sizes so (`html_range('max_size', '6', 'inf')`: 32 pixels or more).
pub(super) fn font_size_number(pixels: f64) -> f64 {
    FONT_SIZE_PIXELS
        .iter()
        .filter(|&&p| f64::from(p) <= pixels)
        .count()
        .max(1) as f64
}

/// A `style` attribute's `property` (`width`, `height`) in pixels: a number, bare or in
/// `px`, of five digits at most. Other units, percentages among them, give none.
fn css_pixels(style: &str, property: &str) -> Option<f64> {
    css_declarations(style)
        .filter(|(name, _)| name.eq_ignore_ascii_case(property))
        .filter_map(|(_, value)| {
            let number = match value.len().checked_sub(2) {
                Some(at) if value.as_bytes()[at..].eq_ignore_ascii_case(b"px") => &value[..at],
                _ => value,
            };
            (number.len() <= 5 && number.bytes().all(|b| b.is_ascii_digit()))
                .then(|| number.parse().ok())
                .flatten()
        })
        .last()
}

/// A `style`'s font size in pixels: its last `font-size`, as CSS takes it.
fn css_font_size(style: &str) -> Option<f64> {
    let (_, value) = css_declarations(style)
        .filter(|(property, _)| property.eq_ignore_ascii_case("font-size"))
        .last()?;
    font_px(value, DEFAULT_FONT_PX as f32).map(f64::from)
}

/// Whether a `<font face>` is a list of font names (letters, spaces and hyphens, a digit
/// at the end, perhaps quoted, commas between), as mail programs write them.
fn is_font_list(face: &str) -> bool {
    let face = face.trim();
    let face = face.strip_suffix(';').unwrap_or(face);
    face.split(',').enumerate().all(|(i, name)| {
        let name = name.trim_start();
        // Only the first name may begin with a dot (`.SFUIDisplay`) or a space.
        let name = if i == 0 {
            name.strip_prefix('.').unwrap_or(name)
        } else {
            name
        };
        let name = name.trim_matches(['"', '\'']);
        let name = name
            .strip_suffix(|c: char| c.is_ascii_digit())
            .unwrap_or(name);
        let letters = name.as_bytes();
        letters.len() >= 2
            && letters[0].is_ascii_alphabetic()
            && letters[letters.len() - 1].is_ascii_alphabetic()
            && letters
                .iter()
                .all(|b| b.is_ascii_alphabetic() || *b == b' ' || *b == b'-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: HtmlExtras = HtmlExtras {
        stats: true,
        colors: false,
    };

    #[test]
    fn an_image_measured_in_inline_css_has_its_area() {
        let area = |html: &str| html_facts(html, HtmlExtras::default()).image_area;
        assert_eq!(
            area("<img src=a style=\"width: 600px; height:800PX\">"),
            480_000.0
        );
        assert_eq!(
            area("<img src=a width=100 style='height:20px !important'>"),
            2_000.0
        );
        // The attribute first; a percentage, an em or a max-width is no size in pixels.
        assert_eq!(
            area("<img src=a width=10 height=10 style='width:600px'>"),
            100.0
        );
        assert_eq!(
            area("<img src=a style='max-width:600px;width:50%;height:90px'>"),
            0.0
        );
        assert_eq!(area("<img src=a style='width:3em;height:90'>"), 0.0);
        assert_eq!(area("<img src=a style='width:6é;height:90'>"), 0.0);
    }

    #[test]
    fn one_pass_reads_links_images_and_tags_as_a_lenient_reader_would() {
        let html = "<HTML><body>Hi <A class=x HREF=\"http://a.example/x\" title='t'>Click <b>here</b></a >\
            <a name=top>no target</a><a href=''>empty</a><a_b href=http://no.example>x</a>\
            <a data-href=http://c.example>outer <a href=http://d.example>inner</a> tail</a>\
            <img src=x WIDTH=\"120\" height = '1234567'><img src=y><img_x width=5 height=5>\
            <a href=http://open.example>never closed";
        let f = html_facts(html, HtmlExtras::default());
        let links: Vec<(&str, &str)> = f
            .anchors
            .iter()
            .map(|a| (a.href.as_str(), a.text.as_str()))
            .collect();
        assert_eq!(
            links,
            [
                ("http://a.example/x", "Click here"),
                ("http://c.example", "outer inner"),
            ]
        );
        assert_eq!(f.images, 2);
        // Five digits at most, as a height of a million pixels is no image.
        assert_eq!(f.image_area, 120.0 * 12345.0);
        // `<a_b` counts as an `a` tag (its name is read up to the `_`) but is no link.
        let tag = |name: &[u8]| {
            let t = f.tags.get(name);
            (t.opened, t.closed, t.reopened)
        };
        assert_eq!(tag(b"a"), (7, 6, true));
        assert_eq!(tag(b"HTML"), (1, 0, false));
        assert_eq!(tag(b"body"), (1, 0, false));
        assert_eq!(tag(b"head"), (0, 0, false));
        let text = "Hi Click here no target empty x outer inner tail never closed";
        assert_eq!(f.text_chars, text.replace(' ', "").len());
    }

    #[test]
    fn text_bytes_are_counted_without_white_space() {
        let every_byte: String = (0..=127u8).map(char::from).collect();
        for text in [
            "",
            " \t\r\n\x0c",
            "a b\x0bc",
            every_byte.as_str(),
            &"x \u{e9}\n".repeat(300),
            // Runs of 255 bytes that are all counted.
            &"y".repeat(600),
        ] {
            let want = text.bytes().filter(|b| !b.is_ascii_whitespace()).count();
            assert_eq!(non_space_bytes(text), want, "{text:?}");
        }
    }

    #[test]
    fn element_lists_are_sorted_for_binary_search() {
        assert!(ELEMENTS.is_sorted());
    }

    #[test]
    fn spamassassins_html_statistics() {
        let html = "<!DOCTYPE html><html><head><title>Big deal</title>\
            <style>p{}xy</style></head><body><!-- a > b --><!x>\
            fr<b></b>ee g<i>ift</i> ok<br>now <blink>x</blink></blink></p>\
            <o:p></o:p><font face=\"Arial, 'Helvetica'\" size=+3>big</font> \
            <span style='color: red; font-size: 30pt'>x</span> \
            <a href=http://a.example><img src=a.gif>pic</a><object></object>\
            <form action=\"MAILTO:x@example.org\"></form></body></html>";
        let s = html_facts(html, STATS).stats;
        assert_eq!(s.comments, ["<!-- a > b -->", "<!x>"]);
        assert_eq!(s.titles, ["Big deal"]);
        // `fr|ee` and `g|ift`: not `ok|now` (a break) nor text in a style sheet.
        assert_eq!(s.obfuscation, 2);
        // Tags: doctype, html, head, title, /title, style, /style, /head, body, b, /b,
        // i, /i, br, blink, /blink, /blink, /p, o:p, /o:p, font, /font, span, /span, a,
        // img, /a, object, /object, form, /form, /body, /html.
        assert_eq!(s.tags, 33);
        // All but the three blinks.
        assert_eq!(s.elements, 30);
        // Names: html head title b style body i br blink p o font span a img object form.
        assert_eq!((s.tags_seen, s.elements_seen), (17, 16));
        // The second `</blink>`, and `</p>` with no `<p>`.
        assert_eq!(s.closed_extra, 2);
        assert_eq!(s.max_size, f64::from(30.0f32 * 4.0 / 3.0));
        assert!(s.embeds && s.form_action_mailto && !s.font_face_bad);
        let f = html_facts(
            "<a href=x><img src=a><img src=b></a>",
            HtmlExtras::default(),
        );
        assert_eq!(f.anchors[0].images, 2);
        for (face, bad) in [
            ("Arial", false),
            ("\"Tahoma\", Verdana, Arial, sans-serif", false),
            (".SFUIDisplay", false),
            ("hirakakupro-w3", false),
            ("Arial,Helvetica,Sans-Serif;", false),
            ("xz1q9, 77", true),
            ("Arial<>", true),
            ("", true),
        ] {
            let s = html_facts(&format!("<font face='{face}'>x</font>"), STATS).stats;
            assert_eq!(s.font_face_bad, bad, "{face}");
        }
        for (size, px) in [
            ("1", 10.0),
            ("7", 48.0),
            ("9", 48.0),
            ("+1", 18.0),
            ("-5", 10.0),
        ] {
            assert_eq!(legacy_font_px(size), Some(px), "{size}");
        }
        assert_eq!(legacy_font_px("x"), None);
        assert_eq!(css_font_size("FONT-SIZE : 2em"), Some(32.0));
        assert_eq!(css_font_size("font-size:x-large;"), Some(24.0));
        assert_eq!(css_font_size("font-size: 150%"), Some(24.0));
        assert_eq!(css_font_size("font-size: huge"), None);
    }
}
