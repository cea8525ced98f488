//! The folder watcher on a real filesystem, running: moves into and out of Junk, flag
//! changes, Trash, bursts, restarts and overflows (issue 5).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::util::digest;
use spamnb::config::Config;
use spamnb::engine::{Engine, SharedEngine};
use spamnb::model::{Class, CountSource};
use spamnb::store::{SledStore, Store, StoreOptions};
use spamnb::watch::{Counters, UserMaildir, WatchSettings, Watcher};
use tokio_util::sync::CancellationToken;

pub struct Fixture {
    /// Holds the temp dir (Maildir and database) for the fixture's life.
    pub _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub store: Arc<SledStore>,
    pub engine: Arc<SharedEngine>,
    pub settings: WatchSettings,
    running: Option<(CancellationToken, JoinHandle<()>)>,
    pub counters: Option<Arc<Counters>>,
}

impl Fixture {
    /// A Maildir++ tree for user `ann`: INBOX, Junk, Trash, Archive.
    pub fn new(settings: WatchSettings) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("Maildir");
        maildir(&root, &["", ".Junk", ".Trash", ".Archive"]);
        let store =
            Arc::new(SledStore::open(&dir.path().join("db"), &StoreOptions::default()).unwrap());
        let config = Config::default();
        let engine = Arc::new(SharedEngine::new(Engine {
            extractor: config.extractor.clone(),
            model: config.model.clone(),
            store: store.clone(),
        }));
        let settings = WatchSettings {
            users: vec![UserMaildir {
                user: "ann".into(),
                root: root.clone(),
            }],
            ..settings
        };
        Fixture {
            _dir: dir,
            root,
            store,
            engine,
            settings,
            running: None,
            counters: None,
        }
    }

    /// Starts the watcher; returns once its start-up rescan is done.
    pub fn start(&mut self) {
        assert!(self.running.is_none());
        let watcher =
            Watcher::start(self.settings.clone(), self.engine.clone()).expect("watcher starts");
        self.counters = Some(watcher.counters());
        let token = CancellationToken::new();
        let t = token.clone();
        let handle = std::thread::spawn(move || watcher.run(&t).expect("watcher runs"));
        self.running = Some((token, handle));
    }

    pub fn stop(&mut self) {
        let (token, handle) = self.running.take().expect("running");
        token.cancel();
        handle.join().expect("watcher thread");
    }

    pub fn folder(&self, name: &str) -> PathBuf {
        if name == "INBOX" {
            self.root.clone()
        } else {
            self.root.join(format!(".{name}"))
        }
    }

    /// Delivers like an MTA: written into tmp/, renamed into new/. Returns the unique name.
    pub fn deliver(&self, folder: &str, unique: &str, raw: &str) -> PathBuf {
        let tmp = self.folder(folder).join("tmp").join(unique);
        std::fs::write(&tmp, raw).unwrap();
        let new = self.folder(folder).join("new").join(unique);
        std::fs::rename(&tmp, &new).unwrap();
        new
    }

    /// Puts a message straight into cur/ with flags, before the watcher runs.
    pub fn place(&self, folder: &str, file: &str, raw: &str) -> PathBuf {
        let path = self.folder(folder).join("cur").join(file);
        std::fs::write(&path, raw).unwrap();
        path
    }

    /// rename(2) into another folder's cur/, keeping the file name.
    pub fn move_to(&self, path: &Path, folder: &str) -> PathBuf {
        let to = self
            .folder(folder)
            .join("cur")
            .join(path.file_name().unwrap());
        std::fs::rename(path, &to).unwrap();
        to
    }

    pub fn class_of(&self, raw: &str) -> Option<Class> {
        self.store
            .ledger_entry(&digest(raw.as_bytes()))
            .unwrap()
            .map(|e| e.class)
    }

    /// Waits until `raw` is learned as `class` (or fails after 20 s).
    pub fn wait_learned(&self, raw: &str, class: Class) {
        wait_until(
            || self.class_of(raw) == Some(class),
            &format!("learned as {}", class.name()),
        );
    }

    pub fn messages(&self) -> [u64; 2] {
        self.store.totals().messages
    }

    /// Learns each of `mails` as `ann`'s spam, as moving it into Junk earlier would have.
    pub fn learned_spam(&self, mails: &[&str]) {
        let engine = self.engine.current();
        let lessons: Vec<_> = (mails.iter())
            .map(|m| engine.lesson(m.as_bytes(), Some(Class::Spam), Some("ann")))
            .collect();
        engine.learn(&lessons).unwrap();
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.running.is_some() && !std::thread::panicking() {
            self.stop();
        } else if let Some((token, _)) = &self.running {
            token.cancel();
        }
    }
}

pub fn wait_until(mut ok: impl FnMut() -> bool, what: &str) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A Maildir++ tree at `root` with `folders` (`""` is INBOX, `".Junk"` a folder), each
/// with its cur, new and tmp.
pub fn maildir(root: &Path, folders: &[&str]) {
    for folder in folders {
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(root.join(folder).join(sub)).unwrap();
        }
    }
}

/// A distinct small message.
pub fn mail(n: usize) -> String {
    let words = [
        "offer", "meeting", "invoice", "cheap", "project", "winner", "lunch", "pills", "report",
        "prize",
    ];
    let body: Vec<&str> = (0..30)
        .map(|i| words[(n * 7 + i * (n % 5 + 1)) % words.len()])
        .collect();
    format!(
        "From: sender{n}@example.org\nTo: ann@example.net\nSubject: note {n}\nMessage-ID: <{n}@example.org>\n\n{} number{n}\n",
        body.join(" ")
    )
}

fn settings() -> WatchSettings {
    WatchSettings {
        burst_limit: 0,
        ..WatchSettings::default()
    }
}

