//! Regex rules compiled to run together over the text they read (the body once, each
//! header once, each URL once), and `tflags multiple` rules counted past their first hit.

use std::collections::HashMap;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use regex_automata::meta::Regex as MetaRegex;
use regex_syntax::hir::{Hir, HirKind, Repetition};

use super::anchored::{AnchoredSet, admit, starts_of, union};
use super::set::{PatternSet, parse};
use super::{Kind, first_line, in_parallel, perl};

/// Patterns per set: one huge set makes the lazy DFA thrash its cache; many small ones
/// each scan the text again.
const SET_CHUNK: usize = 8;
/// Compiled size limit per pattern and set; SpamAssassin's obfuscation classes are large.
const SIZE_LIMIT: usize = 64 << 20;
/// Lazy DFA cache per set and thread.
const DFA_LIMIT: usize = 8 << 20;
/// Backtracking steps per fancy-regex match before it gives up (no hit).
const BACKTRACK_LIMIT: usize = 10_000;

/// One compiled regex rule inside a [`Matcher`].
#[derive(Debug, Clone)]
struct Entry {
    rule: usize,
    negate: bool,
    fancy: Option<fancy_regex::Regex>,
    /// The exact pattern behind a widened prefilter, and the fewest bytes it matches.
    exact: Option<(MetaRegex, usize)>,
}

/// Every regex rule that reads one text. Three ways in, cheapest first:
///
/// - plain strings: one Aho-Corasick automaton finds them all;
/// - patterns every match of which starts (or ends) with one of a few literals of three
///   bytes or more: one case-insensitive Aho-Corasick automaton over all those literals
///   says which patterns can match at all, and only those run, each on its own;
/// - the rest: run anchored from where they can begin ([`AnchoredSet`]) where that can be
///   told, the others in sets ([`PatternSet`]), a few dozen patterns each.
///
/// A set of hundreds of SpamAssassin patterns defeats the lazy DFA (the states
/// explode and it falls back to the PikeVM, 100× slower); most patterns name a literal,
/// and most literals never occur in a given message.
#[derive(Debug, Default)]
pub(super) struct Matcher {
    entries: Vec<Entry>,
    /// Each set, and the entry of each of its patterns.
    pub(super) sets: Vec<(PatternSet, Vec<usize>)>,
    /// The patterns whose beginnings can be told, run anchored where they can begin (see
    /// [`Anchored`]), in sets of a small matcher's size at most; the others are in `sets`.
    anchored: Vec<Anchored>,
    /// Plain strings, case-sensitive and ASCII-case-insensitive, with their entries.
    pub(super) literals: Vec<(AhoCorasick, Vec<usize>)>,
    /// Literal triggers (lowercase) and, per trigger, the triggered patterns.
    triggers: Option<(AhoCorasick, Vec<Vec<usize>>)>,
    /// Patterns run alone when triggered: (regex, entry, whether its triggers are
    /// prefixes, so that it is tried anchored at each trigger rather than on the whole text).
    pub(super) triggered: Vec<(MetaRegex, usize, bool)>,
    /// Rules whose pattern was too large to compile, with why: never run, and reported.
    pub(super) refused: Vec<(usize, String)>,
}

/// Patterns run anchored ([`AnchoredSet`]), with their entries, and the unanchored sets
/// for a text on which that gives up. Those are built only then: it almost never happens,
/// and building them took half the time of compiling spamnb's rules.
#[derive(Debug)]
struct Anchored {
    set: AnchoredSet,
    patterns: Vec<Pattern>,
    /// Patterns per unanchored set, as the matcher's others.
    chunk_size: usize,
    fallback: OnceLock<Vec<(PatternSet, Vec<usize>)>>,
}

/// A pattern for a set: its source, parsed once (parsing was a third of compiling
/// spamnb's rules when each stage did it again), and its entry.
#[derive(Debug)]
struct Pattern {
    source: String,
    hir: Hir,
    entry: usize,
}

/// A matcher under construction.
#[derive(Default)]
pub(super) struct MatcherBuilder {
    entries: Vec<Entry>,
    patterns: Vec<Pattern>,
    literal: [Vec<(String, usize)>; 2],
}

