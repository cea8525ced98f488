//! spamnb as a mail server's hook runs it: one message at a time, under the limits the
//! server sets (Dovecot's `default_vsz_limit`, its 10 s timeout for pipe programs), through
//! `contrib/dovecot/spamnb-learn.sh`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::util;

/// Dovecot's `default_vsz_limit`, which its pipe programs run under: an address-space
/// limit (RLIMIT_AS), so what counts is what a process reserves, not what it touches.
const DOVECOT_VSZ_LIMIT: u64 = 256 << 20;

/// `cmd` with its address space limited to `bytes`, as Dovecot starts a pipe program.
fn under_address_space_limit(cmd: &mut Command, bytes: u64) -> &mut Command {
    // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// A message with a PDF of `attachment_bytes` attached (random bytes in base64, as a mail
/// client sends them): what users move into Junk is not always a line of text.
fn message_with_attachment(n: usize, attachment_bytes: usize) -> String {
    const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ n as u64;
    let mut attachment = String::with_capacity(attachment_bytes * 4 / 3 + attachment_bytes / 57);
    for i in 0..attachment_bytes * 4 / 3 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        attachment.push(BASE64[(seed % 64) as usize] as char);
        if i % 76 == 75 {
            attachment.push('\n');
        }
    }
    format!(
        "From: billing@example.org\nTo: ann@example.net\nSubject: invoice {n}\n\
         Message-ID: <invoice-{n}@example.org>\nMIME-Version: 1.0\n\
         Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\n\
         Your invoice {n} is attached; pay it within 30 days.\n--b\n\
         Content-Type: application/pdf; name=\"invoice.pdf\"\n\
         Content-Transfer-Encoding: base64\n\n{attachment}\n--b--\n"
    )
}

/// Issue: a one-message `learn` or `filter` aborted ("memory allocation of … bytes
/// failed", or sled's "failed to allocate critical IO buffer" and a hang) under Dovecot's
/// 256 MB address-space limit. glibc gave each of sled's ten threads a 64 MB malloc arena
/// of its own: 700 MB reserved by a process that touched 15.
#[test]
fn one_message_learn_and_filter_work_under_dovecots_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = util::spamnb(&db)
        .args(["learn", "--ham", "--user", "ann", "-"])
        .stdin(
            std::fs::File::open(util::write(
                dir.path(),
                "first.eml",
                util::message("lunch", "lunch at noon on friday"),
            ))
            .unwrap(),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    // Each run several times: what failed depended on which thread reserved first.
    for n in 0..5 {
        for (what, raw) in [
            (
                "a small message",
                util::message(&format!("note {n}"), "see you at noon"),
            ),
            (
                "a message with a 5 MB attachment",
                message_with_attachment(n, 5 << 20),
            ),
        ] {
            let learn = util::run_with_stdin(
                under_address_space_limit(
                    util::spamnb(&db).args(["learn", "--spam", "--user", "ann", "-"]),
                    DOVECOT_VSZ_LIMIT,
                ),
                raw.as_bytes(),
            );
            assert!(
                learn.status.success(),
                "run {n}: learn of {what} under a 256 MB address-space limit: {}\n{}",
                learn.status,
                util::text(&learn.stderr)
            );
            let filter = util::run_with_stdin(
                under_address_space_limit(util::spamnb(&db).arg("filter"), DOVECOT_VSZ_LIMIT),
                raw.as_bytes(),
            );
            let tagged = util::text(&filter.stdout);
            assert!(
                filter.status.success()
                    && tagged.contains("X-Spam-Status:")
                    && filter.stderr.is_empty(),
                "run {n}: filter of {what} under a 256 MB address-space limit: {}\n{}",
                filter.status,
                util::text(&filter.stderr)
            );
        }
    }
}

