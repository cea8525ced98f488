//! Where learned counts live: the [`Store`] trait, and its sled implementation.
//!
//! The trait is the seam for other backends (a networked one shared by many MTA hosts);
//! nothing about sled leaks past it.

mod dump;
mod layout;
mod sled_store;

use std::cell::OnceCell;
use std::path::PathBuf;

pub use dump::{Dump, export, read_dump};
pub use sled_store::{SledStore, StoreOptions};

use crate::features::{Features, feature_hash};
use crate::message::{Digest, DigestKind};
use crate::model::{Class, CountSource, TokenCounts, Totals};

/// How long a process waits for a database that another spamnb process holds (a `learn`,
/// a hook, a daemon restarting) before it gives up: sled admits one process at a time.
/// `--lock-wait` (`SPAMNB_LOCK_WAIT`) sets another; a hook with a deadline of its own
/// (Dovecot kills a pipe program after 10 s) wants a shorter one.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Waiting for a database another process holds, a little longer each try, for a given
/// time in all (`StoreOptions::lock_wait`).
pub struct LockWait {
    deadline: std::time::Instant,
    pause: std::time::Duration,
}

impl LockWait {
    pub fn up_to(wait: std::time::Duration) -> LockWait {
        LockWait {
            deadline: std::time::Instant::now() + wait,
            pause: std::time::Duration::from_millis(20),
        }
    }

    /// Sleeps before another try and says so, or says there is none: the time is up.
    pub fn again(&mut self) -> bool {
        let now = std::time::Instant::now();
        if now >= self.deadline {
            return false;
        }
        std::thread::sleep(self.pause.min(self.deadline - now));
        self.pause = (self.pause * 2).min(std::time::Duration::from_millis(500));
        true
    }
}

/// The file in a database's directory that names the daemon holding the database: a
/// command that finds it locked, and no control socket where it looks, then knows that
/// waiting would not help (the daemon's socket is elsewhere, or not this user's to use).
pub const DAEMON_PID_FILE: &str = "daemon.pid";

/// The file in a database's directory that names the `spamnb watch` holding the database,
/// so that opening it fails at once ([`Error::HeldByWatcher`]) rather than wait in vain: a
/// Dovecot hook has 10 s.
pub const WATCHER_PID_FILE: &str = "watch.pid";

/// The process id of the running daemon that holds the database at `db`, if one does.
pub fn holding_daemon(db: &std::path::Path) -> Option<u32> {
    running_pid(&db.join(DAEMON_PID_FILE))
}

/// The process id of the running `spamnb watch` that holds the database at `db`, if one does.
fn holding_watcher(db: &std::path::Path) -> Option<u32> {
    running_pid(&db.join(WATCHER_PID_FILE))
}

/// Whether a daemon may hold the database at `db`: its pid file names one running, or
/// cannot be read (a daemon under systemd keeps its database to its own user and group).
pub fn daemon_may_hold(db: &std::path::Path) -> bool {
    match std::fs::read_to_string(db.join(DAEMON_PID_FILE)) {
        Ok(text) => running(&text).is_some(),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// The process that a pid file names, if it runs.
fn running_pid(file: &std::path::Path) -> Option<u32> {
    running(&std::fs::read_to_string(file).ok()?)
}

/// The process a pid file's `text` names, if it runs.
fn running(text: &str) -> Option<u32> {
    let pid: u32 = text.trim().parse().ok()?;
    // A file left by a process that was killed names no process, or one that got its id
    // since: only a process running this same program counts.
    let program = |pid: &str| std::fs::read(format!("/proc/{pid}/comm")).ok();
    (program(&pid.to_string())? == program("self")?).then_some(pid)
}

/// A pid file in the database's directory that names this process while it holds the
/// database ([`DAEMON_PID_FILE`], [`WATCHER_PID_FILE`]), removed when dropped.
pub struct PidFile(PathBuf);

impl PidFile {
    /// Writes it; a file that cannot be written costs only the quick refusal it gives
    /// other commands, so it is logged, not an error.
    pub fn write(db: &std::path::Path, name: &str) -> PidFile {
        let path = db.join(name);
        if let Err(e) = std::fs::write(&path, format!("{}\n", std::process::id())) {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
        PidFile(path)
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The database layout this spamnb reads and writes. Version 1 to 3 databases are
/// upgraded when opened (see `SledStore::open`).
pub const SCHEMA_VERSION: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the database {path} is in use by another process (a running spamnb daemon?); \
         stop that process, or run this command while the daemon is up so it goes through its socket"
    )]
    Locked { path: PathBuf },
    /// Locked by a `spamnb watch`: it keeps the database for as long as it runs and has no
    /// socket to share it through, so waiting for it is in vain.
    #[error(
        "the database {path} is held by `spamnb watch` (process {pid}), which keeps it for as \
         long as it runs; stop it and let the daemon watch the Maildirs instead (`spamnb daemon` \
         reads the same [watch] section): commands then go through the daemon's control socket"
    )]
    HeldByWatcher { path: PathBuf, pid: u32 },
    #[error("cannot open the database {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error(
        "{path} is not a spamnb database (it holds other files); point --db at a new or empty directory"
    )]
    Foreign { path: PathBuf },
    #[error(
        "the database {path} has schema version {found}, this spamnb reads version {expected}; \
         export it with the spamnb that wrote it and import it with this one"
    )]
    Schema {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error(
        "the database {path} is damaged: {reason}; rebuild it with `spamnb import` from an \
         export, or, with no export, move it aside and learn your mail again into a new one \
         (`spamnb learn --spam DIR`, `spamnb learn --ham DIR`)"
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error("database write failed: {0}")]
    Write(String),
    #[error("line {line}: {reason}")]
    Import { line: usize, reason: String },
    #[error(
        "the dump looks cut off: {reason}; nothing was imported. Export the database again \
         (or take a whole copy of the dump) and import that"
    )]
    CutOff { reason: String },
    #[error("cannot import into {path}: it already holds learned mail; import into a new database")]
    NotEmpty { path: PathBuf },
    // Transparent, not `{0}` with the io::Error as its source: a cause chain printed
    // whole (`{:#}`) said it twice.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A store's counts as [`crate::model::classify`] reads them, which cannot fail: the
