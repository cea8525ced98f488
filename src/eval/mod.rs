//! Evaluation in memory: the mail is parsed and tokenized once into [`Corpus`], then
//! counted into [`Table`]s and scored through the production [`model::classify`], so
//! that every figure is the figure of the real product. Modes: stratified K-fold
//! cross-validation ([`cross_validate`]), a fixed train/test split ([`split`]), and TREC's
//! online order ([`online`]). Thresholds are only ever chosen on validation folds.
//!
//! - [`metrics`]: confusion matrix, TREC figures, AUC, thresholds.
//! - [`select`]: feature selection (MI, χ², frequency).
//! - [`table`]: the in-memory [`crate::model::CountSource`].
//! - [`plot`]: the SVG of a sweep.

pub mod metrics;
pub mod plot;
pub mod select;
pub mod table;

use rayon::prelude::*;
use serde::Serialize;

use crate::features::{Extractor, Readings};
use crate::mailbox::{self, Unreadable};
use crate::model::{self, Class, CountSource, Decision, EventModel, ModelConfig};
use metrics::{Confusion, Figures};
use select::Selector;
use table::{Selection, Table};

/// One message, reduced to what evaluation needs.
#[derive(Debug, Clone)]
pub struct Item {
    /// Learned as `readings.learned`, scored as the engine scores them.
    pub readings: Readings,
    pub class: Class,
    /// The rules scored as decisive that hit: they overrule the words here as in the engine.
    pub decisive: Vec<(String, f64)>,
    /// The Date header as Unix seconds, for the online order.
    pub date: Option<i64>,
}

/// Labelled raw mail, read once.
#[derive(Debug, Default)]
pub struct Mail {
    pub raw: Vec<Vec<u8>>,
    /// How each message is named in output (its path, or `MBOX#N`).
    pub names: Vec<String>,
    pub classes: Vec<Class>,
}

impl Mail {
    /// Reads `spam` and `ham` inputs (files, Maildirs, folders, mboxes) in the order given.
    pub fn read(
        spam: &[std::path::PathBuf],
        ham: &[std::path::PathBuf],
    ) -> (Mail, Vec<Unreadable>) {
        let mut mail = Mail::default();
        let mut problems = Vec::new();
        for (paths, class) in [(spam, Class::Spam), (ham, Class::Ham)] {
            let inputs = mailbox::expand(paths);
            mail.add(&inputs, class, &mut problems);
        }
        (mail, problems)
    }

    fn add(&mut self, inputs: &[mailbox::Input], class: Class, problems: &mut Vec<Unreadable>) {
        for (name, read) in mailbox::read_all_mail(inputs) {
            match read {
                Ok(raw) => {
                    self.raw.push(raw);
                    self.names.push(name);
                    self.classes.push(class);
                }
                Err(e) => problems.push(e),
            }
        }
    }

    /// Parses and tokenizes every message once, in parallel, the way the engine does.
    pub fn corpus(&self, extractor: &Extractor) -> Corpus {
        let items = self
            .raw
            .par_iter()
            .zip(self.classes.par_iter())
            .map(|(raw, &class)| {
                let readings = extractor.readings(raw);
                let decisive = extractor.rules.as_ref().map_or_else(Vec::new, |rules| {
                    rules.decisive(&readings.learned.rule_hits())
                });
                Item {
                    readings,
                    class,
                    decisive,
                    date: date_of(raw),
                }
            })
            .collect();
        Corpus { items }
    }
}

/// The Date header as Unix seconds, read from the header block alone.
fn date_of(raw: &[u8]) -> Option<i64> {
    let parsed = mail_parser::MessageParser::new().parse_headers(raw)?;
    parsed.date().map(|d| d.to_timestamp())
}

#[derive(Debug, Default)]
pub struct Corpus {
    pub items: Vec<Item>,
}

impl Corpus {
    fn table_of<'a>(&self, indices: impl Iterator<Item = &'a usize>) -> Table {
        let mut t = Table::new();
        for &i in indices {
            t.learn(&self.items[i].readings.learned, self.items[i].class, 1);
        }
        t
    }
}

