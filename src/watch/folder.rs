//! A user's Maildir as the watcher sees it: which folders there are (Maildir++ `.Junk` or
//! the `fs` layout's `Junk/`), what each one teaches, and how a message file is named.

use std::fs;
use std::path::{Path, PathBuf};

use super::WatchSettings;

/// What a message appearing in a folder means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderKind {
    /// The user says it is spam.
    Spam,
    /// The user keeps it: a message moved here out of spam is ham.
    Ham,
    /// Teaches nothing (Trash, Sent, Drafts …).
    Neutral,
}

impl FolderKind {
    pub fn name(self) -> &'static str {
        match self {
            FolderKind::Spam => "spam",
            FolderKind::Ham => "ham",
            FolderKind::Neutral => "neutral",
        }
    }
}

/// One mail folder: a directory with `cur/` and `new/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    /// `INBOX`, or the folder's name below the root with `/` between levels
    /// (`Archive/2024`), whichever layout the Maildir uses.
    pub name: String,
    pub path: PathBuf,
    pub kind: FolderKind,
}

/// How deep folders are looked for: deeper trees are archives, not places users move spam.
const MAX_DEPTH: usize = 8;

/// The folders under a Maildir root, INBOX first, then by name.
pub fn discover(root: &Path, settings: &WatchSettings) -> Vec<Folder> {
    let mut found = Vec::new();
    if is_folder(root) {
        found.push(("INBOX".to_string(), root.to_path_buf()));
    }
    walk(root, "", 0, &mut found);
    found.sort_by(|a, b| (a.0 != "INBOX", &a.0).cmp(&(b.0 != "INBOX", &b.0)));
    found.dedup_by(|a, b| a.1 == b.1);
    found
        .into_iter()
        .map(|(name, path)| Folder {
            kind: classify(&name, settings),
            name,
            path,
        })
        .collect()
}

fn walk(dir: &Path, parent: &str, depth: usize, found: &mut Vec<(String, PathBuf)>) {
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(file_name) = entry.file_name().into_string() else {
            continue; // Dovecot and Courier name folders in modified UTF-7: always ASCII
        };
        if matches!(file_name.as_str(), "cur" | "new" | "tmp") || !entry.path().is_dir() {
            continue;
        }
        let path = entry.path();
        if let Some(plus) = file_name.strip_prefix('.') {
            // Maildir++: every folder sits in the root as `.A.B`; only the root holds them.
            if depth == 0 && !plus.is_empty() && plus != "." && is_folder(&path) {
                found.push((plus.replace('.', "/"), path));
            }
            continue;
        }
        let name = if parent.is_empty() {
            file_name
        } else {
            format!("{parent}/{file_name}")
        };
        if is_folder(&path) {
            found.push((name.clone(), path.clone()));
        }
        walk(&path, &name, depth + 1, found);
    }
}

pub fn is_folder(dir: &Path) -> bool {
    dir.join("cur").is_dir() || dir.join("new").is_dir()
}

/// What a folder teaches, by its name (see [`WatchSettings::spam_folders`]).
pub fn classify(name: &str, settings: &WatchSettings) -> FolderKind {
    let matches = |names: &[String]| names.iter().any(|n| name_matches(name, n));
    if matches(&settings.never_learn) {
        FolderKind::Neutral
    } else if matches(&settings.spam_folders) {
        FolderKind::Spam
    } else if name.eq_ignore_ascii_case("INBOX") || settings.other_folders_are_ham {
        FolderKind::Ham
    } else {
        FolderKind::Neutral
    }
}

/// Whether the user keeps mail in a folder of this name: one neither a spam folder nor a
/// never-learn one (Trash, Sent …), whether or not it is ham. A copy of a message there may
/// be what a copy of it elsewhere was made from.
pub fn keeps_mail(name: &str, settings: &WatchSettings) -> bool {
    let matches = |names: &[String]| names.iter().any(|n| name_matches(name, n));
    !matches(&settings.never_learn) && !matches(&settings.spam_folders)
}

