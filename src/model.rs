//! Multinomial naive Bayes over [`Features`]: scoring in log space, the decision by
//! thresholds, and the explanation of a verdict. No I/O: counts come through [`CountSource`].
//!
//! score(c) = log P(c) + Σ_t n_t · log P(t|c), P(t|c) = (count(t,c) + α) / (N_c + α|V|),
//! with V the vocabulary of both classes together and tokens seen in neither ignored
//! (McCallum & Nigam 1998; Manning et al. ch. 13). The verdict's score is the log-odds
//! score(spam) − score(ham), by default normalized for length (see [`ModelConfig`]).
//! Variants ([`EventModel`]): the binary multinomial (counts clipped at one per message)
//! and, for evaluation only, the multi-variate Bernoulli.

use serde::{Deserialize, Serialize};

use crate::features::{Features, Readings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Ham = 0,
    Spam = 1,
}

impl Class {
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::Ham => "ham",
            Class::Spam => "spam",
        }
    }
}

/// What has been learned about one feature, per class (indexed by [`Class::index`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCounts {
    /// How often it occurred, all learned messages together.
    pub occurrences: [u32; 2],
    /// In how many learned messages it occurred.
    pub messages: [u32; 2],
}

impl TokenCounts {
    pub fn is_zero(&self) -> bool {
        *self == TokenCounts::default()
    }

    /// Learned messages it occurred in, both classes together.
    pub fn message_count(&self) -> u64 {
        u64::from(self.messages[0]) + u64::from(self.messages[1])
    }
}

/// Class totals over everything learned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Learned messages per class.
    pub messages: [u64; 2],
    /// Σ over features of `occurrences`: the multinomial model's N_c.
    pub occurrences: [u64; 2],
    /// Σ over features of `messages`: N_c when counts are clipped at one per message.
    pub presences: [u64; 2],
    /// Features with a non-zero count in either class: |V|.
    pub vocabulary: u64,
}

impl Totals {
    /// Accounts for one feature's counts going from `was` to `now` (at zero, it leaves the
    /// vocabulary). Sums never go below zero, as the counts do not.
    pub fn account(&mut self, was: &TokenCounts, now: &TokenCounts) {
        for c in 0..2 {
            self.occurrences[c] = (self.occurrences[c] + now.occurrences[c] as u64)
                .saturating_sub(was.occurrences[c] as u64);
            self.presences[c] =
                (self.presences[c] + now.messages[c] as u64).saturating_sub(was.messages[c] as u64);
        }
        match (was.is_zero(), now.is_zero()) {
            (true, false) => self.vocabulary += 1,
            (false, true) => self.vocabulary = self.vocabulary.saturating_sub(1),
            _ => {}
        }
    }
}

/// Where learned counts are read from: the store, or an in-memory table in evaluation.
pub trait CountSource {
    fn totals(&self) -> Totals;
    fn token(&self, feature: &str) -> Option<TokenCounts>;

    /// [`CountSource::token`] for a caller that has the feature's
    /// [`feature_hash`](crate::features::feature_hash) already (every [`Features`] does).
    fn token_hashed(&self, feature: &str, _hash: u64) -> Option<TokenCounts> {
        self.token(feature)
    }

    /// Per class, Σ over the vocabulary of ln(M_c + α − m_tc) (M_c learned messages, m_tc
    /// those holding t): the part of the multi-variate Bernoulli score that every absent
    /// word contributes. It changes with every lesson and costs a pass over the whole
    /// vocabulary, so only a source that can hold it precomputed offers it (evaluation's
    /// in-memory table does, the store does not, hence Bernoulli is evaluation-only).
    fn bernoulli_absent(&self, _alpha: f64) -> Option<[f64; 2]> {
        None
    }
}