/// `spamnb filter` passes a 70 MB message on, tagged, under Dovecot's 256 MB address-space
/// limit: the body goes out from the buffer read. A copy of the whole message with the
/// headers added, beside a read buffer grown to twice the message, did not fit, and the
/// filter aborted ("memory allocation of … bytes failed") and wrote nothing.
#[test]
fn filter_passes_on_a_70_mb_message_under_dovecots_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let learned = util::run_with_stdin(
        util::spamnb(&db).args(["learn", "--ham", "-"]),
        util::message("lunch", "lunch at noon on friday").as_bytes(),
    );
    assert!(learned.status.success(), "{}", util::text(&learned.stderr));
    // 52 MB of attachment, 70 MB in base64.
    let raw = message_with_attachment(0, 52 << 20);
    let filter = util::run_with_stdin(
        under_address_space_limit(util::spamnb(&db).arg("filter"), DOVECOT_VSZ_LIMIT),
        raw.as_bytes(),
    );
    let (head, body) = raw.split_once("\n\n").unwrap();
    let out = &filter.stdout;
    let out_head = util::text(&out[..out.len().min(head.len() + 2048)]);
    assert!(
        filter.status.success()
            && out_head.starts_with(head)
            && out_head.contains("\nX-Spam-Status:")
            && out.ends_with(format!("\n\n{body}").as_bytes()),
        "filter of {} bytes under a 256 MB address-space limit: {}, {} bytes out\n{}",
        raw.len(),
        filter.status,
        out.len(),
        util::text(&filter.stderr)
    );
}

/// `contrib/dovecot/spamnb-learn.sh` as installed, told to run `spamnb` on the database
/// `db` with `exports` (more `NAME=value` words for its environment) and no configuration
/// file: the text to write. Shared with the tests that run it under a real Dovecot.
pub(crate) fn learn_script(spamnb: &Path, db: &Path, exports: &str) -> String {
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/dovecot");
    let script = std::fs::read_to_string(contrib.join("spamnb-learn.sh")).unwrap();
    let default = "SPAMNB=${SPAMNB:-spamnb}";
    assert!(
        script.contains(default),
        "spamnb-learn.sh no longer says {default}, where the tests point it at their spamnb"
    );
    script.replace(
        default,
        &format!(
            "SPAMNB={}\nexport SPAMNB_DB={} SPAMNB_CONFIG=/dev/null {exports}",
            spamnb.display(),
            db.display()
        ),
    )
}

/// [`learn_script`] written to `dir`, running the spamnb under test without rules.
fn install_learn_script(dir: &Path, db: &Path) -> PathBuf {
    let spamnb = Path::new(env!("CARGO_BIN_EXE_spamnb"));
    util::write(
        dir,
        "spamnb-learn.sh",
        learn_script(spamnb, db, "SPAMNB_RULES=none"),
    )
}

/// Runs the learn script as Dovecot's `pipe` does, with the message on stdin.
fn run_learn_script(script: &Path, class: &str, raw: &str) -> (Output, Duration) {
    let started = Instant::now();
    let out = util::run_with_stdin(
        Command::new("sh")
            .arg(script)
            .args([class, "ann"])
            .env_remove("SPAMNB_LOCK_WAIT")
            .env_remove("SPAMNB_LOG"),
        raw.as_bytes(),
    );
    (out, started.elapsed())
}

