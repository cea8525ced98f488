//! The milter against the real programs: `spamnb daemon` behind a private Postfix instance
//! fed by swaks, the miltertest Lua suite in `tests/milter/`, and hostile clients. The
//! database is trained on corpus mail first, so that verdicts are real ones.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use spamnb::milter::client::Client;
use spamnb::milter::codec::Response;

use super::daemon::{Daemon, Sections};
use super::util::{
    corpus, corpus_files, free_port, have, header_text, root_or_skip, spamnb, text, write,
};

/// A database trained on corpus mail, and held-out messages it classifies as spam and ham.
struct Trained {
    dir: tempfile::TempDir,
    db: PathBuf,
    spam: PathBuf,
    ham: PathBuf,
}

fn trained() -> Option<Trained> {
    let root = corpus()?;
    let dir = tempfile::tempdir().expect("tempdir");
    // Postfix's daemons (user postfix) work below this directory.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let db = super::daemon::trained_db(dir.path(), 300)?;
    let pick = |group: &str, want: &str| -> PathBuf {
        let files = corpus_files(&root, group, 30);
        let out = spamnb(&db)
            .args(["check", "--format", "tsv"])
            .args(&files)
            .output()
            .expect("check");
        let listing = text(&out.stdout);
        let line = listing
            .lines()
            .find(|l| l.split('\t').nth(1) == Some(want))
            .unwrap_or_else(|| panic!("no {want} among the first {group} files:\n{listing}"));
        PathBuf::from(line.split('\t').next().expect("path column"))
    };
    let spam = pick("spam-2", "spam");
    let ham = pick("easy-ham-2", "ham");
    Some(Trained { dir, db, spam, ham })
}

fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `spamnb daemon` serving the milter on a loopback port (fixed before the start, since
/// Postfix's configuration names it) and on a unix socket, with `milter` added to its
/// `[milter]` section.
fn start_daemon(dir: &Path, db: &Path, port: u16, milter: &str) -> Daemon {
    let section = format!(
        "listen = [\"unix:{}\", \"inet:127.0.0.1:{port}\"]\n{milter}",
        milter_socket(dir, port).display()
    );
    let sections = Sections {
        milter: &section,
        ..Sections::default()
    };
    Daemon::start(dir, db, &sections)
}

/// `start_daemon` on an empty database in a temp dir of its own, on a free port. The
/// caller keeps the dir alive as long as the daemon.
fn untrained_daemon(milter: &str) -> (tempfile::TempDir, u16, Daemon) {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let daemon = start_daemon(dir.path(), &dir.path().join("db"), port, milter);
    (dir, port, daemon)
}

/// The unix socket the milter also listens on.
fn milter_socket(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!("milter-{port}.sock"))
}

fn milter_addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// A private Postfix instance: its own config and queue directories, loopback only, an
/// smtpd on a free port with spamnb as its milter, delivering to a Maildir through virtual(8).
struct Postfix {
    conf: PathBuf,
    port: u16,
    maildir: PathBuf,
}

