//! `spamnb watch` as a process: killed with SIGKILL in the middle of bursts of moves, and
//! behind a real Dovecot that an IMAP client drives with MOVE and COPY (issue 5).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::digest;
use spamnb::config::Config;
use spamnb::engine::Engine;
use spamnb::model::{Class, CountSource};
use spamnb::store::{SledStore, Store, StoreOptions};

use crate::util;
use crate::watch::{mail, maildir};

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
    maildir(&root, &["", ".Junk"]);
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
    let mut in_junk = [false; N];
    let mut moved = [false; N];
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

/// The lines a running `spamnb -v watch` logs, as they come.
struct Log(std::sync::mpsc::Receiver<String>);

impl Log {
    fn follow(child: &mut Child) -> Log {
        let (tx, rx) = std::sync::mpsc::channel();
        let err = BufReader::new(child.stderr.take().expect("stderr"));
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Log(rx)
    }

    /// Waits for a line containing `what`; returns every line up to it.
    fn wait_for(&self, what: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) => {
                    let done = line.contains(what);
                    lines.push(line);
                    if done {
                        return lines;
                    }
                }
                Err(_) => panic!(
                    "no log line with {what:?} within 20 s; got:\n{}",
                    lines.join("\n")
                ),
            }
        }
    }
}

/// A private Dovecot on a loopback port: its own base_dir, a passwd-file user, Maildirs in
/// a temp dir. Stopped when dropped.
struct Dovecot {
    config: PathBuf,
    port: u16,
    child: Child,
}

/// Hands `path` to the user Dovecot's mail processes run as (nobody, as its userdb says):
/// Dovecot refuses uid 0 for mail access.
pub(crate) fn give_to_mail_user(path: &Path) {
    std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
}

impl Dovecot {
    /// Dovecot 2.3 with `extra` added to its configuration and Maildir++ folders; None
    /// (skipped) for another version, whose configuration syntax differs.
    fn start(dir: &Path, extra: &str) -> Option<Dovecot> {
        Dovecot::start_with_layout(dir, extra, "")
    }