/// A pattern compiled to run alone (at trigger positions, or to confirm a widened
/// prefilter): bytes, no UTF-8 rules.
fn meta_regex(pattern: &Hir) -> Result<MetaRegex, String> {
    MetaRegex::builder()
        .configure(
            MetaRegex::config()
                .utf8_empty(false)
                .nfa_size_limit(Some(SIZE_LIMIT))
                .hybrid_cache_capacity(DFA_LIMIT),
        )
        .build_from_hir(pattern)
        .map_err(|e| first_line(&e.to_string()))
}

/// A pattern the automata cannot express, for fancy-regex: on bytes with ASCII classes, as
/// its prefilter reads them, and seeking. Seeking tries the backtracker only where a
/// regular approximation of the pattern can start. Without it, the backtracker starts at
/// every byte: SpamAssassin's `__RAND_HEADER` took 80 µs a message over the header block,
/// and the step budget, spent on doomed starts, hid some true hits (`__LOTSA_MONEY_04`:
/// 14 where there are 28 in 2,000 messages).
pub(super) fn backtracker(src: &str) -> Result<fancy_regex::Regex, String> {
    fancy_regex::RegexBuilder::new(src)
        .backtrack_limit(BACKTRACK_LIMIT)
        .bytes_mode(fancy_regex::BytesMode::Ascii)
        .seek(true)
        .build()
        .map_err(|e| e.to_string())
}

/// What `hir` must match for it to match at all: a repetition that ends it, its fewest
/// turns (`\${3,}` matches where `\${3}` does, `free.{0,40}` where `free` does). A matcher
/// asks only which patterns match, and a set's DFA reports a pattern again at each byte
/// a repetition goes on: a widened `[^/]{60}`, now `[^/]+`, did at every byte of every
/// host name, two reports in five steps of the URL rules.
fn least_match(hir: Hir) -> Hir {
    // Taken apart, not copied: patterns that end otherwise pass as they are.
    match hir.into_kind() {
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            max: Some(r.min),
            ..r
        }),
        HirKind::Capture(c) => least_match(*c.sub),
        HirKind::Alternation(branches) => {
            Hir::alternation(branches.into_iter().map(least_match).collect())
        }
        HirKind::Concat(mut parts) => {
            // What ends the pattern may shrink to nothing; then what came before ends it.
            while let Some(last) = parts.pop() {
                let least = least_match(last);
                if least.kind() != &HirKind::Empty {
                    parts.push(least);
                    break;
                }
            }
            Hir::concat(parts)
        }
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(literal) => Hir::literal(literal.0),
        HirKind::Class(class) => Hir::class(class),
        HirKind::Look(look) => Hir::look(look),
    }
}

/// Matchers with at most this many patterns are one set.
const SMALL_MATCHER: usize = 64;
/// Anchored tries of one pattern per text before one unanchored search replaces them.
const MAX_ANCHORED_RUNS: u8 = 4;
/// Fewer bytes than this make a trigger that fires on almost every message.
const MIN_TRIGGER: usize = 3;
/// More literals than this per pattern are not worth the automaton's size.
const MAX_TRIGGERS: usize = 64;

/// A counted repetition this long (`[^/]{60}`) multiplies the lazy DFA states of every
/// pattern that shares its set by its count: where a set runs unanchored, the pattern gets a
/// set of its own. spamnb's sixteen URL rules, run as one unanchored set, built and read it
/// twice as slowly for one such pattern.
const LONG_COUNT: u32 = 16;

fn counts_far(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Repetition(r) => {
            r.min >= LONG_COUNT || r.max.is_some_and(|m| m >= LONG_COUNT) || counts_far(&r.sub)
        }
        HirKind::Capture(c) => counts_far(&c.sub),
        HirKind::Concat(parts) | HirKind::Alternation(parts) => parts.iter().any(counts_far),
        _ => false,
    }
}

/// Literals of which every match of `pattern` contains one (a prefix set, else a suffix
/// set: the flag says which), lowercased, if there are few and long enough ones.
fn triggers(hir: &regex_syntax::hir::Hir) -> Option<(bool, Vec<Vec<u8>>)> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    // Of the prefix and the suffix sets, the one whose shortest literal is longest: short
    // literals fire on every message.
    let mut best: Option<(bool, Vec<Vec<u8>>)> = None;
    for (prefix, kind) in [(true, ExtractKind::Prefix), (false, ExtractKind::Suffix)] {
        let mut ex = Extractor::new();
        ex.kind(kind)
            .limit_class(8)
            .limit_repeat(4)
            .limit_literal_len(32)
            .limit_total(MAX_TRIGGERS);
        let seq = ex.extract(hir);
        let Some(lits) = seq.literals() else { continue };
        let mut out: Vec<Vec<u8>> = lits
            .iter()
            .map(|l| l.as_bytes().to_ascii_lowercase())
            .collect();
        out.sort();
        out.dedup();
        let shortest = |o: &[Vec<u8>]| o.iter().map(Vec::len).min().unwrap_or(0);
        if !out.is_empty()
            && out.len() <= MAX_TRIGGERS
            && shortest(&out) >= MIN_TRIGGER
            && best
                .as_ref()
                .is_none_or(|(_, b)| shortest(&out) > shortest(b))
        {
            best = Some((prefix, out));
        }
    }
    best
}

