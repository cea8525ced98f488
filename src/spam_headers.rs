//! The headers spamnb writes, in SpamAssassin's conventions so that existing Sieve,
//! procmail and maildrop rules keep working, and the rewrite of a message that carries them.

use std::borrow::Cow;

use crate::message::{
    PREV_SUBJECT, first_field_span, is_own_header, raw_head, raw_header_values, unfold,
    without_prev_subject,
};
use crate::model::{Decision, ModelConfig, ReportHeader, Verdict};

/// `X-Spam-Flag`, `X-Spam-Status`, `X-Spam-Level`, `X-Spam-Class` and, as
/// `report_header` says, `X-Spam-Report` for a verdict, in the order they are written.
/// Lines are folded at 78 characters, with `\n\t`.
pub fn spam_headers(verdict: &Verdict, model: &ModelConfig) -> Vec<(&'static str, String)> {
    let is_spam = verdict.decision == Decision::Spam;
    let tests = if verdict.rules.is_empty() {
        "none".to_string()
    } else {
        verdict.rules.join(",")
    };
    let status = format!(
        "{}, score={:.1} required={:.1} tests={} version=spamnb-{}",
        if is_spam { "Yes" } else { "No" },
        shown(verdict.score),
        model.spam_threshold,
        tests,
        env!("CARGO_PKG_VERSION"),
    );
    let mut headers = vec![
        (
            "X-Spam-Flag",
            if is_spam { "YES" } else { "NO" }.to_string(),
        ),
        ("X-Spam-Status", fold("X-Spam-Status", &status)),
        ("X-Spam-Level", level(verdict.score)),
        ("X-Spam-Class", verdict.decision.name().to_string()),
    ];
    let reported = match model.report_header {
        ReportHeader::Never => false,
        ReportHeader::Spam => is_spam,
        ReportHeader::Always => true,
    };
    if reported {
        headers.push(("X-Spam-Report", report(verdict)));
    }
    headers
}

/// A score as the headers show it, to one decimal: rounded here, so that a score just
/// below zero reads "0.0", not "-0.0".
fn shown(score: f64) -> f64 {
    (score * 10.0).round() / 10.0 + 0.0
}

/// What goes before the Subject of spam, as `[model] subject_tag` says (`_SCORE_` made
/// the score); none for other mail, or when no tag is set.
pub fn subject_tag(verdict: &Verdict, model: &ModelConfig) -> Option<String> {
    (verdict.decision == Decision::Spam && !model.subject_tag.is_empty()).then(|| {
        model
            .subject_tag
            .replace("_SCORE_", &format!("{:.1}", shown(verdict.score)))
    })
}

/// Whether `subject` is what spamnb's tag made of the subject `sent`: the tag `template`
/// (`[model] subject_tag`) renders, at any score, then `sent`. All three unfolded.
pub fn is_tagging_of(subject: &str, sent: &str, template: &str) -> bool {
    let template = unfold(template.as_bytes());
    let mut pieces = template.split("_SCORE_");
    let Some(mut rest) = pieces.next().and_then(|p| subject.strip_prefix(p)) else {
        return false;
    };
    for piece in pieces {
        let Some(after) = past_score(rest).and_then(|r| r.strip_prefix(piece)) else {
            return false;
        };
        rest = after;
    }
    !template.is_empty()
        && match rest.strip_prefix(' ') {
            Some(tail) => tail == sent,
            None => rest.is_empty() && sent.is_empty(),
        }
}

/// `text` past the score it starts with, as `subject_tag` renders one: `9.1`, `-0.4`.
fn past_score(text: &str) -> Option<&str> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let digits = unsigned.bytes().take_while(u8::is_ascii_digit).count();
    let fraction = unsigned[digits..].strip_prefix('.')?;
    (digits > 0 && fraction.starts_with(|c: char| c.is_ascii_digit())).then(|| &fraction[1..])
}

