//! Rules through the command line: `rules check`, `rules stats`, rule hits in `check
//! --explain` and `X-Spam-Status: tests=`, the switches that turn rules off, and the
//! SpamAssassin compatibility floor.

use std::path::Path;

use crate::util::{have, message, run_with_stdin, spamnb, text, write};

const RULES: &str = "body     ZORG_PHRASE  /\\bzorgblat\\s+offer\\b/i\n\
describe ZORG_PHRASE  The zorgblat offer\n\
header   SUBJ_WIN     Subject =~ /\\bwinner\\b/i\n\
describe SUBJ_WIN     Subject says winner\n";

fn repo_rules() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rules")
}

/// `spamnb daemon` on `db` with the rules at `rules`.
fn daemon_with_rules(dir: &Path, db: &Path, rules: &Path) -> crate::daemon::Daemon {
    let sections = crate::daemon::Sections {
        rules: rules.to_str().expect("UTF-8 path"),
        ..Default::default()
    };
    crate::daemon::Daemon::start(dir, db, &sections)
}

#[test]
fn rules_check_passes_on_our_rules_and_fails_on_a_broken_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = spamnb(&db)
        .args(["rules", "check"])
        .arg(repo_rules())
        .output()
        .expect("run");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let loaded: usize = stdout
        .split("loaded ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {stdout}"));
    assert!(loaded >= 80, "{stdout}");

    let broken = write(
        dir.path(),
        "broken.cf",
        format!("{RULES}body BAD_ONE /unclosed(/\ndescribe BAD_ONE bad\nheader BAD_TWO Subject\n"),
    );
    let out = spamnb(&db)
        .args(["rules", "check"])
        .arg(&broken)
        .output()
        .expect("run");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("broken.cf:5: BAD_ONE"), "{stdout}");
    assert!(stdout.contains("broken.cf:7: BAD_TWO"), "{stdout}");
    assert!(stdout.contains("loaded 2 rules"), "{stdout}");
}

/// Outside a checkout, with no rules installed or named, spamnb runs its own, built in.
#[test]
fn the_built_in_rules_run_where_none_are_installed() {
    // Installed rules would be the default instead: nothing here to test then.
    let installed = ["/etc/spamnb/rules", "/usr/share/spamnb/rules"]
        .iter()
        .any(|d| Path::new(d).exists());
    if !crate::util::available(
        !installed,
        "CI machines install no rules",
        "rules are installed on this machine",
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let mail = message(
        "ONE HUNDRED PERCENT GUARANTEED",
        "Urgent reply needed. No prescription needed!",
    );
    let msg = write(dir.path(), "m.eml", &mail);
    let run = |extra: &[&str]| {
        let out = spamnb(&db)
            .env_remove("SPAMNB_RULES")
            .current_dir(dir.path())
            .args(extra)
            .args(["check", "--explain"])
            .arg(&msg)
            .output()
            .expect("run");
        assert!(out.status.success(), "{}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr))
    };
    let (stdout, log) = run(&["-v"]);
    assert!(
        stdout.contains("rules: ") && stdout.contains("SUBJ_ALL_CAPS"),
        "{stdout}"
    );
    assert!(
        log.contains("rules: spamnb's own, built into the binary"),
        "{log}"
    );
    let (stdout, _) = run(&["--no-rules"]);
    assert!(!stdout.contains("rules: "), "{stdout}");
}

#[test]
fn rule_hits_are_named_in_explain_and_in_x_spam_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let rules = write(dir.path(), "my.cf", RULES);
    let mail = message("You are a WINNER", "Take the zorgblat offer today.");
    let msg = write(dir.path(), "m.eml", &mail);

    let out = spamnb(&db)
        .env("SPAMNB_RULES", &rules)
        .args(["check", "--explain"])
        .arg(&msg)
        .output()
        .expect("run");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("rules: SUBJ_WIN, ZORG_PHRASE"),
        "{stdout}{}",
        text(&out.stderr)
    );

    let out = run_with_stdin(
        spamnb(&db).env("SPAMNB_RULES", &rules).arg("filter"),
        mail.as_bytes(),
    );
    let tagged = text(&out.stdout);
    let status = tagged
        .lines()
        .skip_while(|l| !l.starts_with("X-Spam-Status:"))
        .take_while(|l| l.starts_with("X-Spam-Status:") || l.starts_with([' ', '\t']))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        status.contains("SUBJ_WIN") && status.contains("ZORG_PHRASE"),
        "{tagged}"
    );

    // Switched off, by the environment and by the flag.
    for (env, flag) in [(Some("none"), None), (None, Some("--no-rules"))] {
        let mut cmd = spamnb(&db);
        cmd.env(
            "SPAMNB_RULES",
            env.unwrap_or(rules.to_str().expect("utf-8 path")),
        );
        if let Some(f) = flag {
            cmd.arg(f);
        }
        let out = cmd
            .args(["check", "--explain"])
            .arg(&msg)
            .output()
            .expect("run");
        let shown = text(&out.stdout);
        assert!(
            out.status.success() && shown.contains(" (score ") && !shown.contains("rules:"),
            "{env:?} {flag:?}: {shown}{}",
            text(&out.stderr)
        );
    }
}