/// How a message's features become evidence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventModel {
    /// Every occurrence counts (McCallum & Nigam's multinomial).
    Multinomial,
    /// Each feature counts once per message, in learning and in scoring (Metsis et al.
    /// 2006 found this the better naive Bayes for spam).
    #[default]
    BinaryMultinomial,
    /// Multi-variate Bernoulli (McCallum & Nigam): every vocabulary word is an event,
    /// present or absent. Scored as the precomputed all-absent sum plus a correction for
    /// the words present, so a message costs what it does in the other models. Needs
    /// [`CountSource::bernoulli_absent`], so only `spamnb eval` can use it; the
    /// configuration refuses it for the store. Scored as in the paper: `min_token_weight`
    /// and `min_feature_messages` do not apply (a word left out would count as absent).
    Bernoulli,
}

impl EventModel {
    pub fn name(self) -> &'static str {
        match self {
            EventModel::Multinomial => "multinomial",
            EventModel::BinaryMultinomial => "binary-multinomial",
            EventModel::Bernoulli => "bernoulli",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub event_model: EventModel,
    /// Add-α smoothing.
    pub alpha: f64,
    /// Log-odds at or above which a message is spam.
    pub spam_threshold: f64,
    /// Log-odds at or below which a message is ham; between the two it is unsure.
    pub ham_threshold: f64,
    /// Messages each class needs before a verdict is more than "unsure".
    pub min_learned: u64,
    /// Features whose log-likelihood ratio |log P(t|spam) − log P(t|ham)| is below this
    /// are not evidence. Common words that lean only slightly one way otherwise outvote
    /// the few telling ones in long messages (bogofilter's `min_dev` plays this part).
    pub min_token_weight: f64,
    /// Divides the log-odds by √(features used): the length normalization of Rennie et
    /// al. (2003) for a binary feature vector, so that long messages are not sure of
    /// themselves merely for being long. Thresholds are on the normalized score.
    pub normalize_length: bool,
    /// Features learned from fewer messages than this (both classes together) are not
    /// used as evidence: document-frequency feature selection (Yang & Pedersen 1997).
    pub min_feature_messages: u32,
    /// The score leans on a message's strongest features: this many, by |log-likelihood
    /// ratio| (Graham's "A Plan for Spam" used 15). 0 uses every feature alike.
    pub strongest_features: usize,
    /// The part of the score that still comes from every feature (the rest from the
    /// strongest ones), each part normalized by its own length. The strongest alone are
    /// thrown by a few correlated header tokens (every Received line of one relay); every
    /// feature alone lets a long newsletter's many mildly spammy words outvote what
    /// matters.
    pub all_features_share: f64,
    /// How many features for and against a verdict it carries as its explanation.
    pub explain_top: usize,
    /// Which messages carry that explanation in an `X-Spam-Report` header.
    pub report_header: ReportHeader,
    /// Put before the Subject of spam (`_SCORE_` becomes the score), the original kept
    /// in `X-Spam-Prev-Subject`, as SpamAssassin's `rewrite_header Subject`: for readers
    /// whose mail client cannot sort by header. Empty (the default): subjects are left be.
    pub subject_tag: String,
    /// Whether the daemon learns the messages it scores with confidence, as the class it
    /// gave them (autolearning): the model follows mail as it changes without anyone
    /// sorting it. Off by default: every such message adds to the database.
    pub autolearn: bool,
    /// Scores at or above this are learned as spam when `autolearn` is on.
    pub autolearn_spam: f64,
    /// Scores at or below this are learned as ham when `autolearn` is on.
    pub autolearn_ham: f64,
}

/// Which messages get an `X-Spam-Report` header: the score's making and the features that
/// moved it. SpamAssassin adds one to spam when it leaves the message itself unwrapped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportHeader {
    Never,
    #[default]
    Spam,
    Always,
}

