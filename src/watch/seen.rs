//! The watcher's record of what it has seen, kept as notes in the store (see
//! [`Store::note`]): which message files each folder held, where each message was last seen,
//! and which users have a first baseline. It is what lets a rescan tell a message that is
//! new to a folder from one whose flags changed, and a move from a delivery.
//!
//! Keys, under `watch/`:
//! - `f` user NUL folder NUL unique-name → the message's digest: a file seen in a folder;
//! - `m` user NUL digest → the folder it was last seen in, NUL, when (seconds since the
//!   epoch, 8 bytes little-endian; records older than that format have no time): where a
//!   message came from;
//! - `u` user → the Maildir root: the user's first scan is done.

use std::collections::HashSet;

use crate::message::Digest;
use crate::store::{Error, Store};

const PREFIX: &[u8] = b"watch/";

pub type Change = (Vec<u8>, Option<Vec<u8>>);

fn key(kind: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut k = PREFIX.to_vec();
    k.push(kind);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            k.push(0);
        }
        k.extend_from_slice(p);
    }
    k
}

pub fn file_key(user: &str, folder: &str, unique: &str) -> Vec<u8> {
    key(
        b'f',
        &[user.as_bytes(), folder.as_bytes(), unique.as_bytes()],
    )
}

pub fn message_key(user: &str, digest: &Digest) -> Vec<u8> {
    key(b'm', &[user.as_bytes(), digest])
}

fn baseline_key(user: &str) -> Vec<u8> {
    key(b'u', &[user.as_bytes()])
}

pub fn knows_file(
    store: &dyn Store,
    user: &str,
    folder: &str,
    unique: &str,
) -> Result<bool, Error> {
    Ok(store.note(&file_key(user, folder, unique))?.is_some())
}

/// The folder `digest` was last seen in, for `user`.
pub fn last_folder(
    store: &dyn Store,
    user: &str,
    digest: &Digest,
) -> Result<Option<String>, Error> {
    Ok(store.note(&message_key(user, digest))?.map(|v| {
        let folder = v.split(|&b| b == 0).next().unwrap_or_default();
        String::from_utf8_lossy(folder).into_owned()
    }))
}

/// Forgets where `user`'s messages were last seen when that was before `cutoff` (seconds
/// since the epoch); returns how many records went. Such a message, moved later, counts
/// as delivered to its new folder. A record without a time (written before records had
/// one) is given `now`, so that an upgrade forgets nothing at once.
pub fn forget_moves(store: &dyn Store, user: &str, cutoff: u64, now: u64) -> Result<usize, Error> {
    let mut prefix = key(b'm', &[user.as_bytes()]);
    prefix.push(0);
    let mut changes = Vec::new();
    let mut forgotten = 0;
    store.for_each_note(&prefix, &mut |k, v| match v.iter().position(|&b| b == 0) {
        Some(at) => {
            let seen_at = v[at + 1..].try_into().map_or(0, u64::from_le_bytes);
            if seen_at < cutoff {
                changes.push((k.to_vec(), None));
                forgotten += 1;
            }
        }
        None => {
            let mut stamped = v.to_vec();
            stamped.push(0);
            stamped.extend_from_slice(&now.to_le_bytes());
            changes.push((k.to_vec(), Some(stamped)));
        }
    })?;
    store.write_notes(&changes)?;
    Ok(forgotten)
}

/// The unique names of the files recorded in a folder.
pub fn files_in(store: &dyn Store, user: &str, folder: &str) -> Result<HashSet<String>, Error> {
    let mut prefix = key(b'f', &[user.as_bytes(), folder.as_bytes()]);
    prefix.push(0);
    let mut names = HashSet::new();
    store.for_each_note(&prefix, &mut |k, _| {
        names.insert(String::from_utf8_lossy(&k[prefix.len()..]).into_owned());
    })?;
    Ok(names)
}

pub fn has_baseline(store: &dyn Store, user: &str) -> Result<bool, Error> {
    Ok(store.note(&baseline_key(user))?.is_some())
}

/// The changes that record a message file seen in a folder at `now` (seconds since the
/// epoch).
pub fn seen(
    user: &str,
    folder: &str,
    unique: &str,
    digest: &Digest,
    now: u64,
    changes: &mut Vec<Change>,
) {
    changes.push((file_key(user, folder, unique), Some(digest.to_vec())));
    let mut last_seen = folder.as_bytes().to_vec();
    last_seen.push(0);
    last_seen.extend_from_slice(&now.to_le_bytes());
    changes.push((message_key(user, digest), Some(last_seen)));
}

pub fn gone(user: &str, folder: &str, unique: &str, changes: &mut Vec<Change>) {
    changes.push((file_key(user, folder, unique), None));
}

pub fn baseline_done(user: &str, root: &str) -> Change {
    (baseline_key(user), Some(root.as_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SledStore, StoreOptions};

    #[test]
    fn old_records_of_moves_are_forgotten_and_unstamped_ones_stamped() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), &StoreOptions::default()).unwrap();
        let (d1, d2, d3) = ([1u8; 16], [2u8; 16], [3u8; 16]);
        let mut changes = Vec::new();
        seen("ann", "INBOX", "u1", &d1, 1_000, &mut changes);
        seen("ann", "Junk", "u2", &d2, 5_000, &mut changes);
        seen("bob", "INBOX", "u9", &d1, 1_000, &mut changes);
        // As a record was written before records had a time.
        changes.push((message_key("ann", &d3), Some(b"Archive".to_vec())));
        store.write_notes(&changes).unwrap();
        assert_eq!(
            last_folder(&store, "ann", &d1).unwrap().as_deref(),
            Some("INBOX")
        );
        assert_eq!(
            last_folder(&store, "ann", &d3).unwrap().as_deref(),
            Some("Archive")
        );

        assert_eq!(forget_moves(&store, "ann", 2_000, 9_000).unwrap(), 1);
        assert_eq!(last_folder(&store, "ann", &d1).unwrap(), None);
        assert_eq!(
            last_folder(&store, "ann", &d2).unwrap().as_deref(),
            Some("Junk")
        );
        assert_eq!(
            last_folder(&store, "ann", &d3).unwrap().as_deref(),
            Some("Archive")
        );
        // Only the records of where messages were: the files seen stay, and other users'.
        assert!(knows_file(&store, "ann", "INBOX", "u1").unwrap());
        assert_eq!(
            last_folder(&store, "bob", &d1).unwrap().as_deref(),
            Some("INBOX")
        );

        // The unstamped record was stamped 9,000: it goes with the rest later.
        assert_eq!(forget_moves(&store, "ann", 9_500, 10_000).unwrap(), 2);
        assert_eq!(last_folder(&store, "ann", &d3).unwrap(), None);
    }
}
