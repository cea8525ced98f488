//! Learning from users' folder moves: a message a user moves into Junk is learned as spam,
//! one rescued out of it is relearned as ham, without anyone running a command.
//!
//! The watcher keeps a non-recursive `notify` (inotify) watch on every folder's `new/` and
//! `cur/` (and on the folder itself, to see new subfolders), gathers events until they
//! settle for [`WatchSettings::debounce`], and then looks at each file that appeared.
//! Maildir's semantics decide what a file means:
//!
//! - a message file is known by its unique name, the part before `:2,`; a rename that only
//!   changes the flags after it (or moves it from `new/` to `cur/`) is not a move and
//!   teaches nothing;
//! - a message is recognised across folders by its digest (its content without spamnb's
//!   own headers), not by its file name: Dovecot links a copy in under the name of the
//!   file it was made from, but other servers, and a client that copies by appending, give
//!   it a new one; the record of where each digest was last seen tells a move from a
//!   delivery;
//! - a message that appears in a spam folder is learned as spam (relearned if it was
//!   learned as ham), except a fresh delivery that spamnb itself flagged `X-Spam-Flag: YES`:
//!   that is spamnb's own verdict filed by a Sieve rule, and learning it would only teach
//!   the filter what it already believes;
//! - a message moved into a ham folder is relearned as ham when it came from a spam folder
//!   and had been learned as spam, or carries `X-Spam-Flag: YES`; a fresh delivery into a
//!   ham folder teaches nothing;
//! - a file came from the folder events saw it renamed from (the same file, moved); else
//!   from the folder that a file of the same message left in the same batch of events or
//!   rescan, gone or marked deleted (a move, or a client's move by copying; a folder other
//!   than a spam folder if there is one, so that mail filed from INBOX to Archive while its
//!   copy in Junk is thrown away came from INBOX), else from the folder the message was
//!   last seen in (a copy made there, or a move the watcher did not see); a file that left
//!   a spam folder as this one arrived rescues nothing while a copy of the message stays
//!   unmarked in another folder that keeps mail, ham or not, but neither a spam nor a
//!   never-learn one (a copy of INBOX's original filed in Archive as Junk is emptied),
//!   unless it is known to come from there (seen renamed out of it, or a rescue below
//!   completed);
//! - a copy made out of a spam folder while the one copied stays there unmarked for
//!   deletion rescues nothing yet, and nothing at all if one stays unmarked in another
//!   folder that keeps mail too (the copy may come from there: the original in INBOX
//!   copied to Archive);
//!   that one marked deleted or gone within 15 minutes (a client that moves by copying)
//!   completes the rescue, seen as it happens or by the next rescan, unless a file of the
//!   message left another folder meanwhile (the copy may have come from there: a client
//!   filing by copying), and whatever copies of the rescued one were filed meanwhile; the
//!   rescued one moved on to another folder under its name (as Dovecot moves and copies),
//!   the rescue follows it;
//! - a message whose last file in the spam folder it was last seen in goes, or is marked
//!   deleted, with no file of it arriving elsewhere, was deleted there: the record forgets
//!   where it was, so that a copy of it made elsewhere later rescues nothing; that mark
//!   taken off again, or the file moved out still marked, the message was last seen there
//!   as before (unless, moved out, a copy of it stays in another folder it may come from);
//! - never-learn folders (Trash, Sent, Drafts …) teach nothing, and a deleted message is
//!   not unlearned.
//!
//! Nothing is missed: the first scan of a user records what the Maildir holds without
//! learning it (`spamnb learn --spam --user U ~/Maildir/.Junk` teaches an existing Junk
//! folder); every later start, and every kernel event-queue overflow, rescans all folders
//! and handles each file the record does not know, so moves made while spamnb was down are
//! learned once. Learning goes through the ledger, which makes it idempotent, and the
//! record of the files a batch took in and of those that left is written in the same
//! atomic step as its lessons ([`Store::learn_noting`]),
//! so a crash leaves both or neither (a batch too big for one write records what left
//! with its last lessons).
//!
//! The record of where each message was last seen is forgotten after
//! [`WatchSettings::forget_moves_after`], checked once a day: without that it grows by a
//! record for every message ever delivered.
//!
//! A per-user burst limit ([`WatchSettings::burst_limit`]) caps how many messages a burst
//! of moves may teach; the excess is logged, with the command that would learn it by hand,
//! and recorded as seen so that it is not retried.
//!
//! # Running it
//!
//! `spamnb watch` runs it in the foreground for the users of the `[watch]` section, or for
//! one Maildir given on the command line. The daemon runs it beside its listeners with
//! [`run`]:
//!
//! ```ignore
//! let watcher = tokio::spawn(spamnb::watch::run(settings, shared_engine.clone(), token.child_token()));
//! // … on SIGTERM: token.cancel(); watcher.await??;
//! ```
//!
//! [`run`] moves the blocking watcher onto tokio's blocking pool and returns when
//! `shutdown` is cancelled (within a fifth of a second), or with an error when it cannot
//! start (a Maildir watch that cannot be set, an unreadable store). Once running, a batch
//! that fails is logged and made up for by a rescan 30 s later. It takes the engine afresh
//! for every batch, so a SIGHUP swap of the [`SharedEngine`] applies to the next batch, and
//! it learns through the engine's store: sled admits one process, so `spamnb watch` and the
//! daemon cannot share a database.

mod burst;
mod folder;
mod seen;
mod settings;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher as _};
use rayon::prelude::*;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

pub use folder::{Folder, FolderKind, classify, discover, unique_name};
pub use settings::{RawWatch, UserMaildir, WatchSettings};

use crate::engine::{Engine, SharedEngine};
use crate::mailbox::{self, MailSource};
use crate::message::{Digest, escape_control};
use crate::model::Class;
use crate::store::{Outcome, Store};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Causes here are part of the message, not a `source`: a cause chain printed whole
    // (`{:#}`) would say them twice.
    #[error("cannot watch {path}: {cause}; raise fs.inotify.max_user_watches")]
    Watch {
        /// Shown with its control characters escaped: a folder's name is a user's choice.
        path: String,
        cause: notify::Error,
    },
    #[error("cannot start watching files: {0}")]
    Notify(notify::Error),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error("the folder watcher stopped: its event source closed")]
    Closed,
    #[error("the folder watcher crashed: {0}")]
    Crashed(String),
}

impl From<notify::Error> for Error {
    fn from(cause: notify::Error) -> Error {
        Error::Notify(cause)
    }
}

/// Runs the watcher on tokio's blocking pool until `shutdown` is cancelled. Returns an
/// error when it cannot start (a watch that cannot be set, a store that cannot be read).
pub async fn run(
    settings: WatchSettings,
    engine: Arc<SharedEngine>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    // The watcher blocks on a channel and on sled: it gets a thread of its own.
    tokio::task::spawn_blocking(move || Watcher::start(settings, engine)?.run(&shutdown))
        .await
        .map_err(|e| Error::Crashed(e.to_string()))?
}

