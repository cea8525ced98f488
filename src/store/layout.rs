//! How the store lays its data out in sled: keys prefixed by kind, token counts in
//! buckets, and the byte encodings of counts, totals and ledger entries. Changing any of
//! this changes the schema (`SCHEMA_VERSION`).

use super::LedgerEntry;
use crate::message::Digest;
use crate::model::{Class, TokenCounts, Totals};

pub(super) const TOKEN: u8 = b't';
pub(super) const LEDGER: u8 = b'l';
const NOTE: u8 = b'n';
pub(super) const META_SCHEMA: &[u8] = b"mschema";
/// The name of the [`crate::message::DigestKind`] the ledger is keyed by (schema 4 on).
pub(super) const META_DIGEST: &[u8] = b"mdigest";
pub(super) const META_TOTALS: &[u8] = b"mtotals";
/// The number of the last flush that made new counts durable, which the marker file
/// records too: a database that holds a lower one lost what that flush made durable.
pub(super) const META_GENERATION: &[u8] = b"mgeneration";
/// Records of counts that small batches changed, not yet folded into the buckets: one a
/// batch, keyed by a sequence number, holding bucket entries (zero counts: features gone).
pub(super) const PENDING: u8 = b'p';

/// Buckets of token counts: a schema constant, since the hash picks a feature's bucket.
pub(super) const BUCKET_BITS: u32 = 8;

pub(super) fn bucket_of(hash: u64) -> u16 {
    (hash >> (64 - BUCKET_BITS)) as u16
}

pub(super) fn bucket_key(bucket: u16) -> [u8; 3] {
    let [hi, lo] = bucket.to_be_bytes();
    [TOKEN, hi, lo]
}

/// The bucket a key made by [`bucket_key`] names.
pub(super) fn bucket_of_key(key: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(key.get(1..3)?.try_into().ok()?))
}

pub(super) fn pending_key(seq: u64) -> [u8; 9] {
    let mut k = [PENDING; 9];
    k[1..].copy_from_slice(&seq.to_be_bytes());
    k
}

pub(super) fn pending_seq(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(1..9)?.try_into().ok()?))
}

pub(super) fn note_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(NOTE);
    k.extend_from_slice(key);
    k
}

pub(super) fn ledger_key(digest: &Digest) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(LEDGER);
    k.extend_from_slice(digest);
    k
}

/// A bucket on disk: entries sorted by feature, each `len, feature, 4 counts`, the numbers
/// in LEB128: most counts fit a byte, which halves what a batch writes and sled keeps.
pub(super) fn encode_entry(out: &mut Vec<u8>, feature: &str, counts: &TokenCounts) {
    put_varint(out, feature.len() as u32);
    out.extend_from_slice(feature.as_bytes());
    for v in count_fields(counts) {
        put_varint(out, v);
    }
}

/// A feature's counts in the order an entry holds them.
pub(super) fn count_fields(c: &TokenCounts) -> [u32; 4] {
    [
        c.occurrences[0],
        c.occurrences[1],
        c.messages[0],
        c.messages[1],
    ]
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &mut &[u8]) -> Option<u32> {
    let mut v = 0u64;
    for shift in (0..35).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return u32::try_from(v).ok();
        }
    }
    None
}

/// The entries of a bucket, read in place; `None` where the bytes are damaged.
pub(super) struct BucketEntries<'a>(pub(super) &'a [u8]);

impl<'a> Iterator for BucketEntries<'a> {
    type Item = Option<(&'a str, TokenCounts)>;

    fn next(&mut self) -> Option<Self::Item> {
        next_entry(&mut self.0, |b| {
            let (feature, fields) = entry(b)?;
            Some((std::str::from_utf8(feature).ok()?, counts(fields)))
        })
    }
}

/// One entry of a bucket, its feature as bytes and its counts in [`count_fields`]' order,
/// moving past it; `None` where the bytes are damaged. Always inlined: [`find_entry`]
/// passes hundreds of entries per lookup, and a call for each cost 4% of a one-message
/// `spamnb filter`.
#[inline(always)]
fn entry<'a>(b: &mut &'a [u8]) -> Option<(&'a [u8], [u32; 4])> {
    let len = get_varint(b)? as usize;
    let feature = take(b, len)?;
    let mut fields = [0u32; 4];
    for f in &mut fields {
        *f = get_varint(b)?;
    }
    Some((feature, fields))
}

