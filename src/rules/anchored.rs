//! A set of patterns run from each place where one of them can begin, instead of across
//! the whole text at once.
//!
//! An unanchored set keeps, in each state of its lazy DFA, every partial match begun
//! at every earlier byte. With a few dozen patterns those combinations are endless: the
//! full DFA of spamnb's 59 body patterns would take 935 MB. So every new text builds new
//! states, and building them was most of what body rules cost. Run anchored from each place
//! where some pattern can begin (a word start for `\bword`, a line start for `^`, any `$`
//! for `\$…`), the DFA follows one beginning at a time. Its states stay few and are soon all
//! built, and most runs die after a byte or two.

use regex_automata::Anchored;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::util::start;
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Class, Hir, HirKind, Look};

use super::is_word_byte;
use super::set::{PerThread, per_thread, set_dfa};
use super::start_scan::Starts;
use super::start_scan::{ANYWHERE, AT_LINE_START, AT_WORD_START, StartScan};

/// Steps of all runs over a text, per byte of it, before the unanchored set, one pass, is
/// the cheaper: `(?s)^.*x` runs from every line start to the end of the text, and `\${3,}`
/// over a long run of `$` from every `$` to its end (quadratic: minutes for a megabyte).
/// spamnb's body rules take half a step per byte of ordinary mail.
const STEPS_PER_BYTE: usize = 8;
const MIN_STEPS: usize = 4096;

/// More bytes than this that may begin a match anywhere (`[a-z]x` begins at every letter)
/// would start a run at most bytes of ordinary text: the unanchored set is then cheaper.
const MAX_BEGIN_ANYWHERE: usize = 16;

pub(super) struct AnchoredSet {
    dfa: DFA,
    /// Where runs may begin in a text.
    scan: StartScan,
    /// The first bytes a match may begin with, when they can be listed.
    beginnings: Option<Beginnings>,
    caches: PerThread<Cache>,
}

impl std::fmt::Debug for AnchoredSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnchoredSet").finish_non_exhaustive()
    }
}

/// The lazy DFA gave up (its cache thrashed, or it met a byte it cannot handle), or the runs
/// took too many steps: the caller runs its unanchored set instead.
#[derive(Debug)]
pub(super) struct GaveUp;

/// Where runs of `hir` may begin, if at few places: it matches no empty string (which
/// begins everywhere), where it begins can be told, and few bytes may begin it anywhere.
/// A set is anchored without the patterns that have none, which run unanchored beside it.
pub(super) fn starts_of(hir: &Hir) -> Option<Starts> {
    if hir.properties().minimum_len() == Some(0) {
        return None;
    }
    let mut starts = [0u8; 256];
    mark_starts(hir, &mut starts)?;
    (anywhere(&starts) <= MAX_BEGIN_ANYWHERE).then_some(starts)
}

/// Adds `one` (a pattern's [`starts_of`]) to `all` (an anchored set's), unless together
/// they would begin anywhere at too many bytes: runs would start at most bytes of ordinary
/// text, and that pattern is better run unanchored beside the set.
pub(super) fn admit(all: &mut Starts, one: &Starts) -> bool {
    let mut both = *all;
    union(&mut both, one);
    let fits = anywhere(&both) <= MAX_BEGIN_ANYWHERE;
    if fits {
        *all = both;
    }
    fits
}

/// Adds `one`'s beginnings to `all`.
pub(super) fn union(all: &mut Starts, one: &Starts) {
    for (b, bits) in all.iter_mut().zip(one) {
        *b |= bits;
    }
}

fn anywhere(starts: &Starts) -> usize {
    starts.iter().filter(|&&s| s & ANYWHERE != 0).count()
}

