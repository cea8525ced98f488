//! The figures an evaluation reports: the confusion matrix and what follows from it
//! (precision, recall, F1, accuracy, TREC's hm%, sm% and lam%), and the ranking figures
//! that need only the scores (1−AUC%, spam caught at a given ham loss, the threshold that
//! keeps ham loss at a target). Spam is the positive class throughout.

use serde::Serialize;

use crate::model::{Class, Decision};

/// Decisions against truth. An unsure verdict is not a spam verdict: it reaches the
/// inbox, so it counts with ham decisions here, and is also counted on its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Spam called spam.
    pub tp: u64,
    /// Ham called spam: the costly mistake.
    pub fp: u64,
    /// Ham not called spam.
    pub tn: u64,
    /// Spam not called spam.
    #[serde(rename = "fn")]
    pub fn_: u64,
    /// Unsure verdicts, per true class (ham, spam); already inside tn and fn.
    pub unsure: [u64; 2],
}

impl Confusion {
    pub fn add(&mut self, truth: Class, decision: Decision) {
        match (truth, decision) {
            (Class::Spam, Decision::Spam) => self.tp += 1,
            (Class::Ham, Decision::Spam) => self.fp += 1,
            (Class::Ham, _) => self.tn += 1,
            (Class::Spam, _) => self.fn_ += 1,
        }
        if decision == Decision::Unsure {
            self.unsure[truth.index()] += 1;
        }
    }

    pub fn merge(&mut self, other: &Confusion) {
        self.tp += other.tp;
        self.fp += other.fp;
        self.tn += other.tn;
        self.fn_ += other.fn_;
        self.unsure[0] += other.unsure[0];
        self.unsure[1] += other.unsure[1];
    }

    pub fn ham(&self) -> u64 {
        self.fp + self.tn
    }

    pub fn spam(&self) -> u64 {
        self.tp + self.fn_
    }

    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.spam())
    }

    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }

    pub fn accuracy(&self) -> f64 {
        ratio(self.tp + self.tn, self.ham() + self.spam())
    }

    /// Ham misclassification rate: ham called spam, as a fraction of ham.
    pub fn hm(&self) -> f64 {
        ratio(self.fp, self.ham())
    }

    /// Spam misclassification rate: spam not called spam, as a fraction of spam.
    pub fn sm(&self) -> f64 {
        ratio(self.fn_, self.spam())
    }

    /// TREC's logistic average misclassification: the two rates averaged on the logit
    /// scale, so that neither can be bought cheaply with the other. A rate of 0 or 1 is
    /// moved half a message inwards, as the TREC tools do, to keep the logit finite.
    pub fn lam(&self) -> f64 {
        let logit = |bad: u64, all: u64| {
            let (b, a) = (bad as f64, all.max(1) as f64);
            let p = if bad == 0 || bad >= all {
                (b + 0.5) / (a + 1.0)
            } else {
                b / a
            };
            (p / (1.0 - p)).ln()
        };
        let l = (logit(self.fp, self.ham()) + logit(self.fn_, self.spam())) / 2.0;
        1.0 / (1.0 + (-l).exp())
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Area under the ROC curve: the chance that a random spam scores above a random ham,
/// a tie counting one half. `scores` pairs each score with the true class.
pub fn auc(scores: &[(f64, Class)]) -> f64 {
    let mut sorted: Vec<(f64, Class)> = scores.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut ham_below, mut pairs_won) = (0u64, 0.0f64);
    let mut i = 0;
    while i < sorted.len() {
        // One group of equal scores at a time, so ties count a half.
        let mut j = i;
        let (mut ham_here, mut spam_here) = (0u64, 0u64);
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            match sorted[j].1 {
                Class::Ham => ham_here += 1,
                Class::Spam => spam_here += 1,
            }
            j += 1;
        }
        pairs_won += spam_here as f64 * (ham_below as f64 + ham_here as f64 / 2.0);
        ham_below += ham_here;
        i = j;
    }
    let spam = sorted.iter().filter(|s| s.1 == Class::Spam).count() as f64;
    let ham = ham_below as f64;
    if spam == 0.0 || ham == 0.0 {
        1.0
    } else {
        pairs_won / (spam * ham)
    }
}

