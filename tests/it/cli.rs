//! The command line: learn, check, filter, stats, export and import, run as a user would.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::util::{corpus, corpus_files, message, run_with_stdin, spamnb, text, write};

const SPAM_WORDS: &[&str] = &[
    "viagra",
    "winner",
    "prize",
    "cash",
    "offer",
    "cheap",
    "pills",
    "casino",
    "bonus",
    "click",
    "unsubscribe",
    "guaranteed",
    "million",
    "credit",
    "loan",
    "refinance",
];
const HAM_WORDS: &[&str] = &[
    "meeting", "agenda", "project", "review", "patch", "release", "lunch", "budget", "draft",
    "schedule", "minutes", "thanks", "kernel", "build", "tests", "report",
];

/// A corpus written for the test: `n` messages of each class, each different (a seeded LCG
/// picks the words), with a few words both classes share.
fn make_mail(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    let mut seed: u64 = 0x5eed;
    let mut next = move |m: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % m
    };
    for (class, words) in [("spam", SPAM_WORDS), ("ham", HAM_WORDS)] {
        for i in 0..n {
            let body: Vec<&str> = (0..30)
                .map(|_| {
                    if next(4) == 0 {
                        ["the", "and", "you", "today"][next(4)]
                    } else {
                        words[next(words.len())]
                    }
                })
                .collect();
            let subject = format!("{} {}", words[next(words.len())], i);
            write(
                dir,
                &format!("{class}/{i:03}.eml"),
                message(&subject, &body.join(" ")),
            );
        }
    }
    (dir.join("spam"), dir.join("ham"))
}

fn stats(db: &Path) -> serde_json::Value {
    let out = spamnb(db)
        .args(["stats", "--format", "json"])
        .output()
        .expect("run");
    assert!(out.status.success(), "stats failed: {}", text(&out.stderr));
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats json");
    // What was learned, not how sled laid it out.
    v.as_object_mut().expect("an object").remove("size_on_disk");
    v
}

fn learn(db: &Path, class: &str, paths: &[&Path]) -> String {
    let out = spamnb(db)
        .arg("learn")
        .arg(format!("--{class}"))
        .args(paths)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "learn --{class} failed: {}",
        text(&out.stderr)
    );
    text(&out.stderr)
}

fn check_tsv(db: &Path, paths: &[&Path]) -> Vec<Vec<String>> {
    let out = spamnb(db)
        .args(["check", "--format", "tsv"])
        .args(paths)
        .output()
        .expect("run");
    assert!(out.status.success(), "check failed: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn learn_check_relearn_forget() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    let summary = learn(&db, "spam", &[&spam]);
    assert!(summary.contains("learned 60 as spam"), "{summary}");
    learn(&db, "ham", &[&ham]);
    let before = stats(&db);
    assert_eq!(before["messages"]["spam"], 60);
    assert_eq!(before["messages"]["ham"], 60);
    assert_eq!(before["ledger_entries"], 120);

    // New mail of each kind is told apart; tsv is PATH, VERDICT, SCORE, PROBABILITY.
    let probe = tmp.path().join("probe");
    let new_spam = write(
        &probe,
        "s.eml",
        message("cheap pills", "winner cash prize casino bonus click now"),
    );
    let new_ham = write(
        &probe,
        "h.eml",
        message(
            "meeting agenda",
            "draft agenda for the project review and budget",
        ),
    );
    let rows = check_tsv(&db, &[&new_spam, &new_ham]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0][0], new_spam.display().to_string());
    assert_eq!(rows[0][1], "spam", "{rows:?}");
    assert_eq!(rows[1][1], "ham", "{rows:?}");
    let (s, h): (f64, f64) = (rows[0][2].parse().unwrap(), rows[1][2].parse().unwrap());
    assert!(s > 0.0 && h < 0.0, "{rows:?}");
    let p: f64 = rows[0][3].parse().unwrap();
    assert!((0.5..=1.0).contains(&p), "{rows:?}");

    // Learning the same mail again changes nothing.
    let again = learn(&db, "spam", &[&spam]);
    assert!(
        again.contains("learned 0 as spam") && again.contains("60 already known"),
        "{again}"
    );
    assert_eq!(stats(&db), before);

    // Learning ham as spam moves it.
    let moved = learn(&db, "spam", &[&ham.join("000.eml"), &ham.join("001.eml")]);
    assert!(moved.contains("relearned 2 as spam"), "{moved}");
    let after = stats(&db);
    assert_eq!(
        (
            after["messages"]["spam"].as_u64(),
            after["messages"]["ham"].as_u64()
        ),
        (Some(62), Some(58))
    );

    // Forgetting them, and moving them back, restores the counts exactly.
    let forgot = learn(
        &db,
        "forget",
        &[&ham.join("000.eml"), &ham.join("001.eml"), &new_ham],
    );
    assert!(
        forgot.contains("forgot 2, 1 were never learned"),
        "{forgot}"
    );
    learn(&db, "ham", &[&ham.join("000.eml"), &ham.join("001.eml")]);
    assert_eq!(stats(&db), before);
}