#[test]
fn moves_into_junk_and_back_learn_once_flags_and_trash_teach_nothing() {
    let mut f = Fixture::new(settings());
    let (a, b, c, d) = (mail(1), mail(2), mail(3), mail(4));
    let pa = f.place("INBOX", "1700000001.A.host:2,S", &a);
    let pb = f.place("INBOX", "1700000002.B.host:2,S", &b);
    let pc = f.place("INBOX", "1700000003.C.host:2,", &c);
    f.start();
    assert_eq!(
        f.messages(),
        [0, 0],
        "the first scan records the Maildir, learns nothing"
    );

    // Into Junk: learned as spam, once.
    let pa = f.move_to(&pa, "Junk");
    f.wait_learned(&a, Class::Spam);
    assert_eq!(f.messages(), [0, 1]);
    let learned_at = f
        .store
        .ledger_entry(&digest(a.as_bytes()))
        .unwrap()
        .unwrap()
        .learned_at;

    // A flag change in Junk, and a delivery into INBOX: nothing. B into Junk marks the
    // point where both have been handled.
    let pa_flagged = pa.with_file_name("1700000001.A.host:2,RS");
    std::fs::rename(&pa, &pa_flagged).unwrap();
    f.deliver("INBOX", "1700000004.D.host", &d);
    let pb = f.move_to(&pb, "Junk");
    f.wait_learned(&b, Class::Spam);
    assert_eq!(f.messages(), [0, 2], "only B was learned");
    assert_eq!(
        f.class_of(&d),
        None,
        "a delivery into INBOX teaches nothing"
    );
    assert_eq!(
        f.store
            .ledger_entry(&digest(a.as_bytes()))
            .unwrap()
            .unwrap()
            .learned_at,
        learned_at
    );

    // Back out of Junk, same file name: relearned as ham.
    f.move_to(&pa_flagged, "INBOX");
    f.wait_learned(&a, Class::Ham);
    assert_eq!(f.messages(), [1, 1]);

    // Junk to Trash: nothing (C into Junk marks the point).
    f.move_to(&pb, "Trash");
    f.move_to(&pc, "Junk");
    f.wait_learned(&c, Class::Spam);
    assert_eq!(f.messages(), [1, 2]);
    assert_eq!(
        f.class_of(&b),
        Some(Class::Spam),
        "Trash neither unlearns nor relearns"
    );

    // The counters move after the write that wait_learned sees: stopped, they are final.
    f.stop();
    let counters = f.counters.clone().unwrap();
    assert_eq!(counters.learned.load(Ordering::Relaxed), 3);
    assert_eq!(counters.relearned.load(Ordering::Relaxed), 1);
}

#[test]
fn spamnb_flagged_mail_rescued_from_junk_is_learned_as_ham() {
    let mut f = Fixture::new(settings());
    let flagged = mail(10).replacen("\n\n", "\nX-Spam-Flag: YES\nX-Spam-Status: Yes\n\n", 1);
    let marker = mail(11);
    let pm = f.place("INBOX", "1700000011.M.host:2,S", &marker);
    f.start();
    // spamnb's own verdict filed into Junk by a Sieve rule: not learned again.
    let p = f.deliver("Junk", "1700000010.F.host", &flagged);
    f.move_to(&pm, "Junk");
    f.wait_learned(&marker, Class::Spam);
    assert_eq!(f.class_of(&flagged), None);
    // The user says it is not spam.
    f.move_to(&p, "INBOX");
    f.wait_learned(&flagged, Class::Ham);
    assert_eq!(f.messages(), [1, 1]);
}

/// Where a message was last seen is forgotten after `forget_moves_after`: rescued from Junk
/// later, spamnb's own verdict then reads as a delivery to INBOX and teaches nothing.
#[test]
fn records_of_where_mail_was_are_forgotten_after_their_time() {
    let mut f = Fixture::new(WatchSettings {
        forget_moves_after: Some(Duration::from_secs(1)),
        ..settings()
    });
    let flagged = mail(20).replacen("\n\n", "\nX-Spam-Flag: YES\nX-Spam-Status: Yes\n\n", 1);
    let marker = mail(21);
    let p = f.place("Junk", "1700000020.F.host:2,S", &flagged);
    let pm = f.place("INBOX", "1700000021.M.host:2,S", &marker);
    f.start();
    f.stop();
    // Seconds are the records' unit: two make the first record older than one.
    std::thread::sleep(Duration::from_millis(2100));
    f.start();
    f.move_to(&p, "INBOX");
    f.move_to(&pm, "Junk");
    f.wait_learned(&marker, Class::Spam);
    assert_eq!(
        f.class_of(&flagged),
        None,
        "its move out of Junk was forgotten"
    );
}

#[test]
fn a_thousand_messages_moved_at_once_are_all_learned_exactly_once() {
    let mut f = Fixture::new(settings());
    let mails: Vec<String> = (0..1000).map(|n| mail(1000 + n)).collect();
    let paths: Vec<PathBuf> = mails
        .iter()
        .enumerate()
        .map(|(i, m)| f.place("INBOX", &format!("1700001000.M{i}.host:2,S"), m))
        .collect();
    f.start();
    let started = Instant::now();
    for p in &paths {
        f.move_to(p, "Junk");
    }
    wait_until(|| f.messages()[1] >= 1000, "all 1000 are learned");
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(f.messages(), [0, 1000]);
    assert_eq!(f.store.stats().unwrap().ledger_entries, 1000);
    assert!(mails.iter().all(|m| f.class_of(m) == Some(Class::Spam)));
    f.stop();
    let counters = f.counters.clone().unwrap();
    assert_eq!(counters.learned.load(Ordering::Relaxed), 1000);
    eprintln!("1000 moves learned in {took:?}");
}

#[test]
fn moves_made_while_stopped_are_learned_once_at_start() {
    let mut f = Fixture::new(settings());
    let (a, b, c) = (mail(20), mail(21), mail(22));
    let pa = f.place("INBOX", "1700000020.A.host:2,S", &a);
    let pb = f.place("INBOX", "1700000021.B.host:2,S", &b);
    let pc = f.place("Junk", "1700000022.C.host:2,S", &c);
    f.start();
    f.stop();
    assert_eq!(f.messages(), [0, 0]);

    f.move_to(&pa, "Junk");
    f.move_to(&pb, "Junk");
    f.move_to(&pc, "Trash");
    f.start(); // returns when the start-up rescan is done
    assert_eq!(f.messages(), [0, 2]);
    assert_eq!(f.class_of(&a), Some(Class::Spam));
    assert_eq!(f.class_of(&c), None);
    f.stop();

    f.start();
    f.stop();
    assert_eq!(f.messages(), [0, 2], "a second start learns nothing more");
    assert_eq!(f.store.stats().unwrap().ledger_entries, 2);
}

#[test]
fn filing_mail_another_user_junked_is_no_rescue() {
    let mut f = Fixture::new(settings());
    let bob = f._dir.path().join("bob");
    maildir(&bob, &["", ".Junk", ".Trash", ".Archive"]);
    f.settings.users.push(UserMaildir {
        user: "bob".into(),
        root: bob.clone(),
    });
    let a = mail(25);
    let ann_copy = f.place("INBOX", "1700000025.A.host:2,S", &a);
    let bob_copy = bob.join("cur").join("1700000025.B.host:2,S");
    std::fs::write(&bob_copy, &a).unwrap();
    f.start();
    f.stop();
    f.move_to(&ann_copy, "Junk");
    f.start();
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Spam));
    // Bob files his copy: it was never in his Junk, so ann's lesson stands.
    std::fs::rename(&bob_copy, bob.join(".Archive/cur/1700000025.B.host:2,S")).unwrap();
    f.start();
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Spam));
    assert_eq!(f.messages(), [0, 1]);
}