/// What the watcher has done since it started, for logs, metrics and tests.
#[derive(Debug, Default)]
pub struct Counters {
    /// Messages learned for the first time.
    pub learned: AtomicU64,
    /// Messages moved from one class to the other.
    pub relearned: AtomicU64,
    /// Messages the burst limit kept from being learned.
    pub over_limit: AtomicU64,
    /// Files that could not be read.
    pub unreadable: AtomicU64,
    /// Rescans: of every Maildir (start, overflow), or of one that appeared.
    pub rescans: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

struct UserState {
    user: String,
    root: PathBuf,
    folders: Vec<Folder>,
    /// Whether the Maildir was there at the last look: a mailbox is made at its first
    /// delivery, which may come after the watcher started.
    found: bool,
}

/// A message file that appeared, or that a rescan found unrecorded.
#[derive(Clone)]
struct Candidate {
    user: usize,
    folder: usize,
    path: PathBuf,
    unique: String,
}

/// A message file by its user, folder and unique name: one that went from its folder, or
/// was marked deleted there.
struct FileAt {
    user: usize,
    folder: usize,
    unique: String,
}

impl From<Candidate> for FileAt {
    fn from(c: Candidate) -> FileAt {
        FileAt {
            user: c.user,
            folder: c.folder,
            unique: c.unique,
        }
    }
}

/// The messages (by user and digest) that files left folders with in one batch of events
/// or one rescan, gone or marked deleted, and the folders they left: a file of one of them
/// that arrives in another folder was moved from there, not copied from where the message
/// was last seen.
#[derive(Default)]
struct Departures {
    /// The folders each message left.
    folders: HashMap<(usize, Digest), Vec<usize>>,
    /// The spam folder each message the record has no last folder for stopped being
    /// marked deleted in (the mark taken off, or the file left with it): it was forgotten
    /// as deleted there, and is taken as last seen there again.
    unmarked: HashMap<(usize, Digest), usize>,
    /// The folder each file (by user, folder and unique name) is known to come from: one
    /// that events saw renamed in from another folder (the same file, moved), or a copy
    /// made out of a spam folder whose rescue the copy left there completes.
    came_from: HashMap<(usize, usize, String), usize>,
}

/// What changed in a user's folders, as a batch of events or a scan finds it.
#[derive(Default)]
struct Changes {
    /// Files the record does not know (or knew before they left and came back).
    appeared: Vec<Candidate>,
    /// Files gone from their folders.
    gone: Vec<FileAt>,
    /// Files marked deleted (the `T` flag), still there.
    marked: Vec<FileAt>,
    /// Files in spam folders that were marked deleted and are no longer: the mark taken
    /// off in place, or the file gone with it (also in `gone`).
    unmarked: Vec<FileAt>,
    /// The folder each file that events saw renamed in from another folder came from.
    renamed: HashMap<(usize, usize, String), usize>,
}

/// What the files that left folders leave to the record, written with a batch's last
/// lessons: a crash before then leaves them recorded, and the rescan after it sees them
/// leave again.
#[derive(Default)]
struct Leaving {
    /// The files gone, forgotten in their folders; the rescues called off.
    changes: Vec<seen::Change>,
    /// The messages (user, digest) that left a spam folder, and that folder.
    from_spam: Vec<(usize, Digest, usize)>,
    /// The unique names of the files that left, by user and folder.
    left: HashMap<(usize, usize), HashSet<String>>,
}

/// How many messages go to the store in one atomic write, at most: as `spamnb learn`
/// batches, since a write rewrites every bucket of counts it touches.
const BATCH: usize = 1000;
/// How many bytes of mail one batch reads into memory, roughly at most.
const BATCH_BYTES: u64 = 64 << 20;
/// However busy the folders, a batch is read at the latest this long after its first event.
const MAX_GATHER: Duration = Duration::from_secs(1);
/// How often an idle watcher looks at its shutdown token.
const TICK: Duration = Duration::from_millis(200);
/// How long after a failed batch the watcher rescans.
const RETRY: Duration = Duration::from_secs(30);
/// How often old records of where messages were seen are forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(settings::DAY_SECS);

fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub struct Watcher {
    settings: WatchSettings,
    engine: Arc<SharedEngine>,
    users: Vec<UserState>,
    /// Folder directory → (user, folder) index.
    folder_dirs: HashMap<PathBuf, (usize, usize)>,
    watched: HashSet<PathBuf>,
    notify: notify::RecommendedWatcher,
    events: Receiver<notify::Result<notify::Event>>,
    sender: Sender<notify::Result<notify::Event>>,
    burst: burst::BurstLimit,
    counters: Arc<Counters>,
}

impl Watcher {
    /// Sets the watches, then rescans every user's Maildir. When it returns, everything
    /// moved so far is learned and every later move will be seen.
    pub fn start(settings: WatchSettings, engine: Arc<SharedEngine>) -> Result<Watcher, Error> {
        let (sender, events) = std::sync::mpsc::channel();
        let tx = sender.clone();
        // notify calls this on its own thread; an unbounded channel means the kernel queue
        // is drained at once however long a batch takes to learn.
        let notify = notify::recommended_watcher(move |event| {
            let _ = tx.send(event);
        })?;
        let users = settings
            .users
            .iter()
            .map(|u| UserState {
                user: u.user.clone(),
                root: u.root.clone(),
                folders: Vec::new(),
                found: true,
            })
            .collect();
        let mut watcher = Watcher {
            burst: burst::BurstLimit::new(settings.burst_limit, settings.burst_window),
            settings,
            engine,
            users,
            folder_dirs: HashMap::new(),
            watched: HashSet::new(),
            notify,
            events,
            sender,
            counters: Arc::default(),
        };
        // Watches first, scan second: a move during the scan is then seen by both, and the
        // record makes the second look a no-op.
        for user in 0..watcher.users.len() {
            watcher.refresh_folders(user)?;
        }
        watcher.rescan_all()?;
        Ok(watcher)
    }

    /// Forgets, for each user, where messages were last seen when that is older than
    /// `forget_moves_after`. A failure waits for the next day: nothing depends on it.
    fn forget_old_moves(&self) {
        let Some(keep) = self.settings.forget_moves_after else {
            return;
        };
        let now = epoch_secs();
        let cutoff = now.saturating_sub(keep.as_secs());
        let store = &*self.engine.current().store;
        for u in &self.users {
            match seen::forget_moves(store, &u.user, cutoff, now) {
                Ok(0) => {}
                Ok(n) => info!(
                    "folder watch: forgot where {n} messages of {} were last seen, {} days ago or more",
                    u.user,
                    keep.as_secs() / settings::DAY_SECS
                ),
                Err(e) => warn!(
                    "folder watch: could not forget old records of {}'s messages: {e}",
                    u.user
                ),
            }
        }
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Acts as if the kernel had reported an event-queue overflow: every event still
    /// queued is dropped and the next batch is a full rescan. For tests of that path.
    #[doc(hidden)]
    pub fn simulate_overflow(&self) {
        while self.events.try_recv().is_ok() {}
        let _ = self.sender.send(Ok(
            notify::Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan)
        ));
    }

    /// Watches until `shutdown` is cancelled, then makes what was learned durable.
    pub fn run(mut self, shutdown: &CancellationToken) -> Result<(), Error> {
        let result = self.event_loop(shutdown);
        self.engine.current().store.flush()?;
        result
    }