impl Postfix {
    /// `main_cf`: lines added to its main.cf after spamnb's.
    fn start(dir: &Path, milter_port: u16, main_cf: &str) -> Postfix {
        let conf = dir.join("postfix");
        let mail = dir.join("mail");
        for d in ["postfix", "mail", "queue", "data"] {
            std::fs::create_dir_all(dir.join(d)).expect("mkdir");
        }
        let id = |flag: &str| {
            text(
                &Command::new("id")
                    .args([flag, "postfix"])
                    .output()
                    .expect("id")
                    .stdout,
            )
            .trim()
            .to_string()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        // Postfix's own daemons write these as user postfix; virtual(8) delivers as uid.
        for d in [&mail, &dir.join("data")] {
            let _ = Command::new("chown")
                .arg(format!("{uid}:{gid}"))
                .arg(d)
                .status();
        }
        let port = free_port();
        let d = dir.display();
        // The milter settings are contrib/postfix/main.cf's, as an admin would paste them.
        let contrib = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/postfix/main.cf"),
        )
        .expect("contrib/postfix/main.cf")
        .replace(
            "inet:127.0.0.1:11332",
            &format!("inet:127.0.0.1:{milter_port}"),
        );
        assert!(
            contrib.contains("milter_default_action = accept"),
            "{contrib}"
        );
        std::fs::write(
            conf.join("main.cf"),
            format!(
                "compatibility_level = 3.6
queue_directory = {d}/queue
data_directory = {d}/data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = loopback-only
inet_protocols = ipv4
myhostname = mx.spamnb.test
mydomain = spamnb.test
mydestination =
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
local_recipient_maps =
relayhost =
default_transport = error:no outside mail from tests
virtual_mailbox_domains = test.example
virtual_mailbox_base = {d}/mail
virtual_mailbox_maps = inline:{{ user@test.example=user/ }}
virtual_uid_maps = static:{uid}
virtual_gid_maps = static:{gid}
maillog_file = {d}/maillog
maillog_file_prefixes = {d}
{contrib}
{main_cf}"
            ),
        )
        .expect("main.cf");
        std::fs::write(
            conf.join("master.cf"),
            format!(
                "127.0.0.1:{port} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"
            ),
        )
        .expect("master.cf");
        let postfix = Postfix {
            conf,
            port,
            maildir: mail.join("user"),
        };
        let out = postfix.command("postfix", &["start"]);
        assert!(
            out.status.success(),
            "postfix start: {}{}{}",
            text(&out.stdout),
            text(&out.stderr),
            postfix.maillog()
        );
        wait_for("postfix smtpd", Duration::from_secs(30), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        postfix
    }

    fn command(&self, program: &str, args: &[&str]) -> std::process::Output {
        Command::new(program)
            .arg("-c")
            .arg(&self.conf)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// swaks sends `message` (a stored file, mbox line dropped) to user@test.example.
    fn send(&self, message: &[u8], dir: &Path) -> std::process::Output {
        self.send_with(message, dir, &[])
    }

    /// As `send`, with more of swaks's options (`--helo NAME`).
    fn send_with(&self, message: &[u8], dir: &Path, options: &[&str]) -> std::process::Output {
        Command::new("swaks")
            .args(["--server", &format!("127.0.0.1:{}", self.port)])
            .args(swaks_message(message, &dir.join("swaks-message.eml")))
            .args(["--timeout", "60"])
            .args(options)
            .output()
            .expect("swaks")
    }

    fn delivered(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.maildir.join("new"))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        files
    }

    fn wait_delivered(&self, n: usize) -> Vec<PathBuf> {
        let started = Instant::now();
        loop {
            let files = self.delivered();
            if files.len() >= n {
                return files;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} of {n} messages delivered; maillog:\n{}",
                files.len(),
                self.maillog()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn maillog(&self) -> String {
        std::fs::read_to_string(self.conf.parent().expect("dir").join("maillog"))
            .unwrap_or_default()
    }

    /// Queue names of the messages in the queue (`hold`, `deferred`, …).
    fn queued(&self) -> Vec<String> {
        let out = self.command("postqueue", &["-j"]);
        text(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["queue_name"].as_str().map(str::to_string))
            .collect()
    }
}

impl Drop for Postfix {
    fn drop(&mut self) {
        let _ = self.command("postfix", &["stop"]);
    }
}

fn header_values(message: &str, name: &str) -> Vec<String> {
    let header = message.split("\n\n").next().unwrap_or_default();
    header
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

/// What tag mode leaves on a ham that came with a forged X-Spam-Status and on a spam, as
/// the MTA delivered or queued them.
fn assert_tagged(ham: &str, spam: &str, log: &str) {
    assert_eq!(
        header_values(ham, "X-Spam-Flag"),
        ["NO"],
        "ham:\n{ham}\n{log}"
    );
    assert!(
        !ham.contains("forged"),
        "the forged X-Spam-Status is gone:\n{ham}"
    );
    assert_eq!(header_values(spam, "X-Spam-Flag"), ["YES"], "spam:\n{spam}");
    assert!(
        header_values(spam, "X-Spam-Status")[0].starts_with("Yes, score="),
        "{spam}"
    );
    // Spam says why, folded as the MTA keeps it: the score's making, then a feature a line.
    assert!(
        header_values(spam, "X-Spam-Report")[0].starts_with("score "),
        "{spam}"
    );
    let head = spam.split("\n\n").next().unwrap_or_default();
    assert!(head.contains("\n\t* "), "{spam}");
    assert!(header_values(ham, "X-Spam-Report").is_empty(), "{ham}");
}

/// `spamnb check` on a file: its decision and its score as X-Spam-Status writes it.
fn check_verdict(db: &Path, file: &Path) -> (String, String) {
    let out = spamnb(db)
        .args(["check", "--format", "tsv"])
        .arg(file)
        .output()
        .expect("check");
    assert!(
        out.status.success(),
        "check {}: {}",
        file.display(),
        text(&out.stderr)
    );
    let line = text(&out.stdout);
    let columns: Vec<&str> = line.trim_end().split('\t').collect();
    let score: f64 = columns
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    (columns[1].to_string(), format!("score={score:.1} "))
}

/// swaks's arguments that send `message` (a stored file, its mbox line dropped, written to
/// `file`) from the tests' sender to user@test.example; the caller says over what.
fn swaks_message(message: &[u8], file: &Path) -> Vec<String> {
    std::fs::write(file, spamnb::message::without_envelope_line(message)).expect("write message");
    [
        "--from",
        "sender@example.org",
        "--to",
        "user@test.example",
        "--helo",
        "client.example",
        "--data",
    ]
    .map(String::from)
    .into_iter()
    .chain([format!("@{}", file.display())])
    .collect()
}

/// Postfix with spamnb as its milter: ham arrives with `X-Spam-Flag: NO` and forged
/// headers gone, spam arrives tagged, reject mode gives the client a 550, quarantine mode
/// holds the message, and with spamnb stopped mail is still delivered.
#[test]
fn postfix_with_spamnb_milter() {
    if !have("postfix") || !have("swaks") {
        return;
    }
    // Starting a Postfix instance (master, chown of its directories) takes root.
    if !root_or_skip("a private Postfix instance") {
        return;
    }
    let Some(t) = trained() else { return };
    let dir = t.dir.path();
    let milter_port = free_port();
    let postfix = Postfix::start(dir, milter_port, "");
    let spam = std::fs::read(&t.spam).expect("spam");
    let ham = std::fs::read(&t.ham).expect("ham");
    let mut forged = b"X-Spam-Flag: YES\nX-Spam-Status: Yes, score=99.0 forged\n".to_vec();
    forged.extend_from_slice(spamnb::message::without_envelope_line(&ham));

    // Tag mode.
    let mut daemon = start_daemon(dir, &t.db, milter_port, "action = \"tag\"");
    let out = postfix.send(&forged, dir);
    assert!(out.status.success(), "swaks ham: {}", text(&out.stdout));
    let out = postfix.send(&spam, dir);
    assert!(out.status.success(), "swaks spam: {}", text(&out.stdout));
    let files = postfix.wait_delivered(2);
    let delivered_ham = std::fs::read_to_string(&files[0]).expect("read");
    let delivered_spam = std::fs::read_to_string(&files[1]).expect("read");
    assert_tagged(&delivered_ham, &delivered_spam, &daemon.log());
    assert!(
        header_values(&delivered_spam, "X-Spam-Level")[0].starts_with('*'),
        "{delivered_spam}"
    );
    daemon.stop();
    // The delivered file, checked on its own, gets the verdict the milter gave, to the
    // score: the milter scored the message with the Received line Postfix writes.
    for (file, delivered, want) in [
        (&files[0], &delivered_ham, "ham"),
        (&files[1], &delivered_spam, "spam"),
    ] {
        let (decision, score) = check_verdict(&t.db, file);
        assert_eq!(decision, want, "{}", file.display());
        let status = header_values(delivered, "X-Spam-Status").join(" ");
        assert!(
            status.contains(&score),
            "milter said {status:?}, check says {score:?}"
        );
    }

    // Reject mode: the SMTP client hears 550 5.7.1 and nothing is delivered.
    let mut daemon = start_daemon(
        dir,
        &t.db,
        milter_port,
        "action = \"reject\"\nreject_text = \"Spam is not welcome here\"",
    );
    let out = postfix.send(&spam, dir);
    let said = text(&out.stdout);
    assert!(
        !out.status.success(),
        "swaks must fail on a reject:\n{said}"
    );
    assert!(
        said.contains("550 5.7.1 Spam is not welcome here"),
        "{said}"
    );
    let out = postfix.send(&ham, dir);
    assert!(
        out.status.success(),
        "ham passes in reject mode: {}",
        text(&out.stdout)
    );
    postfix.wait_delivered(3);
    daemon.stop();

    // Quarantine mode: the spam is accepted and sits in Postfix's hold queue.
    let mut daemon = start_daemon(dir, &t.db, milter_port, "action = \"quarantine\"");
    let out = postfix.send(&spam, dir);
    assert!(
        out.status.success(),
        "swaks spam in quarantine mode: {}",
        text(&out.stdout)
    );
    wait_for(
        "the spam in the hold queue",
        Duration::from_secs(20),
        || postfix.queued().contains(&"hold".to_string()),
    );
    daemon.stop();

    // spamnb stopped: milter_default_action = accept delivers the mail untagged.
    let out = postfix.send(&ham, dir);
    assert!(
        out.status.success(),
        "swaks with spamnb stopped: {}",
        text(&out.stdout)
    );
    let files = postfix.wait_delivered(4);
    assert_eq!(files.len(), 4, "the held spam was not delivered");
    let last = std::fs::read_to_string(&files[3]).expect("read");
    assert!(header_values(&last, "X-Spam-Flag").is_empty(), "{last}");

    // Autolearning and a subject tag, and a user who then says the delivered spam is ham.
    // The milter scored a copy with Postfix's Received line and CRLF line endings; the
    // delivered file has Return-Path, Delivered-To, spamnb's headers, a tagged Subject
    // and LF. To the ledger they are one message, so the correction moves what
    // autolearning taught, not adds beside it.
    let section = format!("listen = [\"inet:127.0.0.1:{milter_port}\"]\naction = \"tag\"",);
    let sections = Sections {
        milter: &section,
        model: "autolearn = true\nautolearn_spam = 4.5\nautolearn_ham = -2.5\nsubject_tag = \"[SPAM _SCORE_]\"",
        ..Sections::default()
    };
    let mut daemon = Daemon::start(dir, &t.db, &sections);
    let messages = |daemon: &Daemon| -> [u64; 2] {
        let out = daemon.cli().args(["stats", "--format", "json"]).output();
        let v: serde_json::Value =
            serde_json::from_slice(&out.expect("stats").stdout).expect("json");
        [&v["messages"]["ham"], &v["messages"]["spam"]].map(|n| n.as_u64().expect("count"))
    };
    let trained = messages(&daemon);
    let out = postfix.send(&spam, dir);
    assert!(out.status.success(), "swaks spam: {}", text(&out.stdout));
    let files = postfix.wait_delivered(5);
    let wait = Instant::now();
    while messages(&daemon) == trained {
        assert!(
            wait.elapsed() < Duration::from_secs(20),
            "nothing autolearned:\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(messages(&daemon), [trained[0], trained[1] + 1]);
    daemon.stop();
    let delivered = std::fs::read_to_string(&files[4]).expect("read");
    assert!(
        delivered.starts_with("Return-Path:") && delivered.contains("\nDelivered-To:"),
        "{delivered}"
    );
    let sent = header_text(&spam, "Subject");
    let subject = header_text(delivered.as_bytes(), "Subject");
    assert_eq!(subject.len(), 1, "{delivered}");
    assert!(
        subject[0].starts_with("[SPAM ") && subject[0].ends_with(&format!("] {}", sent[0])),
        "{subject:?} from {sent:?}"
    );
    assert_eq!(
        header_text(delivered.as_bytes(), "X-Spam-Prev-Subject"),
        sent
    );
    let out = spamnb(&t.db)
        .args(["learn", "--ham"])
        .arg(&files[4])
        .output()
        .expect("learn");
    let said = text(&out.stderr) + &text(&out.stdout);
    assert!(said.contains("relearned 1 as ham"), "{said}");
    let out = spamnb(&t.db)
        .args(["stats", "--format", "json"])
        .output()
        .expect("stats");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        [&v["messages"]["ham"], &v["messages"]["spam"]].map(|n| n.as_u64().expect("count")),
        [trained[0] + 1, trained[1]]
    );

    // A subject longer than a header line may be (998 octets), tagged: Postfix writes
    // what the milter sends, folded, every line within the limit, and each field unfolds
    // to what it should say, the sender's double spaces and tabs kept.
    let long: Vec<String> = (0..120).map(|i| format!("offer{i}  now\t")).collect();
    let long = long.concat().trim_end().to_string();
    let out = spamnb(&t.db)
        .args(["learn", "--spam"])
        .arg(&files[4])
        .output()
        .expect("learn");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut daemon = Daemon::start(dir, &t.db, &sections);
    let out = postfix.send(&with_subject(&spam, &long), dir);
    assert!(out.status.success(), "swaks spam: {}", text(&out.stdout));
    let files = postfix.wait_delivered(6);
    daemon.stop();
    let delivered = std::fs::read(&files[5]).expect("read");
    let head = spamnb::message::raw_head(&delivered);
    for line in head.split(|&b| b == b'\n') {
        assert!(line.len() <= 998, "a line of {} octets", line.len());
    }
    let raw_value = |name: &str| {
        let values = spamnb::message::raw_header_values(head, name);
        assert_eq!(values.len(), 1, "{name}");
        String::from_utf8(values[0].to_vec())
            .expect("UTF-8")
            .replace(['\r', '\n'], "")
    };
    let subject = raw_value("Subject");
    assert!(
        subject.starts_with("[SPAM ") && subject.ends_with(&format!("] {long}")),
        "{subject:?}"
    );
    assert_eq!(raw_value("X-Spam-Prev-Subject"), long);
}

/// `message` with its Subject field (folded or not) replaced by one saying `subject`.
fn with_subject(message: &[u8], subject: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(spamnb::message::without_envelope_line(message));
    let (head, body) = text.split_once("\n\n").expect("a header block");
    let mut out = format!("Subject: {subject}\n");
    let mut in_subject = false;
    for line in head.lines() {
        let continued = line.starts_with([' ', '\t']);
        in_subject = if continued {
            in_subject
        } else {
            line.to_ascii_lowercase().starts_with("subject:")
        };
        if !in_subject {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push('\n');
    out.push_str(body);
    out.into_bytes()
}

/// Debian's Sendmail with a sendmail.cf built by m4 from a minimal .mc and the lines of
/// `contrib/sendmail/spamnb.mc`, run as `sendmail -bs` (SMTP on stdin and stdout, milters
/// included) by swaks, queueing mail in a private queue and delivering none.
struct Sendmail {
    queue: PathBuf,
    /// A script that runs `sendmail -bs` with that configuration.
    bs: PathBuf,
}

impl Sendmail {
    /// Where Sendmail is: unpacked under `SPAMNB_SENDMAIL` as `.ci/run` does (Sendmail
    /// and Postfix cannot both be installed), else installed; none if neither.
    fn root() -> Option<PathBuf> {
        let root =
            std::env::var_os("SPAMNB_SENDMAIL").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        let unpacked = root.join("usr/libexec/sendmail/sendmail").exists()
            && root.join("usr/share/sendmail/cf/m4/cf.m4").exists();
        super::util::available(
            unpacked,
            "CI must unpack Sendmail (SPAMNB_SENDMAIL, see .ci/run)",
            "Sendmail is not unpacked (set SPAMNB_SENDMAIL)",
        )
        .then_some(root)
    }

    fn configure(root: &Path, dir: &Path, milter_port: u16) -> Sendmail {
        let queue = dir.join("sendmail-queue");
        std::fs::create_dir_all(&queue).expect("mkdir");
        let d = dir.display();
        // Nothing may reach DNS or /etc/mail: no canonifying, host lookups in a file,
        // senders' domains taken on trust, no aliases.
        std::fs::write(dir.join("service.switch"), "hosts files\naliases files\n")
            .expect("service.switch");
        std::fs::write(dir.join("hosts"), "127.0.0.1 localhost\n").expect("hosts");
        let contrib = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/sendmail/spamnb.mc"),
        )
        .expect("contrib/sendmail/spamnb.mc");
        let milter = contrib.replace(
            "S=inet:11332@127.0.0.1",
            &format!("S=inet:{milter_port}@127.0.0.1"),
        );
        assert_ne!(milter, contrib, "the milter address in spamnb.mc");
        let mc = format!(
            "OSTYPE(`linux')dnl
define(`confDOMAIN_NAME', `mx.spamnb.test')dnl
define(`confDONT_PROBE_INTERFACES', `True')dnl
define(`confDELIVERY_MODE', `queueonly')dnl
define(`QUEUE_DIR', `{d}/sendmail-queue')dnl
define(`STATUS_FILE', `{d}/sendmail.st')dnl
define(`confDEAD_LETTER_DROP', `{d}/dead.letter')dnl
define(`confSERVICE_SWITCH_FILE', `{d}/service.switch')dnl
define(`confHOSTS_FILE', `{d}/hosts')dnl
define(`confBIND_OPTS', `-DNSRCH -DEFNAMES')dnl
define(`ALIAS_FILE', `')dnl
FEATURE(`nocanonify')dnl
FEATURE(`accept_unresolvable_domains')dnl
MAILER(`smtp')dnl
{milter}"
        );
        let mc_file = dir.join("sendmail.mc");
        std::fs::write(&mc_file, mc).expect("sendmail.mc");
        let cf_dir = root.join("usr/share/sendmail/cf");
        let out = Command::new("m4")
            .arg(format!("-D_CF_DIR_={}/", cf_dir.display()))
            .arg(cf_dir.join("m4/cf.m4"))
            .arg(&mc_file)
            .output()
            .expect("m4");
        assert!(out.status.success(), "m4: {}", text(&out.stderr));
        let cf = dir.join("sendmail.cf");
        std::fs::write(&cf, &out.stdout).expect("sendmail.cf");
        assert!(
            text(&out.stdout).contains("InputMailFilters=spamnb"),
            "spamnb.mc adds the milter to sendmail.cf"
        );
        // Sendmail sleeps a minute at start-up when the host name has no dot and no
        // dotted alias: the script gives it one, in a UTS namespace of its own.
        let bs = write_script(
            dir,
            "sendmail-bs",
            &format!(
                "#!/bin/sh\nhostname mx.spamnb.test && exec '{}' -C '{}' -bs\n",
                root.join("usr/libexec/sendmail/sendmail").display(),
                cf.display()
            ),
        );
        Sendmail { queue, bs }
    }

    /// swaks sends `message` (mbox line dropped) through `sendmail -bs`: the transcript,
    /// whether swaks succeeded, and the queue ID Sendmail gave the message, if it took it.
    fn send(&self, message: &[u8], dir: &Path) -> (String, bool, Option<String>) {
        let out = Command::new("timeout")
            .arg("60")
            .arg("swaks")
            .arg("--pipe")
            .arg(format!("unshare --uts '{}'", self.bs.display()))
            .args(swaks_message(message, &dir.join("sendmail-message.eml")))
            .args(["--timeout", "20"])
            .output()
            .expect("swaks");
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        let id = said
            .lines()
            .find(|l| l.ends_with("Message accepted for delivery"))
            .and_then(|l| l.split_whitespace().nth(3))
            .map(str::to_string);
        (said, out.status.success(), id)
    }

    /// The header of a queued message, from its queue file: `qf` for the queue, `hf` for
    /// quarantine. None if there is no such file.
    fn queued(&self, kind: &str, id: &str) -> Option<(String, String)> {
        // Not UTF-8: Sendmail writes macros into it as bytes above 0x80.
        let qf = text(&std::fs::read(self.queue.join(format!("{kind}{id}"))).ok()?);
        Some((queued_header(&qf), qf))
    }
}

/// A directory for a private Postfix instance, which its daemons (user postfix) can work
/// below, where Postfix, swaks and root are here to run one.
fn postfix_dir() -> Option<tempfile::TempDir> {
    if !have("postfix") || !have("swaks") || !root_or_skip("a private Postfix instance") {
        return None;
    }
    let t = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        t.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    Some(t)
}

/// contrib/postfix/header_checks drops an incoming Authentication-Results field that
/// claims the server's own authserv-id before spamnb's milter reads the message, so a
/// sender cannot write its way onto `welcomelist_auth`; a field of another server is left
/// alone, and spamnb, which does not trust that one, leaves the message to the words.
#[test]
fn postfix_drops_forged_authentication_results_before_the_milter_reads_them() {
    let Some(t) = postfix_dir() else { return };
    let dir = t.path();
    // The test instance's myhostname is its authserv-id, as OpenDKIM's default.
    let checks = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/postfix/header_checks"),
    )
    .expect("contrib/postfix/header_checks")
    .replace("mx\\.example\\.org", "mx\\.spamnb\\.test");
    let checks_file = write(dir, "header_checks", checks);
    let rules = write(
        dir,
        "local.cf",
        "authres_trusted_authserv mx.spamnb.test\nwelcomelist_auth *@bank.example\n",
    );
    let milter_port = free_port();
    let postfix = Postfix::start(
        dir,
        milter_port,
        &format!("header_checks = regexp:{}", checks_file.display()),
    );
    let daemon = tagging_milter(dir, milter_port, &rules);

    let forged = b"Authentication-Results: mx.spamnb.test; dkim=pass header.d=bank.example\n\
        Authentication-Results: mx.other.example; dkim=pass header.d=bank.example\n\
        From: Bank <alerts@bank.example>\nTo: user@test.example\nSubject: verify your account\n\n\
        Click here.\n";
    let out = postfix.send(forged, dir);
    assert!(out.status.success(), "swaks: {}", text(&out.stdout));
    let files = postfix.wait_delivered(1);
    let delivered = std::fs::read_to_string(&files[0]).expect("read");
    let results = header_values(&delivered, "Authentication-Results");
    assert_eq!(results.len(), 1, "{delivered}");
    assert!(results[0].contains("mx.other.example"), "{delivered}");
    let status = header_values(&delivered, "X-Spam-Status").join(" ");
    assert!(
        !status.is_empty(),
        "spamnb saw the message: {delivered}\n{}",
        daemon.log()
    );
    assert!(!status.contains("WELCOMELIST"), "{status}");
}

/// A spamnb milter in tag mode on `port`, with the rule file `rules`.
fn tagging_milter(dir: &Path, port: u16, rules: &Path) -> Daemon {
    let section = format!("listen = [\"inet:127.0.0.1:{port}\"]\naction = \"tag\"");
    let sections = Sections {
        milter: &section,
        rules: rules.to_str().expect("UTF-8 path"),
        ..Default::default()
    };
    Daemon::start(dir, &dir.join("db"), &sections)
}

/// Postfix does not show a milter the Received: line it writes; the milter adds it from
/// what the protocol tells of the connection, so that `welcomelist_from_rcvd` reads the
/// relay Postfix saw (here 127.0.0.1, which swaks sends from) and not one a sender wrote
/// into the message. Before it did, the forged trace got the bank's mail welcomelisted.
/// The bank's sender greets as `[192.0.2.1]`, the bank's address: Postfix writes
/// `from [192.0.2.1] (localhost [127.0.0.1])`, and the relay is still 127.0.0.1. Then,
/// with 127.0.0.1 named in `trusted_networks` (as a front relay of one's own would be),
/// the relay read is the one before it: the line the message carries.
#[test]
fn welcomelist_from_rcvd_reads_the_relay_postfix_saw() {
    let Some(t) = postfix_dir() else { return };
    let dir = t.path();
    let lists = "welcomelist_from_rcvd *@partner.example [127.0.0.1]\n\
                 welcomelist_from_rcvd *@bank.example bank.example\n\
                 welcomelist_from_rcvd *@bank.example [192.0.2.1]\n";
    let rules = write(dir, "local.cf", lists);
    let milter_port = free_port();
    let postfix = Postfix::start(dir, milter_port, "");
    let daemon = tagging_milter(dir, milter_port, &rules);
    let trace = |address: &str| {
        format!(
            "Received: from x (mail.bank.example [{address}])\n\
             \tby mx.bank.example with ESMTP; Tue, 1 Dec 2026 10:00:00 +0000\n"
        )
    };
    let send = |round: &str| {
        // The last names the address swaks sends from: as Postfix shows no line of its
        // own, the first one a milter sees is the sender's, whatever address it names.
        for (from, subject, address) in [
            ("a@partner.example", "partner", "192.0.2.1"),
            ("alerts@bank.example", "bank", "192.0.2.1"),
            ("alerts@bank.example", "bank-own", "127.0.0.1"),
        ] {
            let trace = trace(address);
            let message = format!(
                "{trace}From: {from}\nTo: user@test.example\nSubject: {subject} {round}\n\nhello\n"
            );
            let out = postfix.send_with(message.as_bytes(), dir, &["--helo", "[192.0.2.1]"]);
            assert!(out.status.success(), "swaks: {}", text(&out.stdout));
        }
    };
    send("untrusted");
    // Scored again where it is delivered (`filter`, spamd), from Postfix's own line.
    for file in postfix.wait_delivered(3) {
        let out = spamnb(&dir.join("check-db"))
            .env("SPAMNB_RULES", &rules)
            .args(["check", "--explain"])
            .arg(&file)
            .output()
            .expect("spamnb check");
        let delivered = std::fs::read_to_string(&file).expect("read");
        let partner = header_values(&delivered, "Subject")
            .join(" ")
            .contains("partner");
        assert_eq!(
            text(&out.stdout).contains("USER_IN_WELCOMELIST"),
            partner,
            "{delivered}\n{}",
            text(&out.stdout)
        );
    }
    // SIGHUP reloads the rules.
    write(
        dir,
        "local.cf",
        format!("{lists}trusted_networks 127.0.0.1\n"),
    );
    let loads = daemon.log().matches("compile_ms").count();
    daemon.signal("HUP");
    let started = std::time::Instant::now();
    while daemon.log().matches("compile_ms").count() == loads {
        assert!(
            started.elapsed().as_secs() < 10,
            "no reload:\n{}",
            daemon.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    send("trusted");
    let files = postfix.wait_delivered(6);
    for file in files {
        let delivered = std::fs::read_to_string(&file).expect("read");
        let subject = header_values(&delivered, "Subject").join(" ");
        let status = header_values(&delivered, "X-Spam-Status").join(" ");
        assert!(!status.is_empty(), "{delivered}\n{}", daemon.log());
        let welcome = match subject.split_once(' ') {
            Some(("partner", "untrusted"))
            | Some(("bank", "trusted"))
            | Some(("bank-own", "trusted")) => true,
            Some(_) => false,
            None => panic!("{delivered}"),
        };
        assert_eq!(
            status.contains("USER_IN_WELCOMELIST"),
            welcome,
            "{delivered}"
        );
    }
}

/// The header fields of a Sendmail queue file (`H?flags?Name: value` lines and their
/// continuations), as they would be delivered.
fn queued_header(qf: &str) -> String {
    let mut header = String::new();
    let mut in_field = false;
    for line in qf.lines() {
        if let Some(field) = line.strip_prefix('H') {
            // The flags say which mailers get the field, not what it holds.
            let field = match field.strip_prefix('?') {
                Some(rest) => rest.split_once('?').map_or(rest, |(_, f)| f),
                None => field,
            };
            header.push_str(field);
            header.push('\n');
            in_field = true;
        } else if in_field && line.starts_with([' ', '\t']) {
            header.push_str(line);
            header.push('\n');
        } else {
            in_field = false;
        }
    }
    header
}

fn write_script(dir: &Path, name: &str, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = super::util::write(dir, name, script);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// contrib/sendmail/spamnb.mc in a real Sendmail (Debian's 8.17): spam is queued tagged,
/// ham with `X-Spam-Flag: NO` and forged headers gone, Sendmail's queue ID reaches spamnb's
/// log, reject mode gives the client a 550, quarantine mode leaves
/// the spam in Sendmail's quarantine, and with spamnb stopped mail is queued untagged.
#[test]
fn contrib_sendmail_mc_tags_through_the_milter() {
    if !have("m4") || !have("swaks") || !have("unshare") {
        return;
    }
    let Some(root) = Sendmail::root() else { return };
    // A namespace of its own for the host name takes root.
    if !root_or_skip("Sendmail with a host name of its own") {
        return;
    }
    let Some(t) = trained() else { return };
    let dir = t.dir.path();
    let milter_port = free_port();
    let sendmail = Sendmail::configure(&root, dir, milter_port);
    let spam = std::fs::read(&t.spam).expect("spam");
    let ham = std::fs::read(&t.ham).expect("ham");
    let mut forged = b"X-Spam-Flag: YES\nX-Spam-Status: Yes, score=99.0 forged\n".to_vec();
    forged.extend_from_slice(spamnb::message::without_envelope_line(&ham));
    let accepted = |message: &[u8], what: &str| -> (String, String) {
        let (said, ok, id) = sendmail.send(message, dir);
        let id = id
            .filter(|_| ok)
            .unwrap_or_else(|| panic!("Sendmail takes the {what}:\n{said}"));
        let (header, qf) = sendmail
            .queued("qf", &id)
            .unwrap_or_else(|| panic!("the {what} is queued as qf{id}:\n{said}"));
        assert!(
            !qf.lines().any(|l| l.starts_with('q')),
            "not quarantined:\n{qf}"
        );
        (id, header)
    };

    // Tag mode.
    let mut daemon = start_daemon(dir, &t.db, milter_port, "action = \"tag\"");
    let (ham_id, queued_ham) = accepted(&forged, "ham");
    let (spam_id, queued_spam) = accepted(&spam, "spam");
    assert_tagged(&queued_ham, &queued_spam, &daemon.log());
    daemon.stop();
    let log = daemon.log();
    for id in [&ham_id, &spam_id] {
        assert!(
            log.contains(&format!(" queue_id={id} ")),
            "Sendmail passes its queue ID {id} (macro i) to spamnb, which logs it as a field:\n{log}"
        );
    }

    // Reject mode: the SMTP client hears 550 5.7.1 and nothing is queued.
    let mut daemon = start_daemon(
        dir,
        &t.db,
        milter_port,
        "action = \"reject\"\nreject_text = \"Spam is not welcome here\"",
    );
    let (said, ok, id) = sendmail.send(&spam, dir);
    assert!(!ok && id.is_none(), "swaks must fail on a reject:\n{said}");
    assert!(
        said.contains("550 5.7.1 Spam is not welcome here"),
        "{said}"
    );
    daemon.stop();

    // Quarantine mode: the spam is taken and sits in Sendmail's quarantine (hf file).
    let mut daemon = start_daemon(dir, &t.db, milter_port, "action = \"quarantine\"");
    let (said, ok, id) = sendmail.send(&spam, dir);
    let id = id
        .filter(|_| ok)
        .unwrap_or_else(|| panic!("Sendmail takes the spam in quarantine mode:\n{said}"));
    let (_, hf) = sendmail
        .queued("hf", &id)
        .unwrap_or_else(|| panic!("the spam is quarantined as hf{id}:\n{said}"));
    assert!(
        hf.lines().any(|l| l.starts_with("qspamnb: spam, score")),
        "the quarantine reason:\n{hf}"
    );
    daemon.stop();

    // spamnb stopped: F= (no T or R flag) lets Sendmail queue the mail untagged.
    let (_, queued) = accepted(&spam, "spam with spamnb stopped");
    assert!(header_values(&queued, "X-Spam-Flag").is_empty(), "{queued}");
}

/// The miltertest Lua suite, once per action mode.
#[test]
fn miltertest_suite() {
    if !have("miltertest") {
        return;
    }
    let Some(t) = trained() else { return };
    let dir = t.dir.path();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/milter/suite.lua");
    for mode in ["tag", "quarantine", "reject"] {
        let port = free_port();
        let mut daemon = start_daemon(
            dir,
            &t.db,
            port,
            &format!("action = \"{mode}\"\nreject_text = \"Spam is not welcome here\""),
        );
        // One mode goes over the unix socket, the others over TCP.
        let via = if mode == "tag" {
            format!("unix:{}", milter_socket(dir, port).display())
        } else {
            format!("inet:{port}@127.0.0.1")
        };
        let out = Command::new("miltertest")
            .arg("-s")
            .arg(&suite)
            .arg("-D")
            .arg(format!("socket={via}"))
            .arg("-D")
            .arg(format!("mode={mode}"))
            .arg("-D")
            .arg(format!("spam={}", t.spam.display()))
            .arg("-D")
            .arg(format!("ham={}", t.ham.display()))
            .arg("-D")
            .arg("reject_text=Spam is not welcome here")
            .output()
            .expect("miltertest");
        daemon.stop();
        assert!(
            out.status.success(),
            "miltertest ({mode}) failed ({}):\n{}{}\ndaemon:\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr),
            daemon.log()
        );
        assert!(
            text(&out.stdout).contains("suite passed"),
            "{}",
            text(&out.stdout)
        );
    }
}

/// Hostile clients: garbage, a 4 GB length prefix, a client that stops mid-packet. Each is
/// dropped without taking the daemon down, and a well-behaved client is served throughout.
#[test]
fn hostile_clients_do_not_stop_the_milter() {
    let (_dir, port, mut daemon) = untrained_daemon("read_timeout_secs = 2");
    let message = b"From: a@example.org\nSubject: hello\n\nhi there\n";
    let served = || {
        let mut good =
            Client::connect(&milter_addr(port), Duration::from_secs(10)).expect("connect");
        let responses = good.message(message).expect("a good client is served");
        assert!(
            responses
                .iter()
                .any(|r| matches!(r, Response::AddHeader { name, .. } if name == "X-Spam-Flag")),
            "{responses:?}"
        );
        good.quit().expect("quit");
    };
    served();
    let send = |bytes: &[u8]| {
        let mut bad = TcpStream::connect(milter_addr(port)).expect("connect");
        bad.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        std::io::Write::write_all(&mut bad, bytes).expect("write");
        bad
    };
    // The milter answers nothing to these and closes the connection.
    let closed = |mut bad: TcpStream| {
        let started = Instant::now();
        let n = std::io::Read::read(&mut bad, &mut [0u8; 64]).unwrap_or(0);
        (n, started.elapsed())
    };
    // Half a frame, then silence: closed after read_timeout_secs, meanwhile others go on.
    let stalled = send(&[0, 0, 0, 13, b'O', 0, 0]);
    let stalled_at = Instant::now();
    let (n, took) = closed(send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert_eq!(n, 0, "garbage is answered by closing");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (n, took) = closed(send(&[0, 0, 0, 1, b'Z']));
    assert_eq!(n, 0, "a well-framed command that is no milter command");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (n, took) = closed(send(&[0xff, 0xff, 0xff, 0xff, b'B']));
    assert_eq!(n, 0, "a 4 GB frame is refused");
    assert!(
        took < Duration::from_secs(1),
        "refused from the length alone, not after reading: {took:?}"
    );
    served();
    let (n, _) = closed(stalled);
    let took = stalled_at.elapsed();
    assert_eq!(n, 0);
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(8),
        "{took:?}"
    );
    served();
    daemon.stop();
    let log = daemon.log();
    // "GET " reads as a 1.2 GB length: the 4 GB prefix is told apart by its number.
    assert!(
        log.contains("frame of 4294967295 bytes is above the limit"),
        "the 4 GB prefix is logged:\n{log}"
    );
    assert!(
        log.contains("(0x5a) is not one spamnb knows"),
        "the unknown command is logged:\n{log}"
    );
}

/// Scoring that takes longer than `scan_timeout_ms` passes the message on untouched (no
/// headers, "continue"), and the next message on the connection is served as usual.
#[test]
fn slow_scoring_fails_open() {
    let (_dir, port, mut daemon) =
        untrained_daemon("scan_timeout_ms = 1\nmax_body_bytes = 4000000");
    // Megabytes of distinct words: far more than a millisecond of tokenizing.
    let mut big = b"From: a@example.org\nSubject: long\n\n".to_vec();
    for i in 0..300_000 {
        big.extend_from_slice(format!("word{i} ").as_bytes());
        if i % 12 == 0 {
            big.push(b'\n');
        }
    }
    let mut client = Client::connect(&milter_addr(port), Duration::from_secs(30)).expect("connect");
    let responses = client.message(&big).expect("answered");
    assert_eq!(responses, [Response::Continue], "passed on untouched");
    client.quit().expect("quit");
    daemon.stop();
    let log = daemon.log();
    assert!(
        log.contains("scoring took over 1 ms (milter.scan_timeout_ms)"),
        "the reason is logged:\n{log}"
    );
}

/// SIGTERM while a message is half sent: the daemon stops accepting, lets the message
/// finish and answers it, then exits.
#[test]
fn sigterm_lets_a_message_in_flight_finish() {
    use spamnb::milter::codec::Command as C;
    let (_dir, port, mut daemon) = untrained_daemon("");
    let mut client = Client::connect(&milter_addr(port), Duration::from_secs(30)).expect("connect");
    client
        .send(&C::Mail(vec!["<a@example.org>".into()]))
        .expect("mail");
    client
        .send(&C::Header {
            name: b"Subject".to_vec(),
            value: b" draining".to_vec(),
        })
        .expect("header");
    daemon.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        daemon.child.try_wait().expect("wait").is_none(),
        "the daemon waits for the message"
    );
    client
        .send(&C::Body(b"still here\r\n".to_vec()))
        .expect("body");
    assert_eq!(client.read().expect("body answered"), Response::Continue);
    let answered = client.end_of_message().expect("end of message answered");
    assert!(
        answered
            .iter()
            .any(|r| matches!(r, Response::AddHeader { .. })),
        "{answered:?}"
    );
    let _ = client.quit();
    daemon.wait_exit(Duration::from_secs(10));
}

/// Past `max_sessions`, a new MTA connection waits (in the listen backlog) until a
/// session ends, here by the read timeout of two idle ones; it is then served.
#[test]
fn session_limit_queues_connections() {
    let (_dir, port, mut daemon) = untrained_daemon("max_sessions = 2\nread_timeout_secs = 2");
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(milter_addr(port)).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let mut client =
        Client::connect(&milter_addr(port), Duration::from_secs(20)).expect("served in the end");
    let waited = started.elapsed();
    assert!(
        waited > Duration::from_millis(1500),
        "the third session waited for a free one: {waited:?}"
    );
    let responses = client.message(b"Subject: hi\n\nhello\n").expect("answered");
    assert_eq!(responses.last(), Some(&Response::Continue));
    drop(idle);
    daemon.stop();
}

/// Anyone who may connect to the milter's port can hold its sessions: one that never
/// negotiates is closed after the daemon's read_timeout, not the milter's, which is as
/// long as the MTA's own, so that an idle squatter cannot keep the MTA out.
#[test]
fn a_connection_that_never_negotiates_gives_its_session_up_soon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let milter =
        format!("listen = [\"inet:127.0.0.1:{port}\"]\nmax_sessions = 1\nread_timeout_secs = 300");
    let mut daemon = Daemon::start(
        dir.path(),
        &dir.path().join("db"),
        &Sections {
            daemon: "read_timeout = 1",
            milter: &milter,
            ..Sections::default()
        },
    );
    let idle = TcpStream::connect(milter_addr(port)).expect("connect");
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let mut client = Client::connect(&milter_addr(port), Duration::from_secs(20))
        .expect("served once the silent one is closed");
    let responses = client.message(b"Subject: hi\n\nhello\n").expect("answered");
    assert_eq!(responses.last(), Some(&Response::Continue));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "waited {:?}",
        started.elapsed()
    );
    drop(idle);
    daemon.stop();
}

/// SIGHUP: connections opened after a reload get the new `[milter]` settings; one opened
/// before keeps the settings it started with.
#[test]
fn sighup_changes_the_action_for_new_connections() {
    let (dir, port, mut daemon) = untrained_daemon("action = \"tag\"");
    let message = b"Subject: anything\n\nsome words\n";
    let mut before = Client::connect(&milter_addr(port), Duration::from_secs(10)).expect("connect");
    assert!(matches!(
        before.message(message).expect("tagged").last(),
        Some(Response::Continue)
    ));
    // Whatever the verdict of an untrained database, every score is above this.
    let config = dir.path().join("spamnb.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace("action = \"tag\"", "reject_score = -1000000.0"),
    )
    .expect("rewrite");
    daemon.signal("HUP");
    daemon.wait_log("reloaded", Duration::from_secs(10));
    let mut after = Client::connect(&milter_addr(port), Duration::from_secs(10)).expect("connect");
    let responses = after.message(message).expect("answered");
    assert!(
        matches!(responses.last(), Some(Response::ReplyCode(r)) if r.starts_with("550 5.7.1 ")),
        "{responses:?}"
    );
    let responses = before.message(message).expect("answered");
    assert!(
        matches!(responses.last(), Some(Response::Continue)),
        "{responses:?}"
    );
    daemon.stop();
}

/// Past `max_body_bytes` the milter tells the MTA to skip the rest of the body (SMFIR_SKIP)
/// and still answers end of message with its headers.
#[test]
fn long_bodies_are_skipped_past_the_limit() {
    use spamnb::milter::codec::Command as C;
    let (_dir, port, mut daemon) = untrained_daemon("max_body_bytes = 1000");
    let mut client = Client::connect(&milter_addr(port), Duration::from_secs(10)).expect("connect");
    client
        .send(&C::Mail(vec!["<a@example.org>".into()]))
        .expect("mail");
    let chunk = b"0123456789 abcdefghij\r\n".repeat(50).to_vec();
    client.send(&C::Body(chunk)).expect("body");
    assert_eq!(
        client.read().expect("answer"),
        Response::Skip,
        "1150 bytes, past a 1000-byte limit"
    );
    let answered = client.end_of_message().expect("end of message answered");
    assert!(
        answered
            .iter()
            .any(|r| matches!(r, Response::AddHeader { name, .. } if name == "X-Spam-Flag")),
        "{answered:?}"
    );
    let _ = client.quit();
    daemon.stop();
}

/// A milter listed after another in `smtpd_milters` reads the message as the first left
/// it: what the README's "Authentication results" relies on when spamnb is listed after
/// OpenDKIM and OpenDMARC. Here the first milter is a spamnb that tags the subject of
/// GTUBE, and the second a spamnb whose rule sees that tag.
#[test]
fn postfix_shows_a_later_milter_what_an_earlier_one_changed() {
    let Some(t) = postfix_dir() else { return };
    let dir = t.path();
    let (first, second) = (free_port(), free_port());
    let postfix = Postfix::start(
        dir,
        first,
        &format!("smtpd_milters = inet:127.0.0.1:{first}, inet:127.0.0.1:{second}"),
    );
    let start = |name: &str, port: u16, model: &str, rules: &Path| {
        let home = dir.join(name);
        std::fs::create_dir_all(&home).expect("mkdir");
        let milter = format!("listen = [\"inet:127.0.0.1:{port}\"]\naction = \"tag\"");
        let sections = Sections {
            milter: &milter,
            model,
            rules: rules.to_str().expect("UTF-8 path"),
            ..Default::default()
        };
        Daemon::start(&home, &home.join("db"), &sections)
    };
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let _tagging = start("first", first, "subject_tag = \"[SPAM]\"", &ours);
    let sees_tag = write(
        dir,
        "second.cf",
        "header   SEES_TAG  Subject:raw =~ /^\\[SPAM\\] hello$/\n\
         describe SEES_TAG  The subject as the first milter tagged it\n",
    );
    let _second = start("second", second, "", &sees_tag);
    let gtube = b"From: x@example.org\nTo: user@test.example\nSubject: hello\n\n\
        XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X\n";
    let out = postfix.send(gtube, dir);
    assert!(out.status.success(), "swaks: {}", text(&out.stdout));
    let delivered = std::fs::read_to_string(&postfix.wait_delivered(1)[0]).expect("read");
    assert_eq!(header_values(&delivered, "Subject"), ["[SPAM] hello"]);
    let status = header_values(&delivered, "X-Spam-Status").join(" ");
    assert!(status.contains("tests=SEES_TAG"), "{delivered}");
}
