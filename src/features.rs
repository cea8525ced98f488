//! [`Features`]: what a message is made of, as the model sees it: feature → count.
//!
//! Word tokens, header-tagged tokens, URL tokens, rule hits (`rule:NAME`) and form
//! anomalies (`anomaly:NAME`) all land in one bag; the model weighs them alike.

use std::collections::HashMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    counts: HashMap<String, u32>,
}

impl Features {
    pub fn new() -> Features {
        Features::default()
    }

    pub fn add(&mut self, feature: &str) {
        self.add_n(feature, 1);
    }

    pub fn add_n(&mut self, feature: &str, n: u32) {
        if let Some(count) = self.counts.get_mut(feature) {
            *count = count.saturating_add(n);
        } else {
            self.counts.insert(feature.to_string(), n);
        }
    }

    /// Distinct features and how often each occurred.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.counts.iter().map(|(f, &n)| (f.as_str(), n))
    }

    pub fn count(&self, feature: &str) -> u32 {
        self.counts.get(feature).copied().unwrap_or(0)
    }

    /// Number of distinct features.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Names of the rules that hit, sorted: what `X-Spam-Status: tests=` lists.
    pub fn rule_hits(&self) -> Vec<&str> {
        let mut hits: Vec<&str> = self
            .counts
            .keys()
            .filter_map(|f| f.strip_prefix(RULE_PREFIX))
            .collect();
        hits.sort_unstable();
        hits
    }

    /// Every feature in a stable order (for golden files and dumps).
    pub fn sorted(&self) -> Vec<(&str, u32)> {
        let mut all: Vec<(&str, u32)> = self.iter().collect();
        all.sort_unstable();
        all
    }
}

/// The prefix of a rule hit's feature name.
pub const RULE_PREFIX: &str = "rule:";

impl<'a> FromIterator<&'a str> for Features {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Features {
        let mut f = Features::new();
        for t in iter {
            f.add(t);
        }
        f
    }
}

/// Turns raw mail into [`Features`]: parse, tokenize, and (with rules loaded) rule hits.
/// Holds only immutable settings, so one `Arc<Extractor>` serves every thread.
#[derive(Debug, Clone, Default)]
pub struct Extractor {
    pub tokenizer: crate::tokenize::TokenizerOptions,
    /// Bytes of a message that are parsed; the rest is not looked at.
    pub scan_limit: usize,
    /// Handcrafted rules; each hit adds `rule:NAME`. Compiled once, shared by every thread.
    pub rules: Option<std::sync::Arc<crate::rules::RuleSet>>,
}

impl Extractor {
    pub fn features(&self, raw: &[u8]) -> Features {
        let msg = crate::message::Message::parse(raw, self.scan_limit);
        let mut features = Features::new();
        crate::tokenize::tokenize(&msg, &self.tokenizer, &mut features);
        if let Some(rules) = &self.rules {
            for name in rules.evaluate(&msg) {
                features.add(&format!("{RULE_PREFIX}{name}"));
            }
        }
        features
    }
}
