//! CSS as the hidden-text reader (`html::Hider`) reads it: a style's declarations, and a
//! page's style sheet, the rules of its `<style>` elements and the declarations of theirs
//! that can hide text or show it again.
//!
//! Text is hidden only if it is hidden from every reader. A rule that holds for every
//! reader on a screen (at the top of a sheet, or under `@media screen`) and whose selector
//! is read as written (a tag, an id, classes, `*`, and those joined by the descendant and
//! child combinators, `div .x`, `td > span`) hides and shows. A rule that holds for some
//! readers only may show: under `@media` with a query some screen can meet (a width, an
//! orientation, `prefers-color-scheme`, `all and (max-width: 600px)`), under `@supports`,
//! `@layer` or `@container`, in a `<style media=…>` for such a query; and so may a rule
//! whose selector is not read as written (sibling combinators, pseudo-classes, attribute
//! selectors), taken to apply to every element its last compound matches (`a + .x:hover` as
//! `.x`, `*[x-apple-data-detectors]` as any element with that attribute). Such a rule keeps
//! the declarations of its that show (`display` other than `none`, `visibility: visible`, a
//! readable `font-size`, `opacity` that can be seen, a box that does not clip, a place on
//! the page; colours, which show or hide by what is behind them); what it hides counts as
//! shown, since other readers see it. The page is read as every reader sees it, without
//! them; where one of them matches, it is also followed as some readers may see it, the
//! rule's declarations in their place in the cascade, by importance, specificity and order,
//! and each way a text can be hidden hiding it only if it does both ways. Text hidden the
//! first way and not the second is hidden words that some readers may see
//! (`html::Rendered::maybe_shown`), which the message's second reading weighs as words: a
//! rule read too widely, or one that holds for no reader in fact (`div:not(div)`, `@media
//! (min-width: 100000px)`), adds a reading, and takes none away. `@media print` and
//! `speech`, `not all`, a query that is none, and other at-rules are not read.
//!
//! Reading is bounded: at most [`MAX_RULES`] rules of a page are read and [`MAX_SELECTORS`]
//! selectors kept, [`MAX_PER_KEY`] of them for one tag, id or class; at most
//! [`MAX_CHAINS`] selectors with combinators, each of at most [`MAX_COMPOUNDS`] compounds,
//! [`MAX_ANCESTOR_COMPOUNDS`] of them told apart: an element is matched against its
//! ancestors through a few bits per selector that each element passes on to those inside
//! it, so that it is matched in a bounded number of comparisons however long the sheet,
//! the selectors and the page. A selector with combinators past those bounds is read as
//! one that is not read as written: its last compound shows.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use super::html::{
    MIN_READABLE_OPACITY, MIN_READABLE_PX, OFF_PAGE_PX, PAGE_FONT_PX, css_length, css_number,
    font_px, font_shorthand_size, has_room, name_key, tag_attributes,
};

/// Rules read of a page's style sheets (those not kept count): the rest is not read.
const MAX_RULES: usize = 2048;
/// Selectors kept of a page's style sheets.
const MAX_SELECTORS: usize = 512;
/// Selectors kept for one id, one class (the first of a selector's), one tag or `*`.
const MAX_PER_KEY: usize = 8;
/// Classes of one element looked up; more are not.
pub(super) const MAX_CLASSES: usize = 8;
/// Classes of one compound (`.a.b`); a selector with more is not read as written. Also
/// the attributes a last compound asks for that are kept (`[a][b]`).
const MAX_SELECTOR_CLASSES: usize = 4;
/// Declarations kept of one rule.
const MAX_DECLARATIONS: usize = 32;
/// Selectors with combinators kept, whose ancestors every element follows.
const MAX_CHAINS: usize = 32;
/// Compounds of a selector with combinators, its last included.
const MAX_COMPOUNDS: usize = 8;
/// Compounds of ancestors told apart, of all the selectors with combinators: each is a
/// bit of what an element is.
const MAX_ANCESTOR_COMPOUNDS: usize = 64;
/// At-rules read inside at-rules (`@media` inside `@supports`).
const MAX_NESTING: usize = 4;

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

/// Where the bracket `pair[0]` opened just before `from` closes (`pair[1]`; those inside
/// it matched, those in quotes passed over), if it does.
fn closing(bytes: &[u8], from: usize, pair: &[u8; 2]) -> Option<usize> {
    let mut depth = 1usize;
    let mut at = from;
    while let Some(found) = find_outside_quotes(bytes, at, pair) {
        if bytes[found] == pair[0] {
            depth += 1;
        } else {
            depth -= 1;
            if depth == 0 {
                return Some(found);
            }
        }
        at = found + 1;
    }
    None
}

/// One declaration kept of a rule.
struct Declaration {
    /// Its index in [`PROPERTIES`].
    property: u8,
    value: Box<str>,
    important: bool,
    /// Whether it can show text ([`shows`]): of a rule that holds for some readers only,
    /// only these are read.
    shows: bool,
}

/// For which readers on a screen a rule holds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Holds {
    /// None: `@media print`.
    Never,
    /// Some: `@media (max-width: 600px)`. Only what it shows is read.
    Sometimes,
    /// Every one.
    Always,
}

/// A compound selector as written: a tag, an id and classes an element must all have
/// (names lowercase: mail is mostly read in quirks mode, where classes and ids match in
/// any case).
#[derive(Default)]
struct Compound {
    tag: Option<u128>,
    id: Option<String>,
    classes: Vec<String>,
    /// The names of the attributes it asks for (`[x-apple-data-detectors]`, `[data-x=y]`),
    /// lowercase: an element without one of them is not matched, whatever its value.
    attributes: Vec<String>,
    /// `#a#b`, which matches nothing.
    never: bool,
}