/// first read error is kept aside, for [`ReadCounts::finish`] to return once the verdict
/// is made. One per message, dropped when it is scored: it holds the store's reader.
pub struct ReadCounts<'s> {
    totals: Totals,
    reader: Box<dyn CountReader + 's>,
    error: OnceCell<Error>,
}

impl<'s> ReadCounts<'s> {
    pub fn new(store: &'s dyn Store) -> ReadCounts<'s> {
        // The totals first: a lesson's commit takes their lock before the counts' one.
        let totals = store.totals();
        ReadCounts {
            totals,
            reader: store.reader(),
            error: OnceCell::new(),
        }
    }

    /// The first error met while reading, if any: the verdict made meanwhile is wrong.
    pub fn finish(self) -> Result<(), Error> {
        self.error.into_inner().map_or(Ok(()), Err)
    }
}

impl CountSource for ReadCounts<'_> {
    fn totals(&self) -> Totals {
        self.totals
    }

    fn token(&self, feature: &str) -> Option<TokenCounts> {
        self.token_hashed(feature, feature_hash(feature))
    }

    fn token_hashed(&self, feature: &str, hash: u64) -> Option<TokenCounts> {
        if self.error.get().is_some() {
            return None; // the verdict is lost already; reading on would only cost time
        }
        self.reader.counts(feature, hash).unwrap_or_else(|e| {
            let _ = self.error.set(e);
            None
        })
    }
}

/// A store's counts as one message's scoring reads them, feature after feature: what the
/// store locks to read them is locked once for the message, not at every feature, where
/// scoring threads took turns at the lock's cache line.
pub trait CountReader {
    /// A feature's counts (`None`: never learned), or the error that kept them from being
    /// read.
    fn counts(&self, feature: &str, hash: u64) -> Result<Option<TokenCounts>, Error>;
}

/// One message to learn (`target` a class) or forget (`target` None).
#[derive(Debug, Clone)]
pub struct Lesson {
    pub digest: Digest,
    pub target: Option<Class>,
    pub features: Features,
    pub user: Option<String>,
    /// Learned only if the ledger does not know the message: what spamnb learns from its
    /// own confident verdicts (autolearning) never overrides what a person taught.
    pub tentative: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Learned,
    /// It had been learned as the other class; its counts moved.
    Relearned,
    AlreadyKnown,
    Forgotten,
    /// Forget asked for a message that was never learned.
    NotLearned,
}

impl Outcome {
    const NAMES: [(Outcome, &'static str); 5] = [
        (Outcome::Learned, "learned"),
        (Outcome::Relearned, "relearned"),
        (Outcome::AlreadyKnown, "known"),
        (Outcome::Forgotten, "forgotten"),
        (Outcome::NotLearned, "not-learned"),
    ];

    /// The outcome's name in logs and on the control socket.
    pub fn name(self) -> &'static str {
        Outcome::NAMES
            .iter()
            .find(|(o, _)| *o == self)
            .map_or("", |(_, n)| n)
    }

    pub fn from_name(name: &str) -> Option<Outcome> {
        Outcome::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(o, _)| *o)
    }
}

/// What the ledger remembers of a learned message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerEntry {
    pub class: Class,
    /// Seconds since the Unix epoch when it was learned.
    pub learned_at: u64,
    pub user: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    pub totals: Totals,
    pub ledger_entries: u64,
    pub size_on_disk: u64,
    pub schema_version: u32,
    /// How the ledger names a message.
    pub ledger_digest: DigestKind,
}

/// What [`Store::prune`] did, or would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Pruned {
    pub removed: u64,
    pub kept: u64,
}

