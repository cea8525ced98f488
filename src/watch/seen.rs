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
//! - `u` user → the Maildir root: the user's first scan is done;
//! - `r` user NUL digest → a folder, NUL, a unique name, NUL, when: a copy of a message
//!   learned as spam made there out of a spam folder while the one copied stayed, a rescue
//!   that the copy left behind, once marked deleted or gone, completes.

use std::collections::{HashMap, HashSet};

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

fn rescue_key(user: &str, digest: &Digest) -> Vec<u8> {
    key(b'r', &[user.as_bytes(), digest])
}

/// A rescue begun: `user` made the copy `unique` of `digest` in `folder` at `now` out of a
/// spam folder, where the one copied stayed.
pub fn rescue_begun(
    user: &str,
    digest: &Digest,
    folder: &str,
    unique: &str,
    now: u64,
    changes: &mut Vec<Change>,
) {
    let place = [folder.as_bytes(), unique.as_bytes()].join(&0);
    changes.push((rescue_key(user, digest), Some(stamp(&place, now))));
}

/// The folder and unique name of the copy of `digest` that `user` filed to begin a rescue,
/// and when, if that was after `since` (seconds since the epoch).
pub fn rescue_pending(
    store: &dyn Store,
    user: &str,
    digest: &Digest,
    since: u64,
) -> Result<Option<(String, String, u64)>, Error> {
    let Some(v) = store.note(&rescue_key(user, digest))? else {
        return Ok(None);
    };
    let mut parts = v.splitn(3, |&b| b == 0);
    let (Some(folder), Some(unique), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return Ok(None);
    };
    let at = rescue_at(&v);
    Ok((at >= since).then(|| {
        (
            String::from_utf8_lossy(folder).into_owned(),
            String::from_utf8_lossy(unique).into_owned(),
            at,
        )
    }))
}

