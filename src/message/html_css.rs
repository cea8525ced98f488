//! CSS as the hidden-text reader (`html::Hider`) reads it: a style's declarations, and a
//! page's style sheet, the rules of its `<style>` elements, of which it keeps those with
//! simple selectors (a tag, an id, classes, `*`) and the declarations that can hide text or
//! show it again. Combinators, pseudo-classes, attribute selectors and at-rules other than
//! `@media screen` are not read: what their rules hide counts as shown, as it did before
//! style sheets were read at all.
//!
//! Reading is bounded: at most [`MAX_RULES`] rules of a page are read and [`MAX_SELECTORS`]
//! selectors kept, [`MAX_PER_KEY`] of them for one tag, id or class, so that an element is
//! matched in a bounded number of comparisons however long the sheet.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use super::html::name_key;

/// Rules read of a page's style sheets (those not kept count): the rest is not read.
const MAX_RULES: usize = 2048;
/// Selectors kept of a page's style sheets.
const MAX_SELECTORS: usize = 512;
/// Selectors kept for one id, one class (the first of a selector's), one tag or `*`.
const MAX_PER_KEY: usize = 8;
/// Classes of one element looked up; more are not.
pub(super) const MAX_CLASSES: usize = 8;
/// Classes of one selector (`.a.b`); a selector with more is not read.
const MAX_SELECTOR_CLASSES: usize = 4;
/// Declarations kept of one rule.
const MAX_DECLARATIONS: usize = 32;

/// The properties a style sheet's declarations are kept for: those that can hide text, or
/// show it again. Sorted, to be searched.
const PROPERTIES: [&str; 30] = [
    "background",
    "background-color",
    "background-image",
    "bottom",
    "color",
    "display",
    "float",
    "font",
    "font-size",
    "height",
    "left",
    "max-height",
    "max-width",
    "min-height",
    "min-width",
    "opacity",
    "overflow",
    "overflow-x",
    "overflow-y",
    "padding",
    "padding-bottom",
    "padding-left",
    "padding-right",
    "padding-top",
    "position",
    "right",
    "text-indent",
    "top",
    "visibility",
    "width",
];

/// A style's declarations, in order: each property, trimmed, its value without
/// `!important`, and whether it had it. A `;` inside quotes ends none
/// (`font-family: "a;display:none"` is one declaration).
pub(super) fn declarations(style: &str) -> impl Iterator<Item = (&str, &str, bool)> {
    let bytes = style.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at <= bytes.len() {
            let end = find_outside_quotes(bytes, at, b";").unwrap_or(bytes.len());
            let declaration = &style[at..end];
            at = end + 1;
            if let Some((property, value)) = declaration.split_once(':') {
                let (value, important) = importance(value);
                return Some((property.trim(), value, important));
            }
        }
        None
    })
}

/// A value, trimmed, without its `!important` (`! important` too), and whether it had it.
fn importance(value: &str) -> (&str, bool) {
    let value = value.trim();
    let cut = value.len().saturating_sub("important".len());
    match value.get(cut..) {
        Some(end) if end.eq_ignore_ascii_case("important") => {
            match value[..cut].trim_end().strip_suffix('!') {
                Some(rest) => (rest.trim_end(), true),
                None => (value, false),
            }
        }
        _ => (value, false),
    }
}

/// `css` without its comments, each a space as CSS reads it (`display:/**/none` is
/// `display: none`; `dis/**/play` is no `display`). A `/*` inside quotes begins none.
pub(super) fn without_comments(css: &str) -> Cow<'_, str> {
    let bytes = css.as_bytes();
    if memchr::memmem::find(bytes, b"/*").is_none() {
        return css.into();
    }
    let mut out = String::with_capacity(css.len());
    let (mut at, mut copied) = (0, 0);
    // Each search starts outside quotes: after a comment, or after a `/` outside them.
    while let Some(slash) = find_outside_quotes(bytes, at, b"/") {
        if bytes.get(slash + 1) != Some(&b'*') {
            at = slash + 1;
            continue;
        }
        out.push_str(&css[copied..slash]);
        out.push(' ');
        at =
            memchr::memmem::find(&bytes[slash + 2..], b"*/").map_or(bytes.len(), |e| slash + 4 + e);
        copied = at;
    }
    out.push_str(&css[copied.min(bytes.len())..]);
    out.into()
}