impl AnchoredSet {
    /// The patterns as one anchored set, given where they may begin (their starts, each
    /// [`admit`]ted), or `None` when their automaton cannot be built.
    pub(super) fn new(
        hirs: &[&Hir],
        starts: Starts,
        size_limit: usize,
        cache_limit: usize,
    ) -> Option<Self> {
        let dfa = set_dfa(hirs, size_limit, DFA::config().cache_capacity(cache_limit)).ok()?;
        let for_caches = dfa.clone();
        Some(AnchoredSet {
            caches: per_thread(move || for_caches.create_cache()),
            dfa,
            scan: StartScan::new(starts),
            beginnings: Beginnings::of(hirs),
        })
    }

    /// Calls `hit` with the index of each pattern that matches somewhere in `hay` (a
    /// pattern may be named more than once).
    pub(super) fn matches(&self, hay: &[u8], mut hit: impl FnMut(usize)) -> Result<(), GaveUp> {
        let mut cache = self.caches.get();
        let cache = &mut *cache;
        let mut steps = hay.len().saturating_mul(STEPS_PER_BYTE).max(MIN_STEPS);
        for (block, bytes) in hay.chunks(64).enumerate() {
            let before = (block * 64).checked_sub(1).map(|b| hay[b]);
            let mut candidates = self.scan.candidates(bytes, before);
            while candidates != 0 {
                let at = block * 64 + candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if self
                    .beginnings
                    .as_ref()
                    .is_none_or(|b| b.may_begin(&hay[at..]))
                {
                    let behind = at.checked_sub(1).map(|b| hay[b]);
                    self.run(cache, hay, at, behind, &mut steps, &mut hit)?;
                }
            }
        }
        Ok(())
    }

    /// One anchored run from `at` until the DFA can match nothing more.
    fn run(
        &self,
        cache: &mut Cache,
        hay: &[u8],
        at: usize,
        behind: Option<u8>,
        steps: &mut usize,
        hit: &mut impl FnMut(usize),
    ) -> Result<(), GaveUp> {
        let config = start::Config::new()
            .anchored(Anchored::Yes)
            .look_behind(behind);
        let mut state = self.dfa.start_state(cache, &config).map_err(|_| GaveUp)?;
        for &byte in &hay[at..] {
            *steps = steps.checked_sub(1).ok_or(GaveUp)?;
            state = self
                .dfa
                .next_state(cache, state, byte)
                .map_err(|_| GaveUp)?;
            if state.is_tagged() {
                if state.is_dead() {
                    return Ok(());
                }
                if state.is_quit() {
                    return Err(GaveUp);
                }
                if state.is_match() {
                    self.report(cache, state, hit);
                }
            }
        }
        // Matches show one byte late: the end of the text is a last step.
        state = self.dfa.next_eoi_state(cache, state).map_err(|_| GaveUp)?;
        if state.is_match() {
            self.report(cache, state, hit);
        }
        Ok(())
    }

    fn report(
        &self,
        cache: &Cache,
        state: regex_automata::hybrid::LazyStateID,
        hit: &mut impl FnMut(usize),
    ) {
        for i in 0..self.dfa.match_len(cache, state) {
            hit(self.dfa.match_pattern(cache, state, i).as_usize());
        }
    }
}

/// The first two or three bytes of every match, as bit tables. A run costs a start state
/// and two or three steps of the DFA, through transitions that are rarely in the CPU cache;
/// on spamnb's body rules three runs in four die within three bytes, and these tables turn
/// most of them away first.
///
/// Bytes are folded (`| 0x20`: a letter's two cases, and a few other pairs, become one), so
/// that `(?i)free` makes one key, not eight. A literal shorter than three bytes (a class
/// too big to list follows it) allows any bytes after it. Three bytes go by a hash. Folds
/// and collisions only let a run through that need not be.
struct Beginnings {
    /// By the first two bytes: the literals of one or two.
    two: Box<[u64]>,
    /// By a hash of the first three bytes.
    three: Box<[u64]>,
}

const THREE_BITS: u32 = 16;

fn fold(b: u8) -> usize {
    usize::from(b | 0x20)
}

fn two_key(a: u8, b: u8) -> usize {
    fold(a) << 8 | fold(b)
}