/// A selector as written.
struct Parsed {
    /// Its compounds, outermost first and its subject last, where it is read as written;
    /// else its subject alone.
    compounds: Vec<Compound>,
    /// Bit `i`: the combinator after compound `i` is `>`.
    child: u16,
    /// Whether it is read as written: compounds of a tag, an id and classes, joined by the
    /// descendant and child combinators.
    exact: bool,
    /// Ids, classes (and pseudo-classes and attributes), tags, as the cascade ranks them.
    specificity: u32,
}

/// A compound kept, with its classes as numbers.
#[derive(PartialEq)]
struct Simple {
    tag: Option<u128>,
    id: Option<Box<str>>,
    classes: Vec<u32>,
    attributes: Vec<Box<str>>,
}

impl Simple {
    fn matches(&self, element: &Element) -> bool {
        self.tag.is_none_or(|tag| tag == element.name)
            && self
                .id
                .as_deref()
                .is_none_or(|want| element.id == Some(want))
            && (self.classes.iter()).all(|c| element.numbers[..element.count].contains(c))
            && (self.attributes.iter()).all(|want| {
                tag_attributes(element.attributes).any(|(name, _)| name.eq_ignore_ascii_case(want))
            })
    }
}

/// An element as selectors match it: its tag's key, its id and the numbers of the
/// classes of its that a selector names ([`StyleSheet::element`]).
pub(super) struct Element<'e> {
    name: u128,
    id: Option<&'e str>,
    numbers: [u32; MAX_CLASSES],
    count: usize,
    /// Its start tag's attributes, as written.
    attributes: &'e str,
}

/// A selector kept.
struct Selector {
    /// Its last compound, which the element itself matches.
    subject: Simple,
    /// The ancestors it asks for, in [`StyleSheet::chains`], if it has combinators.
    chain: Option<u16>,
    /// Whether only the declarations of its rule that show are read.
    shows_only: bool,
    specificity: u32,
    /// Its rule's in [`StyleSheet::declarations`].
    declarations: Range<usize>,
}

/// The ancestors a selector with combinators asks for.
struct Chain {
    /// In [`StyleSheet::ancestors`], outermost first.
    compounds: Vec<u8>,
    /// Bit `i`: what matches the compound after the `i`th (or the subject, after the last)
    /// is a child of what matches that one, not any descendant.
    child: u16,
}

