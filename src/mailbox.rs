//! Where mail comes from on the command line: a file, a Maildir, a folder of message files,
//! an mbox, or `-` for stdin. Each becomes a list of [`MailSource`]s, read one at a time.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// One message to read: a file, one message of an mbox, or stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailSource {
    File(PathBuf),
    /// The `index`-th message (from 0) of an mbox file.
    Mbox {
        path: PathBuf,
        index: usize,
    },
    Stdin,
}

impl MailSource {
    /// How the message is named in output: the path as given, `PATH#N` (from 1) in an mbox.
    pub fn name(&self) -> String {
        match self {
            MailSource::File(p) => p.display().to_string(),
            MailSource::Mbox { path, index } => format!("{}#{}", path.display(), index + 1),
            MailSource::Stdin => "-".into(),
        }
    }
}

/// An input that could not be read, and why.
#[derive(Debug, Clone)]
pub struct Unreadable {
    pub name: String,
    pub reason: String,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.reason)
    }
}

/// A message to read, or an input that could not even be listed, in input order.
pub type Input = Result<MailSource, Unreadable>;

/// Expands command-line inputs into messages, in a stable order: a directory's files sorted,
/// an mbox's messages in file order. What cannot be listed stays in its place as an error,
/// so that output lines still pair with inputs.
pub fn expand(inputs: &[PathBuf]) -> Vec<Input> {
    let one = |input: &PathBuf| {
        if input.as_os_str() == "-" {
            vec![Ok(MailSource::Stdin)]
        } else {
            expand_path(input)
        }
    };
    // Telling a directory from a file takes a stat, and a big mbox from a message a read:
    // on every core, for thousands of them.
    if inputs.len() < 2 {
        inputs.iter().flat_map(one).collect()
    } else {
        use rayon::prelude::*;
        inputs.par_iter().flat_map_iter(one).collect()
    }
}

/// A path's messages: the files under a directory, the messages of an mbox, or the file.
fn expand_path(path: &Path) -> Vec<Input> {
    match fs::metadata(path) {
        Err(e) => vec![Err(unreadable(path, &e))],
        Ok(meta) if meta.is_dir() => {
            let mut files = Vec::new();
            expand_dir(path, &mut files);
            use rayon::prelude::*;
            files
                .into_par_iter()
                .flat_map_iter(|listed| match listed {
                    Ok(file) => match fs::metadata(&file) {
                        Ok(meta) => file_inputs(&file, meta.len()),
                        Err(e) => vec![Err(unreadable(&file, &e))],
                    },
                    Err(e) => vec![Err(e)],
                })
                .collect()
        }
        Ok(meta) => file_inputs(path, meta.len()),
    }
}

/// Files up to this size are one input each, whether a message or an mbox: which, is told
/// when the file is read (see [`read_all`]), so that listing thousands of messages does
/// not read each one twice. A bigger file is told apart when listed, so that a big mbox
/// is read a batch of messages at a time.
const TOLD_WHEN_READ: u64 = 1 << 20;

/// A file's inputs: itself, or, when it is big, the messages of the mbox it may be.
fn file_inputs(path: &Path, size: u64) -> Vec<Input> {
    if size <= TOLD_WHEN_READ {
        return vec![Ok(MailSource::File(path.to_path_buf()))];
    }
    file_messages(path, mbox_kind(path))
}

/// A file found in a directory, or why it could not be listed.
type Listed = Result<PathBuf, Unreadable>;

fn expand_dir(dir: &Path, out: &mut Vec<Listed>) {
    // A Maildir: its messages are in cur/ and new/; tmp/ holds deliveries in progress.
    if dir.join("cur").is_dir() || dir.join("new").is_dir() {
        for sub in ["cur", "new"] {
            let sub = dir.join(sub);
            if sub.is_dir() {
                walk(&sub, false, out);
            }
        }
        return;
    }
    walk(dir, true, out);
}