    /// As [`Dovecot::start`], with `layout` appended to the Maildir location
    /// (`:LAYOUT=fs`: folders as nested directories, not `.A.B` beside INBOX).
    fn start_with_layout(dir: &Path, extra: &str, layout: &str) -> Option<Dovecot> {
        let version = Command::new("dovecot")
            .arg("--version")
            .output()
            .expect("dovecot --version");
        let version = util::text(&version.stdout);
        if !util::available(
            version.starts_with("2.3"),
            &format!("this test speaks Dovecot 2.3's configuration, not {version}"),
            &format!("Dovecot {version} is not 2.3"),
        ) {
            return None;
        }
        let port = util::free_port();
        let d = dir.display();
        for sub in ["run", "state", "home"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        give_to_mail_user(&dir.join("home"));
        util::write(dir, "passwd", "ann:{PLAIN}secret\n");
        let config = util::write(
            dir,
            "dovecot.conf",
            format!(
                "base_dir = {d}/run\nstate_dir = {d}/state\nlog_path = {d}/dovecot.log\n\
                 protocols = imap\nlisten = 127.0.0.1\nssl = no\ndisable_plaintext_auth = no\n\
                 auth_mechanisms = plain\nfirst_valid_uid = 100\n\
                 mail_location = maildir:{d}/home/%u/Maildir{layout}\n\
                 passdb {{\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u {d}/passwd\n}}\n\
                 userdb {{\n  driver = static\n  args = uid=65534 gid=65534 home={d}/home/%u\n}}\n\
                 service imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {port}\n  }}\n\
                 \x20 inet_listener imaps {{\n    port = 0\n  }}\n}}\n\
                 namespace inbox {{\n  inbox = yes\n\
                 \x20 mailbox Junk {{\n    auto = create\n    special_use = \\Junk\n  }}\n\
                 \x20 mailbox Trash {{\n    auto = create\n    special_use = \\Trash\n  }}\n}}\n{extra}\n"
            ),
        );
        let child = Command::new("dovecot")
            .args(["-F", "-c"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dovecot");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "dovecot did not listen; see {d}/dovecot.log"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Dovecot {
            config,
            port,
            child,
        })
    }

    /// Runs IMAP commands through Python's imaplib: see [`imap`].
    fn imap(&self, commands: &[&str]) {
        imap(self.port, commands);
    }
}

/// Runs IMAP commands as ann (password `secret`) on a Dovecot at 127.0.0.1:`port`, through
/// Python's imaplib: `append N [FOLDER]` (`mail(N)`; INBOX unless named), `create FOLDER`,
/// `move N FROM TO`, `copy N FROM TO`, `delete N FOLDER` (marks it deleted), `expunge
/// FOLDER` (N: the number in the message's subject).
fn imap(port: u16, commands: &[&str]) {
    let mut script = format!(
        "import imaplib\nm = imaplib.IMAP4('127.0.0.1', {port})\nm.login('ann', 'secret')\n\
         def find(n, folder):\n    m.select(folder)\n    t, d = m.uid('SEARCH', None, 'HEADER', 'Subject', '\"note %d\"' % n)\n\
         \x20   assert t == 'OK' and d[0], (n, folder, d)\n    return d[0].split()[0]\n"
    );
    for c in commands {
        let words: Vec<&str> = c.split_whitespace().collect();
        match words[..] {
            ["append", n] | ["append", n, _] => {
                let raw = mail(n.parse().unwrap()).replace('\n', "\r\n");
                let folder = words.get(2).unwrap_or(&"INBOX");
                script.push_str(&format!(
                    "t, _ = m.append('{folder}', None, None, {raw:?}.encode())\nassert t == 'OK'\n"
                ));
            }
            ["create", folder] => script.push_str(&format!(
                "t, d = m.create('{folder}')\nassert t == 'OK', d\n"
            )),
            [verb @ ("move" | "copy"), n, from, to] => script.push_str(&format!(
                "t, d = m.uid('{}', find({n}, '{from}'), '{to}')\nassert t == 'OK', d\n",
                verb.to_uppercase()
            )),
            ["delete", n, folder] => script.push_str(&format!(
                "t, d = m.uid('STORE', find({n}, '{folder}'), '+FLAGS', '(\\\\Deleted)')\n\
                 assert t == 'OK', d\n"
            )),
            ["expunge", folder] => script.push_str(&format!(
                "m.select('{folder}')\nt, d = m.expunge()\nassert t == 'OK', d\n"
            )),
            _ => panic!("bad IMAP step {c}"),
        }
    }
    script.push_str("m.logout()\n");
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "IMAP {commands:?} failed:\n{}",
        util::text(&out.stderr)
    );
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(&self.config)
            .arg("stop")
            .status();
        self.child.wait_timeout_or_kill();
    }
}

pub(crate) trait WaitOrKill {
    fn wait_timeout_or_kill(&mut self) -> bool;
}

impl WaitOrKill for Child {
    /// Waits up to 5 s for the child to exit, then kills it. True if it exited by itself.
    fn wait_timeout_or_kill(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.kill();
        let _ = self.wait();
        false
    }
}

/// What `spamnb stats --format json` and `spamnb export` say once the watcher is stopped.
fn learned(db: &Path) -> ([u64; 2], BTreeMap<String, String>) {
    let out = util::spamnb(db)
        .args(["stats", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |class: &str| stats["messages"][class].as_u64().unwrap();
    let out = util::spamnb(db).arg("export").output().unwrap();
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    let ledger = util::text(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("ledger "))
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w[0].to_string(), format!("{} {}", w[1], w[3]))
        })
        .collect();
    ([n("ham"), n("spam")], ledger)
}