    fn event_loop(&mut self, shutdown: &CancellationToken) -> Result<(), Error> {
        // After a failed batch (a full disk, a watch limit), a rescan later makes up for it:
        // the watcher outlives trouble instead of silently stopping inside the daemon.
        let mut retry_at: Option<Instant> = None;
        let mut forget_at = Instant::now();
        let look_every = self.settings.look_for_maildirs;
        let mut look_at = Instant::now() + look_every;
        while !shutdown.is_cancelled() {
            if Instant::now() >= forget_at {
                forget_at = Instant::now() + FORGET_EVERY;
                self.forget_old_moves();
            }
            if Instant::now() >= look_at {
                look_at = Instant::now() + look_every;
                if let Err(e) = self.look_for_missing_maildirs() {
                    error!("folder watch: {e}; rescanning in {RETRY:?}");
                    retry_at = Some(Instant::now() + RETRY);
                }
            }
            if retry_at.is_some_and(|at| Instant::now() >= at) {
                retry_at = None;
                let rescan = (0..self.users.len())
                    .try_for_each(|user| self.refresh_folders(user))
                    .and_then(|()| self.rescan_all());
                if let Err(e) = rescan {
                    error!("folder watch: {e}; trying again in {RETRY:?}");
                    retry_at = Some(Instant::now() + RETRY);
                }
            }
            let first = match self.events.recv_timeout(TICK) {
                Ok(e) => e,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Err(Error::Closed),
            };
            let started = Instant::now();
            let mut last = started;
            let mut batch = vec![first];
            loop {
                let quiet_until = last + self.settings.debounce;
                let deadline = quiet_until.min(started + MAX_GATHER);
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                match self.events.recv_timeout(deadline - now) {
                    Ok(e) => {
                        batch.push(e);
                        last = Instant::now();
                    }
                    Err(_) => break,
                }
            }
            if let Err(e) = self.handle(batch) {
                error!("folder watch: {e}; rescanning in {RETRY:?}");
                retry_at = Some(Instant::now() + RETRY);
            }
        }
        Ok(())
    }