/// The lowest log-odds threshold (`score >= threshold` is spam) that calls at most
/// `ham_loss` (a fraction) of the ham in `scores` spam: halfway between the highest ham
/// score allowed through and the next one above it, so a little noise does not tip it.
pub fn threshold_for(scores: &[(f64, Class)], ham_loss: f64) -> f64 {
    let (ham, allowed) = ham_allowed(scores, ham_loss);
    if allowed >= ham.len() {
        return f64::NEG_INFINITY;
    }
    // ham[allowed] must stay below the threshold; ham[..allowed] may be above it.
    let below = ham[allowed];
    let above = if allowed == 0 {
        below + 1.0
    } else {
        ham[allowed - 1]
    };
    if above > below {
        below + (above - below) / 2.0
    } else {
        next_up(below)
    }
}

/// The ham scores in `scores`, highest first, and how many of them `ham_loss` lets be lost.
fn ham_allowed(scores: &[(f64, Class)], ham_loss: f64) -> (Vec<f64>, usize) {
    let mut ham: Vec<f64> = scores
        .iter()
        .filter(|s| s.1 == Class::Ham)
        .map(|s| s.0)
        .collect();
    ham.sort_by(|a, b| b.total_cmp(a));
    let allowed = (ham_loss * ham.len() as f64 + 1e-9).floor() as usize;
    (ham, allowed)
}

/// The highest log-odds threshold (`score <= threshold` is ham) that calls at most
/// `spam_leak` (a fraction) of the spam in `scores` ham; halfway between scores as above.
pub fn ham_threshold_for(scores: &[(f64, Class)], spam_leak: f64) -> f64 {
    let mut spam: Vec<f64> = scores
        .iter()
        .filter(|s| s.1 == Class::Spam)
        .map(|s| s.0)
        .collect();
    if spam.is_empty() {
        return f64::INFINITY;
    }
    spam.sort_by(|a, b| a.total_cmp(b));
    let allowed = (spam_leak * spam.len() as f64 + 1e-9).floor() as usize;
    if allowed >= spam.len() {
        return f64::INFINITY;
    }
    // spam[allowed] must stay above the threshold; spam[..allowed] may be at or below it.
    let above = spam[allowed];
    let below = if allowed == 0 {
        above - 1.0
    } else {
        spam[allowed - 1]
    };
    if above > below {
        below + (above - below) / 2.0
    } else {
        next_down(above)
    }
}

fn next_down(x: f64) -> f64 {
    if x.is_finite() {
        x - x.abs().max(1.0) * 1e-12
    } else {
        x
    }
}

fn next_up(x: f64) -> f64 {
    if x.is_finite() {
        x + x.abs().max(1.0) * 1e-12
    } else {
        x
    }
}

/// Fraction of ham and of spam at or above `threshold`.
pub fn rates_at(scores: &[(f64, Class)], threshold: f64) -> (f64, f64) {
    let mut n = [0u64; 2];
    let mut above = [0u64; 2];
    for &(s, c) in scores {
        n[c.index()] += 1;
        if s >= threshold {
            above[c.index()] += 1;
        }
    }
    (ratio(above[0], n[0]), ratio(above[1], n[1]))
}

/// Fraction of spam caught when the threshold lets at most `ham_loss` of the ham be lost,
/// the threshold being chosen on these very scores (the ROC curve read at that point).
pub fn spam_caught_at(scores: &[(f64, Class)], ham_loss: f64) -> f64 {
    let (ham, allowed) = ham_allowed(scores, ham_loss);
    // Every spam above the highest ham that must be kept is caught by a threshold just
    // above that ham, which loses no more: not [`threshold_for`]'s, which leaves a margin
    // for mail yet to come and would miss the spam in it.
    let kept = ham.get(allowed).copied();
    let spam: Vec<f64> = scores
        .iter()
        .filter(|s| s.1 == Class::Spam)
        .map(|s| s.0)
        .collect();
    let caught = spam.iter().filter(|&&s| kept.is_none_or(|h| s > h)).count();
    ratio(caught as u64, spam.len() as u64)
}

