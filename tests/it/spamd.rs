//! The spamd protocol against the real `spamc`, with the output and exit codes
//! SpamAssassin's spamd gives, and against hostile clients.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::daemon::{Daemon, Sections, metric, trained_db, unseen};
use crate::util::{self, text};

/// `score/threshold` as spamc -c prints it.
fn score_line(s: &str) -> bool {
    let Some((score, threshold)) = s.trim_end().split_once('/') else {
        return false;
    };
    score.parse::<f64>().is_ok() && threshold.parse::<f64>().is_ok() && s.ends_with('\n')
}

#[test]
fn spamc_gets_what_spamd_would_give() {
    if !util::have("spamc") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some((d, spam, ham)) = telling_apart(dir.path()) else {
        return;
    };
    let (spam, ham) = (&spam, &ham);

    // -c: score/threshold, exit 1 for spam, 0 for ham.
    let out = d.spamc(&["-c"], spam);
    assert!(score_line(&text(&out.stdout)), "{:?}", text(&out.stdout));
    assert_eq!(out.status.code(), Some(1));
    let out = d.spamc(&["-c"], ham);
    assert!(score_line(&text(&out.stdout)), "{:?}", text(&out.stdout));
    assert_eq!(out.status.code(), Some(0));

    // -y: the rules hit, comma-separated, exit 0.
    let out = d.spamc(&["-y"], spam);
    assert_eq!(out.status.code(), Some(0));
    assert!(!text(&out.stdout).contains(' '), "{:?}", text(&out.stdout));

    // -R: score/threshold, then the report; exit 0 (spamd's spamc does not flag -R).
    let out = d.spamc(&["-R"], spam);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    let (first, rest) = report.split_once('\n').expect("two parts");
    assert!(score_line(&format!("{first}\n")), "{report}");
    assert!(rest.contains("Content analysis details:"), "{report}");
    assert!(rest.contains("learned evidence for spam"), "{report}");

    // -r (REPORT_IFSPAM): the report for spam, nothing for ham, exit 0 either way.
    let out = d.spamc(&["-r"], spam);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("Content analysis details:"),
        "{}",
        text(&out.stdout)
    );
    let out = d.spamc(&["-r"], ham);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "");

    // -E: the tagged message on stdout, exit 1 for spam and 0 for ham.
    let out = d.spamc(&["-E"], spam);
    assert_eq!(out.status.code(), Some(1));
    let tagged = text(&out.stdout);
    assert!(tagged.contains("\nX-Spam-Flag: YES\n"), "{tagged}");
    assert!(tagged.contains("\nX-Spam-Status: Yes, score="), "{tagged}");
    assert!(tagged.contains("\nX-Spam-Report: score "), "{tagged}");
    // spamc -z (built with zlib) sends it deflated: the same message comes back tagged.
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(spam).unwrap();
    let deflated = z.finish().unwrap();
    let mut wire = format!(
        "PROCESS SPAMC/1.5\r\nCompress: zlib\r\nContent-length: {}\r\n\r\n",
        deflated.len()
    )
    .into_bytes();
    wire.extend_from_slice(&deflated);
    let reply = ask(&d.spamd, &wire);
    let (head, message) = reply.split_once("\r\n\r\n").expect("a reply");
    assert!(head.starts_with("SPAMD/1.1 0 EX_OK\r\n"), "{reply}");
    assert_eq!(message, tagged);
    let out = d.spamc(&["-E"], ham);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("\nX-Spam-Flag: NO\n"));
    assert!(!text(&out.stdout).contains("X-Spam-Report"));
    // Without -E, spamc exits 0 either way, and the body is untouched.
    let out = d.spamc(&[], spam);
    assert_eq!(out.status.code(), Some(0));
    let body_at = |m: &[u8]| m.windows(2).position(|w| w == b"\n\n").expect("body") + 2;
    assert_eq!(&out.stdout[body_at(&out.stdout)..], &spam[body_at(spam)..]);

    // --headers: spamd sends only the new header block; spamc puts the body back.
    let out = d.spamc(&["--headers"], ham);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(&out.stdout[body_at(&out.stdout)..], &ham[body_at(ham)..]);
    assert!(text(&out.stdout).contains("\nX-Spam-Flag: NO\n"));
    assert_eq!(
        out.stdout,
        d.spamc(&[], ham).stdout,
        "--headers and PROCESS give the same mail"
    );

    // -K: spamd's PONG, as spamc prints it.
    let out = d.spamc(&["-K"], b"");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("SPAMD/1.5 0"),
        "{:?}",
        text(&out.stdout)
    );

    // -L over TCP without allow_tell: refused as spamd refuses it (spamc exits 74).
    let out = d.spamc(&["-L", "spam"], ham);
    assert_eq!(out.status.code(), Some(74), "{}", text(&out.stdout));
    // On the local socket: learned, already learned, relearned, forgotten, already forgotten.
    let learn = |class: &str| {
        let out = d.spamc_unix(&d.spamd_unix, &["-L", class], ham);
        assert_eq!(out.status.code(), Some(0), "-L {class}");
        text(&out.stdout)
    };
    assert_eq!(learn("spam"), "Message successfully un/learned\n");
    assert_eq!(learn("spam"), "Message was already un/learned\n");
    assert_eq!(learn("ham"), "Message successfully un/learned\n");
    assert_eq!(learn("forget"), "Message successfully un/learned\n");
    assert_eq!(learn("forget"), "Message was already un/learned\n");

    // With a subject tag, spam's Subject starts with it and the subject as sent is kept in
    // X-Spam-Prev-Subject, through PROCESS and HEADERS alike; ham is left be.
    d.reload(&Sections {
        model: "subject_tag = \"[SPAM _SCORE_]\"",
        ..Default::default()
    });
    let out = d.spamc(&["-E"], spam);
    assert_eq!(out.status.code(), Some(1));
    let sent = util::header_text(spam, "Subject");
    let tagged = util::header_text(&out.stdout, "Subject");
    assert_eq!(tagged.len(), 1, "{}", text(&out.stdout));
    assert!(
        tagged[0].starts_with("[SPAM ") && tagged[0].ends_with(&format!("] {}", sent[0])),
        "{tagged:?} from {sent:?}"
    );
    assert_eq!(util::header_text(&out.stdout, "X-Spam-Prev-Subject"), sent);
    assert_eq!(out.stdout, d.spamc(&["--headers"], spam).stdout);
    let out = d.spamc(&[], ham);
    assert_eq!(
        util::header_text(&out.stdout, "Subject"),
        util::header_text(ham, "Subject")
    );
    assert!(util::header_text(&out.stdout, "X-Spam-Prev-Subject").is_empty());

    // User is accepted and logged.
    let out = d.spamc(&["-c", "-u", "carol"], ham);
    assert_eq!(out.status.code(), Some(0));
    d.wait_log("user=\"carol\"", Duration::from_secs(5));

    // With the daemon gone, spamc fails open: the message passes unchanged, exit 0.
    let addr = d.spamd.clone();
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    drop(d);
    let out = util::run_with_stdin(
        std::process::Command::new("spamc").args(["-d", host, "-p", port]),
        ham,
    );
    assert_eq!(out.stdout, *ham);
}