    fn handle(&mut self, events: Vec<notify::Result<notify::Event>>) -> Result<(), Error> {
        use notify::event::{ModifyKind, RenameMode};
        let mut rescan = false;
        // Every path named, in order, and those a file left (moved away, expunged, renamed
        // for new flags). A path can be both: moved out of a folder and back in.
        let mut paths = Vec::new();
        let mut seen_paths = HashSet::new();
        let mut left = HashSet::new();
        // Paths that arrived by a rename: a folder renamed (or moved in whole) brings mail
        // that was filed, not moved by the user one message at a time.
        let mut arrived = HashSet::new();
        // Each rename seen whole (from, to): a file renamed into another folder is known
        // to come from there, where a copy and a deletion could be of other files.
        let mut renames = Vec::new();
        for event in events {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    // An error from the event source may mean events were lost.
                    warn!("folder watch: {e}; rescanning");
                    rescan = true;
                    continue;
                }
            };
            if event.need_rescan() {
                warn!("folder watch: the kernel's event queue overflowed; rescanning");
                rescan = true;
                continue;
            }
            match event.kind {
                // Our own reads open files too: openings teach nothing.
                EventKind::Access(_) => continue,
                EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                    left.extend(event.paths.iter().cloned());
                }
                EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                    left.extend(event.paths.first().cloned());
                    arrived.extend(event.paths.get(1).cloned());
                    if let [from, to] = &event.paths[..] {
                        renames.push((from.clone(), to.clone()));
                    }
                }
                EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                    arrived.extend(event.paths.iter().cloned());
                }
                _ => {}
            }
            for path in event.paths {
                if seen_paths.insert(path.clone()) {
                    paths.push(path);
                }
            }
        }
        if rescan {
            for user in 0..self.users.len() {
                self.refresh_folders(user)?;
            }
            return self.rescan_all();
        }

        // Folders renamed away or deleted first: their watches follow the directory to its
        // new name, and a folder made again under the old name needs watches of its own.
        let mut changed_users: HashSet<usize> = paths
            .iter()
            .filter_map(|p| self.folder_dirs.get(p).map(|&(user, _)| user))
            .collect();
        for &user in &changed_users {
            self.forget_lost_folders(user, &left)?;
        }
        let mut candidates = Vec::new();
        let mut gone = Vec::new();
        for path in paths {
            if let Some(c) = self.candidate(&path) {
                let exists = path.exists();
                if !exists || left.contains(&path) {
                    gone.push(c.clone());
                }
                if exists {
                    candidates.push(c);
                }
            } else if path.is_dir()
                && let Some(user) = self.users.iter().position(|u| path.starts_with(&u.root))
            {
                changed_users.insert(user);
                // A folder being made: its cur/ and new/ may come after this event.
                let is_sub = path
                    .file_name()
                    .is_some_and(|n| matches!(n.to_str(), Some("cur" | "new" | "tmp")));
                if !is_sub {
                    self.watch(&path)?;
                }
            }
        }
        // A file that left its folder is forgotten there, so that the same file moved back
        // (rename(2) keeps its name) is looked at anew. A flag change leaves a file of the
        // same unique name under another name: that record stays.
        let renamed_in_place: HashSet<(usize, usize, &str)> = candidates
            .iter()
            .filter(|c| !left.contains(&c.path))
            .map(|c| (c.user, c.folder, c.unique.as_str()))
            .collect();
        // The files in spam folders that a name marked deleted left: one of the same unique
        // name there now unmarked had the mark taken off, and one gone left with it.
        let in_spam = |c: &Candidate| self.users[c.user].folders[c.folder].kind == FolderKind::Spam;
        let marked_left: HashSet<(usize, usize, &str)> = (gone.iter())
            .filter(|c| in_spam(c) && trashed(&c.path))
            .map(|c| (c.user, c.folder, c.unique.as_str()))
            .collect();
        let is_marked_left =
            |c: &Candidate| marked_left.contains(&(c.user, c.folder, c.unique.as_str()));
        let mut unmarked: Vec<FileAt> = (candidates.iter())
            .filter(|c| !left.contains(&c.path) && !trashed(&c.path) && is_marked_left(c))
            .cloned()
            .map(FileAt::from)
            .collect();
        let gone: Vec<Candidate> = (gone.iter())
            .filter(|c| !renamed_in_place.contains(&(c.user, c.folder, c.unique.as_str())))
            .cloned()
            .collect();
        unmarked.extend(
            (gone.iter())
                .filter(|c| is_marked_left(c))
                .cloned()
                .map(FileAt::from),
        );
        let gone: Vec<FileAt> = gone.into_iter().map(FileAt::from).collect();
        let marked: Vec<FileAt> = (candidates.iter())
            .filter(|c| trashed(&c.path))
            .cloned()
            .map(FileAt::from)
            .collect();

        let renamed = (renames.iter())
            .filter_map(|(from, to)| {
                let (from, to) = (self.candidate(from)?, self.candidate(to)?);
                let other = from.user == to.user && from.folder != to.folder;
                other.then_some(((to.user, to.folder, to.unique), from.folder))
            })
            .collect();
        let mut changes = Changes {
            appeared: Vec::new(),
            gone,
            marked,
            unmarked,
            renamed,
        };
        let mut scanned = Vec::new();
        for user in changed_users {
            let before = self.users[user].folders.len();
            self.refresh_folders(user)?;
            // A folder that was just created may hold mail before its watch was set: taken
            // in with the batch, whose departures say where that mail came from. One that
            // arrived by a rename holds mail filed long ago: it is only recorded.
            let after = self.users[user].folders.len();
            for folder in before..after {
                let path = &self.users[user].folders[folder].path;
                if arrived.iter().any(|a| path.starts_with(a)) {
                    info!(
                        "folder watch: {} of {} came by a rename: recording what it holds, learning nothing",
                        escape_control(&self.users[user].folders[folder].name),
                        self.users[user].user
                    );
                    self.rescan_folders(user, folder..folder + 1, true)?;
                } else {
                    let found = self.scan_folders(user, folder..folder + 1)?;
                    scanned.extend(found.appeared);
                    changes.gone.extend(found.gone);
                    changes.marked.extend(found.marked);
                }
            }
        }
        // A flag change renames a file the record knows: skipped before it is read. A scan
        // found only files the record does not know, some of which events named too.
        let store = self.engine.current().store.clone();
        let gone: HashSet<(usize, usize, &str)> = (changes.gone.iter())
            .map(|f| (f.user, f.folder, f.unique.as_str()))
            .collect();
        let mut named = HashSet::new();
        for c in candidates {
            if !named.insert((c.user, c.folder, c.unique.clone())) {
                continue;
            }
            let (user, folder) = (&self.users[c.user], c.folder);
            if gone.contains(&(c.user, folder, c.unique.as_str()))
                || !seen::knows_file(&*store, &user.user, &user.folders[folder].name, &c.unique)?
            {
                changes.appeared.push(c);
            }
        }
        for c in scanned {
            if named.insert((c.user, c.folder, c.unique.clone())) {
                changes.appeared.push(c);
            }
        }
        self.take_in(changes, false)
    }

    /// Takes in what changed in a user's folders: forgets the files that have gone from
    /// their folders, and learns from the files that appeared (with `baseline`, only
    /// records them), knowing which messages left which folders (gone or marked deleted)
    /// at the same time; completes the rescues that a copy leaving a spam folder completes.
    fn take_in(&mut self, changes: Changes, baseline: bool) -> Result<(), Error> {
        let Changes {
            mut appeared,
            gone,
            marked,
            unmarked,
            renamed,
        } = changes;
        let mut leaving = Leaving::default();
        for f in &gone {
            let u = &self.users[f.user];
            seen::gone(
                &u.user,
                &u.folders[f.folder].name,
                &f.unique,
                &mut leaving.changes,
            );
        }
        for f in gone.iter().chain(&marked) {
            (leaving.left.entry((f.user, f.folder)).or_default()).insert(f.unique.clone());
        }
        let departures = if baseline {
            Departures::default()
        } else {
            let mut departures = self.departures(gone.iter().chain(&marked))?;
            departures.unmarked = self.unmarked(&unmarked, &gone, &mut leaving)?;
            departures.came_from = renamed;
            // Files the record knows, looked at again.
            for (c, from) in self.settle_rescues(&departures, &mut leaving)? {
                (departures.came_from).insert((c.user, c.folder, c.unique.clone()), from);
                let same =
                    |a: &Candidate| (a.user, a.folder, &a.unique) == (c.user, c.folder, &c.unique);
                if !appeared.iter().any(same) {
                    appeared.push(c);
                }
            }
            departures
        };
        self.learn_files(appeared, baseline, &departures, leaving)
    }

    /// The message file at `path`, if it is one in a watched folder.
    fn candidate(&self, path: &Path) -> Option<Candidate> {
        let sub = path.parent()?;
        if !matches!(sub.file_name()?.to_str()?, "cur" | "new") {
            return None;
        }
        let &(user, folder) = self.folder_dirs.get(sub.parent()?)?;
        let unique = unique_name(path.file_name()?.to_str()?)?.to_string();
        Some(Candidate {
            user,
            folder,
            path: path.to_path_buf(),
            unique,
        })
    }

    /// Stops watching the user's folders that are gone (deleted, or renamed away: in
    /// `left`, even when a folder of the same name was made again at once) and forgets the
    /// files recorded in them. Their mail, if it was renamed, is found under its new name.
    fn forget_lost_folders(&mut self, user: usize, left: &HashSet<PathBuf>) -> Result<(), Error> {
        let (lost, kept): (Vec<Folder>, Vec<Folder>) =
            std::mem::take(&mut self.users[user].folders)
                .into_iter()
                .partition(|f| left.contains(&f.path) || !f.path.is_dir());
        self.users[user].folders = kept;
        if lost.is_empty() {
            return Ok(());
        }
        let store = self.engine.current().store.clone();
        let user_name = self.users[user].user.clone();
        let mut changes = Vec::new();
        for folder in &lost {
            info!(
                "folder watch: {} of {user_name} ({}) is gone",
                escape_control(&folder.name),
                shown(&folder.path)
            );
            for dir in [
                folder.path.join("new"),
                folder.path.join("cur"),
                folder.path.clone(),
            ] {
                if self.watched.remove(&dir) {
                    // A deleted directory's watch is gone already.
                    let _ = self.notify.unwatch(&dir);
                }
            }
            for unique in seen::files_in(&*store, &user_name, &folder.name)? {
                seen::gone(&user_name, &folder.name, &unique, &mut changes);
            }
        }
        if !changes.is_empty() {
            store.write_notes(&changes)?;
        }
        self.folder_dirs.retain(|_, &mut (u, _)| u != user);
        for (index, folder) in self.users[user].folders.iter().enumerate() {
            self.folder_dirs.insert(folder.path.clone(), (user, index));
        }
        Ok(())
    }

    /// Watches the Maildirs that were missing and have appeared since, and scans them.
    fn look_for_missing_maildirs(&mut self) -> Result<(), Error> {
        for user in 0..self.users.len() {
            if self.users[user].found {
                continue;
            }
            self.refresh_folders(user)?;
            if self.users[user].found {
                info!(
                    "folder watch: the Maildir {} of {} is there now; watching it",
                    shown(&self.users[user].root),
                    self.users[user].user
                );
                self.rescan_user(user)?;
                Counters::add(&self.counters.rescans, 1);
            }
        }
        Ok(())
    }

    /// Finds the user's folders and watches the new ones.
    fn refresh_folders(&mut self, user: usize) -> Result<(), Error> {
        let root = self.users[user].root.clone();
        if let Err(e) = std::fs::read_dir(&root) {
            // Said once, until it is found: it is looked for again and again.
            if std::mem::replace(&mut self.users[user].found, false) {
                let why = match e.kind() {
                    std::io::ErrorKind::NotFound => "does not exist (yet)".to_string(),
                    std::io::ErrorKind::PermissionDenied => format!(
                        "cannot be read by this process (uid {}): {e}; give it read access \
                         (and under systemd, ProtectHome=read-only)",
                        crate::daemon::config::uid()
                    ),
                    _ => format!("cannot be read: {e}"),
                };
                warn!(
                    "folder watch: the Maildir {} of {} {why}; it is looked for again every {}s",
                    shown(&root),
                    self.users[user].user,
                    self.settings.look_for_maildirs.as_secs()
                );
            }
            return Ok(());
        }
        self.users[user].found = true;
        self.watch(&root)?;
        for folder in discover(&root, &self.settings) {
            if self.folder_dirs.contains_key(&folder.path) {
                continue;
            }
            for dir in [
                folder.path.join("new"),
                folder.path.join("cur"),
                folder.path.clone(),
            ] {
                if dir.is_dir() {
                    self.watch(&dir)?;
                }
            }
            info!(
                "folder watch: {} of {} ({}) is {}",
                escape_control(&folder.name),
                self.users[user].user,
                shown(&folder.path),
                folder.kind.name()
            );
            let index = self.users[user].folders.len();
            self.folder_dirs.insert(folder.path.clone(), (user, index));
            self.users[user].folders.push(folder);
        }
        Ok(())
    }

    fn watch(&mut self, dir: &Path) -> Result<(), Error> {
        if self.watched.contains(dir) {
            return Ok(());
        }
        match self.notify.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                self.watched.insert(dir.to_path_buf());
                Ok(())
            }
            // The system's limit stops every user's watching: that is the operator's to
            // raise. One folder that cannot be watched stops no one else's.
            Err(cause) if matches!(cause.kind, notify::ErrorKind::MaxFilesWatch) => {
                Err(Error::Watch {
                    path: shown(dir),
                    cause,
                })
            }
            Err(e) => {
                warn!(
                    "folder watch: cannot watch {}: {e}; mail moved there is not followed",
                    shown(dir)
                );
                Ok(())
            }
        }
    }

    fn rescan_all(&mut self) -> Result<(), Error> {
        Counters::add(&self.counters.rescans, 1);
        let started = Instant::now();
        for user in 0..self.users.len() {
            if self.users[user].found {
                self.rescan_user(user)?;
            }
        }
        debug!("folder watch: rescan took {:?}", started.elapsed());
        Ok(())
    }

    /// Handles what the record does not know in each folder of a user whose Maildir was
    /// found; the first time, only records what they hold.
    fn rescan_user(&mut self, user: usize) -> Result<(), Error> {
        let store = self.engine.current().store.clone();
        let baseline = !seen::has_baseline(&*store, &self.users[user].user)?;
        if baseline {
            info!(
                "folder watch: first scan of {}'s Maildir: recording what it holds, learning nothing",
                self.users[user].user
            );
        }
        self.rescan_folders(user, 0..self.users[user].folders.len(), baseline)?;
        if baseline {
            let u = &self.users[user];
            store.write_notes(&[seen::baseline_done(&u.user, &u.root.to_string_lossy())])?;
        }
        Ok(())
    }

    /// Handles every file of the user's `folders` that the record does not know, forgets
    /// the record of files that are gone, and completes the rescues that a copy left in a
    /// spam folder, gone or marked deleted since, completes: all the folders at once, so
    /// that a file moved from one to another while nobody watched is known as moved.
    fn rescan_folders(
        &mut self,
        user: usize,
        folders: std::ops::Range<usize>,
        baseline: bool,
    ) -> Result<(), Error> {
        let changes = self.scan_folders(user, folders)?;
        self.take_in(changes, baseline)
    }

    /// What the user's `folders` hold that the record does not know, what it knows that is
    /// gone, and what it knows that is marked deleted.
    fn scan_folders(&self, user: usize, folders: std::ops::Range<usize>) -> Result<Changes, Error> {
        let store = self.engine.current().store.clone();
        let user_name = self.users[user].user.clone();
        let mut changes = Changes::default();
        for folder in folders {
            let f = &self.users[user].folders[folder];
            let mut known = seen::files_in(&*store, &user_name, &f.name)?;
            for sub in ["new", "cur"] {
                let Ok(entries) = std::fs::read_dir(f.path.join(sub)) else {
                    continue;
                };
                for entry in entries.filter_map(Result::ok) {
                    let file_name = entry.file_name();
                    let Some(unique) = file_name.to_str().and_then(unique_name) else {
                        continue;
                    };
                    let at = FileAt {
                        user,
                        folder,
                        unique: unique.to_string(),
                    };
                    if known.remove(unique) {
                        if trashed(&entry.path()) {
                            changes.marked.push(at);
                        }
                        continue;
                    }
                    changes.appeared.push(Candidate {
                        user,
                        folder,
                        path: entry.path(),
                        unique: at.unique,
                    });
                }
            }
            changes.gone.extend(known.into_iter().map(|unique| FileAt {
                user,
                folder,
                unique,
            }));
        }
        Ok(changes)
    }

    /// Reads the files, decides what each teaches, learns it, and records the files as
    /// seen. With `baseline`, only records them. `departures` are the files of messages
    /// that left their folders in the same batch of events or rescan; what they `leave`
    /// goes with the last lessons.
    fn learn_files(
        &mut self,
        fresh: Vec<Candidate>,
        baseline: bool,
        departures: &Departures,
        leaving: Leaving,
    ) -> Result<(), Error> {
        let engine = self.engine.current();
        // Batches are bounded in bytes too: a batch's files are all in memory at once.
        let mut chunks = Vec::new();
        let mut start = 0;
        let mut bytes = 0u64;
        for (i, c) in fresh.iter().enumerate() {
            bytes += std::fs::metadata(&c.path).map_or(0, |m| m.len());
            if i + 1 - start >= BATCH || bytes >= BATCH_BYTES || i + 1 == fresh.len() {
                chunks.push(start..i + 1);
                start = i + 1;
                bytes = 0;
            }
        }
        // What left goes with the last chunk, one with nothing to learn if need be.
        if chunks.is_empty() {
            chunks.push(0..0);
        }
        let last = chunks.len() - 1;
        let mut leaving = Some(leaving);
        // The record's keys the batch's earlier writes set: what left gives way to them.
        let mut written = HashSet::new();
        for (n, chunk) in chunks.into_iter().enumerate() {
            let leaving = if n == last { leaving.take() } else { None };
            let chunk = &fresh[chunk];
            self.learn_chunk(&engine, chunk, baseline, departures, &mut written, leaving)?;
        }
        Ok(())
    }

    fn learn_chunk(
        &mut self,
        engine: &Engine,
        chunk: &[Candidate],
        baseline: bool,
        departures: &Departures,
        written: &mut HashSet<Vec<u8>>,
        leaving: Option<Leaving>,
    ) -> Result<(), Error> {
        let store = &*engine.store;
        let read: Vec<Option<(Vec<u8>, Digest)>> = chunk
            .par_iter()
            .map(|c| match regular_file(&c.path) {
                // A link or a device among a user's messages is no message: a link to a
                // file this process may read and the user may not would teach its content.
                Ok(false) => {
                    warn!(
                        "folder watch: {} is not a regular file: not read",
                        shown(&c.path)
                    );
                    Counters::add(&self.counters.unreadable, 1);
                    None
                }
                Err(_) => None,
                Ok(true) => match mailbox::read(&MailSource::File(c.path.clone())) {
                    Ok(raw) => {
                        let d = engine.digest(&raw);
                        Some((raw, d))
                    }
                    Err(e) => {
                        // Gone already (moved on, or its flags changed: its new name has its own
                        // event), or unreadable.
                        if c.path.exists() {
                            warn!("folder watch: {}", escape_control(&e.to_string()));
                            Counters::add(&self.counters.unreadable, 1);
                        }
                        None
                    }
                },
            })
            .collect();

        let mut notes = Vec::new();
        let mut plans: Vec<(usize, Class)> = Vec::new();
        // Per user, folder and class: how many messages the burst limit kept back.
        let mut refused: BTreeMap<(usize, usize, &str), u64> = BTreeMap::new();
        let now = Instant::now();
        let seen_at = epoch_secs();
        for (i, (c, r)) in chunk.iter().zip(&read).enumerate() {
            let Some((raw, d)) = r else { continue };
            let user = &self.users[c.user].user;
            let folder = &self.users[c.user].folders[c.folder];
            if !mailbox::looks_like_mail(raw) {
                // Recorded as seen below, so that a rescan does not read it again.
                warn!(
                    "folder watch: {} is not mail (it does not begin with a header field): not learned",
                    shown(&c.path)
                );
                Counters::add(&self.counters.unreadable, 1);
            } else if !baseline {
                // One forgotten as deleted in a spam folder, unmarked there: last seen there,
                // unless a copy elsewhere may be what this file came from.
                let previous = match seen::last_folder(store, user, d)? {
                    Some(p) => Some(p),
                    None => match departures.unmarked.get(&(c.user, *d)) {
                        Some(&f)
                            if (self.copy_elsewhere(store, c, d, |at, _| at != f)?).is_none() =>
                        {
                            Some(self.users[c.user].folders[f].name.clone())
                        }
                        _ => None,
                    },
                };
                // Moved here from the folder a file of it left at the same time; else a
                // copy (or a move the watcher did not see) of where it was last seen. A
                // message whose last place was forgotten comes as a delivery.
                let moved = (previous.is_some())
                    .then(|| self.moved_from(c, d, departures))
                    .flatten();
                let from = match moved {
                    Some(f) => Some(self.users[c.user].folders[f].name.clone()),
                    None => previous.clone().filter(|p| *p != folder.name),
                };
                let moved_from = from.as_deref().map(|p| classify(p, &self.settings));
                let learned = store.ledger_entry(d)?.map(|e| e.class);
                let target = decide(folder.kind, moved_from, learned, carries_spam_flag(raw));
                if target == Some(Class::Ham)
                    && moved_from == Some(FolderKind::Spam)
                    && let Some(from) = &from
                {
                    let copies = seen::copies_in(store, user, from, d)?;
                    // Not only ham folders: where only INBOX is ham, a copy filed into it
                    // may come from Archive all the same.
                    let keeps = |_: usize, f: &Folder| folder::keeps_mail(&f.name, &self.settings);
                    let stays = self.copy_stays(c.user, from, &copies);
                    if stays && let Some(kept) = self.copy_elsewhere(store, c, d, keeps)? {
                        // A copy stays unmarked in another folder too: this file may
                        // be a copy of that one (the original in INBOX, copied to Archive),
                        // and the one in the spam folder leaving it later no rescue. One
                        // begun earlier, of which this may be a copy, stands.
                        info!(
                            "folder watch: {} is a copy; another stays in {}, and one in {} it may come from: not relearned",
                            shown(&c.path),
                            escape_control(from),
                            escape_control(&self.users[c.user].folders[kept].name)
                        );
                        seen::file_seen(user, &folder.name, &c.unique, d, &mut notes);
                        continue;
                    }
                    if stays {
                        // Out of the spam folder while another copy stays there unmarked
                        // for deletion: no rescue yet. That folder stays where it was last
                        // seen, so that moving that copy out of it later is the rescue,
                        // and marking it deleted or expunging it soon completes this one
                        // (a client that moves by copying).
                        info!(
                            "folder watch: {} is a copy; another stays in {}: not relearned",
                            shown(&c.path),
                            escape_control(from)
                        );
                        seen::file_seen(user, &folder.name, &c.unique, d, &mut notes);
                        seen::rescue_begun(user, d, &folder.name, &c.unique, seen_at, &mut notes);
                        continue;
                    }
                    // No copy stays there, but one stays unmarked in another folder:
                    // this file may be a copy of that one (its original in INBOX copied
                    // to Archive as Junk is emptied), unless it is known to come from the
                    // spam folder. The message never came out of it: no rescue.
                    let known =
                        (departures.came_from).contains_key(&(c.user, c.folder, c.unique.clone()));
                    if !known && let Some(kept) = self.copy_elsewhere(store, c, d, keeps)? {
                        info!(
                            "folder watch: {} may be a copy of one that stays in {}: not relearned",
                            shown(&c.path),
                            escape_control(&self.users[c.user].folders[kept].name)
                        );
                        seen::seen(user, &folder.name, &c.unique, d, seen_at, &mut notes);
                        continue;
                    }
                }
                if let Some(target) = target.filter(|&t| Some(t) != learned) {
                    if target == Class::Ham {
                        seen::rescue_done(user, d, &mut notes);
                    }
                    if self.burst.admit(user, now) {
                        plans.push((i, target));
                    } else {
                        *refused
                            .entry((c.user, c.folder, target.name()))
                            .or_default() += 1;
                    }
                }
                // Filed from one folder to another while a copy stays in the spam folder
                // it was last seen in: that stays where it was last seen, so that a copy
                // made out of it later is still a rescue.
                if moved.is_some()
                    && moved_from != Some(FolderKind::Spam)
                    && folder.kind != FolderKind::Spam
                    && let Some(last) = previous.as_deref().filter(|p| *p != folder.name)
                    && classify(last, &self.settings) == FolderKind::Spam
                    && self.copy_stays(c.user, last, &seen::copies_in(store, user, last, d)?)
                {
                    seen::file_seen(user, &folder.name, &c.unique, d, &mut notes);
                    continue;
                }
            }
            seen::seen(user, &folder.name, &c.unique, d, seen_at, &mut notes);
        }
        // One line per folder: the files are soon renamed (a client that opens the folder
        // moves them to cur/ with flags), and learning the folder again skips what is known.
        for (&(user, folder, target), count) in &refused {
            let (user, folder) = (&self.users[user].user, &self.users[user].folders[folder]);
            warn!(
                "folder watch: {} has moved more than {} messages within {:?}: not learning {count} of them in {} as {}; \
                 if those moves were meant, run: spamnb learn --{} --user {} {}",
                escape_control(user),
                self.settings.burst_limit,
                self.settings.burst_window,
                escape_control(&folder.name),
                target,
                target,
                escape_control(&shell_quote(user)),
                escape_control(&shell_quote(&folder.path.to_string_lossy())),
            );
            Counters::add(&self.counters.over_limit, *count);
        }

        written.extend(notes.iter().map(|(key, _)| key.clone()));
        if let Some(leaving) = leaving {
            notes.extend(self.deleted_from_spam(store, &leaving, written)?);
            notes.extend((leaving.changes.into_iter()).filter(|(key, _)| !written.contains(key)));
        }

        if !plans.is_empty() {
            let lessons: Vec<_> = plans
                .par_iter()
                .map(|&(i, target)| {
                    let (raw, digest) = read[i].as_ref().expect("planned messages were read");
                    let user = &self.users[chunk[i].user].user;
                    engine.lesson_with_digest(raw, *digest, Some(target), Some(user))
                })
                .collect();
            // The lessons and the record of the files they came from go in one atomic
            // write: after a crash, the record never says a file was seen whose lesson was
            // lost, nor misses one whose lesson was kept.
            let outcomes = engine.learn_noting(&lessons, &std::mem::take(&mut notes))?;
            for (&(i, target), outcome) in plans.iter().zip(outcomes) {
                let c = &chunk[i];
                match outcome {
                    Outcome::Learned => Counters::add(&self.counters.learned, 1),
                    Outcome::Relearned => Counters::add(&self.counters.relearned, 1),
                    _ => continue,
                }
                info!(
                    "folder watch: {} {} as {} for {} (in {})",
                    outcome.name(),
                    shown(&c.path),
                    target.name(),
                    self.users[c.user].user,
                    escape_control(&self.users[c.user].folders[c.folder].name)
                );
            }
        }
        if !notes.is_empty() {
            store.write_notes(&notes)?;
        }
        Ok(())
    }
}