fn hex(raw: &str) -> String {
    digest(raw.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A running `spamnb watch`, killed if a failing test leaves it behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn stop_watcher(mut running: Running) {
    let status = Command::new("kill")
        .args(["-TERM", &running.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        running.0.wait_timeout_or_kill(),
        "spamnb watch did not stop on SIGTERM"
    );
}

/// A temp dir for a test with Dovecot, whose mail processes (nobody) must reach the
/// Maildirs below it; none, the test skipped, without Dovecot, python3 or root.
fn dovecot_dir() -> Option<tempfile::TempDir> {
    if !util::have("dovecot")
        || !util::have("python3")
        || !util::root_or_skip("Dovecot (its mail processes run as nobody)")
    {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("chmod")
        .arg("755")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    Some(dir)
}

/// `spamnb -v watch` with `config` and `db`, once it says it is watching, and its log.
fn watch_logged(config: &Path, db: &Path) -> (Running, Log) {
    let mut c = watch_command(config, db);
    c.arg("-v").stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn spamnb watch");
    let log = Log::follow(&mut child);
    let running = Running(child);
    log.wait_for("watching");
    (running, log)
}

#[test]
fn dovecot_imap_move_and_copy_teach_through_the_watcher() {
    let Some(dir) = dovecot_dir() else {
        return;
    };
    let Some(dovecot) = Dovecot::start(dir.path(), "") else {
        return;
    };
    // Four messages delivered into INBOX (Dovecot makes Junk and Trash beside it).
    dovecot.imap(&["append 7001", "append 7002", "append 7003", "append 7004"]);

    let db = dir.path().join("db");
    let root = dir.path().join("home/ann/Maildir");
    let config = write_config(dir.path(), "ann", &root);
    let spawn = || watch_logged(&config, &db);

    // INBOX → Junk, by MOVE and by COPY: learned as spam.
    let (watcher, log) = spawn();
    dovecot.imap(&[
        "move 7001 INBOX Junk",
        "copy 7002 INBOX Junk",
        "move 7003 INBOX Junk",
    ]);
    for _ in 0..3 {
        log.wait_for("as spam for ann");
    }
    stop_watcher(watcher);
    let (counts, ledger) = learned(&db);
    assert_eq!(counts, [0, 3], "three learned as spam");
    for n in [7001, 7002, 7003] {
        assert_eq!(
            ledger.get(&hex(&mail(n))).map(String::as_str),
            Some("spam ann"),
            "message {n}"
        );
    }

    // Junk → INBOX: relearned as ham. Junk → Trash: nothing.
    let (watcher, log) = spawn();
    dovecot.imap(&["move 7003 Junk Trash", "move 7001 Junk INBOX"]);
    let lines = log.wait_for("as ham for ann");
    let taught = |l: &&String| l.contains("learned") && l.contains(".Trash/");
    assert!(
        !lines.iter().any(|l| taught(&l)),
        "Trash taught something:\n{}",
        lines.join("\n")
    );
    std::thread::sleep(Duration::from_millis(300));
    stop_watcher(watcher);
    let (counts, ledger) = learned(&db);
    assert_eq!(counts, [1, 2]);
    assert_eq!(
        ledger.get(&hex(&mail(7001))).map(String::as_str),
        Some("ham ann")
    );
    assert_eq!(
        ledger.get(&hex(&mail(7003))).map(String::as_str),
        Some("spam ann"),
        "Trash neither unlearns nor relearns"
    );
    assert_eq!(
        ledger.get(&hex(&mail(7004))),
        None,
        "a delivery into INBOX teaches nothing"
    );
    drop(dovecot);
}

/// Through a real Dovecot, whose MOVE links the file into the other folder and expunges the
/// original at once: mail copied into Junk, its original then filed in Archive and its copy
/// in Junk deleted (at once, or later), stays spam; mail copied out of Junk by a client
/// that moves by copying, the copy left there deleted later, is rescued.
#[test]
fn dovecot_filing_beside_a_copy_in_junk_is_no_rescue_and_copying_out_is() {
    let Some(dir) = dovecot_dir() else {
        return;
    };
    let Some(dovecot) = Dovecot::start(dir.path(), "") else {
        return;
    };
    dovecot.imap(&[
        "append 7301",
        "append 7302",
        "append 7304",
        "create Archive",
    ]);
    let db = dir.path().join("db");
    let root = dir.path().join("home/ann/Maildir");
    let config = write_config(dir.path(), "ann", &root);
    let (watcher, log) = watch_logged(&config, &db);

    dovecot.imap(&[
        "copy 7301 INBOX Junk",
        "copy 7302 INBOX Junk",
        "append 7303 Junk",
    ]);
    for _ in 0..3 {
        log.wait_for("as spam for ann");
    }
    dovecot.imap(&[
        "move 7301 INBOX Archive",
        "delete 7301 Junk",
        "expunge Junk",
        "move 7302 INBOX Archive",
    ]);
    dovecot.imap(&["delete 7302 Junk", "expunge Junk"]);
    dovecot.imap(&["copy 7303 Junk INBOX"]);
    log.wait_for("another stays in");
    dovecot.imap(&["delete 7303 Junk", "expunge Junk"]);
    log.wait_for("as ham for ann");
    dovecot.imap(&["move 7304 INBOX Junk"]);
    log.wait_for("as spam for ann");
    stop_watcher(watcher);
    drop(dovecot);

    let (counts, ledger) = learned(&db);
    let class = |n: usize| ledger.get(&hex(&mail(n))).map(String::as_str);
    assert_eq!(
        class(7301),
        Some("spam ann"),
        "filed as its copy in Junk went"
    );
    assert_eq!(
        class(7302),
        Some("spam ann"),
        "filed, then its copy in Junk went"
    );
    assert_eq!(class(7303), Some("ham ann"), "copied out of Junk");
    assert_eq!(class(7304), Some("spam ann"));
    assert_eq!(counts, [1, 3]);
}

/// Through a real Dovecot, whose COPY links the file under the same name: mail copied into
/// Junk and deleted there, its original then copied from INBOX into Archive, stays spam;
/// and so does mail whose original is filed by COPY and `\Deleted` (as a client without
/// MOVE files it) while its copy sits in Junk, Junk emptied after.
#[test]
fn dovecot_copying_the_original_of_mail_copied_into_junk_is_no_rescue() {
    let Some(dir) = dovecot_dir() else {
        return;
    };
    let Some(dovecot) = Dovecot::start(dir.path(), "") else {
        return;
    };
    dovecot.imap(&[
        "append 7401",
        "append 7402",
        "append 7403",
        "append 7404",
        "create Archive",
    ]);
    let db = dir.path().join("db");
    let root = dir.path().join("home/ann/Maildir");
    let config = write_config(dir.path(), "ann", &root);
    let (watcher, log) = watch_logged(&config, &db);

    dovecot.imap(&["copy 7401 INBOX Junk", "copy 7402 INBOX Junk"]);
    for _ in 0..2 {
        log.wait_for("as spam for ann");
    }
    // 7401's copy in Junk deleted; once that is handled, its original copied to Archive.
    dovecot.imap(&["delete 7401 Junk", "expunge Junk", "move 7403 INBOX Junk"]);
    log.wait_for("as spam for ann");
    dovecot.imap(&[
        "copy 7401 INBOX Archive",
        "copy 7402 INBOX Archive",
        "delete 7402 INBOX",
    ]);
    dovecot.imap(&["delete 7402 Junk", "expunge Junk"]);
    dovecot.imap(&["move 7404 INBOX Junk"]);
    log.wait_for("as spam for ann");
    stop_watcher(watcher);
    drop(dovecot);

    let (counts, ledger) = learned(&db);
    let class = |n: usize| ledger.get(&hex(&mail(n))).map(String::as_str);
    assert_eq!(
        class(7401),
        Some("spam ann"),
        "copied from INBOX after its copy in Junk went"
    );
    assert_eq!(
        class(7402),
        Some("spam ann"),
        "filed by COPY and \\Deleted beside its copy in Junk"
    );
    assert_eq!(counts, [0, 4]);
}

/// Through a real Dovecot: mail copied into Junk, its original then copied by a plain COPY
/// from INBOX into Archive (left unmarked in INBOX), and Junk emptied a moment later. The
/// files all bear the original's name, as a client moving out of Junk by copying would
/// leave them, but the message stays in INBOX: filed, not rescued, it stays spam.
#[test]
fn dovecot_copying_the_original_then_emptying_junk_is_no_rescue() {
    let Some(dir) = dovecot_dir() else {
        return;
    };
    let Some(dovecot) = Dovecot::start(dir.path(), "") else {
        return;
    };
    dovecot.imap(&["append 7501", "append 7502", "create Archive"]);
    let db = dir.path().join("db");
    let root = dir.path().join("home/ann/Maildir");
    let config = write_config(dir.path(), "ann", &root);
    let (watcher, log) = watch_logged(&config, &db);

    dovecot.imap(&["copy 7501 INBOX Junk"]);
    log.wait_for("as spam for ann");
    dovecot.imap(&["copy 7501 INBOX Archive"]);
    log.wait_for("another stays in");
    dovecot.imap(&["delete 7501 Junk", "expunge Junk"]);
    dovecot.imap(&["move 7502 INBOX Junk"]);
    log.wait_for("as spam for ann");
    stop_watcher(watcher);
    drop(dovecot);

    let (counts, ledger) = learned(&db);
    let class = |n: usize| ledger.get(&hex(&mail(n))).map(String::as_str);
    assert_eq!(
        class(7501),
        Some("spam ann"),
        "copied from INBOX, which keeps it, then Junk emptied"
    );
    assert_eq!(counts, [0, 2]);
}

/// Through a real Dovecot, which keeps a file's name as it copies and moves it: mail
/// copied out of Junk into INBOX, then moved on to Archive before the copy left in Junk is
/// deleted, is rescued all the same.
#[test]
fn dovecot_a_copy_out_of_junk_moved_on_is_still_a_rescue() {
    let Some(dir) = dovecot_dir() else {
        return;
    };
    let Some(dovecot) = Dovecot::start(dir.path(), "") else {
        return;
    };
    dovecot.imap(&["create Archive"]);
    let db = dir.path().join("db");
    let root = dir.path().join("home/ann/Maildir");
    let config = write_config(dir.path(), "ann", &root);
    let (watcher, log) = watch_logged(&config, &db);

    dovecot.imap(&["append 7601 Junk"]);
    log.wait_for("as spam for ann");
    dovecot.imap(&["copy 7601 Junk INBOX"]);
    log.wait_for("another stays in");
    dovecot.imap(&["move 7601 INBOX Archive"]);
    log.wait_for("moved on to");
    dovecot.imap(&["delete 7601 Junk", "expunge Junk"]);
    log.wait_for("as ham for ann");
    stop_watcher(watcher);
    drop(dovecot);

    let (counts, ledger) = learned(&db);
    let class = |n: usize| ledger.get(&hex(&mail(n))).map(String::as_str);
    assert_eq!(class(7601), Some("ham ann"), "moved on, then Junk emptied");
    assert_eq!(counts, [1, 0]);
}

fn walkdir_names(root: &Path) -> Vec<String> {
    let out = Command::new("find").arg(root).output().unwrap();
    util::text(&out.stdout).lines().map(String::from).collect()
}

/// The same through Dovecot's `fs` layout, where folders nest as directories inside one
/// another (`Junk/Phishing/` inside `Junk/`, beside Junk's own `cur/`) and INBOX is the
/// root: folders made while the watcher runs, a subfolder of Junk, and a rescue into a
/// nested folder.
#[test]
fn dovecot_fs_layout_nested_folders_teach_through_the_watcher() {
    let Some(dir) = dovecot_dir() else {
        return;
    };
    let Some(dovecot) = Dovecot::start_with_layout(dir.path(), "", ":LAYOUT=fs") else {
        return;
    };
    dovecot.imap(&["append 7201", "append 7202", "append 7203", "append 7204"]);
    let root = dir.path().join("home/ann/Maildir");

    let db = dir.path().join("db");
    let config = write_config(dir.path(), "ann", &root);
    let (watcher, log) = watch_logged(&config, &db);

    // Folders made while it runs (Dovecot makes even its automatic Junk at first use
    // here), one of them inside Junk's own directory.
    dovecot.imap(&["create Junk/Phishing", "create Work/2024"]);
    assert!(
        root.join("Junk/Phishing/cur").is_dir() && !root.join(".Junk").exists(),
        "Dovecot did not lay the folders out as directories: {:?}",
        walkdir_names(&root)
    );
    dovecot.imap(&[
        "move 7201 INBOX Junk",
        "move 7202 INBOX Junk/Phishing",
        "copy 7203 INBOX Junk/Phishing",
    ]);
    for _ in 0..3 {
        log.wait_for("as spam for ann");
    }
    // Rescued from the nested Junk into a nested folder of the user's own; INBOX into
    // Work/2024 (a filing, not a rescue) teaches nothing.
    dovecot.imap(&[
        "move 7202 Junk/Phishing Work/2024",
        "move 7204 INBOX Work/2024",
    ]);
    log.wait_for("as ham for ann");
    std::thread::sleep(Duration::from_millis(300));
    stop_watcher(watcher);
    drop(dovecot);

    let (counts, ledger) = learned(&db);
    let class = |n: usize| ledger.get(&hex(&mail(n))).map(String::as_str);
    assert_eq!(counts, [1, 2], "7201 and 7203 spam, 7202 spam then ham");
    assert_eq!(class(7201), Some("spam ann"));
    assert_eq!(class(7202), Some("ham ann"), "rescued from Junk/Phishing");
    assert_eq!(class(7203), Some("spam ann"), "copied into Junk/Phishing");
    assert_eq!(class(7204), None, "filed from INBOX: nothing to learn");
}

/// Where the hook's learn script keeps ann's database, below the Dovecot's temp dir.
const HOOK_DB: &str = "home/ann/spamnb-db";

/// contrib/dovecot installed in `t` as an administrator installs it, for a Dovecot that sees
/// `t` as `seen` (`t` itself, or its path inside a chroot): /etc/dovecot/sieve is `t/sieve`,
/// and `spamnb-learn.sh` runs a copy of the spamnb under test on ann's database
/// ([`HOOK_DB`]). Returns `conf`, a file of contrib/dovecot, with its paths moved.
pub(crate) fn install_hook(t: &Path, seen: &Path, conf: &str) -> String {
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/dovecot");
    let sieve_dir = t.join("sieve");
    std::fs::create_dir_all(&sieve_dir).unwrap();
    for script in ["report-spam.sieve", "report-ham.sieve"] {
        std::fs::copy(contrib.join(script), sieve_dir.join(script)).unwrap();
    }
    // Dovecot runs the script as the mail user (nobody): a copy of spamnb it can execute.
    std::fs::copy(env!("CARGO_BIN_EXE_spamnb"), t.join("spamnb")).unwrap();
    let learn = crate::hook::learn_script(&seen.join("spamnb"), &seen.join(HOOK_DB), "");
    let script = util::write(&sieve_dir, "spamnb-learn.sh", learn);
    let status = Command::new("chmod")
        .arg("755")
        .arg(&script)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_to_string(contrib.join(conf))
        .unwrap()
        .replace(
            "/etc/dovecot/sieve",
            &seen.join("sieve").display().to_string(),
        )
}

/// The hook that [`install_hook`] put in `t`, run by a Dovecot whose IMAP is at `port`;
/// `stop` stops that Dovecot. A MOVE or COPY into Junk and an APPEND to it teach spam,
/// Junk → Trash nothing, Junk → INBOX ham, and a learn that worked says nothing in Dovecot's
/// log. While `spamnb watch` holds the database, the hook fails at once and says why in
/// Dovecot's log; the MOVE itself neither waits for it nor fails.
pub(crate) fn hook_teaches(t: &Path, port: u16, stop: impl FnOnce()) {
    let db = t.join(HOOK_DB);
    imap(
        port,
        &[
            "append 7101",
            "append 7102",
            "append 7103",
            "append 7104 Junk",
        ],
    );
    imap(
        port,
        &[
            "move 7101 INBOX Junk",
            "copy 7102 INBOX Junk",
            "move 7102 Junk Trash",
            "move 7101 Junk INBOX",
        ],
    );
    assert!(
        db.exists(),
        "the Sieve scripts never ran spamnb; see {}",
        t.join("dovecot.log").display()
    );

    // `spamnb watch` holds the database, watching another Maildir.
    let other = t.join("other/Maildir");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(other.join(sub)).unwrap();
    }
    let watcher = Running(start_watcher(&mut watch_command(
        &write_config(&t.join("other"), "bob", &other),
        &db,
    )));
    let started = Instant::now();
    imap(port, &["move 7103 INBOX Junk", "copy 7103 Junk Trash"]);
    let took = started.elapsed();
    stop_watcher(watcher);
    assert!(
        took < Duration::from_secs(5),
        "a MOVE while spamnb watch held the database took {took:?} (Dovecot's limit is 10 s)"
    );
    stop();

    let (counts, ledger) = learned(&db);
    let log = std::fs::read_to_string(t.join("dovecot.log")).unwrap_or_default();
    assert_eq!(
        counts,
        [1, 2],
        "7101 spam then ham, 7102 and 7104 spam, nothing from Trash; dovecot.log:\n{log}"
    );
    let class = |n: usize| ledger.get(&hex(&mail(n))).map(String::as_str);
    assert_eq!(class(7101), Some("ham ann"), "rescued from Junk");
    assert_eq!(class(7102), Some("spam ann"), "copied into Junk");
    assert_eq!(class(7104), Some("spam ann"), "appended to Junk");
    assert_eq!(
        class(7103),
        None,
        "7103 went into Junk while spamnb watch held the database"
    );
    // Dovecot logs whatever a pipe program writes to stderr as an error, and adds its own
    // error lines about the program and the script when the program fails: all of them must
    // come from the one learn that failed.
    assert!(
        !log.contains("learned"),
        "a learn that worked wrote to Dovecot's log:\n{log}"
    );
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| ["Error:", "Fatal:", "Panic:"].iter().any(|e| l.contains(e)))
        .collect();
    assert_eq!(
        errors
            .iter()
            .filter(|l| l.contains("`spamnb watch`"))
            .count(),
        1,
        "the learn that failed did not say why in Dovecot's log, once:\n{log}"
    );
    let others: Vec<&&str> = errors
        .iter()
        .filter(|l| {
            !["`spamnb watch`", "spamnb-learn.sh", "Execution of script"]
                .iter()
                .any(|s| l.contains(s))
        })
        .collect();
    assert!(
        others.is_empty(),
        "errors besides the learn that failed in Dovecot's log:\n{log}"
    );
}

#[test]
fn dovecot_imapsieve_scripts_teach_through_spamnb_learn() {
    let Some(dir) = dovecot_dir() else {
        return;
    };
    let t = dir.path();
    let conf = install_hook(t, t, "90-spamnb-imapsieve.conf");
    // Here Dovecot compiles the scripts and saves them beside them, as the mail user.
    give_to_mail_user(&t.join("sieve"));
    let Some(dovecot) = Dovecot::start(t, &conf) else {
        return;
    };
    let port = dovecot.port;
    hook_teaches(t, port, move || drop(dovecot));
}

#[test]
fn learn_from_stdin_records_the_user_in_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let raw = util::message("cheap pills", "buy cheap pills now");
    let out = util::run_with_stdin(
        util::spamnb(&db).args(["learn", "--spam", "--user", "ann", "-"]),
        raw.as_bytes(),
    );
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    let (counts, ledger) = learned(&db);
    assert_eq!(counts, [0, 1]);
    assert_eq!(ledger.get(&hex(&raw)).map(String::as_str), Some("spam ann"));
}

#[test]
fn watch_without_a_maildir_says_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let out = util::spamnb(&dir.path().join("db"))
        .arg("watch")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        util::text(&out.stderr).contains("nothing to watch"),
        "{}",
        util::text(&out.stderr)
    );
    let out = util::spamnb(&dir.path().join("db"))
        .args(["watch", "/nonexistent/Maildir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        util::text(&out.stderr).contains("does not exist"),
        "{}",
        util::text(&out.stderr)
    );
}

