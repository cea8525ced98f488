//! `spamnb eval`: online mode against learn-then-check done by hand with the same binary,
//! determinism under a seed, and the Bernoulli model refused for the store.

use std::path::{Path, PathBuf};

use crate::util::{spamnb, text, write};

/// Words that make a message spammy or hammy; each message takes a few of its class's
/// words and a few shared ones, so the model has something to learn and to get wrong.
const SPAMMY: &[&str] = &[
    "viagra", "winner", "prize", "casino", "loan", "offer", "cheap", "click", "free", "bonus",
];
const HAMMY: &[&str] = &[
    "meeting", "agenda", "patch", "review", "lunch", "report", "draft", "kernel", "budget", "notes",
];
const SHARED: &[&str] = &[
    "hello", "today", "please", "thanks", "week", "free", "offer", "review",
];

/// `n` spam and `n` ham messages, dated so that the classes interleave.
fn mail(dir: &Path, n: usize) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut spam, mut ham) = (Vec::new(), Vec::new());
    for i in 0..2 * n {
        let is_spam = i % 2 == 1;
        let words = if is_spam { SPAMMY } else { HAMMY };
        let pick = |k: usize, from: &[&str]| from[(i * 7 + k * 3) % from.len()].to_string();
        let body: Vec<String> = (0..6)
            .map(|k| pick(k, words))
            .chain((0..3).map(|k| pick(k + i, SHARED)))
            .collect();
        let msg = format!(
            "From: sender{}@example.org\nTo: you@example.net\nSubject: {}\nDate: Mon, 1 Jan 2024 {:02}:{:02}:00 +0000\nMessage-ID: <m{i}@example.org>\n\n{}\n",
            i % 5,
            pick(9, words),
            i / 60,
            i % 60,
            body.join(" ")
        );
        let name = format!("{}/{i:03}.eml", if is_spam { "spam" } else { "ham" });
        let path = write(dir, &name, msg);
        if is_spam {
            spam.push(path)
        } else {
            ham.push(path)
        }
    }
    (spam, ham)
}

fn config(dir: &Path) -> PathBuf {
    // A verdict from the second message on, so that the online run has decisions to compare.
    write(dir, "spamnb.toml", "[model]\nmin_learned = 1\n")
}

fn eval(
    db: &Path,
    cfg: &Path,
    args: &[&str],
    spam: &[PathBuf],
    ham: &[PathBuf],
) -> std::process::Output {
    let mut cmd = spamnb(db);
    cmd.env("SPAMNB_CONFIG", cfg)
        .arg("eval")
        .args(args)
        .arg("--spam")
        .args(spam)
        .arg("--ham")
        .args(ham);
    let out = cmd.output().expect("run spamnb eval");
    assert!(
        out.status.success(),
        "eval {args:?} failed: {}",
        text(&out.stderr)
    );
    out
}

/// With a rule scored as decisive that hits mail of both classes: eval must overrule the
/// words as `check` does.
#[test]
fn online_mode_equals_learn_then_check_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let (spam, ham) = mail(dir.path(), 12);
    let cfg = config(dir.path());
    let rules = write(
        dir.path(),
        "local.cf",
        "header LOCAL_BLOCKED From =~ /^sender3\\@/\ndescribe LOCAL_BLOCKED A sender blocked here\nscore LOCAL_BLOCKED 100\n",
    );
    let rules = rules.to_str().unwrap();
    let scores = dir.path().join("scores.tsv");
    eval(
        &dir.path().join("unused-db"),
        &cfg,
        &[
            "--rules",
            rules,
            "--online",
            "--order",
            "date",
            "--scores",
            scores.to_str().unwrap(),
        ],
        &spam,
        &ham,
    );
    let tsv = std::fs::read_to_string(&scores).unwrap();
    let online: Vec<(String, String, f64)> = tsv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[2].to_string(), f[3].to_string(), f[4].parse().unwrap())
        })
        .collect();
    assert_eq!(online.len(), 24, "{tsv}");

    // By hand: in date order (the file names follow it), check each message against the
    // database, then learn it with its label.
    let db = dir.path().join("db");
    let mut by_date: Vec<&PathBuf> = spam.iter().chain(&ham).collect();
    by_date.sort_by_key(|p| p.file_name().unwrap().to_owned());
    for (path, (name, class, score)) in by_date.iter().zip(&online) {
        assert_eq!(
            name,
            &path.display().to_string(),
            "online order is date order"
        );
        let out = spamnb(&db)
            .env("SPAMNB_CONFIG", &cfg)
            .env("SPAMNB_RULES", rules)
            .args(["check", "--format", "json"])
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let by_hand = v["score"].as_f64().unwrap();
        assert!(
            (by_hand - score).abs() <= 1e-9 * score.abs().max(1.0),
            "{name}: online {score}, by hand {by_hand}"
        );
        let flag = if class == "spam" { "--spam" } else { "--ham" };
        let out = spamnb(&db)
            .env("SPAMNB_CONFIG", &cfg)
            .env("SPAMNB_RULES", rules)
            .args(["learn", flag])
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    // The rule decided: every message from the blocked sender is spam, ham among them.
    let blocked: Vec<_> = online
        .iter()
        .filter(|(name, ..)| {
            std::fs::read_to_string(name)
                .unwrap()
                .starts_with("From: sender3@")
        })
        .collect();
    assert!(
        blocked.iter().any(|(_, c, _)| c == "ham") && blocked.iter().all(|(.., s)| *s > 50.0),
        "{blocked:?}"
    );
    // The model learned something: the last messages the rule left to it are told apart.
    assert!(
        online
            .iter()
            .rev()
            .filter(|(_, _, s)| s.abs() < 50.0)
            .take(6)
            .all(|(_, c, s)| (c == "spam") == (*s > 0.0)),
        "{online:?}"
    );
}

