//! Text drawn in (nearly) the colour behind it, or in a colour that is none: SpamAssassin's
//! `html_test('font_low_contrast')` and `html_test('font_invalid_color')`. Hidden text is
//! how spam feeds a filter words its reader never sees. [`ColorStack`] follows the colours
//! that the elements around a text set, from HTML attributes and inline CSS, as the rules' HTML
//! facts (`rules::html_facts`) walk the markup; style sheets (`<style>`, classes) are not read
//! for them, as SpamAssassin reads none, and a message's HTML parts are read as one page
//! (SpamAssassin starts each afresh). The hidden-text reader (`html::Hider`) gives the
//! stack what a page's style sheet says as well ([`ColorStack::open_styled`]), and follows
//! a second stack with what the sheet's rules for some readers only show.
//!
//! The colours of every element that can hold text are followed (a dark `<section>`, `<li>`
//! or `<blockquote>` behind light text), and elements end as a browser ends them, in
//! outline: a paragraph, item, cell or row left open ends at the next, or at the block that
//! begins after it; a void element (`<br>`, `<img>`) holds nothing; an end tag ends nothing
//! outside the cell or table it is in. SpamAssassin follows a short list of tags, ends each
//! only at its end tag, and ends it there from anywhere.
//!
//! Where SpamAssassin 4.0.1 differs, spamnb does what its test means to do, as a reader
//! shows the page: `bgcolor` on body, table, row group, row and cell sets the background
//! (SpamAssassin reads the attribute and drops it, so black text in a black cell passes it); CSS
//! percentages, `hsl()`, alpha and `currentcolor` are read; `color : x` with a space
//! before the colon counts; a link's text has the link colour, not its parent's; and
//! text over a background image is not judged, its colours being unknown.

use super::html::{
    CELL, MAX_SEARCH, NOT_ENDED, attribute, attribute_values, css_declarations, end_tag_scope,
    holds_no_elements, implied_ends, name_key,
};

/// A colour where a page may give one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Color {
    Rgb([u8; 3]),
    /// Something written where a colour belongs that is no colour (`zzz`, `fff` without
    /// its `#`).
    Invalid,
    /// An image: its colours are not known.
    Unknown,
}

const BLACK: Color = Color::Rgb([0, 0, 0]);
const WHITE: Color = Color::Rgb([0xff, 0xff, 0xff]);
/// The colour readers give a link's text unless `<body link>` says otherwise.
const LINK_BLUE: Color = Color::Rgb([0, 0, 0xee]);

/// Styles deeper than this are not followed: a page of unclosed tags would otherwise make
/// every end tag search a long stack.
const MAX_DEPTH: usize = 512;

/// What the colours of a page's text showed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ColorFlags {
    /// Text in the colour of its background, or one hard to tell from it.
    pub(crate) low_contrast: bool,
    /// Text in, or on, a colour that is none.
    pub(crate) invalid_color: bool,
}

/// What a colour value asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Paint {
    Color(Color),
    /// CSS's `transparent` (or an alpha of 0): what lies behind shows through.
    Transparent,
    /// CSS's `currentcolor`: the text's colour.
    Current,
    /// CSS's `inherit` and kin: what the element has without it.
    Keep,
}