/// Plain strings longer than this are found by an NFA, not a DFA (see `build`).
const LONG_LITERAL: usize = 1024;

/// Sets of patterns, each with the entry of each of its patterns.
type Sets = Vec<(PatternSet, Vec<usize>)>;

/// `patterns` in sets of `chunk_size`, and the entries of those too large to compile even
/// alone, with why.
fn pattern_sets(patterns: &[Pattern], chunk_size: usize) -> (Sets, Vec<(usize, String)>) {
    let set = |chunk: &[Pattern]| {
        let hirs: Vec<&Hir> = chunk.iter().map(|p| &p.hir).collect();
        let sources = chunk.iter().map(|p| p.source.clone()).collect();
        let set = PatternSet::new(&hirs, sources, SIZE_LIMIT, DFA_LIMIT)?;
        Ok::<_, String>((set, chunk.iter().map(|p| p.entry).collect()))
    };
    let (mut sets, mut refused) = (Vec::new(), Vec::new());
    for chunk in patterns.chunks(chunk_size) {
        match set(chunk) {
            Ok(built) => sets.push(built),
            // A set can exceed a limit that its patterns alone do not: then one set per
            // pattern rather than lose rules. One that fails alone is reported.
            Err(_) => {
                for one in chunk {
                    match set(std::slice::from_ref(one)) {
                        Ok(built) => sets.push(built),
                        Err(e) => refused.push((one.entry, e)),
                    }
                }
            }
        }
    }
    (sets, refused)
}

/// A regex rule compiled on its own, before it joins a matcher: all of compiling that needs
/// no other rule, so that rules compile on every core.
pub(super) struct CompiledPattern {
    negate: bool,
    fancy: Option<fancy_regex::Regex>,
    exact: Option<(MetaRegex, usize)>,
    /// A plain string and whether it ignores case, else the pattern for a set.
    how: How,
}

enum How {
    Literal(String, bool),
    Pattern(String, Hir),
}

impl CompiledPattern {
    pub(super) fn new(t: perl::Translated, negate: bool) -> Result<CompiledPattern, String> {
        let fancy = t.fancy.as_deref().map(backtracker).transpose()?;
        let how = match t.literal {
            Some((lit, ci)) if fancy.is_none() => How::Literal(lit, ci),
            _ => {
                // Parsed alone, so that one bad pattern is reported and never breaks the
                // set it would join. Compiling waits for `build`, which knows how the
                // pattern will run.
                let hir = parse(&t.rust).map_err(|e| first_line(&e))?;
                How::Pattern(t.rust, least_match(hir))
            }
        };
        let exact = match &t.exact {
            Some(src) => {
                let hir = parse(src).map_err(|e| first_line(&e))?;
                // A widened `{60}` matches almost any text, and most are shorter than
                // the exact count: those need no confirming.
                let shortest = hir.properties().minimum_len().unwrap_or(0);
                Some((meta_regex(&hir)?, shortest))
            }
            None => None,
        };
        Ok(CompiledPattern {
            negate,
            fancy,
            exact,
            how,
        })
    }

    /// Whether the rule runs on the bounded backtracker.
    pub(super) fn backtracks(&self) -> bool {
        self.fancy.is_some()
    }

    /// Whether the rule runs as a plain string.
    pub(super) fn is_literal(&self) -> bool {
        matches!(self.how, How::Literal(..))
    }
}

impl MatcherBuilder {
    /// Adds `compiled` as the pattern of rule `rule`.
    pub(super) fn push(&mut self, rule: usize, compiled: CompiledPattern) {
        let entry = self.entries.len();
        match compiled.how {
            How::Literal(lit, ci) => self.literal[usize::from(ci)].push((lit, entry)),
            How::Pattern(source, hir) => self.patterns.push(Pattern { source, hir, entry }),
        }
        self.entries.push(Entry {
            rule,
            negate: compiled.negate,
            fancy: compiled.fancy,
            exact: compiled.exact,
        });
    }