/// `check --explain` of a message with subject "cash prize" and `body`, as text and as
/// JSON, against a database trained on 60 made-up messages of each class.
fn explained(body: &str) -> (String, serde_json::Value) {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    learn(&db, "spam", &[&spam]);
    learn(&db, "ham", &[&ham]);
    let probe = write(tmp.path(), "p.eml", message("cash prize", body));
    let check = |format: &str| {
        let out = spamnb(&db)
            .args(["check", "--explain", "--format", format])
            .arg(&probe)
            .output()
            .unwrap();
        text(&out.stdout)
    };
    let json = serde_json::from_str(&check("json")).expect("one JSON object per line");
    (check("text"), json)
}

/// The features shown are the mail's own words: a sender's RFC 2231 file name put
/// terminal escapes and a line of its own on the screen of whoever explained it.
#[test]
fn explain_escapes_what_the_sender_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    learn(&db, "spam", &[&spam]);
    learn(&db, "ham", &[&ham]);
    let raw = "From: a@b.example\nSubject: invoice\nMIME-Version: 1.0\n\
        Content-Type: multipart/mixed; boundary=\"X\"\n\n--X\nContent-Type: text/plain\n\n\
        see attached\n--X\nContent-Type: application/octet-stream\n\
        Content-Disposition: attachment; filename*=utf-8''x.%1b%5b31mEXE%0atoken%201%202%20evil\n\
        Content-Transfer-Encoding: base64\n\nTVqQ\n--X--\n";
    let probe = write(tmp.path(), "esc.eml", raw);
    learn(&db, "spam", &[&probe]);
    let out = spamnb(&db)
        .args(["check", "--explain"])
        .arg(&probe)
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert!(shown.contains("att:ext:"), "{shown}");
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
    assert!(!shown.lines().any(|l| l.starts_with("token")), "{shown}");
}

/// A reader that goes (`spamnb check … | head -1`) ends the command quietly, as it ends
/// `cat`: it was no failure, and said "Broken pipe" with exit 2.
#[test]
fn a_reader_that_goes_ends_check_and_rules_stats_quietly() {
    use std::io::{BufRead, BufReader};
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let file = write(tmp.path(), "m.eml", message("hello", "some words"));
    // rules stats too: enough rules that their report outgrows the pipe.
    let rules: String = (0..4_000)
        .map(|i| format!("body R{i} /some(?:{i})?/\ndescribe R{i} Rule {i}\n"))
        .collect();
    let rules = write(tmp.path(), "many.cf", rules);
    let commands: [Vec<&OsStr>; 2] = [
        ["check", "--format", "tsv"]
            .map(OsStr::new)
            .into_iter()
            .chain(std::iter::repeat_n(file.as_os_str(), 5_000))
            .collect(),
        [
            "rules".as_ref(),
            "stats".as_ref(),
            "--rules".as_ref(),
            rules.as_os_str(),
            "--spam".as_ref(),
            file.as_os_str(),
            "--ham".as_ref(),
            file.as_os_str(),
        ]
        .into(),
    ];
    for args in commands {
        let mut child = spamnb(&db)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?}");
        let out = child.wait_with_output().unwrap();
        let said = text(&out.stderr);
        assert!(
            !said.to_lowercase().contains("broken pipe"),
            "{args:?}: {said}"
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {said}");
    }
}

#[test]
fn explain_and_json_name_the_evidence() {
    let (shown, v) = explained("winner casino bonus");
    assert!(shown.contains(": spam (score"), "{shown}");
    assert!(
        shown.contains("winner") && shown.contains("subj:cash"),
        "{shown}"
    );
    assert_eq!(v["verdict"], "spam");
    assert!(
        v["reasons"].as_array().is_some_and(|r| !r.is_empty()),
        "{v}"
    );
}

/// A message with more features than the strongest few: the explanation gives both halves
/// of the score, and they add up to it.
#[test]
fn explain_shows_how_the_score_is_made() {
    let body = SPAM_WORDS
        .iter()
        .chain(HAM_WORDS)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let (shown, v) = explained(&body);
    assert!(shown.contains(" strongest of "), "{shown}");
    let parts = &v["parts"];
    let count = |key: &str| parts[key].as_u64().unwrap_or_else(|| panic!("{key}: {v}"));
    assert!(count("strongest_count") < count("all_count"), "{v}");
    let f = |key: &str| parts[key].as_f64().expect("a number");
    let blend = (1.0 - f("all_share")) * f("strongest") + f("all_share") * f("all");
    let score = v["score"].as_f64().unwrap();
    assert!((blend - score).abs() < 1e-9, "{blend} against {score}");
}

#[test]
fn too_little_learned_is_unsure() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 5);
    learn(&db, "spam", &[&spam]);
    learn(&db, "ham", &[&ham]);
    let out = spamnb(&db)
        .arg("check")
        .arg(spam.join("000.eml"))
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert!(
        shown.contains("unsure") && shown.contains("needs 45 more spam and 45 more ham"),
        "{shown}"
    );
}