/// The named colours of HTML 4 and CSS (X11's, grey spelt both ways), sorted by name.
#[rustfmt::skip]
const NAMED: &[(&str, u32)] = &[
    ("aliceblue", 0xf0f8ff), ("antiquewhite", 0xfaebd7), ("aqua", 0x00ffff),
    ("aquamarine", 0x7fffd4), ("azure", 0xf0ffff), ("beige", 0xf5f5dc), ("bisque", 0xffe4c4),
    ("black", 0x000000), ("blanchedalmond", 0xffebcd), ("blue", 0x0000ff),
    ("blueviolet", 0x8a2be2), ("brown", 0xa52a2a), ("burlywood", 0xdeb887),
    ("cadetblue", 0x5f9ea0), ("chartreuse", 0x7fff00), ("chocolate", 0xd2691e),
    ("coral", 0xff7f50), ("cornflowerblue", 0x6495ed), ("cornsilk", 0xfff8dc),
    ("crimson", 0xdc143c), ("cyan", 0x00ffff), ("darkblue", 0x00008b), ("darkcyan", 0x008b8b),
    ("darkgoldenrod", 0xb8860b), ("darkgray", 0xa9a9a9), ("darkgreen", 0x006400),
    ("darkgrey", 0xa9a9a9), ("darkkhaki", 0xbdb76b), ("darkmagenta", 0x8b008b),
    ("darkolivegreen", 0x556b2f), ("darkorange", 0xff8c00), ("darkorchid", 0x9932cc),
    ("darkred", 0x8b0000), ("darksalmon", 0xe9967a), ("darkseagreen", 0x8fbc8f),
    ("darkslateblue", 0x483d8b), ("darkslategray", 0x2f4f4f), ("darkslategrey", 0x2f4f4f),
    ("darkturquoise", 0x00ced1), ("darkviolet", 0x9400d3), ("deeppink", 0xff1493),
    ("deepskyblue", 0x00bfff), ("dimgray", 0x696969), ("dimgrey", 0x696969),
    ("dodgerblue", 0x1e90ff), ("firebrick", 0xb22222), ("floralwhite", 0xfffaf0),
    ("forestgreen", 0x228b22), ("fuchsia", 0xff00ff), ("gainsboro", 0xdcdcdc),
    ("ghostwhite", 0xf8f8ff), ("gold", 0xffd700), ("goldenrod", 0xdaa520), ("gray", 0x808080),
    ("green", 0x008000), ("greenyellow", 0xadff2f), ("grey", 0x808080), ("honeydew", 0xf0fff0),
    ("hotpink", 0xff69b4), ("indianred", 0xcd5c5c), ("indigo", 0x4b0082), ("ivory", 0xfffff0),
    ("khaki", 0xf0e68c), ("lavender", 0xe6e6fa), ("lavenderblush", 0xfff0f5),
    ("lawngreen", 0x7cfc00), ("lemonchiffon", 0xfffacd), ("lightblue", 0xadd8e6),
    ("lightcoral", 0xf08080), ("lightcyan", 0xe0ffff), ("lightgoldenrodyellow", 0xfafad2),
    ("lightgray", 0xd3d3d3), ("lightgreen", 0x90ee90), ("lightgrey", 0xd3d3d3),
    ("lightpink", 0xffb6c1), ("lightsalmon", 0xffa07a), ("lightseagreen", 0x20b2aa),
    ("lightskyblue", 0x87cefa), ("lightslategray", 0x778899), ("lightslategrey", 0x778899),
    ("lightsteelblue", 0xb0c4de), ("lightyellow", 0xffffe0), ("lime", 0x00ff00),
    ("limegreen", 0x32cd32), ("linen", 0xfaf0e6), ("magenta", 0xff00ff), ("maroon", 0x800000),
    ("mediumaquamarine", 0x66cdaa), ("mediumblue", 0x0000cd), ("mediumorchid", 0xba55d3),
    ("mediumpurple", 0x9370db), ("mediumseagreen", 0x3cb371), ("mediumslateblue", 0x7b68ee),
    ("mediumspringgreen", 0x00fa9a), ("mediumturquoise", 0x48d1cc),
    ("mediumvioletred", 0xc71585), ("midnightblue", 0x191970), ("mintcream", 0xf5fffa),
    ("mistyrose", 0xffe4e1), ("moccasin", 0xffe4b5), ("navajowhite", 0xffdead),
    ("navy", 0x000080), ("oldlace", 0xfdf5e6), ("olive", 0x808000), ("olivedrab", 0x6b8e23),
    ("orange", 0xffa500), ("orangered", 0xff4500), ("orchid", 0xda70d6),
    ("palegoldenrod", 0xeee8aa), ("palegreen", 0x98fb98), ("paleturquoise", 0xafeeee),
    ("palevioletred", 0xdb7093), ("papayawhip", 0xffefd5), ("peachpuff", 0xffdab9),
    ("peru", 0xcd853f), ("pink", 0xffc0cb), ("plum", 0xdda0dd), ("powderblue", 0xb0e0e6),
    ("purple", 0x800080), ("rebeccapurple", 0x663399), ("red", 0xff0000),
    ("rosybrown", 0xbc8f8f), ("royalblue", 0x4169e1), ("saddlebrown", 0x8b4513),
    ("salmon", 0xfa8072), ("sandybrown", 0xf4a460), ("seagreen", 0x2e8b57),
    ("seashell", 0xfff5ee), ("sienna", 0xa0522d), ("silver", 0xc0c0c0), ("skyblue", 0x87ceeb),
    ("slateblue", 0x6a5acd), ("slategray", 0x708090), ("slategrey", 0x708090),
    ("snow", 0xfffafa), ("springgreen", 0x00ff7f), ("steelblue", 0x4682b4), ("tan", 0xd2b48c),
    ("teal", 0x008080), ("thistle", 0xd8bfd8), ("tomato", 0xff6347), ("turquoise", 0x40e0d0),
    ("violet", 0xee82ee), ("wheat", 0xf5deb3), ("white", 0xffffff), ("whitesmoke", 0xf5f5f5),
    ("yellow", 0xffff00), ("yellowgreen", 0x9acd32),
];

fn named(name: &str) -> Option<[u8; 3]> {
    let at = NAMED.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
    let [_, r, g, b] = NAMED[at].1.to_be_bytes();
    Some([r, g, b])
}

