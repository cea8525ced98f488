//! The plain-text dump of a whole store (`spamnb export` / `spamnb import`): backups,
//! moving a model between machines, rebuilding a damaged database.
//!
//! ```text
//! spamnb-export 3
//! digest as-sent|whole-message
//! totals MSG_HAM MSG_SPAM
//! token OCC_HAM OCC_SPAM MSG_HAM MSG_SPAM FEATURE
//! ledger DIGEST_HEX ham|spam LEARNED_AT USER|-
//! end TOKEN_RECORDS LEDGER_RECORDS
//! ```
//! Features are percent-escaped (`%`, whitespace and control characters) so each record
//! is one line. Token totals and vocabulary are recomputed on import, not trusted, and a
//! feature given twice is refused.
//! `digest` says how the ledger's digests were taken ([`DigestKind`]); dumps before
//! version 3 have none, and were taken of the whole message.
//!
//! A dump cut short (a full disk, a copy stopped halfway) still parses line by line, and
//! would load as a model with every message counted and few of its tokens: the `end`
//! record, written last, says how many records came before it, and an import without it,
//! or whose counts differ, is refused. Version 1 dumps have no `end`; they are imported
//! when their ledger holds exactly the messages their totals count, as a whole dump's
//! does and a cut one's (missing ledger records, which come last) does not. A later dump
//! whose totals and ledger disagree is whole but edited, and refused too.

use std::io::{BufRead, Write};

use super::{Error, LedgerEntry, Store};
use crate::message::{Digest, DigestKind};
use crate::model::{Class, TokenCounts, Totals};

const HEADER: &str = "spamnb-export 3";
/// The header of dumps written before the `digest` record.
const HEADER_V2: &str = "spamnb-export 2";
/// The header of dumps written before the `end` record.
const HEADER_V1: &str = "spamnb-export 1";

/// Writes the dump of `store`, as one moment of it: lessons that come meanwhile (a daemon
/// learning) wait for it, or the totals would not count what the ledger holds.
pub fn export(store: &dyn Store, out: &mut dyn Write) -> Result<(), Error> {
    store.holding_writes(&mut || export_held(store, out))
}

fn export_held(store: &dyn Store, out: &mut dyn Write) -> Result<(), Error> {
    let totals = store.totals();
    writeln!(out, "{HEADER}")?;
    writeln!(out, "digest {}", store.digest_kind().name())?;
    writeln!(out, "totals {} {}", totals.messages[0], totals.messages[1])?;
    let mut result: std::io::Result<()> = Ok(());
    let (mut tokens, mut entries) = (0u64, 0u64);
    store.for_each_token(&mut |feature, c| {
        if result.is_ok() {
            tokens += 1;
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
            entries += 1;
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            result = writeln!(
                out,
                "ledger {hex} {} {} {}",
                e.class.name(),
                e.learned_at,
                e.user.as_deref().map_or("-".into(), escape_user)
            );
        }
    })?;
    result?;
    writeln!(out, "end {tokens} {entries}")?;
    out.flush()?;
    Ok(())
}

/// A whole dump, read and checked ([`read_dump`]): what [`Dump::load_into`] writes to a store.
#[derive(Debug)]
pub struct Dump {
    totals: Totals,
    tokens: Vec<(String, TokenCounts)>,
    ledger: Vec<(Digest, LedgerEntry)>,
    digest_kind: DigestKind,
}

impl Dump {
    /// Writes the dump into `store`, which must be empty, as one batch; returns how many
    /// tokens it holds.
    pub fn load_into(&self, store: &dyn Store) -> Result<u64, Error> {
        store.replace_all(self.totals, &self.tokens, &self.ledger, self.digest_kind)?;
        store.flush()?;
        Ok(self.tokens.len() as u64)
    }
}