/// `raw` as its sender sent it, for scoring and tagging in transit. Its [`PREV_SUBJECT`]
/// fields go: there they are the sender's, and read as the subject they would put words
/// of the sender's choosing in place of the Subject being delivered. When the Subject is
/// exactly spamnb's tag (`template`, at any score) before such a field's value, though, an
/// earlier pass of spamnb wrote both (the milter, then `filter` at delivery): the Subject
/// goes back to the field's value (none, when it is empty), so that the tag is neither
/// scored as the sender's words nor tagged again. A sender gains nothing by it: the only
/// words it takes away are a tag of spamnb's own shape.
pub fn as_sent<'a>(raw: &'a [u8], template: &str) -> Cow<'a, [u8]> {
    let mut copy = match without_prev_subject(raw) {
        Cow::Borrowed(raw) => return Cow::Borrowed(raw),
        Cow::Owned(copy) => copy,
    };
    let head = raw_head(raw);
    let (Some(prev), Some(subject)) = (
        raw_header_values(head, PREV_SUBJECT).first().copied(),
        raw_header_values(head, "Subject").first().copied(),
    ) else {
        return Cow::Owned(copy);
    };
    if !is_tagging_of(&unfold(subject), &unfold(prev), template) {
        return Cow::Owned(copy);
    }
    if let Some(span) = first_field_span(&copy, "Subject") {
        let eol: &[u8] = if copy[..span.end].ends_with(b"\r\n") {
            b"\r\n"
        } else {
            b"\n"
        };
        let sent = prev.trim_ascii();
        let field = if sent.is_empty() {
            Vec::new()
        } else {
            fold_field("Subject", &lines_of(sent), eol)
        };
        copy.splice(span, field);
    }
    Cow::Owned(copy)
}

/// What a report line shows of a feature: the line stays within 78 characters.
const REPORTED_FEATURE_BYTES: usize = 64;

/// How the score was made and the features that moved it most, one a line, as
/// SpamAssassin's report lists its rules: `*  4.2 subj:cheap`. Features are the mail's own
/// words, so anything but printable ASCII in them is escaped: a sender may not write
/// header lines of their own, nor 8-bit bytes into a header.
fn report(verdict: &Verdict) -> String {
    let summary = match (&verdict.parts, &verdict.note) {
        (_, Some(note)) => format!("{}: {note}", verdict.decision.name()),
        (Some(p), None) if p.strongest_count < p.all_count => format!(
            "score {:.1} = {:.2} x {:.1} ({} strongest of {} features) + {:.2} x {:.1} (all)",
            verdict.score,
            1.0 - p.all_share,
            p.strongest,
            p.strongest_count,
            p.all_count,
            p.all_share,
            p.all
        ),
        (Some(p), None) => format!("score {:.1} from all {} features", p.all, p.all_count),
        (None, None) => format!("score {:.1}", verdict.score),
    };
    let mut out = fold("X-Spam-Report", &summary);
    for r in &verdict.reasons {
        let mut feature = String::new();
        for c in r.feature.chars() {
            match c {
                ' '..='~' => feature.push(c),
                _ => feature.extend(c.escape_unicode()),
            }
        }
        // All ASCII now: any byte is a char boundary.
        feature.truncate(REPORTED_FEATURE_BYTES);
        out.push_str(&format!("\n\t* {:>4.1} {feature}", r.weight));
    }
    out
}

/// One star per unit of log-odds above zero, at most 50: rules such as
/// `X-Spam-Level: *****` keep meaning "more sure than that".
fn level(score: f64) -> String {
    let stars = score.clamp(0.0, 50.0) as usize;
    "*".repeat(stars)
}

/// Folds header `name`'s value at spaces or commas so no line passes 78 characters (RFC
/// 5322 recommends it; SpamAssassin does it for the test list). The fold's tab takes the
/// place of the space it is at: no line ends in white space.
fn fold(name: &str, value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 16);
    let mut line_len = name.len() + 2;
    for piece in value.split_inclusive([' ', ',']) {
        if line_len + piece.len() > 78 && line_len > 0 {
            out.truncate(out.trim_end_matches(' ').len());
            out.push_str("\n\t");
            line_len = 1;
        }
        out.push_str(piece);
        line_len += piece.len();
    }
    out.trim_end().to_string()
}

