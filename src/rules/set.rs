//! Which of a few dozen patterns match somewhere in a text, in one pass of regex-automata's
//! lazy DFA.
//!
//! A `RegexSet` runs the same DFA, but it also compiles what a set never uses (a reverse
//! automaton, the capture engines), and each call goes through its general search
//! machinery. Measured on spamnb's header, rawbody and URL sets: building took two to six
//! times as long, and searching a fifth longer.

use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::OnceLock;

use regex::bytes::{RegexSet, RegexSetBuilder};
use regex_automata::hybrid;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::pool::Pool;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{Input, MatchKind};
use regex_syntax::hir::Hir;
use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};

/// What a search needs of its own on each thread that runs it (a lazy DFA's cache).
pub(super) type PerThread<T> =
    Pool<T, Box<dyn Fn() -> T + Send + Sync + UnwindSafe + RefUnwindSafe>>;

pub(super) fn per_thread<T: Send>(
    make: impl Fn() -> T + Send + Sync + UnwindSafe + RefUnwindSafe + 'static,
) -> PerThread<T> {
    Pool::new(Box::new(make))
}

pub(super) struct PatternSet {
    dfa: DFA,
    /// Each thread's cache and result set: a search allocates nothing.
    scratch: PerThread<(Cache, regex_automata::PatternSet)>,
    patterns: Vec<String>,
    limits: (usize, usize),
    /// For a text on which the lazy DFA gives up (a byte it must quit on): the same
    /// patterns as a `RegexSet`, whose slower engines never do. Built on first need.
    fallback: OnceLock<Option<RegexSet>>,
}

/// A pattern's syntax tree, for byte regexes (it may match invalid UTF-8), or what is
/// wrong with it.
pub(super) fn parse(pattern: &str) -> Result<Hir, String> {
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .map_err(|e| e.to_string())
}

/// The lazy DFA of a set that asks only which patterns match (no capture groups, every
/// pattern's matches), with the rest of its configuration from `config`.
pub(super) fn set_dfa(
    hirs: &[&Hir],
    size_limit: usize,
    config: hybrid::dfa::Config,
) -> Result<DFA, String> {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .which_captures(thompson::WhichCaptures::None)
                .nfa_size_limit(Some(size_limit)),
        )
        .build_many_from_hir(hirs)
        .map_err(|e| e.to_string())?;
    DFA::builder()
        .configure(config.match_kind(MatchKind::All))
        .build_from_nfa(nfa)
        .map_err(|e| e.to_string())
}

/// The literals that every match of some pattern starts with, found within tight limits:
/// the search skips to them. Unlimited, finding them took two thirds of compiling a set,
/// and the long lists it finds for case-insensitive words make slow prefilters anyway.
fn prefilter(hirs: &[&Hir]) -> Option<Prefilter> {
    let mut extractor = Extractor::new();
    extractor
        .kind(ExtractKind::Prefix)
        .limit_class(4)
        .limit_repeat(2)
        .limit_literal_len(8)
        .limit_total(64);
    let mut prefixes = Seq::empty();
    for hir in hirs {
        prefixes.union(&mut extractor.extract(hir));
        if !prefixes.is_finite() {
            return None;
        }
    }
    prefixes.sort();
    prefixes.dedup();
    Prefilter::new(MatchKind::All, prefixes.literals()?)
}

impl std::fmt::Debug for PatternSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatternSet")
            .field("patterns", &self.patterns)
            .finish_non_exhaustive()
    }
}

impl PatternSet {
    /// The patterns (byte regexes: their syntax trees and their sources) as one set, or
    /// the reason they cannot be.
    pub(super) fn new(
        hirs: &[&Hir],
        patterns: Vec<String>,
        size_limit: usize,
        cache_limit: usize,
    ) -> Result<PatternSet, String> {
        let config = DFA::config()
            .cache_capacity(cache_limit)
            // Where every pattern begins with one of a few literals, the search skips to them.
            .prefilter(prefilter(hirs))
            // Rather than refuse a Unicode `\b`, quit at non-ASCII bytes.
            .unicode_word_boundary(true);
        let dfa = set_dfa(hirs, size_limit, config)?;
        let (for_scratch, len) = (dfa.clone(), patterns.len());
        Ok(PatternSet {
            scratch: per_thread(move || {
                let found = regex_automata::PatternSet::new(len);
                (for_scratch.create_cache(), found)
            }),
            dfa,
            patterns,
            limits: (size_limit, cache_limit),
            fallback: OnceLock::new(),
        })
    }

    pub(super) fn len(&self) -> usize {
        self.patterns.len()
    }

    /// Calls `hit` with the index of each pattern that matches somewhere in `hay`.
    pub(super) fn matches(&self, hay: &[u8], mut hit: impl FnMut(usize)) {
        {
            let mut scratch = self.scratch.get();
            let (cache, found) = &mut *scratch;
            found.clear();
            let searched = self
                .dfa
                .try_which_overlapping_matches(cache, &Input::new(hay), found);
            if searched.is_ok() {
                found.iter().for_each(|p| hit(p.as_usize()));
                return;
            }
        }
        let fallback = self.fallback.get_or_init(|| {
            RegexSetBuilder::new(&self.patterns)
                .size_limit(self.limits.0)
                .dfa_size_limit(self.limits.1)
                .build()
                .ok()
        });
        if let Some(set) = fallback {
            set.matches(hay).iter().for_each(hit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_of(patterns: &[String]) -> PatternSet {
        let hirs: Vec<Hir> = patterns.iter().map(|p| parse(p).unwrap()).collect();
        let hirs: Vec<&Hir> = hirs.iter().collect();
        PatternSet::new(&hirs, patterns.to_vec(), 1 << 20, 1 << 20).unwrap()
    }

    fn hits(set: &PatternSet, hay: &str) -> Vec<usize> {
        let mut out = Vec::new();
        set.matches(hay.as_bytes(), |p| out.push(p));
        out
    }

    #[test]
    fn names_every_pattern_that_matches_and_only_those() {
        let patterns: Vec<String> = [
            r"(?-u)(?i)\bfree\b",
            r"(?-u)^subject",
            r"(?-u)\$\d+",
            r"(?-u)a.*b",
            r"(?-u)x?",
        ]
        .map(String::from)
        .to_vec();
        let set = set_of(&patterns);
        assert_eq!(set.len(), 5);
        assert_eq!(hits(&set, "FREE $5 and a b"), [0, 2, 3, 4]);
        assert_eq!(hits(&set, "freedom, subject"), [4]);
        assert_eq!(hits(&set, "subject: free"), [0, 1, 4]);
        assert_eq!(hits(&set, ""), [4]);
    }

    /// A Unicode word boundary makes the lazy DFA quit on non-ASCII bytes; the set must
    /// still answer.
    #[test]
    fn a_text_the_dfa_gives_up_on_is_answered_by_the_fallback() {
        let patterns = vec![r"\bcafé\b".to_string(), r"(?-u)\bfree\b".to_string()];
        let set = set_of(&patterns);
        assert_eq!(hits(&set, "un café libre"), [0]);
        assert_eq!(hits(&set, "ein Café free"), [1]);
        assert!(set.fallback.get().is_some_and(Option::is_some));
    }
}
