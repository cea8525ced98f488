//! Learning in groups: the lessons of TELLs that arrive while another is being written are
//! written together, as one batch, by whichever of them gets the store next.
//!
//! One write per TELL made `spamnb learn` through the daemon ten times slower than learning
//! with the database open, and the database four times larger: each write rewrites the
//! count buckets its message touches. A group costs about what one message costs, and the
//! store keeps its promises per batch (all or nothing, a message twice in a batch counted
//! once), so each TELL still gets its own exact outcome.
//!
//! A TELL is answered once its group is on disk: `spamc -L` saying "learned" promises that a
//! crash of the daemon does not take it back. The disk write is the group's too, so under
//! load a write waits for one sync, not one per TELL. Autolearning, which nobody awaits,
//! leaves its lessons to the database's own flush within a second.

use std::sync::{Arc, Mutex, OnceLock};

use crate::engine::Engine;
use crate::store::{Error, Lesson, Outcome};

/// A batch that failed fails every TELL in it; each is told why.
pub type Learned = Result<Outcome, Arc<Error>>;

#[derive(Default)]
pub struct Learner {
    waiting: Mutex<Vec<Waiting>>,
    /// Held by the one writing a group; the others wait here for their answer.
    writing: Mutex<()>,
}

struct Waiting {
    lesson: Lesson,
    durable: Durable,
    answer: Arc<OnceLock<Learned>>,
}

/// Whether a lesson's answer waits until it is on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durable {
    /// A TELL: the client is told what was learned, and may rely on it.
    Synced,
    /// Autolearning: nobody is told; a crash within the database's flush interval loses it.
    Eventually,
}

impl Learner {
    /// Learns `lesson` with the lessons waiting beside it. Blocking: call it off the runtime.
    pub fn learn(&self, engine: &Engine, lesson: Lesson, durable: Durable) -> Learned {
        let answer = Arc::new(OnceLock::new());
        self.waiting
            .lock()
            .expect("waiting lock is never poisoned")
            .push(Waiting {
                lesson,
                durable,
                answer: answer.clone(),
            });
        let _writing = self.writing.lock().expect("writing lock is never poisoned");
        // Whoever wrote before us may have taken our lesson with theirs.
        if let Some(learned) = answer.get() {
            return learned.clone();
        }
        let group =
            std::mem::take(&mut *self.waiting.lock().expect("waiting lock is never poisoned"));
        let synced = group.iter().any(|w| w.durable == Durable::Synced);
        let (lessons, answers): (Vec<Lesson>, Vec<_>) =
            group.into_iter().map(|w| (w.lesson, w.answer)).unzip();
        let learned = engine.learn(&lessons).and_then(|outcomes| {
            if synced {
                engine.store.flush()?;
            }
            Ok(outcomes)
        });
        match learned {
            Ok(outcomes) => {
                for (answer, outcome) in answers.iter().zip(outcomes) {
                    let _ = answer.set(Ok(outcome));
                }
            }
            Err(e) => {
                let e = Arc::new(e);
                for answer in &answers {
                    let _ = answer.set(Err(e.clone()));
                }
            }
        }
        answer
            .get()
            .cloned()
            .expect("our lesson was in the group we wrote")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Class;
    use crate::store::{SledStore, Store};

    /// Lessons that wait together are written as one group, in one write, and each TELL is
    /// answered for its own message, even when the same message is told twice in the group.
    #[test]
    fn a_group_answers_each_tell_for_its_own_message() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SledStore::open(dir.path(), &Default::default()).unwrap());
        let engine = Arc::new(Engine {
            extractor: Default::default(),
            model: Default::default(),
            store: store.clone(),
        });
        let learner = Arc::new(Learner::default());
        let told = [
            (b"Subject: a\r\n\r\ncheap pills\r\n".as_slice(), Class::Spam),
            (
                b"Subject: b\r\n\r\nlunch on friday\r\n".as_slice(),
                Class::Ham,
            ),
            (b"Subject: a\r\n\r\ncheap pills\r\n".as_slice(), Class::Spam),
        ];
        // Holding the writer's place makes every TELL wait: they form one group, in the
        // order told (each waits in line before the next is told).
        let writing = learner.writing.lock().unwrap();
        let tells: Vec<_> = told
            .iter()
            .enumerate()
            .map(|(i, &(raw, class))| {
                let (learner, engine) = (learner.clone(), engine.clone());
                let lesson = engine.lesson(raw, Some(class), None);
                let waiting = learner.clone();
                let tell = std::thread::spawn(move || {
                    learner.learn(&engine, lesson, Durable::Synced).unwrap()
                });
                while waiting.waiting.lock().unwrap().len() <= i {
                    std::thread::yield_now();
                }
                tell
            })
            .collect();
        drop(writing);
        let outcomes: Vec<Outcome> = tells.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(
            outcomes,
            [Outcome::Learned, Outcome::Learned, Outcome::AlreadyKnown]
        );
        assert_eq!(store.pending_writes(), 1, "the three were written at once");
        assert_eq!(store.stats().unwrap().totals.messages, [1, 1]);
    }
}