#[test]
fn a_burst_over_the_limit_learns_only_the_limit() {
    let mut f = Fixture::new(WatchSettings {
        burst_limit: 5,
        ..WatchSettings::default()
    });
    let mails: Vec<String> = (0..12).map(|n| mail(100 + n)).collect();
    let paths: Vec<PathBuf> = mails
        .iter()
        .enumerate()
        .map(|(i, m)| f.place("INBOX", &format!("1700000100.M{i}.host:2,S"), m))
        .collect();
    f.start();
    for p in &paths {
        f.move_to(p, "Junk");
    }
    let counters = f.counters.clone().unwrap();
    wait_until(
        || counters.over_limit.load(Ordering::Relaxed) == 7 && f.messages()[1] == 5,
        "7 are refused",
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(f.messages(), [0, 5]);
    f.stop();
    f.start();
    assert_eq!(
        f.messages(),
        [0, 5],
        "what was over the limit is not retried at start"
    );
}

#[test]
fn an_event_queue_overflow_rescans_and_misses_nothing() {
    let f = Fixture::new(settings());
    let (a, b) = (mail(30), mail(31));
    let pa = f.place("INBOX", "1700000030.A.host:2,S", &a);
    let pb = f.place("INBOX", "1700000031.B.host:2,S", &b);
    let watcher = Watcher::start(f.settings.clone(), f.engine.clone()).unwrap();
    f.move_to(&pa, "Junk");
    f.move_to(&pb, "Junk");
    std::thread::sleep(Duration::from_millis(50));
    // The events of both moves are lost; the overflow notice makes up for them.
    watcher.simulate_overflow();
    let counters = watcher.counters();
    let token = CancellationToken::new();
    let t = token.clone();
    let handle = std::thread::spawn(move || watcher.run(&t).unwrap());
    wait_until(
        || counters.rescans.load(Ordering::Relaxed) == 2,
        "the rescan ran",
    );
    token.cancel();
    handle.join().unwrap();
    assert_eq!(f.messages(), [0, 2]);
}

#[test]
fn a_folder_made_while_running_is_watched() {
    let mut f = Fixture::new(settings());
    let a = mail(40);
    let pa = f.place("INBOX", "1700000040.A.host:2,S", &a);
    f.start();
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(f.root.join(".Spam").join(sub)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(400));
    f.move_to(&pa, "Spam");
    f.wait_learned(&a, Class::Spam);
}

#[test]
fn moved_into_junk_and_straight_back_ends_as_ham_or_unlearned() {
    let mut f = Fixture::new(settings());
    let (a, marker) = (mail(50), mail(51));
    let pa = f.place("INBOX", "1700000050.A.host:2,S", &a);
    let pm = f.place("INBOX", "1700000051.M.host:2,S", &marker);
    f.start();
    let in_junk = f.move_to(&pa, "Junk");
    f.move_to(&in_junk, "INBOX");
    f.move_to(&pm, "Junk");
    f.wait_learned(&marker, Class::Spam);
    assert_ne!(
        f.class_of(&a),
        Some(Class::Spam),
        "the user's last word was INBOX"
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The figures for issue 5's closing note: move-to-learned latency and burst throughput.
/// `cargo test --release --test it bench_watch -- --ignored --nocapture`
#[test]
#[ignore = "a benchmark: run by hand with --ignored --nocapture"]
fn bench_watch_latency_and_burst_throughput() {
    // Real mail when the corpus is there, small written messages otherwise.
    let mails: Vec<String> = match crate::util::corpus() {
        Some(root) => ["spam-2", "easy-ham-2"]
            .iter()
            .flat_map(|g| crate::util::corpus_files(&root, g, 1200))
            // Without the mbox envelope line, as a Maildir holds them.
            .filter_map(|p| spamnb::mailbox::read(&spamnb::mailbox::MailSource::File(p)).ok())
            .map(|raw| String::from_utf8_lossy(&raw).into_owned())
            .collect(),
        None => (0..2400).map(|n| mail(20_000 + n)).collect(),
    };
    let mut by_digest = std::collections::HashSet::new();
    let mails: Vec<String> = mails
        .into_iter()
        .filter(|m| by_digest.insert(digest(m.as_bytes())))
        .collect();
    let (single, burst) = mails.split_at(200);
    let mut f = Fixture::new(settings());
    let single_paths: Vec<PathBuf> = single
        .iter()
        .enumerate()
        .map(|(i, m)| f.place("INBOX", &format!("1700100000.S{i}.host:2,S"), m))
        .collect();
    let burst_paths: Vec<PathBuf> = burst
        .iter()
        .enumerate()
        .map(|(i, m)| f.place("INBOX", &format!("1700200000.B{i}.host:2,S"), m))
        .collect();
    f.start();

    // One move at a time: from rename(2) to the ledger saying spam.
    let mut latencies = Vec::new();
    for (p, m) in single_paths.iter().zip(single) {
        let t = Instant::now();
        f.move_to(p, "Junk");
        let d = digest(m.as_bytes());
        wait_until(|| f.store.ledger_entry(&d).unwrap().is_some(), "learned");
        latencies.push(t.elapsed());
    }
    latencies.sort();
    eprintln!(
        "move → learned over {} single moves: p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );

    // A burst: every message moved at once, timed until the last is learned.
    let before = f.messages()[1];
    let t = Instant::now();
    for p in &burst_paths {
        f.move_to(p, "Junk");
    }
    let moved = t.elapsed();
    wait_until(
        || f.messages()[1] >= before + burst.len() as u64,
        "the burst is learned",
    );
    let took = t.elapsed();
    eprintln!(
        "burst of {} moves (renamed in {moved:?}): all learned in {took:?}, {:.0} messages/s",
        burst.len(),
        burst.len() as f64 / took.as_secs_f64()
    );
}

/// `spamnb daemon` with a `[watch]` section watches the Maildirs it names and learns
/// through its own store: a move into Junk is learned while the daemon holds the database.
#[test]
fn the_daemon_runs_the_watcher_from_its_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("Maildir");
    maildir(&root, &["", ".Junk"]);
    let inbox = root.join("cur/1700000001.A.host:2,S");
    std::fs::write(&inbox, mail(1)).unwrap();
    let watch = format!(
        "[watch]\nspam_folders = [\"Junk\"]\n[watch.users]\nann = {:?}\n",
        root
    );
    let sections = crate::daemon::Sections {
        extra: &watch,
        ..Default::default()
    };
    let db = dir.path().join("db");
    let daemon = crate::daemon::Daemon::start(dir.path(), &db, &sections);
    let spam_learned = || {
        let out = daemon
            .cli()
            .args(["stats", "--format", "json"])
            .output()
            .unwrap();
        // A stats that fails must fail the test, not read as "nothing learned".
        assert!(out.status.success(), "{}", crate::util::text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
        v["messages"]["spam"].as_u64() == Some(1)
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!spam_learned(), "the first scan learns nothing");
    std::fs::rename(&inbox, root.join(".Junk/cur/1700000001.A.host:2,S")).unwrap();
    wait_until(
        spam_learned,
        "the daemon's watcher learned the move into Junk",
    );
}

/// Renaming a folder moves its mail whole: that is filing, not the user's verdict on each
/// message, and teaches nothing. A folder made again under the old name is watched anew.
#[test]
fn a_renamed_folder_teaches_nothing_and_one_made_again_is_watched() {
    let mut f = Fixture::new(settings());
    let (a, b, marker) = (mail(60), mail(61), mail(62));
    let pa = f.place("INBOX", "1700000060.A.host:2,S", &a);
    let pb = f.place("INBOX", "1700000061.B.host:2,S", &b);
    let pm = f.place("INBOX", "1700000062.M.host:2,S", &marker);
    f.start();
    f.move_to(&pa, "Junk");
    f.move_to(&pb, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    // Archived by a rename (a ham folder: other folders are ham), then Junk made again, as
    // Dovecot does for a folder it is configured to keep.
    std::fs::rename(f.folder("Junk"), f.folder("Junk-2024")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(f.folder("Junk").join(sub)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    f.move_to(&pm, "Junk");
    f.wait_learned(&marker, Class::Spam);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Spam),
        "the rename taught nothing"
    );
    assert_eq!(f.class_of(&b), Some(Class::Spam));
    assert_eq!(f.messages(), [0, 3]);
    // The renamed folder is watched like any other: a move out of it into Junk is news.
    let c = mail(63);
    let pc = f.place("Junk-2024", "1700000063.C.host:2,S", &c);
    std::thread::sleep(Duration::from_millis(300));
    f.move_to(&pc, "Junk");
    f.wait_learned(&c, Class::Spam);
    assert_eq!(f.class_of(&a), Some(Class::Spam));
}

/// A mailbox is made at its first delivery, which may come after the watcher started: its
/// Maildir is looked for until it is there, and moves in it are learned from then on.
#[test]
fn a_maildir_made_after_start_is_watched() {
    let mut f = Fixture::new(WatchSettings {
        look_for_maildirs: Duration::from_millis(200),
        ..settings()
    });
    let aside = f.root.with_file_name("not yet");
    std::fs::rename(&f.root, &aside).unwrap();
    f.start();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::rename(&aside, &f.root).unwrap();
    let a = mail(70);
    let pa = f.deliver("INBOX", "1700000070.A.host", &a);
    // Found, watched and scanned (what it holds is recorded, not learned): then the move.
    let counters = f.counters.clone().unwrap();
    wait_until(
        || counters.rescans.load(Ordering::Relaxed) == 2,
        "the Maildir is found",
    );
    f.move_to(&pa, "Junk");
    f.wait_learned(&a, Class::Spam);
}

/// Only regular files that are mail are learned: a link in a Junk folder may point at a
/// file this process can read and the user cannot, and a binary dropped there is no mail.
#[test]
fn links_and_files_that_are_not_mail_are_not_learned() {
    let mut f = Fixture::new(settings());
    let outside = f.root.with_file_name("secret.eml");
    std::fs::write(&outside, mail(80)).unwrap();
    let marker = mail(81);
    let pm = f.place("INBOX", "1700000081.M.host:2,S", &marker);
    f.start();
    let junk = f.folder("Junk").join("cur");
    std::os::unix::fs::symlink(&outside, junk.join("1700000080.L.host:2,S")).unwrap();
    std::fs::write(
        junk.join("1700000082.B.host:2,S"),
        b"\x7fELF\x02\x01\x01\0\0\0binary",
    )
    .unwrap();
    std::fs::write(junk.join("1700000083.E.host:2,S"), b"").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    f.move_to(&pm, "Junk");
    f.wait_learned(&marker, Class::Spam);
    assert_eq!(f.messages(), [0, 1], "only the marker was learned");
    assert_eq!(f.class_of(&mail(80)), None);
    let unreadable = f
        .counters
        .as_ref()
        .unwrap()
        .unreadable
        .load(Ordering::Relaxed);
    assert_eq!(unreadable, 3, "each was reported");
}

/// Copied into Junk, not moved: the copy in Junk is learned as spam, and filing the other
/// copy away rescues nothing. Moving the copy out of Junk later is the rescue. A new copy
/// in INBOX, the one in Junk then marked deleted, is none while the filed copy stays in
/// Archive: INBOX's may be a copy of that one, and Junk emptied of spam.
#[test]
fn filing_the_other_copy_of_mail_copied_into_junk_is_no_rescue() {
    let mut f = Fixture::new(settings());
    let (a, m1, m2) = (mail(60), mail(61), mail(62));
    let inbox_copy = f.place("INBOX", "1700000060.A.host:2,S", &a);
    let p1 = f.place("INBOX", "1700000061.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000062.M.host:2,S", &m2);
    let (b, m3, m4, m5) = (mail(66), mail(67), mail(68), mail(69));
    let inbox_b = f.place("INBOX", "1700000066.B.host:2,S", &b);
    let p3 = f.place("INBOX", "1700000067.M.host:2,S", &m3);
    let p4 = f.place("INBOX", "1700000068.M.host:2,S", &m4);
    let p5 = f.place("INBOX", "1700000069.M.host:2,S", &m5);
    f.start();
    // An IMAP COPY: a new file, of a new name, in Junk.
    let junk_copy = f.deliver("Junk", "1700000063.J.host", &a);
    f.wait_learned(&a, Class::Spam);
    f.move_to(&inbox_copy, "Archive");
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Spam),
        "a copy stays in Junk: filing the other is no rescue"
    );
    f.move_to(&junk_copy, "INBOX");
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    assert_eq!(f.class_of(&a), Some(Class::Ham), "out of Junk: rescued");
    assert_eq!(f.messages(), [1, 2]);

    // A new file in INBOX, the one in Junk marked deleted and expunged on its next sync:
    // a client that moves out of Junk by copying, or the one in Archive copied back to
    // INBOX and Junk emptied. The message stays in Archive, a ham folder: no rescue.
    let junk_b = f.deliver("Junk", "1700000070.J.host", &b);
    f.wait_learned(&b, Class::Spam);
    f.move_to(&inbox_b, "Archive");
    f.move_to(&p3, "Junk");
    f.wait_learned(&m3, Class::Spam);
    f.deliver("INBOX", "1700000070.C.host", &b);
    f.move_to(&p4, "Junk");
    f.wait_learned(&m4, Class::Spam);
    assert_eq!(f.class_of(&b), Some(Class::Spam), "a copy stays in Junk");
    let flagged = f.folder("Junk").join("cur/1700000070.J.host:2,ST");
    std::fs::rename(&junk_b, &flagged).unwrap();
    std::fs::remove_file(&flagged).unwrap();
    f.move_to(&p5, "Junk");
    f.wait_learned(&m5, Class::Spam);
    assert_eq!(
        f.class_of(&b),
        Some(Class::Spam),
        "a copy stays in Archive: no rescue"
    );
}

/// A client that moves by copying and marking the original deleted may expunge it later:
/// a copy in Junk marked deleted (`T`) does not stay.
#[test]
fn a_copy_left_in_junk_marked_deleted_does_not_stop_a_rescue() {
    let mut f = Fixture::new(settings());
    let a = mail(64);
    f.place("INBOX", "1700000064.M.host:2,S", &mail(65));
    f.start();
    f.stop();
    let in_junk = f.place("Junk", "1700000064.A.host:2,S", &a);
    f.start();
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Spam));
    std::fs::write(f.folder("INBOX").join("cur/1700000066.C.host:2,S"), &a).unwrap();
    std::fs::rename(&in_junk, in_junk.with_file_name("1700000064.A.host:2,ST")).unwrap();
    f.start();
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Ham));
    assert_eq!(f.messages(), [1, 0]);
}

