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
/// that `(?i)free` makes one key, not eight. A prefix shorter than three bytes (a match may
/// end there, or what follows is too much to list) allows any bytes after it. Three bytes
/// go by a hash. Folds and collisions only let a run through that need not be.
struct Beginnings {
    /// By the first two bytes: the prefixes of one or two.
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
    /// `None` when some pattern may begin with any byte at all.
    fn of(hirs: &[&Hir]) -> Option<Beginnings> {
        let mut tables = Beginnings {
            two: vec![0u64; (1 << 16) / 64].into_boxed_slice(),
            three: vec![0u64; (1 << THREE_BITS) / 64].into_boxed_slice(),
        };
        for hir in hirs {
            let start = Growing {
                empty: true,
                ..Growing::default()
            };
            let ended = tables.walk(hir, start)?;
            // Where a match may end, any bytes may follow.
            tables.open(ended)?;
        }
        Some(tables)
    }

    /// Whether a match may begin at the start of `rest` (a text's last two bytes may).
    fn may_begin(&self, rest: &[u8]) -> bool {
        let [a, b, c, ..] = *rest else { return true };
        bit(&self.three, three_key(a, b, c)) || bit(&self.two, two_key(a, b))
    }

    /// Marks `a` followed by any byte: the row of `a` in the two-byte table.
    fn any_after(&mut self, a: u8) {
        let row = fold(a) * 256 / 64;
        self.two[row..row + 4].fill(!0);
    }

    /// Marks the prefixes `from` as they stand, any bytes after them; `None` when one is
    /// empty (a match may begin with anything).
    fn open(&mut self, from: Growing) -> Option<()> {
        if from.empty {
            return None;
        }
        for a in members(&from.one) {
            self.any_after(a);
        }
        for ab in from.two {
            set_bit(&mut self.two, usize::from(ab));
        }
        Some(())
    }