pub trait Store: CountSource + Send + Sync {
    /// The counts, for one message's scoring; a lesson waits for the reader to be dropped.
    /// Scoring goes through [`ReadCounts`], so that a damaged database fails the check
    /// instead of scoring mail as if it had learned none of it.
    fn reader(&self) -> Box<dyn CountReader + '_>;

    fn ledger_entry(&self, digest: &Digest) -> Result<Option<LedgerEntry>, Error>;

    /// How the ledger names a message: each lesson's digest must be of this kind.
    fn digest_kind(&self) -> DigestKind;

    /// Applies the lessons in order, all of them or none: a crash never leaves part of a
    /// message learned.
    fn learn(&self, lessons: &[Lesson]) -> Result<Vec<Outcome>, Error>;

    fn stats(&self) -> Result<Stats, Error>;

    /// Makes everything learned so far durable.
    fn flush(&self) -> Result<(), Error>;

    /// Every feature with its counts, in key order.
    fn for_each_token(&self, each: &mut dyn FnMut(&str, TokenCounts)) -> Result<(), Error>;

    /// Every ledger entry, in digest order.
    fn for_each_ledger_entry(
        &self,
        each: &mut dyn FnMut(&Digest, &LedgerEntry),
    ) -> Result<(), Error>;

    /// A front end's own bookkeeping kept beside the model (the folder watcher's record of
    /// the files it has seen), by opaque key. Notes are not part of an export: losing them
    /// costs a rescan, never a count.
    fn note(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let _ = key;
        Err(Error::Write("this store keeps no notes".into()))
    }

    /// [`Store::learn`], and sets or removes notes in the same atomic write: a front end's
    /// record of what it learned can never disagree with the ledger after a crash.
    fn learn_noting(
        &self,
        lessons: &[Lesson],
        notes: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Result<Vec<Outcome>, Error> {
        let _ = (lessons, notes);
        Err(Error::Write("this store keeps no notes".into()))
    }

    /// Sets (`Some`) or removes (`None`) notes, all of them or none.
    fn write_notes(&self, changes: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<(), Error> {
        let _ = changes;
        Err(Error::Write("this store keeps no notes".into()))
    }

    /// Every note whose key starts with `prefix`, in key order.
    fn for_each_note(
        &self,
        prefix: &[u8],
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        let _ = (prefix, each);
        Err(Error::Write("this store keeps no notes".into()))
    }

    /// Runs `read` with every write held off: reads that must agree with each other (an
    /// export's totals, tokens and ledger) while a daemon goes on learning.
    fn holding_writes(&self, read: &mut dyn FnMut() -> Result<(), Error>) -> Result<(), Error> {
        read()
    }

    /// Removes the counts of every feature seen in fewer than `min_messages` learned
    /// messages, rule hits excepted, and takes them off the totals, in one atomic write
    /// (with `dry_run`, only counts them). What was removed is gone: forgetting or
    /// relearning a message learned before takes off only the counts that are left.
    fn prune(&self, min_messages: u32, dry_run: bool) -> Result<Pruned, Error>;

    /// Loads a whole model into an empty store in one atomic step, its ledger keyed by
    /// digests of `digest_kind`.
    fn replace_all(
        &self,
        totals: Totals,
        tokens: &[(String, TokenCounts)],
        ledger: &[(Digest, LedgerEntry)],
        digest_kind: DigestKind,
    ) -> Result<(), Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid file counts only while it names a running process of this same program: one
    /// left by a killed daemon may name a process that got its id since.
    #[test]
    fn a_pid_file_names_a_holder_only_while_it_runs_this_program() {
        let dir = tempfile::tempdir().unwrap();
        let naming = |pid: u32| {
            std::fs::write(dir.path().join(WATCHER_PID_FILE), format!("{pid}\n")).unwrap();
            holding_watcher(dir.path())
        };
        let me = std::process::id();
        assert_eq!(naming(me), Some(me));
        let mut other = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert_eq!(naming(other.id()), None, "a process of another program");
        other.kill().unwrap();
        other.wait().unwrap();
        assert_eq!(naming(other.id()), None, "a process that has ended");
        assert!(!daemon_may_hold(dir.path()), "no daemon.pid");
        let held = PidFile::write(dir.path(), DAEMON_PID_FILE);
        assert_eq!(holding_daemon(dir.path()), Some(me));
        assert!(daemon_may_hold(dir.path()));
        drop(held);
        assert_eq!(holding_daemon(dir.path()), None, "removed when dropped");
        assert!(!daemon_may_hold(dir.path()));
        // A pid file that cannot be read (here a directory, as root reads every file) may
        // be a daemon's: the commands leave the rules to it.
        std::fs::create_dir(dir.path().join(DAEMON_PID_FILE)).unwrap();
        assert_eq!(holding_daemon(dir.path()), None);
        assert!(daemon_may_hold(dir.path()));
    }
}