/// A weight that leans too little to count in scores is shown as such, and a rule added
/// after learning as not learned: neither is a rule that earns its place.
#[test]
fn rules_stats_counts_hits_and_shows_learned_weights() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let every = "header   ANY_SUBJECT  Subject =~ /\\S/\n\
                 describe ANY_SUBJECT  Every message here has a subject\n";
    let rules = write(dir.path(), "my.cf", format!("{RULES}{every}"));
    for i in 0..4 {
        write(
            dir.path(),
            &format!("spam/{i}.eml"),
            message(
                &format!("winner number {i}"),
                &format!("The zorgblat offer, round {i}."),
            ),
        );
        write(
            dir.path(),
            &format!("ham/{i}.eml"),
            message(
                &format!("minutes {i}"),
                &format!("Notes from meeting {i} about the budget."),
            ),
        );
    }
    let (spam, ham) = (dir.path().join("spam"), dir.path().join("ham"));
    for (class, path) in [("--spam", &spam), ("--ham", &ham)] {
        let out = spamnb(&db)
            .env("SPAMNB_RULES", &rules)
            .args(["learn", class])
            .arg(path)
            .output()
            .expect("run");
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let late = write(
        dir.path(),
        "late.cf",
        "body     LATE_BUDGET  /\\bbudget\\b/\ndescribe LATE_BUDGET  Written after the learning\n",
    );
    let stats = |format: &str| {
        let out = spamnb(&db)
            .env(
                "SPAMNB_RULES",
                format!("{}:{}", rules.display(), late.display()),
            )
            .args(["rules", "stats", "--format", format, "--spam"])
            .arg(&spam)
            .arg("--ham")
            .arg(&ham)
            .output()
            .expect("run");
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
        stdout
    };
    let tsv = stats("tsv");
    let row = |rule: &str| -> Vec<String> {
        let line = (tsv.lines())
            .find(|l| l.starts_with(&format!("{rule}\t")))
            .unwrap_or_else(|| panic!("no {rule} in {tsv}"));
        line.split('\t').map(String::from).collect()
    };
    let zorg = row("ZORG_PHRASE");
    assert_eq!((&*zorg[1], &*zorg[2]), ("4", "0"), "{zorg:?}");
    let weight: f64 = zorg[6]
        .parse()
        .unwrap_or_else(|_| panic!("weight in {zorg:?}"));
    assert!(
        weight > 0.0 && zorg[7] == "yes",
        "a rule seen only in spam leans to spam, and counts: {zorg:?}"
    );
    // In every message of both classes: learned, but no evidence either way.
    let any = row("ANY_SUBJECT");
    let weight: f64 = any[6]
        .parse()
        .unwrap_or_else(|_| panic!("weight in {any:?}"));
    assert!(
        weight.abs() < 1.0 && any[7] == "no",
        "a rule as common in ham as in spam has a weight that does not count: {any:?}"
    );
    let late = row("LATE_BUDGET");
    assert_eq!((&*late[6], &*late[7]), ("-", "no"), "{late:?}");
    let shown = stats("text");
    let line = (shown.lines())
        .find(|l| l.ends_with("ANY_SUBJECT"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        line.contains('(') && shown.contains("does not count in scores"),
        "{shown}"
    );
    // The footnote the held database below must not get.
    assert!(
        shown.contains("(-: not learned in this database)"),
        "{shown}"
    );

    // A database it cannot read: the hits still, every weight `-`, and why on stderr, not
    // a claim that nothing was learned.
    let (_learn, _message) = crate::util::hold(&db);
    let out = spamnb(&db)
        .env("SPAMNB_RULES", &rules)
        .args(["--lock-wait", "0", "rules", "stats", "--spam"])
        .arg(&spam)
        .arg("--ham")
        .arg(&ham)
        .output()
        .expect("run");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    let zorg = (stdout.lines())
        .find(|l| l.ends_with("ZORG_PHRASE"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        zorg.split_whitespace().nth(3) == Some("-")
            && !stdout.contains("not learned")
            && stderr.contains("no learned weights: another process holds"),
        "{stdout}{stderr}"
    );
}

#[test]
fn spamassassin_shipped_rules_load_above_the_floor() {
    if !have("spamassassin") {
        return;
    }
    let sa = Path::new("/usr/share/spamassassin");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = spamnb(&dir.path().join("db"))
        .args(["rules", "check", "--summary"])
        .arg(sa)
        .output()
        .expect("run");
    let stdout = text(&out.stdout);
    let pct: f64 = stdout
        .split("regex rules: ")
        .nth(1)
        .and_then(|s| s.split('(').nth(1))
        .and_then(|s| s.split('%').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {stdout}"));
    assert!(pct >= 85.0, "{stdout}");
}

#[test]
fn our_rules_tell_spam_from_ham_in_the_corpus() {
    let Some(root) = crate::util::corpus() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = spamnb(&dir.path().join("db"));
    cmd.env("SPAMNB_RULES", repo_rules())
        .args(["rules", "stats", "--format", "tsv", "--spam"]);
    cmd.args(crate::util::corpus_files(&root, "spam-2", 150))
        .arg("--ham");
    cmd.args(crate::util::corpus_files(&root, "easy-ham-2", 150));
    let out = cmd.output().expect("run");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    // Rules that hit at least 5% of spam and lean 4:1 towards it.
    let spammy = stdout
        .lines()
        .skip(1)
        .filter(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let (sp, so): (f64, f64) = (c[3].parse().unwrap_or(0.0), c[5].parse().unwrap_or(0.0));
            sp >= 5.0 && so >= 0.8
        })
        .count();
    assert!(spammy >= 5, "{stdout}");
}

/// A message with SpamAssassin's test line, which the rule GTUBE (scored as decisive) finds.
const GTUBE_MAIL: &str = "From: admin@example.org\nTo: postmaster@example.org\nSubject: test\n\n\
                          XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X\n";

/// A rules path that cannot be read (a typo) stops a command with the path named, instead
/// of running it without every rule, GTUBE's among them, and one log line to say so; a
/// filter of mail in transit goes on with the rules it could read, and so the message is
/// still found spam by the others.
#[test]
fn a_rules_path_that_cannot_be_read_stops_a_command_but_not_a_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let file = write(dir.path(), "gtube.eml", GTUBE_MAIL);
    let missing = dir.path().join("rules-typo");
    let both = format!("{}:{}", repo_rules().display(), missing.display());
    for args in [&["check"][..], &["learn", "--spam"]] {
        let out = spamnb(&db)
            .env("SPAMNB_RULES", &both)
            .args(args)
            .arg(&file)
            .output()
            .expect("run");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("rules-typo") && stderr.contains("--no-rules"),
            "{stderr}"
        );
    }
    let out = run_with_stdin(
        spamnb(&db).env("SPAMNB_RULES", &both).arg("filter"),
        GTUBE_MAIL.as_bytes(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("X-Spam-Flag: YES"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("rules-typo"),
        "{}",
        text(&out.stderr)
    );
}

/// A command that finds the daemon's pid file leaves the rules to the daemon; when it then
/// opens the database itself (the daemon let go between the look and the open), it compiles
/// them after all, one message or many.
#[test]
fn a_command_the_daemon_let_go_of_scores_with_the_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let gtube = GTUBE_MAIL;
    let file = write(dir.path(), "gtube.eml", gtube);
    let other = write(dir.path(), "other.eml", message("lunch", "at noon?"));
    let learned = spamnb(&db).args(["learn", "--ham"]).arg(&other).output();
    assert!(learned.expect("run").status.success());
    // A spamnb that names itself in the pid file and holds nothing: a filter waiting for
    // its message on stdin.
    let mut waiting = spamnb(&db)
        .arg("filter")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    std::fs::write(db.join("daemon.pid"), waiting.id().to_string()).expect("pid file");
    for files in [vec![&file], vec![&file, &other]] {
        let out = spamnb(&db)
            .env("SPAMNB_RULES", repo_rules())
            .args(["check", "--format", "tsv"])
            .args(&files)
            .output()
            .expect("run");
        let stdout = text(&out.stdout);
        assert!(
            stdout.starts_with(&format!("{}\tspam\t1000.", file.display())),
            "{stdout}{}",
            text(&out.stderr)
        );
    }
    let _ = waiting.kill();
    let _ = waiting.wait();
}

/// The GTUBE line is spam on a fresh install, before anything is learned, through `check`
/// and through a real daemon and `spamc`; a local rule scored −100 (as SpamAssassin scores
/// its welcomelist) makes its sender's mail ham, SpamAssassin's `blocklist_from` a
/// listed sender's spam and `all_spam_to` all mail to a listed recipient ham, where the same
/// mail from and to anyone else is left to the words (here: unsure, nothing being learned).
#[test]
fn rules_scored_as_decisive_decide_before_anything_is_learned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let gtube = GTUBE_MAIL;
    let file = write(dir.path(), "gtube.eml", gtube);
    let ours = repo_rules();
    let out = spamnb(&db)
        .env("SPAMNB_RULES", &ours)
        .args(["check", "--explain"])
        .arg(&file)
        .output()
        .expect("run");
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{}: spam (score 1000.00", file.display()))
            && stdout.contains("decided by the rule scored as decisive: GTUBE 1000"),
        "{stdout}"
    );
    // The same line with a character changed is no test string.
    let near = write(dir.path(), "near.eml", gtube.replace("C.34X", "C.34Y"));
    let out = spamnb(&db)
        .env("SPAMNB_RULES", &ours)
        .args(["check", "--format", "tsv"])
        .arg(&near)
        .output()
        .expect("run");
    assert!(
        text(&out.stdout).contains("\tunsure\t"),
        "{}",
        text(&out.stdout)
    );

    if have("spamc") {
        let d = daemon_with_rules(dir.path(), &db, &ours);
        let out = d.spamc(&["-c"], gtube.as_bytes());
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        assert!(
            text(&out.stdout).starts_with("1000.0/"),
            "{}",
            text(&out.stdout)
        );
    }

    let local = write(
        dir.path(),
        "local.cf",
        "header   LOCAL_FRIEND  From:addr =~ /^friend\\@example\\.org$/i\n\
         describe LOCAL_FRIEND  Mail from a friend, never spam\n\
         score    LOCAL_FRIEND  -100\n\
         blocklist_from *@spammer.example\n\
         all_spam_to abuse@example.org\n\
         blocklist_uri_host pills.example\n",
    );
    // `check` of `raw` under local.cf, printed as `format` asks.
    let check = |raw: &str, format: &[&str]| {
        let m = write(dir.path(), "m.eml", raw);
        let out = spamnb(&db)
            .env("SPAMNB_RULES", &local)
            .arg("check")
            .args(format)
            .arg(&m)
            .output()
            .expect("run");
        text(&out.stdout)
    };
    let verdict_to = |from: &str, to: &str| {
        let raw = format!("From: {from}\nTo: {to}\nSubject: cheap pills\n\nbuy now\n");
        let out = check(&raw, &["--format", "tsv"]);
        out.split('\t').nth(1).unwrap_or_default().to_string()
    };
    let verdict = |from: &str| verdict_to(from, "me@example.org");
    assert_eq!(verdict("Friend <friend@example.org>"), "ham");
    assert_eq!(verdict("stranger@example.net"), "unsure");
    assert_eq!(verdict("Sales <sales@spammer.example>"), "spam");
    // Mail for abuse@ is all wanted, a report of spam included; a listed sender's to it is
    // left to the words, the two lists cancelling out.
    let abuse = "me@example.org, Abuse Desk <abuse@example.org>";
    assert_eq!(verdict_to("stranger@example.net", abuse), "ham");
    assert_eq!(verdict_to("sales@spammer.example", abuse), "unsure");
    // A link to a listed domain, or to a host under it, decides; one that only looks alike
    // does not.
    for (link, want) in [
        ("https://shop.pills.example/buy", "spam"),
        ("https://pills.example.org/buy", "unsure"),
    ] {
        let raw = format!("From: stranger@example.net\nSubject: offer\n\nsee {link}\n");
        let stdout = check(&raw, &["--explain"]);
        assert!(stdout.contains(&format!(": {want} (")), "{link}: {stdout}");
        assert_eq!(
            stdout.contains("decided by the rule scored as decisive: URI_HOST_IN_BLOCKLIST"),
            want == "spam",
            "{link}: {stdout}"
        );
    }
}