/// Reads whatever the daemon sends until it closes, within `timeout`.
fn read_reply(s: &mut TcpStream, timeout: Duration) -> String {
    s.set_read_timeout(Some(timeout)).expect("timeout");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    text(&out)
}

fn ask(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    read_reply(&mut s, Duration::from_secs(10))
}

#[test]
fn hostile_clients_do_not_hurt_good_ones() {
    if !util::have("spamc") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = trained_db(dir.path(), 60) else {
        return;
    };
    let d = Daemon::start(
        dir.path(),
        &db,
        &Sections {
            // Long enough that a thousand connects (slow on a loaded machine) all overlap.
            daemon: "max_connections = 1100\nread_timeout = 10",
            spamd: "max_message_bytes = 1048576",
            ..Default::default()
        },
    );
    let (_, hams) = unseen(1);
    let ham = &hams[0];
    util::raise_open_files_limit(2400);
    let good = |d: &Daemon| {
        let started = Instant::now();
        let out = d.spamc(&["-c"], ham);
        assert!(
            score_line(&text(&out.stdout)) && text(&out.stdout) != "0/0\n",
            "{:?}",
            text(&out.stdout)
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a good client waited {:?}",
            started.elapsed()
        );
    };
    good(&d);
    let rss_before = d.rss_kb();

    // Garbage, a request line that is not one, and invalid lengths: refused, spamd's way.
    assert!(
        ask(&d.spamd, b"\x00\xff\x13garbage garbage\r\n\r\n")
            .starts_with("SPAMD/1.0 76 Bad header line")
    );
    assert!(ask(&d.spamd, &[0x55; 100_000]).starts_with("SPAMD/1.0 76 "));
    for bad in ["abc", "-1", "1e9", "", "12 34"] {
        let reply = ask(
            &d.spamd,
            format!("CHECK SPAMC/1.5\r\nContent-length: {bad}\r\n\r\nxx").as_bytes(),
        );
        assert!(
            reply.starts_with("SPAMD/1.0 76 Bad header line: (Content-Length"),
            "{bad:?}: {reply:?}"
        );
    }
    // The log says why, without the reply's parentheses.
    d.wait_log(
        "refused a request: Content-Length contains non-numeric bytes",
        Duration::from_secs(5),
    );
    // The model (words of users' mail) is never handed to a TCP client, nor pruned by one.
    for method in ["EXPORT", "STATS"] {
        let reply = ask(&d.spamd, format!("{method} SPAMC/1.5\r\n\r\n").as_bytes());
        assert!(reply.starts_with("SPAMD/1.0 77 "), "{method}: {reply:?}");
    }
    let prune = r#"{"min_messages":1000,"dry_run":false}"#;
    let reply = ask(
        &d.spamd,
        format!(
            "PRUNE SPAMC/1.5\r\nContent-length: {}\r\n\r\n{prune}",
            prune.len()
        )
        .as_bytes(),
    );
    assert!(reply.starts_with("SPAMD/1.0 77 "), "PRUNE: {reply:?}");
    // Nor told which messages were learned, and for whom.
    let digests = format!("[{{\"as-sent\": {:?}}}]", [0u8; 16]);
    let reply = ask(
        &d.spamd,
        format!(
            "LEDGER SPAMC/1.5\r\nContent-length: {}\r\n\r\n{digests}",
            digests.len()
        )
        .as_bytes(),
    );
    assert!(reply.starts_with("SPAMD/1.0 77 "), "LEDGER: {reply:?}");
    // A 4 GB length is refused before a byte of the body is read or allocated.
    let mut s = TcpStream::connect(&d.spamd).expect("connect");
    s.write_all(b"PROCESS SPAMC/1.5\r\nContent-length: 4294967296\r\n\r\n")
        .expect("send");
    let reply = read_reply(&mut s, Duration::from_secs(5));
    assert!(reply.starts_with("SPAMD/1.0 65 "), "{reply:?}");
    // No length and no end: cut off at max_message_bytes.
    let mut s = TcpStream::connect(&d.spamd).expect("connect");
    s.write_all(b"CHECK SPAMC/1.5\r\n\r\n").expect("send");
    let chunk = vec![b'a'; 64 * 1024];
    for _ in 0..40 {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    assert!(read_reply(&mut s, Duration::from_secs(5)).starts_with("SPAMD/1.0 65 "));

    // A client that stops mid-request is timed out (read_timeout is 10 s here).
    let mut stalled = TcpStream::connect(&d.spamd).expect("connect");
    write!(
        stalled,
        "CHECK SPAMC/1.5\r\nContent-length: {}\r\n\r\n",
        ham.len()
    )
    .expect("head");
    stalled.write_all(&ham[..ham.len() / 3]).expect("part");
    let stalled_at = Instant::now();
    good(&d);

    // A thousand idle connections: good clients are still served, memory stays bounded.
    let idle: Vec<TcpStream> = (0..1000)
        .map(|_| TcpStream::connect(&d.spamd).expect("idle connect"))
        .collect();
    let idle_since = Instant::now();
    // All accepted (on a loaded machine some connects wait out a SYN retransmission).
    let open = || {
        metric(
            &d.http_get("/metrics"),
            "spamnb_sessions_open{protocol=\"spamd\"}",
        )
    };
    while open() < 1000 && idle_since.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!((1000..1100).contains(&open()), "{} sessions open", open());
    good(&d);
    // Past max_connections (1100), new connections are closed at once.
    let mut over: Vec<TcpStream> = (0..150)
        .map(|_| TcpStream::connect(&d.spamd).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut closed = 0;
    for s in &mut over {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        if let Ok(0) = s.read(&mut [0u8; 16]) {
            closed += 1;
        }
    }
    let rejected = metric(
        &d.http_get("/metrics"),
        "spamnb_connections_rejected_total{protocol=\"spamd\"}",
    );
    // How many exceed the limit depends on how many idle ones are still open; some must.
    assert!(
        closed > 0 && closed as u64 <= rejected,
        "of 150 connections past the limit, {closed} were closed, {rejected} counted"
    );
    drop(over);
    let rss = d.rss_kb();
    assert!(
        rss < rss_before + 64 * 1024,
        "RSS grew from {rss_before} kB to {rss} kB"
    );

    // The stalled client got spamd's timeout reply; idle ones are closed by the timeout too.
    let reply = read_reply(&mut stalled, Duration::from_secs(15));
    assert!(reply.starts_with("SPAMD/1.0 79 Timeout"), "{reply:?}");
    assert!(stalled_at.elapsed() < Duration::from_secs(25));
    std::thread::sleep(Duration::from_secs(11).saturating_sub(idle_since.elapsed()));
    let mut still_open = 0;
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let mut buf = [0u8; 256];
        if let Err(e) = s.read(&mut buf)
            && e.kind() == std::io::ErrorKind::WouldBlock
        {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "idle connections outlived read_timeout");
    good(&d);
    assert!(d.http_get("/health").starts_with("HTTP/1.1 200 OK"));

    // Idle connections to the HTTP endpoint, however many and however often opened again,
    // never keep a liveness check from its answer: a new connection closes the oldest one
    // still waiting for its request.
    let mut idle_http: Vec<TcpStream> = (0..16)
        .map(|_| TcpStream::connect(&d.http).expect("connect http"))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    assert!(d.http_get("/health").starts_with("HTTP/1.1 200 OK"));
    idle_http.extend((0..40).map(|_| TcpStream::connect(&d.http).expect("connect http")));
    assert!(d.http_get("/health").starts_with("HTTP/1.1 200 OK"));
    drop(idle_http);
}

/// procmail pipes a message to `spamc` with the mbox `From ` line it delivers with; the copy
/// it delivers to the Maildir has none. They are one message in the ledger: the delivered
/// copy learned as the other class moves the lesson (named with the line, it was learned a
/// second time, and both counted).
#[test]
fn a_message_told_with_its_envelope_line_is_the_message_delivered() {
    if !util::have("spamc") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = Daemon::start(dir.path(), &dir.path().join("db"), &Sections::default());
    let delivered = util::message("invoice 7", "the invoice for May is attached");
    let piped = format!("From billing@example.org  Mon Dec  7 16:27:57 2026\n{delivered}");
    let out = d.spamc_unix(&d.spamd_unix, &["-L", "spam"], piped.as_bytes());
    assert_eq!(
        text(&out.stdout),
        "Message successfully un/learned\n",
        "{}",
        text(&out.stderr)
    );
    let file = util::write(dir.path(), "delivered.eml", &delivered);
    let out = d
        .cli()
        .args(["learn", "--ham"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stats = d
        .cli()
        .args(["stats", "--format", "json"])
        .output()
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stats json");
    assert_eq!(
        (&stats["messages"], &stats["ledger_entries"]),
        (
            &serde_json::json!({"spam": 0, "ham": 1}),
            &serde_json::json!(1)
        ),
        "learn said: {}{stats}",
        text(&out.stderr)
    );
}

/// What `spamc -L` was told is learned is on disk: the daemon killed right after the
/// answers (no flush of its own, no drain) leaves a database that holds every message.
#[test]
fn a_tell_answered_survives_the_daemon_killed() {
    if !util::have("spamc") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut d = Daemon::start(dir.path(), &dir.path().join("db"), &Sections::default());
    let told = 5;
    for i in 0..told {
        let message = util::message(&format!("offer {i}"), &format!("cheap pills, batch {i}"));
        let out = d.spamc_unix(&d.spamd_unix, &["-L", "spam"], message.as_bytes());
        assert_eq!(
            text(&out.stdout),
            "Message successfully un/learned\n",
            "{}",
            text(&out.stderr)
        );
    }
    d.signal("KILL");
    d.wait_exit(Duration::from_secs(10));
    let stats = d
        .cli()
        .args(["stats", "--format", "json"])
        .output()
        .unwrap();
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stats json");
    assert_eq!(
        stats["messages"],
        serde_json::json!({"spam": told, "ham": 0}),
        "{stats}"
    );
}

#[test]
fn logs_escape_control_characters_from_mail() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Any verdict does: an untrained database answers "unsure", and logs the same way.
    for format in ["text", "json"] {
        let sub = dir.path().join(format);
        std::fs::create_dir_all(&sub).expect("mkdir");
        let db = sub.join("db");
        let d = Daemon::start(
            &sub,
            &db,
            &Sections {
                daemon: &format!("log_format = \"{format}\""),
                ..Default::default()
            },
        );
        // A sender's attempt at terminal escapes and a forged log line.
        let msg = "From: a@example.org\r\nMessage-ID: <evil\x1b[31m\x07\x08@example.org>\r\nSubject: hi\r\n\r\nbody\r\n";
        let head = format!(
            "CHECK SPAMC/1.5\r\nUser: dave\r\nContent-length: {}\r\n\r\n",
            msg.len()
        );
        assert!(ask(&d.spamd, format!("{head}{msg}").as_bytes()).starts_with("SPAMD/1.1 0 EX_OK"));
        d.wait_log("evil", Duration::from_secs(5));
        let log = d.log();
        assert!(
            !log.chars().any(|c| c.is_control() && c != '\n'),
            "{format}: raw control characters in\n{log}"
        );
        assert!(
            log.contains("u{1b}[31m"),
            "{format}: the escape is shown escaped:\n{log}"
        );
        if format == "json" {
            for line in log.lines() {
                let v: serde_json::Value =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
                assert!(v.get("level").is_some(), "{line}");
            }
        }
    }
}

/// The procmail and Sieve recipes of contrib/, run by the real procmail and Pigeonhole's
/// sieve-test on mail tagged by the daemon through spamc: spam lands in Junk, ham in the inbox.
#[test]
fn contrib_recipes_file_spam() {
    if !util::have("spamc") || !util::have("procmail") || !util::have("sieve-test") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // sieve-test refuses root, so it runs as nobody and must read these files.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let Some((d, spam, ham)) = telling_apart(dir.path()) else {
        return;
    };
    let (spam, ham) = (&spam, &ham);
    let contrib = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib");

    // procmail: contrib/procmailrc with spamc pointed at this daemon, and its Maildir here:
    // ham lands in the Maildir the recipe names as its default, not in /var/mail.
    let maildir = dir.path().join("Maildir");
    for sub in ["cur", "new", "tmp", ".Junk/cur", ".Junk/new", ".Junk/tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).expect("maildir");
    }
    let (host, port) = d.spamd.rsplit_once(':').expect("host:port");
    let recipe = std::fs::read_to_string(contrib.join("procmailrc")).expect("procmailrc");
    assert!(recipe.contains("| spamc\n"), "{recipe}");
    // procmail -m takes HOME from the password file, so the Maildir is named here.
    let home_maildir = "MAILDIR=$HOME/Maildir/\n";
    assert!(recipe.contains(home_maildir), "{recipe}");
    let rc = recipe
        .replace("| spamc\n", &format!("| spamc -d {host} -p {port}\n"))
        .replace(home_maildir, &format!("MAILDIR={}/\n", maildir.display()));
    let rc_path = util::write(dir.path(), "procmailrc", rc);
    for m in [spam, ham] {
        let out = util::run_with_stdin(
            std::process::Command::new("procmail")
                .arg("-m")
                .arg(&rc_path),
            m,
        );
        assert!(out.status.success(), "procmail: {}", text(&out.stderr));
    }
    let delivered = |sub: &str| -> Vec<String> {
        std::fs::read_dir(maildir.join(sub))
            .expect("maildir new")
            .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("read"))
            .collect()
    };
    let junk = delivered(".Junk/new");
    let inbox = delivered("new");
    assert_eq!(
        (junk.len(), inbox.len()),
        (1, 1),
        "junk {junk:?}\ninbox {inbox:?}"
    );
    assert!(junk[0].contains("\nX-Spam-Flag: YES\n"));
    assert!(inbox[0].contains("\nX-Spam-Flag: NO\n"));

    // Sieve: contrib/spam.sieve on the same tagged mail.
    let sieve = util::write(
        dir.path(),
        "spam.sieve",
        std::fs::read(contrib.join("spam.sieve")).expect("sieve"),
    );
    // The recipe reads the flag alone: tagged spam lands in Junk however sure, where the
    // user sees it and a move out of it teaches.
    let with_level = |mail: &str, stars: usize| -> String {
        let level = mail
            .lines()
            .find(|l| l.starts_with("X-Spam-Level:"))
            .expect("tagged mail has X-Spam-Level");
        mail.replacen(level, &format!("X-Spam-Level: {}", "*".repeat(stars)), 1)
    };
    let (sure, middling) = (with_level(&junk[0], 50), with_level(&junk[0], 5));
    for (mail, folder) in [(&middling, "Junk"), (&sure, "Junk"), (&inbox[0], "INBOX")] {
        let eml = util::write(dir.path(), "tagged.eml", mail);
        for p in [&sieve, &eml] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        let mut cmd = if current_uid() == 0 {
            let mut c = std::process::Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sieve-test",
            ]);
            c
        } else {
            std::process::Command::new("sieve-test")
        };
        let out = cmd
            .arg(&sieve)
            .arg(&eml)
            .env("HOME", dir.path())
            .output()
            .expect("sieve-test");
        let said = text(&out.stdout);
        assert!(
            said.contains(&format!("store message in folder: {folder}")),
            "{folder}: {said}\n{}",
            text(&out.stderr)
        );
    }
}