/// The counts of `feature` in a bucket (`None` inside: not there), or `None` where the
/// bytes are damaged. The features on the way are compared as bytes, by length first, not
/// checked as UTF-8 and compared as strings: scoring one message with no table in memory
/// (a delivery through `spamnb filter`) looks up a few hundred features in buckets of
/// hundreds of entries, and decoding each entry on the way was a fifth of that process's
/// work. (Stopping at the first feature past it, as the order allows, cost more than it
/// saved below a million features.)
pub(super) fn find_entry(mut bucket: &[u8], feature: &str) -> Option<Option<TokenCounts>> {
    while !bucket.is_empty() {
        let (f, fields) = entry(&mut bucket)?;
        if f == feature.as_bytes() {
            return Some(Some(counts(fields)));
        }
    }
    Some(None)
}

/// The entries of a bucket as schemas 1 and 2 wrote them (`len: u16 LE, feature,
/// 4 × u32 LE`), read only to upgrade a database; `None` where the bytes are damaged.
pub(super) struct FixedEntries<'a>(pub(super) &'a [u8]);

impl<'a> Iterator for FixedEntries<'a> {
    type Item = Option<(&'a str, TokenCounts)>;

    fn next(&mut self) -> Option<Self::Item> {
        next_entry(&mut self.0, |b| {
            let len = u16::from_le_bytes(take(b, 2)?.try_into().ok()?) as usize;
            let feature = std::str::from_utf8(take(b, len)?).ok()?;
            let mut fields = [0u32; 4];
            for f in &mut fields {
                *f = u32::from_le_bytes(take(b, 4)?.try_into().ok()?);
            }
            Some((feature, counts(fields)))
        })
    }
}

/// The next entry of `bytes` as `decode` reads it, moving past it; once an entry cannot be
/// read, `Some(None)` and nothing after it.
fn next_entry<'a>(
    bytes: &mut &'a [u8],
    decode: impl FnOnce(&mut &'a [u8]) -> Option<(&'a str, TokenCounts)>,
) -> Option<Option<(&'a str, TokenCounts)>> {
    if bytes.is_empty() {
        return None;
    }
    let mut rest = *bytes;
    let entry = decode(&mut rest);
    *bytes = if entry.is_some() { rest } else { &[] };
    Some(entry)
}

/// The next `len` bytes of `b`, moving past them.
fn take<'a>(b: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    let (head, rest) = b.split_at_checked(len)?;
    *b = rest;
    Some(head)
}

/// Counts from [`count_fields`]' order.
fn counts([o0, o1, m0, m1]: [u32; 4]) -> TokenCounts {
    TokenCounts {
        occurrences: [o0, o1],
        messages: [m0, m1],
    }
}

