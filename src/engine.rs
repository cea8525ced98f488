//! [`Engine`]: the one path from raw mail to a verdict or a lesson, shared by every front
//! end, so that a message scored through Postfix and the same file given to `spamnb check`
//! get the same verdict, to the bit.

use std::sync::Arc;

use crate::features::{Extractor, Features};
use crate::message::Digest;
use crate::model::{Class, ModelConfig, Verdict, classify_readings};
use crate::store::{Error, Lesson, Outcome, ReadCounts, Store};

pub struct Engine {
    pub extractor: Extractor,
    pub model: ModelConfig,
    pub store: Arc<dyn Store>,
}

impl Engine {
    /// The verdict on `raw`, or the store's error when a count could not be read: a
    /// damaged database fails the check rather than score mail as if it had learned none
    /// of it (the daemon passes the message on unscored, as on any failure).
    pub fn check(&self, raw: &[u8]) -> Result<Verdict, Error> {
        self.scored(raw).map(|(verdict, _)| verdict)
    }

    /// The verdict on `raw`, and the features it was made from.
    fn scored(&self, raw: &[u8]) -> Result<(Verdict, Features), Error> {
        let readings = self.extractor.readings(raw);
        let counts = ReadCounts::new(&*self.store);
        let mut verdict = classify_readings(&readings, &counts, &self.model);
        if let Some(rules) = &self.extractor.rules {
            let decisive = rules.decisive(&verdict.rules);
            verdict.overruled(&decisive);
        }
        counts.finish().map(|()| (verdict, readings.learned))
    }

    /// [`Engine::check`] of a message in transit, which nothing will learn: scored as its
    /// sender sent it, without the tag of an earlier pass of spamnb (see
    /// [`crate::spam_headers::as_sent`]).
    pub fn check_in_transit(&self, raw: &[u8]) -> Result<Verdict, Error> {
        self.check(&crate::spam_headers::as_sent(raw, &self.model.subject_tag))
    }

    /// [`Engine::check`], and when the model autolearns and the verdict is firm enough, the
    /// lesson that learns `raw` as the class it was given: tentative, so that it never
    /// overrides what a person taught. The features are extracted once for both.
    /// The message is in transit: it is scored as its sender sent it, without the tag of an
    /// earlier pass of spamnb (see [`crate::spam_headers::as_sent`]).
    pub fn check_autolearning(&self, raw: &[u8]) -> Result<(Verdict, Option<Lesson>), Error> {
        let raw = &*crate::spam_headers::as_sent(raw, &self.model.subject_tag);
        let (verdict, mut features) = self.scored(raw)?;
        let Some(target) = self.model.autolearned_as(&verdict) else {
            return Ok((verdict, None));
        };
        features.shrink_to_fit();
        let lesson = Lesson {
            digest: self.digest(raw),
            target: Some(target),
            features,
            user: None,
            tentative: true,
        };
        Ok((verdict, Some(lesson)))
    }

    /// What learning (`target` a class) or forgetting (`None`) `raw` means for the store.
    pub fn lesson(&self, raw: &[u8], target: Option<Class>, user: Option<&str>) -> Lesson {
        self.lesson_with_digest(raw, self.digest(raw), target, user)
    }

    /// `raw`'s name in the store's ledger.
    pub fn digest(&self, raw: &[u8]) -> Digest {
        self.store.digest_kind().of(raw)
    }

    /// [`Engine::lesson`] for a caller that has taken the message's digest already.
    pub fn lesson_with_digest(
        &self,
        raw: &[u8],
        digest: Digest,
        target: Option<Class>,
        user: Option<&str>,
    ) -> Lesson {
        let mut features = self.extractor.features(raw);
        features.shrink_to_fit();
        Lesson {
            digest,
            target,
            features,
            user: user.map(str::to_string),
            tentative: false,
        }
    }

    pub fn learn(&self, lessons: &[Lesson]) -> Result<Vec<Outcome>, Error> {
        self.store.learn(lessons)
    }

    /// [`Engine::learn`], with a front end's notes written in the same atomic step.
    pub fn learn_noting(
        &self,
        lessons: &[Lesson],
        notes: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Result<Vec<Outcome>, Error> {
        self.store.learn_noting(lessons, notes)
    }
}

/// The engine the daemon's sessions use, swapped whole when SIGHUP reloads the
/// configuration. Each session takes [`SharedEngine::current`] once when it starts, so a
/// reload never changes the rules under a message being scored. A std RwLock: it is held
/// only to clone or replace an `Arc`, never across an await.
pub struct SharedEngine(std::sync::RwLock<Arc<Engine>>);

impl SharedEngine {
    pub fn new(engine: Engine) -> SharedEngine {
        SharedEngine(std::sync::RwLock::new(Arc::new(engine)))
    }

    pub fn current(&self) -> Arc<Engine> {
        self.0
            .read()
            .expect("engine lock is never poisoned")
            .clone()
    }

    pub fn replace(&self, engine: Engine) {
        *self.0.write().expect("engine lock is never poisoned") = Arc::new(engine);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender's `X-Spam-Prev-Subject` does not stand in for the Subject of mail in
    /// transit; in stored mail it is spamnb's, and says what the subject was before its tag.
    #[test]
    fn mail_in_transit_is_scored_on_the_subject_it_carries() {
        let store = crate::store::SledStore::open_empty(&Default::default()).unwrap();
        let mut extractor = crate::config::Config::default().extractor;
        extractor.rules = Some(Arc::new(crate::rules::RuleSet::built_in().0));
        let engine = Engine {
            extractor,
            model: ModelConfig::default(),
            store: Arc::new(store),
        };
        let raw = b"From: z@example.net\r\nSubject: cheap viagra here\r\n\
            X-Spam-Prev-Subject: meeting\r\n notes\r\nTo: a@example.org\r\n\r\nhello\r\n";
        let (in_transit, _) = engine.check_autolearning(raw).unwrap();
        assert!(
            in_transit.rules.iter().any(|r| r == "VIAGRA_ANY"),
            "{:?}",
            in_transit.rules
        );
        let stored = engine.check(raw).unwrap();
        assert!(
            !stored.rules.iter().any(|r| r == "VIAGRA_ANY"),
            "{:?}",
            stored.rules
        );
        assert_eq!(
            &*crate::message::without_prev_subject(raw),
            &b"From: z@example.net\r\nSubject: cheap viagra here\r\nTo: a@example.org\r\n\r\nhello\r\n"[..]
        );
        let body_only = b"Subject: x\r\n\r\nX-Spam-Prev-Subject: in the body\r\n";
        assert!(matches!(
            crate::message::without_prev_subject(body_only),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