/// The rules of a page's style sheets that are read; see the module's comment.
#[derive(Default)]
pub(super) struct StyleSheet {
    declarations: Vec<Declaration>,
    /// In the order the page gives them, which breaks ties of specificity.
    selectors: Vec<Selector>,
    /// Indexes into `selectors`, each selector under one key of its subject: its id, else
    /// its first class, else its tag, else `universal`.
    by_id: HashMap<Box<str>, Vec<u32>>,
    /// By class number.
    by_class: Vec<Vec<u32>>,
    by_tag: HashMap<u128, Vec<u32>>,
    universal: Vec<u32>,
    /// The number of each class a selector kept names.
    class_numbers: HashMap<Box<str>, u32>,
    chains: Vec<Chain>,
    /// The compounds of the ancestors of `chains`, each once.
    ancestors: Vec<Simple>,
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
        !self.by_id.is_empty() || self.ancestors.iter().any(|a| a.id.is_some())
    }

    /// How many selectors with combinators are kept: the number of states
    /// [`StyleSheet::states`] gives each element.
    pub(super) fn chains(&self) -> usize {
        self.chains.len()
    }

    /// Whether a rule kept applies to every element of the tag (lowercase) `name`, or asks
    /// for it around an element: one a reader makes up where the page has no tag for it
    /// (`<body>`) gets those.
    pub(super) fn has_rules_for(&self, name: &[u8]) -> bool {
        let key = name_key(name);
        !self.universal.is_empty()
            || self.by_tag.contains_key(&key)
            || (self.ancestors.iter())
                .any(|a| a.id.is_none() && a.classes.is_empty() && a.tag.is_none_or(|t| t == key))
    }

    /// Reads the rules of one `<style>` element's text, which hold for the readers `holds`
    /// says (its `media`).
    pub(super) fn read(&mut self, css: &str, holds: Holds) {
        let css = without_comments(css);
        self.read_rules(&css, holds, 0);
    }

    /// Reads a list of rules: a sheet's, or an at-rule's block `depth` deep.
    fn read_rules(&mut self, css: &str, holds: Holds, depth: usize) {
        let bytes = css.as_bytes();
        let mut at = 0;
        while self.rules < MAX_RULES {
            at = between_rules(bytes, at, depth == 0);
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
            let end = closing(bytes, stop + 1, b"{}").unwrap_or(bytes.len());
            let block = &css[stop + 1..end];
            at = end + 1;
            self.rules += 1;
            if !at_rule {
                self.read_rule(prelude, block, holds);
            } else if depth < MAX_NESTING {
                let inner = holds.min(at_rule_holds(prelude));
                if inner > Holds::Never {
                    self.read_rules(block, inner, depth + 1);
                }
            }
        }
    }

    /// Reads one rule: its selectors, and its declarations of [`PROPERTIES`].
    fn read_rule(&mut self, selectors: &str, block: &str, holds: Holds) {
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
                    shows: shows(PROPERTIES[property], value),
                });
            }
        }
        let declarations = first..self.declarations.len();
        if declarations.is_empty() {
            return;
        }
        let mut read = Vec::new();
        for selector in list(selectors) {
            match selector_of(selector) {
                Ok(Some(selector)) => read.push(selector),
                Ok(None) => {}
                Err(Unreadable) => {
                    read.clear();
                    break;
                }
            }
        }
        let mut kept = false;
        for selector in read {
            let shows_only = holds < Holds::Always || !selector.exact;
            kept |= self.keep(selector, declarations.clone(), shows_only);
        }
        if !kept {
            self.declarations.truncate(first);
        }
    }

    /// Keeps a selector of the rule whose declarations are `declarations`, if the bounds
    /// leave room, and says whether it did.
    fn keep(&mut self, selector: Parsed, declarations: Range<usize>, shows_only: bool) -> bool {
        let shows = self.declarations[declarations.clone()]
            .iter()
            .any(|d| d.shows);
        if self.selectors.len() >= MAX_SELECTORS || (shows_only && !shows) {
            return false;
        }
        let Parsed {
            mut compounds,
            child,
            specificity,
            ..
        } = selector;
        let Some(subject) = compounds.pop() else {
            return false;
        };
        let subject = self.simple(subject);
        if self.bucket(&subject).len() >= MAX_PER_KEY {
            return false;
        }
        // Past the bounds of selectors with combinators, its subject shows.
        let mut shows_only = shows_only;
        let chain = match compounds.is_empty() {
            true => None,
            false => {
                let chain = self.chain(compounds, child);
                shows_only |= chain.is_none();
                chain
            }
        };
        if shows_only && !shows {
            return false;
        }
        let index = self.selectors.len() as u32;
        self.bucket(&subject).push(index);
        self.selectors.push(Selector {
            subject,
            chain,
            shows_only,
            specificity,
            declarations,
        });
        true
    }

    /// A compound as kept, its classes numbered.
    fn simple(&mut self, compound: Compound) -> Simple {
        let classes = (compound.classes.into_iter())
            .map(|class| {
                let next = self.class_numbers.len() as u32;
                *self.class_numbers.entry(class.into()).or_insert(next)
            })
            .collect();
        self.by_class
            .resize_with(self.class_numbers.len(), Vec::new);
        Simple {
            tag: compound.tag,
            id: compound.id.map(String::into_boxed_str),
            classes,
            attributes: (compound.attributes.into_iter())
                .map(String::into_boxed_str)
                .collect(),
        }
    }

    /// The selectors kept under the key of a subject.
    fn bucket(&mut self, subject: &Simple) -> &mut Vec<u32> {
        match (&subject.id, subject.classes.first(), subject.tag) {
            (Some(id), _, _) => self.by_id.entry(id.clone()).or_default(),
            (None, Some(&class), _) => &mut self.by_class[class as usize],
            (None, None, Some(tag)) => self.by_tag.entry(tag).or_default(),
            (None, None, None) => &mut self.universal,
        }
    }

    /// Keeps the ancestors of a selector with combinators, if the bounds leave room.
    fn chain(&mut self, compounds: Vec<Compound>, child: u16) -> Option<u16> {
        if self.chains.len() >= MAX_CHAINS {
            return None;
        }
        let mut kept = Vec::with_capacity(compounds.len());
        for compound in compounds {
            let simple = self.simple(compound);
            let at = match self.ancestors.iter().position(|a| *a == simple) {
                Some(at) => at,
                None if self.ancestors.len() < MAX_ANCESTOR_COMPOUNDS => {
                    self.ancestors.push(simple);
                    self.ancestors.len() - 1
                }
                None => return None,
            };
            kept.push(at as u8);
        }
        self.chains.push(Chain {
            compounds: kept,
            child,
        });
        Some(self.chains.len() as u16 - 1)
    }

    /// An element of tag `name` (its key), id and classes (lowercase; the first
    /// [`MAX_CLASSES`] are looked up) and the attributes of its start tag, as selectors
    /// match it.
    pub(super) fn element<'e>(
        &self,
        name: u128,
        id: Option<&'e str>,
        classes: &[&str],
        attributes: &'e str,
    ) -> Element<'e> {
        let mut element = Element {
            name,
            id,
            numbers: [0; MAX_CLASSES],
            count: 0,
            attributes,
        };
        for class in classes.iter().take(MAX_CLASSES) {
            if let Some(&n) = self.class_numbers.get(*class)
                && !element.numbers[..element.count].contains(&n)
            {
                element.numbers[element.count] = n;
                element.count += 1;
            }
        }
        element
    }

    /// The selectors that match `element`, inside the element whose states
    /// ([`StyleSheet::states`]) are `around` (none outside every element), into `out`, in
    /// the order the cascade applies them: by specificity, then as the page gives them.
    /// Each is `specificity << 32 | index`.
    pub(super) fn matching(&self, element: &Element, around: &[u16], out: &mut Vec<u64>) {
        out.clear();
        let mut add = |bucket: Option<&Vec<u32>>| {
            for &i in bucket.into_iter().flatten() {
                let s = &self.selectors[i as usize];
                let chain_holds = |c: u16| {
                    let end = self.chains[usize::from(c)].compounds.len();
                    state(around, c) & 1 << end != 0
                };
                if s.subject.matches(element) && s.chain.is_none_or(chain_holds) {
                    out.push(u64::from(s.specificity) << 32 | u64::from(i));
                }
            }
        };
        add(Some(&self.universal));
        add(self.by_tag.get(&element.name));
        if let Some(id) = element.id {
            add(self.by_id.get(id));
        }
        for &n in &element.numbers[..element.count] {
            add(self.by_class.get(n as usize));
        }
        out.sort_unstable();
    }

    /// What `element`, inside the element whose states are `around`, passes on to the
    /// elements inside it: for each selector with combinators, in `out`, a state whose bit
    /// `i` says that the first `i` compounds of its ancestors match it and elements around
    /// it as the combinators between them ask, so that an element inside it may match the
    /// next (bit 0, none matched, is always set). A child combinator's state goes one
    /// element deep, a descendant combinator's to every element inside.
    pub(super) fn states(&self, element: &Element, around: &[u16], out: &mut Vec<u16>) {
        out.clear();
        if self.chains.is_empty() {
            return;
        }
        let is = (self.ancestors.iter().enumerate())
            .filter(|(_, a)| a.matches(element))
            .fold(0u64, |is, (at, _)| is | 1 << at);
        for (c, chain) in self.chains.iter().enumerate() {
            let before = state(around, c as u16);
            let mut next = 1u16;
            for (i, &compound) in chain.compounds.iter().enumerate() {
                if before & 1 << i != 0 && is & 1 << compound != 0 {
                    next |= 1 << (i + 1);
                }
                if before & 1 << (i + 1) != 0 && chain.child & 1 << i == 0 {
                    next |= 1 << (i + 1);
                }
            }
            out.push(next);
        }
    }

    /// Whether any selector is read only for what it shows: the page is then read both
    /// ways, as every reader sees it, and as some may.
    pub(super) fn shows_to_some(&self) -> bool {
        self.selectors.iter().any(|s| s.shows_only)
    }

    /// Whether a selector read for what it shows is among those `matched`
    /// ([`StyleSheet::matching`]): the element is then read both ways.
    pub(super) fn shows_any(&self, matched: &[u64]) -> bool {
        (matched.iter()).any(|&key| self.selectors[key as u32 as usize].shows_only)
    }
}