impl ModelConfig {
    /// The class a verdict teaches when the model autolearns: its own, if it is firm.
    pub fn autolearned_as(&self, verdict: &Verdict) -> Option<Class> {
        // A rule decided, not the model: its verdict is the administrator's, not evidence
        // (a welcomelisted sender's spam would teach the model it is ham).
        if !verdict.decided_by.is_empty() {
            return None;
        }
        match verdict.decision {
            Decision::Spam if self.autolearn && verdict.score >= self.autolearn_spam => {
                Some(Class::Spam)
            }
            Decision::Ham if self.autolearn && verdict.score <= self.autolearn_ham => {
                Some(Class::Ham)
            }
            _ => None,
        }
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            event_model: EventModel::default(),
            alpha: 0.1,
            // Chosen by `spamnb eval --holdout 0.2 --target-fp 0.2%` on the SpamAssassin
            // corpus's development folds (README, "How it decides").
            spam_threshold: 4.5,
            ham_threshold: -2.5,
            min_learned: 50,
            min_token_weight: 1.0,
            normalize_length: true,
            min_feature_messages: 1,
            // Chosen by 5-fold cross-validation and by online (date-ordered) evaluation on
            // the training halves of both benchmark splits (README, "How it decides").
            strongest_features: 15,
            all_features_share: 0.3,
            explain_top: 8,
            report_header: ReportHeader::default(),
            subject_tag: String::new(),
            autolearn: false,
            // Chosen by replaying the later 40% of each benchmark split's training half in
            // date order (README, "Autolearning"); beyond the verdict thresholds, so that
            // only firm verdicts teach.
            autolearn_spam: 8.0,
            autolearn_ham: -6.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Spam,
    Ham,
    Unsure,
}

impl Decision {
    pub fn name(self) -> &'static str {
        match self {
            Decision::Spam => "spam",
            Decision::Ham => "ham",
            Decision::Unsure => "unsure",
        }
    }
}

/// One feature's part in a verdict: positive weights push towards spam.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    pub feature: String,
    pub count: u32,
    pub weight: f64,
}

/// Serialized for the control socket, through which the CLI reads the daemon's verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub decision: Decision,
    /// Log-odds of spam against ham; higher is spammier.
    pub score: f64,
    /// The log-odds as a probability of spam.
    pub probability: f64,
    /// The features that moved the score most, strongest first, both directions.
    pub reasons: Vec<Reason>,
    /// Rules that hit (`X-Spam-Status: tests=`).
    pub rules: Vec<String>,
    /// Why the verdict is what it is when the words did not make it: unsure for want of
    /// learning, or decided by a rule.
    pub note: Option<String>,
    /// How the score was made from the features, when it was.
    #[serde(default)]
    pub parts: Option<ScoreParts>,
    /// Rules scored as decisive ([`DECISIVE_SCORE`]) that hit and decided the verdict.
    #[serde(default)]
    pub decided_by: Vec<String>,
}

/// A rule `score` at or beyond which (either way) a hit decides the verdict whatever the
/// words say, as in SpamAssassin: its GTUBE test string is scored 1000, its welcomelist
/// and blocklist rules −100 and 100. Any other score is read but not used: weights are
/// learned.
pub const DECISIVE_SCORE: f64 = 100.0;

/// The two halves of a score: `score = (1 − all_share) × strongest + all_share × all`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScoreParts {
    /// Log-odds over the strongest features, class priors included, length-normalized.
    pub strongest: f64,
    pub strongest_count: usize,
    /// Log-odds over every feature used, class priors included, length-normalized.
    pub all: f64,
    pub all_count: usize,
    pub all_share: f64,
}

impl ScoreParts {
    pub fn score(&self) -> f64 {
        if self.strongest_count == self.all_count {
            // One sum: exactly it, not a blend of it with itself.
            return self.all;
        }
        (1.0 - self.all_share) * self.strongest + self.all_share * self.all
    }

    /// The arithmetic of the score, in words.
    pub fn describe(&self) -> String {
        if self.strongest_count == self.all_count {
            return format!(
                "the score {:.2} comes from all {} features used",
                self.all, self.all_count
            );
        }
        format!(
            "the score {:.2} is {:.2} × {:.2} from the {} strongest of {} features used, \
             plus {:.2} × {:.2} from all of them",
            self.score(),
            1.0 - self.all_share,
            self.strongest,
            self.strongest_count,
            self.all_count,
            self.all_share,
            self.all
        )
    }
}

