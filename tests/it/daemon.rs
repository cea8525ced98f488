//! `spamnb daemon` as an operator runs it: started with a config, reloaded with SIGHUP
//! (a broken file keeps the old config), drained with SIGTERM, reached by the CLI through
//! its control socket, started with no configuration at all, and its systemd unit verified.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util;

/// A daemon under test, in its own directory, with every listener on port 0 or a unix
/// socket there. Killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub dir: PathBuf,
    pub db: PathBuf,
    pub config: PathBuf,
    /// `127.0.0.1:PORT` of the spamd protocol's TCP listener.
    pub spamd: String,
    pub http: String,
    pub control: PathBuf,
    pub spamd_unix: PathBuf,
    log: Arc<Mutex<String>>,
}

/// What a test adds to the generated configuration, per section.
#[derive(Default, Clone)]
pub struct Sections<'a> {
    pub daemon: &'a str,
    pub spamd: &'a str,
    pub model: &'a str,
    /// The `[milter]` section; none when empty.
    pub milter: &'a str,
    /// Rule files (`SPAMNB_RULES`); none when empty.
    pub rules: &'a str,
    /// Whole sections of its own (`[watch]` …), appended as they are.
    pub extra: &'a str,
}

pub fn config_text(dir: &Path, s: &Sections) -> String {
    // Short timeouts keep the tests short; a test may set its own.
    let read_timeout = if s.daemon.contains("read_timeout") {
        ""
    } else {
        "read_timeout = 2\n"
    };
    let milter = if s.milter.is_empty() {
        String::new()
    } else {
        format!("[milter]\n{}\n", s.milter)
    };
    format!(
        "[daemon]\nruntime_dir = {run:?}\n{read_timeout}session_timeout = 20\ndrain_timeout = 10\n{}\n\
         [spamd]\nlisten = [\"inet:127.0.0.1:0\", \"unix:{spamd}\"]\n{}\n\
         [http]\nlisten = \"inet:127.0.0.1:0\"\n[model]\n{}\n{milter}{}\n",
        s.daemon,
        s.spamd,
        s.model,
        s.extra,
        run = dir.join("run"),
        spamd = dir.join("spamd.sock").display(),
    )
}

/// How a daemon under test is started, beyond its configuration: as systemd would.
#[derive(Default)]
pub struct Launch<'a> {
    /// systemd's `NOTIFY_SOCKET`.
    pub notify: Option<&'a Path>,
    /// The umask it starts under (the unit's `UMask=`); the test process's when none.
    pub umask: Option<libc::mode_t>,
}

impl Daemon {
    pub fn start(dir: &Path, db: &Path, sections: &Sections) -> Daemon {
        Daemon::start_with(dir, db, sections, Launch::default())
    }