/// The rules of SpamAssassin's shipped files that `raw` hits, as the JSON list `check` prints.
fn spamassassin_rules_hit(dir: &Path, db: &Path, raw: &str) -> String {
    let m = write(dir, "m.eml", raw);
    let out = spamnb(db)
        .env("SPAMNB_RULES", "/usr/share/spamassassin")
        .args(["check", "--format", "json"])
        .arg(&m)
        .output()
        .expect("run");
    let json: serde_json::Value =
        serde_json::from_str(&text(&out.stdout)).expect("one JSON verdict");
    json["rules"].to_string()
}

/// SpamAssassin's own tests of a message's MIME structure hit from its shipped files: an
/// alternative whose HTML says what its text does not (MPART_ALT_DIFF), a part whose body
/// follows its header without an empty line (MISSING_MIME_HB_SEP), text after the closing
/// boundary (T_TVD_MIME_EPI). A clean alternative hits none of them.
#[test]
fn spamassassins_mime_structure_rules_run_from_its_own_files() {
    if !have("spamassassin") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let alternative = |text_part: &str, html_part: &str, epilogue: &str| {
        format!(
            "From: a@example.org\nTo: you@example.org\nSubject: hi\nMIME-Version: 1.0\n\
             Content-Type: multipart/alternative; boundary=\"b\"\n\n\
             --b\nContent-Type: text/plain\n{text_part}\n\
             --b\nContent-Type: text/html\n\n{html_part}\n--b--\n{epilogue}"
        )
    };
    let mpart = [
        "\"MPART_ALT_DIFF\"",
        "\"MISSING_MIME_HB_SEP\"",
        "\"T_TVD_MIME_EPI\"",
    ];
    let odd = spamassassin_rules_hit(
        dir.path(),
        &db,
        &alternative(
            "Dear friend, see you at the meeting.",
            "<html><body><p>Cheap watches, best prices</p></body></html>",
            "epilogue\n",
        ),
    );
    for rule in mpart {
        assert!(odd.contains(rule), "{rule}: {odd}");
    }
    let clean = spamassassin_rules_hit(
        dir.path(),
        &db,
        &alternative(
            "\nSee you at the meeting.",
            "<html><body><p>See you at the meeting.</p></body></html>",
            "",
        ),
    );
    for rule in mpart {
        assert!(!clean.contains(rule), "{rule}: {clean}");
    }
}