/// A chain's state in `around`, the states of an element; outside every element, none
/// of its compounds matched.
fn state(around: &[u16], chain: u16) -> u16 {
    around.get(usize::from(chain)).copied().unwrap_or(1)
}

/// The colours among [`PROPERTIES`], a bit each: `background`, `background-color`,
/// `background-image`, `color`. The colours' reader reads them, the rest the other ways
/// of hiding.
pub(super) const COLOR_PROPERTIES: u32 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 4;

/// Writes, `property:value;` each, the declarations of an element that rules `matched` of
/// `sheet` (as [`StyleSheet::matching`] left them) and its own `style` give it, in the
/// order the cascade ranks them: those of its rules, its own, the important ones of its
/// rules, its own important ones. Only the last of a property is written, since it is the
/// one that counts, and only [`PROPERTIES`]: however many rules match, a bounded few.
/// The declarations of rules read for what they show do not count in `out`; they do, but
/// only those that show, in `shown`, if it is given: as some readers may see the element,
/// written in the same walk. Returns the properties (a bit each, by their index in
/// [`PROPERTIES`]) whose last declaration in `shown` is of such a rule.
pub(super) fn cascade(
    sheet: Option<&StyleSheet>,
    matched: &[u64],
    style: &str,
    out: &mut String,
    mut shown: Option<&mut String>,
) -> u32 {
    let mut last = [usize::MAX; PROPERTIES.len()];
    let mut last_shown = [usize::MAX; PROPERTIES.len()];
    let mut shows = 0u32;
    let mut count = 0;
    let read_shown = shown.is_some();
    // The element's own declarations, read once for the two walks.
    let own: Vec<(usize, &str, bool)> = (declarations(style))
        .filter_map(|(property, value, important)| {
            Some((property_index(property)?, value, important))
        })
        .collect();
    in_cascade(
        sheet,
        matched,
        &own,
        read_shown,
        |property, _, shows_only| {
            if !shows_only {
                last[property] = count;
            }
            last_shown[property] = count;
            shows = shows & !(1 << property) | u32::from(shows_only) << property;
            count += 1;
        },
    );
    let write = |out: &mut String, property: usize, value: &str| {
        out.push_str(PROPERTIES[property]);
        out.push(':');
        out.push_str(value);
        out.push(';');
    };
    count = 0;
    in_cascade(sheet, matched, &own, read_shown, |property, value, _| {
        if last[property] == count {
            write(out, property, value);
        }
        if let Some(shown) = shown.as_deref_mut()
            && last_shown[property] == count
        {
            write(shown, property, value);
        }
        count += 1;
    });
    shows
}

/// Calls `each` with every declaration of [`PROPERTIES`] that an element has, in the
/// order of [`cascade`]: the property's index, the value, and whether it is of a rule read
/// for what it shows. `own`: the element's own, each property's index, its value and
/// whether it is important.
fn in_cascade(
    sheet: Option<&StyleSheet>,
    matched: &[u64],
    own: &[(usize, &str, bool)],
    shown: bool,
    mut each: impl FnMut(usize, &str, bool),
) {
    for important in [false, true] {
        if let Some(sheet) = sheet {
            for &key in matched {
                let selector = &sheet.selectors[key as u32 as usize];
                if selector.shows_only && !shown {
                    continue;
                }
                for d in &sheet.declarations[selector.declarations.clone()] {
                    if d.important == important && (d.shows || !selector.shows_only) {
                        each(usize::from(d.property), &d.value, selector.shows_only);
                    }
                }
            }
        }
        for &(property, value, is_important) in own {
            if is_important == important {
                each(property, value, false);
            }
        }
    }
}