#[test]
fn cross_validation_is_deterministic_under_a_seed() {
    let dir = tempfile::tempdir().unwrap();
    let (spam, ham) = mail(dir.path(), 30);
    let cfg = config(dir.path());
    let db = dir.path().join("db");
    let run = |seed: &str| -> (serde_json::Value, Vec<f64>) {
        let tsv = dir.path().join(format!("scores-{seed}.tsv"));
        let args = [
            "--folds",
            "5",
            "--seed",
            seed,
            "--format",
            "json",
            "--target-fp",
            "1%",
            "--scores",
            tsv.to_str().unwrap(),
        ];
        let out = eval(&db, &cfg, &args, &spam, &ham);
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["seconds"] = serde_json::Value::Null;
        v["parse_seconds"] = serde_json::Value::Null;
        let scores = std::fs::read_to_string(&tsv)
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split('\t').nth(4).unwrap().parse().unwrap())
            .collect();
        (v, scores)
    };
    let (a, a_scores) = run("7");
    let (b, b_scores) = run("7");
    // Equal to the last few bits: a Features bag iterates in its HashMap's per-process
    // order, so sums of the same terms may round differently from run to run.
    assert!(same(&a, &b), "the same seed gives the same report");
    assert!(
        same(&a_scores.clone().into(), &b_scores.into()),
        "the same seed gives the same scores"
    );
    let (_, c_scores) = run("8");
    assert!(
        !same(&a_scores.into(), &c_scores.into()),
        "another seed, other folds, other scores"
    );
    let folds = a["rows"][0]["per_fold"].as_array().unwrap();
    assert_eq!(folds.len(), 5);
    for f in folds {
        // Stratified: 60 messages, half spam, in five folds of 6 spam and 6 ham.
        let c = &f["confusion"];
        let spam = c["tp"].as_u64().unwrap() + c["fn"].as_u64().unwrap();
        let ham = c["fp"].as_u64().unwrap() + c["tn"].as_u64().unwrap();
        assert_eq!((spam, ham), (6, 6), "{f}");
    }
    assert_eq!(a["rows"][0]["micro"]["messages"], 60);
    // --target-fp asked for advice: "the same" must not be two missing ones.
    let chosen = &a["rows"][0]["advice"]["chosen"];
    assert!(
        chosen["spam_threshold"].is_number(),
        "advice was given: {chosen}"
    );
}

/// `eval` and `rules stats` counted files that are not mail (a binary, notes) as messages
/// of their class, where `learn` names them and leaves them out: so they do, exit 2.
#[test]
fn eval_and_rules_stats_leave_out_what_is_not_mail_and_name_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut spam, ham) = mail(dir.path(), 10);
    let notes = write(dir.path(), "spam/notes.txt", "just some notes\nnot mail\n");
    spam.push(notes.clone());
    let named = |out: &std::process::Output| {
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("{}: not a mail message", notes.display())),
            "{err}"
        );
    };
    let tsv = dir.path().join("scores.tsv");
    let out = spamnb(&dir.path().join("db"))
        .env("SPAMNB_CONFIG", config(dir.path()))
        .args(["eval", "--folds", "2", "--format", "json", "--scores"])
        .arg(&tsv)
        .arg("--spam")
        .args(&spam)
        .arg("--ham")
        .args(&ham)
        .output()
        .unwrap();
    named(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["rows"][0]["micro"]["messages"], 20);
    let scores = std::fs::read_to_string(&tsv).unwrap();
    assert!(!scores.contains("notes.txt"), "{scores}");

    let rules = write(dir.path(), "r.cf", "header ANY_SUBJECT Subject =~ /./\n");
    let out = spamnb(&dir.path().join("db"))
        .env("SPAMNB_RULES", &rules)
        .args(["rules", "stats", "--spam"])
        .args(&spam)
        .arg("--ham")
        .args(&ham)
        .output()
        .unwrap();
    named(&out);
    let shown = text(&out.stdout);
    assert!(shown.starts_with("10 spam, 10 ham"), "{shown}");
}

