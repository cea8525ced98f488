//! [`Features`]: what a message is made of, as the model sees it: feature → count.
//!
//! Word tokens, header-tagged tokens, URL tokens, rule hits (`rule:NAME`) and form
//! anomalies (`anomaly:NAME`) all land in one bag; the model weighs them alike.

use std::hash::Hasher;

/// Features and their counts. The names lie end to end in one string and the table holds
/// where each starts: a message has hundreds of distinct tokens, and a `String` apiece
/// made allocation a tenth of scoring's time.
#[derive(Debug, Clone, Default)]
pub struct Features {
    text: String,
    table: hashbrown::HashTable<Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// [`feature_hash`] of the name, kept so that growing the table never rehashes.
    hash: u64,
    start: usize,
    end: usize,
    count: u32,
}

impl Features {
    pub fn new() -> Features {
        Features::default()
    }

    /// Room for about `features` distinct features of `bytes` bytes in all: a table grown
    /// step by step rehashes every entry at each step.
    pub fn with_capacity(features: usize, bytes: usize) -> Features {
        Features {
            text: String::with_capacity(bytes),
            table: hashbrown::HashTable::with_capacity(features),
        }
    }

    /// Gives back the room [`Features::with_capacity`] reserved and no feature took: a
    /// batch of lessons holds a thousand of these at once.
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.table.shrink_to_fit(|e| e.hash);
    }

    pub fn add(&mut self, feature: &str) {
        self.add_n(feature, 1);
    }

    pub fn add_n(&mut self, feature: &str, n: u32) {
        let start = self.text.len();
        self.text.push_str(feature);
        self.count_from(start, n);
    }

    /// Adds the feature that `parts` make end to end (a tag and a word: `subj:` `free`)
    /// without building it in a string of its own.
    pub fn add_joined(&mut self, parts: &[&str]) {
        let start = self.text.len();
        for part in parts {
            self.text.push_str(part);
        }
        self.count_from(start, 1);
    }

    /// Counts the feature just written at the end of the text: it stays there if it is
    /// new, and is taken off again if it was there before.
    fn count_from(&mut self, start: usize, n: u32) {
        let text = &self.text;
        let feature = &text[start..];
        let hash = feature_hash(feature);
        if let Some(e) = self
            .table
            .find_mut(hash, |e| &text[e.start..e.end] == feature)
        {
            e.count = e.count.saturating_add(n);
            self.text.truncate(start);
            return;
        }
        let entry = Entry {
            hash,
            start,
            end: self.text.len(),
            count: n,
        };
        self.table.insert_unique(hash, entry, |e| e.hash);
    }

    /// Distinct features and how often each occurred.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.iter_hashed().map(|(_, feature, n)| (feature, n))
    }

    /// [`Features::iter`] with each feature's [`feature_hash`], taken once when it was
    /// added: the store places and finds counts by it.
    pub fn iter_hashed(&self) -> impl Iterator<Item = (u64, &str, u32)> {
        self.iter_hashed_if(|_| true)
    }

    /// [`Features::iter_hashed`] of the features whose hash `keep` accepts; the others'
    /// names are never read (the store merges a batch in shards by hash).
    pub fn iter_hashed_if(
        &self,
        keep: impl Fn(u64) -> bool,
    ) -> impl Iterator<Item = (u64, &str, u32)> {
        self.table
            .iter()
            .filter(move |e| keep(e.hash))
            .map(|e| (e.hash, &self.text[e.start..e.end], e.count))
    }

    pub fn count(&self, feature: &str) -> u32 {
        self.table
            .find(feature_hash(feature), |e| {
                &self.text[e.start..e.end] == feature
            })
            .map_or(0, |e| e.count)
    }

    /// Number of distinct features.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Names of the rules that hit, sorted: what `X-Spam-Status: tests=` lists.
    pub fn rule_hits(&self) -> Vec<&str> {
        let mut hits: Vec<&str> = self
            .iter()
            .filter_map(|(f, _)| f.strip_prefix(RULE_PREFIX))
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

/// The hash of a feature name: FNV-1a with a SplitMix64 finish. Fixed for all time, since
/// the store places features in buckets on disk by it; fast on short strings; with
/// well-mixed high bits.
pub fn feature_hash(feature: &str) -> u64 {
    let mut h = FeatureHasher::default();
    h.write(feature.as_bytes());
    h.finish()
}

struct FeatureHasher(u64);

impl Default for FeatureHasher {
    fn default() -> Self {
        FeatureHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for FeatureHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
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
    /// `raw`'s features as they are learned.
    pub fn features(&self, raw: &[u8]) -> Features {
        self.read(raw, false).learned
    }

    /// `raw`'s features as they are scored: see [`Readings`].
    pub fn readings(&self, raw: &[u8]) -> Readings {
        self.read(raw, true)
    }

    fn read(&self, raw: &[u8], both: bool) -> Readings {
        use crate::tokenize::{body_words, hidden_as_words, other_tokens, read_twice};
        let msg = crate::message::Message::parse(raw, self.scan_limit);
        // About one distinct feature per 8 bytes of text, and half its bytes: a guess
        // that spares most of the growing without reserving much a message never uses.
        let mut learned =
            Features::with_capacity(msg.text.len() / 8 + 64, msg.text.len() / 2 + 1024);
        other_tokens(&msg, &self.tokenizer, &mut learned);
        if let Some(rules) = &self.rules {
            for name in rules.evaluate(&msg) {
                learned.add_joined(&[RULE_PREFIX, name]);
            }
        }
        // The second reading adds the hidden words as words to the first: the rest is made
        // once.
        body_words(&msg, &self.tokenizer, &mut learned);
        let hidden_read = (both && read_twice(&msg)).then(|| {
            let mut hidden_read = learned.clone();
            hidden_as_words(&msg, &self.tokenizer, &mut hidden_read);
            hidden_read
        });
        Readings {
            learned,
            hidden_read,
        }
    }
}

/// A message's features as it is scored. Its hidden words are features of their own
/// (`hidden:WORD`), so that ham words padded in out of the reader's sight cannot lend
/// spam their standing. But a message mostly hidden may be shown whole by a style sheet
/// spamnb does not read, its words out of the weighing, and hidden words a style rule for
/// some readers only shows (`@media (min-width: 1px)`, `.p:not(.q)`) may be what those see:
/// such a message is read a second time with those hidden words (all of them, when most
/// of the text is hidden) as words besides, and the spammier reading is its score. A rule
/// for some readers that would show padding is thus no way to have it weighed as words.
/// Either way a sender gains nothing: more padding makes it no cleaner, and hiding
/// everything hides nothing. Learned is always the first reading, so padding never teaches
/// its words as spam.
///
/// The second reading keeps the hidden words' own features, and is made only for those
/// two: a newsletter's hidden preheader ("free shipping this weekend") is ham as `hidden:`
/// words learned from the same sender's letters, and spam as words in plain sight. Read
/// both ways whenever any text was hidden, such ham scored unsure.
#[derive(Debug, Clone)]
pub struct Readings {
    pub learned: Features,
    /// For a message read twice (`tokenize::read_twice`): the first reading with its
    /// hidden words that readers may see as words too.
    pub hidden_read: Option<Features>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extractor() -> Extractor {
        Extractor {
            tokenizer: crate::tokenize::TokenizerOptions::default(),
            scan_limit: 1 << 20,
            rules: None,
        }
    }

    #[test]
    fn a_feature_joined_from_parts_is_the_same_feature_as_whole() {
        let mut f = Features::with_capacity(1, 0);
        f.add("subj:free");
        f.add_joined(&["subj", ":", "free"]);
        f.add_joined(&["rule:", "X"]);
        f.add_n("rule:X", 2);
        f.add_joined(&["subj:", "freedom"]);
        assert_eq!(f.count("subj:free"), 2);
        assert_eq!(f.count("rule:X"), 3);
        assert_eq!(f.count("subj:freedom"), 1);
        assert_eq!(f.len(), 3);
        // A feature seen before is counted, not written again.
        assert_eq!(f.text, "subj:freerule:Xsubj:freedom");
        for (hash, feature, _) in f.iter_hashed() {
            assert_eq!(hash, feature_hash(feature));
        }
    }

    #[test]
    fn a_shrunk_table_keeps_every_feature_and_takes_more() {
        let mut f = Features::with_capacity(4096, 1 << 16);
        for i in 0..100 {
            f.add_n(&format!("w{i}"), i);
        }
        f.shrink_to_fit();
        assert!(f.table.capacity() < 4096 && f.text.capacity() < 1 << 16);
        assert_eq!(f.len(), 100);
        assert!((0..100).all(|i| f.count(&format!("w{i}")) == i));
        f.add("w7");
        f.add("new");
        assert_eq!((f.count("w7"), f.count("new"), f.len()), (8, 1, 101));
    }

    /// Ham words padded in out of sight make spam no cleaner, however many: past half the
    /// text, they were read as words, and a spam padded with three times its length of
    /// hidden ham was scored ham. A message hidden whole is scored on its words.
    #[test]
    fn hidden_padding_never_makes_spam_cleaner() {
        use crate::eval::table::Table;
        use crate::model::{Class, Decision, ModelConfig, classify_readings};
        let html = |shown: &str, hidden: &str| {
            format!(
                "From: a@example.org\nSubject: offer\nContent-Type: text/html\n\n\
                 <p>{shown}</p><div style=\"display:none\">{hidden}</div>\n"
            )
        };
        let spam = "cheap pills without prescription order today discreet shipping";
        let ham = "meeting agenda minutes budget review project schedule quarterly ";
        let ex = extractor();
        let mut table = Table::new();
        for _ in 0..50 {
            table.learn(&ex.features(html(spam, "").as_bytes()), Class::Spam, 1);
            table.learn(&ex.features(html(ham, "").as_bytes()), Class::Ham, 1);
        }
        let cfg = ModelConfig::default();
        let score = |raw: &str| classify_readings(&ex.readings(raw.as_bytes()), &table, &cfg);
        let bare = score(&html(spam, "")).score;
        for pad in [1, 2, 5, 20] {
            let verdict = score(&html(spam, &ham.repeat(pad)));
            assert!(
                verdict.score >= bare - 1e-9,
                "{pad}: {} < {bare}",
                verdict.score
            );
        }
        // Hidden whole, to be shown by a style sheet that is not read: still spam.
        let verdict = score(&html("hello", spam));
        assert_eq!(verdict.decision, Decision::Spam, "{}", verdict.score);
        // Shown by a rule for some readers only, which may be none (it matches nothing, or
        // no screen is so wide): the padding is still not weighed as words alone.
        for rule in [
            "div:not(div){display:block!important}",
            "@media (min-width:100000px){div{display:block!important}}",
        ] {
            let raw =
                html(spam, &ham.repeat(5)).replace("<p>", &format!("<style>{rule}</style><p>"));
            let verdict = score(&raw);
            assert!(
                verdict.score >= bare - 1e-9,
                "{rule}: {} < {bare}",
                verdict.score
            );
        }
        // A pitch hidden inline, in less than half the text, and shown to some readers is
        // weighed as words, as it is shown plainly.
        let plain = score(&html(&format!("{ham}{spam}"), "")).score;
        let pitch = |rule: &str| {
            html(
                &format!("{ham}<span style=\"display:none\">{spam}</span>"),
                "",
            )
            .replace("<p>", &format!("<style>{rule}</style><p>"))
        };
        let unread = score(&pitch("")).score;
        assert!(unread < plain - 1.0, "{unread} {plain}");
        for rule in [
            "span:not(.q){display:inline!important}",
            "@media (min-width:1px){span{display:inline!important}}",
        ] {
            let verdict = score(&pitch(rule));
            assert!(
                verdict.score >= plain - 1e-9,
                "{rule}: {} < {plain}",
                verdict.score
            );
        }
    }

    /// Random bytes, cut and bit-flipped messages, deep MIME nesting: features, never a
    /// panic, with spamnb's own rules run on each (their evals parse dates, HTML, headers)
    /// and a rule on the MIME parts' headers.
    #[test]
    fn hostile_input_never_panics() {
        let base = b"From: a@b.example\r\nSubject: =?utf-8?b?w7w=?= hi\r\nContent-Type: multipart/mixed; boundary=\"B\"\r\n\r\n--B\r\nContent-Type: text/html; charset=koi8-r\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<a href=3D\"http://x.example/\">=E1=E2</a>\r\n--B\r\nContent-Type: application/octet-stream; name=\"a.exe\"\r\nContent-Transfer-Encoding: base64\r\n\r\nTVqQAAMAAAAEAAAA//8AALgAAAAA\r\n--B--\r\n";
        let ex = Extractor {
            rules: Some(std::sync::Arc::new(crate::rules::RuleSet::built_in().0)),
            ..extractor()
        };
        // And the MIME part headers, which spamnb's own rules do not read.
        let mime = "mimeheader PARTS Content-Type =~ /x/\n";
        let with_mime = Extractor {
            rules: Some(std::sync::Arc::new(
                crate::rules::RuleSet::from_text(mime, std::path::Path::new("t.cf")).0,
            )),
            ..extractor()
        };
        let mut rand = crate::xorshift(7);
        // What the evals look at, half-formed, dropped anywhere.
        let snippets: [&[u8]; 8] = [
            b"<img width=99999999999999999999 height=",
            b"\r\nDate: Mon, 99 Foo 99999 99:99:99 +9999\r\n",
            b"<head><head></head></body><html",
            b"=?utf-8?q?=",
            b"<a href=\"http://[::1\">www.",
            b"\r\nFrom: 99999999999999999999@\r\n",
            b"\xc3\xff\xfe",
            b"\r\nSubject: \r\n",
        ];
        for round in 0..4000 {
            let mut msg = base.to_vec();
            match round % 4 {
                3 => {
                    for _ in 0..4 {
                        let at = rand() as usize % msg.len();
                        let s = snippets[rand() as usize % snippets.len()];
                        msg.splice(at..at, s.iter().copied());
                    }
                }
                0 => msg.truncate(rand() as usize % base.len()),
                1 => {
                    for _ in 0..8 {
                        let at = rand() as usize % msg.len();
                        msg[at] = rand() as u8;
                    }
                }
                _ => msg = (0..rand() % 2000).map(|_| rand() as u8).collect(),
            }
            let _ = ex.features(&msg);
            let _ = with_mime.features(&msg);
        }
        let mut nested = Vec::new();
        for i in 0..5000 {
            nested.extend_from_slice(
                format!("Content-Type: multipart/mixed; boundary=\"b{i}\"\r\n\r\n--b{i}\r\n")
                    .as_bytes(),
            );
        }
        nested.extend_from_slice(b"Content-Type: text/plain\r\n\r\ndeep\r\n");
        assert!(!ex.features(&nested).is_empty());
        // The rules did run: this one's subject is all capitals.
        let shouting = b"Subject: FREE MONEY NOW\r\n\r\nhello\r\n";
        assert!(ex.features(shouting).rule_hits().contains(&"SUBJ_ALL_CAPS"));
        assert!(with_mime.features(base).rule_hits().contains(&"PARTS"));
    }

    /// A shop's newsletter (ham) with a hidden preheader, as most newsletters carry, in
    /// less than half its text: its hidden words, learned as `hidden:WORD` from the same
    /// shop's earlier letters, are ham; the same words in plain sight are spam's. It is
    /// scored as read once: read both ways, as any message with hidden text was for a
    /// while, it scored unsure (-1.2, from -23.2).
    #[test]
    fn a_newsletter_preheader_makes_ham_no_spammier() {
        use crate::eval::table::Table;
        use crate::model::{Class, Decision, ModelConfig, classify, classify_readings};
        let letter = |pre: &str, shown: &str| {
            format!(
                "From: news@shop.example\nSubject: this week\nContent-Type: text/html\n\n\
                 <div style=\"display:none\">{pre}</div><p>{shown}</p>\n"
            )
        };
        let pre = "free shipping on every order this weekend only save big";
        let shown = "garden tools catalogue spring planting guide store hours newsletter \
                     seeds compost watering roses hedges lawn mowers pruning shears";
        let spam = "free shipping every order weekend only save big cheap pills";
        let ex = extractor();
        let mut table = Table::new();
        for _ in 0..50 {
            table.learn(&ex.features(letter(pre, shown).as_bytes()), Class::Ham, 1);
            table.learn(&ex.features(letter("", spam).as_bytes()), Class::Spam, 1);
        }
        let cfg = ModelConfig::default();
        let raw = letter(
            pre,
            "garden tools catalogue summer sale store newsletter seeds compost \
             watering roses hedges lawn mowers pruning shears",
        );
        let once = classify(&ex.features(raw.as_bytes()), &table, &cfg);
        assert_eq!(once.decision, Decision::Ham, "{}", once.score);
        let both = classify_readings(&ex.readings(raw.as_bytes()), &table, &cfg);
        assert_eq!(
            both.decision, once.decision,
            "read once {} {:?}, both ways {} {:?}",
            once.score, once.decision, both.score, both.decision
        );
    }
}