/// Whether a declaration can show text that others hide: `display` other than `none`,
/// `visibility: visible`, a readable `font-size` (or one relative to the size around),
/// `opacity` that can be seen, a box that does not clip, a place on the page; a colour,
/// a position, a float, which show or hide by what else there is.
fn shows(property: &str, value: &str) -> bool {
    let word = value.split_ascii_whitespace().next().unwrap_or_default();
    let readable = |px: Option<f32>| px.is_none_or(|px| px >= MIN_READABLE_PX);
    let length = |value: &str| css_length(value, PAGE_FONT_PX);
    match property {
        "display" => !word.eq_ignore_ascii_case("none"),
        "visibility" => word.eq_ignore_ascii_case("visible"),
        "opacity" => css_number(value).is_some_and(|o| o >= MIN_READABLE_OPACITY),
        "font-size" => readable(font_px(value, PAGE_FONT_PX)),
        "font" => font_shorthand_size(value).is_some_and(|s| readable(font_px(s, PAGE_FONT_PX))),
        "overflow" | "overflow-x" | "overflow-y" => !value
            .split_ascii_whitespace()
            .any(|w| w.eq_ignore_ascii_case("hidden") || w.eq_ignore_ascii_case("clip")),
        "height" | "max-height" | "width" | "max-width" => readable(length(value)),
        "min-height" | "min-width" => length(value).is_some_and(|px| px >= MIN_READABLE_PX),
        "left" | "top" | "text-indent" => length(value).is_none_or(|px| px > -OFF_PAGE_PX),
        "right" | "bottom" => length(value).is_none_or(|px| px < OFF_PAGE_PX),
        p if p.starts_with("padding") => value.split_ascii_whitespace().any(has_room),
        _ => true,
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

/// For which readers on a screen the rules of an at-rule with this prelude hold: those of
/// `@media` as its query says; of `@supports`, `@layer` and `@container` some (what they
/// ask for may hold, and a layer's rules lose to others); of any other, none.
fn at_rule_holds(prelude: &str) -> Holds {
    let rest = prelude.get(1..).unwrap_or_default();
    let (name, query) = rest.split_at(rest.bytes().take_while(|&b| is_name_byte(b)).count());
    let is = |n: &str| name.eq_ignore_ascii_case(n);
    if is("media") {
        media_holds(query)
    } else if is("supports") || is("layer") || is("container") {
        Holds::Sometimes
    } else {
        Holds::Never
    }
}

/// For which readers on a screen a media query list holds (`screen`, `print, screen`,
/// `all and (max-width: 600px)`): those of the query of it that holds for the most; every
/// one for an empty list.
pub(super) fn media_holds(list: &str) -> Holds {
    if list.trim().is_empty() {
        return Holds::Always;
    }
    self::list(list)
        .map(query_holds)
        .max()
        .unwrap_or(Holds::Never)
}

/// A part of a media query: a word, a condition in parentheses (without them), or
/// something else, which makes the query none.
enum Token<'q> {
    Word(&'q str),
    Condition(&'q str),
    Other,
}

fn media_tokens(query: &str) -> Vec<Token<'_>> {
    let bytes = query.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if b.is_ascii_whitespace() {
            at += 1;
        } else if b == b'(' {
            let Some(end) = closing(bytes, at + 1, b"()") else {
                tokens.push(Token::Other);
                break;
            };
            tokens.push(Token::Condition(&query[at + 1..end]));
            at = end + 1;
        } else if is_name_byte(b) {
            let len = bytes[at..].iter().take_while(|&&b| is_name_byte(b)).count();
            tokens.push(Token::Word(&query[at..at + len]));
            at += len;
        } else {
            tokens.push(Token::Other);
            break;
        }
    }
    tokens
}

/// For which readers on a screen one media query holds: `screen` and `all` for every
/// one, other media types for none; conditions on what a screen can be (`(max-width:
/// 600px)`, `(orientation: landscape)`, `(prefers-color-scheme: dark)`) for some, those
/// on what none knows for none; `not` turns the first two about.
fn query_holds(query: &str) -> Holds {
    let tokens = media_tokens(query);
    let is = |token: Option<&Token>, word: &str| matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word));
    let mut rest = &tokens[..];
    let not = is(rest.first(), "not");
    if not || is(rest.first(), "only") {
        rest = &rest[1..];
    }
    let mut screen = None;
    if let Some(Token::Word(media)) = rest.first() {
        screen = Some(media.eq_ignore_ascii_case("screen") || media.eq_ignore_ascii_case("all"));
        rest = &rest[1..];
        if !rest.is_empty() {
            if !is(rest.first(), "and") || rest.len() == 1 {
                return Holds::Never;
            }
            rest = &rest[1..];
        }
    }
    // Conditions joined by `and` (or by `or`, as Media Queries 4 allows).
    let (mut all, mut any, mut or) = (true, false, false);
    for (i, token) in rest.iter().enumerate() {
        match token {
            Token::Condition(condition) if i % 2 == 0 => {
                let known = is_condition(condition);
                all &= known;
                any |= known;
            }
            Token::Word(_) if i % 2 == 1 && is(Some(token), "and") => {}
            Token::Word(_) if i % 2 == 1 && is(Some(token), "or") => or = true,
            _ => return Holds::Never,
        }
    }
    let conditions = match rest.len() {
        0 => None,
        n if n % 2 == 0 => return Holds::Never,
        _ => Some(if or { any } else { all }),
    };
    match (not, screen, conditions) {
        (_, _, Some(false)) | (_, None, None) | (false, Some(false), _) => Holds::Never,
        (_, _, Some(true)) => Holds::Sometimes,
        (false, Some(true), None) | (true, Some(false), None) => Holds::Always,
        (true, Some(true), None) => Holds::Never,
    }
}

