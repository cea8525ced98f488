//! SpamAssassin's tests of a message's text as a reader sees it: text written without
//! spaces or one letter a line (`tvd_vertical_words`), and the "label: value" lines of a
//! stock tip (`check_stock_info`). What the text is (body text, first text part) is left
//! to the caller.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

/// The longest line SpamAssassin's body tests see: longer paragraphs are cut at a space.
const MAX_LINE: usize = 2048;

/// Over the lines of `body` (the body text, one paragraph a line) longer than five bytes,
/// the largest count of spaces per hundred other bytes, at most 100; -1 when no line is that
/// long. Spam written as one letter a line, or as words run together, scores near 0.
///
/// As SpamAssassin measures it: white space runs count as one space, a line's end counts as
/// a byte, and paragraphs longer than [`MAX_LINE`] are measured in pieces cut at a space.
pub(super) fn space_percent(body: &str) -> i64 {
    let mut largest = -1;
    // A piece of a line: its bytes, its line end left out, and its spaces.
    let mut measure = |bytes: usize, spaces: usize| {
        let len = bytes + 1;
        if len <= 5 {
            return;
        }
        let others = len - spaces;
        let percent = if spaces > others {
            100
        } else {
            (100 * spaces / others) as i64
        };
        largest = largest.max(percent);
    };
    for line in body.lines() {
        let (mut bytes, mut spaces) = (0, 0);
        for word in line.split_ascii_whitespace() {
            let mut len = word.len();
            if bytes > 0 {
                if bytes + 1 + len <= MAX_LINE {
                    bytes += 1 + len;
                    spaces += 1;
                    continue;
                }
                measure(bytes, spaces);
            }
            // A word longer than a line is cut where the line ends.
            while len > MAX_LINE {
                measure(MAX_LINE, 0);
                len -= MAX_LINE;
            }
            (bytes, spaces) = (len, 0);
        }
        if bytes > 0 {
            measure(bytes, spaces);
        }
    }
    largest
}

/// "Label: value" lines, as SpamAssassin finds them: at a line's start (after white space,
/// blank lines included), a label of 3 to 30 characters up to the first colon, then a value
/// that is not blank (perhaps on the next line).
static LABELLED_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^\s*([^:\s][^:\n]{2,29})\s*:\s*\S").expect("the label pattern is valid")
});

/// The labels of a stock tip, their letters alone: the end of a label (`stocksymbol` ends
/// in `symbol`), the single junk letters spammers put between the letters of `stock` and
/// `symbol` allowed, or the whole of it for the trade date.
static STOCK_LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        "^(?:tradedate|tradingdate)$|(?:company(?:name)?\
         |s[a-z]?t[a-z]?o[a-z]?c[a-z]?k[a-z]?\
         |s[a-z]?y[a-z]?m(?:[a-z]?b[a-z]?o[a-z]?l)?\
         |target|ticker|opening(?:price|p)|current(?:price|p)\
         |projected|position|expectations|weeks?high|marketperformance\
         |(?:year|week|month|day|price)(?:target|estimates?)\
         |sector|recommendation|rating)$",
    )
    .expect("the stock label pattern is valid")
});

/// How many different stock-tip labels `text` (a message's first text part) has, as
/// SpamAssassin counts them: the part of each label that names the stock-tip field (so
/// `Company` and `Company Name` are two, and `Symbol` five times is one).
///
/// SpamAssassin reads the text in pieces of 2 to 4 KiB, so a line its cut falls in is
/// two lines to it; spamnb reads it whole, which differs only for such a line.
pub(super) fn stock_labels(text: &str) -> usize {
    let mut seen = HashSet::new();
    for line in LABELLED_LINE.captures_iter(text) {
        let Some(label) = line.get(1) else {
            continue;
        };
        let letters: String = (label.as_str().chars())
            .filter(char::is_ascii_alphabetic)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if let Some(field) = STOCK_LABEL.find(&letters) {
            seen.insert(field.as_str().to_string());
        }
    }
    seen.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_percent_is_the_largest_share_of_spaces_among_long_lines() {
        let long_word = "x".repeat(3000);
        let long_text = "ab ".repeat(1000);
        for (body, percent) in [
            ("", -1),
            ("hi\nok", -1),
            ("abcdef", 0),
            // 2 spaces to 8 other bytes (the line end among them).
            ("ab cde fg", 25),
            // White space runs are one space; tabs too.
            ("ab  \t cde   fg", 25),
            ("a b c", 50),
            ("a b\nlonger words here", 12),
            // Cut in pieces of 2048 bytes: the whole first, the rest (952 bytes) next.
            (long_word.as_str(), 0),
            // Cut at a space: 682 spaces to 1366 + 1 others.
            (long_text.as_str(), 49),
        ] {
            assert_eq!(space_percent(body), percent, "{body:?}");
        }
    }

    #[test]
    fn stock_labels_are_counted_once_each() {
        for (text, labels) in [
            ("", 0),
            ("Company: Acme\nCompany Name: Acme\ncompany: again", 2),
            (
                "Symbol: AC\nSym: AC\nS-t-o-c-k: AC\nStxock: AC\nSymbxol: AC",
                5,
            ),
            (
                "Current Price: 1\nCurrent P: 1\nOpening Price: 1\n52 Week High: 3",
                4,
            ),
            (
                "Trade Date: today\nTrading Date: today\nLast Trade Date: x",
                2,
            ),
            (
                "Price Target: 5\nYear Estimate: 3\nTarget: 4\nSector: Mining",
                4,
            ),
            // Not labels: too short, too long, a colon first, no value.
            (
                "ab: 1\nThe company that we all like very much: x\n: target: 1\nSymbol:  ",
                0,
            ),
            // A value on the next line is taken with that line's first letter.
            ("Symbol:\nTicker: AC", 1),
            ("Dear friend: hello\nSubject: stock", 0),
        ] {
            assert_eq!(stock_labels(text), labels, "{text:?}");
        }
    }
}
