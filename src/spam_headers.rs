//! The headers spamnb writes, in SpamAssassin's conventions so that existing Sieve,
//! procmail and maildrop rules keep working, and the rewrite of a message that carries them.

use crate::message::is_own_header;
use crate::model::{Decision, ModelConfig, Verdict};

/// `X-Spam-Flag`, `X-Spam-Status`, `X-Spam-Level` and `X-Spam-Class` for a verdict, in
/// the order they are written. Values are single-line; `X-Spam-Status` folds its test list.
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
        // Rounded here, so that a score just below zero reads "0.0", not "-0.0".
        (verdict.score * 10.0).round() / 10.0 + 0.0,
        model.spam_threshold,
        tests,
        env!("CARGO_PKG_VERSION"),
    );
    vec![
        (
            "X-Spam-Flag",
            if is_spam { "YES" } else { "NO" }.to_string(),
        ),
        ("X-Spam-Status", fold(&status)),
        ("X-Spam-Level", level(verdict.score)),
        ("X-Spam-Class", verdict.decision.name().to_string()),
    ]
}

/// One star per unit of log-odds above zero, at most 50: rules such as
/// `X-Spam-Level: *****` keep meaning "more sure than that".
fn level(score: f64) -> String {
    let stars = score.clamp(0.0, 50.0) as usize;
    "*".repeat(stars)
}

/// Folds a header value at spaces or commas so no line passes 78 characters (RFC 5322
/// recommends it; SpamAssassin does it for the test list).
fn fold(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 16);
    let mut line_len = "X-Spam-Status: ".len();
    for piece in value.split_inclusive([' ', ',']) {
        if line_len + piece.len() > 78 && line_len > 0 {
            out.push_str("\n\t");
            line_len = 1;
        }
        out.push_str(piece);
        line_len += piece.len();
    }
    out.trim_end().to_string()
}

/// `raw` with every incoming `X-Spam-*` header removed (a sender can forge them) and
/// `headers` added at the end of the header block, in the message's own line ending.
pub fn rewrite(raw: &[u8], headers: &[(&str, String)]) -> Vec<u8> {
    let crlf = raw
        .windows(2)
        .position(|w| w == b"\r\n")
        .is_some_and(|at| raw.iter().position(|&b| b == b'\n') == Some(at + 1));
    let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut out = Vec::with_capacity(raw.len() + 512);
    let mut rest = raw;
    let mut skipping = false;
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
        if !continuation {
            let name = content.split(|&b| b == b':').next().unwrap_or_default();
            skipping = std::str::from_utf8(name).is_ok_and(is_own_header);
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
    match body_at {
        Some(at) => out.extend_from_slice(&raw[at..]),
        None => out.extend_from_slice(eol),
    }
    out
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

    #[test]
    fn rewrite_removes_forged_and_keeps_body() {
        let raw = b"Subject: hi\r\nX-Spam-Flag: YES\r\nX-Spam-Status: Yes,\r\n score=99\r\nFrom: a@b\r\n\r\nX-Spam-Flag: body line\r\n";
        let out = rewrite(
            raw,
            &[
                ("X-Spam-Flag", "NO".into()),
                ("X-Spam-Status", "No,\n\ttests=none".into()),
            ],
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "Subject: hi\r\nFrom: a@b\r\nX-Spam-Flag: NO\r\nX-Spam-Status: No,\r\n\ttests=none\r\n\r\nX-Spam-Flag: body line\r\n"
        );
        let out = rewrite(b"Subject: no body", &[("X-Spam-Flag", "NO".into())]);
        assert_eq!(out, b"Subject: no body\nX-Spam-Flag: NO\n\n");
    }
}