impl Verdict {
    /// "Unsure", for a reason other than the score: too little learned, an unusable model,
    /// an unreadable message.
    pub fn unsure(rules: Vec<String>, note: String) -> Verdict {
        Verdict {
            decision: Decision::Unsure,
            score: 0.0,
            probability: 0.5,
            reasons: Vec::new(),
            rules,
            note: Some(note),
            parts: None,
            decided_by: Vec::new(),
        }
    }

    /// The verdict once rules scored as decisive have hit (`decisive`: name and score):
    /// when their scores add up to a decisive one, it is added to the score (as
    /// SpamAssassin adds it) and decides, learned evidence or not. A welcomelist and a
    /// blocklist that both hit cancel out and leave the verdict to the words.
    pub fn overruled(&mut self, decisive: &[(String, f64)]) {
        let sum: f64 = decisive.iter().map(|(_, s)| s).sum();
        if sum.abs() < DECISIVE_SCORE {
            return;
        }
        self.score += sum;
        self.probability = sigmoid(self.score);
        self.decision = if sum > 0.0 {
            Decision::Spam
        } else {
            Decision::Ham
        };
        self.decided_by = decisive.iter().map(|(n, _)| n.clone()).collect();
        let scored: Vec<String> = decisive.iter().map(|(n, s)| format!("{n} {s}")).collect();
        self.note = Some(format!(
            "decided by the rule{} scored as decisive: {}",
            if decisive.len() > 1 { "s" } else { "" },
            scored.join(", ")
        ));
    }
}

/// log P(c) + Σ_t n_t · log P(t|c) for ham and spam, in that order.
pub fn log_joint(features: &Features, counts: &dyn CountSource, cfg: &ModelConfig) -> [f64; 2] {
    let mut out = [0.0; 2];
    score_features(
        features,
        counts,
        &counts.totals(),
        cfg,
        |_, _, _| {},
        &mut out,
    );
    out
}

/// Scores a message's two readings (see [`crate::features::Readings`]): the spammier of
/// the two when there are two.
pub fn classify_readings(
    readings: &Readings,
    counts: &dyn CountSource,
    cfg: &ModelConfig,
) -> Verdict {
    let learned = classify(&readings.learned, counts, cfg);
    let Some(hidden_read) = &readings.hidden_read else {
        return learned;
    };
    let mut other = classify(hidden_read, counts, cfg);
    if other.score <= learned.score {
        return learned;
    }
    other.note.get_or_insert_with(|| {
        "hidden text that readers may see (most of its text hidden, or shown by a style rule \
         for some readers): scored with those words read as words too, the spammier reading"
            .into()
    });
    other
}

/// Scores `features` against `counts`.
pub fn classify(features: &Features, counts: &dyn CountSource, cfg: &ModelConfig) -> Verdict {
    let totals = counts.totals();
    let rules = features
        .rule_hits()
        .into_iter()
        .map(str::to_string)
        .collect();
    let short: Vec<String> = [Class::Spam, Class::Ham]
        .into_iter()
        .filter(|c| totals.messages[c.index()] < cfg.min_learned.max(1))
        .map(|c| {
            format!(
                "{} more {}",
                cfg.min_learned.max(1) - totals.messages[c.index()],
                c.name()
            )
        })
        .collect();
    if !short.is_empty() {
        let note = format!("not enough learned yet: needs {}", short.join(" and "));
        return Verdict::unsure(rules, note);
    }

    if cfg.event_model == EventModel::Bernoulli && counts.bernoulli_absent(cfg.alpha).is_none() {
        let note =
            "the bernoulli event model is for `spamnb eval` only; choose another event_model";
        return Verdict::unsure(rules, note.into());
    }

    let mut contributions: Vec<(&str, u32, f64)> = Vec::new();
    let mut joint = [0.0; 2];
    score_features(
        features,
        counts,
        &totals,
        cfg,
        |f, n, w| contributions.push((f, n, w)),
        &mut joint,
    );
    // The class priors alone are no evidence about this message: with ten times more ham
    // learned, words never seen would have made a verdict of ham.
    if contributions.is_empty() {
        return Verdict::unsure(rules, "no feature of this message has been learned".into());
    }
    let parts = combine(
        joint[Class::Spam.index()] - joint[Class::Ham.index()],
        &contributions,
        cfg,
    );
    let score = parts.score();
    Verdict {
        decision: decide(score, cfg.spam_threshold, cfg.ham_threshold),
        score,
        probability: sigmoid(score),
        reasons: strongest(&contributions, cfg.explain_top),
        rules,
        note: None,
        decided_by: Vec::new(),
        parts: Some(parts),
    }
}

