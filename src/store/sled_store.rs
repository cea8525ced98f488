//! The sled implementation of [`Store`].
//!
//! One sled tree, keys prefixed by kind (`t` + bucket, `p` + sequence number, `l` + digest,
//! `m` + name, `n` + a front end's note key; the bytes are in [`super::layout`]), so that
//! a batch of messages' token counts, the class totals and their ledger entries go to disk
//! in one `apply_batch`, which sled applies atomically.
//!
//! Token counts are kept in 256 buckets (by a fixed hash of the feature), each bucket one
//! sled value listing its features and their counts. A key per feature made sled do a
//! hundred thousand tree inserts for a few hundred messages learned, and hold their garbage
//! until the batch ended (150 MB for 500 messages); a bucket per key cuts that to at most
//! 256 writes per batch, whatever the vocabulary. A batch of a few hundred messages
//! touches nearly every bucket, so it rewrites about the whole table however many buckets
//! there are: what the count decides is sled's work per insert and per page. Schema 1 had
//! 4,096; 256 made `learn` 15–20% faster on the benchmark's corpus. A small batch (a
//! message learned alone) writes only a record of the counts it changed ([`Pending`]),
//! until the records are many enough to fold into the buckets. The price is paid
//! without a preload: a message's few hundred features then read most buckets, which is
//! nothing at a hundred thousand features and about 25 ms more per message at two million
//! (a daemon, which preloads, is the way to run a database that size).
//!
//! Scoring reads counts from memory, never from disk: [`SledStore::preload`] copies the
//! counts into a map keyed by the feature's 64-bit hash (24 bytes an entry, a third of what
//! owned strings would cost). A collision between two features would merge their counts in
//! memory only; at a million features its chance is about 3·10⁻⁸. Without a preload (one
//! message through `spamnb filter`), counts are read from their buckets: loading the table
//! would cost more than the few hundred lookups one message needs.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use super::layout::{
    BucketEntries, FixedEntries, LEDGER, META_DIGEST, META_GENERATION, META_SCHEMA, META_TOTALS,
    PENDING, TOKEN, bucket_key, bucket_of, bucket_of_key, decode_ledger, decode_totals,
    encode_entry, encode_ledger, encode_totals, find_entry, ledger_key, note_key, pending_key,
    pending_seq,
};
use super::{
    CountReader, Error, LedgerEntry, Lesson, Outcome, Pruned, SCHEMA_VERSION, Stats, Store,
};
use crate::features::{RULE_PREFIX, feature_hash};
use crate::message::{Digest, DigestKind};
use crate::model::{Class, CountDelta, CountSource, TokenCounts, Totals};

const MARKER_FILE: &str = "spamnb-database";
const MARKER_TEXT: &str =
    "This directory is a spamnb database (sled). Back it up with `spamnb export`.\n";
/// The marker's line that numbers the last flush that made new counts durable.
const GENERATION_LINE: &str = "generation ";

/// Flushes of new counts, as the database holds the number and as the marker does.
#[derive(Debug, Default)]
struct Generation {
    stored: u64,
    marked: u64,
}

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Upper bound of sled's page cache.
    pub cache_bytes: u64,
    /// How long a command waits for the database while another process holds it
    /// ([`super::LOCK_WAIT`]; `--lock-wait`, not the file: it is the caller's deadline).
    pub lock_wait: std::time::Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 32 << 20,
            lock_wait: super::LOCK_WAIT,
        }
    }
}

type TokenTable = HashMap<u64, TokenCounts, BuildHasherDefault<PrehashedKey>>;

/// A lesson that changes counts, and how: (class, +1 or −1) steps.
type Step<'l> = (&'l Lesson, &'static [(Class, i64)]);

/// One shard's part of a batch: new bucket contents (empty: remove the bucket), and each
/// changed feature with its hash and its counts before and after.
struct Merged<'l> {
    buckets: Vec<([u8; 3], Vec<u8>)>,
    changed: Vec<(u64, &'l str, TokenCounts, TokenCounts)>,
}

/// Counts that small batches changed since the buckets were last rewritten. A message
/// learned alone changes a few hundred features spread over most buckets: rewriting those
/// buckets wrote most of the table for it, and sled's log grew by as much each time (300
/// messages learned one by one took the benchmark's database from 6 to 126 MB). A small
/// batch writes a record of its own changes instead, and the batch that finds the records
/// too many folds them into the buckets.
#[derive(Debug, Default)]
struct Pending {
    /// The latest pending counts (zero: the feature is gone), by bucket, sorted by feature
    /// within each, as a merge with the bucket reads them.
    buckets: HashMap<u16, BTreeMap<String, TokenCounts>>,
    /// Sequence numbers of the records on disk.
    records: std::ops::Range<u64>,
    /// Entries in the records, repeats included: what reading them at open costs.
    entries: usize,
}

impl Pending {
    fn get(&self, feature: &str, hash: u64) -> Option<TokenCounts> {
        self.buckets.get(&bucket_of(hash))?.get(feature).copied()
    }

    fn insert(&mut self, feature: &str, hash: u64, counts: TokenCounts) {
        let bucket = self.buckets.entry(bucket_of(hash)).or_default();
        bucket.insert(feature.to_string(), counts);
        self.entries += 1;
    }

    /// Removes its records in `batch` (which folds or discards what they hold).
    fn remove_records(&self, batch: &mut sled::Batch) {
        for seq in self.records.clone() {
            batch.remove(&pending_key(seq)[..]);
        }
    }
}

/// Pending entries beyond which a batch folds them into the buckets: a quarter of the
/// vocabulary, so that a fold (rewriting the table) comes once in some 70 messages learned
/// alone, each of which writes its own few KB; at most 65,536, so that reading them at
/// open and merging them with the buckets a message touches stays a few milliseconds.
fn pending_limit(vocabulary: u64) -> usize {
    (vocabulary as usize / 4).clamp(4096, 1 << 16)
}

/// Lessons in a batch from which its buckets are merged on every core and rewritten:
/// fewer (the daemon's one message, a hook's) need no thread pool, and write a pending
/// record instead while the records stay few (see [`Pending`]).
const PARALLEL_MERGE_FROM: usize = 64;

pub struct SledStore {
    path: PathBuf,
    db: sled::Db,
    totals: RwLock<Totals>,
    /// The whole token table, once preloaded. A std RwLock: readers (scoring, on blocking
    /// threads) hold it while they score a message, never across an await.
    table: RwLock<Option<TokenTable>>,
    /// One writer at a time: learning reads counts, adds to them and writes them back.
    writer: Mutex<()>,
    /// What the pending records hold. Changed only with the writer lock held, and held
    /// itself through the commit: a reader never meets new buckets with old pending counts.
    pending: RwLock<Pending>,
    /// How its ledger names a message; an import may change it.
    digest_kind: RwLock<DigestKind>,
    /// Whether counts were committed since the last flush numbered one.
    dirty: AtomicBool,
    /// The number of the last flush that made new counts durable, as the database and the
    /// marker file hold it: see [`SledStore::check_generation`]. Held through a flush.
    generation: Mutex<Generation>,
    /// The directory of an [`SledStore::open_empty`] store, removed when the store is
    /// dropped: declared after `db`, so dropped after it. Not sled's `temporary`: sled
    /// removes the files when the last of its threads lets go, which may be an I/O thread
    /// the process's exit cuts short, leaving them behind.
    _scratch: Option<tempfile::TempDir>,
}

impl SledStore {
    /// [`SledStore::open`], waiting up to `opts.lock_wait` while another process holds the
    /// database and `worth_waiting()` says it will let go (a `learn` or a hook does in
    /// moments; a running daemon does not).
    pub fn open_waiting(
        path: &Path,
        opts: &StoreOptions,
        worth_waiting: impl Fn() -> bool,
    ) -> Result<SledStore, Error> {
        let mut wait = super::LockWait::up_to(opts.lock_wait);
        loop {
            match SledStore::open(path, opts) {
                Err(Error::Locked { .. }) if worth_waiting() && wait.again() => {}
                opened => return opened,
            }
        }
    }

    pub fn open(path: &Path, opts: &StoreOptions) -> Result<SledStore, Error> {
        refuse_foreign_directory(path)?;
        SledStore::open_at(path, opts, None)
    }

    /// An empty database of its own, gone when dropped: what the commands that only read
    /// score against where no database is, instead of leaving one behind. Its directory is
    /// new, private, and named at random: a name anyone could guess (the process id) would
    /// let another user make it first, with a database of their own in it.
    pub fn open_empty(opts: &StoreOptions) -> Result<SledStore, Error> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("spamnb-empty-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(Error::Io)?;
        let path = dir.path().to_path_buf();
        SledStore::open_at(&path, opts, Some(dir))
    }