/// The ledger's classes by message, from `spamnb export`.
fn ledger(db: &Path) -> String {
    let out = util::spamnb(db).arg("export").output().unwrap();
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    util::text(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("ledger "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Issue: Dovecot logged every learn that worked as an error ("imap: Error: learned 1 as
/// spam, …"), since it logs whatever a pipe program writes to stderr.
#[test]
fn learn_script_is_silent_when_it_learns_and_speaks_when_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = install_learn_script(dir.path(), &db);
    let (out, _) = run_learn_script(&script, "spam", &util::message("pills", "cheap pills"));
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "a learn that worked: {}, stdout {:?}, stderr {:?}",
        out.status,
        util::text(&out.stdout),
        util::text(&out.stderr)
    );
    assert_eq!(ledger(&db).lines().count(), 1, "the message was learned");

    let (out, _) = run_learn_script(&script, "spam", "\n");
    let said = util::text(&out.stderr);
    assert!(
        !out.status.success() && said.contains("not a message"),
        "a learn that failed must say why for Dovecot's log: {}, stderr {said:?}",
        out.status
    );
}

/// procmail and maildrop give a filter no deadline: whatever holds up the verdict, the
/// message goes on unchanged at `--timeout`. Here it is a database that another process
/// holds for longer than `filter` was told to wait for it.
#[test]
fn a_filter_without_a_verdict_in_time_passes_the_message_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let raw = util::message("quarterly report", "the figures are attached");
    let learned = util::write(dir.path(), "first", &raw);
    assert!(
        util::spamnb(&db)
            .args(["learn", "--ham"])
            .arg(&learned)
            .output()
            .unwrap()
            .status
            .success()
    );
    let (_learn, _message) = util::hold(&db);
    let started = Instant::now();
    let out = util::run_with_stdin(
        util::spamnb(&db).args(["--lock-wait", "60", "filter", "--timeout", "1"]),
        raw.as_bytes(),
    );
    let took = started.elapsed();
    let said = util::text(&out.stderr);
    assert!(
        out.status.success() && out.stdout == raw.as_bytes() && said.contains("--timeout"),
        "at its deadline the filter passes the message on unchanged and says why: {}, \
         stderr {said:?}, stdout {:?}",
        out.status,
        util::text(&out.stdout)
    );
    assert!(
        took < Duration::from_secs(30),
        "the deadline, not the 60 s wait for the database, ended the filter: {took:?}"
    );
}

/// `spamnb ARGS` with `stdin`, run as nobody where it may start no thread (`ulimit -u`
/// reached: RLIMIT_NPROC 1), on a copy of the binary and a database, `db` in `dir`, handed
/// to that user. Killed, and the test failed, if it has not ended within 20 s: sled waits
/// for ever for threads it cannot start.
fn without_threads(dir: &Path, db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    const NOBODY: u32 = 65534;
    let spamnb = dir.join("spamnb");
    std::fs::copy(env!("CARGO_BIN_EXE_spamnb"), &spamnb).unwrap();
    let chown = Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(dir)
        .status();
    assert!(chown.unwrap().success());
    let mut cmd = Command::new(&spamnb);
    cmd.args(args)
        .env("SPAMNB_DB", db)
        .env("SPAMNB_CONFIG", "/dev/null")
        .env_remove("SPAMNB_LOG")
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let one = libc::rlimit {
                rlim_cur: 1,
                rlim_max: 1,
            };
            if libc::setrlimit(libc::RLIMIT_NPROC, &one) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut pipe = child.stdin.take().unwrap();
        // A command that fails before it reads its input closes the pipe first.
        let _ = pipe.write_all(stdin);
    }
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("spamnb {args:?}, able to start no thread, had not ended in 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// For the process-limit tests (`None`, skipped, unless run as root: root is exempt from
/// the limit): a directory with a database in it, one message learned as ham, and that
/// message.
fn learned_once() -> Option<(tempfile::TempDir, PathBuf, String)> {
    if !util::root_or_skip("a process limit for another user (root is exempt from it)") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let raw = util::message("quarterly report", "the figures are attached");
    let learned = util::write(dir.path(), "first", &raw);
    let learn = util::spamnb(&db)
        .args(["learn", "--ham"])
        .arg(&learned)
        .output();
    assert!(learn.unwrap().status.success());
    Some((dir, db, raw))
}

/// Where this user may start no more threads, `filter` cannot open the database (nor start
/// the thread of its deadline): it passes the message on at once and says why.
#[test]
fn a_filter_that_can_start_no_thread_passes_the_message_on_at_once() {
    let Some((dir, db, raw)) = learned_once() else {
        return;
    };
    let args = ["filter", "--timeout", "60"];
    let out = without_threads(dir.path(), &db, &args, raw.as_bytes());
    let said = util::text(&out.stderr);
    assert!(
        out.status.success() && out.stdout == raw.as_bytes() && said.contains("ulimit -u"),
        "filter passes the message on unchanged and names the limit: {}, stderr {said:?}, \
         stdout {:?}",
        out.status,
        util::text(&out.stdout)
    );
}

/// Where this user may start no more threads, a command that opens the database fails at
/// once, naming the limit, and the database is as it was.
#[test]
fn a_command_that_can_start_no_thread_fails_naming_the_limit() {
    let Some((dir, db, raw)) = learned_once() else {
        return;
    };
    let spam = util::message("cheap pills", "buy now");
    let args = ["learn", "--no-rules", "--spam", "-"];
    let out = without_threads(dir.path(), &db, &args, spam.as_bytes());
    let said = util::text(&out.stderr);
    assert!(
        !out.status.success() && said.contains("ulimit -u"),
        "learn fails and names the limit: {}, stderr {said:?}",
        out.status
    );
    let check = util::run_with_stdin(util::spamnb(&db).args(["check", "-"]), raw.as_bytes());
    let stats = util::text(&util::spamnb(&db).arg("stats").output().unwrap().stdout);
    let learned = |class: &str| {
        (stats.lines())
            .find(|l| l.starts_with(&format!("{class} learned")))
            .and_then(|l| l.split_whitespace().last())
            .map(str::to_string)
    };
    assert!(
        check.status.success()
            && learned("spam").as_deref() == Some("0")
            && learned("ham").as_deref() == Some("1"),
        "the database opens as it was, nothing learned: {}\n{}",
        util::text(&check.stderr),
        stats
    );
}

/// Dovecot kills a pipe program after 10 s, and the IMAP client's MOVE waits for it.
const DOVECOT_PIPE_TIMEOUT: Duration = Duration::from_secs(10);

/// Issue: while `spamnb watch` (or any long `spamnb learn`) held the database, the hook's
/// `spamnb learn` waited 20 s for it; Dovecot killed it at 10 s, each MOVE hung that long,
/// and Dovecot's log said nothing useful.
#[test]
fn learn_script_gives_up_before_dovecots_timeout_while_another_process_holds_the_database() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = install_learn_script(dir.path(), &db);
    let (out, _) = run_learn_script(&script, "ham", &util::message("lunch", "at noon"));
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    let before = ledger(&db);
    let spam = util::message("pills", "cheap pills");

    // `spamnb watch`, which holds the database for as long as it runs: the hook gives up
    // at once, and says what to run instead.
    let maildir = dir.path().join("Maildir");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).unwrap();
    }
    let mut watch = util::spamnb(&db)
        .arg("watch")
        .arg(&maildir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(watch.stderr.take().unwrap());
    let watch = util::Holder(watch);
    let mut line = String::new();
    while !line.contains("watching") {
        line.clear();
        assert!(
            log.read_line(&mut line).unwrap() > 0,
            "spamnb watch exited before watching"
        );
    }
    let (out, took) = run_learn_script(&script, "spam", &spam);
    let said = util::text(&out.stderr);
    assert!(
        !out.status.success()
            && said.contains("spamnb watch")
            && said.contains("spamnb daemon")
            && took < Duration::from_secs(2),
        "while spamnb watch holds the database, the hook fails at once and names it: \
         {} after {took:?}, stderr {said:?}",
        out.status
    );
    // Nor does a daemon started meanwhile wait for it.
    let started = Instant::now();
    let daemon = util::spamnb(&db).arg("daemon").output().unwrap();
    let said = util::text(&daemon.stderr);
    assert!(
        !daemon.status.success()
            && said.contains("spamnb watch")
            && started.elapsed() < Duration::from_secs(5),
        "a daemon fails at once while spamnb watch holds its database: {said:?}"
    );
    drop(watch);

    // A `spamnb learn` that holds it a long time (its message still coming on stdin):
    // the hook waits its few seconds for it, then gives up with the reason.
    let (learn, mut message) = util::hold(&db);
    let (out, took) = run_learn_script(&script, "spam", &spam);
    let said = util::text(&out.stderr);
    assert!(
        !out.status.success()
            && said.contains("in use by another process")
            && took < DOVECOT_PIPE_TIMEOUT - Duration::from_secs(2),
        "while spamnb learn holds the database, the hook gives up well within Dovecot's \
         {DOVECOT_PIPE_TIMEOUT:?}: {} after {took:?}, stderr {said:?}",
        out.status
    );
    // The holder is none the worse for it.
    use std::io::Write;
    message
        .write_all(util::message("minutes", "of the meeting").as_bytes())
        .unwrap();
    drop(message);
    let mut learn = learn;
    let status = learn.0.wait().unwrap();
    assert!(status.success(), "the holding learn failed");
    let after = ledger(&db);
    assert_eq!(
        after.lines().count(),
        before.lines().count() + 1,
        "only the holder's message was learned:\n{after}"
    );
}