/// What is evaluated: an event model with its α and thresholds, and a feature selection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setting {
    pub model: ModelConfig,
    pub selector: Selector,
    /// Features kept; `None` keeps all.
    pub vocab: Option<usize>,
}

impl Setting {
    pub fn label(&self) -> String {
        let vocab = self.vocab.map_or("all".to_string(), |k| k.to_string());
        format!(
            "{} α={} vocab={vocab}",
            self.model.event_model.name(),
            self.model.alpha
        )
    }
}

/// A message's verdict, reduced.
#[derive(Debug, Clone, Copy)]
pub struct Scored {
    pub index: usize,
    pub class: Class,
    pub score: f64,
    pub decision: Decision,
}

impl Scored {
    /// Message `index` of `corpus`, and the verdict it got.
    fn of(corpus: &Corpus, index: usize, verdict: &model::Verdict) -> Scored {
        Scored {
            index,
            class: corpus.items[index].class,
            score: verdict.score,
            decision: verdict.decision,
        }
    }
}

/// `item`'s verdict as the engine would give it against `counts`.
fn verdict(item: &Item, counts: &dyn CountSource, cfg: &ModelConfig) -> model::Verdict {
    let mut v = model::classify_readings(&item.readings, counts, cfg);
    v.overruled(&item.decisive);
    v
}

/// Scores `indices` against `table` (trained without them) under `setting`.
fn score_with(
    corpus: &Corpus,
    table: &mut Table,
    setting: &Setting,
    indices: &[usize],
) -> Vec<Scored> {
    let cfg = &setting.model;
    let score = |source: &dyn CountSource| -> Vec<Scored> {
        indices
            .iter()
            .map(|&i| Scored::of(corpus, i, &verdict(&corpus.items[i], source, cfg)))
            .collect()
    };
    match setting.vocab {
        Some(k) if k < table.len() => {
            let keep = select::select(table, setting.selector, cfg.event_model, k);
            score(&Selection::new(table, keep, cfg.alpha))
        }
        _ => {
            if cfg.event_model == EventModel::Bernoulli {
                table.prepare_bernoulli(cfg.alpha);
            }
            score(table)
        }
    }
}

/// A small seeded generator (SplitMix64): fold assignment must be the same on every run
/// and every machine for a given seed, and needs nothing stronger.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// Stratified fold of each message: each class shuffled under `seed` and dealt round the
/// `k` folds in turn, spam continuing where ham stopped, so every fold gets its share of
/// each class and the folds differ in size by at most one.
pub fn assign_folds(classes: &[Class], k: usize, seed: u64) -> Vec<usize> {
    let k = k.max(1);
    let mut rng = Rng::new(seed);
    let mut fold = vec![0; classes.len()];
    let mut dealt = 0;
    for class in [Class::Ham, Class::Spam] {
        let mut members: Vec<usize> = (0..classes.len())
            .filter(|&i| classes[i] == class)
            .collect();
        rng.shuffle(&mut members);
        for i in members {
            fold[i] = dealt % k;
            dealt += 1;
        }
    }
    fold
}

/// What each of the `k` folds of `subset` (under `seed`, as cross-validation deals them)
/// learns: the messages of each class in `subset` but its own.
pub fn fold_training(corpus: &Corpus, subset: &[usize], k: usize, seed: u64) -> Vec<[u64; 2]> {
    let classes: Vec<Class> = subset.iter().map(|&i| corpus.items[i].class).collect();
    let mut all = [0u64; 2];
    let mut own = vec![[0u64; 2]; k.max(1)];
    for (class, fold) in classes.iter().zip(assign_folds(&classes, k, seed)) {
        all[class.index()] += 1;
        own[fold][class.index()] += 1;
    }
    own.iter().map(|o| [all[0] - o[0], all[1] - o[1]]).collect()
}

