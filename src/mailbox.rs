//! Where mail comes from on the command line: a file, a Maildir, a folder of message files,
//! an mbox, or `-` for stdin. Each becomes a list of [`MailSource`]s, read one at a time.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
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
            MailSource::File(p) => escape_path(p),
            MailSource::Mbox { path, index } => format!("{}#{}", escape_path(path), index + 1),
            MailSource::Stdin => "-".into(),
        }
    }
}

/// A path as output names it: on one line and in one field of `check --format tsv`, and
/// never the same for two paths. Tab, newline, carriage return and backslash become `\t`,
/// `\n`, `\r` and `\\`; other control characters, and bytes that are not UTF-8 (which
/// `Path::display` would make U+FFFD alike), become `\xNN`.
pub fn escape_path(path: &Path) -> String {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\\' => out.push_str("\\\\"),
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
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
            expand_dir(path, &mut Visited::new(), &mut files);
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

/// The directories already listed, by device and inode. A link back up the tree
/// (`up -> ..`) would otherwise be followed until the path is too long for the system, each
/// time round listing every file again and ending in a line of errors.
type Visited = HashSet<(u64, u64)>;

fn expand_dir(dir: &Path, visited: &mut Visited, out: &mut Vec<Listed>) {
    match fs::metadata(dir) {
        Err(e) => return out.push(Err(unreadable(dir, &e))),
        // Nothing is lost, every message under it is listed once already: nothing to report
        // but to whoever wonders why the link was not followed.
        Ok(meta) if !visited.insert((meta.dev(), meta.ino())) => {
            return tracing::debug!("{}: a directory already listed, skipped", dir.display());
        }
        Ok(_) => {}
    }
    // A Maildir: its messages are in cur/ and new/; tmp/ holds deliveries in progress.
    if dir.join("cur").is_dir() || dir.join("new").is_dir() {
        for sub in ["cur", "new"] {
            let sub = dir.join(sub);
            if sub.is_dir() {
                walk(&sub, false, visited, out);
            }
        }
        return;
    }
    walk(dir, true, visited, out);
}

fn walk(dir: &Path, recurse: bool, visited: &mut Visited, out: &mut Vec<Listed>) {
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
            Ok(t) if t.is_dir() && recurse => expand_dir(&path, visited, out),
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

/// The messages of an mbox file (see [`split_mbox`]). A file cut off mid-message yields
/// what it holds: the last message is shorter, not lost.
fn mbox_messages(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    Ok(split_mbox(&fs::read(path)?))
}

/// The messages of an mbox: each `From ` line starts one, and a line of `>`s and `From `
/// loses one `>` (mboxrd, as mail-parser's reader splits them). A message whose
/// Content-Length field ends it just where a later `From ` line starts (or the mbox ends)
/// runs to there, `From ` lines in its body and all: mboxcl2 (RFC 4155's variants) quotes
/// none, and such a line cut the message in two.
fn split_mbox(mbox: &[u8]) -> Vec<Vec<u8>> {
    let mut messages = Vec::new();
    // What comes before the first `From ` line belongs to no message.
    let mut at = if mbox.starts_with(b"From ") {
        0
    } else {
        memchr::memmem::find(mbox, b"\nFrom ").map_or(mbox.len(), |i| i + 1)
    };
    while at < mbox.len() {
        let start = crate::message::line_end(mbox, at);
        let rest = &mbox[start..];
        let end = if rest.starts_with(b"From ") {
            0
        } else {
            memchr::memmem::find(rest, b"\nFrom ").map_or(rest.len(), |i| i + 1)
        };
        match content_length_end(rest, end) {
            Some(counted) if counted > end => {
                messages.push(rest[..counted].to_vec());
                at = start + counted;
            }
            _ => {
                messages.push(unquote_from_lines(rest[..end].to_vec()));
                at = start + end;
            }
        }
    }
    drop_separator_lines(&mut messages);
    messages
}

/// Where the message that starts `message` ends by its Content-Length field, the empty line
/// an mbox writer adds after it included: only where the mbox ends or a `From ` line starts
/// there, as a length that lands anywhere else is no mboxcl2 writer's. Its header ends
/// before the next `From ` line, at `next_from`: a message with no empty line before that
/// has no body, and a length counted from the next message's body swallowed that message.
fn content_length_end(message: &[u8], next_from: usize) -> Option<usize> {
    let body = crate::message::body_offset(&message[..next_from])?;
    let head = &message[..body];
    let value = *crate::message::raw_header_values(head, "Content-Length").first()?;
    let length: usize = std::str::from_utf8(value).ok()?.trim().parse().ok()?;
    let end = body.checked_add(length)?;
    let after = message.get(end..)?;
    [&b""[..], b"\n", b"\r\n"]
        .into_iter()
        .find_map(|separator| {
            let next = after.strip_prefix(separator)?;
            (next.is_empty() || next.starts_with(b"From ")).then_some(end + separator.len())
        })
}

/// An mbox writer ends each message with an empty line (RFC 4155), which belongs to the
/// mailbox: left in, it would make a message's digest differ from its copy in a file or a
/// Maildir. When every message but the last ends with one, the writer added them, and each
/// message loses it (the last too, if it has one). A writer that does not add them leaves
/// messages whose own last line may be empty, and they keep it. One message alone does not
/// say which writer it had: it is taken as RFC 4155 says, as mail clients write a message
/// saved to a file, and loses its last empty line.
fn drop_separator_lines(messages: &mut [Vec<u8>]) {
    let Some((_, all_but_last)) = messages.split_last() else {
        return;
    };
    let separated = |m: &Vec<u8>| separator_len(m).is_some();
    if !all_but_last.iter().all(separated) {
        return;
    }
    for message in messages {
        let kept = message.len() - separator_len(message).unwrap_or(0);
        message.truncate(kept);
    }
}

/// The length of the empty line that ends `message`, LF or CRLF, if its last line is empty.
fn separator_len(message: &[u8]) -> Option<usize> {
    if message.ends_with(b"\n\n") {
        Some(1)
    } else if message.ends_with(b"\n\r\n") {
        Some(2)
    } else {
        None
    }
}

/// Reads one message. Mbox messages are read by splitting the whole file again; callers
/// reading many messages of one mbox should use [`read_all`].
pub fn read(source: &MailSource) -> Result<Vec<u8>, Unreadable> {
    let named = |e: io::Error| Unreadable {
        name: source.name(),
        reason: describe(&e),
    };
    match source {
        MailSource::File(p) => fs::read(p).map(strip_envelope).map_err(named),
        MailSource::Stdin => {
            let mut buf = Vec::new();
            io::stdin().read_to_end(&mut buf).map_err(named)?;
            Ok(drop_envelope_line(buf))
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

/// [`read_all`], what is not mail (see [`not_mail`]) named as unreadable, as the commands
/// that learn or count mail name it.
pub fn read_all_mail(inputs: &[Input]) -> Vec<Named> {
    (read_all(inputs).into_iter())
        .map(|(name, read)| match read {
            Ok(raw) if let Some(reason) = not_mail(&raw) => {
                let reason = reason.into();
                (name.clone(), Err(Unreadable { name, reason }))
            }
            read => (name, read),
        })
        .collect()
}

/// Reads many messages, each mbox file once, in the order given: each message's name and
/// its bytes, or why there are none. A file listed as one input may be an mbox of many
/// messages (see [`TOLD_WHEN_READ`]): each of them is named. Files are read on every core
/// (which matters at the start of a run, when nothing else is there to do yet), and from
/// disk [`READ_AHEAD`] at a time.
pub fn read_all(inputs: &[Input]) -> Vec<Named> {
    let any_mbox = inputs
        .iter()
        .any(|i| matches!(i, Ok(MailSource::Mbox { .. })));
    if any_mbox || inputs.len() < 2 {
        return read_in_order(inputs);
    }
    use rayon::prelude::*;
    inputs
        .par_chunks(READ_AHEAD)
        .flat_map_iter(read_ahead)
        .collect()
}

/// Files opened, and their reading from disk begun, before the first of them is read. A
/// message file not in the page cache (a Maildir not read since the machine started, or
/// mail the kernel has paged out since) waits on the disk, and a read at a time per core
/// leaves the disk's queue nearly empty. The 3,250 files of the benchmark's temporal
/// training half, not in the page cache, took 120–180 ms to read a file at a time per core
/// on this 2-core machine, and 50–60 ms 64 ahead; in the page cache, 22–28 ms either way.
const READ_AHEAD: usize = 64;

/// [`read_input`] of each input, the files among them opened first, all of them, each
/// with the advice that it will be read whole, so that the kernel reads them from disk at
/// once rather than one after the other.
fn read_ahead(inputs: &[Input]) -> Vec<Named> {
    let opened: Vec<Option<(&Path, io::Result<fs::File>)>> = (inputs.iter())
        .map(|input| match input {
            Ok(MailSource::File(path)) => Some((path.as_path(), open_ahead(path))),
            _ => None,
        })
        .collect();
    (inputs.iter().zip(opened))
        .flat_map(|(input, opened)| match opened {
            Some((path, file)) => read_file(path, file),
            None => read_input(input),
        })
        .collect()
}

/// A file opened, and the kernel told to read all of it now: the advice starts the disk's
/// reads and returns without waiting for them.
fn open_ahead(path: &Path) -> io::Result<fs::File> {
    use std::os::fd::AsRawFd;
    let file = fs::File::open(path)?;
    // SAFETY: the descriptor is the open file's own, and the advice writes to no memory.
    // It is only advice: failing, the file is read as it would have been.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
    Ok(file)
}

/// One input's messages: [`read_file`], [`read`], or the reason it could not be listed.
fn read_input(input: &Input) -> Vec<Named> {
    match input {
        Ok(MailSource::File(path)) => read_file(path, fs::File::open(path)),
        Ok(source) => vec![(source.name(), read(source))],
        Err(e) => vec![(e.name.clone(), Err(e.clone()))],
    }
}

/// A file's message, or each message of the mbox it turns out to be, from the file as
/// opened.
fn read_file(path: &Path, opened: io::Result<fs::File>) -> Vec<Named> {
    let name = escape_path(path);
    let mut raw = Vec::new();
    if let Err(e) = opened.and_then(|mut file| file.read_to_end(&mut raw)) {
        return vec![(name, Err(unreadable(path, &e)))];
    }
    if let MboxKind::Many = kind_of(&raw) {
        let messages = split_mbox(&raw);
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
    vec![(name, Ok(strip_envelope(raw)))]
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

/// A message as a one-message mbox holds it: its `From ` envelope line, the `>` that quotes
/// each `From ` line of its body, and the empty line after it belong to the mailbox, not to
/// the message, and go as [`split_mbox`] drops them. Bytes without an envelope line are the
/// message as they are.
fn strip_envelope(mut raw: Vec<u8>) -> Vec<u8> {
    let envelope = raw.len() - crate::message::without_envelope_line(&raw).len();
    if envelope == 0 {
        return raw;
    }
    raw.drain(..envelope);
    raw.truncate(raw.len() - separator_len(&raw).unwrap_or(0));
    unquote_from_lines(raw)
}

/// A message piped in, as procmail and Exim pipe one: its `From ` envelope line goes, or
/// its copy in a Maildir would be another message to the ledger (and `--forget -` would
/// miss what a file taught); its body stays as sent, since a pipe, unlike an mbox, does
/// not quote `From ` lines.
fn drop_envelope_line(mut raw: Vec<u8>) -> Vec<u8> {
    let envelope = raw.len() - crate::message::without_envelope_line(&raw).len();
    raw.drain(..envelope);
    raw
}

/// mboxrd unquoting, as mail-parser's reader does it: a line of one or more `>` and then
/// `From ` loses one `>`.
fn unquote_from_lines(raw: Vec<u8>) -> Vec<u8> {
    match crate::message::from_lines_unquoted(&raw, false) {
        std::borrow::Cow::Borrowed(_) => raw,
        std::borrow::Cow::Owned(unquoted) => unquoted,
    }
}

/// Why `raw` is no message, if it is not: an empty file, or one that does not begin as mail
/// does ([`looks_like_mail`]). Learned or counted, such a file would add its noise to a
/// class's figures for good: `learn`, `eval` and `rules stats` name it instead, for the
/// user to leave it out.
fn not_mail(raw: &[u8]) -> Option<&'static str> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        Some("empty: not a message")
    } else if !looks_like_mail(raw) {
        Some(
            "not a mail message: it does not begin with a header line (`Name: value`); \
             leave it out",
        )
    } else {
        None
    }
}

/// Whether `raw` begins as mail does, with a header field `Name: value` (an RFC 5322
/// field name: printable ASCII but the colon; obsolete syntax allows blanks before the
/// colon). Envelope lines may come first: some archives stack them, or quote one as
/// `>From `. A cheap test, to keep files that are plainly not mail (a binary, a
/// README) out of what is learned, where they would skew the counts.
pub fn looks_like_mail(raw: &[u8]) -> bool {
    let mut rest = raw;
    while rest.starts_with(b"From ") || rest.starts_with(b">From ") {
        rest = crate::message::without_envelope_line(rest.strip_prefix(b">").unwrap_or(rest));
    }
    let line = &rest[..memchr::memchr(b'\n', rest).unwrap_or(rest.len())];
    let Some(colon) = memchr::memchr(b':', line) else {
        return false;
    };
    let name = line[..colon].trim_ascii_end();
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_graphic())
}

fn unreadable(path: &Path, e: &io::Error) -> Unreadable {
    Unreadable {
        name: escape_path(path),
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

    /// Files are read a window of [`READ_AHEAD`] at a time: across windows, each message
    /// keeps its place and its name, as do a file gone since it was listed and a small mbox
    /// split when read.
    #[test]
    fn many_files_are_read_in_order_window_after_window() {
        let dir = tempfile::tempdir().unwrap();
        let n = READ_AHEAD * 2 + 20;
        let (gone, mbox) = (READ_AHEAD + 5, READ_AHEAD * 2 + 3);
        for i in 0..n {
            let text = if i == mbox {
                format!(
                    "From a@b Mon Jan  1 00:00:00 2024\nSubject: {i}a\n\nx\n\nFrom c@d Mon Jan  1 00:00:00 2024\nSubject: {i}b\n\ny\n"
                )
            } else {
                format!("Subject: {i}\n\nx\n")
            };
            fs::write(dir.path().join(format!("{i:03}")), text).unwrap();
        }
        let inputs = expand(&[dir.path().to_path_buf()]);
        fs::remove_file(dir.path().join(format!("{gone:03}"))).unwrap();
        let read = read_all(&inputs);
        assert_eq!(read.len(), n + 1);
        let mut expected = Vec::new();
        for i in 0..n {
            let path = dir.path().join(format!("{i:03}")).display().to_string();
            match i {
                _ if i == gone => expected.push((path, "no such file".to_string())),
                _ if i == mbox => {
                    expected.push((format!("{path}#1"), format!("Subject: {i}a")));
                    expected.push((format!("{path}#2"), format!("Subject: {i}b")));
                }
                _ => expected.push((path, format!("Subject: {i}"))),
            }
        }
        for ((name, read), (want_name, want)) in read.into_iter().zip(expected) {
            assert_eq!(name, want_name);
            let got = match read {
                Ok(raw) => String::from_utf8_lossy(&raw)
                    .lines()
                    .next()
                    .unwrap()
                    .to_string(),
                Err(e) => e.reason,
            };
            assert!(got.starts_with(&want), "{name}: {got}, not {want}");
        }
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

    /// What a message's copy in an mbox, on stdin or in a file with an envelope line reads
    /// as: the message itself, so that every copy has one digest.
    #[test]
    fn an_envelope_is_not_part_of_the_message() {
        let cases = [
            ("Subject: a\n\nbody\n", "Subject: a\n\nbody\n"),
            // Without an envelope line, nothing is quoting: the bytes are the message's.
            ("Subject: a\n\n>From me\n", "Subject: a\n\n>From me\n"),
            (
                "From a@b Mon Jan  1 00:00:00 2024\nSubject: a\n\n>From me\n>>From you\n> From x\n",
                "Subject: a\n\nFrom me\n>From you\n> From x\n",
            ),
            (
                "From a@b Mon Jan  1 00:00:00 2024\r\nS: a\r\n\r\n>From me\r\n",
                "S: a\r\n\r\nFrom me\r\n",
            ),
            // Saved as RFC 4155 has it, ending with an empty line: the file's copy.
            (
                "From a@b Mon Jan  1 00:00:00 2024\nSubject: a\n\nbody\n\n",
                "Subject: a\n\nbody\n",
            ),
            (
                "From a@b Mon Jan  1 00:00:00 2024\r\nS: a\r\n\r\nbody\r\n\r\n",
                "S: a\r\n\r\nbody\r\n",
            ),
            // Without an envelope, the message's own empty last line is its own.
            ("Subject: a\n\nbody\n\n", "Subject: a\n\nbody\n\n"),
        ];
        for (raw, want) in cases {
            let got = strip_envelope(raw.as_bytes().to_vec());
            assert_eq!(String::from_utf8_lossy(&got), want, "reading {raw:?}");
            // A one-message mbox is split to the same bytes.
            if raw.starts_with("From ") {
                assert_eq!(split_mbox(raw.as_bytes()), [got], "splitting {raw:?}");
            }
        }
    }

    #[test]
    fn mbox_separator_lines_belong_to_the_mbox() {
        let from = "From a@b Mon Jan  1 00:00:00 2024";
        let a = "Subject: a\n\n>From me\nends with an empty line\n\n";
        let b = "Subject: b\n\nb";
        let c = "Subject: c\r\n\r\nc\r\n";
        let cases: [(String, [&str; 3]); 3] = [
            // RFC 4155: each message ends with an empty line, the last one too.
            (
                format!("{from}\n{a}\n{from}\n{b}\n\n{from}\r\n{c}\r\n"),
                [a, "Subject: b\n\nb\n", c],
            ),
            // A last message cut off before its empty line keeps all it has.
            (
                format!("{from}\n{a}\n{from}\n{b}\n\n{from}\r\n{c}"),
                [a, "Subject: b\n\nb\n", c],
            ),
            // A writer that adds no empty line: the messages' own are kept.
            (
                format!("{from}\n{a}{from}\n{b}\n{from}\n{c}\r\n"),
                [a, "Subject: b\n\nb\n", "Subject: c\r\n\r\nc\r\n\r\n"],
            ),
        ];
        for (mbox, want) in cases {
            let got: Vec<String> = split_mbox(mbox.as_bytes())
                .iter()
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .collect();
            let want: Vec<String> = want.iter().map(|m| m.replace(">From", "From")).collect();
            assert_eq!(got, want, "splitting {mbox:?}");
        }
    }

    /// mboxcl2 quotes no `From ` line of a body; the Content-Length field says where each
    /// message ends. A length that lands on no `From ` line is no such writer's.
    #[test]
    fn a_content_length_that_lands_on_a_separator_ends_the_message() {
        let from = "From a@b Mon Jan  1 00:00:00 2024";
        let body = "Hi,\n\nFrom now on we meet on Mondays.\n>From the archive\nBye\n";
        let one = format!("Subject: one\nContent-Length: {}\n\n{body}", body.len());
        let two = "Subject: two\nContent-Length: 4\n\nxyz\n";
        let split = |mbox: &str| -> Vec<String> {
            split_mbox(mbox.as_bytes())
                .iter()
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .collect()
        };
        let mbox = format!("{from}\n{one}\n{from}\n{two}\n");
        assert_eq!(split(&mbox), [one.as_str(), two], "{mbox:?}");
        // The same without the empty lines, or with CRLF ones.
        let mbox = format!("{from}\n{one}{from}\n{two}");
        assert_eq!(split(&mbox), [one.as_str(), two], "{mbox:?}");
        let mbox = format!("{from}\r\n{one}\r\n{from}\r\n{two}\r\n");
        assert_eq!(split(&mbox).len(), 2, "{mbox:?}");
        // A length that lands elsewhere: split at every `From ` line, as before.
        let wrong = one.replace("Content-Length: ", "Content-Length: 1");
        let mbox = format!("{from}\n{wrong}\n{from}\n{two}\n");
        assert_eq!(split(&mbox).len(), 3, "{mbox:?}");
    }

    /// A message of header fields alone, no empty line after them, has no body for a
    /// Content-Length to count: the next message's empty line and length were read as its
    /// own, and it swallowed that message.
    #[test]
    fn a_message_without_a_body_keeps_to_its_own_header() {
        let from = "From a@b Mon Jan  1 00:00:00 2024";
        for (one, two) in [
            // The next message's length, which ends that message.
            ("Subject: one\n", "Subject: two\nContent-Length: 4\n\nxyz\n"),
            // Its own, counted from the next message's body.
            ("Subject: one\nContent-Length: 4\n", "Subject: two\n\nxyz\n"),
        ] {
            let mbox = format!("{from}\n{one}{from}\n{two}");
            let got: Vec<String> = split_mbox(mbox.as_bytes())
                .iter()
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .collect();
            assert_eq!(got, [one, two], "splitting {mbox:?}");
        }
    }

    #[test]
    fn mail_begins_with_a_header_field() {
        let cases = [
            ("Subject: hi\n\nbody", true),
            ("Return-Path: <a@b>\n", true),
            ("Received: from x\n\tby y\n", true),
            ("X-Status: \n", true),
            ("Subject : obsolete blank before the colon\n", true),
            ("From a@b Mon Jan  1 00:00:00 2024\nSubject: hi\n", true),
            (">From a@b Mon Jan  1 00:00:00 2024\nSubject: hi\n", true),
            ("\r\nSubject: after an empty line, it is a body\n", false),
            ("", false),
            ("# spamnb\n\nspamnb is a spam filter: a README\n", false),
            ("[[package]]\nname = \"spamnb\"\n", false),
            (": no name\n", false),
            ("From a@b Mon Jan  1 00:00:00 2024\n", false),
            ("a sentence: with a colon\n", false),
            ("\u{1}\u{2}binary:\n", false),
        ];
        for (raw, want) in cases {
            assert_eq!(looks_like_mail(raw.as_bytes()), want, "{raw:?}");
        }
    }

    /// A link back up the tree is not followed: each message is listed once, and nothing
    /// is unreadable.
    #[test]
    fn a_directory_link_loop_is_listed_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        fs::create_dir_all(root.join("loop")).unwrap();
        fs::write(root.join("m1"), "Subject: one\n\nx\n").unwrap();
        std::os::unix::fs::symlink("..", root.join("loop/up")).unwrap();
        // A second way to the same folder, not a loop: still listed once.
        std::os::unix::fs::symlink("loop", root.join("same")).unwrap();
        let names: Vec<String> = expand(std::slice::from_ref(&root))
            .into_iter()
            .map(|i| match i {
                Ok(source) => source.name(),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(names, [root.join("m1").display().to_string()]);
    }
}