/// `raw` as spamnb passes it on with `verdict`: its headers added, a spam subject tagged
/// as the model says, a subject spamnb tagged before put back first (see [`as_sent`]).
pub fn tagged(raw: &[u8], verdict: &Verdict, model: &ModelConfig) -> Vec<u8> {
    let tag = subject_tag(verdict, model);
    let raw = as_sent(raw, &model.subject_tag);
    rewrite(&raw, &spam_headers(verdict, model), tag.as_deref())
}

/// `raw` with every incoming `X-Spam-*` header removed (a sender can forge them) and
/// `headers` added at the end of the header block, in the message's own line ending. With
/// a `subject_tag`, the first Subject starts with it, folded as it was, and
/// [`PREV_SUBJECT`] keeps what it was, unfolded (empty, and a Subject of the tag alone,
/// when there was none). Both are folded where too long (see
/// [`fold_field`]): a long subject makes no line over the 998 octets RFC 5322 allows.
pub fn rewrite(raw: &[u8], headers: &[(&str, String)], subject_tag: Option<&str>) -> Vec<u8> {
    let crlf = raw
        .windows(2)
        .position(|w| w == b"\r\n")
        .is_some_and(|at| raw.iter().position(|&b| b == b'\n') == Some(at + 1));
    let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut out = Vec::with_capacity(raw.len() + 512);
    let mut rest = raw;
    let mut skipping = false;
    // The subject as it was, its lines split at LF, while its field is read and after;
    // and where in `out` the tagged field goes, written once the whole field is read.
    let mut sent_subject: Option<Vec<u8>> = None;
    let mut subject_at = None;
    let mut in_subject = false;
    let mut body_at = None;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let line = &rest[..end];
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if content.is_empty() {
            body_at = Some(raw.len() - rest.len());
            break;
        }
        let continuation = matches!(content[0], b' ' | b'\t');
        if continuation && in_subject {
            let sent = sent_subject.get_or_insert_default();
            sent.push(b'\n');
            sent.extend_from_slice(content);
            rest = &rest[end..];
            continue;
        } else if !continuation {
            let name = content.split(|&b| b == b':').next().unwrap_or_default();
            skipping = std::str::from_utf8(name).is_ok_and(is_own_header);
            in_subject = false;
            if subject_tag.is_some()
                && sent_subject.is_none()
                && let Some(value) = content.get(name.len() + 1..)
                && name.trim_ascii_end().eq_ignore_ascii_case(b"subject")
            {
                in_subject = true;
                sent_subject = Some(value.trim_ascii_start().to_vec());
                subject_at = Some(out.len());
                rest = &rest[end..];
                continue;
            }
        }
        if !skipping {
            out.extend_from_slice(line);
            if !line.ends_with(b"\n") {
                out.extend_from_slice(eol);
            }
        }
        rest = &rest[end..];
    }
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(
            value
                .replace('\n', std::str::from_utf8(eol).unwrap_or("\n"))
                .as_bytes(),
        );
        out.extend_from_slice(eol);
    }
    if let Some(tag) = subject_tag {
        let (subject, prev) = tagged_values(tag, &sent_subject.unwrap_or_default());
        let field = fold_field("Subject", &subject, eol);
        match subject_at {
            Some(at) => drop(out.splice(at..at, field)),
            None => out.extend_from_slice(&field),
        }
        out.extend_from_slice(&fold_field(PREV_SUBJECT, &prev, eol));
    }
    match body_at {
        Some(at) => out.extend_from_slice(&raw[at..]),
        None => out.extend_from_slice(eol),
    }
    out
}