    /// The prefixes `from` followed by a match of `hir`: those of three bytes go into the
    /// tables, those still shorter come back. Read off the syntax tree in one walk:
    /// regex-syntax's literal extractor, which listed them before, spelled out each case of
    /// each letter that folding then merged, and was a quarter of compiling spamnb's rules.
    /// Assertions are passed over: a prefix may be marked that no match has, never the
    /// other way. `None` when the empty prefix must be opened.
    fn walk(&mut self, hir: &Hir, from: Growing) -> Option<Growing> {
        if from.is_whole() {
            return Some(from);
        }
        Some(match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => from,
            HirKind::Capture(c) => self.walk(&c.sub, from)?,
            HirKind::Literal(literal) => self.literal(&literal.0, from),
            HirKind::Class(Class::Bytes(class)) => {
                let mut bytes = [0u64; 4];
                for b in class.ranges().iter().flat_map(|r| r.start()..=r.end()) {
                    set_bit(&mut bytes, fold(b));
                }
                self.step(from, &bytes)
            }
            HirKind::Class(Class::Unicode(class)) => {
                let chars: u32 = (class.ranges().iter())
                    .map(|r| u32::from(r.end()) - u32::from(r.start()) + 1)
                    .sum();
                if chars > MAX_CLASS_CHARS {
                    self.open(from)?;
                    return Some(Growing::default());
                }
                let mut out = Growing::default();
                for c in class.ranges().iter().flat_map(|r| r.start()..=r.end()) {
                    let mut utf8 = [0u8; 4];
                    let utf8 = c.encode_utf8(&mut utf8).as_bytes();
                    out.union(self.literal(utf8, from.clone()));
                }
                out
            }
            HirKind::Concat(parts) => {
                let mut grown = from;
                for part in parts {
                    grown = self.walk(part, grown)?;
                }
                grown
            }
            HirKind::Alternation(branches) => {
                let mut out = Growing::default();
                for branch in branches {
                    out.union(self.walk(branch, from.clone())?);
                }
                out
            }
            HirKind::Repetition(r) => {
                // Turn by turn, until nothing grows, or a turn changes nothing.
                let mut out = Growing::default();
                let mut turn = from;
                for turns in 0.. {
                    if turns >= r.min {
                        out.union(turn.clone());
                    }
                    if r.max == Some(turns) || turn.is_whole() {
                        break;
                    }
                    if turns == MAX_TURNS {
                        self.open(turn)?;
                        break;
                    }
                    let next = self.walk(&r.sub, turn.clone())?;
                    if next == turn {
                        out.union(turn);
                        break;
                    }
                    turn = next;
                }
                out
            }
        })
    }

    /// The prefixes `from` followed by the bytes of a literal (its first three count).
    fn literal(&mut self, bytes: &[u8], from: Growing) -> Growing {
        let mut grown = from;
        for &b in bytes.iter().take(3) {
            let mut byte = [0u64; 4];
            set_bit(&mut byte, fold(b));
            grown = self.step(grown, &byte);
        }
        grown
    }

    /// The prefixes `from` followed by one of `bytes` (folded, as bits). Past
    /// [`MAX_LISTED`] new prefixes, those `from` are opened instead.
    fn step(&mut self, from: Growing, byte_bits: &[u64; 4]) -> Growing {
        let bytes: Vec<u8> = members(byte_bits).collect();
        let count = bytes.len();
        if from.two.len() * count > MAX_LISTED {
            from.two
                .iter()
                .for_each(|&ab| set_bit(&mut self.two, usize::from(ab)));
        } else {
            for &ab in &from.two {
                let [a, b] = ab.to_be_bytes();
                for &c in &bytes {
                    set_bit(&mut self.three, three_key(a, b, c));
                }
            }
        }
        let mut next = Growing::default();
        let ones: Vec<u8> = members(&from.one).collect();
        if ones.len() * count > MAX_LISTED {
            for &a in &ones {
                self.any_after(a);
            }
        } else {
            next.two = (ones.iter())
                .flat_map(|&a| bytes.iter().map(move |&c| u16::from_be_bytes([a, c])))
                .collect();
            next.two.sort_unstable();
        }
        if from.empty {
            next.one = *byte_bits;
        }
        next
    }
}

/// Prefixes of a match still growing as [`Beginnings::walk`] reads on, folded: the empty
/// one, those of one byte (bits), and those of two (`a << 8 | b`, in order). Whole ones
/// (three bytes, or any bytes after them) are already in the tables.
#[derive(Clone, Default, PartialEq)]
struct Growing {
    empty: bool,
    one: [u64; 4],
    two: Vec<u16>,
}

impl Growing {
    fn is_whole(&self) -> bool {
        !self.empty && self.one == [0; 4] && self.two.is_empty()
    }

    fn union(&mut self, other: Growing) {
        self.empty |= other.empty;
        for (w, o) in self.one.iter_mut().zip(other.one) {
            *w |= o;
        }
        self.two.extend(other.two);
        self.two.sort_unstable();
        self.two.dedup();
    }
}

/// The bytes set in `bits`.
fn members(bits: &[u64; 4]) -> impl Iterator<Item = u8> {
    (0..4u8).flat_map(move |w| {
        let mut word = bits[usize::from(w)];
        std::iter::from_fn(move || {
            let b = word.trailing_zeros() as u8;
            (word != 0).then(|| {
                word &= word - 1;
                w * 64 + b
            })
        })
    })
}