/// Spam at or above the spam threshold, ham at or below the ham threshold, unsure between.
pub fn decide(score: f64, spam_threshold: f64, ham_threshold: f64) -> Decision {
    if score >= spam_threshold {
        Decision::Spam
    } else if score <= ham_threshold {
        Decision::Ham
    } else {
        Decision::Unsure
    }
}

/// The score's parts from the log-odds over every feature used (`log_odds`, priors
/// included) and each feature's part of it: the strongest features' sum and the whole sum,
/// each divided by √(its features) when `normalize_length` is on.
fn combine(log_odds: f64, contributions: &[(&str, u32, f64)], cfg: &ModelConfig) -> ScoreParts {
    let normalized = |sum: f64, n: usize| {
        if cfg.normalize_length {
            sum / (n.max(1) as f64).sqrt()
        } else {
            sum
        }
    };
    let n = contributions.len();
    let all = normalized(log_odds, n);
    let k = cfg.strongest_features;
    let mut parts = ScoreParts {
        strongest: all,
        strongest_count: n,
        all,
        all_count: n,
        all_share: cfg.all_features_share,
    };
    if k == 0 || n <= k {
        return parts;
    }
    let prior = log_odds - contributions.iter().map(|c| c.2).sum::<f64>();
    let mut weights: Vec<f64> = contributions.iter().map(|c| c.2).collect();
    weights.select_nth_unstable_by(k - 1, |a, b| b.abs().total_cmp(&a.abs()));
    parts.strongest = normalized(prior + weights[..k].iter().sum::<f64>(), k);
    parts.strongest_count = k;
    parts
}

/// The core sum. `each` sees every known feature with its count and log-odds contribution.
fn score_features<'f>(
    features: &'f Features,
    counts: &dyn CountSource,
    totals: &Totals,
    cfg: &ModelConfig,
    mut each: impl FnMut(&'f str, u32, f64),
    joint: &mut [f64; 2],
) {
    if cfg.event_model == EventModel::Bernoulli {
        return score_bernoulli(features, counts, totals, cfg, each, joint);
    }
    let smoothing = Smoothing::new(totals, cfg);
    *joint = log_prior(totals);
    for (hash, feature, n) in features.iter_hashed() {
        let Some(tc) = counts.token_hashed(feature, hash) else {
            continue;
        };
        let Some(logp) = smoothing.log_p(&tc) else {
            continue;
        };
        if !counts_as_evidence(&tc, logp, cfg) {
            continue;
        }
        let n = if smoothing.binary { 1 } else { n };
        for c in 0..2 {
            joint[c] += n as f64 * logp[c];
        }
        each(feature, n, n as f64 * (logp[1] - logp[0]));
    }
}

/// P(t|c) with add-α smoothing, from the totals of the multinomial event models: per
/// occurrence, or per message for the binary one.
struct Smoothing {
    binary: bool,
    alpha: f64,
    /// ln(N_c + α·V) per class.
    denominators: [f64; 2],
}

impl Smoothing {
    fn new(totals: &Totals, cfg: &ModelConfig) -> Smoothing {
        let binary = cfg.event_model == EventModel::BinaryMultinomial;
        let class_total = if binary {
            totals.presences
        } else {
            totals.occurrences
        };
        let v = totals.vocabulary as f64;
        Smoothing {
            binary,
            alpha: cfg.alpha,
            denominators: class_total.map(|n| (n as f64 + cfg.alpha * v).ln()),
        }
    }