/// A colour as a page writes it (`css`: in a style, else in an HTML attribute): a name,
/// `#rgb`, `#rrggbb`, `rgb(…)`; in a style also `transparent`, `currentcolor`, `inherit`.
fn paint(value: &str, css: bool) -> Paint {
    let value = value.trim().to_ascii_lowercase();
    if let Some(rgb) = named(&value) {
        return Paint::Color(Color::Rgb(rgb));
    }
    let parsed = match value.as_str() {
        "transparent" => Some(Paint::Transparent),
        "currentcolor" => Some(Paint::Current),
        "inherit" | "initial" | "unset" | "revert" | "revert-layer" => Some(Paint::Keep),
        v => match v.strip_prefix('#') {
            Some(hex) => hex_color(hex, css),
            None => color_function(v),
        },
    };
    match parsed {
        // An attribute knows colours alone.
        Some(Paint::Color(c)) => Paint::Color(c),
        Some(other) if css => other,
        _ => Paint::Color(Color::Invalid),
    }
}

/// What follows the `#` of a colour, read as SpamAssassin reads it: hex digits (more `#`s
/// passed over), six or more are `rrggbb` (CSS's alpha after them dropped), four or five
/// `rgb`, fewer are padded with `0` to three; each of three digits stands doubled (`abc` is
/// `aabbcc`). In a style, `#rgba` and `#rrggbbaa` with an alpha of 0 are transparent.
fn hex_color(hex: &str, css: bool) -> Option<Paint> {
    if !hex.bytes().all(|b| b == b'#' || b.is_ascii_hexdigit()) {
        return None;
    }
    let mut digits = [0u8; 8];
    let mut count = 0;
    for d in hex.chars().filter_map(|c| c.to_digit(16)) {
        if let Some(slot) = digits.get_mut(count) {
            *slot = d as u8;
        }
        count += 1;
    }
    let alpha = match count {
        4 => &digits[3..4],
        8 => &digits[6..8],
        _ => &[][..],
    };
    if css && !alpha.is_empty() && alpha.iter().all(|&d| d == 0) {
        return Some(Paint::Transparent);
    }
    let rgb = match count {
        // A `#` alone: SpamAssassin keeps it as a colour no other matches; it is none.
        0 => return None,
        1..=5 => [digits[0] * 17, digits[1] * 17, digits[2] * 17],
        _ => [0, 1, 2].map(|i| digits[2 * i] * 16 + digits[2 * i + 1]),
    };
    Some(Paint::Color(Color::Rgb(rgb)))
}

/// `rgb(…)`, `rgba(…)`, `hsl(…)`, `hsla(…)`: three numbers or percentages and perhaps an
/// alpha, apart by commas, spaces or a slash; an alpha of 0 is transparent.
fn color_function(value: &str) -> Option<Paint> {
    let (name, arguments) = value.strip_suffix(')')?.split_once('(')?;
    let mut numbers = [(0.0, false); 4];
    let mut count = 0;
    for word in arguments
        .split([',', ' ', '\t', '/'])
        .filter(|w| !w.is_empty())
    {
        let (number, percent) = match word.strip_suffix('%') {
            Some(n) => (n, true),
            None => (word.strip_suffix("deg").unwrap_or(word), false),
        };
        *numbers.get_mut(count)? = (number.parse::<f64>().ok()?, percent);
        count += 1;
    }
    if count == 4 && numbers[3].0 <= 0.0 {
        return Some(Paint::Transparent);
    }
    if count < 3 {
        return None;
    }
    // `as u8` saturates: 300 is 255, -5 is 0.
    let rgb = match name.trim_end() {
        "rgb" | "rgba" => numbers[..3].iter().map(|&(n, percent)| match percent {
            true => (n / 100.0 * 255.0).floor() as u8,
            false => n as u8,
        }),
        "hsl" | "hsla" => return Some(Paint::Color(Color::Rgb(hsl(numbers)))),
        _ => return None,
    };
    let mut out = [0u8; 3];
    for (o, c) in out.iter_mut().zip(rgb) {
        *o = c;
    }
    Some(Paint::Color(Color::Rgb(out)))
}

/// Hue in degrees, saturation and lightness in percent, to RGB.
fn hsl(numbers: [(f64, bool); 4]) -> [u8; 3] {
    let hue = numbers[0].0.rem_euclid(360.0) / 360.0;
    let [saturation, lightness] = [numbers[1].0, numbers[2].0].map(|p| (p / 100.0).clamp(0.0, 1.0));
    let q = if lightness < 0.5 {
        lightness * (1.0 + saturation)
    } else {
        lightness + saturation - lightness * saturation
    };
    let p = 2.0 * lightness - q;
    let channel = |t: f64| {
        let t = t.rem_euclid(1.0);
        let v = if t < 1.0 / 6.0 {
            p + (q - p) * 6.0 * t
        } else if t < 0.5 {
            q
        } else if t < 2.0 / 3.0 {
            p + (q - p) * (2.0 / 3.0 - t) * 6.0
        } else {
            p
        };
        (v * 255.0).round() as u8
    };
    [
        channel(hue + 1.0 / 3.0),
        channel(hue),
        channel(hue - 1.0 / 3.0),
    ]
}