/// A client that moves out of Junk by copying, and marks the copy left in Junk deleted (or
/// expunges it) later than the watcher gathers events, completes the rescue then: its
/// filing was first read as a copy, kept beside one in Junk.
#[test]
fn a_copy_left_in_junk_marked_deleted_later_completes_the_rescue() {
    let mut f = Fixture::new(settings());
    let (a, b) = (mail(70), mail(74));
    let mut markers = Markers::place(&f, (71..73).chain(75..78).chain(79..80));
    f.start();
    // Expunged: marked deleted and removed at once, a while after the copy was filed.
    let junk_a = f.deliver("Junk", "1700000070.J.host", &a);
    f.wait_learned(&a, Class::Spam);
    f.deliver("INBOX", "1700000073.C.host", &a);
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "a copy stays in Junk");
    let flagged = f.folder("Junk").join("cur/1700000070.J.host:2,ST");
    std::fs::rename(&junk_a, &flagged).unwrap();
    std::fs::remove_file(&flagged).unwrap();
    markers.handled(&f);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Ham),
        "moved out of Junk: rescued"
    );
    // Only marked deleted, not yet expunged.
    let junk_b = f.deliver("Junk", "1700000074.J.host", &b);
    f.wait_learned(&b, Class::Spam);
    f.deliver("Archive", "1700000077.C.host", &b);
    markers.handled(&f);
    assert_eq!(f.class_of(&b), Some(Class::Spam), "a copy stays in Junk");
    std::fs::rename(&junk_b, f.folder("Junk").join("cur/1700000074.J.host:2,ST")).unwrap();
    markers.handled(&f);
    assert_eq!(f.class_of(&b), Some(Class::Ham), "marked deleted: rescued");
    // Read (a flag that is no deletion), a copy left in Junk completes nothing.
    let c = mail(78);
    let junk_c = f.deliver("Junk", "1700000078.J.host", &c);
    f.wait_learned(&c, Class::Spam);
    f.deliver("INBOX", "1700000079.C.host", &c);
    // Handled apart, so that the rescue has begun when the flag comes.
    markers.handled(&f);
    std::fs::rename(&junk_c, f.folder("Junk").join("cur/1700000078.J.host:2,S")).unwrap();
    markers.handled(&f);
    assert_eq!(f.class_of(&c), Some(Class::Spam), "read, not deleted");
}