/// How long after a copy is made out of a spam folder the one left there, gone or marked
/// deleted, completes its rescue: long enough for a client's next sync (or a restart of
/// the watcher), short enough that a user who copied mail out of Junk, keeping it there,
/// and empties Junk days later is not read as rescuing it then.
const RESCUE_WINDOW: Duration = Duration::from_secs(15 * 60);

/// The files in the Maildir folder `dir` (`new/`, then `cur/`, whatever their flags) of
/// the messages whose unique names are `uniques`.
fn message_files(dir: &Path, uniques: &HashSet<String>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = (uniques.iter())
        .map(|u| dir.join("new").join(u))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(cur) = std::fs::read_dir(dir.join("cur")) {
        found.extend(cur.flatten().map(|e| e.path()).filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            unique_name(name).is_some_and(|u| uniques.contains(u))
        }));
    }
    found
}

/// Whether a message file's flags (`:2,ST`) mark it deleted.
fn trashed(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    unique_name(name).is_some_and(|u| name[u.len()..].contains('T'))
}

impl Watcher {
    /// What the record says the files that `left` their folders (gone, or marked deleted)
    /// held: the messages that left a folder in this batch of events or rescan, and the
    /// folders they left.
    fn departures<'a>(&self, left: impl Iterator<Item = &'a FileAt>) -> Result<Departures, Error> {
        let store = &*self.engine.current().store;
        let mut departures = Departures::default();
        for f in left {
            let u = &self.users[f.user];
            if let Some(d) =
                seen::file_digest(store, &u.user, &u.folders[f.folder].name, &f.unique)?
            {
                (departures.folders.entry((f.user, d)).or_default()).push(f.folder);
            }
        }
        Ok(departures)
    }

    /// The messages of the files `unmarked` in spam folders that the record has no last
    /// folder for, and the folder each was unmarked in. A mark on the last file of a
    /// message in the spam folder it was last seen in made the record forget it as deleted
    /// there: taken off again, the message is there as before, recorded so (in `leaving`)
    /// unless its file is `gone` (moved out still marked: the folder it came from).
    fn unmarked(
        &self,
        unmarked: &[FileAt],
        gone: &[FileAt],
        leaving: &mut Leaving,
    ) -> Result<HashMap<(usize, Digest), usize>, Error> {
        let store = &*self.engine.current().store;
        let now = epoch_secs();
        let mut found = HashMap::new();
        for f in unmarked {
            let u = &self.users[f.user];
            let name = &u.folders[f.folder].name;
            let Some(d) = seen::file_digest(store, &u.user, name, &f.unique)? else {
                continue;
            };
            if found.contains_key(&(f.user, d)) || seen::last_folder(store, &u.user, &d)?.is_some()
            {
                continue;
            }
            found.insert((f.user, d), f.folder);
            let same = |g: &FileAt| (g.user, g.folder, &g.unique) == (f.user, f.folder, &f.unique);
            if !gone.iter().any(same) {
                seen::seen(&u.user, name, &f.unique, &d, now, &mut leaving.changes);
            }
        }
        Ok(found)
    }

    /// The folder the file `c` of the message `digest` was moved from: the one it is known
    /// to come from (renamed, or a rescue completed); else one that a file of the message left in the
    /// same batch or rescan, a spam folder only when no other folder lost it: mail filed
    /// from INBOX to Archive while its copy in Junk is thrown away came out of INBOX. None
    /// when no file of it left a folder: a copy, or a delivery.
    fn moved_from(&self, c: &Candidate, digest: &Digest, departures: &Departures) -> Option<usize> {
        let key = (c.user, c.folder, c.unique.clone());
        if let Some(&from) = departures.came_from.get(&key) {
            return Some(from);
        }
        let folders = &self.users[c.user].folders;
        let left: Vec<usize> = (departures.folders.get(&(c.user, *digest))?.iter().copied())
            .filter(|&f| f != c.folder)
            .collect();
        (left.iter().find(|&&f| folders[f].kind != FolderKind::Spam))
            .or(left.first())
            .copied()
    }

    /// The filed copies whose rescue completes now that a copy left in a spam folder has
    /// left it (in `departures`: gone, or marked deleted), and that spam folder. A rescue
    /// of a message that also left another folder is called off instead, in `leaving`:
    /// the copy filed may have come from there (a client that files by copying, marking
    /// the one it copied). One whose filed copy itself left, and stays under its name in
    /// another folder the user keeps mail in, follows it there (moved on, as Dovecot moves:
    /// linked in, then deleted).
    fn settle_rescues(
        &self,
        departures: &Departures,
        leaving: &mut Leaving,
    ) -> Result<Vec<(Candidate, usize)>, Error> {
        let store = &*self.engine.current().store;
        let since = epoch_secs().saturating_sub(RESCUE_WINDOW.as_secs());
        let mut filed = Vec::new();
        for (&(user, d), folders) in &departures.folders {
            let u = &self.users[user];
            let (spam, other): (Vec<usize>, Vec<usize>) =
                (folders.iter()).partition(|&&f| u.folders[f].kind == FolderKind::Spam);
            leaving
                .from_spam
                .extend(spam.iter().map(|&folder| (user, d, folder)));
            let Some((name, unique, began)) = seen::rescue_pending(store, &u.user, &d, since)?
            else {
                continue;
            };
            if let Some(next) = self.moved_on(user, &name, &unique, &other, leaving) {
                let to = &u.folders[next.folder].name;
                if spam.is_empty() {
                    info!(
                        "folder watch: what {} filed in {} moved on to {}: still a rescue",
                        u.user,
                        escape_control(&name),
                        escape_control(to)
                    );
                    seen::rescue_begun(&u.user, &d, to, &unique, began, &mut leaving.changes);
                } else {
                    filed.push((next, spam[0]));
                }
                continue;
            }
            if let Some(&from) = other.first() {
                info!(
                    "folder watch: a copy of what {} filed in {} left {}: its filing is no rescue",
                    u.user,
                    escape_control(&name),
                    escape_control(&u.folders[from].name)
                );
                seen::rescue_done(&u.user, &d, &mut leaving.changes);
                continue;
            }
            if spam.is_empty() {
                continue;
            }
            let Some(at) = u.folders.iter().position(|f| f.name == name) else {
                continue;
            };
            let named = HashSet::from([unique.clone()]);
            let Some(path) = message_files(&u.folders[at].path, &named).pop() else {
                continue;
            };
            let copy = Candidate {
                user,
                folder: at,
                path,
                unique,
            };
            filed.push((copy, spam[0]));
        }
        Ok(filed)
    }

    /// The filed copy `unique` of a pending rescue, where it stays unmarked in a folder the
    /// user keeps mail in, when it left the folder `name` it was filed in and the message
    /// left no `other` folder: moved on, under its name. Only Dovecot's copies keep the
    /// name, and this one may come from the filed copy or the spam folder, both a rescue:
    /// the rescue began while no other copy stayed where it could come from.
    fn moved_on(
        &self,
        user: usize,
        name: &str,
        unique: &str,
        other: &[usize],
        leaving: &Leaving,
    ) -> Option<Candidate> {
        let u = &self.users[user];
        let at = u.folders.iter().position(|f| f.name == name)?;
        let left = leaving.left.get(&(user, at))?;
        if !left.contains(unique) || other.iter().any(|&f| f != at) {
            return None;
        }
        let named = HashSet::from([unique.to_string()]);
        (u.folders.iter().enumerate())
            .filter(|&(f, folder)| f != at && folder::keeps_mail(&folder.name, &self.settings))
            .find_map(|(f, folder)| {
                let path =
                    (message_files(&folder.path, &named).into_iter()).find(|p| !trashed(p))?;
                Some(Candidate {
                    user,
                    folder: f,
                    path,
                    unique: unique.to_string(),
                })
            })
    }

    /// The changes that forget where the messages that left a spam folder were last seen,
    /// when that was the folder they left and no copy stays there: no file of them arrived
    /// anywhere in the batch (that would be `written`), so they were deleted there, and a
    /// copy of one made elsewhere later comes from wherever its other copies are, not out
    /// of the spam folder.
    fn deleted_from_spam(
        &self,
        store: &dyn Store,
        leaving: &Leaving,
        written: &mut HashSet<Vec<u8>>,
    ) -> Result<Vec<seen::Change>, Error> {
        let mut by_folder: BTreeMap<(usize, usize), HashSet<Digest>> = BTreeMap::new();
        for &(user, d, folder) in &leaving.from_spam {
            let u = &self.users[user];
            if !written.contains(&seen::message_key(&u.user, &d))
                && seen::last_folder(store, &u.user, &d)?.as_ref() == Some(&u.folders[folder].name)
            {
                by_folder.entry((user, folder)).or_default().insert(d);
            }
        }
        let mut changes = Vec::new();
        for ((user, folder), digests) in by_folder {
            let u = &self.users[user];
            let name = &u.folders[folder].name;
            let mut copies = seen::copies_of(store, &u.user, name, &digests)?;
            let left = leaving.left.get(&(user, folder));
            for d in digests {
                let mut others = copies.remove(&d).unwrap_or_default();
                others.retain(|unique| !left.is_some_and(|l| l.contains(unique)));
                if !self.copy_stays(user, name, &others) {
                    let key = seen::message_key(&u.user, &d);
                    written.insert(key.clone());
                    changes.push((key, None));
                }
            }
        }
        Ok(changes)
    }

    /// The folder, other than the file `c`'s own and among those `may_hold` admits (by
    /// index and folder), where a copy of its message `digest` stays: the file may be a
    /// copy of that one.
    fn copy_elsewhere(
        &self,
        store: &dyn Store,
        c: &Candidate,
        digest: &Digest,
        may_hold: impl Fn(usize, &Folder) -> bool,
    ) -> Result<Option<usize>, Error> {
        let u = &self.users[c.user];
        for (at, folder) in u.folders.iter().enumerate() {
            if at == c.folder || !may_hold(at, folder) {
                continue;
            }
            let copies = seen::copies_in(store, &u.user, &folder.name, digest)?;
            if self.copy_stays(c.user, &folder.name, &copies) {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }

    /// Whether one of the files `copies` recorded in `user`'s folder `folder_name` is still
    /// there and not marked deleted (a client that moves by copying may expunge later): the
    /// one test of a copy staying in a folder. The disk, not the record: the record
    /// knows no flags, and a file may go before its event is handled.
    fn copy_stays(&self, user: usize, folder_name: &str, copies: &HashSet<String>) -> bool {
        let Some(folder) = self.users[user]
            .folders
            .iter()
            .find(|f| f.name == folder_name)
        else {
            return false;
        };
        !copies.is_empty()
            && message_files(&folder.path, copies)
                .iter()
                .any(|p| !trashed(p))
    }
}

/// A path of the users' making, safe for one log line.
fn shown(path: &Path) -> String {
    escape_control(&path.to_string_lossy()).into_owned()
}

/// Whether `path` is a regular file itself, not a link to one.
fn regular_file(path: &Path) -> std::io::Result<bool> {
    Ok(std::fs::symlink_metadata(path)?.file_type().is_file())
}

/// `text` as one word to a POSIX shell, for a command a log line suggests: Maildir file
/// and folder names are chosen by whoever delivers or files the mail.
fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%=".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// What a message newly seen in a folder of `kind` teaches: `moved_from` is the kind of the
/// folder it was last seen in (None for a delivery), `learned` its class in the ledger.
pub fn decide(
    kind: FolderKind,
    moved_from: Option<FolderKind>,
    learned: Option<Class>,
    own_spam_flag: bool,
) -> Option<Class> {
    match kind {
        FolderKind::Neutral => None,
        // spamnb's own verdict, filed into Junk by a delivery rule: nothing new to learn.
        FolderKind::Spam if moved_from.is_none() && own_spam_flag => None,
        FolderKind::Spam => Some(Class::Spam),
        // Rescued from a spam folder; or spamnb's own spam verdict, kept in a ham folder.
        // Not a message learned as spam that came from elsewhere: the ledger is everyone's,
        // and another user's Junk (or this user's copy there) does not make filing it here
        // a rescue.
        FolderKind::Ham if moved_from == Some(FolderKind::Spam) && learned == Some(Class::Spam) => {
            Some(Class::Ham)
        }
        FolderKind::Ham if moved_from.is_some() && own_spam_flag => Some(Class::Ham),
        FolderKind::Ham => None,
    }
}

/// Whether the header block says `X-Spam-Flag: YES`: spamnb removes incoming `X-Spam-*`
/// headers before it writes its own, so on mail it filtered, this is its verdict.
pub fn carries_spam_flag(raw: &[u8]) -> bool {
    for line in raw.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return false;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if line[..colon].eq_ignore_ascii_case(b"X-Spam-Flag") {
            return line[colon + 1..].trim_ascii().eq_ignore_ascii_case(b"YES");
        }
    }
    false
}