/// Whether two colours are too close to tell apart: their distance with each channel
/// weighted by its share of luminance (Rec. 709) below 12, as SpamAssassin measures it.
fn nearly_same(a: [u8; 3], b: [u8; 3]) -> bool {
    const WEIGHTS: [f64; 3] = [0.2126, 0.7152, 0.0722];
    let squared: f64 = (0..3)
        .map(|i| (WEIGHTS[i] * (f64::from(a[i]) - f64::from(b[i]))).powi(2))
        .sum();
    squared < 12.0 * 12.0
}

const BODY: u128 = name_key(b"body");
const FONT: u128 = name_key(b"font");
const LINK: u128 = name_key(b"a");
/// The elements whose `bgcolor` and `background` attributes readers paint.
const TABLE_PARTS: [u128; 7] = [
    name_key(b"table"),
    name_key(b"tbody"),
    name_key(b"thead"),
    name_key(b"tfoot"),
    name_key(b"tr"),
    name_key(b"td"),
    name_key(b"th"),
];

/// How text in a style shows, when it does not show plainly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    LowContrast,
    InvalidColor,
}

/// The colours inside one open element.
#[derive(Debug, Clone, Copy)]
struct Style {
    /// The element's name ([`name_key`]); 0 for the document.
    key: u128,
    fg: Color,
    bg: Color,
    /// Found when the style is made, since many texts may be read in it.
    fault: Option<Fault>,
}

impl Style {
    fn new(key: u128, fg: Color, bg: Color) -> Style {
        let fault = match (fg, bg) {
            // SpamAssassin calls two invalid colours alike, and so low contrast; both are
            // no colour, which is what its invalid-colour test is for.
            (Color::Invalid, _) | (_, Color::Invalid) => Some(Fault::InvalidColor),
            (Color::Rgb(a), Color::Rgb(b)) if nearly_same(a, b) => Some(Fault::LowContrast),
            _ => None,
        };
        Style { key, fg, bg, fault }
    }
}

/// Outside every tag: black on white.
const DOCUMENT: Style = Style {
    key: 0,
    fg: BLACK,
    bg: WHITE,
    fault: None,
};

/// The colours of the tags open at a point of the markup, innermost last, and what the
/// text read so far showed.
#[derive(Clone)]
pub(crate) struct ColorStack {
    /// Never empty: the document's black on white at the bottom is never closed.
    styles: Vec<Style>,
    /// The colour of a link's text.
    link: Color,
    pub(crate) flags: ColorFlags,
}

impl ColorStack {
    pub(crate) fn new() -> ColorStack {
        ColorStack {
            styles: vec![DOCUMENT],
            link: LINK_BLUE,
            flags: ColorFlags::default(),
        }
    }

    fn top(&self) -> &Style {
        self.styles.last().unwrap_or(&DOCUMENT)
    }

    /// A start tag: `name` lowercase, `attributes` as written.
    pub(crate) fn open(&mut self, name: &[u8], attributes: &str) {
        self.push(name_key(name), attributes, attribute(attributes, "style"));
    }

    /// A start tag of the element `key` ([`name_key`]) whose declarations are `style`, in
    /// place of its `style` attribute: the hidden-text reader's, with those of the page's
    /// style sheet.
    pub(crate) fn open_styled(&mut self, key: u128, attributes: &str, style: Option<&str>) {
        self.push(key, attributes, style);
    }

    fn push(&mut self, key: u128, attributes: &str, style: Option<&str>) {
        // A paragraph, item, cell or row begun ends the one left open before it, and what
        // is inside that, as a reader ends them.
        for (names, scope) in implied_ends(key) {
            self.end_innermost(names, scope);
        }
        if holds_no_elements(key) || self.styles.len() >= MAX_DEPTH {
            return;
        }
        let behind = self.top().bg;
        let (mut fg, mut bg) = (self.top().fg, behind);
        let attr = |name| attribute(attributes, name);
        match key {
            BODY => {
                if let Some(text) = attr("text") {
                    fg = attribute_color(text);
                }
                if let Some(Color::Rgb(link)) = attr("link").map(attribute_color) {
                    self.link = Color::Rgb(link);
                }
            }
            FONT => {
                if let Some(color) = attr("color") {
                    fg = attribute_color(color);
                }
            }
            LINK if attribute_values(attributes, "href").next().is_some() => fg = self.link,
            _ => {}
        }
        if key == BODY || TABLE_PARTS.contains(&key) {
            // SpamAssassin 4.0.1 drops `bgcolor` (a bug): readers paint it, so spamnb does.
            // It was never part of SpamAssassin's invalid-colour test, so a value that is
            // no colour (`""` is common in templates) leaves the background as it was;
            // `ffffff` without its `#` is white, as readers take it.
            if let Some(Paint::Color(Color::Rgb(rgb))) =
                attr("bgcolor").map(|v| match paint(v, false) {
                    Paint::Color(Color::Invalid) => paint(&format!("#{}", v.trim()), false),
                    other => other,
                })
            {
                bg = Color::Rgb(rgb);
            }
            if attr("background").is_some_and(|image| !image.trim().is_empty()) {
                bg = Color::Unknown;
            }
        }
        if let Some(style) = style {
            (fg, bg) = apply_style(style, fg, bg, behind);
        }
        self.styles.push(Style::new(key, fg, bg));
    }

