//! The words of a text as Unicode's word boundaries (UAX #29) find them, the words that
//! `unicode-segmentation`'s `unicode_words` yields, found faster on ASCII.
//!
//! No word spans ASCII white space, so text is cut into pieces at it. A piece that is all
//! ASCII is segmented by the few rules that can apply to ASCII, a byte at a time; any
//! other goes to `unicode-segmentation` whole, with the white space before it (a
//! combining mark right after a space belongs to the space). Mail is mostly ASCII, and
//! the full algorithm, which looks up every character's word-break class, was most of
//! tokenizing's time.

use unicode_segmentation::UnicodeSegmentation;

/// A byte of a word as an ASCII `\b` sees it: a letter, a digit or `_`. Rules and URL
/// finding tell where a word starts by it.
pub const fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Calls `each` with every word of `text` that holds a letter or a digit, in order: what
/// `text.unicode_words()` yields.
pub fn for_each_word<'t>(text: &'t str, mut each: impl FnMut(&'t str)) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let piece = at;
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let chunk = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        // Cut at ASCII bytes only: both ends are character boundaries.
        if bytes[chunk..at].is_ascii() {
            ascii_words(&text[chunk..at], &mut each);
        } else {
            text[piece..at].unicode_words().for_each(&mut each);
        }
    }
}

/// The word-break classes of ASCII that are not white space.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Digit,
    /// `_` (ExtendNumLet): joins letters, digits and itself.
    Underscore,
    /// `:`: joins two letters.
    MidLetter,
    /// `,` `;`: join two digits.
    MidNum,
    /// `.` `'`: join two letters or two digits.
    MidNumLet,
    Other,
}

fn class(b: u8) -> Class {
    match b {
        b'A'..=b'Z' | b'a'..=b'z' => Class::Letter,
        b'0'..=b'9' => Class::Digit,
        b'_' => Class::Underscore,
        b':' => Class::MidLetter,
        b',' | b';' => Class::MidNum,
        b'.' | b'\'' => Class::MidNumLet,
        _ => Class::Other,
    }
}

/// The words of an ASCII text without white space: runs of letters, digits and `_`
/// (UAX #29 rules WB5, WB8–WB10, WB13a/b), through one `:` `.` `'` between letters
/// (WB6/7) or one `,` `;` `.` `'` between digits (WB11/12). Runs of `_` alone hold no
/// letter or digit and are not words.
fn ascii_words<'t>(text: &'t str, each: &mut impl FnMut(&'t str)) {
    use Class::*;
    let b = text.as_bytes();
    let mut at = 0;
    while at < b.len() {
        let first = class(b[at]);
        if !matches!(first, Letter | Digit | Underscore) {
            at += 1;
            continue;
        }
        let start = at;
        let mut last = first;
        let mut alphanumeric = first != Underscore;
        at += 1;
        while at < b.len() {
            let step = match class(b[at]) {
                Letter | Digit | Underscore => 1,
                mid @ (MidLetter | MidNum | MidNumLet) => {
                    let after = b.get(at + 1).map(|&c| class(c));
                    let letters = mid != MidNum && last == Letter && after == Some(Letter);
                    let digits = mid != MidLetter && last == Digit && after == Some(Digit);
                    if letters || digits { 2 } else { 0 }
                }
                Other => 0,
            };
            if step == 0 {
                break;
            }
            at += step;
            last = class(b[at - 1]);
            alphanumeric |= last != Underscore;
        }
        if alphanumeric {
            each(&text[start..at]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for_each_word(text, |w| out.push(w));
        out
    }

    #[test]
    fn ascii_words_follow_the_word_boundary_rules() {
        assert_eq!(
            words("Don't pay $1,000.50 (e.g. now): a:b x_1 __ _x 1.a a.1 end."),
            [
                "Don't", "pay", "1,000.50", "e.g", "now", "a:b", "x_1", "_x", "1", "a", "a", "1",
                "end"
            ]
        );
    }

    /// The same words as `unicode_words`, on text made of the characters whose classes
    /// matter (ASCII of every class, accented and other-script letters, a combining mark,
    /// a joiner, white space of several kinds) in random order.
    #[test]
    fn the_same_words_as_the_full_algorithm() {
        let alphabet: Vec<char> =
            "aZ9_.,;:'\"!-@/ \t\n\r\u{b}\u{c}éü€日ก\u{301}\u{200d}\u{a0}\u{3000}"
                .chars()
                .collect();
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..50_000 {
            let len = next() % 24;
            let text: String = (0..len)
                .map(|_| alphabet[next() as usize % alphabet.len()])
                .collect();
            let expected: Vec<&str> = text.unicode_words().collect();
            assert_eq!(words(&text), expected, "{text:?}");
        }
    }
}