/// A command that only reads, pointed at a database that is not there (a typo in `--db`),
/// says so and leaves nothing behind: a database made there would answer "unsure" from then
/// on. Learning makes one.
#[test]
fn reading_a_missing_database_warns_and_makes_none() {
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let db = tmp.path().join("typo/db");
    let mail = write(tmp.path(), "m.eml", message("Lunch", "See you at noon."));
    let warned = |out: &std::process::Output, what: &str| {
        let log = text(&out.stderr);
        assert!(out.status.success(), "{what}: {log}");
        assert!(
            log.contains(&format!("no database at {}", db.display())),
            "{what}: {log}"
        );
        assert!(
            !log.contains('\u{1b}'),
            "{what}: colours in a log that is no terminal: {log}"
        );
        assert!(!db.exists(), "{what} made a database at {}", db.display());
        assert!(
            !tmp.path().join("typo").exists(),
            "{what} made its directory"
        );
        assert_eq!(
            std::fs::read_dir(scratch.path()).unwrap().count(),
            0,
            "{what} left its empty database behind"
        );
        text(&out.stdout)
    };
    let run = |args: &[&str]| {
        spamnb(&db)
            .env("TMPDIR", scratch.path())
            .args(args)
            .output()
            .unwrap()
    };
    let shown = warned(&run(&["check", mail.to_str().unwrap()]), "check");
    assert!(
        shown.contains("unsure") && shown.contains("needs 50 more spam"),
        "{shown}"
    );
    let shown = warned(&run(&["stats", "--format", "json"]), "stats");
    let v: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(v["messages"]["spam"], 0, "{shown}");
    let raw = std::fs::read(&mail).unwrap();
    let out = run_with_stdin(
        spamnb(&db).env("TMPDIR", scratch.path()).arg("filter"),
        &raw,
    );
    let tagged = warned(&out, "filter");
    assert!(
        tagged.contains("X-Spam-Status: ") && tagged.ends_with("See you at noon.\n"),
        "{tagged}"
    );
    warned(&run(&["export"]), "export");

    // An empty directory holds no database either (made ready for one, or a mount point
    // left unmounted).
    std::fs::create_dir_all(&db).unwrap();
    for args in [&["check", mail.to_str().unwrap()][..], &["stats"]] {
        let out = run(args);
        let log = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {log}");
        assert!(log.contains("no database at"), "{args:?}: {log}");
        assert_eq!(std::fs::read_dir(&db).unwrap().count(), 0, "{args:?}");
    }

    learn(&db, "ham", &[&mail]);
    assert!(
        db.join("spamnb-database").exists(),
        "learn makes the database"
    );
}
#[test]
fn export_import_round_trip_reproduces_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    learn(&db, "spam", &[&spam]);
    learn(&db, "ham", &[&ham]);
    let dump = tmp.path().join("model.txt");
    let out = spamnb(&db).arg("export").arg(&dump).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let copy = tmp.path().join("copy");
    let out = spamnb(&copy).arg("import").arg(&dump).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stats(&db)["messages"], stats(&copy)["messages"]);
    assert_eq!(stats(&db)["tokens"], stats(&copy)["tokens"]);
    assert_eq!(stats(&copy)["ledger_digest"], "as-sent");
    let probe = make_mail(&tmp.path().join("probe"), 8);
    assert_eq!(
        check_tsv(&db, &[&probe.0, &probe.1]),
        check_tsv(&copy, &[&probe.0, &probe.1])
    );
    // The ledger came along: relearning is still a no-op.
    assert!(learn(&copy, "spam", &[&spam]).contains("60 already known"));
    // A second import would mix two models: refused.
    let out = spamnb(&copy).arg("import").arg(&dump).output().unwrap();
    assert!(
        !out.status.success() && text(&out.stderr).contains("already holds learned mail"),
        "{}",
        text(&out.stderr)
    );
    // A damaged dump names the line.
    let bad = write(
        tmp.path(),
        "bad.txt",
        "spamnb-export 1\ntotals 1 1\ntoken 1 x 1 1 word\n",
    );
    let out = spamnb(&tmp.path().join("fresh"))
        .arg("import")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains("line 3"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn filter_tags_and_fails_open() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    learn(&db, "spam", &[&spam]);
    learn(&db, "ham", &[&ham]);

    let forged = "X-Spam-Flag: NO\nX-Spam-Status: No, score=-100\nSubject: cheap pills\n\nwinner cash prize casino\n";
    let out = run_with_stdin(spamnb(&db).args(["filter", "-E"]), forged.as_bytes());
    let tagged = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "-E exits 1 for spam; stderr {}",
        text(&out.stderr)
    );
    assert!(
        tagged.contains("X-Spam-Flag: YES") && !tagged.contains("X-Spam-Flag: NO"),
        "{tagged}"
    );
    assert!(
        !tagged.contains("score=-100"),
        "forged status removed: {tagged}"
    );
    assert!(
        tagged.ends_with("\n\nwinner cash prize casino\n"),
        "{tagged}"
    );
    let out = run_with_stdin(spamnb(&db).arg("filter"), forged.as_bytes());
    assert_eq!(out.status.code(), Some(0), "without -E the filter exits 0");

    // With a subject tag, the spam's subject carries it, and the tagged message, checked
    // again, scores as it did: the tag is of words the model knows as ham's, which would
    // lower the score were they read.
    let tagging = write(
        tmp.path(),
        "tag.toml",
        "[model]\nsubject_tag = \"[meeting agenda]\"\n",
    );
    let out = run_with_stdin(
        spamnb(&db).env("SPAMNB_CONFIG", &tagging).arg("filter"),
        forged.as_bytes(),
    );
    let subject_tagged = text(&out.stdout);
    assert!(
        subject_tagged.starts_with("Subject: [meeting agenda] cheap pills\n")
            && subject_tagged.contains("\nX-Spam-Prev-Subject: cheap pills\n"),
        "{subject_tagged}"
    );
    // Filtered twice (the milter, then `filter` at delivery), it is tagged once, and
    // scored as the first time: the tag is not read as its words.
    let out = run_with_stdin(
        spamnb(&db).env("SPAMNB_CONFIG", &tagging).arg("filter"),
        subject_tagged.as_bytes(),
    );
    let twice = text(&out.stdout);
    let status = |m: &str| {
        m.lines()
            .find(|l| l.starts_with("X-Spam-Status:"))
            .map(str::to_owned)
    };
    assert!(
        twice.starts_with("Subject: [meeting agenda] cheap pills\n")
            && twice.matches("X-Spam-Prev-Subject: cheap pills\n").count() == 1
            && status(&twice) == status(&subject_tagged),
        "{twice}"
    );
    let again = write(tmp.path(), "tagged.eml", &subject_tagged);
    let first = write(tmp.path(), "first.eml", forged);
    let rows = check_tsv(&db, &[&first, &again]);
    assert_eq!(rows[0][2], rows[1][2], "{rows:?}");

    // The same verdict as `check` on the same bytes.
    let file = write(tmp.path(), "f.eml", forged);
    let row = &check_tsv(&db, &[&file])[0];
    assert!(
        tagged.contains(&format!("score={:.1}", row[2].parse::<f64>().unwrap())),
        "{tagged} vs {row:?}"
    );

    // Garbage passes through whole.
    let garbage: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let out = run_with_stdin(spamnb(&db).arg("filter"), &garbage);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stdout
            .windows(garbage.len())
            .any(|w| w == garbage.as_slice()),
        "garbage kept whole"
    );

    // A database that cannot be opened: the message comes out unchanged.
    let foreign = tmp.path().join("foreign");
    write(&foreign, "notes.txt", "not a database");
    let msg = message("hello", "a plain message");
    let out = run_with_stdin(spamnb(&foreign).arg("filter"), msg.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), msg);
    assert!(
        text(&out.stderr).contains("not a spamnb database"),
        "{}",
        text(&out.stderr)
    );

    // Nor does an environment the command line cannot parse lose it: procmail without `w`
    // delivered a failed filter's empty output.
    for (name, value) in [("SPAMNB_FILTER_TIMEOUT", "5s"), ("SPAMNB_LOCK_WAIT", "")] {
        let out = run_with_stdin(spamnb(&db).env(name, value).arg("filter"), msg.as_bytes());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), msg);
        assert!(
            text(&out.stderr).contains("unchanged"),
            "{}",
            text(&out.stderr)
        );
    }
    // Other commands still fail on it.
    let out = spamnb(&db)
        .env("SPAMNB_LOCK_WAIT", "5s")
        .arg("stats")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn bad_input_is_named_and_the_batch_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    learn(&db, "ham", &[&ham]);
    let before = stats(&db);

    let bad = tmp.path().join("bad");
    write(&bad, "empty.eml", "");
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    write(&bad, "garbage.bin", &garbage);
    write(
        &bad,
        "truncated.mbox",
        "From a@b Mon Jan  1 00:00:00 2024\nSubject: one\n\nfirst\n\nFrom c@d Mon Jan  1 00:00:00 2024\nSubject: two\n\ncut of",
    );
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), bad.join("dangling.eml")).unwrap();
    let mut huge = b"Subject: huge\n\n".to_vec();
    huge.extend(
        std::iter::repeat_n(b"word another line of text\n".as_slice(), 50 << 20 >> 5).flatten(),
    );
    write(&bad, "huge.eml", &huge);

    let out = spamnb(&db)
        .args(["learn", "--spam"])
        .arg(&bad)
        .arg(&spam)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "unreadable inputs make exit 2: {err}"
    );
    assert!(err.contains("empty.eml: empty"), "{err}");
    assert!(err.contains("dangling.eml: no such file"), "{err}");
    assert!(err.contains("garbage.bin: not a mail message"), "{err}");
    // huge, the two mbox messages and the 60 spam are learned
    assert!(
        err.contains("learned 63 as spam") && err.contains("3 unreadable"),
        "{err}"
    );
    let after = stats(&db);
    assert_eq!(
        after["messages"]["ham"], before["messages"]["ham"],
        "nothing learned before is lost"
    );
    assert_eq!(after["messages"]["spam"], 63);

    // check keeps one line per input, in order, even for the unreadable.
    let out = spamnb(&db)
        .args(["check", "--format", "tsv"])
        .arg(bad.join("dangling.eml"))
        .arg(bad.join("garbage.bin"))
        .output()
        .unwrap();
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!("{}\terror\t", bad.join("dangling.eml").display())),
        "{lines:?}"
    );
    assert_eq!(out.status.code(), Some(2));
}