    pub(super) fn build(mut self) -> Matcher {
        // A few dozen patterns make one healthy lazy DFA that reads the text once, cheaper
        // than trigger bookkeeping; hundreds make it explode, and triggers win.
        // (Finding triggers is a good part of compiling: only then.)
        let small = self.patterns.len() <= SMALL_MATCHER;
        let chunk_size = if small { SMALL_MATCHER } else { SET_CHUNK };
        let mut triggered_in = Vec::new();
        if !small {
            let found = in_parallel(std::mem::take(&mut self.patterns), |pattern| {
                let trigger = triggers(&pattern.hir).and_then(|(prefix, lits)| {
                    Some((meta_regex(&pattern.hir).ok()?, prefix, lits))
                });
                (pattern, trigger)
            });
            for (pattern, trigger) in found {
                match trigger {
                    Some((re, prefix, lits)) => {
                        triggered_in.push((re, pattern.entry, prefix, lits))
                    }
                    None => self.patterns.push(pattern),
                }
            }
        }
        // Anchored where the patterns' beginnings can be told: from each place where one
        // may begin, the DFA follows one beginning at a time, and most places are passed
        // over by their first bytes. With spamnb's rules that beat one unanchored pass
        // over every text, the longest (bodies, HTML, Received lines) most. The set takes
        // patterns in order while the bytes that may begin one of them anywhere stay few;
        // one that may begin almost anywhere (`[a-z]<!--`), or past that budget, runs
        // unanchored beside the others rather than keep them all from anchoring. In a big
        // matcher that is what triggers leave: SpamAssassin's `\bphrase` rules, mostly.
        // A set's states are the combinations of its patterns' progress from one place: the
        // 98 of SpamAssassin's body rules that anchor, as one set, wanted 17 MB of states
        // and cleared its cache over and over; as two sets, 7 MB in all. A first pass over
        // 2,000 bodies took 169 -> 92 ms, a warm one 156 -> 61 ms.
        let mut anchored = Vec::new();
        let (mut anchorable, mut starts) = (Vec::new(), [0u8; 256]);
        for p in std::mem::take(&mut self.patterns) {
            match starts_of(&p.hir) {
                Some(s) if admit(&mut starts, &s) => anchorable.push((p, s)),
                _ => self.patterns.push(p),
            }
        }
        let per_set = anchorable
            .len()
            .div_ceil(anchorable.len().div_ceil(SMALL_MATCHER).max(1));
        let mut anchorable = anchorable.into_iter().peekable();
        while anchorable.peek().is_some() {
            let (patterns, starts): (Vec<Pattern>, Vec<_>) =
                anchorable.by_ref().take(per_set).unzip();
            let mut all = [0u8; 256];
            for s in &starts {
                union(&mut all, s);
            }
            let hirs: Vec<&Hir> = patterns.iter().map(|p| &p.hir).collect();
            match AnchoredSet::new(&hirs, all, SIZE_LIMIT, DFA_LIMIT) {
                Some(set) => anchored.push(Anchored {
                    set,
                    patterns,
                    chunk_size,
                    fallback: OnceLock::new(),
                }),
                None => self.patterns.extend(patterns),
            }
        }
        // (Anchored runs die within a few bytes, counting or not; sets of a few
        // patterns hold no more than a few counts.)
        let (counting, rest) = std::mem::take(&mut self.patterns)
            .into_iter()
            .partition::<Vec<_>, _>(|p| small && counts_far(&p.hir));
        let (mut sets, mut refused) = pattern_sets(&rest, chunk_size);
        let (counting_sets, counting_refused) = pattern_sets(&counting, 1);
        sets.extend(counting_sets);
        refused.extend(counting_refused);
        let refused = refused
            .into_iter()
            .map(|(entry, why)| (self.entries[entry].rule, why))
            .collect();
        let mut literals = Vec::new();
        for (ci, lits) in self.literal.into_iter().enumerate() {
            if lits.is_empty() {
                continue;
            }
            // A DFA over one long string takes time in the square of its length to build
            // (100 KB: 20 s); an NFA does not, and long strings are rare.
            let long = lits.iter().any(|(l, _)| l.len() > LONG_LITERAL);
            let ac = AhoCorasick::builder()
                .ascii_case_insensitive(ci == 1)
                .kind(long.then_some(aho_corasick::AhoCorasickKind::ContiguousNFA))
                .build(lits.iter().map(|(l, _)| l));
            if let Ok(ac) = ac {
                literals.push((ac, lits.iter().map(|(_, e)| *e).collect()));
            }
        }
        let mut trigger_index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut fired: Vec<Vec<usize>> = Vec::new();
        let mut triggered = Vec::new();
        for (i, (re, entry, prefix, lits)) in triggered_in.into_iter().enumerate() {
            for lit in lits {
                let t = *trigger_index.entry(lit).or_insert_with(|| {
                    fired.push(Vec::new());
                    fired.len() - 1
                });
                fired[t].push(i);
            }
            triggered.push((re, entry, prefix));
        }
        let mut words: Vec<(Vec<u8>, usize)> = trigger_index.into_iter().collect();
        words.sort_by_key(|(_, t)| *t);
        let triggers = (!words.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .kind(Some(aho_corasick::AhoCorasickKind::DFA))
                    .build(words.iter().map(|(w, _)| w))
                    .ok()
            })
            .flatten()
            .map(|ac| (ac, fired));
        Matcher {
            entries: self.entries,
            sets,
            anchored,
            literals,
            triggers,
            triggered,
            refused,
        }
    }
}

