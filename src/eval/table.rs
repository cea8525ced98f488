//! [`Table`]: learned counts in memory, kept the way the store keeps them, so that
//! evaluation scores through the production [`model`](crate::model) code unchanged.
//! [`Selection`]: a view of a table restricted to the features a selector kept.

use std::collections::{HashMap, HashSet};

use crate::features::Features;
use crate::model::{self, Class, CountSource, TokenCounts, Totals};

/// Token counts and class totals in a `HashMap`, changed by [`model::apply`] exactly as
/// the sled store changes its trees (zero entries removed, the vocabulary counted).
#[derive(Debug, Clone, Default)]
pub struct Table {
    tokens: HashMap<String, TokenCounts>,
    totals: Totals,
    /// The Bernoulli all-absent sums for one α, valid until the next lesson.
    absent: Option<(f64, [f64; 2])>,
}

impl Table {
    pub fn new() -> Table {
        Table::default()
    }

    /// Learns (`sign` 1) or forgets (`sign` −1) one message of `class`.
    pub fn learn(&mut self, features: &Features, class: Class, sign: i64) {
        let c = class.index();
        self.absent = None;
        self.totals.messages[c] = (self.totals.messages[c] as i64 + sign).max(0) as u64;
        for (feature, n) in features.iter() {
            let existed = self.tokens.contains_key(feature);
            if !existed && sign < 0 {
                // Forgetting what was never learned: the store's apply would clamp at
                // zero and write nothing; skip the allocation.
                continue;
            }
            let counts = match self.tokens.get_mut(feature) {
                Some(counts) => counts,
                None => self.tokens.entry(feature.to_string()).or_default(),
            };
            let (old_occ, old_msg) = (counts.occurrences[c], counts.messages[c]);
            model::apply(counts, class, n, sign);
            self.totals.occurrences[c] = (self.totals.occurrences[c] as i64
                + counts.occurrences[c] as i64
                - old_occ as i64) as u64;
            self.totals.presences[c] = (self.totals.presences[c] as i64 + counts.messages[c] as i64
                - old_msg as i64) as u64;
            match (existed, counts.is_zero()) {
                (false, false) => self.totals.vocabulary += 1,
                (true, true) => {
                    self.tokens.remove(feature);
                    self.totals.vocabulary = self.totals.vocabulary.saturating_sub(1);
                }
                (false, true) => {
                    self.tokens.remove(feature);
                }
                (true, false) => {}
            }
        }
    }

    /// Precomputes what the Bernoulli model needs for `alpha` (until the next lesson).
    pub fn prepare_bernoulli(&mut self, alpha: f64) {
        let sum = model::bernoulli_absent_sum(&self.totals, self.tokens.values(), alpha);
        self.absent = Some((alpha, sum));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &TokenCounts)> {
        self.tokens.iter().map(|(f, c)| (f.as_str(), c))
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

impl CountSource for Table {
    fn totals(&self) -> Totals {
        self.totals
    }

    fn token(&self, feature: &str) -> Option<TokenCounts> {
        self.tokens.get(feature).copied()
    }

    fn bernoulli_absent(&self, alpha: f64) -> Option<[f64; 2]> {
        self.absent.filter(|(a, _)| *a == alpha).map(|(_, sum)| sum)
    }
}

/// A table seen through a feature selection: the model sees only the kept features, and
/// totals summed over them, as it would a store that had only ever learned those.
#[derive(Debug)]
pub struct Selection<'t> {
    table: &'t Table,
    keep: HashSet<&'t str>,
    totals: Totals,
    absent: [f64; 2],
    alpha: f64,
}

impl<'t> Selection<'t> {
    pub fn new(table: &'t Table, keep: HashSet<&'t str>, alpha: f64) -> Selection<'t> {
        let mut totals = Totals {
            messages: table.totals.messages,
            ..Totals::default()
        };
        for f in &keep {
            if let Some(tc) = table.tokens.get(*f) {
                for c in 0..2 {
                    totals.occurrences[c] += tc.occurrences[c] as u64;
                    totals.presences[c] += tc.messages[c] as u64;
                }
                totals.vocabulary += 1;
            }
        }
        let absent = model::bernoulli_absent_sum(
            &totals,
            keep.iter().filter_map(|f| table.tokens.get(*f)),
            alpha,
        );
        Selection {
            table,
            keep,
            totals,
            absent,
            alpha,
        }
    }
}

impl CountSource for Selection<'_> {
    fn totals(&self) -> Totals {
        self.totals
    }

    fn token(&self, feature: &str) -> Option<TokenCounts> {
        if self.keep.contains(feature) {
            self.table.token(feature)
        } else {
            None
        }
    }

    fn bernoulli_absent(&self, alpha: f64) -> Option<[f64; 2]> {
        (alpha == self.alpha).then_some(self.absent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bag(words: &str) -> Features {
        words.split_whitespace().collect()
    }

    #[test]
    fn learning_keeps_totals_as_the_store_does() {
        // The same lessons as the store's own test, with the same totals expected.
        let mut t = Table::new();
        t.learn(&bag("buy buy now"), Class::Spam, 1);
        t.learn(&bag("now meeting"), Class::Ham, 1);
        let tot = t.totals();
        assert_eq!(
            (tot.messages, tot.occurrences, tot.presences, tot.vocabulary),
            ([1, 1], [2, 3], [2, 2], 3)
        );
        t.learn(&bag("buy buy now"), Class::Spam, -1);
        assert_eq!(t.token("buy"), None);
        let tot = t.totals();
        assert_eq!(
            (tot.messages, tot.occurrences, tot.vocabulary),
            ([1, 0], [2, 0], 2)
        );
        t.learn(&bag("buy buy now"), Class::Spam, 1);
        assert_eq!(t.token("buy").unwrap().occurrences, [0, 2]);
        assert_eq!(t.len() as u64, t.totals().vocabulary);
    }

    #[test]
    fn selection_sums_only_kept_features() {
        let mut t = Table::new();
        t.learn(&bag("a a b"), Class::Spam, 1);
        t.learn(&bag("b c"), Class::Ham, 1);
        let s = Selection::new(&t, ["a", "c"].into_iter().collect(), 1.0);
        assert_eq!(s.token("b"), None);
        let tot = s.totals();
        assert_eq!(
            (tot.occurrences, tot.presences, tot.vocabulary),
            ([1, 2], [1, 1], 2)
        );
    }
}