/// A user copies spam into Junk (learned as spam), files the original from INBOX in
/// Archive, then empties Junk a few minutes later: nothing came out of Junk, so nothing
/// was rescued. Filing the original had begun a rescue that deleting the copy completed.
#[test]
fn deleting_the_copy_in_junk_after_filing_the_original_keeps_it_spam() {
    let mut f = Fixture::new(settings());
    let (a, m1, m2) = (mail(90), mail(91), mail(92));
    let inbox_copy = f.place("INBOX", "1700000090.A.host:2,S", &a);
    let p1 = f.place("INBOX", "1700000091.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000092.M.host:2,S", &m2);
    f.start();
    let junk_copy = f.deliver("Junk", "1700000093.J.host", &a);
    f.wait_learned(&a, Class::Spam);
    f.move_to(&inbox_copy, "Archive");
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "a copy stays in Junk");
    // Junk emptied (the copy expunged, not moved anywhere).
    std::fs::remove_file(&junk_copy).unwrap();
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Spam),
        "deleting the spam from Junk is no rescue of the filed original"
    );
}

/// A client moves a message out of Junk by copying it, and the original left in Junk
/// leaves it (`leave`) while the watcher is stopped: the start-up rescan, which finds it
/// gone or marked deleted (it knows the file by its unique name), completes the rescue.
fn rescue_completed_at_start(n: usize, leave: impl FnOnce(&Fixture, &Path)) {
    let mut f = Fixture::new(settings());
    let (a, m1) = (mail(n), mail(n + 1));
    let p1 = f.place("INBOX", &format!("1700000{:03}.M.host:2,S", n + 1), &m1);
    f.start();
    let junk_a = f.deliver("Junk", &format!("1700000{n:03}.J.host"), &a);
    f.wait_learned(&a, Class::Spam);
    f.deliver("INBOX", &format!("1700000{:03}.C.host", n + 2), &a);
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Spam), "a copy stays in Junk");
    leave(&f, &junk_a);
    f.start();
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Ham), "it left Junk: rescued");
}

#[test]
fn a_copy_left_in_junk_expunged_while_stopped_completes_the_rescue_at_start() {
    rescue_completed_at_start(94, |_, junk| std::fs::remove_file(junk).unwrap());
}

#[test]
fn a_copy_left_in_junk_marked_deleted_while_stopped_completes_the_rescue_at_start() {
    rescue_completed_at_start(96, |f, junk| {
        let marked = f.folder("Junk").join("cur/1700000096.J.host:2,ST");
        std::fs::rename(junk, marked).unwrap();
    });
}

/// The copy left in Junk expunged, and its event lost in a kernel event-queue overflow:
/// the rescan that makes up for the lost events completes the rescue.
#[test]
fn a_copy_left_in_junk_expunged_before_an_overflow_completes_the_rescue() {
    let mut f = Fixture::new(settings());
    let (a, m1) = (mail(100), mail(101));
    let p1 = f.place("INBOX", "1700000101.M.host:2,S", &m1);
    f.start();
    let junk_a = f.deliver("Junk", "1700000100.J.host", &a);
    f.wait_learned(&a, Class::Spam);
    f.deliver("INBOX", "1700000102.C.host", &a);
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Spam), "a copy stays in Junk");
    let watcher = Watcher::start(f.settings.clone(), f.engine.clone()).unwrap();
    std::fs::remove_file(&junk_a).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    watcher.simulate_overflow();
    let counters = watcher.counters();
    let token = CancellationToken::new();
    let t = token.clone();
    let handle = std::thread::spawn(move || watcher.run(&t).unwrap());
    wait_until(
        || counters.rescans.load(Ordering::Relaxed) == 2,
        "the rescan ran",
    );
    token.cancel();
    handle.join().unwrap();
    assert_eq!(
        f.class_of(&a),
        Some(Class::Ham),
        "the copy in Junk is gone: rescued"
    );
}