/// What threshold advice aims at, as fractions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Target {
    /// Ham called spam, at most: sets `spam_threshold`.
    pub ham_loss: f64,
    /// Spam called ham, at most: sets `ham_threshold` (what lies between is unsure).
    pub spam_leak: f64,
}

/// Thresholds chosen on scores, for a [`Target`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    pub spam_threshold: f64,
    pub ham_threshold: f64,
}

impl Thresholds {
    pub fn choose(scores: &[(f64, Class)], target: Target) -> Thresholds {
        let spam_threshold = metrics::threshold_for(scores, target.ham_loss);
        let ham_threshold =
            metrics::ham_threshold_for(scores, target.spam_leak).min(spam_threshold);
        Thresholds {
            spam_threshold,
            ham_threshold,
        }
    }

    /// What these thresholds do to `scores` (percentages).
    pub fn apply(&self, scores: &[(f64, Class)]) -> Applied {
        let mut n = [0u64; 2];
        let (mut spam, mut ham) = ([0u64; 2], [0u64; 2]);
        for &(s, c) in scores {
            n[c.index()] += 1;
            match model::decide(s, self.spam_threshold, self.ham_threshold) {
                Decision::Spam => spam[c.index()] += 1,
                Decision::Ham => ham[c.index()] += 1,
                Decision::Unsure => {}
            }
        }
        let pct = |a: u64, b: u64| {
            if b == 0 {
                0.0
            } else {
                100.0 * a as f64 / b as f64
            }
        };
        Applied {
            thresholds: *self,
            ham: n[0],
            spam: n[1],
            ham_lost_pct: pct(spam[0], n[0]),
            spam_caught_pct: pct(spam[1], n[1]),
            spam_as_ham_pct: pct(ham[1], n[1]),
            ham_unsure_pct: pct(n[0] - spam[0] - ham[0], n[0]),
            spam_unsure_pct: pct(n[1] - spam[1] - ham[1], n[1]),
        }
    }
}

/// Thresholds applied to held-out scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Applied {
    pub thresholds: Thresholds,
    pub ham: u64,
    pub spam: u64,
    pub ham_lost_pct: f64,
    pub spam_caught_pct: f64,
    pub spam_as_ham_pct: f64,
    pub ham_unsure_pct: f64,
    pub spam_unsure_pct: f64,
}

/// Threshold advice: the thresholds that meet the target, chosen on validation scores
/// only, and what they do on held-out messages.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub target: Target,
    /// Chosen on all validation scores together: the values for production.
    pub chosen: Thresholds,
    /// Per held-out fold: thresholds chosen on that fold's own inner validation folds,
    /// applied to it.
    pub per_fold: Vec<Applied>,
    /// The per-fold outcomes pooled (weighted by messages).
    pub held_out: Applied,
}

fn pool(per_fold: &[Applied], chosen: Thresholds) -> Applied {
    let (ham, spam) = (
        per_fold.iter().map(|a| a.ham).sum::<u64>(),
        per_fold.iter().map(|a| a.spam).sum::<u64>(),
    );
    let mean = |f: &dyn Fn(&Applied) -> f64, by_ham: bool| {
        let total = if by_ham { ham } else { spam }.max(1) as f64;
        per_fold
            .iter()
            .map(|a| f(a) * if by_ham { a.ham } else { a.spam } as f64)
            .sum::<f64>()
            / total
    };
    Applied {
        thresholds: chosen,
        ham,
        spam,
        ham_lost_pct: mean(&|a| a.ham_lost_pct, true),
        spam_caught_pct: mean(&|a| a.spam_caught_pct, false),
        spam_as_ham_pct: mean(&|a| a.spam_as_ham_pct, false),
        ham_unsure_pct: mean(&|a| a.ham_unsure_pct, true),
        spam_unsure_pct: mean(&|a| a.spam_unsure_pct, false),
    }
}

/// The figures of one evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub setting: Setting,
    pub mode: String,
    pub per_fold: Vec<Figures>,
    /// Confusion matrices and scores pooled over folds.
    pub micro: Figures,
    /// The mean of the per-fold figures.
    #[serde(rename = "macro")]
    pub macro_: Figures,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<Advice>,
    /// In online mode, how many messages were learned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learned: Option<usize>,
    /// Held-out scores of every message, in corpus order (for plots and further advice).
    #[serde(skip)]
    pub scores: Vec<Scored>,
}