/// Reads a whole dump. A dump that is damaged or cut short is refused, before any store is
/// opened to load it: a refused import leaves no database behind.
pub fn read_dump(input: &mut dyn BufRead) -> Result<Dump, Error> {
    let mut totals = Totals::default();
    let mut tokens: Vec<(String, TokenCounts)> = Vec::new();
    // The line of each of `tokens`, to name one given twice.
    let mut token_lines: Vec<usize> = Vec::new();
    let mut ledger: Vec<(Digest, LedgerEntry)> = Vec::new();
    let mut version = None;
    let mut digest_kind = None;
    // The line of the `totals` record, once read.
    let mut totals_line = None;
    // Token records read, those of zero counts (not kept) included: what `end` counts.
    let mut token_records = 0u64;
    let mut end = None;
    let mut read = Vec::new();
    for n in 1.. {
        read.clear();
        if input.read_until(b'\n', &mut read)? == 0 {
            break;
        }
        // Every line of an export ends in a newline, the last too.
        if read.pop() != Some(b'\n') {
            return Err(Error::CutOff {
                reason: format!("its last line, {n}, ends without a newline"),
            });
        }
        if read.last() == Some(&b'\r') {
            read.pop();
        }
        let bad = |reason: &str| Error::Import {
            line: n,
            reason: reason.to_string(),
        };
        // An export is UTF-8 text: a line that is not was changed on its way here, and
        // its number tells where to look.
        let line = std::str::from_utf8(&read).map_err(|_| {
            bad(
                "not UTF-8, as every line of an export is; was the file converted to \
                 another encoding, or edited?",
            )
        })?;
        let Some(v) = version else {
            version = Some(match line {
                HEADER => 3,
                HEADER_V2 => 2,
                HEADER_V1 => 1,
                _ => {
                    return Err(bad(&format!(
                        "not a spamnb export (first line should be `{HEADER}`)"
                    )));
                }
            });
            continue;
        };
        if end.is_some() && !line.is_empty() {
            return Err(bad("a record after `end`, which must come last"));
        }
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["digest", kind] if v == 3 && digest_kind.is_none() => {
                digest_kind =
                    Some(DigestKind::from_name(kind).ok_or_else(|| bad("unknown digest kind"))?);
            }
            ["totals", ham, spam] => {
                totals.messages = [
                    number(ham).ok_or_else(|| bad("bad count"))?,
                    number(spam).ok_or_else(|| bad("bad count"))?,
                ];
                totals_line = Some(n);
            }
            ["token", a, b, c, d, feature] => {
                token_records += 1;
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
                token_lines.push(n);
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
            ["end", t, l] if v >= 2 => {
                end = Some([
                    number(t).ok_or_else(|| bad("bad count"))?,
                    number(l).ok_or_else(|| bad("bad count"))?,
                ]);
            }
            [""] => {}
            _ => return Err(bad("unknown record")),
        }
    }
    match version {
        None => {
            return Err(Error::Import {
                line: 0,
                reason: "the input is empty".into(),
            });
        }
        Some(1) => check_ledger_matches_totals(&ledger, &totals, totals_line.is_some())?,
        Some(_) => {
            check_end(end, totals_line, [token_records, ledger.len() as u64])?;
            // Whole, it may still have been edited: the totals count what the ledger holds
            // in every database that learning made.
            let held = ledger_messages(&ledger);
            if held != totals.messages {
                return Err(Error::Import {
                    line: totals_line.expect("check_end refuses a dump with no totals"),
                    reason: format!(
                        "the totals count {} ham and {} spam messages, but the ledger holds {} \
                         and {}",
                        totals.messages[0], totals.messages[1], held[0], held[1]
                    ),
                });
            }
        }
    }
    check_each_feature_once(&tokens, &token_lines)?;
    let digest_kind = match (version, digest_kind) {
        (Some(3), None) => {
            return Err(Error::Import {
                line: 2,
                reason: "no `digest` record, which follows the first line".into(),
            });
        }
        (_, kind) => kind.unwrap_or(DigestKind::WholeMessage),
    };
    Ok(Dump {
        totals,
        tokens,
        ledger,
        digest_kind,
    })
}