/// SpamAssassin's own FreeMail, WLBLEval, WelcomeListSubject and VBounce blocks load from its
/// shipped files, none of their rules skipped, and its list of free mail domains feeds
/// FREEMAIL_FROM and the Reply-To tests; its HTML rules read the statistics and the text's
/// colours.
#[test]
fn spamassassins_freemail_and_list_rules_run_from_its_own_files() {
    if !have("spamassassin") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = spamnb(&db)
        .args(["rules", "check", "/usr/share/spamassassin"])
        .output()
        .expect("run");
    let report = text(&out.stdout);
    for plugin in [
        "FreeMail",
        "WLBLEval",
        "WelcomeListSubject",
        "VBounce",
        "RelayEval",
        "ImageInfo",
    ] {
        assert!(
            !report.contains(&format!("needs plugin {plugin},")),
            "{report}"
        );
    }
    assert!(report.contains("needs plugin PDFInfo,"), "{report}");
    let rules_hit = |raw: &str| spamassassin_rules_hit(dir.path(), &db, raw);
    let scam = rules_hit(
        "From: Director <director@corp.example>\nReply-To: director.private77@gmail.com\n\
         To: you@example.org\nSubject: urgent\n\nPlease reply to my private address.\n",
    );
    assert!(
        scam.contains("\"FREEMAIL_FORGED_REPLYTO\"")
            && scam.contains("\"FREEMAIL_REPLYTO_END_DIGIT\"")
            && !scam.contains("\"FREEMAIL_FROM\""),
        "{scam}"
    );
    let friend = rules_hit(
        "From: Ann <ann@gmail.com>\nTo: you@example.org\nSubject: lunch\n\nSee you at noon.\n",
    );
    assert!(
        friend.contains("\"FREEMAIL_FROM\"") && !friend.contains("FREEMAIL_FORGED_REPLYTO"),
        "{friend}"
    );
    // Its HTML statistics: three words split by tags, in twelve tags.
    let obfuscated = rules_hit(
        "From: a@example.org\nTo: you@example.org\nSubject: hi\nContent-Type: text/html\n\n\
         <html><body>V<b></b>ia<i></i>gra ch<u></u>eap <span>x</span></body></html>\n",
    );
    assert!(
        obfuscated.contains("\"HTML_MESSAGE\"") && obfuscated.contains("\"HTML_OBFUSCATE_20_30\""),
        "{obfuscated}"
    );
    let plain = rules_hit(
        "From: a@example.org\nTo: you@example.org\nSubject: hi\nContent-Type: text/html\n\n\
         <html><body>Viagra cheap</body></html>\n",
    );
    assert!(
        plain.contains("\"HTML_MESSAGE\"") && !plain.contains("HTML_OBFUSCATE"),
        "{plain}"
    );
    // Words in (nearly) their background's colour, and white on a black cell, which shows.
    let html = |body: &str| {
        rules_hit(&format!(
            "From: a@example.org\nTo: you@example.org\nSubject: hi\nContent-Type: text/html\n\n\
             <html><body><p>Hello</p>{body}</body></html>\n"
        ))
    };
    let hidden = html(
        "<div style=\"background-color: #ffffff\"><font color=\"#fefefe\">bayes food</font></div>",
    );
    assert!(hidden.contains("\"HTML_FONT_LOW_CONTRAST\""), "{hidden}");
    let shown = html(
        "<table bgcolor=\"#000000\"><tr><td><font color=\"#ffffff\">Readable</font></td></tr></table>",
    );
    assert!(
        shown.contains("\"HTML_MESSAGE\"") && !shown.contains("LOW_CONTRAST"),
        "{shown}"
    );
}