    fn open_at(
        path: &Path,
        opts: &StoreOptions,
        scratch: Option<tempfile::TempDir>,
    ) -> Result<SledStore, Error> {
        // sled starts its threads as it opens, and where it can start none at all it waits
        // for them for ever: one that cannot start here says so first.
        if let Err(e) = can_start_a_thread() {
            tracing::debug!("no thread can start: {e}");
            return Err(threads_exhausted(path));
        }
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(opts.cache_bytes)
            .flush_every_ms(Some(1000));
        let open = || crate::quiet_panic::catch_quietly(|| config.open());
        let db = match open() {
            Ok(Err(sled::Error::Corruption { .. })) if remove_unfinished_snapshots(path) => open(),
            opened => opened,
        };
        let db = match db {
            Ok(Ok(db)) => db,
            Ok(Err(e)) => return Err(open_error(path, e)),
            Err(panic) => return Err(open_panic_error(path, panic.as_ref())),
        };
        let store = SledStore {
            path: path.into(),
            db,
            totals: RwLock::new(Totals::default()),
            table: RwLock::new(None),
            writer: Mutex::new(()),
            pending: RwLock::new(Pending::default()),
            digest_kind: RwLock::new(DigestKind::AsSent),
            dirty: AtomicBool::new(false),
            generation: Mutex::new(Generation::default()),
            _scratch: scratch,
        };
        let digest_kind = store.check_schema()?;
        store.check_generation()?;
        *store
            .digest_kind
            .write()
            .expect("digest kind lock is never poisoned") = digest_kind;
        let totals = store.read_totals()?;
        let pending = store.read_pending()?;
        *store
            .pending
            .write()
            .expect("pending lock is never poisoned") = pending;
        *store
            .totals
            .write()
            .expect("totals lock is never poisoned: no panics while held") = totals;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The buckets that `steps` change, of those in shard `shard` of `shards` (bucket
    /// number modulo `shards`), with `pending` counts in place: each changed feature's
    /// counts before and after and, when `rewrite`, the buckets' new contents, pending
    /// counts folded in (buckets that only `pending` touches included).
    fn merge_shard<'l>(
        &self,
        steps: &[Step<'l>],
        pending: &Pending,
        rewrite: bool,
        shard: usize,
        shards: usize,
    ) -> Result<Merged<'l>, Error> {
        // Per feature: its hash, and the occurrences and messages per class to add (or,
        // negative, take away). Found by the hash each lesson's features already carry.
        let mut delta: hashbrown::HashTable<(u64, &'l str, CountDelta)> = Default::default();
        let in_shard = |hash: u64| usize::from(bucket_of(hash)) % shards == shard;
        for (lesson, moves) in steps {
            for (hash, feature, n) in lesson.features.iter_hashed_if(in_shard) {
                if feature.len() > MAX_FEATURE_BYTES {
                    continue;
                }
                let (_, _, d) = delta
                    .entry(hash, |e| e.1 == feature, |e| e.0)
                    .or_insert((hash, feature, CountDelta::default()))
                    .into_mut();
                for &(class, sign) in *moves {
                    d.add_message(class, n, sign);
                }
            }
        }
        let mut by_bucket: HashMap<u16, Vec<(&'l str, u64, CountDelta)>> = HashMap::new();
        for (hash, feature, d) in delta {
            by_bucket
                .entry(bucket_of(hash))
                .or_default()
                .push((feature, hash, d));
        }
        if rewrite {
            for &bucket in pending.buckets.keys() {
                if usize::from(bucket) % shards == shard {
                    by_bucket.entry(bucket).or_default();
                }
            }
        }
        let mut merged = Merged {
            buckets: Vec::new(),
            changed: Vec::new(),
        };
        for (bucket, mut deltas) in by_bucket {
            deltas.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let key = bucket_key(bucket);
            let stored = self.get(key)?;
            let old = self.effective(stored.as_deref().unwrap_or_default(), pending, bucket)?;
            let mut out = Vec::new();
            if rewrite {
                out.reserve(stored.as_ref().map_or(0, |s| s.len()) + deltas.len() * 20);
            }
            let mut entries = old.into_iter().peekable();
            let mut deltas = deltas.into_iter().peekable();
            // A merge of two sorted lists: the bucket's entries and this batch's changes.
            loop {
                let next_old = entries.peek().map(|e| e.0);
                let next_delta = deltas.peek().map(|d| d.0);
                let (feature, was, d) = match (next_old, next_delta) {
                    (None, None) => break,
                    (Some(f), Some(g)) if g < f => (g, TokenCounts::default(), deltas.next()),
                    (None, Some(g)) => (g, TokenCounts::default(), deltas.next()),
                    (Some(f), g) => {
                        let (_, counts) = entries.next().expect("peeked an entry");
                        let d = if g == Some(f) { deltas.next() } else { None };
                        (f, counts, d)
                    }
                };
                let Some((name, hash, d)) = d else {
                    if rewrite {
                        encode_entry(&mut out, feature, &was);
                    }
                    continue;
                };
                let now = was.plus(&d);
                if rewrite && !now.is_zero() {
                    encode_entry(&mut out, feature, &now);
                }
                merged.changed.push((hash, name, was, now));
            }
            if rewrite {
                merged.buckets.push((key, out));
            }
        }
        Ok(merged)
    }

    /// Every bucket that holds counts, stored or only pending, in order, with what is
    /// stored of it.
    fn buckets(&self, pending: &Pending) -> Result<Vec<(u16, Option<sled::IVec>)>, Error> {
        let mut buckets = Vec::new();
        for kv in self.db.scan_prefix([TOKEN]) {
            let (key, stored) = kv.map_err(|e| self.corrupt(e))?;
            let number = bucket_of_key(&key).ok_or_else(|| self.damaged_bucket())?;
            buckets.push((number, Some(stored)));
        }
        for &number in pending.buckets.keys() {
            if !buckets.iter().any(|(n, _)| *n == number) {
                buckets.push((number, None));
            }
        }
        buckets.sort_unstable_by_key(|(number, _)| *number);
        Ok(buckets)
    }

    /// Bucket `number`'s entries as they stand: those `stored`, with its `pending` counts
    /// in their place (zero: removed), sorted by feature.
    fn effective<'a>(
        &self,
        stored: &'a [u8],
        pending: &'a Pending,
        number: u16,
    ) -> Result<Vec<(&'a str, TokenCounts)>, Error> {
        let pending_here = pending.buckets.get(&number);
        let mut out = Vec::with_capacity(stored.len() / 12 + pending_here.map_or(0, |p| p.len()));
        let mut pending = pending_here
            .into_iter()
            .flatten()
            .map(|(f, c)| (f.as_str(), *c))
            .peekable();
        for entry in BucketEntries(stored) {
            let (feature, counts) = entry.ok_or_else(|| self.damaged_bucket())?;
            let mut stored = Some((feature, counts));
            while let Some((p, c)) = pending.next_if(|(p, _)| *p <= feature) {
                if p == feature {
                    stored = None;
                }
                if !c.is_zero() {
                    out.push((p, c));
                }
            }
            out.extend(stored);
        }
        out.extend(pending.filter(|(_, c)| !c.is_zero()));
        Ok(out)
    }

    /// Writes `batch` with the new `totals` in one atomic step, then brings memory in line:
    /// the totals, and the preloaded table's `changed` counts (zero: gone).
    fn commit(
        &self,
        mut batch: sled::Batch,
        totals: Totals,
        changed: Vec<(u64, TokenCounts)>,
    ) -> Result<(), Error> {
        batch.insert(META_TOTALS, encode_totals(&totals));
        // Readers of the totals wait out the write: one that finds a message in the ledger
        // then finds it in the totals too (the folder watcher's tests read both, and so
        // does `stats` through the daemon while it learns).
        let mut in_memory = self.totals.write().expect("totals lock is never poisoned");
        self.db
            .apply_batch(batch)
            .map_err(|e| Error::Write(e.to_string()))?;
        self.dirty.store(true, Ordering::SeqCst);
        if let Some(table) = self
            .table
            .write()
            .expect("table lock is never poisoned")
            .as_mut()
        {
            for (hash, counts) in changed {
                if counts.is_zero() {
                    table.remove(&hash);
                } else {
                    table.insert(hash, counts);
                }
            }
        }
        *in_memory = totals;
        Ok(())
    }

    /// How many writes of a few lessons' counts are pending: for tests of what writes
    /// what, outside this module.
    #[cfg(test)]
    pub(crate) fn pending_writes(&self) -> u64 {
        let records = &self.pending.read().unwrap().records;
        records.end - records.start
    }

    /// Copies all counts into memory so that scoring never waits on disk.
    pub fn preload(&self) -> Result<(), Error> {
        let mut table = TokenTable::default();
        table.reserve(self.totals().vocabulary as usize);
        self.for_each_token(&mut |feature, counts| {
            table.insert(feature_hash(feature), counts);
        })?;
        *self.table.write().expect("table lock is never poisoned") = Some(table);
        Ok(())
    }

    /// The schema version, checked, and the digest the ledger is keyed by; a new database
    /// gets both. The marker file says a spamnb database was made here: sled recovers a
    /// damaged log by truncating it, so without the marker a wrecked database would open as
    /// an empty one and quietly start over.
    fn check_schema(&self) -> Result<DigestKind, Error> {
        let marker = self.path.join(MARKER_FILE);
        let created = marker.exists();
        let found = match self.get(META_SCHEMA)? {
            Some(v) => u32::from_le_bytes(v.as_ref().try_into().map_err(|_| Error::Foreign {
                path: self.path.clone(),
            })?),
            None if created => {
                return Err(Error::Corrupt {
                    path: self.path.clone(),
                    reason: "its data files are unreadable".into(),
                });
            }
            None if self.db.is_empty() => {
                let mut batch = sled::Batch::default();
                batch.insert(META_SCHEMA, &SCHEMA_VERSION.to_le_bytes());
                batch.insert(META_DIGEST, DigestKind::AsSent.name().as_bytes());
                self.db
                    .apply_batch(batch)
                    .map_err(|e| Error::Write(e.to_string()))?;
                self.db.flush().map_err(|e| Error::Write(e.to_string()))?;
                self.write_marker(0)?;
                return Ok(DigestKind::AsSent);
            }
            None => {
                return Err(Error::Foreign {
                    path: self.path.clone(),
                });
            }
        };
        match found {
            1..=3 => self.upgrade(found)?,
            SCHEMA_VERSION => {}
            _ => {
                return Err(Error::Schema {
                    path: self.path.clone(),
                    found,
                    expected: SCHEMA_VERSION,
                });
            }
        }
        if !created {
            self.write_marker(0)?;
        }
        let kind = self.get(META_DIGEST)?;
        kind.and_then(|k| DigestKind::from_name(std::str::from_utf8(&k).ok()?))
            .ok_or_else(|| Error::Corrupt {
                path: self.path.clone(),
                reason: "it does not say how its ledger names messages".into(),
            })
    }

    /// Refuses a database behind its marker file: sled recovers a log cut short (a copy
    /// stopped halfway, a damaged disk) by dropping what follows the cut, and a young
    /// database, one without a snapshot yet, would open with its schema and nothing else,
    /// as if it had learned nothing. Each flush that makes new counts durable numbers itself
    /// in the database, in the same flush, and then in the marker, which so never runs
    /// ahead of the database; a crash between the two leaves it behind, which is no harm.
    fn check_generation(&self) -> Result<(), Error> {
        let stored = match self.get(META_GENERATION)? {
            Some(v) => u64::from_le_bytes(v.as_ref().try_into().map_err(|_| Error::Corrupt {
                path: self.path.clone(),
                reason: "its record of writes is garbled".into(),
            })?),
            None => 0,
        };
        let marker = std::fs::read_to_string(self.path.join(MARKER_FILE)).unwrap_or_default();
        let marked = (marker.lines())
            .find_map(|l| l.strip_prefix(GENERATION_LINE)?.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if stored < marked {
            return Err(Error::Corrupt {
                path: self.path.clone(),
                reason: format!(
                    "it holds {stored} of the {marked} flushes of counts made to it: its \
                     files were cut short or restored in part"
                ),
            });
        }
        *self
            .generation
            .lock()
            .expect("generation lock is never poisoned") = Generation { stored, marked };
        Ok(())
    }

    /// Rewrites the marker file with `generation`, whole or not at all.
    fn write_marker(&self, generation: u64) -> Result<(), Error> {
        let marker = self.path.join(MARKER_FILE);
        let new = self.path.join(format!("{MARKER_FILE}.new"));
        std::fs::write(
            &new,
            format!("{MARKER_TEXT}{GENERATION_LINE}{generation}\n"),
        )?;
        std::fs::rename(&new, &marker)?;
        Ok(())
    }

    /// Schema 1 kept the counts in 4,096 buckets, by the top 12 bits of the feature's hash,
    /// schema 2 in 256 by the top 8, both with each count in four bytes; schema 3 keeps 256
    /// buckets with the counts in LEB128. Schema 4 names the digest its ledger is keyed by:
    /// what came before keeps the whole-message digest it was made with. Rewritten in one
    /// atomic write: a crash leaves the database as it was, to be upgraded at the next open.
    fn upgrade(&self, from: u32) -> Result<(), Error> {
        let mut batch = sled::Batch::default();
        if from < 3 {
            let mut tokens = Vec::new();
            for kv in self.db.scan_prefix([TOKEN]) {
                let (key, bucket) = kv.map_err(|e| self.corrupt(e))?;
                batch.remove(key);
                for entry in FixedEntries(&bucket) {
                    let (feature, counts) = entry.ok_or_else(|| self.damaged_bucket())?;
                    tokens.push((feature.to_string(), counts));
                }
            }
            // New buckets overwrite old ones of the same key in the batch.
            for (key, bucket) in encode_buckets(&tokens) {
                batch.insert(&key[..], bucket);
            }
        }
        batch.insert(META_DIGEST, DigestKind::WholeMessage.name().as_bytes());
        batch.insert(META_SCHEMA, &SCHEMA_VERSION.to_le_bytes());
        self.db
            .apply_batch(batch)
            .map_err(|e| Error::Write(e.to_string()))?;
        self.db.flush().map_err(|e| Error::Write(e.to_string()))?;
        tracing::info!(
            "upgraded the database {} to schema version {SCHEMA_VERSION}",
            self.path.display()
        );
        Ok(())
    }

    fn read_totals(&self) -> Result<Totals, Error> {
        match self.get(META_TOTALS)? {
            None => Ok(Totals::default()),
            Some(v) => decode_totals(&v).ok_or_else(|| Error::Corrupt {
                path: self.path.clone(),
                reason: "the class totals are unreadable".into(),
            }),
        }
    }

    /// The pending records, oldest first: a later count of a feature replaces an earlier.
    fn read_pending(&self) -> Result<Pending, Error> {
        let mut pending = Pending::default();
        for kv in self.db.scan_prefix([PENDING]) {
            let (key, v) = kv.map_err(|e| self.corrupt(e))?;
            let seq = pending_seq(&key).ok_or_else(|| self.damaged_bucket())?;
            if pending.records.is_empty() {
                pending.records = seq..seq;
            }
            pending.records.end = seq + 1;
            for entry in BucketEntries(&v) {
                let (feature, counts) = entry.ok_or_else(|| self.damaged_bucket())?;
                pending.insert(feature, feature_hash(feature), counts);
            }
        }
        Ok(pending)
    }

    /// The value under `key`. sled has been seen to panic on a damaged tree as it does on
    /// damaged files at open ("cannot find pid … in view_for_key"): that is damage too.
    fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<sled::IVec>, Error> {
        match crate::quiet_panic::catch_quietly(|| self.db.get(key)) {
            Ok(got) => got.map_err(|e| self.corrupt(e)),
            Err(_) => Err(Error::Corrupt {
                path: self.path.clone(),
                reason: "the storage engine could not read its tree".into(),
            }),
        }
    }

    fn corrupt(&self, e: sled::Error) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// A feature's counts as stored: pending, or in its bucket.
    fn read_stored(&self, feature: &str, hash: u64) -> Result<TokenCounts, Error> {
        if let Some(counts) = self
            .pending
            .read()
            .expect("pending lock is never poisoned")
            .get(feature, hash)
        {
            return Ok(counts);
        }
        let key = bucket_key(bucket_of(hash));
        let Some(bucket) = self.get(key)? else {
            return Ok(TokenCounts::default());
        };
        find_entry(&bucket, feature)
            .map(Option::unwrap_or_default)
            .ok_or_else(|| self.damaged_bucket())
    }

    /// Whether any key starts with `prefix`; a damaged tree is an error, not "yes".
    fn has_keys(&self, prefix: u8) -> Result<bool, Error> {
        match self.db.scan_prefix([prefix]).keys().next() {
            Some(Err(e)) => Err(self.corrupt(e)),
            first => Ok(first.is_some()),
        }
    }

    fn damaged_ledger(&self) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            reason: "a ledger entry is unreadable".into(),
        }
    }

    fn damaged_bucket(&self) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            reason: "a bucket of token counts is unreadable".into(),
        }
    }
}