impl Report {
    fn new(
        setting: &Setting,
        mode: String,
        folds: Vec<Vec<Scored>>,
        advice: Option<Advice>,
    ) -> Report {
        let per_fold: Vec<Figures> = folds.iter().map(|f| figures_of(f)).collect();
        let mut all: Vec<Scored> = folds.into_iter().flatten().collect();
        all.sort_by_key(|s| s.index);
        Report {
            setting: setting.clone(),
            mode,
            micro: figures_of(&all),
            macro_: Figures::macro_average(&per_fold),
            per_fold,
            advice,
            learned: None,
            scores: all,
        }
    }
}

pub fn figures_of(scored: &[Scored]) -> Figures {
    let mut c = Confusion::default();
    for s in scored {
        c.add(s.class, s.decision);
    }
    Figures::new(c, &pairs(scored))
}

fn pairs(scored: &[Scored]) -> Vec<(f64, Class)> {
    scored.iter().map(|s| (s.score, s.class)).collect()
}

/// K-fold cross-validation of `setting` over the whole corpus.
/// With `target` (a ham-loss fraction), thresholds are advised by nested validation: for
/// each held-out fold, the threshold comes from inner folds that never include it.
pub fn cross_validate(
    corpus: &Corpus,
    setting: &Setting,
    k: usize,
    seed: u64,
    target: Option<Target>,
) -> Report {
    let all: Vec<usize> = (0..corpus.items.len()).collect();
    cross_validate_subset(corpus, &all, setting, k, seed, target)
}

/// [`cross_validate`] over some of the corpus only (the development part of a holdout).
pub fn cross_validate_subset(
    corpus: &Corpus,
    subset: &[usize],
    setting: &Setting,
    k: usize,
    seed: u64,
    target: Option<Target>,
) -> Report {
    let (folds, advice) = cv_folds(corpus, subset, setting, k, seed, target);
    Report::new(
        setting,
        format!("{k}-fold cross-validation, seed {seed}"),
        folds,
        advice,
    )
}

/// The held-out scores of each fold of `subset`, and the advice if asked for.
fn cv_folds(
    corpus: &Corpus,
    subset: &[usize],
    setting: &Setting,
    k: usize,
    seed: u64,
    target: Option<Target>,
) -> (Vec<Vec<Scored>>, Option<Advice>) {
    let classes: Vec<Class> = subset.iter().map(|&i| corpus.items[i].class).collect();
    let fold_of = assign_folds(&classes, k, seed);
    let members: Vec<Vec<usize>> = (0..k)
        .map(|f| {
            (0..subset.len())
                .filter(|&j| fold_of[j] == f)
                .map(|j| subset[j])
                .collect()
        })
        .collect();
    let full = corpus.table_of(subset.iter());
    // Each fold starts from the whole table and forgets its own messages: what the
    // store would hold had it learned everything else.
    let results: Vec<(Vec<Scored>, Option<Applied>)> = (0..k)
        .into_par_iter()
        .map(|f| {
            let mut table = full.clone();
            forget(corpus, &mut table, &members[f]);
            let held_out = score_with(corpus, &mut table, setting, &members[f]);
            let advice = target.map(|target| {
                let mut inner = Vec::new();
                for m in members
                    .iter()
                    .enumerate()
                    .filter(|(g, _)| *g != f)
                    .map(|(_, m)| m)
                {
                    forget(corpus, &mut table, m);
                    inner.extend(score_with(corpus, &mut table, setting, m));
                    relearn(corpus, &mut table, m);
                }
                Thresholds::choose(&pairs(&inner), target).apply(&pairs(&held_out))
            });
            (held_out, advice)
        })
        .collect();
    let (folds, fold_advice): (Vec<_>, Vec<_>) = results.into_iter().unzip();
    let advice = target.map(|target| {
        let per_fold: Vec<Applied> = fold_advice.into_iter().flatten().collect();
        let pooled: Vec<(f64, Class)> = folds.iter().flat_map(|f| pairs(f)).collect();
        let chosen = Thresholds::choose(&pooled, target);
        Advice {
            target,
            chosen,
            held_out: pool(&per_fold, chosen),
            per_fold,
        }
    });
    (folds, advice)
}