    /// ln P(t|ham) and ln P(t|spam); `None` when nothing of it is learned.
    fn log_p(&self, tc: &TokenCounts) -> Option<[f64; 2]> {
        let learned = if self.binary {
            tc.messages
        } else {
            tc.occurrences
        };
        (learned != [0, 0])
            .then(|| [0, 1].map(|c| (learned[c] as f64 + self.alpha).ln() - self.denominators[c]))
    }
}

/// Whether a learned feature is evidence: learned from enough messages, and leaning far
/// enough one way (`min_feature_messages`, `min_token_weight`).
fn counts_as_evidence(tc: &TokenCounts, logp: [f64; 2], cfg: &ModelConfig) -> bool {
    tc.message_count() >= u64::from(cfg.min_feature_messages)
        && (logp[1] - logp[0]).abs() >= cfg.min_token_weight
}

/// What one occurrence of `feature` weighs, log P(t|spam) − log P(t|ham), and whether
/// scores count it at all (see [`counts_as_evidence`]); `None` when nothing of it is
/// learned, or under the Bernoulli model, which weighs absence too. For `rules stats`: a
/// rule learned too weak to count is not a rule never learned.
pub fn feature_weight(
    feature: &str,
    counts: &dyn CountSource,
    cfg: &ModelConfig,
) -> Option<(f64, bool)> {
    if cfg.event_model == EventModel::Bernoulli {
        return None;
    }
    let tc = counts.token(feature)?;
    let logp = Smoothing::new(&counts.totals(), cfg).log_p(&tc)?;
    Some((logp[1] - logp[0], counts_as_evidence(&tc, logp, cfg)))
}

/// ln P(c) per class, the same in every event model. An empty class has no prior; a tiny
/// one keeps the arithmetic finite.
fn log_prior(totals: &Totals) -> [f64; 2] {
    let all_messages = (totals.messages[0] + totals.messages[1]).max(1) as f64;
    totals
        .messages
        .map(|m| (m.max(1) as f64 / all_messages).ln())
}

/// Multi-variate Bernoulli: P(t|c) = (m_tc + α) / (M_c + 2α) that a message of class c
/// holds t. score(c) = log P(c) + Σ_{t∈V} ln(1 − P(t|c)) + Σ_{t present} [ln P(t|c) −
/// ln(1 − P(t|c))]: the first sum comes precomputed from the source, so only the words
/// present are visited.
fn score_bernoulli<'f>(
    features: &'f Features,
    counts: &dyn CountSource,
    totals: &Totals,
    cfg: &ModelConfig,
    mut each: impl FnMut(&'f str, u32, f64),
    joint: &mut [f64; 2],
) {
    let alpha = cfg.alpha;
    let v = totals.vocabulary as f64;
    // Without the precomputed sum the absent words are left out: classify() refuses
    // before that happens, log_joint() callers get the present-word part alone.
    let absent = counts.bernoulli_absent(alpha).unwrap_or([0.0; 2]);
    let prior = log_prior(totals);
    for c in 0..2 {
        let denominator = (totals.messages[c] as f64 + 2.0 * alpha).ln();
        joint[c] = prior[c] + absent[c] - v * denominator;
    }
    for (hash, feature, _) in features.iter_hashed() {
        let Some(tc) = counts.token_hashed(feature, hash) else {
            continue;
        };
        if tc.messages == [0, 0] {
            continue;
        }
        let odds = [0, 1].map(|c| {
            let m = tc.messages[c] as f64;
            (m + alpha).ln() - (totals.messages[c] as f64 + alpha - m).max(alpha).ln()
        });
        for c in 0..2 {
            joint[c] += odds[c];
        }
        each(feature, 1, odds[1] - odds[0]);
    }
}