impl Matcher {
    #[cfg(test)]
    pub(super) fn is_anchored(&self) -> bool {
        !self.anchored.is_empty()
    }

    /// Patterns per anchored set.
    #[cfg(test)]
    pub(super) fn anchored_sets(&self) -> Vec<usize> {
        self.anchored.iter().map(|a| a.patterns.len()).collect()
    }

    /// Whether the anchored runs gave up on some text, so that the unanchored sets were built.
    #[cfg(test)]
    pub(super) fn gave_up_anchoring(&self) -> bool {
        self.anchored.iter().any(|a| a.fallback.get().is_some())
    }

    /// The same matcher, its sets run unanchored: what anchored runs must agree with.
    #[cfg(test)]
    pub(super) fn unanchored(mut self) -> Matcher {
        for a in std::mem::take(&mut self.anchored) {
            self.sets.extend(pattern_sets(&a.patterns, a.chunk_size).0);
        }
        self
    }

    /// Patterns run as sets (anchored or not), for profiles.
    pub(super) fn set_patterns(&self) -> usize {
        let anchored: usize = self.anchored.iter().map(|a| a.patterns.len()).sum();
        anchored + self.sets.iter().map(|s| s.1.len()).sum::<usize>()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether entry `e`, whose prefilter matched `hay`, really matches.
    fn confirm(&self, e: usize, hay: &[u8]) -> bool {
        if let Some((re, shortest)) = &self.entries[e].exact {
            return hay.len() >= *shortest && re.is_match(hay);
        }
        match &self.entries[e].fancy {
            None => true,
            // The prefilter matched; the backtracker decides (a limit hit is no match).
            Some(re) => re.is_match(hay).unwrap_or(false),
        }
    }

    /// Marks in `matched` (one per entry) every pattern that matches `hay`.
    fn scan(&self, hay: &[u8], matched: &mut [bool]) {
        let mut fallbacks: Vec<&[(PatternSet, Vec<usize>)]> = Vec::new();
        for a in &self.anchored {
            // Anchored runs name a pattern at each place it matches: a pattern whose
            // prefilter matches and whose confirmation fails must not be confirmed again
            // (over the whole text) at each place. Allocated at the first: most texts have none.
            let mut tried: Vec<bool> = Vec::new();
            let done = a.set.matches(hay, |i| {
                let e = a.patterns[i].entry;
                if matched[e] {
                    return;
                }
                if tried.is_empty() {
                    tried = vec![false; a.patterns.len()];
                }
                if !std::mem::replace(&mut tried[i], true) {
                    matched[e] = self.confirm(e, hay);
                }
            });
            if done.is_err() {
                fallbacks.push(
                    a.fallback
                        .get_or_init(|| pattern_sets(&a.patterns, a.chunk_size).0),
                );
            }
        }
        for (set, entries) in fallbacks.into_iter().flatten().chain(&self.sets) {
            set.matches(hay, |i| {
                let e = entries[i];
                matched[e] = matched[e] || self.confirm(e, hay);
            });
        }
        for (ac, entries) in &self.literals {
            for m in ac.find_overlapping_iter(hay) {
                matched[entries[m.pattern().as_usize()]] = true;
            }
        }
        if let Some((ac, fired)) = &self.triggers {
            // Unanchored patterns run once per text, anchored ones at each trigger position
            // up to a few times, then once over the whole text: a common trigger word
            // must not cost a search per occurrence.
            // Allocated at the first trigger: most texts have none for most matchers.
            let mut tried: Vec<bool> = Vec::new();
            let mut anchored_runs: Vec<u8> = Vec::new();
            for m in ac.find_overlapping_iter(hay) {
                if tried.is_empty() {
                    tried = vec![false; self.triggered.len()];
                    anchored_runs = vec![0u8; self.triggered.len()];
                }
                for &i in &fired[m.pattern().as_usize()] {
                    let (re, e, prefix) = &self.triggered[i];
                    if matched[*e] || tried[i] {
                        continue;
                    }
                    let hit = if *prefix && anchored_runs[i] < MAX_ANCHORED_RUNS {
                        anchored_runs[i] += 1;
                        let input = regex_automata::Input::new(hay)
                            .range(m.start()..)
                            .anchored(regex_automata::Anchored::Yes)
                            .earliest(true);
                        re.search_half(&input).is_some()
                    } else {
                        tried[i] = true;
                        re.is_match(hay)
                    };
                    if hit {
                        // The confirmation reads the whole text: its answer stands for
                        // every later trigger of this pattern.
                        tried[i] = true;
                        matched[*e] = self.confirm(*e, hay);
                    }
                }
            }
        }
    }

    /// Scans every text in `hays` and adds each rule's hit to `hits`.
    pub(super) fn run<'h>(&self, hays: impl IntoIterator<Item = &'h [u8]>, hits: &mut [u32]) {
        if self.is_empty() {
            return;
        }
        // On the stack for the dozens of small matchers a message goes through.
        let (mut on_stack, mut on_heap) = ([false; SMALL_MATCHER], Vec::new());
        let matched = match on_stack.get_mut(..self.entries.len()) {
            Some(small) => small,
            None => {
                on_heap.resize(self.entries.len(), false);
                &mut on_heap[..]
            }
        };
        for hay in hays {
            self.scan(hay, matched);
        }
        for (e, &m) in self.entries.iter().zip(matched.iter()) {
            if m != e.negate {
                hits[e.rule] = 1;
            }
        }
    }
}

