//! The sled implementation of [`Store`].
//!
//! One sled tree, keys prefixed by kind (`t` + feature, `l` + digest, `m` + name), so that
//! one message's token counts, the class totals and its ledger entry go to disk in one
//! `apply_batch`, which sled applies atomically.
//!
//! Scoring reads counts from memory, never from disk: [`SledStore::preload`] copies the
//! token table into a map keyed by a 64-bit hash of the feature (24 bytes an entry, a
//! third of what owned strings would cost). A collision between two features would merge
//! their counts in memory only; at a million features its chance is about 3·10⁻⁸. Without
//! a preload (one message through `spamnb filter`), counts are read from sled's cache:
//! loading the table would cost more than the few hundred lookups one message needs.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Error, LedgerEntry, Lesson, Outcome, SCHEMA_VERSION, Stats, Store};
use crate::message::Digest;
use crate::model::{self, Class, CountSource, TokenCounts, Totals};

const TOKEN: u8 = b't';
const LEDGER: u8 = b'l';
const META_SCHEMA: &[u8] = b"mschema";
const META_TOTALS: &[u8] = b"mtotals";

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Upper bound of sled's page cache.
    pub cache_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 32 << 20,
        }
    }
}

type TokenTable = HashMap<u64, TokenCounts, BuildHasherDefault<PrehashedKey>>;

pub struct SledStore {
    path: PathBuf,
    db: sled::Db,
    totals: RwLock<Totals>,
    /// The whole token table, once preloaded. A std RwLock: readers (scoring, on blocking
    /// threads) hold it for microseconds and never across an await.
    table: RwLock<Option<TokenTable>>,
    /// One writer at a time: learning reads counts, adds to them and writes them back.
    writer: Mutex<()>,
}

impl SledStore {
    pub fn open(path: &Path, opts: &StoreOptions) -> Result<SledStore, Error> {
        refuse_foreign_directory(path)?;
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(opts.cache_bytes)
            .flush_every_ms(Some(1000));
        // sled has been seen to panic on some damaged files instead of returning an error.
        let db = match catch_unwind(AssertUnwindSafe(|| config.open())) {
            Ok(Ok(db)) => db,
            Ok(Err(e)) => return Err(open_error(path, e)),
            Err(_) => {
                return Err(Error::Corrupt {
                    path: path.into(),
                    reason: "the storage engine could not read its files".into(),
                });
            }
        };
        let store = SledStore {
            path: path.into(),
            db,
            totals: RwLock::new(Totals::default()),
            table: RwLock::new(None),
            writer: Mutex::new(()),
        };
        store.check_schema()?;
        let totals = store.read_totals()?;
        *store
            .totals
            .write()
            .expect("totals lock is never poisoned: no panics while held") = totals;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies all counts into memory so that scoring never waits on disk.
    pub fn preload(&self) -> Result<(), Error> {
        let mut table = TokenTable::default();
        table.reserve(self.totals().vocabulary as usize);
        self.for_each_token(&mut |feature, counts| {
            table.insert(feature_key(feature), counts);
        })?;
        *self.table.write().expect("table lock is never poisoned") = Some(table);
        Ok(())
    }

    fn check_schema(&self) -> Result<(), Error> {
        match self.db.get(META_SCHEMA).map_err(|e| self.corrupt(e))? {
            Some(v) => {
                let found =
                    u32::from_le_bytes(v.as_ref().try_into().map_err(|_| Error::Foreign {
                        path: self.path.clone(),
                    })?);
                if found != SCHEMA_VERSION {
                    return Err(Error::Schema {
                        path: self.path.clone(),
                        found,
                        expected: SCHEMA_VERSION,
                    });
                }
                Ok(())
            }
            None if self.db.is_empty() => {
                self.db
                    .insert(META_SCHEMA, &SCHEMA_VERSION.to_le_bytes())
                    .map_err(|e| Error::Write(e.to_string()))?;
                self.db.flush().map_err(|e| Error::Write(e.to_string()))?;
                Ok(())
            }
            None => Err(Error::Foreign {
                path: self.path.clone(),
            }),
        }
    }

    fn read_totals(&self) -> Result<Totals, Error> {
        match self.db.get(META_TOTALS).map_err(|e| self.corrupt(e))? {
            None => Ok(Totals::default()),
            Some(v) => decode_totals(&v).ok_or_else(|| Error::Corrupt {
                path: self.path.clone(),
                reason: "the class totals are unreadable".into(),
            }),
        }
    }

    fn corrupt(&self, e: sled::Error) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    fn read_token(&self, feature: &str) -> Result<TokenCounts, Error> {
        if let Some(table) = self
            .table
            .read()
            .expect("table lock is never poisoned")
            .as_ref()
        {
            return Ok(table
                .get(&feature_key(feature))
                .copied()
                .unwrap_or_default());
        }
        let v = self
            .db
            .get(token_key(feature))
            .map_err(|e| self.corrupt(e))?;
        Ok(v.and_then(|v| decode_counts(&v)).unwrap_or_default())
    }
}

impl CountSource for SledStore {
    fn totals(&self) -> Totals {
        *self.totals.read().expect("totals lock is never poisoned")
    }