/// A watcher that starts while another process holds the database (a `learn`, or the
/// watcher before it, still letting go) waits for it, as `learn` and the daemon wait;
/// told not to wait, it says what holds it. It used to fail at once, and the SIGKILL
/// test above, whose checks open the database between watchers, failed now and then.
#[test]
fn a_watcher_waits_for_a_database_another_process_holds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("Maildir");
    maildir(&root, &["", ".Junk"]);
    let name = "1700000000.M1.host:2,S";
    std::fs::write(root.join("cur").join(name), mail(1)).unwrap();
    let db = dir.path().join("db");
    let config = write_config(dir.path(), "ann", &root);
    // The first pass notes where mail is; the move after it is what there is to learn.
    let first = watch_command(&config, &db).arg("--once").output().unwrap();
    assert!(first.status.success(), "{}", util::text(&first.stderr));
    std::fs::rename(
        root.join("cur").join(name),
        root.join(".Junk/cur").join(name),
    )
    .unwrap();
    let held = SledStore::open(&db, &StoreOptions::default()).unwrap();

    let out = watch_command(&config, &db)
        .args(["--once", "--lock-wait", "0"])
        .output()
        .unwrap();
    let log = util::text(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("is in use by another process"), "{log}");

    let mut waiting = watch_command(&config, &db)
        .arg("--once")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "the watcher gave up instead of waiting"
    );
    drop(held);
    let out = waiting.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    let (counts, _) = learned(&db);
    assert_eq!(counts, [0, 1], "the message in Junk was learned as spam");
}