/// The first of `stops` in `bytes` from `at` that is outside quotes.
fn find_outside_quotes(bytes: &[u8], mut at: usize, stops: &[u8]) -> Option<usize> {
    let mut quote = None;
    while at < bytes.len() {
        let b = bytes[at];
        match quote {
            Some(_) if b == b'\\' => at += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if stops.contains(&b) => return Some(at),
            None => {}
        }
        at += 1;
    }
    None
}

/// Where the block whose `{` is just before `from` ends: at its `}` (braces inside it
/// matched, those in quotes passed over), or at the end of `bytes`.
fn block_end(bytes: &[u8], from: usize) -> usize {
    let mut depth = 1usize;
    let mut at = from;
    while let Some(found) = find_outside_quotes(bytes, at, b"{}") {
        if bytes[found] == b'{' {
            depth += 1;
        } else {
            depth -= 1;
            if depth == 0 {
                return found;
            }
        }
        at = found + 1;
    }
    bytes.len()
}

/// One declaration kept of a rule.
struct Declaration {
    /// Its index in [`PROPERTIES`].
    property: u8,
    value: Box<str>,
    important: bool,
}

/// A selector as written: a tag, an id and classes an element must all have (names
/// lowercase: mail is mostly read in quirks mode, where classes and ids match in any case).
#[derive(Default)]
struct Compound {
    tag: Option<u128>,
    id: Option<String>,
    classes: Vec<String>,
    /// Ids, classes and tags, as the cascade ranks them.
    specificity: u32,
}

/// A selector kept: a [`Compound`] with its classes as numbers.
struct Selector {
    tag: Option<u128>,
    id: Option<Box<str>>,
    classes: Vec<u32>,
    specificity: u32,
    /// Its rule's in [`StyleSheet::declarations`].
    declarations: Range<usize>,
}

/// The rules of a page's style sheets that are read; see the module's comment.
#[derive(Default)]
pub(super) struct StyleSheet {
    declarations: Vec<Declaration>,
    /// In the order the page gives them, which breaks ties of specificity.
    selectors: Vec<Selector>,
    /// Indexes into `selectors`, each selector under one key: its id, else its first
    /// class, else its tag, else `universal`.
    by_id: HashMap<Box<str>, Vec<u32>>,
    /// By class number.
    by_class: Vec<Vec<u32>>,
    by_tag: HashMap<u128, Vec<u32>>,
    universal: Vec<u32>,
    /// The number of each class a selector kept names.
    class_numbers: HashMap<Box<str>, u32>,
    rules: usize,
}