/// `check --format tsv` is one line of four fields per input: a file name with a tab or a
/// newline broke it, two names that are not UTF-8 printed the same (U+FFFD for each byte),
/// and an input that could not be read printed as an `unsure` verdict.
#[test]
fn check_names_every_path_on_one_line_of_its_own() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let odd = tmp.path().join("odd");
    let mail = message("hi", "hello");
    let names: [&[u8]; 6] = [
        b"tab\tname",
        b"new\nline",
        b"e\xfe",
        b"e\xff",
        b"e\\xfe",
        b"esc\x1b[31m",
    ];
    let escaped = [
        "tab\\tname",
        "new\\nline",
        "e\\xfe",
        "e\\xff",
        "e\\\\xfe",
        "esc\\x1b[31m",
    ];
    std::fs::create_dir(&odd).unwrap();
    let mut paths: Vec<PathBuf> = names
        .iter()
        .map(|n| odd.join(OsStr::from_bytes(n)))
        .collect();
    for path in &paths {
        std::fs::write(path, &mail).unwrap();
    }
    paths.push(odd.join("missing"));
    let run = |format: &str| {
        let out = spamnb(&tmp.path().join("db"))
            .args(["check", "--format", format])
            .args(&paths)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let tsv = run("tsv");
    let lines: Vec<Vec<&str>> = tsv.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), paths.len(), "{tsv}");
    let prefix = format!("{}/", odd.display());
    for (fields, want) in lines.iter().zip(escaped.iter().chain(&["missing"])) {
        assert_eq!(fields.len(), 4, "{tsv}");
        assert_eq!(fields[0], format!("{prefix}{want}"), "{tsv}");
    }
    assert_eq!(lines[0][1], "unsure", "{tsv}");
    assert_eq!(lines[6][1], "error", "{tsv}");
    let json: Vec<serde_json::Value> = run("json")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tsv_paths: Vec<&str> = lines.iter().map(|f| f[0]).collect();
    let json_paths: Vec<&str> = json.iter().map(|v| v["path"].as_str().unwrap()).collect();
    assert_eq!(json_paths, tsv_paths);
    assert_eq!(json[6]["verdict"], "error");
}