impl CountSource for SledStore {
    fn totals(&self) -> Totals {
        *self.totals.read().expect("totals lock is never poisoned")
    }

    fn token(&self, feature: &str) -> Option<TokenCounts> {
        self.token_hashed(feature, feature_hash(feature))
    }

    fn token_hashed(&self, feature: &str, hash: u64) -> Option<TokenCounts> {
        // Scoring reads through `Store::reader`, which returns the error; a caller that
        // cannot take one is at least told in the log.
        self.reader().counts(feature, hash).unwrap_or_else(|e| {
            tracing::error!("{e}");
            None
        })
    }
}

/// How one message's scoring reads a [`SledStore`].
enum SledReader<'s> {
    /// From the preloaded table, its lock held till the message is scored.
    Table(RwLockReadGuard<'s, Option<TokenTable>>),
    /// From the pending counts and the buckets, each read on its own: a reader that held
    /// the pending counts' lock would meet a lesson's commit holding it and waiting for
    /// the table's.
    Stored(&'s SledStore),
}

impl CountReader for SledReader<'_> {
    fn counts(&self, feature: &str, hash: u64) -> Result<Option<TokenCounts>, Error> {
        let counts = match self {
            SledReader::Table(table) => (table.as_ref())
                .and_then(|t| t.get(&hash).copied())
                .unwrap_or_default(),
            SledReader::Stored(store) => store.read_stored(feature, hash)?,
        };
        Ok(Some(counts).filter(|c| !c.is_zero()))
    }
}