/// With the receiving server's authserv-id trusted, `welcomelist_auth` makes mail whose
/// From: domain signed it ham, through `check` and through a daemon and `spamc`; the same
/// results written by any other server, or the id left untrusted (which `rules check`
/// points out), leave it to the words.
#[test]
fn welcomelist_auth_reads_the_trusted_servers_dkim_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let lists = "welcomelist_auth *@bank.example\n";
    let trusting = write(
        dir.path(),
        "trusting.cf",
        format!("authres_trusted_authserv mx.example.org\n{lists}"),
    );
    let untrusting = write(dir.path(), "untrusting.cf", lists);
    let signed_by = |server: &str| {
        format!(
            "Authentication-Results: {server};\n\tdkim=pass (2048-bit key) header.d=bank.example \
             header.i=@bank.example header.b=\"xYz0\"\n\
             From: Bank <alerts@bank.example>\nTo: me@example.org\nSubject: cheap pills\n\n\
             buy now\n"
        )
    };
    // `check` of `raw` with `rules` (a SPAMNB_RULES list), printed as `format` asks.
    let check = |rules: &str, raw: &str, format: &[&str]| {
        let m = write(dir.path(), "m.eml", raw);
        let out = spamnb(&db)
            .env("SPAMNB_RULES", rules)
            .arg("check")
            .args(format)
            .arg(&m)
            .output()
            .expect("run");
        text(&out.stdout)
    };
    let path = |p: &Path| p.to_str().expect("UTF-8 path").to_string();
    let (trusting_rules, untrusting_rules) = (path(&trusting), path(&untrusting));
    let welcomed = check(
        &trusting_rules,
        &signed_by("mx.example.org"),
        &["--explain"],
    );
    assert!(
        welcomed.contains(": ham (score -100.00")
            && welcomed
                .contains("decided by the rule scored as decisive: USER_IN_DKIM_WELCOMELIST"),
        "{welcomed}"
    );
    // Our rules/ score what the trusted server found, once a file of one's own trusts it.
    let both = format!("{}:{trusting_rules}", path(&repo_rules()));
    let out = check(&both, &signed_by("mx.example.org"), &["--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let rules = json["rules"].to_string();
    assert!(
        rules.contains("\"DKIM_VALID_AU\"") && rules.contains("\"USER_IN_DKIM_WELCOMELIST\""),
        "{json}"
    );
    for (rules, server) in [
        (&trusting_rules, "mx.evil.example"),
        (&untrusting_rules, "mx.example.org"),
    ] {
        let out = check(rules, &signed_by(server), &["--explain"]);
        assert!(out.contains(": unsure ("), "{server}: {out}");
    }

    // `rules check` says whom the rules trust, or that they trust no one; a note is no error.
    for (file, said) in [
        (
            &untrusting,
            "note: 2 rule(s) read Authentication-Results, but no authres_trusted_authserv",
        ),
        (
            &trusting,
            "2 rule(s) read the Authentication-Results of mx.example.org",
        ),
    ] {
        let out = spamnb(&db)
            .args(["rules", "check"])
            .arg(file)
            .output()
            .expect("run");
        assert!(
            out.status.success() && text(&out.stdout).contains(said),
            "{}",
            text(&out.stdout)
        );
    }

    if have("spamc") {
        let d = daemon_with_rules(dir.path(), &db, &trusting);
        let out = d.spamc(&["-c"], signed_by("mx.example.org").as_bytes());
        assert!(
            text(&out.stdout).starts_with("-100.0/"),
            "{}",
            text(&out.stdout)
        );
        let out = d.spamc(&["-c"], signed_by("mx.evil.example").as_bytes());
        assert!(
            !text(&out.stdout).starts_with("-100.0/"),
            "{}",
            text(&out.stdout)
        );
        // Whom it trusts is in the log, for whoever wonders why a welcomelist hits.
        assert!(
            d.log()
                .contains("rules: reading the Authentication-Results of mx.example.org"),
            "{}",
            d.log()
        );
    }
}