/// The values of the tagged Subject and of [`PREV_SUBJECT`], before folding, for the
/// subject `sent` (its lines split at LF, see [`lines_of`]): the tag, a space and the
/// subject from its first word, folds kept; and the subject unfolded. White space and folds
/// before the first word are no part of it (a fold right after the colon is how a long
/// first word is folded).
pub fn tagged_values(tag: &str, sent: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let sent = sent.trim_ascii_start();
    let mut subject = tag.as_bytes().to_vec();
    if !sent.is_empty() {
        subject.push(b' ');
        subject.extend_from_slice(sent);
    }
    let unfolded = sent.iter().copied().filter(|&b| b != b'\n').collect();
    (subject, unfolded)
}

/// Where RFC 5322 (2.1.1) says a header line should end, and where it must.
const FOLD_AT: usize = 78;
const MAX_LINE: usize = 998;

/// `name: value` as a header field, ending in `eol`, folded by [`fold_value`].
fn fold_field(name: &str, value: &[u8], eol: &[u8]) -> Vec<u8> {
    [name.as_bytes(), b":", &fold_value(name, value, eol), eol].concat()
}

/// Header `name`'s `value` as it goes after `name:`, the space between them first (none
/// when the value is empty), its lines (`value`'s own, split at LF) folded with `eol` so
/// none passes [`FOLD_AT`] octets where white space allows, nor [`MAX_LINE`] where any
/// does. A fold only puts `eol` before white space already there (that space included),
/// so unfolding the field (taking the line ends out) gives ` value` back exactly.
pub fn fold_value(name: &str, value: &[u8], eol: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 16);
    if value.is_empty() {
        return out;
    }
    let spaced = [b" ", value].concat();
    let mut used = name.len() + 1;
    for (i, line) in spaced.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.extend_from_slice(eol);
            used = 0;
        }
        fold_line(&mut out, line, used, eol);
    }
    out
}

/// A raw header value's lines split at LF alone, as [`fold_value`] takes them.
pub fn lines_of(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for (i, line) in value.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
    }
    out
}