/// Σ over `tokens` of ln(M_c + α − m_tc) per class: what [`CountSource::bernoulli_absent`]
/// returns, for a source that holds its tokens in memory.
pub fn bernoulli_absent_sum<'a>(
    totals: &Totals,
    tokens: impl Iterator<Item = &'a TokenCounts>,
    alpha: f64,
) -> [f64; 2] {
    let mut sum = [0.0; 2];
    for tc in tokens {
        for (c, s) in sum.iter_mut().enumerate() {
            *s += (totals.messages[c] as f64 + alpha - tc.messages[c] as f64)
                .max(alpha)
                .ln();
        }
    }
    sum
}

/// The `top` strongest contributions towards spam and towards ham, strongest first.
fn strongest(all: &[(&str, u32, f64)], top: usize) -> Vec<Reason> {
    let by_weight = |a: &(&str, u32, f64), b: &(&str, u32, f64)| {
        b.2.abs().total_cmp(&a.2.abs()).then(a.0.cmp(b.0))
    };
    let mut out = Vec::new();
    for towards_spam in [true, false] {
        let mut side: Vec<_> = all
            .iter()
            .filter(|c| (c.2 > 0.0) == towards_spam && c.2 != 0.0)
            .copied()
            .collect();
        // Only the top few are shown: pick them, then sort those alone.
        if side.len() > top {
            side.select_nth_unstable_by(top, by_weight);
            side.truncate(top);
        }
        side.sort_by(by_weight);
        out.extend(side.into_iter().map(|(f, n, w)| Reason {
            feature: f.to_string(),
            count: n,
            weight: w,
        }));
    }
    out
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// A change to one feature's counts: occurrences and messages per class, added (or, when
/// negative, taken away). The store sums a batch's changes per feature before it applies
/// them; evaluation applies each message's as it comes. Both through [`TokenCounts::plus`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountDelta {
    pub occurrences: [i64; 2],
    pub messages: [i64; 2],
}

impl CountDelta {
    /// One message's `n` occurrences of a feature, learned (`sign` 1) or taken away (−1).
    pub fn of_message(class: Class, n: u32, sign: i64) -> CountDelta {
        let mut d = CountDelta::default();
        d.add_message(class, n, sign);
        d
    }

    pub fn add_message(&mut self, class: Class, n: u32, sign: i64) {
        self.occurrences[class.index()] += n as i64 * sign;
        self.messages[class.index()] += sign;
    }
}

impl TokenCounts {
    /// The counts with `delta` applied, none below zero.
    pub fn plus(&self, delta: &CountDelta) -> TokenCounts {
        TokenCounts {
            occurrences: [0, 1].map(|c| add_signed(self.occurrences[c], delta.occurrences[c])),
            messages: [0, 1].map(|c| add_signed(self.messages[c], delta.messages[c])),
        }
    }
}

/// Adds one message's features to a count table, or takes them away (`sign` −1).
pub fn apply(counts: &mut TokenCounts, class: Class, n: u32, sign: i64) {
    *counts = counts.plus(&CountDelta::of_message(class, n, sign));
}

