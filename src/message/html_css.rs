//! CSS as the hidden-text reader (`html::Hider`) reads a `style`: its declarations, their
//! comments and quotes as CSS reads them, and which of them count.

use std::borrow::Cow;

/// The properties that can hide text, or show it again. Sorted, to be searched.
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
    let mut quote = None;
    while at < bytes.len() {
        let b = bytes[at];
        match quote {
            Some(_) if b == b'\\' => at += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if bytes[at..].starts_with(b"/*") => {
                out.push_str(&css[copied..at]);
                out.push(' ');
                at = memchr::memmem::find(&bytes[at + 2..], b"*/")
                    .map_or(bytes.len(), |e| at + 2 + e + 2);
                copied = at;
                continue;
            }
            None => {}
        }
        at += 1;
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

/// Writes, `property:value;` each, the declarations of a `style` in the order they count:
/// the others, then the `!important` ones. Only the last of a property is written, since
/// it is the one that counts, and only [`PROPERTIES`].
pub(super) fn by_importance(style: &str, out: &mut String) {
    let mut last = [usize::MAX; PROPERTIES.len()];
    let mut count = 0;
    in_order(style, |property, _| {
        last[property] = count;
        count += 1;
    });
    count = 0;
    in_order(style, |property, value| {
        if last[property] == count {
            out.push_str(PROPERTIES[property]);
            out.push(':');
            out.push_str(value);
            out.push(';');
        }
        count += 1;
    });
}

/// Calls `each` with every declaration of [`PROPERTIES`] in `style`, in the order of
/// [`by_importance`]: the property's index, and the value.
fn in_order(style: &str, mut each: impl FnMut(usize, &str)) {
    for important in [false, true] {
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
        by_importance(
            "display: none !important; color: red; display: inline; margin: 0",
            &mut out,
        );
        assert_eq!(out, "color:red;display:none;");
    }
}