/// contrib/maildroprc run by the real maildrop on mail it tags through spamc: spam lands
/// in the Junk folder, ham in the default Maildir.
#[test]
fn contrib_maildroprc_files_spam() {
    if !util::have("spamc") || !util::have("maildrop") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some((d, spam, ham)) = telling_apart(dir.path()) else {
        return;
    };
    let home = dir.path().join("home");
    let maildir = home.join("Maildir");
    for sub in ["cur", "new", "tmp", ".Junk/cur", ".Junk/new", ".Junk/tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).expect("maildir");
    }
    let contrib = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib");
    let recipe = std::fs::read_to_string(contrib.join("maildroprc")).expect("maildroprc");
    assert!(recipe.contains("xfilter \"/usr/bin/spamc\""), "{recipe}");
    let (host, port) = d.spamd.rsplit_once(':').expect("host:port");
    // Pointed at this daemon; the recipe makes the Maildir the default delivery. maildrop
    // takes HOME from the password file, so the test's home is set in the filter itself.
    let rc = format!(
        "HOME=\"{}\"\n{}",
        home.display(),
        recipe.replace(
            "xfilter \"/usr/bin/spamc\"",
            &format!("xfilter \"/usr/bin/spamc -d {host} -p {port}\"")
        )
    );
    let rc_path = util::write(dir.path(), "mailfilter", rc);
    use std::os::unix::fs::PermissionsExt;
    // maildrop refuses a filter file others may write.
    std::fs::set_permissions(&rc_path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    for m in [&spam, &ham] {
        let out = util::run_with_stdin(std::process::Command::new("maildrop").arg(&rc_path), m);
        assert!(
            out.status.success(),
            "maildrop: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let delivered = |sub: &str| -> Vec<String> {
        std::fs::read_dir(maildir.join(sub))
            .expect("maildir new")
            .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("read"))
            .collect()
    };
    let (junk, inbox) = (delivered(".Junk/new"), delivered("new"));
    assert_eq!(
        (junk.len(), inbox.len()),
        (1, 1),
        "junk {junk:?}\ninbox {inbox:?}"
    );
    assert!(junk[0].contains("\nX-Spam-Flag: YES\n"), "{}", junk[0]);
    assert!(inbox[0].contains("\nX-Spam-Flag: NO\n"), "{}", inbox[0]);
}

/// contrib/exim.conf's data ACL in the real Exim (`-bh`: an SMTP session on stdin, no
/// delivery), scoring through this daemon: spam is tagged, ham is not, and with spamnb
/// down the message is still accepted (`defer_ok`). Exim comes from `SPAMNB_EXIM` (CI
/// unpacks Debian's exim4-daemon-heavy there: it cannot be installed beside Postfix) or
/// the PATH.
#[test]
fn contrib_exim_acl_scores_through_spamd() {
    let exim = match std::env::var_os("SPAMNB_EXIM") {
        Some(path) => std::path::PathBuf::from(path),
        None if util::have("exim4") => "exim4".into(),
        None => return,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let Some((mut d, spam, ham)) = telling_apart(dir.path()) else {
        return;
    };

    // The recipe's own lines: its spamd_address pointed at this daemon, its data ACL.
    let recipe = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/exim.conf"),
    )
    .expect("exim.conf");
    let (host, port) = d.spamd.rsplit_once(':').expect("host:port");
    let address = recipe
        .lines()
        .find(|l| l.starts_with("spamd_address"))
        .expect("spamd_address in the recipe");
    let acl: String = recipe
        .split("acl_check_data")
        .nth(1)
        .and_then(|rest| rest.split_once('\n'))
        .map(|(_, rest)| rest)
        .expect("the data ACL in the recipe")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(acl.contains("spam "), "{acl}");
    let spool = dir.path().join("spool");
    std::fs::create_dir_all(&spool).expect("spool");
    use std::os::unix::fs::PermissionsExt;
    // Exim scans as its own user.
    std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let config = util::write(
        dir.path(),
        "exim.conf",
        format!(
            "primary_hostname = mx.test\nspool_directory = {spool}\nlog_file_path = {spool}/%slog\n\
             {}\nacl_smtp_rcpt = acl_check_rcpt\nacl_smtp_data = acl_check_data\n\
             begin acl\nacl_check_rcpt:\n  accept\nacl_check_data:\n{acl}  accept\n",
            address.replace("127.0.0.1 783", &format!("{host} {port}")),
            spool = spool.display(),
        ),
    );
    let session = |mail: &[u8]| -> String {
        let mut smtp =
            b"HELO client.test\r\nMAIL FROM:<a@client.test>\r\nRCPT TO:<b@mx.test>\r\nDATA\r\n"
                .to_vec();
        let body = spamnb::message::without_envelope_line(mail);
        for line in body.split(|&b| b == b'\n') {
            if line.starts_with(b".") {
                smtp.push(b'.');
            }
            smtp.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
            smtp.extend_from_slice(b"\r\n");
        }
        smtp.extend_from_slice(b".\r\nQUIT\r\n");
        let out = util::run_with_stdin(
            std::process::Command::new(&exim)
                .arg("-C")
                .arg(&config)
                .args(["-bh", "192.0.2.1"]),
            &smtp,
        );
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    };
    let tagged = "check add_header = X-Spam-Flag: YES";
    let said = session(&spam);
    assert!(said.contains("250 OK id="), "spam accepted:\n{said}");
    assert!(said.contains("X-Spam-Score: "), "scored:\n{said}");
    assert!(said.contains(tagged), "spam tagged:\n{said}");
    let said = session(&ham);
    assert!(said.contains("250 OK id="), "ham accepted:\n{said}");
    assert!(said.contains("X-Spam-Score: "), "scored:\n{said}");
    assert!(!said.contains(tagged), "ham not tagged:\n{said}");
    // spamnb down: Exim defers to accepting the mail untagged.
    d.stop();
    let said = session(&spam);
    assert!(
        said.contains("250 OK id="),
        "accepted with spamnb down:\n{said}"
    );
    assert!(!said.contains(tagged), "{said}");
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// A daemon in `dir` over a database trained on 100 corpus messages of each class, with
/// what [`told_apart`] picks; none without the corpus.
fn telling_apart(dir: &std::path::Path) -> Option<(Daemon, Vec<u8>, Vec<u8>)> {
    let db = trained_db(dir, 100)?;
    let d = Daemon::start(dir, &db, &Sections::default());
    let (spam, ham) = told_apart(&d);
    Some((d, spam, ham))
}

/// An unseen spam the daemon catches and an unseen ham it passes: messages the model gets
/// right, so that a test is about the protocol.
fn told_apart(d: &Daemon) -> (Vec<u8>, Vec<u8>) {
    let (spams, hams) = unseen(20);
    let is_spam = |m: &Vec<u8>| d.spamc(&["-c"], m).status.code() == Some(1);
    let spam = spams
        .into_iter()
        .find(|m| is_spam(m))
        .expect("some unseen spam is caught");
    let ham = hams
        .into_iter()
        .find(|m| !is_spam(m))
        .expect("some unseen ham passes");
    (spam, ham)
}