    /// As [`Daemon::start`], started as `launch` says.
    pub fn start_with(dir: &Path, db: &Path, sections: &Sections, launch: Launch) -> Daemon {
        use std::os::unix::process::CommandExt;
        let config = dir.join("spamnb.toml");
        util::write(dir, "spamnb.toml", config_text(dir, sections));
        let mut command = Command::new(env!("CARGO_BIN_EXE_spamnb"));
        if let Some(mask) = launch.umask {
            // SAFETY: umask is async-signal-safe and touches no memory.
            unsafe {
                command.pre_exec(move || {
                    libc::umask(mask);
                    Ok(())
                });
            }
        }
        let mut child = command
            .arg("--config")
            .arg(&config)
            .arg("--db")
            .arg(db)
            .arg("daemon")
            // Words alone unless asked, as util::spamnb: from the checkout the daemon would
            // load rules/.
            .env(
                "SPAMNB_RULES",
                if sections.rules.is_empty() {
                    "none"
                } else {
                    sections.rules
                },
            )
            .env_remove("SPAMNB_LOG")
            .env_remove("NOTIFY_SOCKET")
            .envs(launch.notify.map(|p| ("NOTIFY_SOCKET", p)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn spamnb daemon");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr");
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let mut l = sink.lock().expect("log lock");
                l.push_str(&line);
                l.push('\n');
            }
        });
        let started = Instant::now();
        loop {
            let text = log.lock().expect("log lock").clone();
            if text.contains(" ready") {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("daemon exited with {status} before it was ready:\n{text}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "daemon not ready in 30 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = log.lock().expect("log lock").clone();
        let find = |kind: &str, scheme: &str| -> String {
            let marker = format!("{kind} listening on {scheme}:");
            text.lines()
                .find_map(|l| {
                    l.split_once(&marker)
                        // The address ends the message: at a space, or a quote in JSON.
                        .map(|(_, rest)| rest.split(['"', ' ']).next().unwrap_or("").to_string())
                })
                .unwrap_or_else(|| panic!("no {marker:?} in the log:\n{text}"))
        };
        Daemon {
            spamd: find("spamd", "inet"),
            http: find("http", "inet"),
            control: PathBuf::from(find("control", "unix")),
            spamd_unix: dir.join("spamd.sock"),
            child,
            dir: dir.into(),
            db: db.into(),
            config,
            log,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }

    /// Waits until the log has `what`, or panics with the log after `timeout`.
    pub fn wait_log(&self, what: &str, timeout: Duration) {
        let started = Instant::now();
        while !self.log().contains(what) {
            assert!(
                started.elapsed() < timeout,
                "no {what:?} in the log after {timeout:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Rewrites the configuration from `sections`, and waits for the daemon to reload it.
    pub fn reload(&self, sections: &Sections) {
        let before = self.log().matches("reloaded the configuration").count();
        std::fs::write(&self.config, config_text(&self.dir, sections)).expect("write config");
        self.signal("HUP");
        let started = Instant::now();
        while self.log().matches("reloaded the configuration").count() == before {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no reload:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{name} failed");
    }

    /// SIGTERM, and waits for the drain to end, unless it has exited already.
    pub fn stop(&mut self) {
        if self.child.try_wait().expect("try_wait").is_none() {
            self.signal("TERM");
            self.wait_exit(Duration::from_secs(20));
        }
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                started.elapsed() < timeout,
                "daemon still running after {timeout:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident memory in kilobytes.
    pub fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    pub fn http_get(&self, path: &str) -> String {
        let mut s = TcpStream::connect(&self.http).expect("connect http");
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read http");
        out
    }

    /// `spamc` against the TCP listener.
    pub fn spamc(&self, args: &[&str], stdin: &[u8]) -> Output {
        let (host, port) = self.spamd.rsplit_once(':').expect("host:port");
        let mut c = Command::new("spamc");
        c.args(["-d", host, "-p", port]).args(args);
        util::run_with_stdin(&mut c, stdin)
    }

    /// `spamc` against a unix socket (the local one, where TELL is allowed).
    pub fn spamc_unix(&self, socket: &Path, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new("spamc");
        c.arg("-U").arg(socket).args(args);
        util::run_with_stdin(&mut c, stdin)
    }

    /// The spamnb CLI with this daemon's configuration and database.
    pub fn cli(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_spamnb"));
        c.arg("--config")
            .arg(&self.config)
            .arg("--db")
            .arg(&self.db)
            .env_remove("SPAMNB_LOG");
        c
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One number from the Prometheus text.
pub fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// A database learned from `n` corpus messages of each class, or `None` without a corpus.
pub fn trained_db(dir: &Path, n: usize) -> Option<PathBuf> {
    let corpus = util::corpus()?;
    let db = dir.join("db");
    for (flag, group) in [("--spam", "spam-1"), ("--ham", "easy-ham-1")] {
        let out = util::spamnb(&db)
            .arg("learn")
            .arg(flag)
            .args(util::corpus_files(&corpus, group, n))
            .output()
            .expect("learn");
        assert!(
            out.status.success(),
            "learn {flag}: {}",
            util::text(&out.stderr)
        );
    }
    Some(db)
}

/// The corpus messages tests score: spam and ham the model was not trained on.
pub fn unseen(n: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let corpus = util::corpus().expect("corpus checked by trained_db");
    let read = |group| {
        util::corpus_files(&corpus, group, n)
            .iter()
            .map(|p| std::fs::read(p).expect("corpus file"))
            .collect()
    };
    (read("spam-2"), read("easy-ham-2"))
}

/// A daemon (re)started while a `learn` holds the database waits for it, then serves; and
/// a command that finds the database held by a daemon whose socket it cannot reach says
/// so at once, instead of waiting for a lock that will not be let go.
#[test]
fn a_daemon_waits_for_a_learn_and_is_named_when_out_of_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let mut holder = util::spamnb(&db)
        .args(["learn", "--spam", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("learn");
    std::thread::sleep(Duration::from_millis(300));
    let mut stdin = holder.stdin.take().expect("stdin");
    let finisher = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        stdin
            .write_all(util::message("held", "until the daemon waited").as_bytes())
            .expect("message to the learn");
    });
    let d = Daemon::start(dir.path(), &db, &Sections::default());
    finisher.join().expect("finisher");
    assert!(holder.wait().expect("learn ends").success());
    let stats = d.cli().arg("stats").output().expect("stats");
    assert!(
        util::text(&stats.stdout).contains("spam learned    1"),
        "{}",
        util::text(&stats.stdout)
    );

    // The same database, through a configuration whose control socket is elsewhere.
    let astray = util::write(
        dir.path(),
        "astray.toml",
        "[control]\nlisten = \"unix:/nonexistent/control.sock\"\n",
    );
    let started = Instant::now();
    let out = util::spamnb(&db)
        .arg("--config")
        .arg(&astray)
        .arg("stats")
        .output()
        .expect("stats");
    let err = util::text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("the daemon holding it is process"), "{err}");
    // Where it looked, and the remedy that fits a daemon started with its own file.
    assert!(
        err.contains("(/nonexistent/control.sock)") && err.contains("--config"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it did not wait: {err}"
    );
}

/// Issue: `check --no-rules` through the daemon was decided by the daemon's GTUBE rule,
/// and a mistyped `--rules` path was taken without a word: a command that goes through
/// the daemon scores with the daemon's rules, and now says so when it was given its own.
#[test]
fn rules_named_for_a_command_through_the_daemon_are_said_to_go_unused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let sections = Sections {
        rules: rules.to_str().expect("UTF-8 path"),
        ..Sections::default()
    };
    let d = Daemon::start(dir.path(), &dir.path().join("db"), &sections);
    let gtube = util::write(
        dir.path(),
        "gtube.eml",
        util::message(
            "test",
            "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X",
        ),
    );
    for named in [
        vec!["--no-rules"],
        vec!["--rules", "/nonexistent/local.cf"],
        vec!["--rules", "none"],
    ] {
        let out = d
            .cli()
            .args(&named)
            .arg("check")
            .arg(&gtube)
            .output()
            .expect("check");
        let (said, err) = (util::text(&out.stdout), util::text(&out.stderr));
        assert!(
            said.contains("GTUBE"),
            "{named:?}: the daemon's rules decide: {said}{err}"
        );
        assert!(
            err.contains("go unused through it"),
            "{named:?}: nothing said of the rules named:\n{err}"
        );
    }
    // Without rules named, nothing to say.
    let out = d.cli().arg("check").arg(&gtube).output().expect("check");
    let err = util::text(&out.stderr);
    assert!(!err.contains("go unused"), "{err}");
}

/// A reload loads the rules again, as start-up does: it once rebuilt the configuration
/// without them, and the daemon went on scoring on words alone.
#[test]
fn sighup_keeps_the_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = util::write(
        dir.path(),
        "test.cf",
        "body ZEBRACORN /zebracorn/i\ndescribe ZEBRACORN a test word\n",
    );
    let rules = rules.to_str().expect("utf-8 path");
    let d = Daemon::start(
        dir.path(),
        &dir.path().join("db"),
        &Sections {
            rules,
            ..Sections::default()
        },
    );
    let probe = util::write(dir.path(), "p.eml", util::message("hi", "a zebracorn here"));
    let rules_hit = || {
        let out = d
            .cli()
            .args(["check", "--explain"])
            .arg(&probe)
            .output()
            .expect("check");
        assert!(out.status.success(), "{}", util::text(&out.stderr));
        util::text(&out.stdout).contains("rules: ZEBRACORN")
    };
    assert!(rules_hit(), "the rule hits before the reload");
    d.signal("HUP");
    d.wait_log("reloaded the configuration", Duration::from_secs(10));
    assert!(rules_hit(), "and after it");
    // The log says how many rules run, which load, and how long compiling took.
    assert!(d.log().contains("ready rules=1"), "{}", d.log());
    assert!(d.log().contains(&format!("rules: {rules}")), "{}", d.log());
    assert!(d.log().contains("compile_ms="), "{}", d.log());
    // A rule file that is gone at a reload (being rewritten, its directory moved) leaves
    // the rules in force: mail is not left unfiltered.
    std::fs::remove_file(rules).expect("remove the rule file");
    d.signal("HUP");
    d.wait_log("keeping the ones in force", Duration::from_secs(10));
    assert!(rules_hit(), "and after a reload that could not read them");
    assert!(d.log().contains("cannot read the rule file"), "{}", d.log());
    // At start there are none in force: a daemon named rules it cannot read does not run
    // without them (GTUBE's and the lists' among them) and one log line to say so.
    let mut second = Command::new(env!("CARGO_BIN_EXE_spamnb"))
        .args(["--config", "/dev/null", "--db"])
        .arg(dir.path().join("db2"))
        .arg("daemon")
        .env("SPAMNB_RULES", rules)
        .env_remove("SPAMNB_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a second daemon");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = second.try_wait().expect("try_wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = second.kill();
            panic!("a daemon named rules it cannot read is running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut said = String::new();
    let _ = second
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut said);
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(
        said.contains("cannot read the rules named") && said.contains(rules),
        "{said}"
    );
}

#[test]
fn sighup_reloads_and_a_broken_config_keeps_the_old_one() {
    if !util::have("spamc") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // The threshold is the point, not the verdict: an untrained database does.
    let d = Daemon::start(
        dir.path(),
        &dir.path().join("db"),
        &Sections {
            model: "spam_threshold = 5.0",
            ..Default::default()
        },
    );
    let mail = util::message("hi", "any words");
    let threshold = |d: &Daemon| {
        let out = d.spamc(&["-c"], mail.as_bytes());
        let text = util::text(&out.stdout);
        text.trim()
            .rsplit('/')
            .next()
            .expect("score/threshold")
            .to_string()
    };
    assert_eq!(threshold(&d), "5.0");

    // A broken file: refused, the daemon keeps serving with the old configuration.
    std::fs::write(&d.config, "[model\nspam_threshold = ").expect("write broken");
    d.signal("HUP");
    d.wait_log("reload refused", Duration::from_secs(10));
    assert!(
        d.log().contains("spamnb.toml:1"),
        "the error names the file and line:\n{}",
        d.log()
    );
    assert_eq!(threshold(&d), "5.0");
    // Invalid values are refused the same way.
    std::fs::write(
        &d.config,
        config_text(
            &d.dir,
            &Sections {
                model: "alpha = -1",
                ..Default::default()
            },
        ),
    )
    .expect("write");
    d.signal("HUP");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.log().matches("reload refused").count(), 2, "{}", d.log());
    assert!(
        d.http_get("/metrics")
            .contains("spamnb_reload_failures_total 2")
    );

    // A good file takes effect without a restart.
    d.reload(&Sections {
        model: "spam_threshold = 7.5",
        ..Default::default()
    });
    assert_eq!(threshold(&d), "7.5");

    // A [watch] section that appears takes a restart, and the log says so rather than
    // leave the operator believing the folders are watched.
    let maildir = d.dir.join("Maildir");
    std::fs::create_dir_all(maildir.join("cur")).expect("mkdir");
    let extra = format!("[watch]\n[watch.users]\nann = {maildir:?}\n");
    std::fs::write(
        &d.config,
        config_text(
            &d.dir,
            &Sections {
                model: "spam_threshold = 6.5",
                extra: &extra,
                ..Default::default()
            },
        ),
    )
    .expect("write");
    d.signal("HUP");
    d.wait_log("[watch] takes a restart", Duration::from_secs(10));
    let wait = std::time::Instant::now();
    while d.log().matches("reloaded the configuration").count() < 2 {
        assert!(wait.elapsed() < Duration::from_secs(10), "{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(threshold(&d), "6.5", "the rest of the file takes effect");
    assert!(!d.log().contains("folder watch: "), "{}", d.log());
    // Reloaded again, the file still asks for what takes a restart: it says so again.
    d.signal("HUP");
    let wait = std::time::Instant::now();
    while d.log().matches("reloaded the configuration").count() < 3 {
        assert!(wait.elapsed() < Duration::from_secs(10), "{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        d.log().matches("[watch] takes a restart").count(),
        2,
        "{}",
        d.log()
    );
}

#[test]
fn sigterm_drains_open_sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Draining is the point, not the verdict: an untrained database does.
    let mut d = Daemon::start(dir.path(), &dir.path().join("db"), &Sections::default());
    let msg = util::message("draining", "a message in flight");
    let msg = msg.as_bytes();

    // One client in the middle of its request, one connected but silent.
    let mut busy = TcpStream::connect(&d.spamd).expect("connect");
    write!(
        busy,
        "CHECK SPAMC/1.5\r\nContent-length: {}\r\n\r\n",
        msg.len()
    )
    .expect("head");
    busy.write_all(&msg[..msg.len() / 2]).expect("half");
    let mut idle = TcpStream::connect(&d.spamd).expect("connect idle");
    std::thread::sleep(Duration::from_millis(200));

    d.signal("TERM");
    d.wait_log("stopping", Duration::from_secs(5));
    // The idle one is closed at once; new connections are refused.
    idle.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = Vec::new();
    assert_eq!(idle.read_to_end(&mut buf).expect("idle closed"), 0);
    assert!(
        d.child.try_wait().expect("try_wait").is_none(),
        "the daemon waits for the busy session"
    );
    // The busy one finishes and gets its verdict.
    busy.write_all(&msg[msg.len() / 2..]).expect("rest");
    let mut reply = String::new();
    busy.read_to_string(&mut reply).expect("reply");
    assert!(
        reply.starts_with("SPAMD/1.1 0 EX_OK\r\nSpam: "),
        "{reply:?}"
    );
    let status = d.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}\n{}", d.log());
    assert!(
        TcpStream::connect(&d.spamd).is_err(),
        "nothing listens after exit"
    );
    assert!(!d.control.exists(), "the control socket's file is removed");
    assert!(d.log().contains("stopped"));
}

/// Idle connections to the HTTP endpoint, opened from several threads as fast as they go
/// and more than it keeps open, never keep a liveness check from its answer: a probe that
/// sends its request promptly is answered every time, neither closed as the oldest idle
/// connection before its request was read nor turned away.
#[test]
fn health_answers_every_probe_under_a_flood_of_idle_connections() {
    health_answers_every_probe_under_a_flood(b"");
}

/// The same, each connection of the flood sending the first byte of a request it never
/// finishes: a request begun is spared a while, and a flood of them spared all at once
/// turned every probe away.
#[test]
fn health_answers_every_probe_under_a_flood_of_requests_begun() {
    health_answers_every_probe_under_a_flood(b"G");
}

/// Floods the HTTP endpoint with connections that send `begun` and then nothing, and
/// probes `/health` meanwhile: every probe is answered.
fn health_answers_every_probe_under_a_flood(begun: &'static [u8]) {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let (threads, keep) = (4, 300);
    util::raise_open_files_limit(threads as u64 * keep as u64 + 200);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = Daemon::start(dir.path(), &dir.path().join("db"), &Sections::default());
    let http: std::net::SocketAddr = d.http.parse().expect("http address");
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    // Idle connections the daemon closed before this client did: the flood was more than
    // the endpoint keeps.
    let closed = Arc::new(AtomicUsize::new(0));
    let flood: Vec<_> = (0..threads)
        .map(|_| {
            let (stop, opened, closed) = (stop.clone(), opened.clone(), closed.clone());
            std::thread::spawn(move || {
                let mut idle = VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    // One the kernel dropped for a full listen queue is tried again at
                    // once, not a second later as connect would.
                    if let Ok(mut s) = TcpStream::connect_timeout(&http, Duration::from_millis(50))
                    {
                        let _ = s.write_all(begun);
                        idle.push_back(s);
                        opened.fetch_add(1, Ordering::Relaxed);
                    }
                    if idle.len() > keep
                        && let Some(mut s) = idle.pop_front()
                        && s.set_nonblocking(true).is_ok()
                        && matches!(s.read(&mut [0u8; 1]), Ok(0))
                    {
                        closed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let warming = Instant::now();
    while opened.load(Ordering::Relaxed) < threads * keep
        && warming.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let probe = || -> std::io::Result<String> {
        // The flood keeps the listen queue full, and the kernel drops a new connection's
        // first packet then: connect would try again a second later, the probe does at
        // once, as the daemon never saw the one dropped.
        let mut s = (0..25)
            .find_map(|_| TcpStream::connect_timeout(&http, Duration::from_millis(200)).ok())
            .ok_or_else(|| std::io::Error::other("no connection in 25 tries"))?;
        // Promptly, not in the same instant: a probe in a busy interpreter waits its turn.
        std::thread::sleep(Duration::from_millis(1));
        s.write_all(b"GET /health HTTP/1.0\r\n\r\n")?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut reply = String::new();
        s.read_to_string(&mut reply)?;
        Ok(reply)
    };
    let probes = 40;
    let mut failed = Vec::new();
    for _ in 0..probes {
        match probe() {
            Ok(reply) if reply.starts_with("HTTP/1.1 200 OK") => {}
            other => failed.push(other),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for t in flood {
        t.join().expect("flood thread");
    }
    let (opened, closed) = (
        opened.load(Ordering::Relaxed),
        closed.load(Ordering::Relaxed),
    );
    assert!(
        failed.is_empty(),
        "{} of {probes} probes failed while {opened} idle connections were opened: {failed:?}",
        failed.len()
    );
    assert!(
        closed > 0,
        "of {opened} idle connections the daemon closed none: the flood was not more than it keeps"
    );
}

#[test]
fn cli_through_the_daemon_prints_what_the_direct_path_prints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(corpus) = util::corpus() else { return };
    let spam = util::corpus_files(&corpus, "spam-1", 80);
    let ham = util::corpus_files(&corpus, "easy-ham-1", 80);
    let probe: Vec<PathBuf> = util::corpus_files(&corpus, "spam-2", 15)
        .into_iter()
        .chain(util::corpus_files(&corpus, "hard-ham-1", 15))
        .collect();

    // The same commands, once on a database of their own and once through a daemon.
    let run = |cmd: &mut Command| -> (String, String, Option<i32>) {
        let out = cmd.output().expect("run spamnb");
        (
            util::text(&out.stdout),
            util::text(&out.stderr),
            out.status.code(),
        )
    };
    let script = |cli: &dyn Fn() -> Command| -> Vec<(String, String, Option<i32>)> {
        vec![
            run(cli().arg("learn").arg("--spam").args(&spam)),
            run(cli().arg("learn").arg("--ham").args(&ham)),
            run(cli().arg("learn").arg("--ham").args(&ham[..10])),
            run(cli()
                .arg("learn")
                .arg("--spam")
                .args(&ham[..5])
                .arg("--user")
                .arg("alice")),
            run(cli().arg("check").args(&probe)),
            run(cli().arg("check").arg("--format").arg("tsv").args(&probe)),
            run(cli().arg("check").arg("--explain").args(&probe[..3])),
            run(cli().arg("check").arg("--explain").args(&ham[3..7])),
            run(cli()
                .arg("learn")
                .arg("--forget")
                .args(&ham[..5])
                .arg(dir.path().join("missing"))),
            run(cli().arg("learn").arg("--forget").args(&ham[..5])),
            run(cli().arg("check").arg("--format").arg("tsv").args(&probe)),
            run(cli().arg("prune").arg("--dry-run")),
            run(cli().arg("prune")),
            run(cli().arg("check").arg("--format").arg("tsv").args(&probe)),
            run(cli().arg("stats").arg("--format").arg("json")),
            run(cli().arg("export")),
        ]
        .into_iter()
        .map(|(out, err, code)| (same_database(&out), err, code))
        .collect()
    };
    let direct_db = dir.path().join("direct");
    let direct = script(&|| util::spamnb(&direct_db));
    // Pruning took the rare tokens the dry run promised, and the stats agree.
    let removed = |line: &str, verb: &str| -> u64 {
        line.strip_prefix(verb)
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("not a prune report: {line}"))
    };
    let (promised, pruned) = (
        removed(&direct[11].0, "would remove "),
        removed(&direct[12].0, "removed "),
    );
    assert!(promised > 0 && promised == pruned, "{direct:?}");
    let left: u64 = direct[12]
        .0
        .trim()
        .rsplit(", ")
        .next()
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .expect("tokens left");
    let stats: serde_json::Value = serde_json::from_str(&direct[14].0).expect("stats json");
    assert_eq!(stats["tokens"], left, "{stats}");
    // `--explain` says which messages were learned, as what and for whom.
    let explained = &direct[7].0;
    assert_eq!(
        explained.matches("learned as spam at T for alice").count(),
        2,
        "{explained}"
    );
    assert_eq!(
        explained.matches("learned as ham at T:").count(),
        2,
        "{explained}"
    );

    let ddir = dir.path().join("d");
    std::fs::create_dir_all(&ddir).expect("mkdir");
    let d = Daemon::start(&ddir, &ddir.join("db"), &Sections::default());
    let via = script(&|| d.cli());
    assert!(
        d.log().contains("class=\"spam\""),
        "the lessons went through the daemon:\n{}",
        d.log()
    );
    for (i, (a, b)) in direct.iter().zip(&via).enumerate() {
        assert_eq!(
            a, b,
            "step {i}: direct (left) and through the daemon (right) differ"
        );
    }
    // While the daemon runs, a command the daemon cannot serve still says why, clearly.
    let import = util::run_with_stdin(d.cli().arg("import"), b"");
    assert!(
        util::text(&import.stderr).contains("in use by another process"),
        "{}",
        util::text(&import.stderr)
    );

    // A message bigger than the daemon takes whole (spamd.max_message_bytes, 4 MiB) is
    // scored on what scoring reads (scan_limit, 1 MiB), as it would be without the daemon.
    let big = dir.path().join("big.eml");
    let mut raw = util::message("big", "buy cheap pills now").into_bytes();
    raw.extend(std::iter::repeat_n(b'x', 5 << 20));
    std::fs::write(&big, &raw).unwrap();
    let out = d
        .cli()
        .args(["check", "--format", "tsv"])
        .arg(&big)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    assert!(util::text(&out.stdout).starts_with(&format!("{}\t", big.display())));
    // And it is learned whole, as without the daemon: the limit is for mail in transit.
    let out = d
        .cli()
        .args(["learn", "--spam"])
        .arg(&big)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    assert!(
        util::text(&out.stderr).contains("learned 1 as spam"),
        "{}",
        util::text(&out.stderr)
    );

    // `spamnb filter` goes through the daemon too, and tags like spamd's PROCESS does.
    let msg = std::fs::read(&probe[0]).expect("probe");
    let filtered = util::run_with_stdin(d.cli().arg("filter"), &msg);
    assert!(filtered.status.success());
    if util::have("spamc") {
        let processed = d.spamc(&[], &msg);
        assert_eq!(util::text(&filtered.stdout), util::text(&processed.stdout));
    }
    // Commands through the daemon compile no rules: it scores with its own, and a hook
    // per delivery took four times as long when it compiled them anyway.
    let verbose = util::run_with_stdin(d.cli().arg("-v").arg("filter"), &msg);
    let log = util::text(&verbose.stderr);
    assert!(log.contains("going through"), "{log}");
    assert!(!log.contains("rules:"), "the filter compiled rules:\n{log}");
    assert_eq!(verbose.stdout, filtered.stdout);
    let checked = d
        .cli()
        .arg("-v")
        .arg("check")
        .args(&probe)
        .output()
        .unwrap();
    let log = util::text(&checked.stderr);
    assert!(log.contains("going through"), "{log}");
    assert!(!log.contains("rules:"), "check compiled rules:\n{log}");
}

/// `spamnb learn DIR` through the daemon stopped at the first message above the control
/// socket's limit (64 MiB), learning none of the rest; the local route learns them all. It
/// is named as not learned, as an input that is not mail is, and the rest are learned.
#[test]
fn learning_through_the_daemon_names_a_message_too_big_for_it_and_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mail = dir.path().join("mail");
    let mut big = util::message("big", "a big one").into_bytes();
    big.extend(std::iter::repeat_n(b"aaaaaaa\n".as_slice(), (64 << 20) / 8 + 1).flatten());
    let big = util::write(&mail, "a-big.eml", big);
    for i in 0..3 {
        util::write(
            &mail,
            &format!("m{i}.eml"),
            util::message("note", &format!("n{i}")),
        );
    }
    let d = Daemon::start(dir.path(), &dir.path().join("db"), &Sections::default());
    let out = d
        .cli()
        .args(["learn", "--ham"])
        .arg(&mail)
        .output()
        .unwrap();
    let err = util::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: {} bytes, above",
            big.display(),
            std::fs::metadata(&big).unwrap().len()
        )) && err.contains("not learned"),
        "{err}"
    );
    assert!(err.contains("learned 3 as ham"), "{err}");
}

/// Output with what differs between two databases holding the same lessons removed:
/// their paths and sizes on disk (stats), the second each lesson was learned (export).
fn same_database(out: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(out.trim())
        && let Some(obj) = v.as_object_mut()
        && obj.contains_key("size_on_disk")
    {
        obj.remove("size_on_disk");
        obj.remove("database");
        return v.to_string();
    }
    out.lines()
        .map(|l| match l.strip_prefix("ledger ") {
            Some(rest) => {
                let f: Vec<&str> = rest.split(' ').collect();
                format!("ledger {} {} T {}", f[0], f[1], f[3..].join(" "))
            }
            // `check --explain`'s line on a learned message: "learned as C at 2026-…Z…".
            None if l.trim_start().starts_with("learned as ") => {
                let (head, time) = l.split_once(" at ").expect("a time");
                format!("{head} at T{}", &time[time.find('Z').expect("UTC") + 1..])
            }
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn runs_on_a_fresh_machine_with_no_config() {
    let home = tempfile::tempdir().expect("tempdir");
    let runtime = home.path().join("xdg-run");
    std::fs::create_dir_all(&runtime).expect("mkdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_spamnb"))
        .arg("daemon")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", &runtime)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let control = runtime.join("spamnb/control.sock");
    let started = Instant::now();
    while !control.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no control socket at {}",
            control.display()
        );
        if let Ok(Some(s)) = child.try_wait() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut err)
                .expect("read");
            panic!("daemon exited with {s}:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        home.path().join(".local/share/spamnb/db").is_dir(),
        "default database under the data dir"
    );
    // The CLI finds it with no configuration either.
    let out = util::run_with_stdin(
        Command::new(env!("CARGO_BIN_EXE_spamnb"))
            .args(["check", "-"])
            .env_clear()
            .env("HOME", home.path())
            .env("XDG_RUNTIME_DIR", &runtime),
        util::message("hello", "a fresh machine").as_bytes(),
    );
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    assert!(
        util::text(&out.stdout).contains("unsure"),
        "{}",
        util::text(&out.stdout)
    );
    let ok = Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .expect("kill")
        .success();
    assert!(ok);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    assert!(!control.exists());
}

#[test]
fn systemd_unit_verifies() {
    if !util::have("systemd-analyze") {
        return;
    }
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/spamnb.service");
    let text = std::fs::read_to_string(&unit).expect("systemd/spamnb.service");
    for key in [
        "Type=notify",
        "User=spamnb",
        "StateDirectory=spamnb",
        "RuntimeDirectory=spamnb",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "RestrictAddressFamilies=",
        "SystemCallFilter=",
        "ExecReload=",
    ] {
        assert!(text.contains(key), "the unit lacks {key}");
    }
    // verify needs the ExecStart binary to exist: point it at the one under test.
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("spamnb.service");
    let text = text.replace("/usr/bin/spamnb", env!("CARGO_BIN_EXE_spamnb"));
    std::fs::write(&copy, text).expect("write unit");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .expect("systemd-analyze");
    let errors = util::text(&out.stderr);
    // Warnings about the host (no spamnb user here, no D-Bus in a container) are not the
    // unit's fault; anything naming the unit file is.
    let own: Vec<&str> = errors
        .lines()
        .filter(|l| l.contains("spamnb.service") && !l.contains("User=spamnb"))
        .collect();
    assert!(
        own.is_empty() && out.status.success(),
        "systemd-analyze verify:\n{errors}"
    );
}

/// Under the shipped unit's umask, the daemon's sockets let its group connect (Postfix's
/// user reaches the milter, a hook's user the control socket), and its database lets the
/// group read and not write: the postfix user, in the group for the socket, cannot
/// change the model.
#[test]
fn under_the_units_umask_the_group_may_connect_and_not_write_the_database() {
    use std::os::unix::fs::PermissionsExt;
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/spamnb.service");
    let text = std::fs::read_to_string(&unit).expect("systemd/spamnb.service");
    let umask = text
        .lines()
        .find_map(|l| l.strip_prefix("UMask="))
        .and_then(|m| libc::mode_t::from_str_radix(m.trim(), 8).ok())
        .expect("the unit sets UMask=");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let mut d = Daemon::start_with(
        dir.path(),
        &db,
        &Sections::default(),
        Launch {
            umask: Some(umask),
            ..Launch::default()
        },
    );
    // Something learned, so that the database has written its files.
    let learn = util::run_with_stdin(
        d.cli().args(["learn", "--spam", "-"]),
        util::message("cheap pills", "buy now").as_bytes(),
    );
    assert!(learn.status.success(), "{}", util::text(&learn.stderr));
    let mode = |p: &Path| {
        std::fs::symlink_metadata(p)
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    };
    for socket in [&d.control, &d.spamd_unix] {
        assert_eq!(format!("{:o}", mode(socket)), "660", "{}", socket.display());
    }
    let mut files = vec![db.clone()];
    let mut seen = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(
                std::fs::read_dir(&path)
                    .expect("read_dir")
                    .map(|e| e.expect("entry").path()),
            );
        }
        let m = mode(&path);
        assert_eq!(m & 0o027, 0, "{} is {m:o}", path.display());
        seen += 1;
    }
    assert!(seen > 2, "the database has no files to look at");
    d.signal("TERM");
    assert!(d.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn the_example_config_is_valid_and_documents_every_section() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/spamnb.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_spamnb"))
        .arg("--config")
        .arg(&example)
        .arg("--db")
        .arg(dir.path().join("db"))
        .arg("stats")
        .output()
        .expect("spamnb stats");
    assert!(
        out.status.success(),
        "contrib/spamnb.toml: {}",
        util::text(&out.stderr)
    );
    let text = std::fs::read_to_string(&example).expect("read");
    for key in [
        "db =",
        "cache_mb =",
        "spam_threshold =",
        "min_token_weight =",
        "normalize_length =",
        "min_feature_messages =",
        "html_tokens =",
        "caps_tokens =",
        "scan_limit =",
        "[model]",
        "[tokenizer]",
        "[daemon]",
        "log_format =",
        "max_connections =",
        "max_sessions =",
        "read_timeout =",
        "session_timeout =",
        "drain_timeout =",
        "runtime_dir =",
        "[spamd]",
        "allow_tell =",
        "max_message_bytes =",
        "[control]",
        "[http]",
        "[milter]",
        "[watch]",
        "spam_folders =",
        "never_learn =",
        "other_folders_are_ham =",
        "burst_limit =",
        "burst_window_secs =",
        "debounce_ms =",
        "[watch.users]",
    ] {
        assert!(
            text.contains(key),
            "contrib/spamnb.toml does not document {key}"
        );
    }
}

#[test]
fn tells_systemd_when_ready_reloading_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("notify");
    let systemd = UnixDatagram::bind(&socket).expect("bind notify socket");
    systemd
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let next = || {
        let mut buf = [0u8; 256];
        let n = systemd.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut d = Daemon::start_with(
        dir.path(),
        &dir.path().join("db"),
        &Sections::default(),
        Launch {
            notify: Some(&socket),
            ..Launch::default()
        },
    );
    assert!(next().starts_with("READY=1"));
    d.signal("HUP");
    assert_eq!(next(), "RELOADING=1");
    assert_eq!(next(), "READY=1");
    d.signal("TERM");
    assert!(next().starts_with("STOPPING=1"));
    assert!(d.wait_exit(Duration::from_secs(10)).success());
}

/// Issue: a second `spamnb daemon` started on a database a daemon holds said only "in use
/// by another process (another daemon, or a `spamnb learn` still running)"; it names the
/// daemon that holds it.
#[test]
fn a_second_daemon_names_the_one_that_holds_the_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = Daemon::start(dir.path(), &dir.path().join("db"), &Sections::default());
    let out = d
        .cli()
        .args(["--lock-wait", "0", "daemon"])
        .env("SPAMNB_RULES", "none")
        .stdin(Stdio::null())
        .output()
        .expect("second daemon");
    let err = util::text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "daemon already running (process {})",
            d.child.id()
        )),
        "{err}"
    );
}

/// `--lock-wait` is the daemon's too: told not to wait for a database another process
/// holds, it refuses at once and says what holds it; told to wait, it starts once the
/// database is free. Run as root, it says that it needs no such thing.
#[test]
fn the_daemon_waits_out_another_process_holding_the_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let config = util::write(
        dir.path(),
        "spamnb.toml",
        config_text(dir.path(), &Sections::default()),
    );
    let held = spamnb::store::SledStore::open(&db, &Default::default()).expect("hold the db");
    let daemon = |wait: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_spamnb"));
        c.arg("--config")
            .arg(&config)
            .arg("--db")
            .arg(&db)
            .args(["--lock-wait", wait, "daemon"])
            .env("SPAMNB_RULES", "none")
            .env_remove("SPAMNB_LOG")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };

    let started = Instant::now();
    let out = daemon("0").output().expect("daemon --lock-wait 0");
    let log = util::text(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("is in use by another process"), "{log}");
    let root = util::text(&Command::new("id").arg("-u").output().expect("id").stdout).trim() == "0";
    assert_eq!(log.contains("running as root"), root, "{log}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it waited: {log}"
    );

    let mut child = daemon("60").spawn().expect("daemon --lock-wait 60");
    let (lines, log) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the daemon gave up instead of waiting: {:?}",
        log.try_iter().collect::<Vec<_>>()
    );
    assert!(
        log.try_iter().all(|l| !l.contains(" ready")),
        "ready on a held database"
    );
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ready = false;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match log.recv_timeout(left) {
            Ok(line) if line.contains(" ready") => {
                ready = true;
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "the daemon did not start once the database was free");
}

/// With `[model] autolearn`, mail scored in transit (spamc here, as Exim does) teaches the
/// model its own firm verdicts, each message once; off (the default), and for a `check`
/// through the control socket, nothing is learned.
#[test]
fn autolearning_learns_firm_verdicts_of_mail_in_transit_once() {
    if !util::have("spamc") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = trained_db(dir.path(), 80) else {
        return;
    };
    let (spam, ham) = unseen(15);
    let mail: Vec<&Vec<u8>> = spam.iter().chain(&ham).collect();
    let d = Daemon::start(dir.path(), &db, &Sections::default());
    let learned = || -> [u64; 2] {
        let out = d
            .cli()
            .args(["stats", "--format", "json"])
            .output()
            .expect("stats");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        [&v["messages"]["spam"], &v["messages"]["ham"]].map(|n| n.as_u64().expect("count"))
    };
    let autolearned = || metric(&d.http_get("/metrics"), "spamnb_autolearned_total ");
    let trained = learned();
    // The spammiest of them, firm enough to be learned were it mail in transit.
    let files: Vec<PathBuf> = spam
        .iter()
        .enumerate()
        .map(|(i, m)| util::write(dir.path(), &format!("spam{i}.eml"), m))
        .collect();
    let out = d
        .cli()
        .args(["check", "--format", "tsv"])
        .args(&files)
        .output()
        .expect("check");
    let (probe, score) = util::text(&out.stdout)
        .lines()
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            (
                PathBuf::from(cols[0]),
                cols[2].parse::<f64>().expect("score"),
            )
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("scores");
    assert!(score >= 8.0, "no firm spam to probe with: {score}");
    for m in &mail {
        assert!(d.spamc(&["-c"], m).status.code().is_some());
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(learned(), trained, "autolearning is off by default");

    d.reload(&Sections {
        model: "autolearn = true",
        ..Default::default()
    });
    let out = d.cli().arg("check").arg(&probe).output().expect("check");
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        learned(),
        trained,
        "a check through the control socket is a question"
    );

    for m in &mail {
        assert!(d.spamc(&["-c"], m).status.code().is_some());
    }
    let wait = Instant::now();
    while autolearned() == 0
        || learned().iter().sum::<u64>() < trained.iter().sum::<u64>() + autolearned()
    {
        assert!(wait.elapsed() < Duration::from_secs(10), "{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = learned();
    assert!(
        after[0] > trained[0] && after[1] > trained[1],
        "{trained:?} → {after:?}"
    );
    assert_eq!(
        after.iter().sum::<u64>(),
        trained.iter().sum::<u64>() + autolearned()
    );
    assert!(after.iter().sum::<u64>() <= trained.iter().sum::<u64>() + mail.len() as u64);

    // The same mail again: what was learned is known, and learned no more. (A message
    // unsure the first time may be firm now that others were learned: the rounds go on
    // until one learns nothing, and no message is ever counted twice.)
    let mut before = after;
    for round in 0.. {
        for m in &mail {
            assert!(d.spamc(&["-c"], m).status.code().is_some());
        }
        std::thread::sleep(Duration::from_millis(300));
        let now = learned();
        if now == before {
            break;
        }
        assert!(round < 3, "still learning after {round} rounds: {now:?}");
        before = now;
    }
    assert!(before.iter().sum::<u64>() <= trained.iter().sum::<u64>() + mail.len() as u64);
    assert_eq!(
        before.iter().sum::<u64>(),
        trained.iter().sum::<u64>() + autolearned(),
        "each message is learned once"
    );
}

/// `spamnb filter` (procmail, maildrop) delivers mail as the milter does, and with `[model]
/// autolearn` learns its firm verdicts: here into the database, each message once, and a
/// person's `learn --ham` of the delivered, tagged copy moves the lesson; through a daemon,
/// the daemon learns it. Off (the default), nothing is learned.
#[test]
fn filter_autolearns_firm_verdicts_directly_and_through_the_daemon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(db) = trained_db(dir.path(), 80) else {
        return;
    };
    let (spam, _) = unseen(15);
    let autolearning = util::write(dir.path(), "autolearn.toml", "[model]\nautolearn = true\n");
    let learned = |cmd: &mut Command| -> [u64; 2] {
        let out = cmd
            .args(["stats", "--format", "json"])
            .output()
            .expect("stats");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        [&v["messages"]["spam"], &v["messages"]["ham"]].map(|n| n.as_u64().expect("count"))
    };
    // The firm spam among them, by score.
    let files: Vec<PathBuf> = spam
        .iter()
        .enumerate()
        .map(|(i, m)| util::write(dir.path(), &format!("spam{i}.eml"), m))
        .collect();
    let out = util::spamnb(&db)
        .args(["check", "--format", "tsv"])
        .args(&files)
        .output()
        .expect("check");
    let firm: Vec<Vec<u8>> = util::text(&out.stdout)
        .lines()
        .filter(|l| l.split('\t').nth(2).and_then(|s| s.parse::<f64>().ok()) >= Some(8.0))
        .map(|l| std::fs::read(l.split('\t').next().expect("path")).expect("probe"))
        .collect();
    assert!(firm.len() >= 3, "too few firm spam to probe with: {firm:?}");
    let filter = |config: &Path, raw: &[u8]| {
        let mut cmd = util::spamnb(&db);
        let out = util::run_with_stdin(cmd.env("SPAMNB_CONFIG", config).arg("filter"), raw);
        assert!(out.status.success(), "{}", util::text(&out.stderr));
        out.stdout
    };
    let trained = learned(&mut util::spamnb(&db));

    filter(Path::new("/dev/null"), &firm[0]);
    assert_eq!(learned(&mut util::spamnb(&db)), trained, "off by default");

    let delivered = filter(&autolearning, &firm[0]);
    let after = learned(&mut util::spamnb(&db));
    assert_eq!(after, [trained[0] + 1, trained[1]], "learned as spam");
    filter(&autolearning, &firm[0]);
    assert_eq!(learned(&mut util::spamnb(&db)), after, "learned once");
    let copy = util::write(dir.path(), "delivered.eml", &delivered);
    let out = util::spamnb(&db)
        .args(["learn", "--ham"])
        .arg(&copy)
        .output()
        .expect("learn");
    assert!(
        util::text(&out.stderr).contains("learned 0 as ham, relearned 1 as ham"),
        "{}",
        util::text(&out.stderr)
    );
    assert_eq!(
        learned(&mut util::spamnb(&db)),
        [trained[0], trained[1] + 1],
        "the correction moved the lesson"
    );

    let d = Daemon::start(
        dir.path(),
        &db,
        &Sections {
            model: "autolearn = true",
            ..Default::default()
        },
    );
    let before = learned(&mut d.cli());
    let out = util::run_with_stdin(d.cli().arg("filter"), &firm[1]);
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    let wait = Instant::now();
    while learned(&mut d.cli()) != [before[0] + 1, before[1]] {
        assert!(wait.elapsed() < Duration::from_secs(10), "{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // A `check` through it is a question still.
    let probe = util::write(dir.path(), "probe.eml", &firm[2]);
    let out = d.cli().arg("check").arg(&probe).output().expect("check");
    assert!(out.status.success(), "{}", util::text(&out.stderr));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(learned(&mut d.cli()), [before[0] + 1, before[1]]);

    // A message longer than scoring reads goes cut: still read as mail in transit, so a
    // forged X-Spam-Prev-Subject does not stand in for its Subject, and never learned.
    let long = |raw: &[u8], forged: bool| {
        let at = raw.windows(2).position(|w| w == b"\n\n").expect("a body") + 1;
        let mut out = raw[..at].to_vec();
        if forged {
            out.extend_from_slice(b"X-Spam-Prev-Subject: meeting notes for the team\n");
        }
        out.extend_from_slice(&raw[at..]);
        out.extend(b"plain padding line\n".repeat(90_000));
        out
    };
    let status = |out: &[u8]| {
        let out = util::text(out);
        out.lines()
            .find(|l| l.starts_with("X-Spam-Status:"))
            .map(str::to_owned)
    };
    let plain = util::run_with_stdin(d.cli().arg("filter"), &long(&firm[2], false));
    let forged = util::run_with_stdin(d.cli().arg("filter"), &long(&firm[2], true));
    assert!(status(&plain.stdout).is_some(), "{}", d.log());
    assert_eq!(status(&plain.stdout), status(&forged.stdout), "{}", d.log());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(learned(&mut d.cli()), [before[0] + 1, before[1]]);
}