/// When a rescue began: the last 8 bytes of its record.
fn rescue_at(v: &[u8]) -> u64 {
    v.len()
        .checked_sub(8)
        .and_then(|at| v[at..].try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

pub fn rescue_done(user: &str, digest: &Digest, changes: &mut Vec<Change>) {
    changes.push((rescue_key(user, digest), None));
}

/// The digest of the message file `unique` recorded in `folder`.
pub fn file_digest(
    store: &dyn Store,
    user: &str,
    folder: &str,
    unique: &str,
) -> Result<Option<Digest>, Error> {
    Ok(store
        .note(&file_key(user, folder, unique))?
        .and_then(|v| Digest::try_from(v.as_slice()).ok()))
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
    Ok(store
        .note(&message_key(user, digest))?
        .map(|v| String::from_utf8_lossy(last_seen(&v).0).into_owned()))
}

/// A record of where a message was last seen: the folder, NUL, the time.
fn stamp(folder: &[u8], at: u64) -> Vec<u8> {
    let mut v = folder.to_vec();
    v.push(0);
    v.extend_from_slice(&at.to_le_bytes());
    v
}

/// The folder and time of a [`stamp`]; no time in a record older than the format.
fn last_seen(v: &[u8]) -> (&[u8], Option<u64>) {
    match v.iter().position(|&b| b == 0) {
        Some(at) => (
            &v[..at],
            Some(v[at + 1..].try_into().map_or(0, u64::from_le_bytes)),
        ),
        None => (v, None),
    }
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
    store.for_each_note(&prefix, &mut |k, v| match last_seen(v) {
        (_, Some(at)) if at < cutoff => {
            changes.push((k.to_vec(), None));
            forgotten += 1;
        }
        (_, Some(_)) => {}
        (folder, None) => changes.push((k.to_vec(), Some(stamp(folder, now)))),
    })?;
    // Rescues never completed (the copy in Junk kept) go with them.
    let mut rescues = key(b'r', &[user.as_bytes()]);
    rescues.push(0);
    store.for_each_note(&rescues, &mut |k, v| {
        if rescue_at(v) < cutoff {
            changes.push((k.to_vec(), None));
        }
    })?;
    if !changes.is_empty() {
        store.write_notes(&changes)?;
    }
    Ok(forgotten)
}

/// The unique names of the files recorded in a folder.
pub fn files_in(store: &dyn Store, user: &str, folder: &str) -> Result<HashSet<String>, Error> {
    let mut names = HashSet::new();
    for_each_file(store, user, folder, &mut |unique, _| {
        names.insert(unique);
    })?;
    Ok(names)
}

/// Each file recorded in a folder: its unique name and its digest as recorded.
fn for_each_file(
    store: &dyn Store,
    user: &str,
    folder: &str,
    each: &mut dyn FnMut(String, &[u8]),
) -> Result<(), Error> {
    let mut prefix = key(b'f', &[user.as_bytes(), folder.as_bytes()]);
    prefix.push(0);
    store.for_each_note(&prefix, &mut |k, v| {
        each(String::from_utf8_lossy(&k[prefix.len()..]).into_owned(), v)
    })
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
    file_seen(user, folder, unique, digest, changes);
    changes.push((
        message_key(user, digest),
        Some(stamp(folder.as_bytes(), now)),
    ));
}

/// The changes that record a message file seen in a folder, leaving where the message was
/// last seen as it was.
pub fn file_seen(
    user: &str,
    folder: &str,
    unique: &str,
    digest: &Digest,
    changes: &mut Vec<Change>,
) {
    changes.push((file_key(user, folder, unique), Some(digest.to_vec())));
}

/// The unique names of the files recorded in a folder that hold the message `digest`.
pub fn copies_in(
    store: &dyn Store,
    user: &str,
    folder: &str,
    digest: &Digest,
) -> Result<HashSet<String>, Error> {
    let mut names = HashSet::new();
    for_each_file(store, user, folder, &mut |unique, v| {
        if v == digest {
            names.insert(unique);
        }
    })?;
    Ok(names)
}

/// The unique names of the files recorded in a folder that hold each of `digests`, in one
/// pass over the folder's record: a folder emptied at once asks of every message in it.
pub fn copies_of(
    store: &dyn Store,
    user: &str,
    folder: &str,
    digests: &HashSet<Digest>,
) -> Result<HashMap<Digest, HashSet<String>>, Error> {
    let mut copies: HashMap<Digest, HashSet<String>> = HashMap::new();
    for_each_file(store, user, folder, &mut |unique, v| {
        if let Ok(d) = Digest::try_from(v)
            && digests.contains(&d)
        {
            copies.entry(d).or_default().insert(unique);
        }
    })?;
    Ok(copies)
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
        rescue_begun("ann", &d1, "INBOX", "u1", 1_000, &mut changes);
        rescue_begun("ann", &d2, "INBOX", "u2", 5_000, &mut changes);
        store.write_notes(&changes).unwrap();
        let at = |user: &str, d: &Digest| last_folder(&store, user, d).unwrap();
        let ann = || [&d1, &d2, &d3].map(|d| at("ann", d));
        let some = |f: &str| Some(f.to_string());
        assert_eq!(ann(), [some("INBOX"), some("Junk"), some("Archive")]);

        let pending = |d: &Digest| rescue_pending(&store, "ann", d, 0).unwrap().is_some();
        assert!(pending(&d1) && pending(&d2));
        assert_eq!(forget_moves(&store, "ann", 2_000, 9_000).unwrap(), 1);
        assert_eq!(ann(), [None, some("Junk"), some("Archive")]);
        assert!(
            !pending(&d1) && pending(&d2),
            "a rescue never completed goes too"
        );
        // Only the records of where messages were: the files seen stay, and other users'.
        assert!(knows_file(&store, "ann", "INBOX", "u1").unwrap());
        assert_eq!(at("bob", &d1), some("INBOX"));

        // The unstamped record was stamped 9,000 (now), not 2,000 (the cutoff): it
        // outlives the record seen at 5,000.
        assert_eq!(forget_moves(&store, "ann", 5_001, 9_600).unwrap(), 1);
        assert_eq!(ann(), [None, None, some("Archive")]);
        assert_eq!(forget_moves(&store, "ann", 9_500, 10_000).unwrap(), 1);
        assert_eq!(ann(), [None, None, None]);
    }
}