    fn token(&self, feature: &str) -> Option<TokenCounts> {
        // A read error while scoring counts as "not learned": the verdict degrades, mail flows.
        self.read_token(feature).ok().filter(|c| !c.is_zero())
    }
}

impl Store for SledStore {
    fn ledger_entry(&self, digest: &Digest) -> Result<Option<LedgerEntry>, Error> {
        let v = self
            .db
            .get(ledger_key(digest))
            .map_err(|e| self.corrupt(e))?;
        Ok(v.and_then(|v| decode_ledger(&v)))
    }

    fn learn(&self, lessons: &[Lesson]) -> Result<Vec<Outcome>, Error> {
        let _writer = self.writer.lock().expect("writer lock is never poisoned");
        let mut totals = self.totals();
        // Counts as they were before this batch, and as they are becoming.
        let mut before: HashMap<&str, TokenCounts> = HashMap::new();
        let mut after: HashMap<&str, TokenCounts> = HashMap::new();
        let mut ledger: HashMap<Digest, Option<LedgerEntry>> = HashMap::new();
        let mut outcomes = Vec::with_capacity(lessons.len());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());

        for lesson in lessons {
            let known = match ledger.get(&lesson.digest) {
                Some(entry) => entry.clone(),
                None => self.ledger_entry(&lesson.digest)?,
            };
            let known_class = known.as_ref().map(|e| e.class);
            let (outcome, moves): (Outcome, &[(Class, i64)]) = match (known_class, lesson.target) {
                (Some(k), Some(t)) if k == t => (Outcome::AlreadyKnown, &[]),
                (Some(Class::Ham), Some(Class::Spam)) => {
                    (Outcome::Relearned, &[(Class::Ham, -1), (Class::Spam, 1)])
                }
                (Some(Class::Spam), Some(Class::Ham)) => {
                    (Outcome::Relearned, &[(Class::Spam, -1), (Class::Ham, 1)])
                }
                (None, Some(Class::Ham)) => (Outcome::Learned, &[(Class::Ham, 1)]),
                (None, Some(Class::Spam)) => (Outcome::Learned, &[(Class::Spam, 1)]),
                (Some(Class::Ham), None) => (Outcome::Forgotten, &[(Class::Ham, -1)]),
                (Some(Class::Spam), None) => (Outcome::Forgotten, &[(Class::Spam, -1)]),
                (None, None) => (Outcome::NotLearned, &[]),
                (Some(_), Some(_)) => unreachable!("equal classes are matched first"),
            };
            for &(class, sign) in moves {
                let c = class.index();
                totals.messages[c] = (totals.messages[c] as i64 + sign).max(0) as u64;
                for (feature, n) in lesson.features.iter() {
                    let counts = match after.get_mut(feature) {
                        Some(counts) => counts,
                        None => {
                            let current = self.read_token(feature)?;
                            before.insert(feature, current);
                            after.entry(feature).or_insert(current)
                        }
                    };
                    let (old_occ, old_msg) = (counts.occurrences[c], counts.messages[c]);
                    model::apply(counts, class, n, sign);
                    totals.occurrences[c] = (totals.occurrences[c] as i64
                        + counts.occurrences[c] as i64
                        - old_occ as i64) as u64;
                    totals.presences[c] = (totals.presences[c] as i64 + counts.messages[c] as i64
                        - old_msg as i64) as u64;
                }
            }
            if !moves.is_empty() {
                let entry = lesson.target.map(|class| LedgerEntry {
                    class,
                    learned_at: now,
                    user: lesson.user.clone(),
                });
                ledger.insert(lesson.digest, entry);
            }
            outcomes.push(outcome);
        }