fn walk(dir: &Path, recurse: bool, out: &mut Vec<Listed>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return out.push(Err(unreadable(dir, &e))),
    };
    let mut entries: Vec<fs::DirEntry> = entries.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // The directory listing says what an entry is; only a link needs a stat to say
        // what it points to.
        let kind = match entry.file_type() {
            Ok(t) if t.is_symlink() => fs::metadata(&path).map(|m| m.file_type()),
            other => other,
        };
        match kind {
            Err(e) => out.push(Err(unreadable(&path, &e))),
            Ok(t) if t.is_dir() && recurse => expand_dir(&path, out),
            Ok(t) if t.is_file() => out.push(Ok(path)),
            Ok(_) => {}
        }
    }
}

/// A file's messages, by what [`mbox_kind`] found in it: itself, or each message of an mbox.
fn file_messages(path: &Path, kind: io::Result<MboxKind>) -> Vec<Input> {
    match kind {
        Err(e) => vec![Err(unreadable(path, &e))],
        Ok(MboxKind::No | MboxKind::One) => vec![Ok(MailSource::File(path.to_path_buf()))],
        Ok(MboxKind::Many) => match mbox_messages(path) {
            Err(e) => vec![Err(unreadable(path, &e))],
            // One message saved with its envelope line, as many archives keep them.
            Ok(messages) if messages.len() == 1 => vec![Ok(MailSource::File(path.to_path_buf()))],
            Ok(messages) => (0..messages.len())
                .map(|index| {
                    Ok(MailSource::Mbox {
                        path: path.to_path_buf(),
                        index,
                    })
                })
                .collect(),
        },
    }
}

enum MboxKind {
    No,
    /// One message saved with its envelope line.
    One,
    Many,
}

/// An mbox starts with a `From ` separator line; a single message never does. Whether it
/// holds more than one message is a byte search for another separator, not a split: a
/// folder of messages saved with envelope lines would otherwise be parsed twice.
fn mbox_kind(path: &Path) -> io::Result<MboxKind> {
    let mut head = [0u8; 5];
    let mut file = fs::File::open(path)?;
    let n = file.read(&mut head)?;
    if &head[..n] != b"From " {
        return Ok(MboxKind::No);
    }
    let mut rest = Vec::new();
    file.read_to_end(&mut rest)?;
    Ok(kind_after_separator(&rest))
}

fn kind_of(raw: &[u8]) -> MboxKind {
    match raw.strip_prefix(b"From ") {
        Some(rest) => kind_after_separator(rest),
        None => MboxKind::No,
    }
}

fn kind_after_separator(rest: &[u8]) -> MboxKind {
    match memchr::memmem::find(rest, b"\nFrom ") {
        None => MboxKind::One,
        Some(_) => MboxKind::Many,
    }
}

/// The messages of an mbox, split with mail-parser's reader (mboxrd `>From ` unquoting). A
/// file cut off mid-message yields what it holds: the last message is shorter, not lost.
fn mbox_messages(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    Ok(split_mbox(io::BufReader::new(fs::File::open(path)?)))
}

fn split_mbox(mbox: impl io::BufRead) -> Vec<Vec<u8>> {
    mail_parser::mailbox::mbox::MessageIterator::new(mbox)
        .filter_map(|m| m.ok())
        .map(|m| m.unwrap_contents())
        .collect()
}

/// Reads one message. Mbox messages are read by splitting the whole file again; callers
/// reading many messages of one mbox should use [`read_all`].
pub fn read(source: &MailSource) -> Result<Vec<u8>, Unreadable> {
    let named = |e: io::Error| Unreadable {
        name: source.name(),
        reason: describe(&e),
    };
    match source {
        MailSource::File(p) => fs::read(p).map(strip_envelope_line).map_err(named),
        MailSource::Stdin => {
            let mut buf = Vec::new();
            io::stdin().read_to_end(&mut buf).map_err(named)?;
            Ok(buf)
        }
        MailSource::Mbox { path, index } => mbox_messages(path)
            .map_err(named)?
            .into_iter()
            .nth(*index)
            .ok_or_else(|| Unreadable {
                name: source.name(),
                reason: "the mbox changed while it was read".into(),
            }),
    }
}

/// A message's name and bytes, or why there are none.
pub type Named = (String, Result<Vec<u8>, Unreadable>);