    /// Ends the innermost open element named in `names` and those inside it, unless one
    /// named in `scope` comes first, or it is deeper than [`MAX_SEARCH`] (as the hidden-text
    /// reader's elements end: a page of start tags that end nothing takes time in its
    /// length).
    fn end_innermost(&mut self, names: &[u128], scope: &[u128]) {
        for at in (1..self.styles.len()).rev().take(MAX_SEARCH) {
            let key = self.styles[at].key;
            if names.contains(&key) {
                self.styles.truncate(at);
                return;
            }
            if scope.contains(&key) {
                return;
            }
        }
    }

    /// An end tag: closes the innermost open element of its name and those inside it (`</th>`
    /// a `td` too, as SpamAssassin treats them alike), unless it is outside the cell or
    /// table the end tag is in, as a reader ignores it there, or deeper than [`MAX_SEARCH`]
    /// (a page of end tags that end nothing, under hundreds of open elements, took seconds);
    /// one of a name not open changes nothing.
    pub(crate) fn close(&mut self, name: &[u8]) {
        let key = name_key(name);
        // Text after `</body>` is still the body's to a reader.
        if NOT_ENDED.contains(&key) {
            return;
        }
        let names = if CELL.contains(&key) {
            &CELL[..]
        } else {
            std::slice::from_ref(&key)
        };
        let scope = end_tag_scope(key);
        for at in (1..self.styles.len()).rev().take(MAX_SEARCH) {
            let open = self.styles[at].key;
            if names.contains(&open) {
                self.styles.truncate(at);
                return;
            }
            if scope.contains(&open) {
                return;
            }
        }
    }

    /// Whether text here is drawn in (nearly) its background's colour: there, but not read.
    pub(crate) fn hides_text(&self) -> bool {
        self.top().fault == Some(Fault::LowContrast)
    }

    /// Text between tags, as written (entities not decoded).
    pub(crate) fn text(&mut self, text: &str) {
        let Some(fault) = self.top().fault else {
            return;
        };
        if !shows_something(text) {
            return;
        }
        match fault {
            Fault::LowContrast => self.flags.low_contrast = true,
            Fault::InvalidColor => self.flags.invalid_color = true,
        }
    }
}

/// A colour in an HTML attribute (`color`, `text`).
fn attribute_color(value: &str) -> Color {
    match paint(value, false) {
        Paint::Color(c) => c,
        _ => Color::Invalid,
    }
}

/// The text and background colours after a `style` attribute's `color`, `background-color`,
/// `background-image` and `background`, given those before it (`fg`, `bg`) and the
/// background of the element around (`behind`, what `transparent` shows).
fn apply_style(style: &str, fg: Color, bg: Color, behind: Color) -> (Color, Color) {
    let (mut text, mut back) = (Paint::Keep, Paint::Keep);
    let mut image = None;
    for (property, value) in css_declarations(style) {
        let is = |name: &str| property.eq_ignore_ascii_case(name);
        if is("color") {
            text = paint(value, true);
        } else if is("background-color") {
            back = paint(value, true);
        } else if is("background-image") {
            image = Some(has_url(value));
        } else if is("background") {
            let (color, has_image) = background(value);
            (back, image) = (color, Some(has_image));
        }
    }
    let fg = match text {
        Paint::Color(c) => c,
        _ => fg,
    };
    let bg = match back {
        _ if image == Some(true) => Color::Unknown,
        Paint::Color(c) => c,
        Paint::Transparent => behind,
        Paint::Current => fg,
        Paint::Keep => bg,
    };
    // Transparent text shows the background: it cannot be read.
    let fg = if text == Paint::Transparent { bg } else { fg };
    (fg, bg)
}

fn has_url(value: &str) -> bool {
    value.to_ascii_lowercase().contains("url(")
}

/// The `background` shorthand: the colour of its last layer (the only one that may have
/// one: the first of its words that is a colour; transparent without) and whether that
/// layer has an image, which would cover the colour.
fn background(value: &str) -> (Paint, bool) {
    let layer = split_outside_parentheses(value, |c| c == ',')
        .last()
        .unwrap_or_default();
    let color = split_outside_parentheses(layer, char::is_whitespace)
        .map(|word| paint(word, true))
        .find(|p| *p != Paint::Color(Color::Invalid))
        .unwrap_or(Paint::Transparent);
    (color, has_url(layer))
}