/// Mail copied into Junk, the copy deleted there (Junk emptied), and the original filed
/// from INBOX into Archive later, or as Junk is emptied: it never came out of Junk, so it
/// stays learned as spam.
#[test]
fn filing_the_original_after_emptying_junk_of_its_copy_rescues_nothing() {
    let mut f = Fixture::new(settings());
    let (a, c, m1, m2) = (mail(103), mail(114), mail(105), mail(106));
    let inbox_a = f.place("INBOX", "1700000103.A.host:2,S", &a);
    let inbox_c = f.place("INBOX", "1700000114.C.host:2,S", &c);
    let p1 = f.place("INBOX", "1700000105.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000106.M.host:2,S", &m2);
    f.start();
    let junk_a = f.deliver("Junk", "1700000107.J.host", &a);
    let junk_c = f.deliver("Junk", "1700000115.J.host", &c);
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&c, Class::Spam);
    std::fs::remove_file(&junk_a).unwrap();
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    f.move_to(&inbox_a, "Archive");
    // C filed, and its copy in Junk deleted, at once: one batch sees both go.
    f.move_to(&inbox_c, "Archive");
    std::fs::remove_file(&junk_c).unwrap();
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "moved from INBOX");
    assert_eq!(
        f.class_of(&c),
        Some(Class::Spam),
        "moved from INBOX as Junk was emptied"
    );
}

/// The original of mail copied into Junk filed while the watcher is stopped, and Junk
/// emptied after it started: the start-up rescan sees the original leave INBOX as it sees
/// it arrive in Archive, so that filing began no rescue.
#[test]
fn filing_the_original_while_stopped_then_emptying_junk_keeps_it_spam() {
    let mut f = Fixture::new(settings());
    let (a, m1, m2) = (mail(110), mail(111), mail(112));
    let inbox_a = f.place("INBOX", "1700000110.A.host:2,S", &a);
    let p1 = f.place("INBOX", "1700000111.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000112.M.host:2,S", &m2);
    f.start();
    let junk_a = f.deliver("Junk", "1700000113.J.host", &a);
    f.wait_learned(&a, Class::Spam);
    f.stop();
    f.move_to(&inbox_a, "Archive");
    f.move_to(&p1, "Junk");
    f.start();
    assert_eq!(f.class_of(&m1), Some(Class::Spam));
    assert_eq!(f.class_of(&a), Some(Class::Spam), "a copy stays in Junk");
    std::fs::remove_file(&junk_a).unwrap();
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Spam),
        "deleting the spam from Junk is no rescue of the filed original"
    );
}

/// Mail placed in INBOX before the watcher starts, moved into Junk one at a time: learned,
/// it shows that the watcher has handled every event that came before the move.
struct Markers {
    placed: Vec<(PathBuf, String)>,
    next: usize,
}

impl Markers {
    /// `mail(n)` for each of `numbers`, placed in INBOX.
    fn place(f: &Fixture, numbers: impl Iterator<Item = usize>) -> Markers {
        let placed = numbers
            .map(|n| {
                let raw = mail(n);
                (
                    f.place("INBOX", &format!("1700000{n:03}.M.host:2,S"), &raw),
                    raw,
                )
            })
            .collect();
        Markers { placed, next: 0 }
    }

    /// Returns once the watcher has handled what came before this call.
    fn handled(&mut self, f: &Fixture) {
        let (path, raw) = &self.placed[self.next];
        f.move_to(path, "Junk");
        f.wait_learned(raw, Class::Spam);
        self.next += 1;
    }
}

/// A copy of a message under the same name in another folder, as Dovecot links one there.
fn copy_to(f: &Fixture, path: &Path, folder: &str) -> PathBuf {
    let to = f.folder(folder).join("cur").join(path.file_name().unwrap());
    std::fs::copy(path, &to).unwrap();
    to
}

/// Mail copied into Junk and deleted there (expunged, or only marked deleted): copying its
/// original from INBOX into Archive later is filing, not a rescue. Nothing came out of
/// Junk: the copy there left it by deletion, and the record knows that in later batches.
#[test]
fn copying_the_original_after_deleting_its_copy_in_junk_rescues_nothing() {
    let mut f = Fixture::new(settings());
    let (a, b) = (mail(120), mail(121));
    let inbox_a = f.place("INBOX", "1700000120.A.host:2,S", &a);
    let inbox_b = f.place("INBOX", "1700000121.B.host:2,S", &b);
    let mut markers = Markers::place(&f, 122..126);
    f.start();
    let junk_a = copy_to(&f, &inbox_a, "Junk");
    let junk_b = copy_to(&f, &inbox_b, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    // A expunged from Junk, B marked deleted there and left.
    std::fs::remove_file(&junk_a).unwrap();
    std::fs::rename(&junk_b, f.folder("Junk").join("cur/1700000121.B.host:2,ST")).unwrap();
    markers.handled(&f);
    copy_to(&f, &inbox_a, "Archive");
    copy_to(&f, &inbox_b, "Archive");
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "expunged from Junk");
    assert_eq!(f.class_of(&b), Some(Class::Spam), "marked deleted in Junk");
    assert_eq!(f.messages(), [0, 4]);
}

/// A client that files mail by copying it and marking the one copied deleted: filing the
/// original from INBOX into Archive that way, while a copy of it sits in Junk, is no
/// rescue, though Junk is emptied minutes later. The mark comes with the copy, or later.
#[test]
fn filing_by_copy_and_delete_flag_beside_a_copy_in_junk_is_no_rescue() {
    let mut f = Fixture::new(settings());
    let (a, b) = (mail(130), mail(131));
    let inbox_a = f.place("INBOX", "1700000130.A.host:2,S", &a);
    let inbox_b = f.place("INBOX", "1700000131.B.host:2,S", &b);
    let mut markers = Markers::place(&f, 132..136);
    f.start();
    let junk_a = copy_to(&f, &inbox_a, "Junk");
    let junk_b = copy_to(&f, &inbox_b, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    // A copied and marked at once; B copied, and marked once the copy was handled.
    copy_to(&f, &inbox_a, "Archive");
    std::fs::rename(&inbox_a, inbox_a.with_file_name("1700000130.A.host:2,ST")).unwrap();
    copy_to(&f, &inbox_b, "Archive");
    markers.handled(&f);
    std::fs::rename(&inbox_b, inbox_b.with_file_name("1700000131.B.host:2,ST")).unwrap();
    markers.handled(&f);
    std::fs::remove_file(&junk_a).unwrap();
    std::fs::remove_file(&junk_b).unwrap();
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "marked with the copy");
    assert_eq!(f.class_of(&b), Some(Class::Spam), "marked after the copy");
    assert_eq!(f.messages(), [0, 5]);
}

/// A folder made and filled in one batch of events: mail moved into it from INBOX while
/// its copy in Junk is deleted is filed from INBOX, as it would be into a folder made
/// earlier; so is mail moved into it while a copy stays in Junk, emptied later.
#[test]
fn filing_into_a_folder_made_in_the_same_batch_beside_a_copy_in_junk_is_no_rescue() {
    let mut f = Fixture::new(settings());
    let (a, b, m1, m2) = (mail(140), mail(143), mail(141), mail(142));
    let inbox_a = f.place("INBOX", "1700000140.A.host:2,S", &a);
    let inbox_b = f.place("INBOX", "1700000143.B.host:2,S", &b);
    let p1 = f.place("INBOX", "1700000141.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000142.M.host:2,S", &m2);
    f.start();
    let junk_a = copy_to(&f, &inbox_a, "Junk");
    let junk_b = copy_to(&f, &inbox_b, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    maildir(&f.root, &[".Keep"]);
    f.move_to(&inbox_a, "Keep");
    std::fs::remove_file(&junk_a).unwrap();
    f.move_to(&inbox_b, "Keep");
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    assert_eq!(f.class_of(&b), Some(Class::Spam), "a copy stays in Junk");
    std::fs::remove_file(&junk_b).unwrap();
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Spam),
        "moved from INBOX into the new folder as its copy left Junk"
    );
    assert_eq!(
        f.class_of(&b),
        Some(Class::Spam),
        "moved from INBOX into the new folder, its copy in Junk deleted later"
    );
}