/// `--holdout 0` was taken, though its message says "above 0", and reported on no mail;
/// folds that learn fewer than `[model] min_learned` messages of a class gave every message
/// unsure at score 0, reported as figures, without a word.
#[test]
fn eval_refuses_no_holdout_and_names_folds_that_learn_too_little() {
    let dir = tempfile::tempdir().unwrap();
    let (spam, ham) = mail(dir.path(), 10);
    let run = |cfg: &Path, args: &[&str]| {
        spamnb(&dir.path().join("db"))
            .env("SPAMNB_CONFIG", cfg)
            .arg("eval")
            .args(args)
            .arg("--spam")
            .args(&spam)
            .arg("--ham")
            .args(&ham)
            .output()
            .unwrap()
    };
    let out = run(&config(dir.path()), &["--holdout", "0"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--holdout 0: give the fraction"), "{err}");
    // Under the default min_learned (50), each of 2 folds learns 5 of each class.
    let out = run(Path::new("/dev/null"), &["--folds", "2"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    for fold in 1..=2 {
        let said = format!(
            "fold {fold} of 2 learns 5 spam and 5 ham, fewer than [model] min_learned (50)"
        );
        assert!(err.contains(&said), "{err}");
    }
    let out = run(&config(dir.path()), &["--folds", "2"]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn sweep_writes_a_plot_and_bernoulli_stays_out_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (spam, ham) = mail(dir.path(), 20);
    let cfg = config(dir.path());
    let plot = dir.path().join("plot.svg");
    let out = eval(
        &dir.path().join("db"),
        &cfg,
        &[
            "--folds",
            "4",
            "--sweep",
            "vocab=5,all",
            "--models",
            "multinomial,bernoulli,binary-multinomial",
            "--plot",
            plot.to_str().unwrap(),
        ],
        &spam,
        &ham,
    );
    let table = text(&out.stdout);
    assert_eq!(table.matches("bernoulli").count(), 2, "{table}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 3, "one line per model");

    let bad = write(
        dir.path(),
        "bernoulli.toml",
        "[model]\nevent_model = \"bernoulli\"\n",
    );
    let out = spamnb(&dir.path().join("db2"))
        .env("SPAMNB_CONFIG", &bad)
        .args(["check"])
        .arg(&spam[0])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("spamnb eval"),
        "{}",
        text(&out.stderr)
    );
}

/// JSON values equal, numbers to a relative 1e-9.
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value::{Array, Number, Object};
    match (a, b) {
        (Number(x), Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(1.0)
        }
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Object(x), Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn fixed_split_on_the_corpus_sorts_most_mail() {
    let Some(root) = crate::util::corpus() else {
        return;
    };
    let spam = crate::util::corpus_files(&root, "spam-2", 300);
    let ham = crate::util::corpus_files(&root, "easy-ham-1", 300);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = spamnb(&dir.path().join("db"));
    cmd.args([
        "eval",
        "--format",
        "json",
        "--folds",
        "3",
        "--target-fp",
        "1%",
    ])
    .arg("--spam")
    .args(&spam[..200])
    .arg("--ham")
    .args(&ham[..200])
    .arg("--test-spam")
    .args(&spam[200..])
    .arg("--test-ham")
    .args(&ham[200..]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &v["rows"][0];
    assert_eq!(row["micro"]["messages"], 200, "scored on the test set only");
    let auc = row["micro"]["one_minus_auc_pct"].as_f64().unwrap();
    assert!(auc < 5.0, "1-AUC {auc}% on 200 corpus messages");
    let advice = &row["advice"]["chosen"];
    assert!(
        advice["ham_threshold"].as_f64().unwrap() <= advice["spam_threshold"].as_f64().unwrap(),
        "{advice}"
    );
}

/// Autolearning is replayed as the daemon's store learns: settings it cannot learn under
/// are refused, not scored quietly without it.
#[test]
fn autolearning_refuses_settings_the_store_cannot_learn() {
    let dir = tempfile::tempdir().unwrap();
    let (spam, ham) = mail(dir.path(), 8);
    let cfg = config(dir.path());
    let run = |extra: &[&str]| {
        spamnb(&dir.path().join("db"))
            .env("SPAMNB_CONFIG", &cfg)
            .args(["eval", "--autolearn", "--folds", "2"])
            .args(extra)
            .arg("--spam")
            .args(&spam[..4])
            .arg("--ham")
            .args(&ham[..4])
            .arg("--test-spam")
            .args(&spam[4..])
            .arg("--test-ham")
            .args(&ham[4..])
            .output()
            .unwrap()
    };
    assert!(run(&[]).status.success(), "the plain replay runs");
    for extra in [&["--vocab", "5"][..], &["--models", "bernoulli"]] {
        let out = run(extra);
        assert!(!out.status.success(), "{extra:?} was scored");
        assert!(
            text(&out.stderr).contains("--autolearn learns as the daemon's store does"),
            "{extra:?}: {}",
            text(&out.stderr)
        );
    }
}