impl Store for SledStore {
    fn reader(&self) -> Box<dyn CountReader + '_> {
        let table = self.table.read().expect("table lock is never poisoned");
        if table.is_some() {
            Box::new(SledReader::Table(table))
        } else {
            Box::new(SledReader::Stored(self))
        }
    }

    fn ledger_entry(&self, digest: &Digest) -> Result<Option<LedgerEntry>, Error> {
        let v = self.get(ledger_key(digest))?;
        // An unreadable entry is damage, not "never learned": learning again would count
        // the message twice.
        v.map(|v| decode_ledger(&v).ok_or_else(|| self.damaged_ledger()))
            .transpose()
    }

    fn digest_kind(&self) -> DigestKind {
        *self
            .digest_kind
            .read()
            .expect("digest kind lock is never poisoned")
    }

    fn learn(&self, lessons: &[Lesson]) -> Result<Vec<Outcome>, Error> {
        self.learn_noting(lessons, &[])
    }

    fn learn_noting(
        &self,
        lessons: &[Lesson],
        notes: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Result<Vec<Outcome>, Error> {
        let _writer = self.writer.lock().expect("writer lock is never poisoned");
        let mut totals = self.totals();
        let mut ledger: HashMap<Digest, Option<LedgerEntry>> = HashMap::new();
        let mut outcomes = Vec::with_capacity(lessons.len());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());

        // What each lesson moves, decided in order: a message may come twice in a batch.
        let mut steps: Vec<Step> = Vec::new();
        for lesson in lessons {
            let known = match ledger.get(&lesson.digest) {
                Some(entry) => entry.as_ref().map(|e| e.class),
                None => self.ledger_entry(&lesson.digest)?.map(|e| e.class),
            };
            let (outcome, moves) = moves(known, lesson);
            for &(class, sign) in moves {
                let c = class.index();
                totals.messages[c] = (totals.messages[c] as i64 + sign).max(0) as u64;
            }
            if !moves.is_empty() {
                steps.push((lesson, moves));
                let entry = lesson.target.map(|class| LedgerEntry {
                    class,
                    learned_at: now,
                    user: lesson.user.clone(),
                });
                ledger.insert(lesson.digest, entry);
            }
            outcomes.push(outcome);
        }

        let mut pending = self
            .pending
            .write()
            .expect("pending lock is never poisoned");
        // A small batch adds its counts to the pending ones while they stay few (a bound on
        // what it changes: its lessons' features); a big one rewrites the buckets anyway.
        let small = steps.len() < PARALLEL_MERGE_FROM;
        let at_most: usize = steps.iter().map(|(l, _)| l.features.len()).sum();
        let rewrite = !small || pending.entries + at_most > pending_limit(totals.vocabulary);
        // The buckets, merged in shards on every core for a big batch: summing its counts
        // and rewriting ~4,000 buckets was a serial tail of ~60 ms per 1,000 messages.
        let shards = if small {
            1
        } else {
            rayon::current_num_threads()
        };
        let merged: Vec<Result<Merged, Error>> = if shards == 1 {
            vec![self.merge_shard(&steps, &pending, rewrite, 0, 1)]
        } else {
            use rayon::prelude::*;
            (0..shards)
                .into_par_iter()
                .map(|s| self.merge_shard(&steps, &pending, rewrite, s, shards))
                .collect()
        };
        let mut batch = sled::Batch::default();
        let mut changed: Vec<(u64, TokenCounts)> = Vec::new();
        // This batch's record of what it changed, and the same for memory, after the commit.
        let mut record = Vec::new();
        let mut recorded = Vec::new();
        for shard in merged {
            let shard = shard?;
            for (key, bucket) in shard.buckets {
                put_bucket(&mut batch, &key[..], bucket);
            }
            for (hash, feature, was, now) in shard.changed {
                totals.account(&was, &now);
                changed.push((hash, now));
                if !rewrite {
                    encode_entry(&mut record, feature, &now);
                    recorded.push((feature, hash, now));
                }
            }
        }
        if !record.is_empty() {
            batch.insert(&pending_key(pending.records.end)[..], record);
        } else if rewrite {
            pending.remove_records(&mut batch);
        }
        for (digest, entry) in &ledger {
            match entry {
                Some(entry) => batch.insert(ledger_key(digest), encode_ledger(entry)),
                None => batch.remove(ledger_key(digest)),
            }
        }
        for (key, value) in notes {
            match value {
                Some(v) => batch.insert(note_key(key), v.as_slice()),
                None => batch.remove(note_key(key)),
            }
        }
        self.commit(batch, totals, changed)?;
        if rewrite {
            *pending = Pending::default();
        } else if !recorded.is_empty() {
            for (feature, hash, counts) in recorded {
                pending.insert(feature, hash, counts);
            }
            pending.records.end += 1;
        }
        Ok(outcomes)
    }

    fn stats(&self) -> Result<Stats, Error> {
        Ok(Stats {
            totals: self.totals(),
            ledger_entries: count_until_error(self.db.scan_prefix([LEDGER]).keys())
                .map_err(|e| self.corrupt(e))?,
            size_on_disk: self.db.size_on_disk().map_err(|e| self.corrupt(e))?,
            schema_version: SCHEMA_VERSION,
            ledger_digest: self.digest_kind(),
        })
    }

    fn flush(&self) -> Result<(), Error> {
        let mut generation = self
            .generation
            .lock()
            .expect("generation lock is never poisoned");
        // Numbered once a flush, not once a commit: the key rewritten with every batch grew
        // the benchmark's database by a twentieth.
        if self.dirty.swap(false, Ordering::SeqCst) {
            generation.stored += 1;
            self.db
                .insert(META_GENERATION, &generation.stored.to_le_bytes())
                .map_err(|e| Error::Write(e.to_string()))?;
        }
        self.db.flush().map_err(|e| Error::Write(e.to_string()))?;
        // What was learned is durable whether or not the marker says so: a marker not
        // written costs only the check at the next open, and fails no lesson.
        if generation.marked < generation.stored
            && let Err(e) = self.write_marker(generation.stored)
        {
            tracing::warn!(
                "{}: cannot record the writes made: {e}",
                self.path.display()
            );
        } else {
            generation.marked = generation.stored;
        }
        Ok(())
    }

    /// In bucket order, sorted within each: the same order however much is pending.
    fn for_each_token(&self, each: &mut dyn FnMut(&str, TokenCounts)) -> Result<(), Error> {
        let pending = self.pending.read().expect("pending lock is never poisoned");
        for (number, stored) in self.buckets(&pending)? {
            let stored = stored.as_deref().unwrap_or_default();
            for (feature, counts) in self.effective(stored, &pending, number)? {
                each(feature, counts);
            }
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
                return Err(self.damaged_ledger());
            };
            each(&digest, &entry);
        }
        Ok(())
    }

    fn note(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let v = self.get(note_key(key))?;
        Ok(v.map(|v| v.to_vec()))
    }

    fn write_notes(&self, changes: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<(), Error> {
        let mut batch = sled::Batch::default();
        for (key, value) in changes {
            match value {
                Some(v) => batch.insert(note_key(key), v.as_slice()),
                None => batch.remove(note_key(key)),
            }
        }
        self.db
            .apply_batch(batch)
            .map_err(|e| Error::Write(e.to_string()))
    }

    fn for_each_note(
        &self,
        prefix: &[u8],
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        for kv in self.db.scan_prefix(note_key(prefix)) {
            let (k, v) = kv.map_err(|e| self.corrupt(e))?;
            each(&k[1..], &v);
        }
        Ok(())
    }

    fn holding_writes(&self, read: &mut dyn FnMut() -> Result<(), Error>) -> Result<(), Error> {
        let _writer = self.writer.lock().expect("writer lock is never poisoned");
        read()
    }

    fn prune(&self, min_messages: u32, dry_run: bool) -> Result<Pruned, Error> {
        let _writer = self.writer.lock().expect("writer lock is never poisoned");
        let mut pending = self
            .pending
            .write()
            .expect("pending lock is never poisoned");
        let mut totals = self.totals();
        let mut pruned = Pruned::default();
        let mut batch = sled::Batch::default();
        // Each removed feature, its counts now none.
        let mut removed = Vec::new();
        // Pending counts are folded into the buckets that are rewritten anyway.
        for (number, bucket) in &self.buckets(&pending)? {
            let has_pending = pending.buckets.contains_key(number);
            let mut out = Vec::new();
            let before = pruned.removed;
            for (feature, counts) in
                self.effective(bucket.as_deref().unwrap_or_default(), &pending, *number)?
            {
                // A rule is few features and a person's judgement: it stays however rare.
                let keep = counts.message_count() >= u64::from(min_messages)
                    || feature.starts_with(RULE_PREFIX);
                if keep {
                    pruned.kept += 1;
                } else {
                    pruned.removed += 1;
                }
                if dry_run {
                    continue;
                }
                if keep {
                    encode_entry(&mut out, feature, &counts);
                } else {
                    totals.account(&counts, &TokenCounts::default());
                    removed.push((feature_hash(feature), TokenCounts::default()));
                }
            }
            if (pruned.removed > before || has_pending) && !dry_run {
                put_bucket(&mut batch, &bucket_key(*number)[..], out);
            }
        }
        if dry_run || removed.is_empty() {
            return Ok(pruned);
        }
        pending.remove_records(&mut batch);
        self.commit(batch, totals, removed)?;
        *pending = Pending::default();
        Ok(pruned)
    }

    fn replace_all(
        &self,
        totals: Totals,
        tokens: &[(String, TokenCounts)],
        ledger: &[(Digest, LedgerEntry)],
        digest_kind: DigestKind,
    ) -> Result<(), Error> {
        let _writer = self.writer.lock().expect("writer lock is never poisoned");
        let mut pending = self
            .pending
            .write()
            .expect("pending lock is never poisoned");
        if self.has_keys(TOKEN)?
            || self.has_keys(LEDGER)?
            || pending
                .buckets
                .values()
                .flatten()
                .any(|(_, c)| !c.is_zero())
        {
            return Err(Error::NotEmpty {
                path: self.path.clone(),
            });
        }
        let mut batch = sled::Batch::default();
        // What is left of messages learned and forgotten: counts of zero, to go.
        pending.remove_records(&mut batch);
        for (key, bucket) in encode_buckets(tokens) {
            batch.insert(&key[..], bucket);
        }
        for (digest, entry) in ledger {
            batch.insert(ledger_key(digest), encode_ledger(entry));
        }
        batch.insert(META_DIGEST, digest_kind.name().as_bytes());
        self.commit(batch, totals, Vec::new())?;
        *self
            .digest_kind
            .write()
            .expect("digest kind lock is never poisoned") = digest_kind;
        *pending = Pending::default();
        drop(pending);
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

/// Features and their counts as the buckets that hold them: sorted within each bucket, a
/// feature given twice kept once.
fn encode_buckets(tokens: &[(String, TokenCounts)]) -> Vec<([u8; 3], Vec<u8>)> {
    let mut buckets: HashMap<u16, Vec<&(String, TokenCounts)>> = HashMap::new();
    for token in tokens {
        buckets
            .entry(bucket_of(feature_hash(&token.0)))
            .or_default()
            .push(token);
    }
    buckets
        .into_iter()
        .map(|(bucket, mut entries)| {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|a, b| a.0 == b.0);
            let mut out = Vec::new();
            for (feature, counts) in entries {
                encode_entry(&mut out, feature, counts);
            }
            (bucket_key(bucket), out)
        })
        .collect()
}

/// The items of `iter` up to its first error. sled's iterator over a damaged tree yields
/// the same error again and again, never `None`: counting them all would spin forever.
fn count_until_error<T>(iter: impl Iterator<Item = sled::Result<T>>) -> sled::Result<u64> {
    let mut n = 0;
    for item in iter {
        item?;
        n += 1;
    }
    Ok(n)
}

/// A bucket's new contents, or its removal when none of its features is left.
fn put_bucket(batch: &mut sled::Batch, key: &[u8], bucket: Vec<u8>) {
    if bucket.is_empty() {
        batch.remove(key);
    } else {
        batch.insert(key, bucket);
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

/// The error for a panic of sled's open. sled has been seen to panic on some damaged files
/// instead of returning an error, and it unwraps spawning its threads: that panic, a
/// `WouldBlock` (EAGAIN), once said "damaged" to an administrator whose database was sound.
fn open_panic_error(path: &Path, panic: &(dyn std::any::Any + Send)) -> Error {
    let message = (panic.downcast_ref::<String>().map(String::as_str))
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    if message.contains("WouldBlock") {
        threads_exhausted(path)
    } else {
        Error::Corrupt {
            path: path.into(),
            reason: "the storage engine could not read its files".into(),
        }
    }
}

fn threads_exhausted(path: &Path) -> Error {
    Error::Open {
        path: path.into(),
        reason: "the storage engine could not start its threads: the system, or a limit on \
                 this user's processes (ulimit -u), allows no more"
            .into(),
    }
}

/// Whether a thread can start (and has ended again).
fn can_start_a_thread() -> std::io::Result<()> {
    let probe = std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(|| {})?;
    let _ = probe.join();
    Ok(())
}

/// Removes the snapshot files sled began and never finished (`snap.*.generating`), and
/// says whether there were any. sled reads the last-named snapshot file, finished or not,
/// so one left by a process stopped while writing it (a full disk, a kill, a power cut)
/// had a whole database taken for a damaged one. Only under sled's own lock on the
/// database (an flock on its `db` file): never a file that a live process is writing.
fn remove_unfinished_snapshots(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(lock) = std::fs::File::open(path.join("db")) else {
        return false;
    };
    // SAFETY: flock on a descriptor this function owns; released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return false;
    }
    let mut removed = false;
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let unfinished = name
            .to_str()
            .is_some_and(|n| n.starts_with("snap.") && n.ends_with(".generating"));
        if unfinished && std::fs::remove_file(entry.path()).is_ok() {
            tracing::warn!(
                "{}: removed {}, a snapshot that sled began and never finished",
                path.display(),
                name.to_string_lossy()
            );
            removed = true;
        }
    }
    removed
}

fn open_error(path: &Path, e: sled::Error) -> Error {
    let reason = e.to_string();
    if reason.contains("could not acquire lock") {
        match super::holding_watcher(path) {
            Some(pid) => Error::HeldByWatcher {
                path: path.into(),
                pid,
            },
            None => Error::Locked { path: path.into() },
        }
    } else if matches!(e, sled::Error::Corruption { .. }) {
        Error::Corrupt {
            path: path.into(),
            reason,
        }
    } else if let sled::Error::Io(io) = &e
        && io.kind() == std::io::ErrorKind::PermissionDenied
    {
        // The usual cause is a database made by another user (root's `spamnb learn`, the
        // daemon's user): say whose permission is missing and what gives it.
        let uid = crate::daemon::config::uid();
        Error::Open {
            path: path.into(),
            reason: format!(
                "{reason}: this user (uid {uid}) may not write it or the files in it; run \
                 spamnb as the user it belongs to (the daemon's, under systemd), or give it \
                 to this one (chown -R)"
            ),
        }
    } else {
        Error::Open {
            path: path.into(),
            reason,
        }
    }
}

/// Longer features are not learned; none of spamnb's own come near it.
const MAX_FEATURE_BYTES: usize = 1024;

/// Which learning moves what, for a message the ledger knows as `known`: the outcome, and
/// the (class, +1/−1) steps to apply. A tentative lesson never moves a known message.
fn moves(known: Option<Class>, lesson: &Lesson) -> (Outcome, &'static [(Class, i64)]) {
    match (known, lesson.target) {
        (Some(k), Some(t)) if k == t || lesson.tentative => (Outcome::AlreadyKnown, &[]),
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
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::layout::count_fields;

    /// Another user may make /tmp/spamnb-empty-PID-N first (the names are easy to guess),
    /// with a database of their choosing in it: the empty store never opens there, and
    /// leaves what it found alone.
    #[test]
    fn an_empty_store_never_opens_a_directory_someone_made_first() {
        let planted: Vec<PathBuf> = (0..200)
            .map(|n| std::env::temp_dir().join(format!("spamnb-empty-{}-{n}", std::process::id())))
            .filter(|p| std::fs::create_dir(p).is_ok())
            .collect();
        for p in &planted {
            std::fs::write(p.join("planted"), "x").unwrap();
        }
        let store = SledStore::open_empty(&StoreOptions::default()).unwrap();
        // Private to this user, whoever may write in the directory it is made in.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", store.path.display());
        drop(store);
        let gone: Vec<_> = planted
            .iter()
            .filter(|p| !p.join("planted").exists())
            .collect();
        for p in &planted {
            let _ = std::fs::remove_dir_all(p);
        }
        assert!(gone.is_empty(), "the empty store took {gone:?}");
    }

    /// The store at `path` again, once the one dropped before has let go of it: sled's
    /// flusher thread can hold the files a moment after the last handle is dropped.
    fn reopen(path: &Path) -> SledStore {
        open_when_free(path).unwrap()
    }

    pub(crate) fn open_when_free(path: &Path) -> Result<SledStore, Error> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match SledStore::open(path, &StoreOptions::default()) {
                Err(Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                opened => return opened,
            }
        }
    }

    fn lesson(id: u8, target: Option<Class>, words: &str) -> Lesson {
        Lesson {
            digest: [id; 16],
            target,
            features: words.split_whitespace().collect(),
            user: None,
            tentative: false,
        }
    }

    /// A schema 1 database (4,096 buckets) and a schema 2 one (256), both with each count
    /// in four bytes, and a schema 3 one, open as schema 4 with every count where lookups
    /// find it, and their ledger keyed by the whole-message digest it was made with.
    #[test]
    fn databases_of_schemas_1_to_3_are_upgraded_when_opened() {
        for (version, bucket_bits) in [(1u32, 12), (2, 8), (3, 8)] {
            let dir = tempfile::tempdir().unwrap();
            let (tokens, totals) = {
                let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
                let words: Vec<String> = (0..3000).map(|i| format!("w{i}")).collect();
                let lessons: Vec<Lesson> = (0..20u8)
                    .map(|m| {
                        let text = words.iter().skip(m as usize * 100).take(400);
                        let target = if m % 2 == 0 { Class::Ham } else { Class::Spam };
                        Lesson {
                            features: text.map(String::as_str).collect(),
                            ..lesson(m, Some(target), "")
                        }
                    })
                    .collect();
                store.learn(&lessons).unwrap();
                (all_tokens(&store), store.totals())
            };
            assert!(tokens.iter().any(|(_, c)| c.occurrences[0] > 1));
            {
                // Rewrite the counts as the old schema laid them out. (sled lets go of its
                // lock a moment after the store is dropped.)
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                let db = loop {
                    match sled::Config::new().path(dir.path()).open() {
                        Err(_) if std::time::Instant::now() < deadline => {
                            std::thread::sleep(std::time::Duration::from_millis(20))
                        }
                        opened => break opened.unwrap(),
                    }
                };
                let mut old: HashMap<u16, Vec<u8>> = HashMap::new();
                for (feature, counts) in &tokens {
                    let bucket = (feature_hash(feature) >> (64 - bucket_bits)) as u16;
                    let out = old.entry(bucket).or_default();
                    out.extend_from_slice(&(feature.len() as u16).to_le_bytes());
                    out.extend_from_slice(feature.as_bytes());
                    for v in count_fields(counts) {
                        out.extend_from_slice(&v.to_le_bytes());
                    }
                }
                let mut batch = sled::Batch::default();
                if version < 3 {
                    for kv in db.scan_prefix([TOKEN]) {
                        batch.remove(kv.unwrap().0);
                    }
                    for (bucket, entries) in old {
                        batch.insert(&bucket_key(bucket)[..], entries);
                    }
                }
                batch.insert(META_SCHEMA, &version.to_le_bytes());
                batch.remove(META_DIGEST);
                for kv in db.scan_prefix([PENDING]) {
                    batch.remove(kv.unwrap().0);
                }
                db.apply_batch(batch).unwrap();
                assert_eq!(db.scan_prefix([TOKEN]).count() > 256, version == 1);
                db.flush().unwrap();
            }
            let store = reopen(dir.path());
            assert!(store.db.scan_prefix([TOKEN]).count() <= 256);
            assert_eq!(all_tokens(&store), tokens, "schema {version}");
            assert_eq!(store.totals(), totals);
            assert_eq!(store.digest_kind(), DigestKind::WholeMessage);
            assert!(store.ledger_entry(&[1; 16]).unwrap().is_some());
            for (feature, counts) in &tokens {
                assert_eq!(store.token(feature), Some(*counts), "{feature}");
            }
            drop(store);
            // Upgraded on disk, not only in memory.
            let store = reopen(dir.path());
            let found = store.db.get(META_SCHEMA).unwrap().unwrap();
            assert_eq!(found.as_ref(), SCHEMA_VERSION.to_le_bytes());
            assert_eq!(store.digest_kind(), DigestKind::WholeMessage);
        }
    }

    /// A batch big enough to be merged on every core leaves exactly what small batches,
    /// merged on one, leave.
    #[test]
    fn a_batch_merged_in_shards_counts_as_small_batches_do() {
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let lessons: Vec<Lesson> = (0..(PARALLEL_MERGE_FROM as u8 + 40))
            .map(|m| {
                let text: Vec<&str> = words
                    .iter()
                    .skip(m as usize * 11)
                    .step_by(m as usize % 7 + 1)
                    .take(300)
                    .map(String::as_str)
                    .collect();
                let class = if m % 3 == 0 { Class::Ham } else { Class::Spam };
                lesson(m, Some(class), &text.join(" "))
            })
            .collect();
        let contents = |store: &SledStore| {
            let mut tokens = Vec::new();
            store
                .for_each_token(&mut |f, c| tokens.push((f.to_string(), c)))
                .unwrap();
            (store.totals(), tokens)
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let sharded = SledStore::open(a.path(), &StoreOptions::default()).unwrap();
        // Shards follow the thread pool: four, whatever the machine, so that the merge is
        // sharded even on one core.
        rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap()
            .install(|| sharded.learn(&lessons))
            .unwrap();
        let serial = SledStore::open(b.path(), &StoreOptions::default()).unwrap();
        for few in lessons.chunks(PARALLEL_MERGE_FROM - 1) {
            serial.learn(few).unwrap();
        }
        let (got, want) = (contents(&sharded), contents(&serial));
        assert_eq!(got.0, want.0);
        assert_eq!(got.1.len(), want.1.len());
        assert!(got == want, "the sharded merge lost or changed counts");
    }

    /// A tentative lesson (autolearning) learns a message the ledger does not know, and
    /// never moves one it does: what a person taught stands, and a person's lesson still
    /// moves what was learned tentatively.
    #[test]
    fn tentative_lessons_never_override_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        let tentative = |id, class, words| Lesson {
            tentative: true,
            ..lesson(id, Some(class), words)
        };
        let learn = |l: Lesson| store.learn(&[l]).unwrap();
        assert_eq!(
            learn(lesson(1, Some(Class::Ham), "meeting agenda")),
            [Outcome::Learned]
        );
        let taught = store.totals();
        assert_eq!(
            learn(tentative(1, Class::Spam, "meeting agenda")),
            [Outcome::AlreadyKnown]
        );
        assert_eq!(store.totals(), taught);
        assert_eq!(store.token("meeting").map(|c| c.messages), Some([1, 0]));

        assert_eq!(
            learn(tentative(2, Class::Spam, "cheap pills")),
            [Outcome::Learned]
        );
        assert_eq!(store.totals().messages, [1, 1]);
        assert_eq!(
            learn(tentative(2, Class::Ham, "cheap pills")),
            [Outcome::AlreadyKnown]
        );
        assert_eq!(
            learn(lesson(2, Some(Class::Ham), "cheap pills")),
            [Outcome::Relearned]
        );
        assert_eq!(store.totals().messages, [2, 0]);
    }

    #[test]
    fn prune_removes_rare_tokens_keeps_rules_and_totals_exact() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
            store
                .learn(&[
                    lesson(1, Some(Class::Spam), "buy buy now rule:RARE"),
                    lesson(2, Some(Class::Ham), "now meeting"),
                    lesson(3, Some(Class::Spam), "buy cheap"),
                ])
                .unwrap();
            let before = store.totals();
            assert_eq!(
                store.prune(2, true).unwrap(),
                Pruned {
                    removed: 2,
                    kept: 3
                }
            );
            // Read from disk: no table is loaded yet.
            assert_eq!(store.totals(), before, "a dry run changes nothing");
            assert!(store.token("meeting").is_some());

            // The table in memory follows the prune.
            store.preload().unwrap();
            assert_eq!(store.prune(2, false).unwrap().removed, 2);
            // Seen in one message each: meeting and cheap go; a rule hit stays.
            assert!(store.token("meeting").is_none() && store.token("cheap").is_none());
            assert_eq!(store.token("rule:RARE").unwrap().messages, [0, 1]);
            assert_eq!(store.token("buy").unwrap().occurrences, [0, 3]);
            let t = store.totals();
            assert_eq!(
                (t.messages, t.occurrences, t.presences, t.vocabulary),
                ([1, 2], [1, 5], [1, 4], 3)
            );
            assert_eq!(store.prune(2, false).unwrap().removed, 0);
            store.flush().unwrap();
        }
        let store = reopen(dir.path());
        assert!(store.token("meeting").is_none());
        assert_eq!(store.totals().vocabulary, 3);
        // What is left still learns and forgets: `now` loses its ham message.
        store.learn(&[lesson(2, None, "now meeting")]).unwrap();
        assert_eq!(store.token("now").unwrap().messages, [0, 1]);
        assert_eq!(store.totals().messages, [0, 2]);
    }

    fn all_tokens(store: &SledStore) -> Vec<(String, TokenCounts)> {
        let mut all = Vec::new();
        store
            .for_each_token(&mut |f, c| all.push((f.to_string(), c)))
            .unwrap();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    fn buckets(store: &SledStore) -> Vec<(sled::IVec, sled::IVec)> {
        store.db.scan_prefix([TOKEN]).map(Result::unwrap).collect()
    }

    /// Lessons of 150 words each, overlapping, with a count of 2 for some.
    fn many_lessons(n: u8) -> Vec<Lesson> {
        let words: Vec<String> = (0..5000).map(|i| format!("w{i}")).collect();
        (0..n)
            .map(|m| {
                let mut text: Vec<&str> = words
                    .iter()
                    .skip(m as usize * 37)
                    .take(150)
                    .map(String::as_str)
                    .collect();
                text.extend(text.clone().iter().step_by(7));
                let target = if m % 3 == 0 { Class::Ham } else { Class::Spam };
                Lesson {
                    features: text.into_iter().collect(),
                    ..lesson(m, Some(target), "")
                }
            })
            .collect()
    }

    /// A message learned alone changes the pending counts, not the buckets: a few KB
    /// written, not most of the table. Lookups, the preloaded table, an export and a
    /// reopened store all see it.
    #[test]
    fn a_message_learned_alone_leaves_the_buckets_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        store.learn(&many_lessons(80)).unwrap();
        let stored = buckets(&store);
        assert_eq!(store.db.scan_prefix([PENDING]).count(), 0);
        let before = store.token("w100").unwrap();
        let one = lesson(200, Some(Class::Spam), "w100 w100 brand-new");
        store.learn(std::slice::from_ref(&one)).unwrap();
        assert_eq!(buckets(&store), stored, "no bucket rewritten");
        let records: Vec<_> = store
            .db
            .scan_prefix([PENDING])
            .map(Result::unwrap)
            .collect();
        assert_eq!(records.len(), 1);
        assert!(
            records[0].1.len() < 40,
            "{} bytes pending",
            records[0].1.len()
        );
        let after = store.token("w100").unwrap();
        assert_eq!(after.occurrences[1], before.occurrences[1] + 2);
        assert_eq!(after.messages[1], before.messages[1] + 1);
        assert_eq!(store.token("brand-new").unwrap().messages, [0, 1]);
        let seen = all_tokens(&store);
        assert!(seen.iter().any(|(f, _)| f == "brand-new"));
        store.preload().unwrap();
        assert_eq!(store.token("w100"), Some(after));
        // Forgotten again: the pending count of the new word is zero, and it is gone.
        store
            .learn(&[lesson(200, None, "w100 w100 brand-new")])
            .unwrap();
        assert_eq!(store.token("brand-new"), None);
        assert_eq!(store.token("w100"), Some(before));
        drop(store);
        let store = reopen(dir.path());
        assert_eq!(store.token("brand-new"), None);
        assert_eq!(store.token("w100"), Some(before));
        assert_eq!(buckets(&store), stored);
    }

    /// A database whose only message was learned and forgotten is empty: an import fills
    /// it, and the zero counts the two left pending do not hide what it brings.
    #[test]
    fn an_import_replaces_the_zero_counts_of_a_forgotten_message() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        store
            .learn(&[lesson(1, Some(Class::Spam), "cheap pills")])
            .unwrap();
        store.learn(&[lesson(1, None, "cheap pills")]).unwrap();
        assert_eq!(store.token("cheap"), None);
        let counts = TokenCounts {
            occurrences: [0, 4],
            messages: [0, 2],
        };
        let mut totals = Totals::default();
        totals.account(&TokenCounts::default(), &counts);
        totals.messages = [0, 2];
        store
            .replace_all(totals, &[("cheap".into(), counts)], &[], DigestKind::AsSent)
            .unwrap();
        assert_eq!(store.token("cheap"), Some(counts));
        drop(store);
        let store = reopen(dir.path());
        assert_eq!(store.token("cheap"), Some(counts));
        assert_eq!(store.db.scan_prefix([PENDING]).count(), 0);
        // Counts still pending are data: no import over them.
        store
            .learn(&[lesson(2, Some(Class::Ham), "hello")])
            .unwrap();
        let mut wiped = sled::Batch::default();
        for kv in store
            .db
            .scan_prefix([TOKEN])
            .chain(store.db.scan_prefix([LEDGER]))
        {
            wiped.remove(kv.unwrap().0);
        }
        store.db.apply_batch(wiped).unwrap();
        assert!(matches!(
            store.replace_all(Totals::default(), &[], &[], DigestKind::AsSent),
            Err(Error::NotEmpty { .. })
        ));
    }

    /// Learned one at a time (pending counts, folded into the buckets whenever they grow
    /// too many), relearned and forgotten, messages leave exactly the counts and totals
    /// that learning them in big batches leaves; and so does a prune of each.
    #[test]
    fn pending_counts_fold_and_match_big_batches() {
        let lessons = many_lessons(120);
        let one_by_one = tempfile::tempdir().unwrap();
        let at_once = tempfile::tempdir().unwrap();
        let a = SledStore::open(one_by_one.path(), &StoreOptions::default()).unwrap();
        let b = SledStore::open(at_once.path(), &StoreOptions::default()).unwrap();
        let mut folds = 0;
        for l in &lessons {
            let had = a.pending.read().unwrap().entries;
            a.learn(std::slice::from_ref(l)).unwrap();
            folds += usize::from(a.pending.read().unwrap().entries < had);
        }
        assert!(folds >= 2, "{folds} folds");
        let records = a.pending.read().unwrap().records.clone();
        assert!(records.end - records.start > 1);
        assert_eq!(
            a.db.scan_prefix([PENDING]).count() as u64,
            records.end - records.start
        );
        b.learn(&lessons).unwrap();
        assert_eq!(all_tokens(&a), all_tokens(&b));
        assert_eq!(a.totals(), b.totals());
        // Relearn every fifth as the other class, and forget every seventh.
        let changes: Vec<Lesson> = lessons
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 5 == 0 || i % 7 == 0)
            .map(|(i, l)| Lesson {
                target: match (i % 7 == 0, l.target) {
                    (true, _) => None,
                    (false, Some(Class::Spam)) => Some(Class::Ham),
                    _ => Some(Class::Spam),
                },
                features: l.features.clone(),
                ..lesson(l.digest[0], None, "")
            })
            .collect();
        for l in &changes {
            a.learn(std::slice::from_ref(l)).unwrap();
        }
        b.learn(&changes).unwrap();
        let expected = all_tokens(&b);
        assert_eq!(all_tokens(&a), expected);
        assert_eq!(a.totals(), b.totals());
        for (feature, counts) in expected.iter().step_by(97) {
            assert_eq!(a.token(feature), Some(*counts), "{feature}");
        }
        drop(a);
        let a = reopen(one_by_one.path());
        assert_eq!(all_tokens(&a), expected);
        assert_eq!(a.totals(), b.totals());
        // A prune folds what is pending and removes what a prune of the other removes.
        assert_eq!(a.prune(3, false).unwrap(), b.prune(3, false).unwrap());
        assert!(a.pending.read().unwrap().buckets.is_empty());
        assert_eq!(a.db.scan_prefix([PENDING]).count(), 0);
        assert_eq!(all_tokens(&a), all_tokens(&b));
        assert_eq!(a.totals(), b.totals());
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
        let store = reopen(dir.path());
        assert_eq!(store.token("b").unwrap().messages, [0, 2]);
        assert_eq!(store.totals().messages, [0, 2]);
        assert_eq!(
            store.ledger_entry(&[2; 16]).unwrap().unwrap().class,
            Class::Spam
        );
    }

    /// Scoring holds a reader for a whole message while lessons commit: on two threads at
    /// once, with the table preloaded and without, with lessons written as pending records
    /// and as rewritten buckets, neither ever waits for the other for good, and a reader
    /// sees counts only grow.
    #[test]
    fn scoring_and_learning_at_once_never_wait_on_each_other_for_good() {
        use crate::store::ReadCounts;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let spam = Class::Spam.index();
        for preloaded in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let store = Arc::new(SledStore::open(dir.path(), &StoreOptions::default()).unwrap());
            if preloaded {
                store.preload().unwrap();
            }
            let learning = Arc::new(AtomicBool::new(true));
            let (done, finished) = std::sync::mpsc::channel();
            for _ in 0..2 {
                let (store, learning, done) = (store.clone(), learning.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut seen = 0;
                    while learning.load(Ordering::Relaxed) {
                        let counts = ReadCounts::new(&*store);
                        // Every lesson adds both: read first, b can only be behind.
                        let b = counts.token("b").map_or(0, |c| c.messages[spam]);
                        let a = counts.token("a").map_or(0, |c| c.messages[spam]);
                        assert!(a >= seen && b <= a, "{seen} then {a}, and {b}");
                        counts.finish().unwrap();
                        seen = a;
                    }
                    done.send(seen).unwrap();
                });
            }
            let writer = {
                let (store, learning) = (store.clone(), learning.clone());
                std::thread::spawn(move || {
                    for round in 0..40u32 {
                        // One lesson (a pending record), or a hundred (buckets rewritten).
                        let n = if round % 4 == 3 { 100 } else { 1 };
                        let lessons: Vec<Lesson> = (0..n)
                            .map(|i| Lesson {
                                digest: [
                                    &round.to_le_bytes()[..],
                                    &(i as u32).to_le_bytes()[..],
                                    &[0; 8],
                                ]
                                .concat()
                                .try_into()
                                .unwrap(),
                                ..lesson(0, Some(Class::Spam), "a b")
                            })
                            .collect();
                        store.learn(&lessons).unwrap();
                    }
                    learning.store(false, Ordering::Relaxed);
                })
            };
            for _ in 0..2 {
                let seen = finished
                    .recv_timeout(std::time::Duration::from_secs(20))
                    .expect("a reader and the writer wait on each other");
                assert!(seen <= 10 * 100 + 30);
            }
            writer.join().unwrap();
            assert_eq!(store.token("a").unwrap().messages[spam], 10 * 100 + 30);
        }
    }

    #[test]
    fn a_snapshot_left_unfinished_is_no_damage() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
            store.learn(&[lesson(1, Some(Class::Spam), "a b")]).unwrap();
            store.flush().unwrap();
        }
        // As sled leaves it when the disk fills while it writes one: empty, and named
        // after every finished one.
        let unfinished = dir.path().join("snap.FFFFFFFFFFFFFFFF.generating");
        std::fs::write(&unfinished, b"").unwrap();
        let store = reopen(dir.path());
        assert_eq!(store.token("b").unwrap().messages, [0, 1]);
        assert!(!unfinished.exists());
        // Not while another process may be writing it: the database is held.
        drop(store);
        let _held = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        std::fs::write(&unfinished, b"").unwrap();
        assert!(!remove_unfinished_snapshots(dir.path()));
        assert!(unfinished.exists());
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

    /// sled unwraps spawning its threads: that panic, where no thread is to be had, is told
    /// from the panics of damaged files, which it must not be taken for.
    #[test]
    fn a_thread_that_cannot_start_is_no_damage() {
        let panic_of = |f: fn()| crate::quiet_panic::catch_quietly(f).unwrap_err();
        // As sled's `thread::Builder::spawn(…).unwrap()` fails.
        fn spawned(e: std::io::Error) {
            std::hint::black_box(Err::<(), _>(e)).unwrap()
        }
        let error_of = |f: fn()| open_panic_error(Path::new("db"), panic_of(f).as_ref());
        for eagain in [
            (|| spawned(std::io::Error::from_raw_os_error(11))) as fn(),
            || spawned(std::io::ErrorKind::WouldBlock.into()),
        ] {
            let e = error_of(eagain);
            assert!(matches!(e, Error::Open { .. }), "{e}");
            assert!(e.to_string().contains("ulimit -u"), "{e}");
        }
        for damage in [
            (|| assert!(Vec::<u8>::new()[3] == 0)) as fn(),
            || panic!("invalid page"),
            || std::panic::panic_any(7u32),
        ] {
            let e = error_of(damage);
            assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        }
    }

    /// A database another user made (root's `learn`, the daemon's) refused as "IO error:
    /// Permission denied", which said neither whose permission nor what to do.
    #[test]
    fn a_database_this_user_may_not_write_is_named_with_the_remedy() {
        let denied = sled::Error::Io(std::io::ErrorKind::PermissionDenied.into());
        let e = open_error(Path::new("/var/lib/spamnb/db"), denied);
        let said = e.to_string();
        assert!(matches!(e, Error::Open { .. }), "{said}");
        assert!(said.contains("uid") && said.contains("chown -R"), "{said}");
    }

    /// The damaged database of the audit made `spamnb stats` spin: its ledger scan
    /// yielded errors without end.
    #[test]
    fn counting_keys_stops_at_the_first_error() {
        let damaged = || Err::<(), _>(sled::Error::Unsupported("damaged".into()));
        let scan = std::iter::once(Ok(()))
            .chain(std::iter::repeat_with(damaged).take(1000))
            .chain(std::iter::once(Ok(())));
        assert!(count_until_error(scan).is_err());
        assert_eq!(count_until_error([Ok(()), Ok(())].into_iter()).unwrap(), 2);
    }

    /// With its blob files gone, a database whose buckets are big opened and scored mail
    /// as if the counts in them had never been learned.
    #[test]
    fn a_count_that_cannot_be_read_is_an_error_not_unlearned() {
        let counts = TokenCounts {
            occurrences: [1, 2],
            messages: [1, 1],
        };
        // Buckets of ~16 KB: sled writes a page of them (up to 16 keys) over a quarter
        // of its 512 KB segment to a blob file of its own.
        let tokens: Vec<(String, TokenCounts)> = (0..20_000)
            .map(|i| (format!("{}{i:08}", "x".repeat(190)), counts))
            .collect();
        // Whether sled still opens without the blobs depends on what its flusher thread
        // had written: tried until it does, for it is the reads after it that are tested.
        for _ in 0..10 {
            let dir = tempfile::tempdir().unwrap();
            let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
            store
                .replace_all(Totals::default(), &tokens, &[], DigestKind::AsSent)
                .unwrap();
            store.flush().unwrap();
            drop(store);
            drop(reopen(dir.path()));
            for blob in std::fs::read_dir(dir.path().join("blobs")).unwrap() {
                std::fs::remove_file(blob.unwrap().path()).unwrap();
            }
            let store = match open_when_free(dir.path()) {
                Err(Error::Corrupt { .. }) => continue,
                opened => opened.unwrap(),
            };
            // Up to the first count that cannot be read: reading all 20,000 of a damaged
            // tree took a minute on a busy machine.
            let unreadable = tokens.iter().any(|(f, _)| {
                let result = store.reader().counts(f, feature_hash(f));
                assert!(
                    matches!(result, Ok(Some(_)) | Err(Error::Corrupt { .. })),
                    "{result:?}"
                );
                result.is_err()
            });
            assert!(unreadable, "every count read without its blob");
            return;
        }
        panic!("sled never opened the database without its blobs");
    }

    #[test]
    fn feature_hash_is_fixed() {
        // Buckets on disk depend on these values: changing the hash is a schema change.
        assert_eq!(
            feature_hash(""),
            0xf52a_15e9_a9b5_e89b,
            "{:#x}",
            feature_hash("")
        );
        assert_ne!(feature_hash("free"), feature_hash("subj:free"));
    }

    #[test]
    fn notes_are_kept_apart_from_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        let note = |k: &[u8], v: Option<&[u8]>| (k.to_vec(), v.map(<[u8]>::to_vec));
        store
            .write_notes(&[
                note(b"w/a", Some(b"1")),
                note(b"w/b", Some(b"2")),
                note(b"x", Some(b"")),
            ])
            .unwrap();
        store.write_notes(&[note(b"w/a", None)]).unwrap();
        let mut seen = Vec::new();
        store
            .for_each_note(b"w/", &mut |k, v| seen.push((k.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(seen, [(b"w/b".to_vec(), b"2".to_vec())]);
        assert_eq!(store.note(b"x").unwrap(), Some(vec![]));
        // Notes written with lessons go in the same batch.
        let out = store
            .learn_noting(
                &[lesson(1, Some(Class::Spam), "a b")],
                &[note(b"w/c", Some(b"3"))],
            )
            .unwrap();
        assert_eq!(out, [Outcome::Learned]);
        assert_eq!(store.note(b"w/c").unwrap(), Some(b"3".to_vec()));
        assert_eq!(store.stats().unwrap().ledger_entries, 1);
        let mut tokens = 0;
        store.for_each_token(&mut |_, _| tokens += 1).unwrap();
        assert_eq!(tokens, 2, "notes are not tokens");
    }
}