impl StyleSheet {
    pub(super) fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }

    /// Whether any rule kept names classes, or ids: an element's are looked up only then.
    pub(super) fn has_classes(&self) -> bool {
        !self.class_numbers.is_empty()
    }

    pub(super) fn has_ids(&self) -> bool {
        !self.by_id.is_empty()
    }

    /// Whether a rule kept applies to every element of the tag (lowercase) `name`: one a
    /// reader makes up where the page has no tag for it (`<body>`) gets those.
    pub(super) fn has_rules_for(&self, name: &[u8]) -> bool {
        !self.universal.is_empty() || self.by_tag.contains_key(&name_key(name))
    }

    /// Reads the rules of one `<style>` element's text.
    pub(super) fn read(&mut self, css: &str) {
        let css = without_comments(css);
        self.read_rules(&css, true);
    }

    /// Reads a list of rules: a sheet's (`top`), or a `@media` block's.
    fn read_rules(&mut self, css: &str, top: bool) {
        let bytes = css.as_bytes();
        let mut at = 0;
        while self.rules < MAX_RULES {
            at = between_rules(bytes, at, top);
            if at >= bytes.len() {
                return;
            }
            // A rule's selectors go to its `{`, `;` and `}` included (and make it one that
            // is not read); an at-rule without a block ends at its `;`.
            let at_rule = bytes[at] == b'@';
            let stops: &[u8] = if at_rule { b"{;" } else { b"{" };
            let Some(stop) = find_outside_quotes(bytes, at, stops) else {
                return;
            };
            let prelude = &css[at..stop];
            if bytes[stop] == b';' {
                at = stop + 1;
                continue;
            }
            let end = block_end(bytes, stop + 1);
            let block = &css[stop + 1..end];
            at = end + 1;
            self.rules += 1;
            if !at_rule {
                self.read_rule(prelude, block);
            } else if top && media_is_screen(prelude) {
                self.read_rules(block, false);
            }
        }
    }

    /// Reads one rule: its selectors, and its declarations of [`PROPERTIES`].
    fn read_rule(&mut self, selectors: &str, block: &str) {
        let first = self.declarations.len();
        for (property, value, important) in declarations(block) {
            if self.declarations.len() - first == MAX_DECLARATIONS {
                break;
            }
            if let Some(property) = property_index(property) {
                self.declarations.push(Declaration {
                    property: property as u8,
                    value: value.into(),
                    important,
                });
            }
        }
        let declarations = first..self.declarations.len();
        if declarations.is_empty() {
            return;
        }
        let mut read = Vec::new();
        for selector in selectors.split(',') {
            match compound(selector) {
                Ok(Some(selector)) => read.push(selector),
                Ok(None) => {}
                Err(Unreadable) => {
                    read.clear();
                    break;
                }
            }
        }
        if read.is_empty() {
            self.declarations.truncate(first);
            return;
        }
        for selector in read {
            self.keep(selector, declarations.clone());
        }
    }

    fn keep(&mut self, selector: Compound, declarations: Range<usize>) {
        if self.selectors.len() >= MAX_SELECTORS {
            return;
        }
        let classes: Vec<u32> = (selector.classes.into_iter())
            .map(|class| {
                let next = self.class_numbers.len() as u32;
                *self.class_numbers.entry(class.into()).or_insert(next)
            })
            .collect();
        self.by_class
            .resize_with(self.class_numbers.len(), Vec::new);
        let bucket = match (&selector.id, classes.first(), selector.tag) {
            (Some(id), _, _) => self.by_id.entry(id.as_str().into()).or_default(),
            (None, Some(&class), _) => &mut self.by_class[class as usize],
            (None, None, Some(tag)) => self.by_tag.entry(tag).or_default(),
            (None, None, None) => &mut self.universal,
        };
        if bucket.len() < MAX_PER_KEY {
            bucket.push(self.selectors.len() as u32);
            self.selectors.push(Selector {
                tag: selector.tag,
                id: selector.id.map(String::into_boxed_str),
                classes,
                specificity: selector.specificity,
                declarations,
            });
        }
    }

    /// The selectors that match an element of tag `name` (its key), id and classes
    /// (lowercase; the first [`MAX_CLASSES`] are looked up), into `out`, in the order the
    /// cascade applies them: by specificity, then as the page gives them. Each is
    /// `specificity << 32 | index`.
    pub(super) fn matching(
        &self,
        name: u128,
        id: Option<&str>,
        classes: &[&str],
        out: &mut Vec<u64>,
    ) {
        out.clear();
        // The element's classes that a selector names, each once.
        let mut numbers = [0u32; MAX_CLASSES];
        let mut count = 0;
        for class in classes.iter().take(MAX_CLASSES) {
            if let Some(&n) = self.class_numbers.get(*class)
                && !numbers[..count].contains(&n)
            {
                numbers[count] = n;
                count += 1;
            }
        }
        let numbers = &numbers[..count];
        let mut add = |bucket: Option<&Vec<u32>>| {
            for &i in bucket.into_iter().flatten() {
                let s = &self.selectors[i as usize];
                if s.tag.is_none_or(|tag| tag == name)
                    && s.id.as_deref().is_none_or(|want| id == Some(want))
                    && s.classes.iter().all(|c| numbers.contains(c))
                {
                    out.push(u64::from(s.specificity) << 32 | u64::from(i));
                }
            }
        };
        add(Some(&self.universal));
        add(self.by_tag.get(&name));
        if let Some(id) = id {
            add(self.by_id.get(id));
        }
        for &n in numbers {
            add(self.by_class.get(n as usize));
        }
        out.sort_unstable();
    }
}

