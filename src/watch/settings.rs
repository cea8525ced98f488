//! The `[watch]` section of the configuration: whose Maildirs are watched, which folders
//! mean spam, which teach nothing, and how much one burst of moves may teach.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The section as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWatch {
    /// User name → the root of that user's Maildir (the folder holding INBOX's `cur/`).
    #[serde(default)]
    users: BTreeMap<String, PathBuf>,
    spam_folders: Option<Vec<String>>,
    never_learn: Option<Vec<String>>,
    other_folders_are_ham: Option<bool>,
    burst_limit: Option<usize>,
    burst_window_secs: Option<u64>,
    debounce_ms: Option<u64>,
    forget_moves_after_days: Option<u64>,
}

/// One user's mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMaildir {
    pub user: String,
    pub root: PathBuf,
}

/// What the watcher does, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchSettings {
    pub users: Vec<UserMaildir>,
    /// Folder names whose mail is spam. A folder matches a name when the name is the
    /// folder's full name or the name of one of its parents, ignoring case and the leading
    /// dot of Maildir++ (`.Junk` is `Junk`).
    pub spam_folders: Vec<String>,
    /// Folders that teach nothing, matched like `spam_folders`; they win over it.
    pub never_learn: Vec<String>,
    /// Whether folders other than INBOX that are neither spam nor never-learn count as ham.
    pub other_folders_are_ham: bool,
    /// How many messages one user's moves may teach within `burst_window`; 0 for no limit.
    pub burst_limit: usize,
    pub burst_window: Duration,
    /// How long the watcher waits for a burst of events to settle before it reads them.
    pub debounce: Duration,
    /// How long the record of where a message was last seen is kept; `None`: for ever.
    pub forget_moves_after: Option<Duration>,
    /// How often a Maildir that is not there is looked for (a mailbox is made at its first
    /// delivery). Not in the file: only tests want another.
    pub look_for_maildirs: Duration,
}

pub const DEFAULT_SPAM_FOLDERS: &[&str] =
    &["Junk", "Spam", "Junk E-mail", "Junk Email", "Bulk Mail"];
pub const DEFAULT_NEVER_LEARN: &[&str] = &[
    "Trash",
    "Deleted Items",
    "Deleted Messages",
    "Sent",
    "Sent Items",
    "Sent Messages",
    "Drafts",
    "Templates",
    "Outbox",
];
/// A user who moves more than this many messages in ten minutes is reorganising folders or
/// being impersonated, not correcting the filter one message at a time.
pub const DEFAULT_BURST_LIMIT: usize = 500;
pub const DEFAULT_BURST_WINDOW: Duration = Duration::from_secs(600);
/// Long enough to gather a client's MOVE of many messages into one write, short enough that
/// a move is learned well within a second.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(100);
/// A record per message ever delivered grows without end (80 bytes a message and user); a
/// message that sat unmoved for half a year is rarely moved after, and then its move is
/// taken for a delivery.
pub const DEFAULT_FORGET_MOVES_AFTER_DAYS: u64 = 180;
pub const DAY_SECS: u64 = 86_400;

impl Default for WatchSettings {
    fn default() -> Self {
        WatchSettings {
            users: Vec::new(),
            spam_folders: DEFAULT_SPAM_FOLDERS.iter().map(|s| s.to_string()).collect(),
            never_learn: DEFAULT_NEVER_LEARN.iter().map(|s| s.to_string()).collect(),
            other_folders_are_ham: true,
            burst_limit: DEFAULT_BURST_LIMIT,
            burst_window: DEFAULT_BURST_WINDOW,
            debounce: DEFAULT_DEBOUNCE,
            forget_moves_after: Some(Duration::from_secs(
                DEFAULT_FORGET_MOVES_AFTER_DAYS * DAY_SECS,
            )),
            look_for_maildirs: Duration::from_secs(30),
        }
    }
}

impl RawWatch {
    /// Checks the section; the error says which key is wrong (the caller adds the file).
    pub fn validate(self) -> Result<WatchSettings, String> {
        let d = WatchSettings::default();
        for (user, root) in &self.users {
            if user.is_empty() || user.contains(['\0', '/']) {
                return Err(format!("watch.users: {user:?} is not a usable user name"));
            }
            if !root.is_absolute() {
                return Err(format!(
                    "watch.users.{user}: the Maildir {} must be an absolute path",
                    root.display()
                ));
            }
        }
        let window = self
            .burst_window_secs
            .map_or(d.burst_window, Duration::from_secs);
        if window.is_zero() {
            return Err("watch.burst_window_secs must be above 0".into());
        }
        let debounce = self.debounce_ms.map_or(d.debounce, Duration::from_millis);
        if debounce > Duration::from_secs(1) {
            return Err(format!(
                "watch.debounce_ms must be at most 1000 (moves are learned within a second or two), not {}",
                debounce.as_millis()
            ));
        }
        Ok(WatchSettings {
            users: self
                .users
                .into_iter()
                .map(|(user, root)| UserMaildir { user, root })
                .collect(),
            spam_folders: self.spam_folders.unwrap_or(d.spam_folders),
            never_learn: self.never_learn.unwrap_or(d.never_learn),
            other_folders_are_ham: self
                .other_folders_are_ham
                .unwrap_or(d.other_folders_are_ham),
            burst_limit: self.burst_limit.unwrap_or(d.burst_limit),
            burst_window: window,
            debounce,
            forget_moves_after: match self.forget_moves_after_days {
                None => d.forget_moves_after,
                Some(0) => None,
                Some(days) => Some(Duration::from_secs(days.saturating_mul(DAY_SECS))),
            },
            look_for_maildirs: d.look_for_maildirs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_section() {
        let raw: RawWatch = toml::from_str(
            "spam_folders = [\".Junk\"]\nburst_limit = 0\ndebounce_ms = 50\n[users]\nann = \"/home/ann/Maildir\"\nbob = \"/home/bob/Maildir\"\n",
        )
        .unwrap();
        let s = raw.validate().unwrap();
        assert_eq!(s.users.len(), 2);
        assert_eq!(
            s.users[0],
            UserMaildir {
                user: "ann".into(),
                root: "/home/ann/Maildir".into()
            }
        );
        assert_eq!(s.spam_folders, [".Junk"]);
        assert_eq!(
            s.never_learn,
            WatchSettings::default().never_learn,
            "defaults fill the rest"
        );
        assert_eq!((s.burst_limit, s.debounce), (0, Duration::from_millis(50)));
        assert_eq!(
            s.forget_moves_after,
            Some(Duration::from_secs(180 * DAY_SECS))
        );
        let never: RawWatch = toml::from_str("forget_moves_after_days = 0\n").unwrap();
        assert_eq!(never.validate().unwrap().forget_moves_after, None);

        for (text, wanted) in [
            ("burst_window_secs = 0\n", "above 0"),
            ("debounce_ms = 5000\n", "at most 1000"),
            ("[users]\n\"a/b\" = \"/x\"\n", "not a usable user name"),
        ] {
            let e = toml::from_str::<RawWatch>(text)
                .unwrap()
                .validate()
                .unwrap_err();
            assert!(e.contains(wanted), "{text:?}: {e}");
        }
    }
}