/// A version 2 or 3 dump is whole when its `end` record counts the records before it.
fn check_end(
    end: Option<[u64; 2]>,
    totals_line: Option<usize>,
    read: [u64; 2],
) -> Result<(), Error> {
    let reason = match end {
        None => "it ends before its `end` record".to_string(),
        Some(_) if totals_line.is_none() => "it has no `totals` record".to_string(),
        Some(counted) if counted != read => format!(
            "its `end` record counts {} token and {} ledger records, but {} and {} came before it",
            counted[0], counted[1], read[0], read[1]
        ),
        Some(_) => return Ok(()),
    };
    Err(Error::CutOff { reason })
}

/// A version 1 dump has no `end`, but its ledger, written last, holds one entry per
/// message its totals count: a dump cut anywhere after the totals falls short of them.
fn check_ledger_matches_totals(
    ledger: &[(Digest, LedgerEntry)],
    totals: &Totals,
    seen_totals: bool,
) -> Result<(), Error> {
    let entries = ledger_messages(ledger);
    let reason = if !seen_totals {
        "it has no `totals` record".to_string()
    } else if entries != totals.messages {
        format!(
            "its totals count {} ham and {} spam messages, but its ledger holds {} and {} \
             (written by an older spamnb, it has no `end` record to tell)",
            totals.messages[0], totals.messages[1], entries[0], entries[1]
        )
    } else {
        return Ok(());
    };
    Err(Error::CutOff { reason })
}

/// A feature given twice (a dump edited by hand, or two dumps joined) would be stored once
/// and counted twice in the totals: refused, at the first line that gives one again.
fn check_each_feature_once(tokens: &[(String, TokenCounts)], lines: &[usize]) -> Result<(), Error> {
    // Sorting where they are, rather than a set of every feature: a dump holds millions.
    let mut order: Vec<usize> = (0..tokens.len()).collect();
    order.sort_unstable_by(|&a, &b| tokens[a].0.cmp(&tokens[b].0).then(a.cmp(&b)));
    let again = order
        .windows(2)
        .filter(|w| tokens[w[0]].0 == tokens[w[1]].0)
        .min_by_key(|w| w[1]);
    match again {
        Some(&[first, again]) => Err(Error::Import {
            line: lines[again],
            reason: format!(
                "feature {} was given on line {} already",
                escape(&tokens[again].0),
                lines[first]
            ),
        }),
        _ => Ok(()),
    }
}

/// The messages of each class `ledger` holds.
fn ledger_messages(ledger: &[(Digest, LedgerEntry)]) -> [u64; 2] {
    let mut entries = [0u64; 2];
    for (_, e) in ledger {
        entries[e.class.index()] += 1;
    }
    entries
}