/// Whether a media condition (what is inside its parentheses) asks about a feature that
/// a screen has: a width, height, orientation, resolution, a preference.
fn is_condition(condition: &str) -> bool {
    const FEATURES: [&str; 27] = [
        "any-hover",
        "any-pointer",
        "aspect-ratio",
        "color",
        "color-gamut",
        "color-index",
        "device-aspect-ratio",
        "device-height",
        "device-pixel-ratio",
        "device-width",
        "display-mode",
        "dynamic-range",
        "forced-colors",
        "height",
        "hover",
        "inverted-colors",
        "monochrome",
        "orientation",
        "pointer",
        "prefers-color-scheme",
        "prefers-contrast",
        "prefers-reduced-data",
        "prefers-reduced-motion",
        "prefers-reduced-transparency",
        "resolution",
        "scripting",
        "width",
    ];
    let bytes = condition.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let len = bytes[at..].iter().take_while(|&&b| is_name_byte(b)).count();
        let mut word = condition[at..at + len].to_ascii_lowercase();
        at += len.max(1);
        // `-webkit-min-device-pixel-ratio`, `min--moz-device-pixel-ratio`.
        while let Some(rest) = ["-webkit-", "-moz-", "-o-", "-ms-", "min-", "max-"]
            .iter()
            .find_map(|prefix| word.strip_prefix(prefix))
        {
            word = rest.to_string();
        }
        if FEATURES.binary_search(&word.as_str()).is_ok() {
            return true;
        }
    }
    false
}

/// The items of a comma-separated list (selectors, media queries), its commas inside
/// parentheses, brackets and quotes passed over (`:is(.a, .b)`).
fn list(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at > bytes.len() {
            return None;
        }
        let start = at;
        let mut depth = 0usize;
        let end = loop {
            match find_outside_quotes(bytes, at, b"()[],") {
                Some(found) if bytes[found] == b',' && depth == 0 => break found,
                Some(found) => {
                    match bytes[found] {
                        b'(' | b'[' => depth += 1,
                        b')' | b']' => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                    at = found + 1;
                }
                None => break bytes.len(),
            }
        };
        at = end + 1;
        Some(&text[start..end])
    })
}

/// A selector a reader would not read, which drops its whole rule.
struct Unreadable;

/// A selector as [`Parsed`]: read as written if it is compounds of a tag or `*`, then ids
/// and classes, joined by descendant and child combinators (`div .x`, `td > span.y`); else
/// its last compound alone, without its pseudo-classes and pseudo-elements, and its
/// attribute selectors asking only that the attribute be there (`a + .x:hover` is `.x`);
/// escapes decoded (`.\31 x` is `.1x`). `None` for one that matches nothing. A namespace or
/// a name that is none (`.1x`) make the whole rule one that is not read, as it is in a
/// reader.
fn selector_of(selector: &str) -> Result<Option<Parsed>, Unreadable> {
    let s = selector.trim_matches(|c: char| c.is_ascii_whitespace());
    let bytes = s.as_bytes();
    let name = |at: usize| -> Result<&str, Unreadable> {
        let len = name_len(bytes.get(at..).unwrap_or_default()).ok_or(Unreadable)?;
        Ok(&s[at..at + len])
    };
    let mut compounds = Vec::new();
    let mut current = Compound::default();
    let (mut started, mut combinator) = (false, None);
    let (mut child, mut exact) = (0u16, true);
    // Ids, classes (pseudo-classes and attributes too), tags (pseudo-elements too).
    let mut counts = [0u32; 3];
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if b.is_ascii_whitespace() || matches!(b, b'>' | b'+' | b'~') {
            if !b.is_ascii_whitespace() {
                if !started || combinator.is_some_and(|c| c != b' ') {
                    return Err(Unreadable);
                }
                combinator = Some(b);
            } else if combinator.is_none() {
                combinator = Some(b' ');
            }
            at += 1;
            continue;
        }
        if let Some(c) = combinator.take() {
            compounds.push(std::mem::take(&mut current));
            match c {
                b'>' => child |= 1u16.checked_shl(compounds.len() as u32 - 1).unwrap_or(0),
                b'+' | b'~' => exact = false,
                _ => {}
            }
            started = false;
        }
        match b {
            b'*' if !started => at += 1,
            b'.' | b'#' => {
                let written = name(at + 1)?;
                at += 1 + written.len();
                let found = unescaped(written);
                if b == b'.' {
                    counts[1] += 1;
                    current.classes.push(found);
                } else {
                    counts[0] += 1;
                    current.never |= current.id.as_ref().is_some_and(|id| *id != found);
                    current.id = Some(found);
                }
            }
            b'[' => {
                let end = find_outside_quotes(bytes, at + 1, b"]").ok_or(Unreadable)?;
                // Whatever it asks of the value, the attribute must be there; with a
                // namespace (`[*|x]`), any attribute may be.
                let inside = s[at + 1..end].trim_start_matches(|c: char| c.is_ascii_whitespace());
                let len = name_len(inside.as_bytes()).unwrap_or(0);
                if len > 0 && inside.as_bytes().get(len) != Some(&b'|') {
                    let mut found = unescaped(&inside[..len]);
                    found.make_ascii_lowercase();
                    current.attributes.push(found);
                }
                at = end + 1;
                counts[1] += 1;
                exact = false;
            }
            b':' => {
                let element = bytes.get(at + 1) == Some(&b':');
                let from = at + 1 + usize::from(element);
                at = from + name(from)?.len();
                if bytes.get(at) == Some(&b'(') {
                    at = closing(bytes, at + 1, b"()").ok_or(Unreadable)? + 1;
                }
                counts[if element { 2 } else { 1 }] += 1;
                exact = false;
            }
            _ if !started => {
                let tag = name(at)?;
                current.tag = Some(name_key(unescaped(tag).as_bytes()));
                counts[2] += 1;
                at += tag.len();
            }
            _ => return Err(Unreadable),
        }
        started = true;
    }
    if !started || combinator.is_some() {
        return Err(Unreadable);
    }
    compounds.push(current);
    exact &= compounds.len() <= MAX_COMPOUNDS
        && (compounds.iter()).all(|c| c.classes.len() <= MAX_SELECTOR_CLASSES);
    if !exact {
        let mut subject = compounds.pop().expect("a selector has a compound");
        subject.classes.truncate(MAX_SELECTOR_CLASSES);
        subject.attributes.truncate(MAX_SELECTOR_CLASSES);
        compounds = vec![subject];
        child = 0;
    }
    if compounds.iter().any(|c| c.never) {
        return Ok(None);
    }
    let [ids, classes, tags] = counts.map(|n| n.min(255));
    Ok(Some(Parsed {
        compounds,
        child,
        exact,
        specificity: ids << 16 | classes << 8 | tags,
    }))
}