/// Writes, `property:value;` each, the declarations of an element that rules `matched` of
/// `sheet` (as [`StyleSheet::matching`] left them) and its own `style` give it, in the
/// order the cascade ranks them: those of its rules, its own, the important ones of its
/// rules, its own important ones. Only the last of a property is written, since it is the
/// one that counts, and only [`PROPERTIES`]: however many rules match, a bounded few.
pub(super) fn cascade(sheet: Option<&StyleSheet>, matched: &[u64], style: &str, out: &mut String) {
    let mut last = [usize::MAX; PROPERTIES.len()];
    let mut count = 0;
    in_cascade(sheet, matched, style, |property, _| {
        last[property] = count;
        count += 1;
    });
    count = 0;
    in_cascade(sheet, matched, style, |property, value| {
        if last[property] == count {
            out.push_str(PROPERTIES[property]);
            out.push(':');
            out.push_str(value);
            out.push(';');
        }
        count += 1;
    });
}

/// Calls `each` with every declaration of [`PROPERTIES`] that an element has, in the
/// order of [`cascade`]: the property's index, and the value.
fn in_cascade(
    sheet: Option<&StyleSheet>,
    matched: &[u64],
    style: &str,
    mut each: impl FnMut(usize, &str),
) {
    for important in [false, true] {
        if let Some(sheet) = sheet {
            for &key in matched {
                let rule = &sheet.selectors[key as u32 as usize].declarations;
                for d in &sheet.declarations[rule.clone()] {
                    if d.important == important {
                        each(usize::from(d.property), &d.value);
                    }
                }
            }
        }
        for (property, value, is_important) in declarations(style) {
            if is_important == important
                && let Some(property) = property_index(property)
            {
                each(property, value);
            }
        }
    }
}

/// Where `property` (any case) is in [`PROPERTIES`].
fn property_index(property: &str) -> Option<usize> {
    let mut lower = [0u8; 16];
    let lower = lower.get_mut(..property.len())?;
    lower.copy_from_slice(property.as_bytes());
    lower.make_ascii_lowercase();
    PROPERTIES
        .binary_search_by(|p| p.as_bytes().cmp(lower))
        .ok()
}

/// Where the next rule of a list begins: past white space and, at the top of a sheet, the
/// `<!--` and `-->` old pages wrap a sheet in.
fn between_rules(bytes: &[u8], mut at: usize, top: bool) -> usize {
    loop {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let rest = bytes.get(at..).unwrap_or_default();
        if top && rest.starts_with(b"<!--") {
            at += 4;
        } else if top && rest.starts_with(b"-->") {
            at += 3;
        } else {
            return at;
        }
    }
}

/// Whether an at-rule's prelude is `@media` for every screen (`screen`, `all`, `only
/// screen`, one of a list): a query with conditions (`max-width`) may not hold.
fn media_is_screen(prelude: &str) -> bool {
    let Some(name) = prelude
        .get(..6)
        .filter(|n| n.eq_ignore_ascii_case("@media"))
    else {
        return false;
    };
    let queries = &prelude[name.len()..];
    queries.starts_with(|c: char| c.is_ascii_whitespace())
        && queries.split(',').any(|query| {
            let mut words = query.split_ascii_whitespace();
            let first = words.next().unwrap_or_default();
            let media = if first.eq_ignore_ascii_case("only") {
                words.next().unwrap_or_default()
            } else {
                first
            };
            words.next().is_none()
                && (media.eq_ignore_ascii_case("screen") || media.eq_ignore_ascii_case("all"))
        })
}

/// A selector a reader would not read, which drops its whole rule.
struct Unreadable;