        let mut batch = sled::Batch::default();
        for (feature, counts) in &after {
            let was_zero = before.get(feature).is_none_or(TokenCounts::is_zero);
            match (was_zero, counts.is_zero()) {
                (true, false) => totals.vocabulary += 1,
                (false, true) => totals.vocabulary = totals.vocabulary.saturating_sub(1),
                _ => {}
            }
            if counts.is_zero() {
                batch.remove(token_key(feature));
            } else {
                batch.insert(token_key(feature), encode_counts(counts).to_vec());
            }
        }
        for (digest, entry) in &ledger {
            match entry {
                Some(entry) => batch.insert(ledger_key(digest), encode_ledger(entry)),
                None => batch.remove(ledger_key(digest)),
            }
        }
        batch.insert(META_TOTALS, encode_totals(&totals));
        self.db
            .apply_batch(batch)
            .map_err(|e| Error::Write(e.to_string()))?;

        // The disk has it; now memory follows.
        if let Some(table) = self
            .table
            .write()
            .expect("table lock is never poisoned")
            .as_mut()
        {
            for (feature, counts) in &after {
                if counts.is_zero() {
                    table.remove(&feature_key(feature));
                } else {
                    table.insert(feature_key(feature), *counts);
                }
            }
        }
        *self.totals.write().expect("totals lock is never poisoned") = totals;
        Ok(outcomes)
    }

    fn stats(&self) -> Result<Stats, Error> {
        Ok(Stats {
            totals: self.totals(),
            ledger_entries: self.db.scan_prefix([LEDGER]).count() as u64,
            size_on_disk: self.db.size_on_disk().map_err(|e| self.corrupt(e))?,
            schema_version: SCHEMA_VERSION,
        })
    }

    fn flush(&self) -> Result<(), Error> {
        self.db.flush().map_err(|e| Error::Write(e.to_string()))?;
        Ok(())
    }

    fn for_each_token(&self, each: &mut dyn FnMut(&str, TokenCounts)) -> Result<(), Error> {
        for kv in self.db.scan_prefix([TOKEN]) {
            let (k, v) = kv.map_err(|e| self.corrupt(e))?;
            let feature = std::str::from_utf8(&k[1..]).map_err(|_| Error::Corrupt {
                path: self.path.clone(),
                reason: "a feature name is not UTF-8".into(),
            })?;
            let counts = decode_counts(&v).ok_or_else(|| Error::Corrupt {
                path: self.path.clone(),
                reason: format!("the counts of {feature:?} are unreadable"),
            })?;
            each(feature, counts);
        }
        Ok(())
    }

    fn for_each_ledger_entry(
        &self,
        each: &mut dyn FnMut(&Digest, &LedgerEntry),
    ) -> Result<(), Error> {
        for kv in self.db.scan_prefix([LEDGER]) {
            let (k, v) = kv.map_err(|e| self.corrupt(e))?;
            let (Ok(digest), Some(entry)) = (Digest::try_from(&k[1..]), decode_ledger(&v)) else {
                return Err(Error::Corrupt {
                    path: self.path.clone(),
                    reason: "a ledger entry is unreadable".into(),
                });
            };
            each(&digest, &entry);
        }
        Ok(())
    }

