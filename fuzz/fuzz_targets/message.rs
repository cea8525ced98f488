//! Any bytes as a message, through everything spamnb does with one: parse, tokenize,
//! evaluate rules (ours, and SpamAssassin's when its files are installed), score, take
//! both digests, and add the X-Spam headers. Nothing may panic or hang.

#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use spamnb::config::Config;
use spamnb::eval::table::Table;
use spamnb::features::Extractor;
use spamnb::message::DigestKind;
use spamnb::model::{self, Class, Decision};

/// Rules compile once per process; SpamAssassin's set takes most of a second.
fn extractor_and_counts() -> &'static (Extractor, Table) {
    static ONCE: OnceLock<(Extractor, Table)> = OnceLock::new();
    ONCE.get_or_init(|| {
        let mut paths = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rules")];
        let sa = PathBuf::from("/usr/share/spamassassin");
        if sa.is_dir() {
            paths.push(sa);
        }
        let (rules, _) = spamnb::rules::RuleSet::load(&paths);
        let mut extractor = Config::default().extractor;
        extractor.rules = Some(Arc::new(rules));
        // A little learned, so that scoring runs its whole course.
        let mut table = Table::new();
        let ham = b"From: a@example.org\nSubject: lunch\n\nSee you at noon.\n";
        let spam = b"From: b@example.com\nSubject: FREE MONEY\n\nClick http://192.0.2.1/ now!\n";
        for _ in 0..60 {
            table.learn(&extractor.features(ham), Class::Ham, 1);
            table.learn(&extractor.features(spam), Class::Spam, 1);
        }
        (extractor, table)
    })
}

fuzz_target!(
    init: {
        extractor_and_counts();
    },
    |raw: &[u8]| {
        let (extractor, table) = extractor_and_counts();
        // As scoring reads it: the words hidden in HTML read a second way too.
        let readings = extractor.readings(raw);
        let cfg = model::ModelConfig::default();
        let mut verdict = model::classify_readings(&readings, table, &cfg);
        for kind in DigestKind::ALL {
            kind.of(raw);
        }
        // The headers of every decision, whatever the score said.
        for decision in [Decision::Spam, Decision::Ham, Decision::Unsure] {
            verdict.decision = decision;
            spamnb::spam_headers::tagged(raw, &verdict, &cfg);
        }
    }
);
