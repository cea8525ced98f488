//! [`Table`]: learned counts in memory, kept the way the store keeps them, so that
//! evaluation scores through the production [`crate::model`] code unchanged.
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
            let was = *counts;
            model::apply(counts, class, n, sign);
            let now = *counts;
            self.totals.account(&was, &now);
            if now.is_zero() {
                self.tokens.remove(feature);
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

    /// The Bernoulli score by its definition: every vocabulary word, present or absent.
    fn bernoulli_by_hand(t: &Table, msg: &Features, alpha: f64) -> [f64; 2] {
        let tot = t.totals();
        let n = (tot.messages[0] + tot.messages[1]) as f64;
        let mut out = [0.0; 2];
        for (c, o) in out.iter_mut().enumerate() {
            let m = tot.messages[c] as f64;
            *o = (m / n).ln();
            for (f, tc) in t.iter() {
                let p = (tc.messages[c] as f64 + alpha) / (m + 2.0 * alpha);
                *o += if msg.count(f) > 0 {
                    p.ln()
                } else {
                    (1.0 - p).ln()
                };
            }
        }
        out
    }

    #[test]
    fn bernoulli_scoring_equals_its_definition() {
        use crate::model::{EventModel, ModelConfig, log_joint};
        let mut t = Table::new();
        for (words, class) in [
            ("cheap pills now now", Class::Spam),
            ("cheap offer click", Class::Spam),
            ("meeting notes now", Class::Ham),
            ("lunch meeting", Class::Ham),
            ("notes draft offer", Class::Ham),
        ] {
            t.learn(&bag(words), class, 1);
        }
        for alpha in [1.0, 0.1] {
            let cfg = ModelConfig {
                event_model: EventModel::Bernoulli,
                alpha,
                ..ModelConfig::default()
            };
            t.prepare_bernoulli(alpha);
            for msg in ["cheap now unknown", "meeting", "", "offer offer draft"] {
                let got = log_joint(&bag(msg), &t, &cfg);
                let want = bernoulli_by_hand(&t, &bag(msg), alpha);
                for c in 0..2 {
                    assert!(
                        (got[c] - want[c]).abs() < 1e-9,
                        "{msg:?} α={alpha}: {got:?} != {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn selection_scores_as_a_table_that_learned_only_the_kept_features() {
        use crate::model::{EventModel, ModelConfig, log_joint};
        let lessons = [
            ("a a b c", Class::Spam),
            ("b c d", Class::Ham),
            ("a d d e", Class::Ham),
        ];
        let keep = |w: &&str| ["a", "d", "e"].contains(w);
        let mut full = Table::new();
        let mut kept_only = Table::new();
        for (words, class) in lessons {
            full.learn(&bag(words), class, 1);
            kept_only.learn(&words.split_whitespace().filter(keep).collect(), class, 1);
        }
        let sel = Selection::new(&full, ["a", "d", "e"].into_iter().collect(), 0.5);
        for model in [
            EventModel::Multinomial,
            EventModel::BinaryMultinomial,
            EventModel::Bernoulli,
        ] {
            let cfg = ModelConfig {
                event_model: model,
                alpha: 0.5,
                ..ModelConfig::default()
            };
            kept_only.prepare_bernoulli(0.5);
            let msg = bag("a b d d z");
            let (got, want) = (
                log_joint(&msg, &sel, &cfg),
                log_joint(&msg, &kept_only, &cfg),
            );
            for c in 0..2 {
                assert!(
                    (got[c] - want[c]).abs() < 1e-9,
                    "{model:?}: {got:?} != {want:?}"
                );
            }
        }
    }

    #[test]
    fn bernoulli_is_refused_by_a_source_without_the_absent_sums() {
        use crate::model::{Decision, EventModel, ModelConfig, classify};
        /// A source like the store: counts, but no precomputed Bernoulli sums.
        struct StoreLike(Table);
        impl CountSource for StoreLike {
            fn totals(&self) -> Totals {
                self.0.totals()
            }
            fn token(&self, f: &str) -> Option<TokenCounts> {
                self.0.token(f)
            }
        }
        let mut t = Table::new();
        t.learn(&bag("cheap pills"), Class::Spam, 1);
        t.learn(&bag("meeting notes"), Class::Ham, 1);
        let cfg = ModelConfig {
            event_model: EventModel::Bernoulli,
            min_learned: 1,
            ..ModelConfig::default()
        };
        let v = classify(&bag("cheap pills"), &StoreLike(t.clone()), &cfg);
        assert_eq!(v.decision, Decision::Unsure);
        assert!(v.note.unwrap_or_default().contains("spamnb eval"));
        t.prepare_bernoulli(cfg.alpha);
        let v = classify(&bag("cheap pills"), &t, &cfg);
        assert!(v.note.is_none() && v.score > 0.0, "{v:?}");
    }
}