/// Whether `folder` (as [`Folder::name`]) is `configured` or lies below it.
fn name_matches(folder: &str, configured: &str) -> bool {
    let normalise = |s: &str| -> Vec<String> {
        let s = s.trim().trim_start_matches('.');
        // Some servers show every folder below INBOX (`INBOX.Junk`).
        let s = match s.get(..6) {
            Some(p) if p.eq_ignore_ascii_case("INBOX.") || p.eq_ignore_ascii_case("INBOX/") => {
                &s[6..]
            }
            _ => s,
        };
        s.split(['/', '.']).map(str::to_ascii_lowercase).collect()
    };
    let (folder, configured) = (normalise(folder), normalise(configured));
    !configured.is_empty() && folder.starts_with(&configured)
}

/// The part of a Maildir file name that stays the same when its flags change: everything
/// before `:2,` (or `!2,`, which some servers use where `:` is not allowed in names).
/// Dot files are not messages.
pub fn unique_name(file_name: &str) -> Option<&str> {
    if file_name.starts_with('.') || file_name.is_empty() {
        return None;
    }
    let end = file_name
        .find(":2,")
        .or_else(|| file_name.find("!2,"))
        .unwrap_or(file_name.len());
    Some(&file_name[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_by_name_and_parents() {
        let s = WatchSettings::default();
        for (name, kind) in [
            ("INBOX", FolderKind::Ham),
            ("Junk", FolderKind::Spam),
            ("junk", FolderKind::Spam),
            ("Junk/old", FolderKind::Spam),
            ("INBOX/Spam", FolderKind::Spam),
            ("Trash", FolderKind::Neutral),
            ("Trash/Junk", FolderKind::Neutral),
            ("Sent Items", FolderKind::Neutral),
            ("Archive", FolderKind::Ham),
            ("Archive/Junk", FolderKind::Ham),
            ("Junkyard", FolderKind::Ham),
        ] {
            assert_eq!(classify(name, &s), kind, "{name}");
        }
        let s = WatchSettings {
            spam_folders: vec![".Junk".into(), "Archive/Junk".into()],
            other_folders_are_ham: false,
            ..WatchSettings::default()
        };
        assert_eq!(classify("Junk", &s), FolderKind::Spam);
        assert_eq!(classify("Archive/Junk", &s), FolderKind::Spam);
        assert_eq!(classify("Archive", &s), FolderKind::Neutral);
        assert_eq!(
            classify("INBOX", &s),
            FolderKind::Ham,
            "INBOX is always ham"
        );
    }

    #[test]
    fn unique_names() {
        for (file, unique) in [
            (
                "1700000000.M1P2.host,S=120:2,S",
                Some("1700000000.M1P2.host,S=120"),
            ),
            (
                "1700000000.M1P2.host,S=120:2,",
                Some("1700000000.M1P2.host,S=120"),
            ),
            ("1700000000.M1P2.host", Some("1700000000.M1P2.host")),
            ("1700000000.M1P2.host!2,RS", Some("1700000000.M1P2.host")),
            (".nfs000123", None),
        ] {
            assert_eq!(unique_name(file), unique, "{file}");
        }
    }

    #[test]
    fn discovers_both_layouts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "cur",
            ".Junk/cur",
            ".Trash/new",
            ".Archive.2024/cur",
            "Work/cur",
            "Work/Spam/new",
            "Work/tmp",
            "notes",
        ] {
            fs::create_dir_all(root.join(f)).unwrap();
        }
        let s = WatchSettings::default();
        let got: Vec<(String, FolderKind)> = discover(root, &s)
            .into_iter()
            .map(|f| (f.name, f.kind))
            .collect();
        let want = [
            ("INBOX", FolderKind::Ham),
            ("Archive/2024", FolderKind::Ham),
            ("Junk", FolderKind::Spam),
            ("Trash", FolderKind::Neutral),
            ("Work", FolderKind::Ham),
            ("Work/Spam", FolderKind::Ham),
        ];
        let want: Vec<(String, FolderKind)> =
            want.iter().map(|(n, k)| (n.to_string(), *k)).collect();
        assert_eq!(got, want);
    }
}