#[cfg(test)]
mod tests {

    /// A folder's name is its user's choice: one with a line break in it wrote log lines
    /// of its own through the watcher's error.
    #[test]
    fn a_folder_name_forges_no_log_line() {
        let e = Error::Watch {
            path: shown(Path::new(
                "/m/.evil\n2026-12-06T23:40:00Z  INFO spamnb: FORGED\u{1b}[2K",
            )),
            cause: notify::Error::generic("no room"),
        };
        let said = e.to_string();
        assert!(!said.contains(['\n', '\u{1b}']), "{said}");
        assert!(said.contains("max_user_watches"), "{said}");
    }

    /// main prints an error with its causes (`{:#}`): the cause written into the message
    /// is not printed again after it.
    #[test]
    fn an_error_names_its_cause_once() {
        let cause = || notify::Error::generic("no room");
        let said = cause().to_string();
        for e in [
            Error::Watch {
                path: "/m/.Junk".into(),
                cause: cause(),
            },
            Error::from(cause()),
        ] {
            let shown = format!("{:#}", anyhow::Error::new(e));
            assert_eq!(shown.matches(&said).count(), 1, "{shown}");
        }
    }

    use super::*;
    use FolderKind::*;

    #[test]
    fn decisions() {
        let s = Some(Class::Spam);
        let h = Some(Class::Ham);
        for (kind, from, learned, flag, want) in [
            (Spam, Some(Ham), None, false, s),
            (Spam, Some(Ham), h, false, s),
            (Spam, Some(Neutral), None, true, s),
            (Spam, None, None, false, s),
            (Spam, None, None, true, None),
            (Ham, Some(Spam), s, false, h),
            (Ham, Some(Spam), None, true, h),
            (Ham, Some(Ham), None, true, h),
            (Ham, Some(Spam), None, false, None),
            // Learned as spam from someone else's Junk: filing it is no rescue.
            (Ham, Some(Ham), s, false, None),
            (Ham, Some(Neutral), s, false, None),
            (Ham, None, s, true, None),
            (Ham, None, None, false, None),
            (Neutral, Some(Spam), s, true, None),
            (Neutral, Some(Ham), h, false, None),
        ] {
            assert_eq!(
                decide(kind, from, learned, flag),
                want,
                "{kind:?} {from:?} {learned:?} {flag}"
            );
        }
    }

    #[test]
    fn commands_in_logs_quote_what_users_named() {
        assert_eq!(
            shell_quote("/home/ann/Maildir/.Junk"),
            "/home/ann/Maildir/.Junk"
        );
        assert_eq!(shell_quote("/m/.Junk E-mail"), "'/m/.Junk E-mail'");
        assert_eq!(
            shell_quote("we ird$(touch x)'s"),
            r"'we ird$(touch x)'\''s'"
        );
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn spam_flag_in_headers_only() {
        for (raw, want) in [
            (&b"Subject: x\nX-Spam-Flag: YES\n\nbody"[..], true),
            (b"x-spam-flag:yes\r\n\r\n", true),
            (b"X-Spam-Flag: NO\n\n", false),
            (b"Subject: x\n\nX-Spam-Flag: YES\n", false),
            (b"", false),
        ] {
            assert_eq!(
                carries_spam_flag(raw),
                want,
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }
}