#[test]
fn unusable_databases_get_one_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let foreign = tmp.path().join("foreign");
    write(&foreign, "data.txt", "someone else's");
    let out = spamnb(&foreign).arg("stats").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not a spamnb database"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(&foreign).unwrap().count(),
        1,
        "nothing written into a foreign directory"
    );

    // A database held by another process that is no daemon (here a learn waiting for its
    // stdin) is waited for: procmail runs a filter per delivery, and one that could not
    // open the database passed its message on untagged.
    let db = tmp.path().join("db");
    learn(
        &db,
        "ham",
        &[&write(tmp.path(), "first.eml", message("x", "y"))],
    );
    let mut holder = spamnb(&db)
        .args(["learn", "--spam", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Time for the learn to open the database.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut filter = spamnb(&db)
        .arg("filter")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    filter
        .stdin
        .take()
        .unwrap()
        .write_all(message("held", "waits its turn").as_bytes())
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        filter.try_wait().unwrap().is_none(),
        "the filter waits while the learn holds the database"
    );
    holder
        .stdin
        .take()
        .unwrap()
        .write_all(message("y", "z").as_bytes())
        .unwrap();
    holder.wait().unwrap();
    let out = filter.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("X-Spam-Status: "),
        "tagged once the database was free: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // Damaged files: a clear error, never a panic.
    let damaged = tmp.path().join("damaged");
    learn(
        &damaged,
        "ham",
        &[&write(tmp.path(), "m.eml", message("x", "y"))],
    );
    for entry in std::fs::read_dir(&damaged).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != "conf" {
            std::fs::write(&path, vec![0xA5u8; 4096]).unwrap();
        }
    }
    let out = spamnb(&damaged).arg("stats").output().unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // sled recovers a wrecked log as an empty database: the marker file tells the two apart.
    assert_eq!(
        out.status.code(),
        Some(2),
        "a wrecked database is an error: {err}"
    );
    assert!(
        err.contains("is damaged") && err.contains("spamnb import"),
        "{err}"
    );

    // A young database (no snapshot yet) whose log was cut short, as a copy stopped halfway
    // leaves it: sled recovers what comes before the cut, which may be its schema alone,
    // and it opened as a database that had learned nothing.
    let mails: Vec<PathBuf> = (0..200)
        .map(|i| {
            let body = format!("offer number{i} cheap pills word{} now", i * 7);
            write(tmp.path(), &format!("s{i}.eml"), message("deal", &body))
        })
        .collect();
    for cut in [10, 50, 90] {
        let young = tmp.path().join(format!("young{cut}"));
        learn(&young, "spam", &refs(&mails));
        let log = young.join("db");
        let len = std::fs::metadata(&log).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(len * cut / 100)
            .unwrap();
        let out = spamnb(&young).arg("stats").output().unwrap();
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(
            out.status.code(),
            Some(2),
            "cut to {cut}%: {err}{}",
            text(&out.stdout)
        );
        assert!(err.contains("is damaged"), "{err}");
    }
}