/// A `tflags multiple` rule that a meta rule reads: its hits are its matches, not one, as
/// SpamAssassin counts them, for meta arithmetic (`(A + B) > 3`). A feature counts once
/// whatever its hits, so a rule no meta reads is not counted.
#[derive(Debug)]
pub(super) struct Counted {
    pub(super) rule: usize,
    pub(super) kind: Kind,
    pub(super) pattern: CountPattern,
    pub(super) max_hits: u32,
}

#[derive(Debug)]
pub enum CountPattern {
    Automaton(regex::bytes::Regex),
    Backtracking(fancy_regex::Regex),
}

impl CountPattern {
    pub(super) fn new(t: &perl::Translated) -> Result<CountPattern, String> {
        if let Some(src) = &t.fancy {
            return backtracker(src).map(CountPattern::Backtracking);
        }
        regex::bytes::RegexBuilder::new(t.exact.as_ref().unwrap_or(&t.rust))
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(DFA_LIMIT)
            .build()
            .map(CountPattern::Automaton)
            .map_err(|e| first_line(&e.to_string()))
    }

    /// Matches in `hay`, no more than `max`.
    pub(super) fn count(&self, hay: &[u8], max: u32) -> u32 {
        let max = max as usize;
        let n = match self {
            CountPattern::Automaton(re) => re.find_iter(hay).take(max).count(),
            CountPattern::Backtracking(re) => re
                .find_iter(hay)
                .take(max)
                .take_while(Result::is_ok)
                .count(),
        };
        n as u32
    }
}

/// `multiple` in a rule's tflags, and its `maxhits=N` (SpamAssassin's default: no limit,
/// which here is a thousand).
pub(super) fn count_limit(tflags: Option<&String>) -> Option<u32> {
    let flags: Vec<&str> = tflags?.split_whitespace().collect();
    if !flags.contains(&"multiple") {
        return None;
    }
    Some(
        flags
            .iter()
            .find_map(|f| f.strip_prefix("maxhits=")?.parse().ok())
            .unwrap_or(1000),
    )
}
