//! `spamnb watch` as a process: killed with SIGKILL in the middle of bursts of moves, and
//! behind a real Dovecot that an IMAP client drives with MOVE and COPY (issue 5).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use spamnb::config::Config;
use spamnb::engine::Engine;
use spamnb::message::digest;
use spamnb::model::{Class, CountSource};
use spamnb::store::{SledStore, Store, StoreOptions};

use crate::util;
use crate::watch::mail;

/// `spamnb watch` with a config of its own (one user, no burst limit) and the given db.
fn watch_command(config: &Path, db: &Path) -> Command {
    let mut c = util::spamnb(db);
    c.env("SPAMNB_CONFIG", config).arg("watch");
    c
}

fn write_config(dir: &Path, user: &str, root: &Path) -> PathBuf {
    util::write(
        dir,
        "spamnb.toml",
        format!(
            "[watch]\nburst_limit = 0\ndebounce_ms = 20\n[watch.users]\n{user} = \"{}\"\n",
            root.display()
        ),
    )
}

/// Starts `spamnb watch` and returns once it says it is watching (its start-up rescan done).
fn start_watcher(cmd: &mut Command) -> Child {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn spamnb watch");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).expect("read stderr") == 0 {
            let status = child.wait().expect("wait");
            panic!("spamnb watch exited ({status}) before watching:\n{seen}");
        }
        seen.push_str(&line);
        if line.contains("watching") {
            break;
        }
    }
    // Keep draining stderr so that the watcher never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}

/// Xorshift: a reproducible random sequence without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Opens the database as a crashed watcher left it and checks that its counts are exactly
/// those of the messages its ledger lists, learned afresh into an empty store.
fn check_counts_match_ledger(
    db: &Path,
    by_digest: &BTreeMap<[u8; 16], String>,
    round: usize,
) -> BTreeMap<[u8; 16], Class> {
    let store = SledStore::open(db, &StoreOptions::default())
        .unwrap_or_else(|e| panic!("round {round}: the database does not open after SIGKILL: {e}"));
    let mut ledger = BTreeMap::new();
    store
        .for_each_ledger_entry(&mut |d, e| {
            ledger.insert(*d, e.class);
        })
        .unwrap();
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh =
        std::sync::Arc::new(SledStore::open(fresh_dir.path(), &StoreOptions::default()).unwrap());
    let config = Config::default();
    let engine = Engine {
        extractor: config.extractor.clone(),
        model: config.model.clone(),
        store: fresh.clone(),
    };
    let lessons: Vec<_> = ledger
        .iter()
        .map(|(d, class)| {
            let raw = by_digest
                .get(d)
                .unwrap_or_else(|| panic!("round {round}: a ledger entry for an unknown message"));
            engine.lesson(raw.as_bytes(), Some(*class), Some("ann"))
        })
        .collect();
    engine.learn(&lessons).unwrap();
    assert_eq!(
        store.totals(),
        fresh.totals(),
        "round {round}: totals differ from a recount of the ledger"
    );
    let tokens = |s: &SledStore| {
        let mut all = Vec::new();
        s.for_each_token(&mut |f, c| all.push((f.to_string(), c)))
            .unwrap();
        all
    };
    assert!(
        tokens(&store) == tokens(&fresh),
        "round {round}: token counts differ from a recount of the ledger"
    );
    ledger
}

#[test]
fn sigkill_during_bursts_of_moves_never_leaves_half_a_message_learned() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("Maildir");
    for folder in ["", ".Junk"] {
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(root.join(folder).join(sub)).unwrap();
        }
    }
    let db = dir.path().join("db");
    let config = write_config(dir.path(), "ann", &root);
    const N: usize = 200;
    let mails: Vec<String> = (0..N).map(|n| mail(5000 + n)).collect();
    let by_digest: BTreeMap<[u8; 16], String> = mails
        .iter()
        .map(|m| (digest(m.as_bytes()), m.clone()))
        .collect();
    let names: Vec<String> = (0..N)
        .map(|i| format!("1700005000.M{i}.host:2,S"))
        .collect();
    // Where each message is, and whether it was ever moved.
    let mut in_junk = vec![false; N];
    let mut moved = vec![false; N];
    for (m, name) in mails.iter().zip(&names) {
        std::fs::write(root.join("cur").join(name), m).unwrap();
    }
    let first = watch_command(&config, &db).arg("--once").output().unwrap();
    assert!(first.status.success(), "{}", util::text(&first.stderr));

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let started = Instant::now();
    const ROUNDS: usize = 50;
    for round in 0..ROUNDS {
        let mut child = start_watcher(&mut watch_command(&config, &db));
        let kill_after = Duration::from_millis(rng.below(250));
        let t = Instant::now();
        let mut killed = false;
        // Twenty different messages: each round's moves are seen, live or by the next
        // start's rescan, before any of them moves again.
        let mut picked = std::collections::BTreeSet::new();
        while picked.len() < 20 {
            picked.insert(rng.below(N as u64) as usize);
        }
        for i in picked {
            let (from, to) = if in_junk[i] {
                (root.join(".Junk"), root.clone())
            } else {
                (root.clone(), root.join(".Junk"))
            };
            std::fs::rename(
                from.join("cur").join(&names[i]),
                to.join("cur").join(&names[i]),
            )
            .unwrap();
            in_junk[i] = !in_junk[i];
            moved[i] = true;
            if !killed && t.elapsed() >= kill_after {
                child.kill().unwrap();
                killed = true;
            }
        }
        if !killed {
            std::thread::sleep(kill_after.saturating_sub(t.elapsed()));
            child.kill().unwrap();
        }
        child.wait().unwrap();
        check_counts_match_ledger(&db, &by_digest, round);
    }
    eprintln!("{ROUNDS} rounds in {:?}", started.elapsed());

    // A last, clean pass learns whatever the killed watchers missed: then every message is
    // where the user put it.
    let last = watch_command(&config, &db).arg("--once").output().unwrap();
    assert!(last.status.success(), "{}", util::text(&last.stderr));
    let ledger = check_counts_match_ledger(&db, &by_digest, ROUNDS);
    // A message moved into Junk and back before a killed watcher's writes reached the
    // disk is, as far as the database can know, a message that never moved: not learned.
    let (mut ham, mut spam) = (0, 0);
    for i in 0..N {
        let got = ledger.get(&digest(mails[i].as_bytes())).copied();
        match (in_junk[i], moved[i]) {
            (true, _) => assert_eq!(got, Some(Class::Spam), "message {i} is in Junk"),
            (false, true) => {
                assert_ne!(got, Some(Class::Spam), "message {i} was rescued from Junk")
            }
            (false, false) => assert_eq!(got, None, "message {i} never moved"),
        }
        match got {
            Some(Class::Ham) => ham += 1,
            Some(Class::Spam) => spam += 1,
            None => {}
        }
    }
    eprintln!("at the end: {spam} learned as spam, {ham} as ham");
    assert!(
        ham > 0,
        "some messages were relearned as ham across the rounds"
    );
}