fn refs(v: &[PathBuf]) -> Vec<&Path> {
    v.iter().map(PathBuf::as_path).collect()
}

#[test]
fn corpus_learn_relearn_forget_round_trip() {
    let Some(root) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let spam = corpus_files(&root, "spam-2", 150);
    let ham = corpus_files(&root, "easy-ham-2", 150);
    learn(&db, "spam", &refs(&spam[..100]));
    learn(&db, "ham", &refs(&ham[..100]));
    let before = stats(&db);
    let held_out: Vec<&Path> = spam[100..]
        .iter()
        .chain(&ham[100..])
        .map(PathBuf::as_path)
        .collect();
    let verdicts = check_tsv(&db, &held_out);
    let right = verdicts
        .iter()
        .enumerate()
        .filter(|(i, row)| row[1] == if *i < 50 { "spam" } else { "ham" })
        .count();
    assert!(
        right >= 90,
        "only {right} of 100 held-out corpus messages right: {verdicts:?}"
    );

    assert!(learn(&db, "ham", &refs(&ham[..100])).contains("100 already known"));
    learn(&db, "ham", &refs(&spam[..10]));
    learn(&db, "spam", &refs(&spam[..10]));
    assert_eq!(
        stats(&db),
        before,
        "relearning there and back restores every count"
    );
    learn(&db, "forget", &refs(&spam[..100]));
    assert_eq!(stats(&db)["messages"]["spam"], 0);

    let dump = tmp.path().join("dump.txt");
    assert!(
        spamnb(&db)
            .arg("export")
            .arg(&dump)
            .status()
            .unwrap()
            .success()
    );
    let copy = tmp.path().join("copy");
    assert!(
        spamnb(&copy)
            .arg("import")
            .arg(&dump)
            .status()
            .unwrap()
            .success()
    );
    let exported_again = spamnb(&copy).arg("export").output().unwrap().stdout;
    assert_eq!(
        std::fs::read(&dump).unwrap(),
        exported_again,
        "export → import → export is stable"
    );
}

/// `learn -` reads one message from stdin, for hooks.
#[test]
fn learn_reads_stdin() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let out = run_with_stdin(
        spamnb(&db).args(["learn", "--ham", "--user", "ann", "-"]),
        message("hi", "see you at lunch").as_bytes(),
    );
    assert!(
        text(&out.stderr).contains("learned 1 as ham"),
        "{}",
        text(&out.stderr)
    );
    let dump = spamnb(&db).arg("export").output().unwrap();
    let ledger: Vec<String> = text(&dump.stdout)
        .lines()
        .filter(|l| l.starts_with("ledger "))
        .map(str::to_string)
        .collect();
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    assert!(
        ledger[0].contains(" ham ") && ledger[0].ends_with(" ann"),
        "the user is in the ledger: {ledger:?}"
    );
}

/// A message piped with its envelope line (as procmail pipes it) is the same message as
/// its copy in a Maildir: `--forget -` takes back what was learned from the file. A pipe
/// does not quote `From ` lines, so a `>From` the sender wrote stays as written.
#[test]
fn stdin_and_file_copies_of_a_message_are_one_message() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let maildir_copy = message("hi", "see you at lunch\n>From the kitchen");
    let piped = format!("From a@b Mon Jan  1 00:00:00 2024\n{maildir_copy}");
    let file = write(tmp.path(), "m.eml", &maildir_copy);
    learn(&db, "spam", &[&file]);
    let out = run_with_stdin(
        spamnb(&db).args(["learn", "--forget", "-"]),
        piped.as_bytes(),
    );
    let err = text(&out.stderr);
    assert!(err.contains("forgot 1, 0 were never learned"), "{err}");
}

/// An mbox's copy of a message, as one of many (an empty line before the next `From `)
/// or alone (`>From ` quoted), is the message learned from its file.
#[test]
fn mbox_and_file_copies_of_a_message_are_one_message() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let envelope = "From a@b Mon Jan  1 00:00:00 2024\n";
    let original = message("hi", "see you at lunch\nFrom the kitchen");
    let quoted = original.replace("\nFrom the", "\n>From the");
    let file = write(tmp.path(), "m.eml", &original);
    let first_of_two = write(
        tmp.path(),
        "two.mbox",
        format!("{envelope}{quoted}\n{envelope}{}\n", message("b", "other")),
    );
    let only = write(tmp.path(), "one.mbox", format!("{envelope}{quoted}"));
    learn(&db, "ham", &[&file]);
    let err = learn(&db, "ham", &[&first_of_two]);
    assert!(
        err.contains("learned 1 as ham") && err.contains("1 already known"),
        "{err}"
    );
    let err = learn(&db, "ham", &[&only]);
    assert!(
        err.contains("learned 0 as ham") && err.contains("1 already known"),
        "{err}"
    );
}