/// Reads many messages, each mbox file once, in the order given: each message's name and
/// its bytes, or why there are none. A file listed as one input may be an mbox of many
/// messages (see [`TOLD_WHEN_READ`]): each of them is named. Files are read on every core,
/// which matters at the start of a run, when nothing else is there to do yet.
pub fn read_all(inputs: &[Input]) -> Vec<Named> {
    let any_mbox = inputs
        .iter()
        .any(|i| matches!(i, Ok(MailSource::Mbox { .. })));
    if any_mbox || inputs.len() < 2 {
        return read_in_order(inputs);
    }
    use rayon::prelude::*;
    inputs.par_iter().flat_map_iter(read_input).collect()
}

/// One input's messages: [`read_file`], [`read`], or the reason it could not be listed.
fn read_input(input: &Input) -> Vec<Named> {
    match input {
        Ok(MailSource::File(path)) => read_file(path),
        Ok(source) => vec![(source.name(), read(source))],
        Err(e) => vec![(e.name.clone(), Err(e.clone()))],
    }
}

/// A file's message, or each message of the mbox it turns out to be.
fn read_file(path: &Path) -> Vec<Named> {
    let name = path.display().to_string();
    let raw = match fs::read(path) {
        Ok(raw) => raw,
        Err(e) => return vec![(name, Err(unreadable(path, &e)))],
    };
    if let MboxKind::Many = kind_of(&raw) {
        let messages = split_mbox(raw.as_slice());
        // One message saved with its envelope line, as many archives keep them, is a file.
        if messages.len() > 1 {
            return messages
                .into_iter()
                .enumerate()
                .map(|(index, message)| {
                    let path = path.to_path_buf();
                    (MailSource::Mbox { path, index }.name(), Ok(message))
                })
                .collect();
        }
    }
    vec![(name, Ok(strip_envelope_line(raw)))]
}

/// [`read_all`] on one thread, an mbox split once for all its messages.
fn read_in_order(inputs: &[Input]) -> Vec<Named> {
    let mut open_mbox: Option<(PathBuf, std::vec::IntoIter<Vec<u8>>)> = None;
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let Ok(source @ MailSource::Mbox { path, .. }) = input else {
            out.extend(read_input(input));
            continue;
        };
        let name = source.name();
        if open_mbox.as_ref().is_none_or(|(p, _)| p != path) {
            match mbox_messages(path) {
                Ok(messages) => open_mbox = Some((path.clone(), messages.into_iter())),
                Err(e) => {
                    let reason = describe(&e);
                    out.push((name.clone(), Err(Unreadable { name, reason })));
                    continue;
                }
            }
        }
        let next = open_mbox.as_mut().and_then(|(_, it)| it.next());
        let read = next.ok_or_else(|| Unreadable {
            name: name.clone(),
            reason: "the mbox changed while it was read".into(),
        });
        out.push((name, read));
    }
    out
}

/// Drops an mbox `From ` envelope line: it belongs to the mailbox, not to the message.
fn strip_envelope_line(mut raw: Vec<u8>) -> Vec<u8> {
    let envelope = raw.len() - crate::message::without_envelope_line(&raw).len();
    raw.drain(..envelope);
    raw
}

fn unreadable(path: &Path, e: &io::Error) -> Unreadable {
    Unreadable {
        name: path.display().to_string(),
        reason: describe(e),
    }
}

fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        io::ErrorKind::NotFound => "no such file or directory".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_maildirs_folders_and_mboxes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["md/cur", "md/new", "md/tmp", "tree/a", "tree/.hidden"] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(root.join("md/cur/1:2,S"), "Subject: one\n\nx\n").unwrap();
        fs::write(root.join("md/new/2"), "Subject: two\n\nx\n").unwrap();
        fs::write(root.join("md/tmp/3"), "Subject: half\n").unwrap();
        fs::write(root.join("tree/a/m1"), "Subject: m1\n\nx\n").unwrap();
        fs::write(root.join("tree/.hidden/m2"), "x").unwrap();
        // A link is what it points to; a dangling one cannot be read.
        std::os::unix::fs::symlink(root.join("md/new/2"), root.join("tree/a/m2-link")).unwrap();
        std::os::unix::fs::symlink(root.join("gone"), root.join("tree/dangling")).unwrap();
        fs::write(
            root.join("tree/a/m3"),
            "From a@b Mon Jan  1 00:00:00 2024\nSubject: m3\n\nx\n",
        )
        .unwrap();
        fs::write(
            root.join("box"),
            "From a@b Mon Jan  1 00:00:00 2024\nSubject: a\n\n>From quoted\n\nFrom c@d Mon Jan  1 00:00:00 2024\nSubject: b\n\ncut off",
        )
        .unwrap();
        let inputs = [
            root.join("md"),
            root.join("tree"),
            root.join("box"),
            root.join("missing"),
        ];
        let inputs = expand(&inputs);
        let names: Vec<String> = read_all(&inputs)
            .into_iter()
            .map(|(name, _)| name.replace(&root.display().to_string(), ""))
            .collect();
        let expected = [
            "/md/cur/1:2,S",
            "/md/new/2",
            "/tree/a/m1",
            "/tree/a/m2-link",
            "/tree/a/m3",
            "/tree/dangling",
            "/box#1",
            "/box#2",
            "/missing",
        ];
        assert_eq!(names, expected);
        let Err(dangling) = &inputs[5] else {
            panic!("a dangling link is listed as unreadable")
        };
        assert!(dangling.to_string().contains("no such file"), "{dangling}");
        // The small mbox is one input, split when read; the rest are a file each.
        assert_eq!(inputs.len(), 8);
        let Err(missing) = &inputs[7] else {
            panic!("the missing input keeps its place")
        };
        assert!(
            missing.to_string().contains("missing: no such file"),
            "{missing}"
        );
        // Without an mbox among them, files are read on every core, in input order still.
        let files: Vec<String> = read_all(&inputs[..6])
            .into_iter()
            .map(|(name, r)| match r {
                Ok(raw) => String::from_utf8_lossy(&raw)
                    .lines()
                    .next()
                    .unwrap()
                    .to_string(),
                Err(e) => format!("{name}: {}", e.reason).replace(&root.display().to_string(), ""),
            })
            .collect();
        assert_eq!(
            files,
            [
                "Subject: one",
                "Subject: two",
                "Subject: m1",
                "Subject: two",
                "Subject: m3",
                "/tree/dangling: no such file or directory"
            ]
        );
        let read: Vec<Vec<u8>> = read_all(&inputs[..8])
            .into_iter()
            .filter_map(|(_, r)| r.ok())
            .collect();
        assert!(
            read[3].starts_with(b"Subject: two"),
            "read through the link"
        );
        assert!(
            read[4].starts_with(b"Subject: m3"),
            "the envelope line is not part of the message"
        );
        assert!(String::from_utf8_lossy(&read[5]).contains("From quoted"));
        assert!(
            String::from_utf8_lossy(&read[6]).contains("cut off"),
            "a truncated mbox keeps its last message"
        );
    }

    /// A big mbox is split when listed, so that a run reads it a batch at a time rather
    /// than all its messages at once; what is read is the same either way.
    #[test]
    fn a_big_mbox_is_listed_message_by_message() {
        let dir = tempfile::tempdir().unwrap();
        let message = |i: usize| {
            format!(
                "From a@b Mon Jan  1 00:00:00 2024\nSubject: {i}\n\n{}\n",
                "body text ".repeat(100)
            )
        };
        let small: String = (0..3).map(message).collect();
        let big: String = (0..2000).map(message).collect();
        assert!(big.len() as u64 > TOLD_WHEN_READ && small.len() as u64 <= TOLD_WHEN_READ);
        fs::write(dir.path().join("small"), &small).unwrap();
        fs::write(dir.path().join("big"), &big).unwrap();
        let small_inputs = expand(&[dir.path().join("small")]);
        let big_inputs = expand(&[dir.path().join("big")]);
        assert_eq!(small_inputs.len(), 1);
        assert_eq!(big_inputs.len(), 2000);
        for (inputs, n) in [(small_inputs, 3), (big_inputs, 2000)] {
            let read = read_all(&inputs);
            assert_eq!(read.len(), n);
            for (i, (name, raw)) in read.into_iter().enumerate() {
                assert!(name.ends_with(&format!("#{}", i + 1)), "{name}");
                let raw = raw.unwrap();
                let subject = format!("Subject: {i}\n");
                assert!(raw.starts_with(subject.as_bytes()), "{name}");
            }
        }
    }
}