fn forget(corpus: &Corpus, table: &mut Table, indices: &[usize]) {
    for &i in indices {
        table.learn(&corpus.items[i].readings.learned, corpus.items[i].class, -1);
    }
}

fn relearn(corpus: &Corpus, table: &mut Table, indices: &[usize]) {
    for &i in indices {
        table.learn(&corpus.items[i].readings.learned, corpus.items[i].class, 1);
    }
}

/// A fixed split: trained on `train`, scored on `test`. With `target`, thresholds come
/// from K-fold validation inside `train`.
pub fn split(
    corpus: &Corpus,
    train: &[usize],
    test: &[usize],
    setting: &Setting,
    k: usize,
    seed: u64,
    target: Option<Target>,
) -> Report {
    let mut table = corpus.table_of(train.iter());
    let autolearning = setting.model.autolearn
        && setting.vocab.is_none()
        && setting.model.event_model != EventModel::Bernoulli;
    let held_out = if autolearning {
        replay_autolearning(corpus, &mut table, &setting.model, test)
    } else {
        score_with(corpus, &mut table, setting, test)
    };
    let advice = target.map(|target| {
        let (validation, _) = cv_folds(corpus, train, setting, k, seed, None);
        let chosen = Thresholds::choose(
            &validation.iter().flat_map(|f| pairs(f)).collect::<Vec<_>>(),
            target,
        );
        let applied = chosen.apply(&pairs(&held_out));
        Advice {
            target,
            chosen,
            per_fold: vec![applied],
            held_out: applied,
        }
    });
    Report::new(
        setting,
        format!("trained on {}, tested on {}", train.len(), test.len()),
        vec![held_out],
        advice,
    )
}

/// Scores `test` in date order (and lists it so), learning each firm verdict as the class it gave, as the
/// daemon does with `[model] autolearn`: what autolearning does for mail that changes.
fn replay_autolearning(
    corpus: &Corpus,
    table: &mut Table,
    cfg: &ModelConfig,
    test: &[usize],
) -> Vec<Scored> {
    online_order(corpus, test, Order::Date)
        .into_iter()
        .map(|i| {
            let item = &corpus.items[i];
            let v = verdict(item, &*table, cfg);
            if let Some(class) = cfg.autolearned_as(&v) {
                table.learn(&item.readings.learned, class, 1);
            }
            Scored::of(corpus, i, &v)
        })
        .collect()
}

/// A stratified split of the corpus into (development, held-out), `fraction` of each
/// class held out, chosen under `seed`. Both parts keep the corpus's class balance.
pub fn holdout(corpus: &Corpus, fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    // A seed of its own, so the held-out part does not line up with fold 0 of the same seed.
    let mut rng = Rng::new(seed ^ 0x5eed_5eed_5eed_5eed);
    let mut held_out = vec![false; corpus.items.len()];
    for class in [Class::Ham, Class::Spam] {
        let mut members: Vec<usize> = (0..corpus.items.len())
            .filter(|&i| corpus.items[i].class == class)
            .collect();
        rng.shuffle(&mut members);
        let n = (fraction * members.len() as f64).round() as usize;
        for &i in &members[..n.min(members.len())] {
            held_out[i] = true;
        }
    }
    (0..corpus.items.len()).partition(|&i| !held_out[i])
}

/// When online learning updates the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Training {
    /// Learn every message after it is classified.
    Everything,
    /// Learn only the messages classified wrongly (unsure counts as wrong).
    OnError,
}