/// `value` cut where `separates` holds outside parentheses and quotes (`rgb(1, 2, 3)` and
/// `url("a b")` stay whole), empty pieces left out.
fn split_outside_parentheses(
    value: &str,
    separates: impl Fn(char) -> bool,
) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    let mut quote = None;
    let mut start = 0;
    let mut pieces = Vec::new();
    for (i, c) in value.char_indices() {
        match (quote, c) {
            (Some(q), _) if q == c => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, c) if depth == 0 && separates(c) => {
                pieces.push(&value[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    pieces.push(&value[start..]);
    pieces.into_iter().map(str::trim).filter(|p| !p.is_empty())
}

/// Whether text shows anything: more than white space, no-break spaces (as characters or
/// as `&nbsp;`) and characters of no width.
fn shows_something(text: &str) -> bool {
    const BLANK_ENTITIES: [&str; 3] = ["&nbsp;", "&#160;", "&#xa0;"];
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let blank = match c {
            '&' => BLANK_ENTITIES.iter().find_map(|e| {
                let head = rest.get(..e.len())?;
                head.eq_ignore_ascii_case(e).then_some(e.len())
            }),
            c if c.is_whitespace() => Some(c.len_utf8()),
            '\u{200b}'..='\u{200d}' | '\u{feff}' | '\u{ad}' => Some(c.len_utf8()),
            _ => None,
        };
        match blank {
            Some(len) => rest = &rest[len..],
            None => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rgb(hex: u32) -> Color {
        let [_, r, g, b] = hex.to_be_bytes();
        Color::Rgb([r, g, b])
    }

    #[test]
    fn named_colors_are_sorted_for_binary_search() {
        assert!(NAMED.is_sorted_by_key(|(name, _)| *name));
    }

    #[test]
    fn colors_in_attributes() {
        for (value, color) in [
            ("red", rgb(0xff0000)),
            (" RED ", rgb(0xff0000)),
            ("Grey", rgb(0x808080)),
            ("LightGoldenRodYellow", rgb(0xfafad2)),
            ("#abc", rgb(0xaabbcc)),
            ("#ABCDEF", rgb(0xabcdef)),
            // SpamAssassin's reading of too few or too many digits.
            ("#1", rgb(0x110000)),
            ("#12", rgb(0x112200)),
            ("#1234", rgb(0x112233)),
            ("#12345", rgb(0x112233)),
            ("#1234567", rgb(0x123456)),
            ("##fff", rgb(0xffffff)),
            ("#fff#", rgb(0xffffff)),
            ("rgb(255, 0, 0)", rgb(0xff0000)),
            ("rgb(100%, 50%, 0%)", rgb(0xff7f00)),
            ("rgb(300, -5, 12.7)", rgb(0xff000c)),
            ("hsl(120, 100%, 25%)", rgb(0x008000)),
            ("hsl(-240deg 100% 50%)", rgb(0x00ff00)),
            // No colours, or none an attribute may give.
            ("ffffff", Color::Invalid),
            ("zzz", Color::Invalid),
            ("", Color::Invalid),
            ("#", Color::Invalid),
            ("#ggg", Color::Invalid),
            ("transparent", Color::Invalid),
            ("inherit", Color::Invalid),
            ("rgb(1, 2)", Color::Invalid),
            ("rgb(1, 2, 3", Color::Invalid),
            ("rgb(1, 2, 3, 4, 5)", Color::Invalid),
            ("rgba(0, 0, 0, 0)", Color::Invalid),
            ("url(x)", Color::Invalid),
        ] {
            assert_eq!(attribute_color(value), color, "{value:?}");
        }
    }

    #[test]
    fn colors_in_styles() {
        for (value, painted) in [
            ("transparent", Paint::Transparent),
            ("currentColor", Paint::Current),
            ("inherit", Paint::Keep),
            ("rgba(0, 0, 0, 0)", Paint::Transparent),
            ("rgb(0 0 0 / 0%)", Paint::Transparent),
            ("#ffffff00", Paint::Transparent),
            ("#fff0", Paint::Transparent),
            ("#fff8", Paint::Color(rgb(0xffffff))),
            ("rgba(255, 255, 255, 0.5)", Paint::Color(rgb(0xffffff))),
            ("white", Paint::Color(rgb(0xffffff))),
            ("whiteish", Paint::Color(Color::Invalid)),
        ] {
            assert_eq!(paint(value, true), painted, "{value:?}");
        }
    }

    #[test]
    fn contrast_is_luminance_weighted_distance_below_12() {
        for (a, b, same) in [
            (0xffffff, 0xffffff, true),
            (0xffffff, 0xfffffe, true),
            // 15 a channel: 11.2.
            (0xffffff, 0xf0f0f0, true),
            // 17 a channel: 12.7.
            (0xffffff, 0xeeeeee, false),
            // Blue weighs little: 11.6 and 17.2.
            (0x000000, 0x0000a0, true),
            (0x000000, 0x0000ee, false),
            (0xffffff, 0xffff00, false),
            (0x000000, 0xffffff, false),
        ] {
            let (Color::Rgb(x), Color::Rgb(y)) = (rgb(a), rgb(b)) else {
                unreachable!("rgb() makes Rgb colours");
            };
            assert_eq!(nearly_same(x, y), same, "{a:06x} {b:06x}");
        }
    }

    #[test]
    fn styles_set_text_and_background() {
        let (black, white) = (BLACK, WHITE);
        for (style, fg, bg) in [
            ("color: RED !important", rgb(0xff0000), white),
            ("color : #fff", white, white),
            ("font-size: 1px; colour: red", black, white),
            ("background-color: #000; color: #fff", white, black),
            ("background-color: zzz", black, Color::Invalid),
            (
                "background: #000 url('a b.png') no-repeat",
                black,
                Color::Unknown,
            ),
            // Only the last layer has a colour.
            (
                "background: url(a.png), rgb(0, 0, 0) no-repeat",
                black,
                black,
            ),
            ("background: none", black, rgb(0x123456)),
            ("background-color: transparent", black, rgb(0x123456)),
            (
                "background-color: #000; background-image: url(x)",
                black,
                Color::Unknown,
            ),
            (
                "color: transparent; background-color: #abc",
                rgb(0xaabbcc),
                rgb(0xaabbcc),
            ),
            (
                "background-color: currentcolor; color: #abc",
                rgb(0xaabbcc),
                rgb(0xaabbcc),
            ),
            ("color: inherit", black, white),
            // A `;` in quotes ends no declaration: this names a font, and no colour.
            ("font-family: \"a;color:#fff;\"", black, white),
            ("font-family: 'a;b'; color: #fff ! important", white, white),
        ] {
            assert_eq!(
                apply_style(style, black, white, rgb(0x123456)),
                (fg, bg),
                "{style:?}"
            );
        }
    }

    /// The stack after `markup`, read as the HTML pass reads it: tags from `<` to `>`,
    /// text between.
    fn read(markup: &str) -> ColorStack {
        let mut stack = ColorStack::new();
        for (i, piece) in markup.split(['<', '>']).enumerate() {
            if i % 2 == 0 {
                stack.text(piece);
            } else if let Some(name) = piece.strip_prefix('/') {
                stack.close(name.as_bytes());
            } else {
                let (name, attributes) = piece.split_once(' ').unwrap_or((piece, ""));
                stack.open(name.as_bytes(), attributes);
            }
        }
        stack
    }

    #[test]
    fn the_stack_follows_open_tags() {
        let red = rgb(0xff0000);
        for (markup, fg, bg) in [
            ("", BLACK, WHITE),
            ("<font color=red>", red, WHITE),
            ("<font color=red><font color=blue></font>", red, WHITE),
            // An end tag closes those inside it; one of a tag not open, nothing.
            (
                "<font color=red><span style='color:blue'><b>x</font>",
                BLACK,
                WHITE,
            ),
            ("<font color=red></span></div>", red, WHITE),
            ("<font color=red><blink></font>", BLACK, WHITE),
            // Elements that hold no text: no colours of their own.
            (
                "<img style='color:red'><br style='color:red'><style style='color:red'>",
                BLACK,
                WHITE,
            ),
            // Any element that holds text has the colours its style gives it.
            (
                "<section style='background:#111'><p style='color:#eee'>",
                rgb(0xeeeeee),
                rgb(0x111111),
            ),
            ("<ul style='background:red'><li>", BLACK, red),
            ("<marquee style='color:red'>", red, WHITE),
            // Elements whose end tags are left out end where a reader ends them: an item
            // at the next item, a paragraph at a block or a rule, a row group at the next.
            ("<ul><li style='color:red'>a<li>", BLACK, WHITE),
            ("<ul><li style='color:red'><ul><li>", red, WHITE),
            ("<dl><dt style='color:red'>a<dd>", BLACK, WHITE),
            ("<p style='color:red'>a<blockquote>", BLACK, WHITE),
            ("<p style='color:red'>a<hr>", BLACK, WHITE),
            ("<p style='color:red'>a<span>", red, WHITE),
            (
                "<table><tbody style='background:red'><tr><td>a<tfoot>",
                BLACK,
                WHITE,
            ),
            ("<tbody bgcolor=red><tr><td>a", BLACK, red),
            ("<select><option style='color:red'>a<option>", BLACK, WHITE),
            // A block begun inside a marquee, or a cell, within a paragraph ends none.
            ("<p style='color:red'><marquee><div>", red, WHITE),
            (
                "<p style='color:red'>a<table><tr><td><p style='background:#000'>",
                BLACK,
                BLACK,
            ),
            ("<html style='color:red'></html>", red, WHITE),
            // An end tag inside a cell ends nothing outside its table: a stray `</center>`
            // leaves the dark cell open; `</tr>` ends the cell it is in.
            (
                "<center><table><tr><td bgcolor=#000><font color=red>x</center>",
                red,
                BLACK,
            ),
            ("<font color=red><table><tr><td></font>", red, WHITE),
            (
                "<table bgcolor=red><tr><td bgcolor=#000><font color=white>x</tr>",
                BLACK,
                red,
            ),
            ("<ul style='color:red'><li><p>x</ul>", BLACK, WHITE),
            // A cell ends the cell and fonts left open before it; `</th>` ends a `td`.
            (
                "<table bgcolor=#000><tr><td><font color=white>x<td>",
                BLACK,
                BLACK,
            ),
            (
                "<table><tr bgcolor=red><td bgcolor=#fff><b></th>",
                BLACK,
                red,
            ),
            ("<table><tr bgcolor=red><td><tr>", BLACK, WHITE),
            // `bgcolor` without its `#` as readers take it; one that is no colour ignored.
            ("<table bgcolor=000000><tr bgcolor=''>", BLACK, BLACK),
            ("<body bgcolor=zzz>", BLACK, WHITE),
            (
                "<td background=dark.jpg bgcolor=#fff>",
                BLACK,
                Color::Unknown,
            ),
            // The body stays open after `</body>`.
            ("<body text=white bgcolor=black></body>", WHITE, BLACK),
            // Links have their own colour.
            ("<body link=red><a href=x>", red, WHITE),
            ("<font color=white><a href=x>", LINK_BLUE, WHITE),
            ("<font color=white><a name=x>", WHITE, WHITE),
            ("<a href=x><font color=white>", WHITE, WHITE),
            // A colour written inside another attribute's value is no colour.
            ("<font title=\"color=white\">", BLACK, WHITE),
            ("<font title='x color=#fff '>", BLACK, WHITE),
            ("<div title='style=color:white'>", BLACK, WHITE),
            ("<font title=\"x\" color=white>", WHITE, WHITE),
        ] {
            let stack = read(markup);
            assert_eq!((stack.top().fg, stack.top().bg), (fg, bg), "{markup:?}");
        }
        let deep = read(&"<span>".repeat(2 * MAX_DEPTH));
        assert_eq!(deep.styles.len(), MAX_DEPTH, "a stack of unclosed tags");
    }

    #[test]
    fn text_in_a_faulty_style_sets_its_flag() {
        for (markup, low_contrast, invalid_color) in [
            ("plain", false, false),
            ("<font color=#fff>hidden</font>", true, false),
            (
                "<font color=#fff>&nbsp; \u{a0}&#160;\u{200b}</font>",
                false,
                false,
            ),
            ("<font color=#fff></font>shown", false, false),
            (
                "<body bgcolor=#000><font color=#010101>.</font>",
                true,
                false,
            ),
            ("<font color=zzz>x</font>", false, true),
            ("<div style='background-color:zzz'>x</div>", false, true),
            // SpamAssassin calls this low contrast: two invalid colours are alike to it.
            (
                "<div style='background-color:zzz;color:zzz'>x</div>",
                false,
                true,
            ),
            ("<span style='color: transparent'>x", true, false),
            ("<table bgcolor=#000><tr><td>black on black", true, false),
            (
                "<td style='background:url(x.png)'><font color=white>on an image",
                false,
                false,
            ),
            ("<font color=white><a href=x>a link", false, false),
            // Light text on a dark background, whatever element paints it, shows.
            (
                "<section style='background:#111'><p style='color:#fafafa'>news</p></section>",
                false,
                false,
            ),
            (
                "<ul style='background-color:#000'><li><b style='color:#fff'>a</b><li><i style='color:#fff'>b",
                false,
                false,
            ),
            (
                "<blockquote style='background:#222'><font color=#fff>quoted</font></blockquote>",
                false,
                false,
            ),
            (
                "<article style='background:#000'><h2 style='color:#fff'>x</h2>",
                false,
                false,
            ),
            // And light text on a light one in them is hidden.
            ("<li style='color:#fff'>hidden", true, false),
            (
                "<article style='background:#eee'><p style='color:#f0f0f0'>x",
                true,
                false,
            ),
            ("<section style='color:zzz'>x", false, true),
            // The dark background ends with its element, left open or not.
            (
                "<ul style='background:#000'><li style='color:#fff'>a</ul><p style='color:#fff'>x",
                true,
                false,
            ),
        ] {
            let flags = read(markup).flags;
            assert_eq!(
                (flags.low_contrast, flags.invalid_color),
                (low_contrast, invalid_color),
                "{markup:?}"
            );
        }
    }
}