    fn replace_all(
        &self,
        totals: Totals,
        tokens: &[(String, TokenCounts)],
        ledger: &[(Digest, LedgerEntry)],
    ) -> Result<(), Error> {
        let _writer = self.writer.lock().expect("writer lock is never poisoned");
        if self.db.scan_prefix([TOKEN]).next().is_some()
            || self.db.scan_prefix([LEDGER]).next().is_some()
        {
            return Err(Error::NotEmpty {
                path: self.path.clone(),
            });
        }
        let mut batch = sled::Batch::default();
        for (feature, counts) in tokens {
            batch.insert(token_key(feature), encode_counts(counts).to_vec());
        }
        for (digest, entry) in ledger {
            batch.insert(ledger_key(digest), encode_ledger(entry));
        }
        batch.insert(META_TOTALS, encode_totals(&totals));
        self.db
            .apply_batch(batch)
            .map_err(|e| Error::Write(e.to_string()))?;
        *self.totals.write().expect("totals lock is never poisoned") = totals;
        if self
            .table
            .read()
            .expect("table lock is never poisoned")
            .is_some()
        {
            self.preload()?;
        }
        Ok(())
    }
}

/// sled creates a directory of its own files; anything else in the way is someone else's data.
fn refuse_foreign_directory(path: &Path) -> Result<(), Error> {
    let Ok(entries) = std::fs::read_dir(path) else {
        return Ok(()); // new, or not a directory: sled's own error says which
    };
    let names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let sled_files = names.iter().any(|n| n == "conf" || n == "db");
    if !names.is_empty() && !sled_files {
        return Err(Error::Foreign { path: path.into() });
    }
    Ok(())
}

fn open_error(path: &Path, e: sled::Error) -> Error {
    let reason = e.to_string();
    if reason.contains("could not acquire lock") {
        Error::Locked { path: path.into() }
    } else if matches!(e, sled::Error::Corruption { .. }) {
        Error::Corrupt {
            path: path.into(),
            reason,
        }
    } else {
        Error::Open {
            path: path.into(),
            reason,
        }
    }
}

fn token_key(feature: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(feature.len() + 1);
    k.push(TOKEN);
    k.extend_from_slice(feature.as_bytes());
    k
}

fn ledger_key(digest: &Digest) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(LEDGER);
    k.extend_from_slice(digest);
    k
}

fn feature_key(feature: &str) -> u64 {
    // `DefaultHasher::new()` has fixed keys: a feature maps to one key for the whole run.
    let mut h = std::hash::DefaultHasher::new();
    feature.hash(&mut h);
    h.finish()
}

/// The table's keys are already hashes; hashing them again would only cost time.
#[derive(Default)]
struct PrehashedKey(u64);

impl Hasher for PrehashedKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

fn encode_counts(c: &TokenCounts) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, v) in [
        c.occurrences[0],
        c.occurrences[1],
        c.messages[0],
        c.messages[1],
    ]
    .into_iter()
    .enumerate()
    {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
    out
}

fn decode_counts(b: &[u8]) -> Option<TokenCounts> {
    let word = |i: usize| {
        Some(u32::from_le_bytes(
            b.get(i * 4..i * 4 + 4)?.try_into().ok()?,
        ))
    };
    Some(TokenCounts {
        occurrences: [word(0)?, word(1)?],
        messages: [word(2)?, word(3)?],
    })
}