/// A file that is not mail (a binary, a README) is named and not learned; the mail beside
/// it is.
#[test]
fn files_that_are_not_mail_are_not_learned() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let garbage: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let binary = write(tmp.path(), "random.bin", &garbage);
    let readme = write(
        tmp.path(),
        "README.md",
        "# notes\n\nA line: with a colon.\n",
    );
    let mail = write(tmp.path(), "m.eml", message("hi", "see you at lunch"));
    let out = spamnb(&db)
        .args(["learn", "--ham"])
        .args([&binary, &readme, &mail])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for refused in ["random.bin", "README.md"] {
        assert!(
            err.contains(&format!("{refused}: not a mail message")),
            "{err}"
        );
    }
    assert!(
        err.contains("learned 1 as ham") && err.contains("2 unreadable"),
        "{err}"
    );
}

/// A link back up a folder is not followed round and round: each message is learned once,
/// and nothing is reported unreadable.
#[test]
fn a_directory_link_loop_is_learned_once() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let dir = tmp.path().join("in");
    write(&dir, "m.eml", message("hi", "see you at lunch"));
    std::fs::create_dir_all(dir.join("loop")).unwrap();
    std::os::unix::fs::symlink("..", dir.join("loop/up")).unwrap();
    let err = learn(&db, "ham", &[&dir]);
    assert_eq!(
        err.trim(),
        "learned 1 as ham, relearned 0 as ham, 0 already known"
    );
}

/// A dump of `tokens` features of 200 bytes each, and enough messages learned for
/// verdicts: buckets big enough that sled keeps them in blob files of their own.
fn big_buckets_dump(dir: &Path, tokens: usize) -> PathBuf {
    let mut dump = String::from("spamnb-export 2\ntotals 100 100\n");
    for i in 0..tokens {
        dump.push_str(&format!("token 1 2 1 1 {}{i:08}\n", "x".repeat(192)));
    }
    // The messages the totals count, each in the ledger.
    for i in 0..200 {
        let class = if i < 100 { "ham" } else { "spam" };
        dump.push_str(&format!("ledger {i:032x} {class} 0 -\n"));
    }
    dump.push_str(&format!("end {tokens} 200\n"));
    write(dir, "big.txt", dump)
}

/// With its blob files gone, a database scored mail as if most of it had never been
/// learned, and said nothing.
#[test]
fn check_fails_on_a_database_missing_its_blobs() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = big_buckets_dump(tmp.path(), 20_000);
    let words: Vec<String> = (0..300).map(|i| format!("word{}", i * 7919)).collect();
    let mail = write(tmp.path(), "m.eml", message("hello", &words.join(" ")));
    // Whether sled still opens without the blobs depends on what its flusher thread had
    // written: tried until it does, for the scoring after it is what is tested.
    for attempt in 0..10 {
        let db = tmp.path().join(format!("db{attempt}"));
        let out = spamnb(&db).arg("import").arg(&dump).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        stats(&db);
        for blob in std::fs::read_dir(db.join("blobs")).unwrap() {
            std::fs::remove_file(blob.unwrap().path()).unwrap();
        }
        let opens = spamnb(&db).arg("stats").output().unwrap();
        let out = spamnb(&db).arg("check").arg(&mail).output().unwrap();
        let err = text(&out.stderr);
        assert!(
            out.status.code() == Some(2) && err.contains("is damaged"),
            "exit {:?}: {err}",
            out.status.code()
        );
        assert!(out.stdout.is_empty(), "a verdict: {}", text(&out.stdout));
        assert!(!err.contains("panicked"), "{err}");
        if opens.status.success() {
            return;
        }
    }
    panic!("the database never opened without its blobs: the scoring was not tested");
}

/// A dump cut at a line boundary loaded as a model with every message counted and few
/// of its tokens, and no ledger.
#[test]
fn import_refuses_a_cut_dump() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    learn(&db, "spam", &[&spam]);
    learn(&db, "ham", &[&ham]);
    let dump = tmp.path().join("model.txt");
    let out = spamnb(&db).arg("export").arg(&dump).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let whole = std::fs::read_to_string(&dump).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    let part = write(
        tmp.path(),
        "part.txt",
        lines[..lines.len() / 2].join("\n") + "\n",
    );
    let copy = tmp.path().join("copy");
    let out = spamnb(&copy).arg("import").arg(&part).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("importing {}", part.display())) && err.contains("cut off"),
        "{err}"
    );
    // No database is left behind, so `check` says there is none rather than answer
    // from an empty one.
    assert!(!copy.exists(), "a refused import made {}", copy.display());
    // The whole dump loads.
    let out = spamnb(&copy).arg("import").arg(&dump).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stats(&copy), {
        let mut s = stats(&db);
        s["database"] = copy.display().to_string().into();
        s
    });
}

