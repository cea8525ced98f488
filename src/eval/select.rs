//! Feature selection: keep the K features that say most about the class (Manning et al.
//! ch. 13.5). Mutual information is computed in the event model being evaluated, as
//! McCallum & Nigam did: over word occurrences for the multinomial, over per-message
//! presences for the binary multinomial, over messages for the Bernoulli.

use std::collections::HashSet;

use serde::Serialize;

use super::table::Table;
use crate::model::{CountSource, EventModel};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Selector {
    /// Mutual information between feature and class, in the event model evaluated.
    Mi,
    /// χ² of feature presence against class, over messages.
    Chi2,
    /// Number of messages the feature occurs in.
    Frequency,
}

/// The `k` best features of `table` by `selector`; ties go to the name, so the choice is
/// the same on every run.
pub fn select(table: &Table, selector: Selector, model: EventModel, k: usize) -> HashSet<&str> {
    let totals = table.totals();
    let mut scored: Vec<(f64, &str)> = table
        .iter()
        .map(|(f, tc)| {
            let score = match selector {
                Selector::Mi => {
                    let (n, class) = match model {
                        EventModel::Multinomial => (tc.occurrences, totals.occurrences),
                        EventModel::BinaryMultinomial => (tc.messages, totals.presences),
                        EventModel::Bernoulli => (tc.messages, totals.messages),
                    };
                    mutual_information(n, class)
                }
                Selector::Chi2 => chi_square(tc.messages, totals.messages),
                Selector::Frequency => (tc.messages[0] as f64) + tc.messages[1] as f64,
            };
            (score, f)
        })
        .collect();
    if k < scored.len() {
        let by = |a: &(f64, &str), b: &(f64, &str)| b.0.total_cmp(&a.0).then(a.1.cmp(b.1));
        scored.select_nth_unstable_by(k, by);
        scored.truncate(k);
    }
    scored.into_iter().map(|(_, f)| f).collect()
}

/// I(U;C) for a 2×2 table: `with[c]` events of class c that are this feature, out of
/// `all[c]` events of class c (Manning et al. eq. 13.17).
pub fn mutual_information(with: [u32; 2], all: [u64; 2]) -> f64 {
    let n11 = with[1] as f64;
    let n10 = with[0] as f64;
    let n01 = (all[1] as f64 - n11).max(0.0);
    let n00 = (all[0] as f64 - n10).max(0.0);
    let n = n11 + n10 + n01 + n00;
    if n == 0.0 {
        return 0.0;
    }
    let term = |nij: f64, row: f64, col: f64| {
        if nij == 0.0 {
            0.0
        } else {
            nij / n * (n * nij / (row * col)).log2()
        }
    };
    term(n11, n11 + n10, n11 + n01)
        + term(n01, n01 + n00, n11 + n01)
        + term(n10, n11 + n10, n10 + n00)
        + term(n00, n01 + n00, n10 + n00)
}

/// χ² of the 2×2 table of messages with and without the feature, per class (eq. 13.19).
pub fn chi_square(with: [u32; 2], all: [u64; 2]) -> f64 {
    let n11 = with[1] as f64;
    let n10 = with[0] as f64;
    let n01 = (all[1] as f64 - n11).max(0.0);
    let n00 = (all[0] as f64 - n10).max(0.0);
    let n = n11 + n10 + n01 + n00;
    let d = (n11 + n01) * (n11 + n10) * (n10 + n00) * (n01 + n00);
    if d == 0.0 {
        0.0
    } else {
        n * (n11 * n00 - n10 * n01).powi(2) / d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Features;
    use crate::model::Class;

    #[test]
    fn manning_poultry_example() {
        // Manning et al. Example 13.3: export/poultry, MI ≈ 0.0001105; χ² ≈ 284.
        let with = [27_652, 49];
        let all = [27_652 + 774_106, 49 + 141];
        let mi = mutual_information(with, all);
        assert!((mi - 0.0001105).abs() < 2e-7, "{mi}");
        let chi = chi_square(with, all);
        assert!((chi - 284.0).abs() < 1.0, "{chi}");
    }

    #[test]
    fn selects_the_telling_features() {
        let mut t = Table::new();
        for _ in 0..5 {
            t.learn(
                &"viagra the".split(' ').collect::<Features>(),
                Class::Spam,
                1,
            );
            t.learn(
                &"meeting the".split(' ').collect::<Features>(),
                Class::Ham,
                1,
            );
        }
        t.learn(&"rare".split(' ').collect::<Features>(), Class::Ham, 1);
        for sel in [Selector::Mi, Selector::Chi2] {
            let kept = select(&t, sel, EventModel::Bernoulli, 2);
            assert_eq!(kept, ["viagra", "meeting"].into_iter().collect(), "{sel:?}");
        }
        let kept = select(&t, Selector::Frequency, EventModel::Multinomial, 1);
        assert_eq!(kept, ["the"].into_iter().collect());
    }
}