/// A Junk folder taught by hand (`spamnb learn --spam`) whose copy of a message was marked
/// deleted before the watcher's first scan: the original filed from INBOX to Archive is
/// where the message is now, and a copy made of it later is no rescue. The copy marked
/// deleted does not stay in Junk, for this check as for the one of a copy made out of Junk.
#[test]
fn a_copy_in_junk_marked_deleted_keeps_no_later_copy_a_rescue() {
    let mut f = Fixture::new(settings());
    let (a, m1, m2) = (mail(150), mail(151), mail(152));
    let inbox_a = f.place("INBOX", "1700000150.A.host:2,S", &a);
    f.place("Junk", "1700000150.A.host:2,ST", &a);
    let p1 = f.place("INBOX", "1700000151.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000152.M.host:2,S", &m2);
    f.learned_spam(&[&a]);
    f.start();
    let filed = f.move_to(&inbox_a, "Archive");
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    copy_to(&f, &filed, "INBOX");
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "never out of Junk");
}

/// Mail moved into Junk, marked deleted there, then undeleted (a client that only marks
/// deleted mail, and an undo) and moved back to INBOX: the user rescued it from Junk, as
/// they would without the mark. The mark left no copy elsewhere for it to come from.
#[test]
fn mail_undeleted_in_junk_and_moved_out_is_rescued() {
    let mut f = Fixture::new(settings());
    let (a, m1, m2) = (mail(160), mail(161), mail(162));
    let inbox_a = f.place("INBOX", "1700000160.A.host:2,S", &a);
    let p1 = f.place("INBOX", "1700000161.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000162.M.host:2,S", &m2);
    f.start();
    let junk_a = f.move_to(&inbox_a, "Junk");
    f.wait_learned(&a, Class::Spam);
    let marked = junk_a.with_file_name("1700000160.A.host:2,ST");
    std::fs::rename(&junk_a, &marked).unwrap();
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    std::fs::rename(&marked, &junk_a).unwrap();
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    f.move_to(&junk_a, "INBOX");
    f.wait_learned(&a, Class::Ham);
}

/// Mail moved into Junk, marked deleted there and moved to INBOX with the mark still on (a
/// client that keeps the flag): the user took it out of Junk, a rescue as any move out is.
/// A copy marked deleted and expunged from Junk as its original is copied elsewhere is no
/// move out of Junk: the new file may be a copy of the original.
#[test]
fn mail_moved_out_of_junk_still_marked_deleted_is_rescued() {
    let mut f = Fixture::new(settings());
    let (a, b, m1, m2) = (mail(170), mail(171), mail(172), mail(173));
    let inbox_a = f.place("INBOX", "1700000170.A.host:2,S", &a);
    let inbox_b = f.place("INBOX", "1700000171.B.host:2,S", &b);
    let p1 = f.place("INBOX", "1700000172.M.host:2,S", &m1);
    let p2 = f.place("INBOX", "1700000173.M.host:2,S", &m2);
    f.start();
    let junk_a = f.move_to(&inbox_a, "Junk");
    let junk_b = copy_to(&f, &inbox_b, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    let marked_a = junk_a.with_file_name("1700000170.A.host:2,ST");
    std::fs::rename(&junk_a, &marked_a).unwrap();
    let marked_b = junk_b.with_file_name("1700000171.B.host:2,ST");
    std::fs::rename(&junk_b, &marked_b).unwrap();
    f.move_to(&p1, "Junk");
    f.wait_learned(&m1, Class::Spam);
    f.move_to(&marked_a, "INBOX");
    f.wait_learned(&a, Class::Ham);
    // Expunged as its original is filed by copying, in one batch: no move out of Junk.
    std::fs::remove_file(&marked_b).unwrap();
    copy_to(&f, &inbox_b, "Archive");
    f.move_to(&p2, "Junk");
    f.wait_learned(&m2, Class::Spam);
    assert_eq!(f.class_of(&b), Some(Class::Spam), "expunged from Junk");
}

/// Mail copied into Junk (learned as spam), its original then copied from INBOX into
/// Archive and left unmarked in INBOX, and Junk emptied minutes later: Dovecot links both
/// copies under the original's name, so that reads like a client moving it out of Junk by
/// copying. But the message stays in INBOX: the copy in Archive was filed from there, and
/// emptying Junk deleted spam. Expunged, or only marked deleted, it stays spam.
#[test]
fn copying_the_original_beside_a_copy_in_junk_then_emptying_junk_is_no_rescue() {
    let mut f = Fixture::new(settings());
    let (a, b) = (mail(180), mail(181));
    let inbox_a = f.place("INBOX", "1700000180.A.host:2,S", &a);
    let inbox_b = f.place("INBOX", "1700000181.B.host:2,S", &b);
    let mut markers = Markers::place(&f, 182..185);
    f.start();
    let junk_a = copy_to(&f, &inbox_a, "Junk");
    let junk_b = copy_to(&f, &inbox_b, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    copy_to(&f, &inbox_a, "Archive");
    copy_to(&f, &inbox_b, "Archive");
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "a copy stays in Junk");
    // A expunged (marked, then removed), B only marked deleted.
    let marked_a = junk_a.with_file_name("1700000180.A.host:2,ST");
    std::fs::rename(&junk_a, &marked_a).unwrap();
    std::fs::remove_file(&marked_a).unwrap();
    std::fs::rename(&junk_b, junk_b.with_file_name("1700000181.B.host:2,ST")).unwrap();
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "expunged from Junk");
    assert_eq!(f.class_of(&b), Some(Class::Spam), "marked deleted in Junk");
    assert_eq!(f.messages(), [0, 4]);
}

/// The same with spamnb stopped before Junk is emptied: the start-up rescan, which
/// completes a rescue whose copy left Junk meanwhile, calls this one off too.
#[test]
fn copying_the_original_beside_a_copy_in_junk_then_emptying_junk_while_stopped_is_no_rescue() {
    let mut f = Fixture::new(settings());
    let a = mail(186);
    let inbox_a = f.place("INBOX", "1700000186.A.host:2,S", &a);
    let mut markers = Markers::place(&f, 187..188);
    f.start();
    let junk_a = copy_to(&f, &inbox_a, "Junk");
    f.wait_learned(&a, Class::Spam);
    copy_to(&f, &inbox_a, "Archive");
    markers.handled(&f);
    f.stop();
    std::fs::remove_file(&junk_a).unwrap();
    f.start();
    f.stop();
    assert_eq!(f.class_of(&a), Some(Class::Spam), "expunged from Junk");
}