/// Never below zero: a count taken away twice (a message forgotten after the tokenizer
/// changed) stops at nothing instead of wrapping round.
pub fn add_signed(value: u32, delta: i64) -> u32 {
    (value as i64 + delta).clamp(0, u32::MAX as i64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rules scored as decisive decide, learned evidence or not, and their verdict never
    /// teaches; a welcomelist and a blocklist that both hit leave it to the words.
    #[test]
    fn decisive_rules_overrule_the_words() {
        let unsure = Verdict::unsure(vec!["GTUBE".into()], "not enough learned yet".into());
        let mut v = unsure.clone();
        v.overruled(&[("GTUBE".into(), 1000.0)]);
        assert_eq!(v.decision, Decision::Spam);
        assert_eq!(v.score, 1000.0);
        assert!(v.probability > 0.999);
        assert_eq!(v.decided_by, ["GTUBE"]);
        assert!(v.note.as_deref().unwrap().contains("GTUBE 1000"), "{v:?}");

        let mut spammy = unsure.clone();
        spammy.decision = Decision::Spam;
        spammy.score = 12.0;
        spammy.note = None;
        let mut v = spammy.clone();
        v.overruled(&[("LOCAL_BOSS".into(), -100.0)]);
        assert_eq!((v.decision, v.score), (Decision::Ham, -88.0));
        let autolearning = ModelConfig {
            autolearn: true,
            ..ModelConfig::default()
        };
        assert_eq!(autolearning.autolearned_as(&spammy), Some(Class::Spam));
        assert_eq!(
            autolearning.autolearned_as(&v),
            None,
            "a rule's verdict never teaches"
        );

        let mut v = spammy.clone();
        v.overruled(&[
            ("IN_WELCOMELIST".into(), -100.0),
            ("IN_BLOCKLIST".into(), 100.0),
        ]);
        assert_eq!(v, spammy);
        v.overruled(&[]);
        assert_eq!(v, spammy);
    }

    #[test]
    fn sigmoid_is_stable() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert!(sigmoid(800.0) == 1.0 && sigmoid(-800.0) == 0.0);
        assert!((sigmoid(2.0) - 0.880797).abs() < 1e-6);
    }

    #[test]
    fn score_blends_the_strongest_features_with_all() {
        // A prior of 0.5 and three features; the strongest two are +5 and +2.
        let used = [("a", 1, 5.0), ("b", 1, -1.0), ("c", 1, 2.0)];
        let log_odds = 0.5 + 5.0 - 1.0 + 2.0;
        let cfg = |k, share| ModelConfig {
            strongest_features: k,
            all_features_share: share,
            ..ModelConfig::default()
        };
        let strongest = (0.5 + 5.0 + 2.0) / 2f64.sqrt();
        let all = log_odds / 3f64.sqrt();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        let combine = |log_odds, used: &[(&str, u32, f64)], cfg: &ModelConfig| {
            combine(log_odds, used, cfg).score()
        };
        assert!(close(combine(log_odds, &used, &cfg(2, 0.0)), strongest));
        assert!(close(combine(log_odds, &used, &cfg(2, 1.0)), all));
        assert!(close(
            combine(log_odds, &used, &cfg(2, 0.3)),
            0.7 * strongest + 0.3 * all
        ));
        // Every feature alike: when off, or when there are no more than the strongest.
        assert!(close(combine(log_odds, &used, &cfg(0, 0.3)), all));
        assert!(close(combine(log_odds, &used, &cfg(3, 0.3)), all));
        // Strength is by magnitude: a strong ham feature is among the strongest.
        let used = [("a", 1, 1.0), ("b", 1, -6.0), ("c", 1, 2.0)];
        let got = combine(-3.0, &used, &cfg(1, 0.0));
        assert!(close(got, -6.0), "{got}");
    }

    #[test]
    fn counts_never_go_negative() {
        let mut tc = TokenCounts::default();
        apply(&mut tc, Class::Spam, 3, 1);
        assert_eq!(tc.occurrences, [0, 3]);
        apply(&mut tc, Class::Spam, 5, -1);
        assert_eq!(tc, TokenCounts::default());
    }

    #[test]
    fn a_message_with_no_evidence_is_not_ham_by_the_prior_alone() {
        struct Table(Totals, std::collections::HashMap<&'static str, TokenCounts>);
        impl CountSource for Table {
            fn totals(&self) -> Totals {
                self.0
            }
            fn token(&self, feature: &str) -> Option<TokenCounts> {
                self.1.get(feature).copied()
            }
        }
        let meeting = TokenCounts {
            occurrences: [500, 0],
            messages: [500, 0],
        };
        let counts = Table(
            Totals {
                messages: [1000, 50],
                occurrences: [500, 0],
                presences: [500, 0],
                vocabulary: 1,
            },
            [("meeting", meeting)].into_iter().collect(),
        );
        let unseen: Features = ["qwzrt", "plokmj", "vbnzx"].into_iter().collect();
        let v = classify(&unseen, &counts, &ModelConfig::default());
        assert_eq!(
            v.decision,
            Decision::Unsure,
            "score {} from no feature",
            v.score
        );
    }
}
