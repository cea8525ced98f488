//! contrib/dovecot's IMAPSieve hook in Dovecot 2.4, whose configuration differs from 2.3's
//! throughout: Debian trixie's Dovecot run with chroot in the root that `.ci/run` builds
//! (`SPAMNB_DOVECOT24_ROOT`), driven over IMAP from outside it as the 2.3 tests drive theirs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util;
use crate::watch_e2e::{WaitOrKill, give_to_mail_user, hook_teaches, install_hook};

/// Where Dovecot 2.4 is: in the root named by `SPAMNB_DOVECOT24_ROOT`, which `.ci/run`
/// builds, else on this machine if its own Dovecot is 2.4; none if neither.
fn root() -> Option<PathBuf> {
    let root =
        std::env::var_os("SPAMNB_DOVECOT24_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    let version = Command::new("chroot")
        .arg(&root)
        .args(["dovecot", "--version"])
        .stderr(Stdio::null())
        .output()
        .map(|out| util::text(&out.stdout))
        .unwrap_or_default();
    util::available(
        version.starts_with("2.4"),
        &format!(
            "CI must build a root with Dovecot 2.4 (SPAMNB_DOVECOT24_ROOT, see .ci/run); {} has {:?}",
            root.display(),
            version.trim()
        ),
        &format!(
            "no Dovecot 2.4 in {} (set SPAMNB_DOVECOT24_ROOT to a root that has it: see .ci/run)",
            root.display()
        ),
    )
    .then_some(root)
}

/// `program` run in `root` with chroot, with the root's /proc mounted (doveconf reads the
/// mounts through /etc/mtab) in a mount namespace of the command's own: the kernel takes the
/// mount away with the last process in it, so none is left behind by a test that fails or is
/// killed, and none is seen outside.
fn in_root(root: &Path, program: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount -t proc proc "$0/proc" && exec chroot "$0" "$@""#)
        .arg(root)
        .arg(program);
    c
}

/// Runs `program args` in `root`; fails the test unless it succeeds without a word on stderr.
fn run_in_root(root: &Path, program: &str, args: &[&str]) {
    let out = in_root(root, program).args(args).output().expect("unshare");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{program} {args:?} in {} ({}):\n{}",
        root.display(),
        out.status,
        util::text(&out.stderr)
    );
}

/// Dovecot 2.4 running in a root: its master process. Stopped when dropped.
struct Dovecot24 {
    master: Child,
}

impl Dovecot24 {
    /// Writes a Dovecot 2.4 configuration, `dovecot.conf`, into `t`, a directory inside
    /// `root` that Dovecot sees as `seen`: ann in a passwd-file, Maildirs under `t/home`,
    /// Junk and Trash made at login, IMAP without TLS on a loopback port, and `conf.d/*.conf`
    /// included as Debian's dovecot.conf does. doveconf must take it without a word. Returns
    /// the port.
    fn configure(root: &Path, t: &Path, seen: &Path) -> u16 {
        let port = util::free_port();
        for sub in ["run", "state", "home", "conf.d"] {
            std::fs::create_dir_all(t.join(sub)).unwrap();
        }
        give_to_mail_user(&t.join("home"));
        util::write(t, "passwd", "ann:{PLAIN}secret\n");
        let d = seen.display();
        util::write(
            t,
            "dovecot.conf",
            format!(
                "dovecot_config_version = 2.4.0\ndovecot_storage_version = 2.4.0\n\
                 base_dir = {d}/run\nstate_dir = {d}/state\nlog_path = {d}/dovecot.log\n\
                 protocols = imap\nlisten = 127.0.0.1\nssl = no\nauth_allow_cleartext = yes\n\
                 auth_mechanisms = plain\n\
                 mail_driver = maildir\nmail_path = {d}/home/%{{user}}/Maildir\n\
                 passdb passwd-file {{\n  passwd_file_path = {d}/passwd\n}}\n\
                 userdb static {{\n  fields {{\n    uid = 65534\n    gid = 65534\n\
                 \x20   home = {d}/home/%{{user}}\n  }}\n}}\n\
                 service imap-login {{\n  inet_listener imap {{\n    port = {port}\n  }}\n\
                 \x20 inet_listener imaps {{\n    port = 0\n  }}\n}}\n\
                 namespace inbox {{\n  inbox = yes\n\
                 \x20 mailbox Junk {{\n    auto = create\n    special_use = \\Junk\n  }}\n\
                 \x20 mailbox Trash {{\n    auto = create\n    special_use = \\Trash\n  }}\n}}\n\
                 !include conf.d/*.conf\n"
            ),
        );
        let config = seen.join("dovecot.conf").display().to_string();
        run_in_root(root, "doveconf", &["-n", "-c", &config]);
        port
    }

    /// Starts Dovecot in `root` with the configuration that [`Dovecot24::configure`] wrote.
    fn start(root: &Path, t: &Path, seen: &Path, port: u16) -> Dovecot24 {
        let config = seen.join("dovecot.conf").display().to_string();
        let stderr = std::fs::File::create(t.join("dovecot.stderr")).unwrap();
        // The shell and chroot exec Dovecot: the child is its master process.
        let mut master = in_root(root, "dovecot")
            .args(["-F", "-c", &config])
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start dovecot");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = master.try_wait().unwrap();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "dovecot did not listen ({exited:?}); stderr:\n{}\nlog:\n{}",
                std::fs::read_to_string(t.join("dovecot.stderr")).unwrap_or_default(),
                std::fs::read_to_string(t.join("dovecot.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Dovecot24 { master }
    }
}

impl Drop for Dovecot24 {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.master.id().to_string()])
            .status();
        self.master.wait_timeout_or_kill();
    }
}

#[test]
fn dovecot_2_4_imapsieve_scripts_teach_through_spamnb_learn() {
    if !util::have("python3")
        || !util::root_or_skip("Dovecot in a chroot (its mail processes run as nobody)")
    {
        return;
    }
    let Some(root) = root() else {
        return;
    };
    // The test's files inside the root, where Dovecot sees them as `seen`.
    let dir = tempfile::Builder::new()
        .prefix("spamnb-dovecot24-")
        .tempdir_in(root.join("tmp"))
        .unwrap();
    let t = dir.path();
    let seen = Path::new("/").join(t.strip_prefix(&root).unwrap());
    let status = Command::new("chmod").args(["755"]).arg(t).status().unwrap();
    assert!(status.success());
    let conf = install_hook(t, &seen, "90-spamnb-imapsieve-2.4.conf");
    util::write(&t.join("conf.d"), "90-spamnb-imapsieve-2.4.conf", conf);
    let port = Dovecot24::configure(&root, t, &seen);
    // The scripts compiled as an administrator compiles them, by sievec with the configuration
    // that loads the extensions they use: the mail user cannot save them where they are.
    let config = seen.join("dovecot.conf").display().to_string();
    for script in ["report-spam.sieve", "report-ham.sieve"] {
        let script = seen.join("sieve").join(script).display().to_string();
        run_in_root(&root, "sievec", &["-c", &config, &script]);
    }
    let dovecot = Dovecot24::start(&root, t, &seen, port);
    hook_teaches(t, port, move || drop(dovecot));
}