/// New prefixes past this many, from one step, are not listed: their beginnings are
/// opened instead. A class of 64 after two of them would list 4,096.
const MAX_LISTED: usize = 1024;
/// Turns of a repetition walked before what it may still add is opened.
const MAX_TURNS: u32 = 8;

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

    /// 3,000 texts of fewer than `max_pieces` of `pieces` (`|`-separated), in a random
    /// order that `seed` fixes.
    fn random_texts(pieces: &str, max_pieces: u64, seed: u64) -> impl Iterator<Item = String> {
        let pieces: Vec<&str> = pieces.split('|').collect();
        let mut next = crate::xorshift(seed);
        (0..3000).map(move |_| {
            let len = next() % max_pieces;
            (0..len)
                .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                .collect()
        })
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
        let pieces = " |\n|free| gift|FREE  Money|dear| friend|$$|$|-v-i-a|lottery| the \
            winner|1000| dollars|end|<!-- z|x_y|a b c d|é|zz|/";
        for hay in random_texts(pieces, 80, 0x5eed) {
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

    /// Wherever a pattern matches, the tables let a run begin: on every place of random
    /// texts, checked against each pattern run anchored there on its own.
    #[test]
    fn beginnings_let_every_match_through() {
        let mut patterns: Vec<String> = PATTERNS.iter().map(|p| p.to_string()).collect();
        patterns.extend(
            [
                r"(?-u)(?i)\b(?:x?y?)*z{2}",
                r"(?-u)(?:ab){0,2}c",
                r"(?-u)[\x00-\xff][a-c]{2}d",
                r"é(?:l|ll)e",
                r"(?-u)\$\s?\d",
                r"(?-u)(?:xy|zz)a",
            ]
            .map(String::from),
        );
        // Each alone: in a set, one pattern's prefixes could hide another's missing ones.
        let each: Vec<(Beginnings, regex_automata::meta::Regex)> = (trees(&patterns).iter())
            .map(|hir| {
                let tables = Beginnings::of(&[hir]).expect("listed");
                (
                    tables,
                    regex_automata::meta::Regex::builder()
                        .build_from_hir(hir)
                        .unwrap(),
                )
            })
            .collect();
        let pieces = "a|b|c|d|x|y|z|Z|ZZ|free|FREE|$|$ 1|1|é|ll|le|!|- |\n|v|i|A";
        for hay in random_texts(pieces, 24, 0xbe61) {
            let hay = hay.as_bytes();
            for at in 0..hay.len() {
                let input = regex_automata::Input::new(hay)
                    .range(at..)
                    .anchored(Anchored::Yes);
                for (tables, re) in &each {
                    if re.search_half(&input).is_some() {
                        assert!(tables.may_begin(&hay[at..]), "{hay:?} at {at}");
                    }
                }
            }
        }
    }

    /// Prefixes are folded, grow to three bytes, and are opened (any bytes after them)
    /// where a match may end or what follows is too much to list.
    #[test]
    fn beginnings_are_read_off_the_tree() {
        let tables = |pattern: &str| {
            let hir = super::super::set::parse(pattern).unwrap();
            Beginnings::of(&[&hir])
        };
        let check = |pattern: &str, yes: &[&str], no: &[&str]| {
            let t = tables(pattern).expect("listed");
            for y in yes {
                assert!(t.may_begin(y.as_bytes()), "{pattern} {y:?}");
            }
            for n in no {
                assert!(!t.may_begin(n.as_bytes()), "{pattern} {n:?}");
            }
        };
        check(r"(?-u)(?i)\bfree", &["FREE", "frex"], &["fry ", "ree"]);
        check(
            r"(?-u) *x",
            &["   ", "  x", " xq", "xqq"],
            &["  y", " yx", "yxx"],
        );
        check(r"(?-u)(?:ab){2}", &["aba", "ABA"], &["abc", "aab"]);
        check(
            r"(?-u)a(?:b|)(?:c?)*d",
            &["abc", "abd", "acc", "acd", "adq"],
            &["aee", "abe", "bcd"],
        );
        // Every byte after `a` is listed (128, folded), and after those too many: opened.
        check(
            r"(?-u)a[\x00-\xff]{3}",
            &["a\x00\x00", "aZz", "a\u{7f}q"],
            &["bzz"],
        );
        // A match may be empty: it begins anywhere.
        assert!(tables(r"(?-u)x?y?").is_none());
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