/// A selector as [`Compound`], if it is one that is read: a tag or `*`, then ids and
/// classes, nothing else; `None` for one with combinators (`div p`, `a > b`), which a
/// reader reads and this does not. A pseudo-class, an attribute selector, an escape or a
/// name that is none (`.1x`) make the whole rule one that is not read: some would drop it
/// in a reader too, and a rule read in part is read wrongly.
fn compound(selector: &str) -> Result<Option<Compound>, Unreadable> {
    let s = selector.trim_matches(|c: char| c.is_ascii_whitespace());
    let bytes = s.as_bytes();
    let combinator = |b: u8| b.is_ascii_whitespace() || matches!(b, b'>' | b'+' | b'~');
    if s.is_empty()
        || !(bytes.iter())
            .all(|&b| is_name_byte(b) || combinator(b) || matches!(b, b'.' | b'#' | b'*'))
    {
        return Err(Unreadable);
    }
    if bytes.iter().any(|&b| combinator(b)) {
        return Ok(None);
    }
    let mut selector = Compound::default();
    let mut at = 0;
    let name = |at: usize| -> Result<&str, Unreadable> {
        let len = name_len(&bytes[at..]).ok_or(Unreadable)?;
        Ok(&s[at..at + len])
    };
    if bytes[0] == b'*' {
        at = 1;
    } else if !matches!(bytes[0], b'.' | b'#') {
        let tag = name(0)?;
        selector.tag = Some(name_key(tag.to_ascii_lowercase().as_bytes()));
        selector.specificity = 1;
        at = tag.len();
    }
    let mut never = false;
    while at < bytes.len() {
        let kind = bytes[at];
        let found = name(at + 1)?.to_ascii_lowercase();
        at += 1 + found.len();
        match kind {
            b'.' => {
                selector.specificity += 1 << 8;
                selector.classes.push(found);
            }
            b'#' => {
                selector.specificity += 1 << 16;
                never |= selector.id.as_ref().is_some_and(|id| *id != found);
                selector.id = Some(found);
            }
            _ => return Err(Unreadable),
        }
    }
    // `#a#b` matches nothing; a selector of many classes is not followed.
    Ok((!never && selector.classes.len() <= MAX_SELECTOR_CLASSES).then_some(selector))
}

/// A byte of a CSS name: a letter, digit, `-`, `_`, or of a character beyond ASCII.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b >= 0x80
}

