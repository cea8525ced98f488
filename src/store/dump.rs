//! The plain-text dump of a whole store (`spamnb export` / `spamnb import`): backups,
//! moving a model between machines, rebuilding a damaged database.
//!
//! ```text
//! spamnb-export 1
//! totals MSG_HAM MSG_SPAM
//! token OCC_HAM OCC_SPAM MSG_HAM MSG_SPAM FEATURE
//! ledger DIGEST_HEX ham|spam LEARNED_AT USER|-
//! ```
//! Features are percent-escaped (`%`, whitespace and control characters) so each record
//! is one line. Token totals and vocabulary are recomputed on import, not trusted.

use std::io::{BufRead, Write};

use super::{Error, LedgerEntry, Store};
use crate::message::Digest;
use crate::model::{Class, TokenCounts, Totals};

const HEADER: &str = "spamnb-export 1";

pub fn export(store: &dyn Store, out: &mut dyn Write) -> Result<(), Error> {
    let totals = store.totals();
    writeln!(out, "{HEADER}")?;
    writeln!(out, "totals {} {}", totals.messages[0], totals.messages[1])?;
    let mut result: std::io::Result<()> = Ok(());
    store.for_each_token(&mut |feature, c| {
        if result.is_ok() {
            result = writeln!(
                out,
                "token {} {} {} {} {}",
                c.occurrences[0],
                c.occurrences[1],
                c.messages[0],
                c.messages[1],
                escape(feature)
            );
        }
    })?;
    std::mem::replace(&mut result, Ok(()))?;
    store.for_each_ledger_entry(&mut |digest, e| {
        if result.is_ok() {
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            result = writeln!(
                out,
                "ledger {hex} {} {} {}",
                e.class.name(),
                e.learned_at,
                e.user.as_deref().map_or("-".into(), escape)
            );
        }
    })?;
    result?;
    out.flush()?;
    Ok(())
}

/// Reads a dump into `store`, which must be empty. All or nothing.
pub fn import(store: &dyn Store, input: &mut dyn BufRead) -> Result<u64, Error> {
    let mut totals = Totals::default();
    let mut tokens: Vec<(String, TokenCounts)> = Vec::new();
    let mut ledger: Vec<(Digest, LedgerEntry)> = Vec::new();
    let mut seen_header = false;
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        let n = i + 1;
        let bad = |reason: &str| Error::Import {
            line: n,
            reason: reason.to_string(),
        };
        if !seen_header {
            if line != HEADER {
                return Err(bad(
                    "not a spamnb export (first line should be `spamnb-export 1`)",
                ));
            }
            seen_header = true;
            continue;
        }
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["totals", ham, spam] => {
                totals.messages = [
                    number(ham).ok_or_else(|| bad("bad count"))?,
                    number(spam).ok_or_else(|| bad("bad count"))?,
                ];
            }
            ["token", a, b, c, d, feature] => {
                let nums: Option<Vec<u32>> = [a, b, c, d].iter().map(|s| s.parse().ok()).collect();
                let nums = nums.ok_or_else(|| bad("bad count"))?;
                let counts = TokenCounts {
                    occurrences: [nums[0], nums[1]],
                    messages: [nums[2], nums[3]],
                };
                if counts.is_zero() {
                    continue;
                }
                totals.account(&TokenCounts::default(), &counts);
                tokens.push((
                    unescape(feature).ok_or_else(|| bad("bad escape in feature"))?,
                    counts,
                ));
            }
            ["ledger", hex, class, at, user] => {
                let digest = parse_digest(hex).ok_or_else(|| bad("bad digest"))?;
                let class = match *class {
                    "ham" => Class::Ham,
                    "spam" => Class::Spam,
                    _ => return Err(bad("class must be ham or spam")),
                };
                let user = match *user {
                    "-" => None,
                    u => Some(unescape(u).ok_or_else(|| bad("bad escape in user"))?),
                };
                ledger.push((
                    digest,
                    LedgerEntry {
                        class,
                        learned_at: number(at).ok_or_else(|| bad("bad time"))?,
                        user,
                    },
                ));
            }
            [""] => {}
            _ => return Err(bad("unknown record")),
        }
    }
    if !seen_header {
        return Err(Error::Import {
            line: 0,
            reason: "the input is empty".into(),
        });
    }
    store.replace_all(totals, &tokens, &ledger)?;
    store.flush()?;
    Ok(tokens.len() as u64)
}

fn number(s: &str) -> Option<u64> {
    s.parse().ok()
}

fn parse_digest(hex: &str) -> Option<Digest> {
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '%' || c.is_whitespace() || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(s.len());
    let mut rest = s.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips() {
        for s in [
            "plain",
            "a b",
            "100%",
            "tab\there",
            "line\nbreak",
            "ünï",
            "\u{3000}x",
        ] {
            let e = escape(s);
            assert!(!e.contains(char::is_whitespace), "{e:?}");
            assert_eq!(unescape(&e).as_deref(), Some(s), "{s:?}");
        }
        assert_eq!(unescape("%G0"), None);
        assert_eq!(unescape("%4"), None);
    }
}
