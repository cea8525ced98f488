//! The textbook worked examples, through the real learn and score code paths: the sled
//! store learns the training documents, and model::log_joint scores the test document.

use spamnb::features::Features;
use spamnb::message::Digest;
use spamnb::model::{Class, EventModel, ModelConfig, log_joint};
use spamnb::store::{Lesson, SledStore, Store, StoreOptions};

/// Plain multinomial naive Bayes, Laplace smoothing, no feature selection.
fn textbook() -> ModelConfig {
    ModelConfig {
        event_model: EventModel::Multinomial,
        alpha: 1.0,
        min_token_weight: 0.0,
        min_learned: 0,
        ..ModelConfig::default()
    }
}

fn learn(store: &SledStore, docs: &[(&str, Class)]) {
    let lessons: Vec<Lesson> = docs
        .iter()
        .enumerate()
        .map(|(i, (text, class))| Lesson {
            digest: [i as u8; 16] as Digest,
            target: Some(*class),
            features: text.split_whitespace().collect(),
            user: None,
            tentative: false,
        })
        .collect();
    store.learn(&lessons).expect("learn");
}

/// Manning, Raghavan & Schütze, Introduction to Information Retrieval, example 13.1.
#[test]
fn manning_china_example() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
    // "c" = China plays spam here, "not c" ham.
    learn(
        &store,
        &[
            ("Chinese Beijing Chinese", Class::Spam),
            ("Chinese Chinese Shanghai", Class::Spam),
            ("Chinese Macao", Class::Spam),
            ("Tokyo Japan Chinese", Class::Ham),
        ],
    );
    let test: Features = "Chinese Chinese Chinese Tokyo Japan"
        .split_whitespace()
        .collect();
    let joint = log_joint(&test, &store, &textbook());
    let (c, not_c) = (
        joint[Class::Spam.index()].exp(),
        joint[Class::Ham.index()].exp(),
    );
    // P(c|d5) ∝ 3/4 · (3/7)³ · 1/14 · 1/14 ≈ 0.0003; P(c̄|d5) ∝ 1/4 · (2/9)³ · 2/9 · 2/9 ≈ 0.0001
    let expect_c = 0.75 * (3.0f64 / 7.0).powi(3) / 14.0 / 14.0;
    let expect_not_c = 0.25 * (2.0f64 / 9.0).powi(5);
    assert!((c - expect_c).abs() < 1e-12, "{c} vs {expect_c}");
    assert!(
        (not_c - expect_not_c).abs() < 1e-12,
        "{not_c} vs {expect_not_c}"
    );
    assert!((c - 0.0003).abs() < 0.00005 && (not_c - 0.0001).abs() < 0.00005);
}

/// Jurafsky & Martin, Speech and Language Processing, ch. 4: sentiment, "predictable with no fun".
#[test]
fn jurafsky_martin_sentiment_example() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
    // negative plays ham, positive plays spam.
    learn(
        &store,
        &[
            ("just plain boring", Class::Ham),
            ("entirely predictable and lacks energy", Class::Ham),
            ("no surprises and very few laughs", Class::Ham),
            ("very powerful", Class::Spam),
            ("the most fun film of the summer", Class::Spam),
        ],
    );
    // "with" was never seen: it is ignored, not smoothed.
    let test: Features = "predictable with no fun".split_whitespace().collect();
    let joint = log_joint(&test, &store, &textbook());
    let (negative, positive) = (
        joint[Class::Ham.index()].exp(),
        joint[Class::Spam.index()].exp(),
    );
    assert!((negative - 6.1e-5).abs() < 0.05e-5, "{negative}");
    // 2/5 · 1/29 · 1/29 · 2/29 = 3.28·10⁻⁵, which the book truncates to 3.2·10⁻⁵.
    assert!(
        (positive - 2.0 / 5.0 * 2.0 / 29f64.powi(3)).abs() < 1e-15,
        "{positive}"
    );
    assert!(positive > 3.2e-5 && positive < 3.3e-5, "{positive}");
    assert!((negative - 3.0 / 5.0 * 2.0 * 2.0 * 1.0 / 34f64.powi(3)).abs() < 1e-15);
}