/// The length of the CSS name that `bytes` begin with; none where it begins none: a
/// name does not begin with a digit, nor with `-` and a digit.
fn name_len(bytes: &[u8]) -> Option<usize> {
    let starts =
        |b: Option<&u8>| b.is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_' || b >= 0x80);
    let valid = match bytes.first() {
        Some(b'-') => starts(bytes.get(1)) || bytes.get(1) == Some(&b'-'),
        first => starts(first),
    };
    valid.then(|| bytes.iter().take_while(|&&b| is_name_byte(b)).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_are_sorted_for_binary_search() {
        assert!(PROPERTIES.is_sorted());
        let found = property_index("Background-Color").map(|i| PROPERTIES[i]);
        assert_eq!(found, Some("background-color"));
        assert_eq!(property_index("margin"), None);
    }

    #[test]
    fn declarations_keep_quotes_and_importance() {
        let found: Vec<_> = declarations(
            "color: red ! IMPORTANT; font-family: \"a;display:none\" ;;x; display:none!important",
        )
        .collect();
        assert_eq!(
            found,
            [
                ("color", "red", true),
                ("font-family", "\"a;display:none\"", false),
                ("display", "none", true),
            ]
        );
    }

    #[test]
    fn comments_are_spaces_outside_quotes() {
        for (css, without) in [
            ("display:/**/none", "display: none"),
            ("dis/* x */play:none", "dis play:none"),
            ("a:'/*' ;b:c", "a:'/*' ;b:c"),
            ("a:b /* never closed", "a:b  "),
        ] {
            assert_eq!(without_comments(css), without, "{css:?}");
        }
    }

    #[test]
    fn important_declarations_count_last() {
        let mut out = String::new();
        let style = "display: none !important; color: red; display: inline; margin: 0";
        cascade(None, &[], style, &mut out);
        assert_eq!(out, "color:red;display:none;");
    }

    fn sheet(css: &str) -> StyleSheet {
        let mut sheet = StyleSheet::default();
        sheet.read(css);
        sheet
    }

    /// The declarations an element ends with, `property:value;` each.
    fn styled(sheet: &StyleSheet, tag: &str, id: Option<&str>, classes: &[&str]) -> String {
        let mut matched = Vec::new();
        sheet.matching(name_key(tag.as_bytes()), id, classes, &mut matched);
        let mut out = String::new();
        cascade(Some(sheet), &matched, "", &mut out);
        out
    }

    #[test]
    fn simple_selectors_are_read_and_others_are_not() {
        let sheet = sheet(
            "<!-- .a { display: none } -->\n\
             span.b, #c { font-size: 0 }\n\
             div p, .d > .e { display: none }\n\
             a:hover, .f { display: none }\n\
             .g { color: red; margin: 0 }\n\
             .1x, .h { display: none }\n\
             @media (max-width: 600px) { .i { display: none } }\n\
             @media only screen { .j { display: none } }\n\
             @import url(x.css); .k { display: none }\n\
             .l { content: \"}\"; display: none }\n\
             .m; .n { display: none }\n\
             * { visibility: visible }",
        );
        for (tag, id, classes, want) in [
            ("p", None, &["a"][..], "visibility:visible;display:none;"),
            ("span", None, &["b"], "visibility:visible;font-size:0;"),
            ("i", None, &["b"], "visibility:visible;"),
            ("i", Some("c"), &[], "visibility:visible;font-size:0;"),
            ("p", None, &["d", "e"], "visibility:visible;"),
            ("p", None, &["f"], "visibility:visible;"),
            ("p", None, &["g"], "visibility:visible;color:red;"),
            ("p", None, &["h"], "visibility:visible;"),
            ("p", None, &["i"], "visibility:visible;"),
            ("p", None, &["j"], "visibility:visible;display:none;"),
            ("p", None, &["k"], "visibility:visible;display:none;"),
            ("p", None, &["l"], "visibility:visible;display:none;"),
            ("p", None, &["n"], "visibility:visible;"),
        ] {
            assert_eq!(
                styled(&sheet, tag, id, classes),
                want,
                "{tag} {id:?} {classes:?}"
            );
        }
    }

    /// Specificity first, then the page's order; important declarations after all others,
    /// an element's own last of each kind.
    #[test]
    fn the_cascade_ranks_declarations() {
        let sheet = sheet(
            "#x { display: block } .a { display: none } p { display: inline }\n\
             .b { display: none !important } .a { opacity: 0 } .a.c { opacity: 1 }",
        );
        assert_eq!(
            styled(&sheet, "p", Some("x"), &["a"]),
            "opacity:0;display:block;"
        );
        assert_eq!(styled(&sheet, "p", None, &["a"]), "display:none;opacity:0;");
        assert_eq!(
            styled(&sheet, "p", None, &["c", "a"]),
            "display:none;opacity:1;"
        );
        let mut matched = Vec::new();
        sheet.matching(name_key(b"p"), None, &["b"], &mut matched);
        let mut out = String::new();
        let style = "display: block !important; display: inline";
        cascade(Some(&sheet), &matched, style, &mut out);
        assert_eq!(out, "display:block;");
    }

    /// However long a sheet, what is kept of it, and looked at for an element, is bounded.
    #[test]
    fn a_sheet_is_read_within_bounds() {
        let rules = ".a { display: none }\n".repeat(10 * MAX_RULES);
        let long = sheet(&rules);
        assert!(long.selectors.len() <= MAX_PER_KEY);
        assert_eq!(long.rules, MAX_RULES);
        let many: String = (0..10 * MAX_SELECTORS)
            .map(|i| format!(".c{i} {{ display: none }}\n"))
            .collect();
        let many = sheet(&many);
        assert_eq!(many.selectors.len(), MAX_SELECTORS);
        // Unclosed quotes and blocks end at the end of the sheet, read once.
        let started = std::time::Instant::now();
        sheet(&"{ \"".repeat(200_000));
        sheet(&"{".repeat(200_000));
        sheet(&".a, ".repeat(200_000));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
