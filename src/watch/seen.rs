//! The watcher's record of what it has seen, kept as notes in the store (see
//! [`Store::note`]): which message files each folder held, where each message was last seen,
//! and which users have a first baseline. It is what lets a rescan tell a message that is
//! new to a folder from one whose flags changed, and a move from a delivery.
//!
//! Keys, under `watch/`:
//! - `f` user NUL folder NUL unique-name → the message's digest: a file seen in a folder;
//! - `m` user NUL digest → the folder it was last seen in: where a message came from;
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
    Ok(store
        .note(&message_key(user, digest))?
        .map(|v| String::from_utf8_lossy(&v).into_owned()))
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

/// The changes that record a message file seen in a folder.
pub fn seen(user: &str, folder: &str, unique: &str, digest: &Digest, changes: &mut Vec<Change>) {
    changes.push((file_key(user, folder, unique), Some(digest.to_vec())));
    changes.push((message_key(user, digest), Some(folder.as_bytes().to_vec())));
}

pub fn gone(user: &str, folder: &str, unique: &str, changes: &mut Vec<Change>) {
    changes.push((file_key(user, folder, unique), None));
}

pub fn baseline_done(user: &str, root: &str) -> Change {
    (baseline_key(user), Some(root.as_bytes().to_vec()))
}