/// The ham-loss points of the ROC curve that are reported.
pub const HAM_LOSS_POINTS: [f64; 3] = [0.001, 0.005, 0.01];

/// Every figure for one fold, or for all folds pooled.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    pub messages: u64,
    pub confusion: Confusion,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub accuracy: f64,
    /// Percentages, as TREC reports them.
    pub hm_pct: f64,
    pub sm_pct: f64,
    pub lam_pct: f64,
    pub one_minus_auc_pct: f64,
    /// Spam caught (%) at 0.1%, 0.5% and 1% ham loss.
    pub caught_at_pct: [f64; 3],
}

impl Figures {
    pub fn new(confusion: Confusion, scores: &[(f64, Class)]) -> Figures {
        Figures {
            messages: confusion.ham() + confusion.spam(),
            confusion,
            precision: confusion.precision(),
            recall: confusion.recall(),
            f1: confusion.f1(),
            accuracy: confusion.accuracy(),
            hm_pct: 100.0 * confusion.hm(),
            sm_pct: 100.0 * confusion.sm(),
            lam_pct: 100.0 * confusion.lam(),
            one_minus_auc_pct: 100.0 * (1.0 - auc(scores)),
            caught_at_pct: HAM_LOSS_POINTS.map(|h| 100.0 * spam_caught_at(scores, h)),
        }
    }