/// A byte of a CSS name: a letter, digit, `-`, `_`, or of a character beyond ASCII.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b >= 0x80
}

/// The length of the CSS name that `bytes` begin with, escapes in it (`\70`, `\:`); none
/// where it begins none: a name does not begin with a digit, nor with `-` and a digit.
fn name_len(bytes: &[u8]) -> Option<usize> {
    let starts = |b: Option<&u8>| {
        b.is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_' || b >= 0x80 || b == b'\\')
    };
    let valid = match bytes.first() {
        Some(b'-') => starts(bytes.get(1)) || bytes.get(1) == Some(&b'-'),
        first => starts(first),
    };
    if !valid {
        return None;
    }
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        if b == b'\\' {
            at += escape_len(&bytes[at..])?;
        } else if is_name_byte(b) {
            at += 1;
        } else {
            break;
        }
    }
    Some(at)
}

/// The length of the escape that `bytes` begin with: `\` and up to six hex digits with
/// the white space after them, or `\` and any other character but a line's end.
fn escape_len(bytes: &[u8]) -> Option<usize> {
    let hex = (bytes.iter().skip(1).take(6))
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    if hex > 0 {
        let space = bytes.get(1 + hex).is_some_and(u8::is_ascii_whitespace);
        return Some(1 + hex + usize::from(space));
    }
    let char_len = |b: u8| match b {
        0..0xc0 => 1,
        0xc0..0xe0 => 2,
        0xe0..0xf0 => 3,
        _ => 4,
    };
    match *bytes.get(1)? {
        b'\n' | b'\r' | b'\x0c' => None,
        b => Some(1 + char_len(b)),
    }
}