/// `spamnb export FILE` truncated FILE before it wrote: an export that failed midway (a
/// full disk, here a limit on the size of the files it writes) left neither the backup made
/// before it nor a new one. Through the daemon, so that the limit meets the dump alone: sled
/// writes as much as its log holds when it opens a database.
#[test]
fn a_failed_export_keeps_the_previous_backup() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = crate::daemon::Daemon::start(
        tmp.path(),
        &tmp.path().join("db"),
        &crate::daemon::Sections::default(),
    );
    let (spam, ham) = make_mail(&tmp.path().join("mail"), 60);
    let run = |args: &[&OsStr]| {
        let out = d.cli().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    };
    run(&["learn".as_ref(), "--ham".as_ref(), ham.as_ref()]);
    let backups = tmp.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    let dump = backups.join("model.txt");
    run(&["export".as_ref(), dump.as_ref()]);
    let before = std::fs::read(&dump).unwrap();
    run(&["learn".as_ref(), "--spam".as_ref(), spam.as_ref()]);
    let limit = before.len() as u64 + 100;
    let mut cmd = d.cli();
    cmd.arg("export").arg(&dump);
    // SAFETY: between fork and exec only setrlimit and signal run, both async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let size = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            // A write past the limit then fails, as on a full disk, instead of killing.
            if libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR
                || libc::setrlimit(libc::RLIMIT_FSIZE, &size) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(
        std::fs::read(&dump).unwrap() == before,
        "the backup was changed"
    );
    let left: Vec<_> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["model.txt"], "the failed export left files behind");
    // Without the limit it is replaced, and a backup kept private stays so.
    std::fs::set_permissions(&dump, std::fs::Permissions::from_mode(0o600)).unwrap();
    run(&["export".as_ref(), dump.as_ref()]);
    let after = std::fs::metadata(&dump).unwrap();
    assert!(after.len() > limit, "{} bytes", after.len());
    assert_eq!(after.permissions().mode() & 0o777, 0o600);
}

/// sled panics at open on some damaged files (a truncated `db`; blobs gone before it
/// was opened again, here, which is the case that can be made on purpose): the panic was
/// caught, but its message and backtrace reached stderr before the clear message.
#[test]
fn a_database_sled_panics_on_gets_one_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let dump = big_buckets_dump(tmp.path(), 20_000);
    let out = spamnb(&db).arg("import").arg(&dump).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    for blob in std::fs::read_dir(db.join("blobs")).unwrap() {
        std::fs::remove_file(blob.unwrap().path()).unwrap();
    }
    let out = spamnb(&db)
        .arg("stats")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is damaged") && err.contains("learn your mail again"),
        "{err}"
    );
    // The panic's own report, not some other error: the case is the one tested.
    assert!(err.contains("the storage engine could not read"), "{err}");
    assert!(
        !err.contains("panicked at") && !err.contains("backtrace"),
        "{err}"
    );
}

/// `spamnb stats | head -1` panicked: "failed printing to stdout: Broken pipe".
#[test]
fn stats_into_a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    learn(
        &db,
        "ham",
        &[&write(tmp.path(), "m.eml", message("x", "y"))],
    );
    let mut child = spamnb(&db)
        .arg("stats")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes before anything is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// A message that makes the MIME parser panic (mail-parser 0.11.1, found by `fuzz/`) gets
/// its verdict, read as plain text, and one warning; no panic report that reads as if
/// spamnb had crashed.
#[test]
fn a_message_that_panics_the_mime_parser_is_checked_with_one_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let raw = "From: a@example.com\n\
        Content-Type: multipart/alternative; boundary=\"b\"\n\n\
        --b\nContent-Type: text/html\n\nalpha\n\
        --b\nContent-Type: text/html\n\nbeta\n\
        --b\nContent-Type: multipart/alternative; boundary=\"b\"\n\ngamma\n\
        --b\nContent-Type: text/plain\n\nomega\n--b--\n";
    let file = write(tmp.path(), "odd.eml", raw);
    let out = spamnb(&tmp.path().join("db"))
        .args(["check", "--format", "tsv"])
        .arg(&file)
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("unsure"), "{stdout}");
    assert!(stderr.contains("read as plain text"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A variable set but empty (`SPAMNB_DB=` in a hook's environment) is named, not the
/// option it stands for, which the command line never gave.
#[test]
fn an_empty_variable_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let out = spamnb(tmp.path())
        .env("SPAMNB_DB", "")
        .arg("stats")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("SPAMNB_DB is set but empty"), "{err}");
    // Given on the command line, the option is what is wrong.
    let out = spamnb(tmp.path())
        .env("SPAMNB_DB", "")
        .args(["stats", "--db", ""])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("SPAMNB_DB") && err.contains("--db"), "{err}");
}