/// Appends `line`, which goes after `used` octets of its header line, breaking it before
/// white space that follows a word. Best a single space before a word within
/// [`FOLD_AT`] (how mail clients fold: read back as the one space it was); else one
/// within [`MAX_LINE`]; else, for a line with no white space that near, the first there is.
/// Only the first line (`used` past the colon) may break before its first octet.
fn fold_line(out: &mut Vec<u8>, line: &[u8], mut used: usize, eol: &[u8]) {
    let wsp = |b: u8| matches!(b, b' ' | b'\t');
    // Where the line's last word ends: a break after it would leave a line of white space
    // alone, which RFC 5322 forbids writing and readers take for the header's end.
    let words_end = line.len() - line.iter().rev().take_while(|&&b| wsp(b)).count();
    let mut rest = line;
    while used + rest.len() > FOLD_AT {
        let words_end = words_end.saturating_sub(line.len() - rest.len());
        // Where a break may go: before white space that ends a word, and a word follows.
        let breaks = |upto: usize| {
            (1..rest.len().min(upto.saturating_add(1)).min(words_end))
                .filter(|&b| wsp(rest[b]) && !wsp(rest[b - 1]))
        };
        let single = |&b: &usize| rest[b] == b' ' && rest.get(b + 1).is_some_and(|&c| !wsp(c));
        let within = MAX_LINE.saturating_sub(used);
        let at = (breaks(FOLD_AT.saturating_sub(used)).rfind(single))
            .or_else(|| breaks(within).find(single))
            .or_else(|| breaks(within).next_back())
            // Right after the colon, when no word of the first line ends near enough.
            .or_else(|| (used > 0 && words_end > 0 && rest.first() == Some(&b' ')).then_some(0))
            .or_else(|| breaks(usize::MAX).next());
        let Some(at) = at else { break };
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(eol);
        rest = &rest[at..];
        used = 0;
    }
    out.extend_from_slice(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(decision: Decision, score: f64, rules: &[&str]) -> Verdict {
        Verdict {
            decision,
            score,
            probability: 0.5,
            reasons: vec![],
            rules: rules.iter().map(|r| r.to_string()).collect(),
            note: None,
            parts: None,
            decided_by: Vec::new(),
        }
    }

    #[test]
    fn headers_follow_spamassassin() {
        let model = ModelConfig {
            spam_threshold: 5.0,
            ..ModelConfig::default()
        };
        let h = spam_headers(&verdict(Decision::Spam, 12.34, &["A", "B"]), &model);
        assert_eq!(h[0], ("X-Spam-Flag", "YES".to_string()));
        assert!(
            h[1].1
                .starts_with("Yes, score=12.3 required=5.0 tests=A,B version=spamnb-"),
            "{}",
            h[1].1
        );
        assert_eq!(h[2].1, "************");
        let h = spam_headers(
            &verdict(Decision::Unsure, -3.0, &[]),
            &ModelConfig::default(),
        );
        assert_eq!(h[0].1, "NO");
        assert!(h[1].1.contains("tests=none"));
        assert_eq!(h[2].1, "");
        assert_eq!(h[3].1, "unsure");
        let h = spam_headers(
            &verdict(Decision::Unsure, -0.04, &[]),
            &ModelConfig::default(),
        );
        assert!(h[1].1.starts_with("No, score=0.0 "), "{}", h[1].1);
    }

    #[test]
    fn the_report_goes_where_report_header_says_and_escapes_the_mail_s_words() {
        let mut spam = verdict(Decision::Spam, 9.0, &["A"]);
        spam.reasons = vec![
            crate::model::Reason {
                feature: "subj:cheap\r\nX-Spam-Flag: NO".into(),
                weight: 4.25,
                count: 1,
            },
            crate::model::Reason {
                feature: format!("caf\u{e9}{}", "x".repeat(100)),
                weight: -1.5,
                count: 2,
            },
        ];
        spam.parts = Some(crate::model::ScoreParts {
            strongest: 10.123,
            strongest_count: 15,
            all: 6.5,
            all_count: 1234,
            all_share: 0.3,
        });
        let ham = verdict(Decision::Ham, -4.0, &[]);
        let report = |v: &Verdict, report_header| {
            let model = ModelConfig {
                report_header,
                ..ModelConfig::default()
            };
            spam_headers(v, &model)
                .into_iter()
                .find(|(name, _)| *name == "X-Spam-Report")
                .map(|(_, value)| value)
        };
        let shown = report(&spam, ReportHeader::Spam).expect("spam is reported");
        let lines: Vec<&str> = shown.split("\n\t").collect();
        assert!(
            lines[0].starts_with("score 9.0 = 0.70 x 10.1 (15 strongest of 1234 features)"),
            "{shown}"
        );
        let lines = &lines[lines.len() - 2..];
        assert_eq!(lines[0], "*  4.2 subj:cheap\\u{d}\\u{a}X-Spam-Flag: NO");
        assert!(lines[1].starts_with("* -1.5 caf\\u{e9}xxx"), "{shown}");
        assert!(shown.is_ascii() && !shown.contains('\r'), "{shown}");
        assert!(
            ("X-Spam-Report: ".to_string() + &shown)
                .split("\n\t")
                .all(|l| l.len() <= 78),
            "{shown}"
        );
        assert_eq!(report(&ham, ReportHeader::Spam), None);
        assert!(report(&ham, ReportHeader::Always).is_some());
        assert_eq!(report(&spam, ReportHeader::Never), None);
    }

    #[test]
    fn long_test_lists_fold() {
        let rules: Vec<String> = (0..30).map(|i| format!("SOME_LONG_RULE_{i}")).collect();
        let refs: Vec<&str> = rules.iter().map(String::as_str).collect();
        let h = spam_headers(
            &verdict(Decision::Spam, 40.0, &refs),
            &ModelConfig::default(),
        );
        let lines: Vec<&str> = h[1].1.split("\n\t").collect();
        assert!(lines.len() > 3, "{}", h[1].1);
        assert!(lines.iter().all(|l| l.len() <= 78), "{lines:?}");
        assert!(
            h[1].1.replace("\n\t", "").contains(&rules.join(",")),
            "{}",
            h[1].1
        );
    }

    /// The tab of a fold stands where the space was: no line ends in white space, and
    /// the value unfolds to what it was.
    #[test]
    fn a_fold_leaves_no_space_at_a_line_end() {
        let summary = "score 10.5 = 0.70 x 11.2 (15 strongest of 87 features) + 0.30 x 8.9 (all)";
        let folded = fold("X-Spam-Report", summary);
        assert!(folded.contains("\n\t"), "{folded}");
        assert!(folded.lines().all(|l| !l.ends_with(' ')), "{folded:?}");
        assert_eq!(folded.replace("\n\t", " "), summary);
    }

    #[test]
    fn rewrite_removes_forged_and_keeps_body() {
        let raw = b"Subject: hi\r\nX-Spam-Flag: YES\r\nX-Spam-Status: Yes,\r\n score=99\r\nFrom: a@b\r\n\r\nX-Spam-Flag: body line\r\n";
        let out = rewrite(
            raw,
            &[
                ("X-Spam-Flag", "NO".into()),
                ("X-Spam-Status", "No,\n\ttests=none".into()),
            ],
            None,
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "Subject: hi\r\nFrom: a@b\r\nX-Spam-Flag: NO\r\nX-Spam-Status: No,\r\n\ttests=none\r\n\r\nX-Spam-Flag: body line\r\n"
        );
        let out = rewrite(b"Subject: no body", &[("X-Spam-Flag", "NO".into())], None);
        assert_eq!(out, b"Subject: no body\nX-Spam-Flag: NO\n\n");
    }

    /// A tagged subject starts with the tag, folded as it was, and the subject as sent is
    /// kept unfolded; a forged record of one is gone; a message with no subject gets one.
    /// Either way the message reads, and is named in the ledger, as it was sent.
    #[test]
    fn only_a_tag_of_spamnb_s_shape_is_taken_for_one() {
        let t = "[SPAM _SCORE_]";
        assert!(is_tagging_of("[SPAM 9.1] cheap pills", "cheap pills", t));
        assert!(is_tagging_of("[SPAM -0.4] cheap pills", "cheap pills", t));
        assert!(is_tagging_of("[SPAM 12.0]", "", t));
        assert!(is_tagging_of("***SPAM*** hi", "hi", " ***SPAM***  "));
        // The sender's words before the subject as sent are no tag.
        assert!(!is_tagging_of("cheap pills meeting", "meeting", t));
        assert!(!is_tagging_of("[SPAM 9] meeting", "meeting", t));
        assert!(!is_tagging_of("[SPAM x.1] meeting", "meeting", t));
        assert!(!is_tagging_of("[SPAM 9.1] cheap meeting", "meeting", t));
        assert!(!is_tagging_of("[SPAM 9.1]meeting", "meeting", t));
        assert!(!is_tagging_of("[SPAM 9.1]", "meeting", t));
        // No tag configured: nothing is one.
        assert!(!is_tagging_of(" meeting", "meeting", ""));
    }

    #[test]
    fn mail_in_transit_is_read_as_sent() {
        let t = "[SPAM _SCORE_]";
        let tagged = b"From: a@b\r\nSubject: [SPAM 8.2] =?utf-8?q?cheap?=\r\n pills\r\n\
X-Spam-Prev-Subject: =?utf-8?q?cheap?= pills\r\nTo: c@d\r\n\r\nbody\r\n";
        assert_eq!(
            &*as_sent(tagged, t),
            &b"From: a@b\r\nSubject: =?utf-8?q?cheap?= pills\r\nTo: c@d\r\n\r\nbody\r\n"[..]
        );
        // Another tag, or none configured: the field goes, the Subject stays.
        let kept = b"From: a@b\r\nSubject: [SPAM 8.2] =?utf-8?q?cheap?=\r\n pills\r\n\
To: c@d\r\n\r\nbody\r\n";
        assert_eq!(&*as_sent(tagged, "***SPAM***"), &kept[..]);
        assert_eq!(&*as_sent(tagged, ""), &kept[..]);
        // A forged field beside words of the sender's: the field goes, the words stay.
        let forged =
            b"Subject: cheap pills meeting notes\nX-Spam-Prev-Subject: meeting notes\n\nx\n";
        assert_eq!(
            &*as_sent(forged, t),
            &b"Subject: cheap pills meeting notes\n\nx\n"[..]
        );
        // A tag over no subject: the Subject was not sent.
        let added = b"Subject: [SPAM 5.0]\nX-Spam-Prev-Subject:\nFrom: a@b\n\nx\n";
        assert_eq!(&*as_sent(added, t), &b"From: a@b\n\nx\n"[..]);
        let plain = b"Subject: hi\n\nX-Spam-Prev-Subject: body\n";
        assert!(matches!(as_sent(plain, t), Cow::Borrowed(_)));
    }

    #[test]
    fn a_message_filtered_twice_is_tagged_once() {
        let model = ModelConfig {
            subject_tag: "[SPAM _SCORE_]".into(),
            ..ModelConfig::default()
        };
        let raw = b"From: a@b\nSubject: cheap pills\n\nbody\n";
        let once = tagged(raw, &verdict(Decision::Spam, 9.14, &[]), &model);
        let twice = tagged(&once, &verdict(Decision::Spam, 7.0, &[]), &model);
        let headers = |raw: &[u8]| String::from_utf8(raw_head(raw).to_vec()).unwrap();
        assert!(
            headers(&twice).starts_with("From: a@b\nSubject: [SPAM 7.0] cheap pills\n"),
            "{}",
            headers(&twice)
        );
        assert_eq!(
            raw_header_values(&twice, PREV_SUBJECT),
            [&b"cheap pills"[..]],
            "{}",
            headers(&twice)
        );
        // Found to be ham the second time, it goes on with the subject as sent.
        let ham = tagged(&once, &verdict(Decision::Ham, -3.0, &[]), &model);
        assert!(headers(&ham).starts_with("From: a@b\nSubject: cheap pills\nX-Spam-Flag: NO\n"));
        assert!(raw_header_values(&ham, PREV_SUBJECT).is_empty());
    }

    #[test]
    fn a_spam_subject_is_tagged_and_kept_as_it_was() {
        let model = ModelConfig {
            subject_tag: "[SPAM _SCORE_]".into(),
            ..ModelConfig::default()
        };
        let tag = subject_tag(&verdict(Decision::Spam, 9.14, &[]), &model);
        assert_eq!(tag.as_deref(), Some("[SPAM 9.1]"));
        assert_eq!(
            subject_tag(&verdict(Decision::Unsure, 4.0, &[]), &model),
            None
        );
        let off = ModelConfig::default();
        assert_eq!(subject_tag(&verdict(Decision::Spam, 9.0, &[]), &off), None);

        let raw = b"X-Spam-Prev-Subject: forged\r\nSubject: =?utf-8?q?cheap?=\r\n pills\r\n\
Subject: second\r\nFrom: a@b\r\n\r\nbody\r\n";
        let out = rewrite(raw, &[("X-Spam-Flag", "YES".into())], tag.as_deref());
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "Subject: [SPAM 9.1] =?utf-8?q?cheap?=\r\n pills\r\nSubject: second\r\nFrom: a@b\r\n\
X-Spam-Flag: YES\r\nX-Spam-Prev-Subject: =?utf-8?q?cheap?= pills\r\n\r\nbody\r\n"
        );
        let untagged = rewrite(raw, &[], None);
        let digest = crate::message::DigestKind::AsSent;
        assert_eq!(digest.of(&out), digest.of(&untagged));
        let subject = |raw: &[u8]| {
            let msg = crate::message::Message::parse(raw, 1 << 20);
            msg.headers
                .iter()
                .find(|h| h.name == "Subject")
                .map(|h| h.value.clone())
        };
        assert_eq!(subject(&out), subject(&untagged));
        assert_eq!(subject(&out).as_deref(), Some("cheap pills"));

        let none = b"From: a@b\n\nbody\n";
        let out = rewrite(none, &[], Some("[SPAM]"));
        assert_eq!(
            out,
            b"From: a@b\nSubject: [SPAM]\nX-Spam-Prev-Subject:\n\nbody\n"
        );
        assert_eq!(digest.of(&out), digest.of(none));
        assert_eq!(subject(&out), None);
        // A line named Subject with no colon is no field to tag.
        let out = rewrite(b"Subject\n\nx\n", &[], Some("[SPAM]"));
        assert!(out.starts_with(b"Subject\nSubject: [SPAM]\n"), "{out:?}");
    }

    /// A subject whose last word is long (a link) and ends in white space was folded before
    /// that white space: a line of it alone, which readers take for the header's end.
    #[test]
    fn no_header_line_is_white_space_alone() {
        let model = ModelConfig {
            subject_tag: "[SPAM _SCORE_]".into(),
            ..ModelConfig::default()
        };
        let link = format!("http://shop.example/{}", "a".repeat(70));
        for subject in [format!("see {link} "), format!("{link}  ")] {
            let raw = format!("From: a@b\nSubject: {subject}\nTo: c@d\n\nbody\n");
            let out = tagged(raw.as_bytes(), &verdict(Decision::Spam, 9.14, &[]), &model);
            let head = String::from_utf8_lossy(raw_head(&out)).into_owned();
            for line in head.lines().filter(|l| !l.is_empty()) {
                assert!(
                    !line.trim().is_empty(),
                    "a line of white space in:\n{head:?}"
                );
            }
            // And as the milter sends it.
            let value = fold_value("Subject", format!("[SPAM 9.1] {subject}").as_bytes(), b"\n");
            assert!(
                value
                    .split(|&b| b == b'\n')
                    .all(|l| !l.trim_ascii().is_empty()),
                "{value:?}"
            );
        }
    }

    /// A raw value with its line ends taken out, less the space after the colon (which a
    /// fold may go before).
    fn unfolded(value: &[u8], eol: &str) -> String {
        let text = String::from_utf8(value.to_vec())
            .expect("UTF-8")
            .replace(eol, "");
        text.strip_prefix(' ').map_or(text.clone(), str::to_string)
    }

    /// RFC 5322 2.1.1: no header line over 998 octets. A long subject, tagged, is folded
    /// in its Subject and in [`PREV_SUBJECT`], only before white space already there:
    /// unfolded, each gives back the value exactly, and a message tagged twice still
    /// reads, and is put back, as sent.
    #[test]
    fn header_lines_stay_within_998_octets() {
        let model = ModelConfig {
            subject_tag: "[SPAM _SCORE_]".into(),
            ..ModelConfig::default()
        };
        let words = "cheap  pills\tnow ".repeat(200);
        let long_word = format!("{} {}", "x".repeat(990), "y".repeat(990));
        let near = format!("{} z", "w".repeat(990));
        for subject in [words.trim_end(), &long_word, &near, "short  one"] {
            for eol in ["\r\n", "\n"] {
                let raw =
                    format!("From: a@b{eol}Subject: {subject}{eol}To: c@d{eol}{eol}body{eol}");
                let once = tagged(raw.as_bytes(), &verdict(Decision::Spam, 9.14, &[]), &model);
                let twice = tagged(&once, &verdict(Decision::Spam, 7.0, &[]), &model);
                let label = format!("{:?} {eol:?}", &subject[..20.min(subject.len())]);
                for out in [&once, &twice] {
                    let head = raw_head(out);
                    for line in head.split(|&b| b == b'\n') {
                        assert!(line.len() <= 998, "{label}: a line of {}", line.len());
                    }
                    let unfolded = |name: &str| unfolded(raw_header_values(head, name)[0], eol);
                    assert_eq!(unfolded(PREV_SUBJECT), subject, "{label}");
                    assert!(
                        unfolded("Subject").ends_with(&format!("] {subject}")),
                        "{label}"
                    );
                }
                let back = as_sent(&twice, &model.subject_tag);
                let value = raw_header_values(raw_head(&back), "Subject")[0];
                assert_eq!(unfolded(value, eol), subject, "{label}");
            }
        }
    }
}
