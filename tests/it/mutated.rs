//! Real mail, damaged at random, through everything that reads a message: MIME parsing at
//! any scan limit, the HTML renderer, tokens, spamnb's own rules and evals, the digest and
//! the header rewrite. Nothing may panic: a panic in a hook loses no mail (it fails
//! open) but scores none either.

use std::sync::Arc;

use spamnb::features::Extractor;
use spamnb::message::DigestKind;

use crate::util::corpus;

/// What breaks parsers: line ends of every kind, MIME and encoded-word syntax cut short,
/// markup and entities out of range, bytes that are not UTF-8.
const PIECES: &[&[u8]] = &[
    b"\r\n",
    b"\r",
    b"\0",
    b"\xff\xfe",
    b"\xc3",
    b"\xf0\x9f\x98",
    b"\n--b1\n",
    b"--b1--\n",
    b"Content-Type: multipart/mixed; boundary=\"b1\"\n",
    b"Content-Type: text/html; charset=\"utf-7\"\n",
    b"Content-Type: message/rfc822\n",
    b"Content-Transfer-Encoding: base64\n",
    b"Content-Transfer-Encoding: quoted-printable\n",
    b"=?utf-8?b?",
    b"=?iso-8859-1?q?=E9=",
    b"?=",
    b"=\n",
    b"=XX",
    b"<a href=\"http://",
    b"</a>",
    b"<img width=999999 height=99999>",
    b"<head>",
    b"<!--",
    b"&#99999999;",
    b"&#x1F600;",
    b"http://[::1]:80/",
    b"https://xn--80ak6aa92e.com/",
    b"Date: Mon, 32 Feb 99999 25:61:61 +9999\n",
    b"Received: from x by y; Tue, 1 Jan 1970 00:00:00 -1200\n",
    b"From: 123456789@",
    b"\xe2\x80\xae",
];

fn mutated(mail: &[u8], other: &[u8], next: &mut impl FnMut() -> u64) -> Vec<u8> {
    let mut m = mail.to_vec();
    for _ in 0..1 + next() % 8 {
        let at = next() as usize % (m.len() + 1);
        let piece = PIECES[next() as usize % PIECES.len()];
        match next() % 7 {
            0 if at < m.len() => m[at] = next() as u8,
            1 => drop(m.splice(at..at, piece.iter().copied())),
            2 => m.truncate(at),
            3 => {
                let copy = m[at..(at + next() as usize % 4000).min(m.len())].to_vec();
                m.splice(at..at, copy);
            }
            4 => {
                let from = next() as usize % (other.len() + 1);
                m.splice(at.., other[from..].iter().copied());
            }
            5 => drop(m.drain(at..(at + next() as usize % 200).min(m.len()))),
            _ => (0..next() % 500).for_each(|_| m.extend_from_slice(piece)),
        }
    }
    m
}

#[test]
fn damaged_corpus_mail_never_panics() {
    let Some(root) = corpus() else { return };
    let mails: Vec<Vec<u8>> = ["spam-2", "easy-ham-1", "hard-ham-1"]
        .iter()
        .flat_map(|group| crate::util::corpus_files(&root, group, 300))
        .map(|p| std::fs::read(p).expect("read corpus mail"))
        .collect();
    let (rules, _) = spamnb::rules::RuleSet::built_in();
    let rules = Some(Arc::new(rules));
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..15_000 {
        let mail = &mails[next() as usize % mails.len()];
        let other = &mails[next() as usize % mails.len()];
        let m = mutated(mail, other, &mut next);
        let scan_limit = match next() % 3 {
            0 => 512 * 1024,
            1 => next() as usize % 4096,
            _ => next() as usize % (m.len() + 1),
        };
        let extractor = Extractor {
            tokenizer: Default::default(),
            scan_limit,
            rules: rules.clone(),
        };
        let read = std::panic::catch_unwind(|| {
            extractor.features(&m);
            for kind in [DigestKind::AsSent, DigestKind::WholeMessage] {
                kind.of(&m);
            }
            spamnb::spam_headers::rewrite(&m, &[("X-Spam-Flag", "NO".into())], Some("[SPAM]"));
        });
        assert!(
            read.is_ok(),
            "round {round} panicked on:\n{}",
            String::from_utf8_lossy(&m)
        );
    }
}