/// A name as [`name_len`] found it, its escapes decoded (`\70` is `p`), lowercase.
fn unescaped(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = String::with_capacity(name.len());
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        if b != b'\\' {
            let c = name[at..].chars().next().unwrap_or_default();
            out.push(c);
            at += c.len_utf8();
            continue;
        }
        let len = escape_len(&bytes[at..]).unwrap_or(1).min(bytes.len() - at);
        let escaped = name[at + 1..at + len].trim_end();
        match u32::from_str_radix(escaped, 16) {
            Ok(code) if !escaped.is_empty() && escaped.bytes().all(|b| b.is_ascii_hexdigit()) => {
                out.push(
                    char::from_u32(code)
                        .filter(|&c| c != '\0')
                        .unwrap_or('\u{fffd}'),
                );
            }
            _ => out.push_str(escaped),
        }
        at += len;
    }
    out.make_ascii_lowercase();
    out
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
        let colors = (0..PROPERTIES.len()).filter(|&i| COLOR_PROPERTIES & 1 << i != 0);
        let colors: Vec<_> = colors.map(|i| PROPERTIES[i]).collect();
        assert_eq!(
            colors,
            [
                "background",
                "background-color",
                "background-image",
                "color"
            ]
        );
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
        cascade(None, &[], style, &mut out, None);
        assert_eq!(out, "color:red;display:none;");
    }

    fn sheet(css: &str) -> StyleSheet {
        let mut sheet = StyleSheet::default();
        sheet.read(css, Holds::Always);
        sheet
    }

    /// The declarations an element ends with, `property:value;` each, outside every
    /// element.
    fn styled(sheet: &StyleSheet, tag: &str, id: Option<&str>, classes: &[&str]) -> String {
        shown(sheet, tag, id, classes, false)
    }

    /// As [`styled`], with what rules that hold for some readers show if `shown`.
    fn shown(
        sheet: &StyleSheet,
        tag: &str,
        id: Option<&str>,
        classes: &[&str],
        shown: bool,
    ) -> String {
        let mut matched = Vec::new();
        let element = sheet.element(name_key(tag.as_bytes()), id, classes, "");
        sheet.matching(&element, &[], &mut matched);
        let (mut out, mut shown_out) = (String::new(), String::new());
        cascade(Some(sheet), &matched, "", &mut out, Some(&mut shown_out));
        if shown { shown_out } else { out }
    }

    /// Rules for every reader on a screen are read whole, with the selectors read as
    /// written; those for some readers, and those whose selectors are not (read as their
    /// last compound), only for what they show, and only when the element is read the
    /// second way; those for no reader, or with a selector that is none, not at all.
    #[test]
    fn each_rule_is_read_for_the_readers_it_holds_for() {
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
             @media (max-width: 600px) { .o { display: block; font-size: 0; color: red } }\n\
             .q:hover, x + .q, .q[a=\",\"] { opacity: 1; opacity: 0; display: none }\n\
             @media print { .r { display: block } }\n\
             @media screen { @supports (display: grid) { .s { display: grid } } }\n\
             * { visibility: visible }",
        );
        let v = "visibility:visible;";
        for (tag, id, classes, want, shown) in [
            ("p", None, &["a"][..], "display:none;", "display:none;"),
            ("span", None, &["b"], "font-size:0;", "font-size:0;"),
            ("i", None, &["b"], "", ""),
            ("i", Some("c"), &[], "font-size:0;", "font-size:0;"),
            ("p", None, &["d", "e"], "", ""),
            ("p", None, &["f"], "display:none;", "display:none;"),
            ("p", None, &["g"], "color:red;", "color:red;"),
            ("p", None, &["h"], "", ""),
            ("p", None, &["i"], "", ""),
            ("p", None, &["j"], "display:none;", "display:none;"),
            ("p", None, &["k"], "display:none;", "display:none;"),
            ("p", None, &["l"], "display:none;", "display:none;"),
            ("p", None, &["n"], "", ""),
            ("p", None, &["o"], "", "display:block;color:red;"),
            ("p", None, &["q"], "", "opacity:1;"),
            ("p", None, &["r"], "", ""),
            ("p", None, &["s"], "", "display:grid;"),
        ] {
            for (second, want) in [(false, want), (true, shown)] {
                assert_eq!(
                    self::shown(&sheet, tag, id, classes, second),
                    format!("{v}{want}"),
                    "{tag} {id:?} {classes:?} {second}"
                );
            }
        }
    }

    /// Media queries, as a reader on a screen reads them: for every reader, some, none.
    #[test]
    fn media_queries_hold_for_the_screens_they_say() {
        for (query, holds) in [
            ("", Holds::Always),
            (" screen", Holds::Always),
            ("only screen", Holds::Always),
            ("print, ALL", Holds::Always),
            ("not print", Holds::Always),
            ("(max-width: 600px)", Holds::Sometimes),
            ("only screen and (max-device-width:480px)", Holds::Sometimes),
            (
                "all and (min-width:1px) and (orientation: landscape)",
                Holds::Sometimes,
            ),
            (
                "(-webkit-min-device-pixel-ratio: 2), (min-resolution: 192dpi)",
                Holds::Sometimes,
            ),
            ("(prefers-color-scheme: dark)", Holds::Sometimes),
            ("(400px <= width <= 700px)", Holds::Sometimes),
            ("not screen and (max-width: 600px)", Holds::Sometimes),
            ("(no-such: 1) or (hover)", Holds::Sometimes),
            ("print", Holds::Never),
            ("speech", Holds::Never),
            ("not all", Holds::Never),
            ("not screen", Holds::Never),
            ("print and (max-width: 600px)", Holds::Never),
            ("screen and", Holds::Never),
            ("screen or (hover)", Holds::Never),
            ("(no-such: 1)", Holds::Never),
            ("(hover) and (no-such: 1)", Holds::Never),
            ("screen }", Holds::Never),
            ("(max-width: 600px", Holds::Never),
        ] {
            assert_eq!(media_holds(query), holds, "{query:?}");
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
        let element = sheet.element(name_key(b"p"), None, &["b"], "");
        sheet.matching(&element, &[], &mut matched);
        let mut out = String::new();
        let style = "display: block !important; display: inline";
        cascade(Some(&sheet), &matched, style, &mut out, None);
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
        // Selectors with combinators past their bounds show as their last compound.
        let chains: String = (0..4 * MAX_CHAINS)
            .map(|i| format!(".a{i} .c .d .e .f .g > .h .x{i} {{ display: block }}\n"))
            .collect();
        let chains = sheet(&chains);
        assert_eq!(chains.chains.len(), MAX_CHAINS);
        assert!(chains.ancestors.len() <= MAX_ANCESTOR_COMPOUNDS);
        assert!((chains.chains.iter()).all(|c| c.compounds.len() < MAX_COMPOUNDS));
        let shown = (chains.selectors.iter()).filter(|s| s.chain.is_none() && s.shows_only);
        assert_eq!(shown.count(), 3 * MAX_CHAINS);
        let compounds: String = (0..MAX_ANCESTOR_COMPOUNDS)
            .map(|i| format!(".a{i} .b{i} > .x{i} {{ display: block }}\n"))
            .collect();
        let compounds = sheet(&compounds);
        assert!(compounds.ancestors.len() <= MAX_ANCESTOR_COMPOUNDS);
        assert_eq!(compounds.chains.len(), MAX_ANCESTOR_COMPOUNDS / 2);
        // An element's attributes are looked through for a bounded few of a selector's.
        let attributes = format!("*{} {{ display: block }}", "[a]".repeat(10_000));
        let attributes = sheet(&attributes);
        let asked = (attributes.selectors.iter()).map(|s| s.subject.attributes.len());
        assert_eq!(asked.max(), Some(MAX_SELECTOR_CLASSES));
        // Unclosed quotes and blocks end at the end of the sheet, read once.
        let started = std::time::Instant::now();
        sheet(&"{ \"".repeat(200_000));
        sheet(&"{".repeat(200_000));
        sheet(&".a, ".repeat(200_000));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