/// The same filing and emptying of Junk seen at once: in one batch of events, or in the
/// start-up rescan after both were done while spamnb was stopped. A file of the message
/// left Junk as one arrived in Archive, but the message stays in INBOX: no rescue.
#[test]
fn copying_the_original_as_junk_is_emptied_is_no_rescue() {
    let mut f = Fixture::new(WatchSettings {
        debounce: Duration::from_millis(500),
        ..settings()
    });
    let (a, b) = (mail(190), mail(191));
    let inbox_a = f.place("INBOX", "1700000190.A.host:2,S", &a);
    let inbox_b = f.place("INBOX", "1700000191.B.host:2,S", &b);
    let mut markers = Markers::place(&f, 192..193);
    f.start();
    let junk_a = copy_to(&f, &inbox_a, "Junk");
    let junk_b = copy_to(&f, &inbox_b, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    copy_to(&f, &inbox_a, "Archive");
    std::fs::remove_file(&junk_a).unwrap();
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Spam), "in one batch");
    f.stop();
    copy_to(&f, &inbox_b, "Archive");
    std::fs::remove_file(&junk_b).unwrap();
    f.start();
    f.stop();
    assert_eq!(f.class_of(&b), Some(Class::Spam), "while stopped");
}

/// Mail moved out of Junk (renamed, the same file) in the same batch of events as a
/// duplicate of it is deleted from Archive: the move is the rescue, though another folder
/// lost the message at the same time. It used to be read as filed from Archive.
#[test]
fn a_rename_out_of_junk_beside_a_duplicate_deleted_elsewhere_is_a_rescue() {
    let mut f = Fixture::new(WatchSettings {
        debounce: Duration::from_millis(500),
        ..settings()
    });
    let a = mail(194);
    let archive_a = f.place("Archive", "1700000194.A.host:2,S", &a);
    let junk_a = f.place("Junk", "1700000194.J.host:2,S", &a);
    let mut markers = Markers::place(&f, 195..196);
    f.learned_spam(&[&a]);
    f.start();
    std::fs::remove_file(&archive_a).unwrap();
    f.move_to(&junk_a, "INBOX");
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Ham), "moved out of Junk");
}

/// Mail copied out of Junk into INBOX, then copied from INBOX into Archive, and Junk
/// emptied: the copy in INBOX was the rescue, and the one in Archive, filed from it, does
/// not make it filing. Seen in separate batches, or the filing and the emptying at once.
#[test]
fn a_copy_out_of_junk_filed_on_by_copying_is_still_a_rescue() {
    let mut f = Fixture::new(WatchSettings {
        debounce: Duration::from_millis(300),
        ..settings()
    });
    let (a, b) = (mail(196), mail(197));
    let junk_a = f.place("Junk", "1700000196.A.host:2,S", &a);
    let junk_b = f.place("Junk", "1700000197.B.host:2,S", &b);
    let mut markers = Markers::place(&f, 198..201);
    f.learned_spam(&[&a, &b]);
    f.start();
    let inbox_a = copy_to(&f, &junk_a, "INBOX");
    let inbox_b = copy_to(&f, &junk_b, "INBOX");
    markers.handled(&f);
    copy_to(&f, &inbox_a, "Archive");
    markers.handled(&f);
    std::fs::remove_file(&junk_a).unwrap();
    copy_to(&f, &inbox_b, "Archive");
    std::fs::remove_file(&junk_b).unwrap();
    markers.handled(&f);
    assert_eq!(f.class_of(&a), Some(Class::Ham), "emptied after the filing");
    assert_eq!(f.class_of(&b), Some(Class::Ham), "emptied as it was filed");
}

/// Where only INBOX is ham (`other_folders_are_ham = false`), mail kept in Archive and
/// copied into Junk (learned as spam), then copied from Archive into INBOX as Junk is
/// emptied: INBOX's copy came from Archive, where the message stays, not out of Junk. Seen
/// in separate batches, or the copy and the emptying at once, it stays spam.
#[test]
fn copying_from_a_folder_that_is_not_ham_as_junk_is_emptied_is_no_rescue() {
    let mut f = Fixture::new(WatchSettings {
        other_folders_are_ham: false,
        debounce: Duration::from_millis(300),
        ..settings()
    });
    let (a, b) = (mail(202), mail(203));
    let archive_a = f.place("Archive", "1700000202.A.host:2,S", &a);
    let archive_b = f.place("Archive", "1700000203.B.host:2,S", &b);
    let mut markers = Markers::place(&f, 204..206);
    f.start();
    let junk_a = copy_to(&f, &archive_a, "Junk");
    let junk_b = copy_to(&f, &archive_b, "Junk");
    f.wait_learned(&a, Class::Spam);
    f.wait_learned(&b, Class::Spam);
    copy_to(&f, &archive_a, "INBOX");
    markers.handled(&f);
    std::fs::remove_file(&junk_a).unwrap();
    copy_to(&f, &archive_b, "INBOX");
    std::fs::remove_file(&junk_b).unwrap();
    markers.handled(&f);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Spam),
        "Junk emptied after the copy"
    );
    assert_eq!(
        f.class_of(&b),
        Some(Class::Spam),
        "Junk emptied with the copy"
    );
    assert_eq!(f.messages(), [0, 4]);
}

/// Mail copied out of Junk into INBOX, then moved on from INBOX into Archive (as Dovecot
/// moves: linked in, the one in INBOX deleted) while the copy in Junk stays, and Junk
/// emptied: the copy in INBOX was the rescue, and moving it on, like copying it on, does
/// not make it filing. Junk emptied after the move, or with it.
#[test]
fn a_copy_out_of_junk_moved_on_is_still_a_rescue() {
    let mut f = Fixture::new(WatchSettings {
        debounce: Duration::from_millis(300),
        ..settings()
    });
    let (a, b) = (mail(208), mail(209));
    let junk_a = f.place("Junk", "1700000208.A.host:2,S", &a);
    let junk_b = f.place("Junk", "1700000209.B.host:2,S", &b);
    let mut markers = Markers::place(&f, 210..214);
    f.learned_spam(&[&a, &b]);
    f.start();
    let inbox_a = copy_to(&f, &junk_a, "INBOX");
    let inbox_b = copy_to(&f, &junk_b, "INBOX");
    markers.handled(&f);
    copy_to(&f, &inbox_a, "Archive");
    std::fs::remove_file(&inbox_a).unwrap();
    markers.handled(&f);
    std::fs::remove_file(&junk_a).unwrap();
    markers.handled(&f);
    copy_to(&f, &inbox_b, "Archive");
    std::fs::remove_file(&inbox_b).unwrap();
    std::fs::remove_file(&junk_b).unwrap();
    markers.handled(&f);
    assert_eq!(
        f.class_of(&a),
        Some(Class::Ham),
        "Junk emptied after the move"
    );
    assert_eq!(
        f.class_of(&b),
        Some(Class::Ham),
        "Junk emptied with the move"
    );
    assert_eq!(f.messages(), [2, 4]);
}
