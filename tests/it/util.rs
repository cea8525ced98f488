//! What every integration test needs: the binary, temp dirs, messages, the corpus.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `spamnb` binary under test, with a private config (none) and database.
pub fn spamnb(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_spamnb"));
    // No rules unless a test names them: run from the checkout, spamnb would load `rules/`.
    c.env("SPAMNB_DB", db)
        .env("SPAMNB_CONFIG", "/dev/null")
        .env("SPAMNB_RULES", "none")
        .env_remove("SPAMNB_LOG");
    c
}

/// Runs `cmd` with `stdin` fed to it.
pub fn run_with_stdin(cmd: &mut Command, stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut pipe = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer");
    out
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A small message written for a test.
pub fn message(subject: &str, body: &str) -> String {
    format!(
        "From: sender@example.org\nTo: you@example.net\nSubject: {subject}\nMessage-ID: <{}@example.org>\n\n{body}\n",
        subject.len() * 31 + body.len()
    )
}

pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&path, contents).expect("write");
    path
}

/// The SpamAssassin public corpus (`SA_CORPUS`, or where the benchmark unpacks it), if present.
pub fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("SA_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("spamnb-corpus/package/data"));
    available(
        dir.join("spam-1").is_dir(),
        "CI must provide the corpus (SA_CORPUS)",
        "corpus not unpacked (set SA_CORPUS)",
    )
    .then_some(dir)
}

/// Whether what a test needs is here. Without it the test is skipped, said on stderr;
/// in CI, which must provide everything, it fails with `in_ci`.
pub fn available(here: bool, in_ci: &str, skipped: &str) -> bool {
    assert!(here || std::env::var_os("CI").is_none(), "{in_ci}");
    if !here {
        eprintln!("skipped: {skipped}");
    }
    here
}

/// Whether the tests run as root, which `what` needs: skipped (said on stderr) if not,
/// except in CI, which runs them as root.
pub fn root_or_skip(what: &str) -> bool {
    let root = text(&Command::new("id").arg("-u").output().expect("id").stdout).trim() == "0";
    available(
        root,
        &format!("CI runs the tests as root, which {what} needs"),
        &format!("{what} needs root"),
    )
}

/// Whether an outside program a test drives is installed. In CI a missing one is a failure.
pub fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        || Path::new("/usr/sbin").join(program).exists();
    available(
        found,
        &format!("CI must install {program}"),
        &format!("{program} is not installed"),
    )
}

/// Files of one corpus group, sorted, at most `n`.
pub fn corpus_files(root: &Path, group: &str, n: usize) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(group))
        .expect("corpus group")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files.truncate(n);
    files
}

/// A loopback TCP port free at the moment, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The digest a database made by this spamnb keys its ledger by.
pub fn digest(raw: &[u8]) -> spamnb::message::Digest {
    spamnb::message::DigestKind::AsSent.of(raw)
}

/// The values of every header `name` in `message`, unfolded (still encoded).
pub fn header_text(message: &[u8], name: &str) -> Vec<String> {
    let head = spamnb::message::raw_head(message);
    spamnb::message::raw_header_values(head, name)
        .iter()
        .map(|v| spamnb::message::unfold(v))
        .collect()
}

/// A process holding the database, killed if a failing test leaves it behind.
pub struct Holder(pub std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A `spamnb learn` holding `db`, its message still to come on stdin (it opens the database
/// before it reads stdin), and the pipe to send it through.
pub fn hold(db: &Path) -> (Holder, std::process::ChildStdin) {
    let mut learn = spamnb(db)
        .args(["learn", "--ham", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let message = learn.stdin.take().unwrap();
    let learn = Holder(learn);
    let deadline = Instant::now() + Duration::from_secs(10);
    while spamnb(db)
        .args(["--lock-wait", "0", "stats"])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "spamnb learn never held the database"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (learn, message)
}

/// Lifts this test process's soft limit of open files (often 1024) to the hard one, for a
/// test that holds `needed` sockets at once.
pub fn raise_open_files_limit(needed: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: the calls read and write only the struct on this stack frame.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    assert!(
        limit.rlim_cur >= needed,
        "the test needs {needed} open files; the hard limit is {}",
        limit.rlim_max
    );
}