pub(super) fn encode_totals(t: &Totals) -> Vec<u8> {
    [
        t.messages[0],
        t.messages[1],
        t.occurrences[0],
        t.occurrences[1],
        t.presences[0],
        t.presences[1],
        t.vocabulary,
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect()
}

pub(super) fn decode_totals(b: &[u8]) -> Option<Totals> {
    let word = |i: usize| {
        Some(u64::from_le_bytes(
            b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    Some(Totals {
        messages: [word(0)?, word(1)?],
        occurrences: [word(2)?, word(3)?],
        presences: [word(4)?, word(5)?],
        vocabulary: word(6)?,
    })
}

pub(super) fn encode_ledger(e: &LedgerEntry) -> Vec<u8> {
    let mut out = vec![e.class as u8];
    out.extend_from_slice(&e.learned_at.to_le_bytes());
    out.extend_from_slice(e.user.as_deref().unwrap_or_default().as_bytes());
    out
}

pub(super) fn decode_ledger(b: &[u8]) -> Option<LedgerEntry> {
    let class = match b.first()? {
        0 => Class::Ham,
        1 => Class::Spam,
        _ => return None,
    };
    let learned_at = u64::from_le_bytes(b.get(1..9)?.try_into().ok()?);
    let user = std::str::from_utf8(b.get(9..)?).ok()?;
    Some(LedgerEntry {
        class,
        learned_at,
        user: (!user.is_empty()).then(|| user.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip() {
        let c = TokenCounts {
            occurrences: [1, u32::MAX],
            messages: [7, 0],
        };
        let t = Totals {
            messages: [1, 2],
            occurrences: [3, 4],
            presences: [5, 6],
            vocabulary: 7,
        };
        assert_eq!(decode_totals(&encode_totals(&t)), Some(t));
        let e = LedgerEntry {
            class: Class::Spam,
            learned_at: 99,
            user: Some("ann".into()),
        };
        assert_eq!(decode_ledger(&encode_ledger(&e)), Some(e));
        let mut bucket = Vec::new();
        encode_entry(&mut bucket, "a", &c);
        encode_entry(&mut bucket, "ünï:b", &TokenCounts::default());
        let entries: Vec<_> = BucketEntries(&bucket).collect();
        assert_eq!(
            entries,
            [Some(("a", c)), Some(("ünï:b", TokenCounts::default()))]
        );
        // Counts of every size, in fewer bytes than four apiece when small.
        let big = TokenCounts {
            occurrences: [127, 128],
            messages: [16_384, u32::MAX - 1],
        };
        let mut one = Vec::new();
        encode_entry(&mut one, "x", &big);
        assert_eq!(one.len(), 1 + 1 + 1 + 2 + 3 + 5);
        assert_eq!(BucketEntries(&one).collect::<Vec<_>>(), [Some(("x", big))]);
        // Looked up without decoding the others, as the iterator reads them.
        for (feature, counts) in [("a", Some(c)), ("ünï:b", Some(TokenCounts::default()))] {
            assert_eq!(find_entry(&bucket, feature), Some(counts));
        }
        assert_eq!(find_entry(&bucket, "b"), Some(None));
        assert_eq!(find_entry(&bucket, ""), Some(None));
        assert_eq!(find_entry(&[], "a"), Some(None));
        assert_eq!(find_entry(&one, "x"), Some(Some(big)));
        for end in 1..one.len() {
            assert_eq!(
                find_entry(&one[..end], "y"),
                None,
                "{end}: damage, not absence"
            );
        }
        let cut: Vec<_> = BucketEntries(&[3, b'a']).collect();
        assert_eq!(cut, [None], "a cut-off bucket is damage, not data");
        for end in 0..one.len() {
            let cut: Vec<_> = BucketEntries(&one[..end]).collect();
            assert!(end == 0 || cut == [None], "{end}: {cut:?}");
        }
        let mut fixed = vec![1, 0, b'a'];
        for v in [1u32, 2, 3, u32::MAX] {
            fixed.extend_from_slice(&v.to_le_bytes());
        }
        let old = TokenCounts {
            occurrences: [1, 2],
            messages: [3, u32::MAX],
        };
        assert_eq!(FixedEntries(&fixed).collect::<Vec<_>>(), [Some(("a", old))]);
        assert_eq!(FixedEntries(&fixed[..10]).collect::<Vec<_>>(), [None]);
        // A length whose bytes are no UTF-8 of their own.
        let long = "x".repeat(128);
        let mut fixed = vec![128, 0];
        fixed.extend_from_slice(long.as_bytes());
        fixed.extend_from_slice(&[0; 16]);
        let zero = TokenCounts::default();
        assert_eq!(
            FixedEntries(&fixed).collect::<Vec<_>>(),
            [Some((long.as_str(), zero))]
        );
    }
}