fn encode_totals(t: &Totals) -> Vec<u8> {
    [
        t.messages[0],
        t.messages[1],
        t.occurrences[0],
        t.occurrences[1],
        t.presences[0],
        t.presences[1],
        t.vocabulary,
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect()
}

fn decode_totals(b: &[u8]) -> Option<Totals> {
    let word = |i: usize| {
        Some(u64::from_le_bytes(
            b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    Some(Totals {
        messages: [word(0)?, word(1)?],
        occurrences: [word(2)?, word(3)?],
        presences: [word(4)?, word(5)?],
        vocabulary: word(6)?,
    })
}

fn encode_ledger(e: &LedgerEntry) -> Vec<u8> {
    let mut out = vec![e.class as u8];
    out.extend_from_slice(&e.learned_at.to_le_bytes());
    out.extend_from_slice(e.user.as_deref().unwrap_or_default().as_bytes());
    out
}

fn decode_ledger(b: &[u8]) -> Option<LedgerEntry> {
    let class = match b.first()? {
        0 => Class::Ham,
        1 => Class::Spam,
        _ => return None,
    };
    let learned_at = u64::from_le_bytes(b.get(1..9)?.try_into().ok()?);
    let user = std::str::from_utf8(b.get(9..)?).ok()?;
    Some(LedgerEntry {
        class,
        learned_at,
        user: (!user.is_empty()).then(|| user.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lesson(id: u8, target: Option<Class>, words: &str) -> Lesson {
        Lesson {
            digest: [id; 16],
            target,
            features: words.split_whitespace().collect(),
            user: None,
        }
    }

    #[test]
    fn learn_relearn_forget_keep_counts_exact() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        let out = store
            .learn(&[
                lesson(1, Some(Class::Spam), "buy buy now"),
                lesson(2, Some(Class::Ham), "now meeting"),
            ])
            .unwrap();
        assert_eq!(out, [Outcome::Learned, Outcome::Learned]);
        assert_eq!(store.token("buy").unwrap().occurrences, [0, 2]);
        let t = store.totals();
        assert_eq!(
            (t.messages, t.occurrences, t.presences, t.vocabulary),
            ([1, 1], [2, 3], [2, 2], 3)
        );

        assert_eq!(
            store
                .learn(&[lesson(1, Some(Class::Spam), "buy buy now")])
                .unwrap(),
            [Outcome::AlreadyKnown]
        );
        assert_eq!(store.totals(), t, "learning twice changes nothing");

        assert_eq!(
            store
                .learn(&[lesson(1, Some(Class::Ham), "buy buy now")])
                .unwrap(),
            [Outcome::Relearned]
        );
        assert_eq!(store.token("buy").unwrap().occurrences, [2, 0]);
        assert_eq!(store.token("now").unwrap().messages, [2, 0]);
        assert_eq!(store.totals().messages, [2, 0]);

        assert_eq!(
            store
                .learn(&[lesson(1, None, "buy buy now"), lesson(9, None, "x")])
                .unwrap(),
            [Outcome::Forgotten, Outcome::NotLearned]
        );
        assert_eq!(store.token("buy"), None);
        let t = store.totals();
        assert_eq!(
            (t.messages, t.occurrences, t.vocabulary),
            ([1, 0], [2, 0], 2)
        );
        assert_eq!(store.ledger_entry(&[1; 16]).unwrap(), None);
    }

    #[test]
    fn preloaded_table_follows_learning_and_reopen_keeps_everything() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
            store.learn(&[lesson(1, Some(Class::Spam), "a b")]).unwrap();
            store.preload().unwrap();
            store
                .learn(&[
                    lesson(2, Some(Class::Ham), "b c"),
                    lesson(2, Some(Class::Spam), "b c"),
                ])
                .unwrap();
            assert_eq!(store.token("b").unwrap().messages, [0, 2]);
            assert_eq!(store.token("c").unwrap().messages, [0, 1]);
            store.flush().unwrap();
        }
        let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        assert_eq!(store.token("b").unwrap().messages, [0, 2]);
        assert_eq!(store.totals().messages, [0, 2]);
        assert_eq!(
            store.ledger_entry(&[2; 16]).unwrap().unwrap().class,
            Class::Spam
        );
    }

    #[test]
    fn refuses_a_foreign_directory_and_a_second_opener() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        assert!(matches!(
            SledStore::open(dir.path(), &StoreOptions::default()),
            Err(Error::Foreign { .. })
        ));

        let db = tempfile::tempdir().unwrap();
        let _first = SledStore::open(db.path(), &StoreOptions::default()).unwrap();
        // flock locks belong to an open file, so a second open in one process is refused too.
        let Err(e) = SledStore::open(db.path(), &StoreOptions::default()) else {
            panic!("a locked database opened twice");
        };
        assert!(matches!(e, Error::Locked { .. }), "{e}");
    }

    #[test]
    fn encodings_round_trip() {
        let c = TokenCounts {
            occurrences: [1, u32::MAX],
            messages: [7, 0],
        };
        assert_eq!(decode_counts(&encode_counts(&c)), Some(c));
        let t = Totals {
            messages: [1, 2],
            occurrences: [3, 4],
            presences: [5, 6],
            vocabulary: 7,
        };
        assert_eq!(decode_totals(&encode_totals(&t)), Some(t));
        let e = LedgerEntry {
            class: Class::Spam,
            learned_at: 99,
            user: Some("ann".into()),
        };
        assert_eq!(decode_ledger(&encode_ledger(&e)), Some(e));
    }
}