fn three_key(a: u8, b: u8, c: u8) -> usize {
    let k = (fold(a) << 16 | fold(b) << 8 | fold(c)) as u32;
    (k.wrapping_mul(0x9E37_79B1) >> (32 - THREE_BITS)) as usize
}

fn set_bit(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

fn bit(bits: &[u64], i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

impl Beginnings {
    /// `None` when some pattern's beginnings cannot be listed.
    fn of(hirs: &[&Hir]) -> Option<Beginnings> {
        let mut two = vec![0u64; (1 << 16) / 64].into_boxed_slice();
        let mut three = vec![0u64; (1 << THREE_BITS) / 64].into_boxed_slice();
        for hir in hirs {
            // Classes as large as the alphabet, so that `[a-z]` shortens no literal.
            let seq = Extractor::new()
                .kind(ExtractKind::Prefix)
                .limit_literal_len(3)
                .limit_class(64)
                .limit_repeat(3)
                .limit_total(1024)
                .extract(hir);
            for literal in seq.literals()? {
                match *literal.as_bytes() {
                    [a, b, c, ..] => set_bit(&mut three, three_key(a, b, c)),
                    [a, b] => set_bit(&mut two, two_key(a, b)),
                    [a] => (0..=255).for_each(|b| set_bit(&mut two, two_key(a, b))),
                    [] => return None,
                }
            }
        }
        Some(Beginnings { two, three })
    }

    /// Whether a match may begin at the start of `rest` (a text's last two bytes may).
    fn may_begin(&self, rest: &[u8]) -> bool {
        let [a, b, c, ..] = *rest else { return true };
        bit(&self.three, three_key(a, b, c)) || bit(&self.two, two_key(a, b))
    }
}

/// Marks in `starts` each byte a match of `hir` can begin with, and where; `None` when that
/// cannot be told.
fn mark_starts(hir: &Hir, starts: &mut [u8; 256]) -> Option<()> {
    match hir.kind() {
        HirKind::Capture(c) => mark_starts(&c.sub, starts),
        HirKind::Alternation(branches) => branches.iter().try_for_each(|b| mark_starts(b, starts)),
        HirKind::Concat(parts) => {
            // Leading assertions say where a match can begin; the rest, with what byte.
            let mut place = ANYWHERE;
            for part in parts {
                let HirKind::Look(look) = part.kind() else {
                    break;
                };
                match look {
                    Look::Start | Look::StartLF | Look::StartCRLF => place = AT_LINE_START,
                    Look::WordAscii | Look::WordStartAscii | Look::WordStartHalfAscii
                        if place == ANYWHERE =>
                    {
                        place = AT_WORD_START
                    }
                    _ => {}
                }
            }
            // The assertions match the empty string: the bytes the whole begins with.
            let first = first_bytes(hir);
            // After `^`, any byte may come: line starts are few.
            let first = match first {
                None if place == AT_LINE_START => (0..=255).collect(),
                first => first?,
            };
            for byte in first {
                // `\b` before a byte that is not a word byte begins after one.
                let here = if place == AT_WORD_START && !is_word_byte(byte) {
                    ANYWHERE
                } else {
                    place
                };
                starts[usize::from(byte)] |= here;
            }
            Some(())
        }
        _ => {
            for byte in first_bytes(hir)? {
                starts[usize::from(byte)] |= ANYWHERE;
            }
            Some(())
        }
    }
}

/// The bytes every match of `hir` begins with one of, if they can be listed: not when it
/// may match the empty string, nor when it may begin with one of too many characters of a
/// Unicode class. Read off the syntax tree: regex-syntax's literal extractor, which listed
/// them before, was a seventh of compiling spamnb's rules.
fn first_bytes(hir: &Hir) -> Option<Vec<u8>> {
    let mut bytes = [false; 256];
    let empty = mark_first_bytes(hir, &mut bytes)?;
    (!empty).then(|| (0..=255u8).filter(|&b| bytes[usize::from(b)]).collect())
}

/// More characters than this in a Unicode class a match may begin with: it is not listed
/// (the limit the literal extractor was given).
const MAX_CLASS_CHARS: u32 = 256;

/// Marks in `bytes` each byte a match of `hir` may begin with; whether it may match the
/// empty string (so that what follows it may begin a match too), or `None` when they
/// cannot be listed.
fn mark_first_bytes(hir: &Hir, bytes: &mut [bool; 256]) -> Option<bool> {
    Some(match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(literal) => match literal.0.first() {
            Some(&first) => {
                bytes[usize::from(first)] = true;
                false
            }
            None => true,
        },
        HirKind::Class(Class::Bytes(class)) => {
            for range in class.ranges() {
                for b in range.start()..=range.end() {
                    bytes[usize::from(b)] = true;
                }
            }
            false
        }
        HirKind::Class(Class::Unicode(class)) => {
            let chars: u32 = (class.ranges().iter())
                .map(|r| u32::from(r.end()) - u32::from(r.start()) + 1)
                .sum();
            if chars > MAX_CLASS_CHARS {
                return None;
            }
            for c in class.ranges().iter().flat_map(|r| r.start()..=r.end()) {
                let mut utf8 = [0u8; 4];
                bytes[usize::from(c.encode_utf8(&mut utf8).as_bytes()[0])] = true;
            }
            false
        }
        // What the repeated part begins with counts even where it may not come (`x{0}`),
        // as the extractor had it: more places to begin, never fewer.
        HirKind::Repetition(r) => mark_first_bytes(&r.sub, bytes)? || r.min == 0,
        HirKind::Capture(c) => mark_first_bytes(&c.sub, bytes)?,
        HirKind::Concat(parts) => {
            for part in parts {
                if !mark_first_bytes(part, bytes)? {
                    return Some(false);
                }
            }
            true
        }
        HirKind::Alternation(branches) => {
            let mut empty = false;
            for branch in branches {
                empty |= mark_first_bytes(branch, bytes)?;
            }
            empty
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees(patterns: &[String]) -> Vec<Hir> {
        patterns
            .iter()
            .map(|p| super::super::set::parse(p).unwrap())
            .collect()
    }

    /// The patterns as one anchored set, as a matcher makes it.
    fn anchored(patterns: &[Hir]) -> Option<AnchoredSet> {
        let hirs: Vec<&Hir> = patterns.iter().collect();
        let mut starts = [0u8; 256];
        for hir in &hirs {
            if !admit(&mut starts, &starts_of(hir)?) {
                return None;
            }
        }
        AnchoredSet::new(&hirs, starts, 1 << 26, 1 << 23)
    }

    fn both(patterns: &[&str], hay: &str) -> (Vec<usize>, Vec<usize>) {
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        let anchored = anchored(&trees(&patterns)).expect("can be anchored");
        let mut got = Vec::new();
        anchored.matches(hay.as_bytes(), |i| got.push(i)).unwrap();
        got.sort();
        got.dedup();
        let set = regex::bytes::RegexSet::new(&patterns).unwrap();
        (got, set.matches(hay.as_bytes()).iter().collect())
    }

    const PATTERNS: [&str; 12] = [
        r"(?-u)(?im)\bfree\s+(?:gift|money)\b",
        r"(?-u)(?m)\${3,}",
        r"(?-u)(?im)^\s*dear\s+friend\b",
        r"(?-u)(?im)\b-{0,2}v-{0,2}i-{0,2}a\b",
        // `\b` before a byte that is not a word byte: the match begins after a word.
        r"(?-u)\b-+x\b",
        r"(?-u)(?im)\blottery\b.*\bwinner\b",
        r"(?-u)(?i)\d{3,}\s*dollars",
        r"(?-u)(?i)end$",
        r"(?-u)(?i)<!--\s*[a-z]",
        r"(?-u)x_y",
        // Begins with a class too big to list three bytes of.
        r"(?-u)\b(?:[A-Za-z][ .]){3,}[A-Za-z]\b",
        // After `^`, a class of every byte but one: any byte may begin it at a line start.
        r"(?-u)(?m)^[^/]*zz",
    ];

    #[test]
    fn finds_what_the_unanchored_set_finds() {
        for hay in [
            "Get a FREE gift now",
            "free\nmoney",
            "pay $$$ today",
            "hello\n  Dear Friend, hi",
            "xdear friend",
            "-v-i-a here",
            "x--via",
            "a-x",
            "lottery: you are the winner",
            "lottery\nwinner",
            "we pay 1000 dollars",
            "in the end",
            "a<!-- b-->",
            "ax_y",
            "nothing at all",
            "",
        ] {
            let (anchored, unanchored) = both(&PATTERNS, hay);
            assert_eq!(anchored, unanchored, "{hay:?}");
        }
    }

    /// Texts of many 64-byte blocks, with matches across block edges and at the very end,
    /// where the first three bytes cannot all be read.
    #[test]
    fn long_texts_agree_with_the_unanchored_set() {
        let pieces: Vec<&str> =
            " |\n|free| gift|FREE  Money|dear| friend|$$|$|-v-i-a|lottery| the \
            winner|1000| dollars|end|<!-- z|x_y|a b c d|é|zz|/"
                .split('|')
                .collect();
        let mut next = crate::xorshift(0x5eed);
        for _ in 0..3000 {
            let len = (next() % 80) as usize;
            let hay: String = (0..len)
                .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                .collect();
            let (anchored, unanchored) = both(&PATTERNS, &hay);
            assert_eq!(anchored, unanchored, "{hay:?}");
        }
    }

    /// From every line start to the end of the text is quadratic: the runs give up, and the
    /// caller's unanchored set answers.
    #[test]
    fn runs_that_read_on_to_the_end_give_up() {
        let set = anchored(&trees(&[r"(?-u)(?sm)^.*zz".to_string()])).expect("can be anchored");
        let long = "a line\n".repeat(2000);
        assert!(set.matches(long.as_bytes(), |_| {}).is_err());
        let short = "a line\n".repeat(3) + "zz";
        let mut hits = Vec::new();
        assert!(set.matches(short.as_bytes(), |i| hits.push(i)).is_ok());
        assert!(hits.contains(&0));
    }

    #[test]
    fn beginnings_turn_away_what_no_pattern_begins_with() {
        let patterns = trees(&[r"(?-u)(?i)\bfree\b".to_string(), r"(?-u)\$\d".to_string()]);
        let b = Beginnings::of(&patterns.iter().collect::<Vec<_>>()).unwrap();
        for yes in ["free", "FREE gift", "Fre", "$1", "$9x", "$"] {
            assert!(b.may_begin(yes.as_bytes()), "{yes}");
        }
        for no in ["fry", "from", "$ 1", "ten"] {
            assert!(!b.may_begin(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn first_bytes_are_read_off_the_tree() {
        let bytes = |s: &str| Some(s.bytes().collect::<Vec<u8>>());
        for (pattern, want) in [
            (r"(?-u)free", bytes("f")),
            (r"(?-u)(?i)\bfree", bytes("Ff")),
            (r"(?-u)\s*d", bytes("\t\n\x0B\x0C\r d")),
            (r"(?-u)(?:ab|c?x)+", bytes("acx")),
            (r"(?-u)^(?:y|)z", bytes("yz")),
            (r"(?-u)x?", None),
            (r"(?-u)\b", None),
            ("é", Some(vec![0xC3])),
            // More characters than can be listed.
            (r"\w", None),
        ] {
            let hir = super::super::set::parse(pattern).unwrap();
            assert_eq!(first_bytes(&hir), want, "{pattern}");
        }
    }

    #[test]
    fn patterns_that_begin_anywhere_are_not_anchored() {
        for anywhere in [r"a*", r"(?i)[a-z]<!--", r"(?-u)\b\W{0,3}via"] {
            let patterns = [r"\bfree\b".to_string(), anywhere.to_string()];
            assert!(anchored(&trees(&patterns)).is_none(), "{anywhere}");
        }
    }
}