/// Which order online mode takes the messages in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// By the Date header; messages without one keep their place among the inputs.
    Date,
    /// As given on the command line.
    Input,
    /// Shuffled under the seed: a stand-in for arrival order when the dates of a
    /// collection do not interleave the classes as real mail would.
    Shuffle(u64),
}

/// TREC's online filtering: each message classified, then learned with its true label.
/// The figures are those of the whole run. Errors if the setting needs what online
/// learning cannot give (a Bernoulli model or a feature selection, which both need a
/// pass over the vocabulary after every lesson).
pub fn online(
    corpus: &Corpus,
    subset: &[usize],
    setting: &Setting,
    training: Training,
    order: Order,
) -> Result<Report, String> {
    if setting.model.event_model == EventModel::Bernoulli || setting.vocab.is_some() {
        return Err(
            "online mode scores as the store does: no bernoulli model and no --vocab selection"
                .into(),
        );
    }
    let sequence = online_order(corpus, subset, order);
    let mut table = Table::new();
    let mut learned = 0;
    let mut scored = Vec::with_capacity(sequence.len());
    for i in sequence {
        let item = &corpus.items[i];
        let v = verdict(item, &table, &setting.model);
        let right = matches!(
            (item.class, v.decision),
            (Class::Spam, Decision::Spam) | (Class::Ham, Decision::Ham)
        );
        if training == Training::Everything || !right {
            table.learn(&item.readings.learned, item.class, 1);
            learned += 1;
        }
        scored.push(Scored::of(corpus, i, &v));
    }
    let per_fold = vec![figures_of(&scored)];
    Ok(Report {
        setting: setting.clone(),
        mode: format!(
            "online, train on {}",
            if training == Training::Everything {
                "everything"
            } else {
                "error"
            }
        ),
        micro: per_fold[0].clone(),
        macro_: per_fold[0].clone(),
        per_fold,
        advice: None,
        learned: Some(learned),
        scores: scored,
    })
}