fn number(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// `pair` as text when it is two hex digits: the number parser alone would also take a
/// sign and one digit (`+f`), which no dump writes.
fn hex_pair(pair: &[u8]) -> Option<&str> {
    if !pair.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    std::str::from_utf8(pair).ok()
}

fn parse_digest(hex: &str) -> Option<Digest> {
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        let pair = hex_pair(hex.as_bytes().get(i * 2..i * 2 + 2)?)?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
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

/// A user as the ledger record writes it: `-` there is no user, so a user named `-` is
/// written escaped (older dumps, which wrote it as it is, read it as no user).
fn escape_user(user: &str) -> String {
    match user {
        "-" => "%2D".into(),
        u => escape(u),
    }
}

fn unescape(s: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(s.len());
    let mut rest = s.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = hex_pair(tail.get(..2)?)?;
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
    use crate::model::CountSource;
    use crate::store::{Lesson, SledStore, StoreOptions};

    /// What `spamnb import` does, the dump read whole and then loaded.
    fn import(store: &dyn Store, input: &mut dyn BufRead) -> Result<u64, Error> {
        read_dump(input)?.load_into(store)
    }

    fn open(dir: &std::path::Path) -> SledStore {
        SledStore::open(dir, &StoreOptions::default()).unwrap()
    }

    /// A store with a few messages of each class learned, and its dump.
    fn learned(dir: &std::path::Path) -> (SledStore, String) {
        let store = open(dir);
        let lessons: Vec<Lesson> = (0..6u8)
            .map(|i| Lesson {
                digest: [i; 16],
                target: Some(if i % 2 == 0 { Class::Ham } else { Class::Spam }),
                features: ["common", &format!("own{i}"), &format!("pair{}", i / 2)]
                    .into_iter()
                    .collect(),
                user: (i == 3).then(|| "a user".to_string()),
                tentative: false,
            })
            .collect();
        store.learn(&lessons).unwrap();
        let mut dump = Vec::new();
        export(&store, &mut dump).unwrap();
        (store, String::from_utf8(dump).unwrap())
    }

    /// A lesson that comes while an export is written waits for it: the dump's totals
    /// count what its ledger holds.
    #[test]
    fn an_export_is_one_moment_of_a_store_that_goes_on_learning() {
        use std::sync::mpsc;
        /// Tells when the totals are out, then takes its time over the rest.
        struct Stalling(Vec<u8>, Option<mpsc::Sender<()>>);
        impl Write for Stalling {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.extend_from_slice(b);
                let totals_out =
                    self.0.ends_with(b"\n") && self.0.windows(7).any(|w| w == b"totals ");
                if totals_out && let Some(tell) = self.1.take() {
                    tell.send(()).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = learned(dir.path());
        let (tell, told) = mpsc::channel();
        let dump = std::thread::scope(|s| {
            let store = &store;
            let learner = s.spawn(move || {
                told.recv().unwrap();
                let lesson = Lesson {
                    digest: [99; 16],
                    target: Some(Class::Spam),
                    features: ["late"].into_iter().collect(),
                    user: None,
                    tentative: false,
                };
                store.learn(&[lesson]).unwrap();
            });
            let mut out = Stalling(Vec::new(), Some(tell));
            export(store, &mut out).unwrap();
            learner.join().unwrap();
            String::from_utf8(out.0).unwrap()
        });
        let spam_entries = dump.lines().filter(|l| l.contains(" spam ")).count();
        assert!(dump.contains("totals 3 3\n"), "{dump}");
        assert_eq!(spam_entries, 3, "{dump}");
        assert_eq!(
            store.totals().messages,
            [3, 4],
            "and the lesson was learned after"
        );
    }

    fn contents(store: &SledStore) -> (Totals, Vec<String>, Vec<String>) {
        let (mut tokens, mut ledger) = (Vec::new(), Vec::new());
        store
            .for_each_token(&mut |f, c| tokens.push(format!("{f} {c:?}")))
            .unwrap();
        store
            .for_each_ledger_entry(&mut |d, e| ledger.push(format!("{d:?} {e:?}")))
            .unwrap();
        (store.totals(), tokens, ledger)
    }

    /// `dump` cut after each of its lines but the last is refused, and leaves `store`
    /// (empty) as it was; whole, it loads what `want` holds.
    fn refuses_every_cut(dump: &str, want: &SledStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let empty = contents(&store);
        let lines: Vec<&str> = dump.lines().collect();
        for cut in 1..lines.len() {
            let part = lines[..cut].join("\n") + "\n";
            let result = import(&store, &mut part.as_bytes());
            assert!(
                matches!(result, Err(Error::CutOff { .. })),
                "{result:?} for the first {cut} lines of\n{dump}"
            );
            assert_eq!(contents(&store), empty, "after the first {cut} lines");
        }
        // Cut inside a line: before each newline, the last one's included.
        for (cut, _) in dump.match_indices('\n') {
            let result = import(&store, &mut &dump.as_bytes()[..cut]);
            assert!(
                matches!(&result, Err(Error::CutOff { reason }) if reason.contains("newline")),
                "{result:?} for the first {cut} bytes of\n{dump}"
            );
        }
        import(&store, &mut dump.as_bytes()).unwrap();
        assert_eq!(contents(&store), contents(want));
    }

    #[test]
    fn a_dump_cut_at_a_line_boundary_is_refused_and_a_whole_one_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let (store, dump) = learned(dir.path());
        assert!(dump.ends_with("end 10 6\n"), "{dump}");
        refuses_every_cut(&dump, &store);
        // A record miscounted, or one after `end`, is not a whole dump either.
        let miscounted = dump.replace("end 10 6", "end 10 7");
        // One store for both: reopened at once, sled's flusher may still hold the files.
        let fresh = tempfile::tempdir().unwrap();
        let fresh = open(fresh.path());
        let result = import(&fresh, &mut miscounted.as_bytes());
        assert!(matches!(result, Err(Error::CutOff { .. })), "{result:?}");
        let appended = format!("{dump}totals 1 1\n");
        let result = import(&fresh, &mut appended.as_bytes());
        assert!(matches!(result, Err(Error::Import { .. })), "{result:?}");
    }

    /// A dump written before the `end` record: whole, it loads; cut, its ledger falls
    /// short of its totals.
    #[test]
    fn a_version_1_dump_loads_whole_and_is_refused_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (store, dump) = learned(dir.path());
        let v1: String = dump
            .replace(HEADER, HEADER_V1)
            .lines()
            .filter(|l| !l.starts_with("end ") && !l.starts_with("digest "))
            .map(|l| format!("{l}\n"))
            .collect();
        refuses_every_cut(&v1, &store);
    }

    /// `dump` as version 2 wrote it: no digest kind, whole-message digests implied.
    fn as_version_2(dump: &str) -> String {
        dump.replace(HEADER, HEADER_V2)
            .lines()
            .filter(|l| !l.starts_with("digest "))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// The kind of digest the ledger was keyed by travels with it: a dump from before
    /// there were two kinds loads as whole-message, and a whole-message ledger stays one
    /// through an export and an import, where an as-sent one is refused as not a dump.
    #[test]
    fn the_digest_kind_travels_with_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let (store, dump) = learned(&dir.path().join("a"));
        assert_eq!(store.digest_kind(), DigestKind::AsSent);
        let v2 = as_version_2(&dump);
        let old = open(&dir.path().join("b"));
        import(&old, &mut v2.as_bytes()).unwrap();
        assert_eq!(contents(&old), contents(&store));
        assert_eq!(old.digest_kind(), DigestKind::WholeMessage);

        let mut again = Vec::new();
        export(&old, &mut again).unwrap();
        let again = String::from_utf8(again).unwrap();
        assert!(again.contains("\ndigest whole-message\n"), "{again}");
        let copy = open(&dir.path().join("c"));
        import(&copy, &mut again.as_bytes()).unwrap();
        assert_eq!(copy.digest_kind(), DigestKind::WholeMessage);
        drop(copy);
        let copy = crate::store::sled_store::tests::open_when_free(&dir.path().join("c")).unwrap();
        assert_eq!(copy.digest_kind(), DigestKind::WholeMessage, "reopened");

        let unknown = dump.replace("digest as-sent", "digest md5");
        let missing = dump.replace("digest as-sent\n", "");
        let fresh = open(&dir.path().join("d"));
        for bad in [unknown, missing] {
            assert!(matches!(
                import(&fresh, &mut bad.as_bytes()),
                Err(Error::Import { line: 2, .. })
            ));
        }
    }

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
        // A sign is no hex digit, though Rust's number parser takes one first.
        assert_eq!(unescape("%+f"), None);
        let digest = "00112233445566778899aabbccddeeff";
        assert!(parse_digest(digest).is_some());
        assert_eq!(parse_digest(&digest.replace("00", "+0")), None);
    }

    /// A dump that is not UTF-8 is refused at the line that is not, as any other bad line.
    #[test]
    fn a_dump_that_is_not_utf8_is_refused_at_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, dump) = learned(&dir.path().join("a"));
        let mut lines: Vec<Vec<u8>> = dump.lines().map(|l| l.as_bytes().to_vec()).collect();
        lines[3].push(0xff);
        let bytes = lines.join(&b'\n');
        let copy = open(&dir.path().join("b"));
        let result = import(&copy, &mut &bytes[..]);
        assert!(
            matches!(&result, Err(Error::Import { line: 4, reason }) if reason.contains("UTF-8")),
            "{result:?}"
        );
        assert_eq!(copy.totals(), Totals::default());
    }

    /// A dump that gave a feature twice was imported with the feature stored once and
    /// counted twice in the totals.
    #[test]
    fn a_dump_that_gives_a_feature_twice_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, dump) = learned(&dir.path().join("a"));
        let lines: Vec<&str> = dump.lines().collect();
        let (at, first) = (lines.iter().enumerate())
            .find(|(_, l)| l.starts_with("token "))
            .unwrap();
        let feature = first.rsplit(' ').next().unwrap();
        let tokens = dump.lines().filter(|l| l.starts_with("token ")).count();
        let twice = dump
            .replace(
                &format!("{first}\n"),
                &format!("{first}\ntoken 500 0 500 0 {feature}\n"),
            )
            .replace(&format!("end {tokens} "), &format!("end {} ", tokens + 1));
        let copy = open(&dir.path().join("b"));
        let result = import(&copy, &mut twice.as_bytes());
        let wanted = format!("feature {feature} was given on line {} already", at + 1);
        assert!(
            matches!(&result, Err(Error::Import { line, reason }) if *line == at + 2 && *reason == wanted),
            "{result:?}"
        );
        assert_eq!(copy.totals(), Totals::default());
    }

    /// A version 2 or 3 dump whose totals disagreed with its ledger (edited by hand) was
    /// imported as it was: a database counting messages its ledger does not hold, which no
    /// learning makes. Version 1 dumps were checked for it already.
    #[test]
    fn a_dump_whose_totals_disagree_with_its_ledger_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, dump) = learned(&dir.path().join("a"));
        let v2 = as_version_2(&dump);
        let copy = open(&dir.path().join("b"));
        for (whole, line) in [(&dump, 3), (&v2, 2)] {
            for totals in ["totals 5000 5000\n", "totals 3 2\n"] {
                let edited = whole.replace("totals 3 3\n", totals);
                let result = import(&copy, &mut edited.as_bytes());
                assert!(
                    matches!(&result, Err(Error::Import { line: l, reason })
                        if *l == line && reason.contains("the ledger holds 3 and 3")),
                    "{totals:?} in\n{whole}: {result:?}"
                );
                assert_eq!(copy.totals(), Totals::default());
            }
        }
    }

    /// A ledger entry for the user `-` (`spamnb learn --user - ...`) was written as `-`,
    /// the mark of no user, and came back from an import with no user.
    #[test]
    fn a_user_named_dash_survives_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir.path().join("a"));
        let users = [Some("-"), None, Some("--"), Some("%2D")];
        let lessons: Vec<Lesson> = (0..4u8)
            .map(|i| Lesson {
                digest: [i; 16],
                target: Some(Class::Spam),
                features: ["word"].into_iter().collect(),
                user: users[i as usize].map(str::to_string),
                tentative: false,
            })
            .collect();
        store.learn(&lessons).unwrap();
        let mut dump = Vec::new();
        export(&store, &mut dump).unwrap();
        let copy = open(&dir.path().join("b"));
        import(&copy, &mut dump.as_slice()).unwrap();
        for (i, user) in users.iter().enumerate() {
            assert_eq!(
                copy.ledger_entry(&[i as u8; 16])
                    .unwrap()
                    .unwrap()
                    .user
                    .as_deref(),
                *user,
                "{}",
                String::from_utf8_lossy(&dump)
            );
        }
    }
}