    /// The unweighted mean of each figure over `all` (macro-averaging); the confusion
    /// matrix is summed, since a mean of counts means little.
    pub fn macro_average(all: &[Figures]) -> Figures {
        let n = all.len().max(1) as f64;
        let mean = |f: &dyn Fn(&Figures) -> f64| all.iter().map(f).sum::<f64>() / n;
        let mut confusion = Confusion::default();
        for f in all {
            confusion.merge(&f.confusion);
        }
        Figures {
            messages: all.iter().map(|f| f.messages).sum(),
            confusion,
            precision: mean(&|f| f.precision),
            recall: mean(&|f| f.recall),
            f1: mean(&|f| f.f1),
            accuracy: mean(&|f| f.accuracy),
            hm_pct: mean(&|f| f.hm_pct),
            sm_pct: mean(&|f| f.sm_pct),
            lam_pct: mean(&|f| f.lam_pct),
            one_minus_auc_pct: mean(&|f| f.one_minus_auc_pct),
            caught_at_pct: [0, 1, 2].map(|i| mean(&|f| f.caught_at_pct[i])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn confusion(tp: u64, fp: u64, tn: u64, fn_: u64) -> Confusion {
        Confusion {
            tp,
            fp,
            tn,
            fn_,
            unsure: [0, 0],
        }
    }

    #[test]
    fn figures_from_a_hand_computed_matrix() {
        // 40 spam: 30 caught, 10 missed; 60 ham: 2 lost, 58 kept.
        let c = confusion(30, 2, 58, 10);
        assert!(close(c.precision(), 30.0 / 32.0));
        assert!(close(c.recall(), 0.75));
        assert!(close(
            c.f1(),
            2.0 * (30.0 / 32.0) * 0.75 / (30.0 / 32.0 + 0.75)
        ));
        assert!(close(c.accuracy(), 0.88));
        assert!(close(c.hm(), 2.0 / 60.0));
        assert!(close(c.sm(), 0.25));
        // logit(2/60) = ln(2/58), logit(0.25) = ln(1/3); lam = invlogit of their mean.
        let l = ((2.0f64 / 58.0).ln() + (1.0f64 / 3.0).ln()) / 2.0;
        assert!(close(c.lam(), 1.0 / (1.0 + (-l).exp())), "{}", c.lam());
    }

    #[test]
    fn unsure_counts_as_not_spam() {
        let mut c = Confusion::default();
        c.add(Class::Spam, Decision::Unsure);
        c.add(Class::Ham, Decision::Unsure);
        c.add(Class::Ham, Decision::Spam);
        assert_eq!(
            c,
            Confusion {
                tp: 0,
                fp: 1,
                tn: 1,
                fn_: 1,
                unsure: [1, 1]
            }
        );
    }

    #[test]
    fn manning_micro_and_macro_example() {
        // Manning, Raghavan & Schütze, Table 13.8: two tables with precision 0.5 and 0.9.
        let one = confusion(10, 10, 970, 10);
        let two = confusion(90, 10, 890, 10);
        assert!(close(one.precision(), 0.5) && close(two.precision(), 0.9));
        let figures = [Figures::new(one, &[]), Figures::new(two, &[])];
        assert!(close(Figures::macro_average(&figures).precision, 0.7));
        let mut pooled = one;
        pooled.merge(&two);
        assert!(close(pooled.precision(), 100.0 / 120.0));
        assert!((pooled.precision() - 0.83).abs() < 0.005);
    }

    #[test]
    fn auc_counts_ties_as_half() {
        use Class::{Ham, Spam};
        assert!(close(auc(&[(1.0, Ham), (2.0, Spam)]), 1.0));
        assert!(close(auc(&[(2.0, Ham), (1.0, Spam)]), 0.0));
        assert!(close(auc(&[(1.0, Ham), (1.0, Spam)]), 0.5));
        // Pairs: s3>h1, s3>h2; s2>h1, s2=h2 → (1 + 1 + 1 + 0.5) / 4.
        let s = [(1.0, Ham), (2.0, Ham), (2.0, Spam), (3.0, Spam)];
        assert!(close(auc(&s), 3.5 / 4.0), "{}", auc(&s));
    }

    #[test]
    fn threshold_keeps_ham_loss_at_target() {
        use Class::{Ham, Spam};
        // 1000 ham scored 0..999, spam scored 500..1499.
        let mut s: Vec<(f64, Class)> = (0..1000).map(|i| (i as f64, Ham)).collect();
        s.extend((500..1500).map(|i| (i as f64, Spam)));
        // 0.1% of 1000 ham: one may be lost, so 998 must be below and 999 may be above.
        let t = threshold_for(&s, 0.001);
        assert!(t > 998.0 && t <= 999.0, "{t}");
        let (hm, caught) = rates_at(&s, t);
        assert!(close(hm, 0.001) && close(caught, 0.501), "{hm} {caught}");
        assert!(close(spam_caught_at(&s, 0.01), 0.51));
        // No ham may be lost: the threshold clears the highest ham.
        assert!(threshold_for(&s, 0.0) > 999.0);
        // 1% of 1000 spam may be called ham: 500..=509 at or below, 510 above.
        let h = ham_threshold_for(&s, 0.01);
        assert!((509.0..510.0).contains(&h), "{h}");
    }

    /// "Spam caught at 0.1% ham loss" was read at `threshold_for`'s threshold, halfway to
    /// the next ham (or 1 above the highest), and missed the spam in that margin: on spam-2
    /// against hard-ham-1 it said 87.5% where the ROC curve says 89.3%.
    #[test]
    fn spam_caught_at_reads_the_roc_curve() {
        use Class::{Ham, Spam};
        let ham = (0..1000).map(|i| (i as f64, Ham));
        // 999.2 is above every ham: caught at no ham loss. 998.7 is above all but the
        // highest (999): caught at 0.1%. 998.0 is level with the highest ham kept at 0.1%.
        let s: Vec<(f64, Class)> = ham
            .chain([(999.2, Spam), (998.7, Spam), (998.0, Spam)])
            .collect();
        for (ham_loss, caught) in [(0.0, 1.0 / 3.0), (0.001, 2.0 / 3.0), (0.002, 1.0)] {
            let got = spam_caught_at(&s, ham_loss);
            assert!(close(got, caught), "at {ham_loss}: {got}, not {caught}");
        }
        // No ham: every spam is caught.
        assert!(close(spam_caught_at(&[(-5.0, Spam)], 0.001), 1.0));
    }
}