/// Indices of `subset` in online order. Undated messages take the date of the message before
/// them, so they stay where they were among their neighbours.
pub fn online_order(corpus: &Corpus, subset: &[usize], order: Order) -> Vec<usize> {
    let mut sequence: Vec<usize> = subset.to_vec();
    if order == Order::Date {
        let mut last = i64::MIN;
        let keys: Vec<i64> = corpus
            .items
            .iter()
            .map(|item| {
                last = item.date.unwrap_or(last);
                last
            })
            .collect();
        sequence.sort_by_key(|&i| (keys[i], i));
    }
    if let Order::Shuffle(seed) = order {
        Rng::new(seed).shuffle(&mut sequence);
    }
    sequence
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Features;

    fn corpus_of(messages: &[(&str, Class)]) -> Corpus {
        let items = messages
            .iter()
            .map(|(words, class)| Item {
                readings: Readings {
                    learned: words.split_whitespace().collect(),
                    hidden_read: None,
                },
                class: *class,
                decisive: Vec::new(),
                date: None,
            })
            .collect();
        Corpus { items }
    }

    #[test]
    fn online_on_error_learns_only_mistakes() {
        let mut messages = Vec::new();
        for _ in 0..20 {
            messages.push(("cheap pills click", Class::Spam));
            messages.push(("meeting agenda notes", Class::Ham));
        }
        let corpus = corpus_of(&messages);
        let all: Vec<usize> = (0..corpus.items.len()).collect();
        let mut model = ModelConfig {
            min_learned: 1,
            ..ModelConfig::default()
        };
        model.spam_threshold = 0.5;
        model.ham_threshold = -0.5;
        let setting = Setting {
            model,
            selector: Selector::Mi,
            vocab: None,
        };
        let everything = online(&corpus, &all, &setting, Training::Everything, Order::Input)
            .expect("online runs");
        assert_eq!(everything.learned, Some(40));
        let on_error =
            online(&corpus, &all, &setting, Training::OnError, Order::Input).expect("online runs");
        // The first spam and ham are unsure (nothing learned of the other class yet), so
        // wrong, and learned; after one of each, every message is right and none is.
        assert_eq!(on_error.learned, Some(2));
        let c = on_error.micro.confusion;
        assert_eq!((c.fp, c.fn_, c.unsure), (0, 1, [1, 1]), "{c:?}");
    }

    /// A split replayed with autolearning learns the firm verdicts as they come, in date
    /// order: a spam word that only the first test spam shares with the old ones then
    /// counts against a later spam that has nothing else.
    #[test]
    fn a_split_with_autolearning_learns_firm_verdicts_in_date_order() {
        let mut messages = Vec::new();
        for _ in 0..20 {
            messages.push(("cheap pills click", Class::Spam));
            messages.push(("meeting agenda notes", Class::Ham));
        }
        messages.push(("crypto wallet", Class::Spam));
        messages.push(("cheap pills click crypto wallet", Class::Spam));
        let mut corpus = corpus_of(&messages);
        // The later test message in the list came first.
        corpus.items[40].date = Some(2);
        corpus.items[41].date = Some(1);
        let train: Vec<usize> = (0..40).collect();
        let test = [40, 41];
        let setting = |autolearn| Setting {
            model: ModelConfig {
                min_learned: 1,
                autolearn,
                autolearn_spam: 4.5,
                ..ModelConfig::default()
            },
            selector: Selector::Mi,
            vocab: None,
        };
        let score_of = |report: &Report, i: usize| {
            report
                .scores
                .iter()
                .find(|s| s.index == i)
                .expect("scored")
                .score
        };
        let fixed = split(&corpus, &train, &test, &setting(false), 2, 1, None);
        let replayed = split(&corpus, &train, &test, &setting(true), 2, 1, None);
        assert_eq!(score_of(&fixed, 41), score_of(&replayed, 41));
        assert!(
            score_of(&replayed, 41) >= 4.5,
            "{}",
            score_of(&replayed, 41)
        );
        assert!(
            score_of(&replayed, 40) > score_of(&fixed, 40) + 1.0,
            "{} against {}",
            score_of(&replayed, 40),
            score_of(&fixed, 40)
        );
    }

    #[test]
    fn holdout_keeps_the_class_balance() {
        let items = (0..1003)
            .map(|i| Item {
                readings: Readings {
                    learned: Features::new(),
                    hidden_read: None,
                },
                class: if i % 4 == 0 { Class::Spam } else { Class::Ham },
                decisive: Vec::new(),
                date: None,
            })
            .collect();
        let corpus = Corpus { items };
        let (dev, held) = holdout(&corpus, 0.2, 1);
        assert_eq!(dev.len() + held.len(), 1003);
        let spam = |v: &[usize]| {
            v.iter()
                .filter(|&&i| corpus.items[i].class == Class::Spam)
                .count()
        };
        // 251 spam and 752 ham: 50 and 150 held out.
        assert_eq!((spam(&held), held.len() - spam(&held)), (50, 150));
        assert_eq!(holdout(&corpus, 0.2, 1), (dev, held), "seeded");
    }

    #[test]
    fn folds_are_stratified_and_seeded() {
        let classes: Vec<Class> = (0..1003)
            .map(|i| if i % 3 == 0 { Class::Spam } else { Class::Ham })
            .collect();
        let a = assign_folds(&classes, 10, 7);
        assert_eq!(a, assign_folds(&classes, 10, 7), "same seed, same folds");
        assert_ne!(
            a,
            assign_folds(&classes, 10, 8),
            "another seed, other folds"
        );
        let spam = classes.iter().filter(|c| **c == Class::Spam).count();
        for f in 0..10 {
            let members: Vec<usize> = (0..classes.len()).filter(|&i| a[i] == f).collect();
            let s = members
                .iter()
                .filter(|&&i| classes[i] == Class::Spam)
                .count();
            assert!(
                members.len().abs_diff(classes.len() / 10) <= 1,
                "fold {f}: {} messages",
                members.len()
            );
            assert!(
                s.abs_diff(spam / 10) <= 1,
                "fold {f}: {s} spam of {}",
                members.len()
            );
        }
    }
}
