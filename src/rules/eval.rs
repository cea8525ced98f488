//! Built-in tests for what a regex cannot see, called as SpamAssassin calls them
//! (`body NAME eval:html_image_ratio('0.000','0.002')`). Each is compiled once from its
//! arguments; a name or an argument spamnb does not know is a load-time skip, never a
//! silent "no hit".

use std::sync::LazyLock;

use regex::Regex;

use super::Target;
use super::target::envelope_sender;
use crate::message::{Encoded, Message, url_host};

/// Names of every eval spamnb has.
const KNOWN: &[&str] = &[
    "check_for_mime_html_only",
    "html_image_ratio",
    "html_image_only",
    "html_tag_balance",
    "html_tag_exists",
    "html_tag_reopened",
    "subject_is_all_caps",
    "check_from_local_digits",
    "check_for_shifted_date",
    "check_for_missing_header",
    "check_for_missing_to_header",
    "check_https_http_mismatch",
    "check_link_domain_mismatch",
    "check_for_mime",
    "check_header_count_range",
    "check_for_uppercase",
    "check_body_length",
    "check_illegal_chars",
    "check_for_mime_html",
    "check_for_matching_env_and_hdr_from",
    "check_equal_from_domains",
    "check_for_to_in_subject",
    "check_blank_line_ratio",
];

pub fn known(name: &str) -> bool {
    KNOWN.contains(&name) || super::auth::known(name) || super::lists::known(name)
}

/// A compiled eval test.
#[derive(Debug, Clone)]
pub enum Eval {
    HtmlOnly,
    /// Text characters per pixel of image area in [min, max).
    HtmlImageRatio(f64, f64),
    /// HTML with images and text characters in [min, max).
    HtmlImageOnly(f64, f64),
    /// Opening minus closing tags of a name, compared.
    HtmlTagBalance(String, Cmp, f64),
    HtmlTagExists(String),
    /// A tag opened again after one of its name closed (a second `<head>` after `</head>`).
    HtmlTagReopened(String),
    SubjectAllCaps,
    FromLocalDigits(usize),
    /// Date header minus the time the mail was received, in hours, in [min, max).
    ShiftedDate(f64, f64),
    MissingHeader(String),
    MissingTo,
    HttpsHttpMismatch,
    LinkDomainMismatch,
    Base64Text,
    Base64Count,
    QpCount,
    HeaderCount(String, f64, f64),
    /// Percentage of capital letters in the body text in [min, max].
    Uppercase(f64, f64),
    BodyLength(f64),
    /// Characters above 0x7f in a raw header: (header or ALL, ratio, count).
    IllegalChars(String, f64, usize),
    /// A text/html part.
    MimeHtml,
    /// The envelope sender is the From: address.
    EnvelopeIsFrom,
    /// The envelope sender's domain and the From: address's differ (their last two labels).
    FromDomainsDiffer,
    /// The Subject names the To: address (`false`), or greets its local part (`true`).
    ToInSubject {
        local_part: bool,
    },
    /// Percentage of blank lines in the body text in (min, max], or [0, max] for a min of
    /// 0, when it has at least this many lines.
    BlankLines(f64, f64, usize),
    /// What trusted Authentication-Results fields say.
    Auth(super::auth::Test),
    /// Whether an address or a link's host is on a list, or at a free mail provider.
    List(super::lists::Test),
}

/// A numeric comparison, as eval arguments, meta expressions and `if version` spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    /// Two-character operators first, so that `<=` is not read as `<`.
    pub const SPELLINGS: [(&'static str, Cmp); 6] = [
        ("==", Cmp::Eq),
        ("!=", Cmp::Ne),
        ("<=", Cmp::Le),
        (">=", Cmp::Ge),
        ("<", Cmp::Lt),
        (">", Cmp::Gt),
    ];

    /// The comparison `s` starts with, and what follows it.
    pub fn strip_prefix(s: &str) -> Option<(Cmp, &str)> {
        Cmp::SPELLINGS
            .into_iter()
            .find_map(|(op, c)| s.strip_prefix(op).map(|rest| (c, rest)))
    }

    pub fn holds(self, x: f64, y: f64) -> bool {
        match self {
            Cmp::Eq => x == y,
            Cmp::Ne => x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
        }
    }
}

/// `name('a', 'b')` to a compiled test; `auth` and `lists` hold what the tests of
/// Authentication-Results and of lists read besides their arguments.
pub fn compile(
    call: &str,
    auth: &super::auth::Config,
    lists: &super::lists::Lists,
) -> Result<Eval, String> {
    let call = call.trim();
    let (name, args) = match call.split_once('(') {
        Some((n, rest)) => {
            let inner = rest
                .trim_end()
                .strip_suffix(')')
                .ok_or_else(|| format!("eval:{call}: missing ')'"))?;
            let args: Vec<String> = inner
                .split(',')
                .map(|a| a.trim().trim_matches(|c| c == '\'' || c == '"').to_string())
                .filter(|a| !a.is_empty())
                .collect();
            (n.trim(), args)
        }
        None => (call, Vec::new()),
    };
    let unknown = || name.to_string();
    let num = |i: usize| -> Result<f64, String> {
        let a = args
            .get(i)
            .ok_or_else(|| format!("eval:{name} needs argument {}", i + 1))?;
        match a.as_str() {
            // An open end: below everything as a minimum, above everything as a maximum.
            "undef" if i == 0 => Ok(f64::NEG_INFINITY),
            "undef" => Ok(f64::INFINITY),
            "inf" => Ok(f64::INFINITY),
            a => a
                .parse()
                .map_err(|_| format!("eval:{name}: argument {a:?} is not a number")),
        }
    };
    let text = |i: usize| -> Result<String, String> {
        args.get(i)
            .cloned()
            .ok_or_else(|| format!("eval:{name} needs argument {}", i + 1))
    };
    if let Some(test) = auth.compile(name, &args) {
        return test.map(Eval::Auth);
    }
    if let Some(test) = lists.compile(name, &args) {
        return test.map(Eval::List);
    }
    Ok(match name {
        "check_for_mime_html_only" => Eval::HtmlOnly,
        "html_image_ratio" => Eval::HtmlImageRatio(num(0)?, num(1)?),
        "html_image_only" => Eval::HtmlImageOnly(num(0)?, num(1)?),
        "html_tag_balance" => {
            let expr = text(1)?;
            let expr = expr.trim();
            let (cmp, rest) = Cmp::strip_prefix(expr)
                .ok_or_else(|| format!("eval:{name}: comparison {expr:?} not understood"))?;
            let n = rest
                .trim()
                .parse()
                .map_err(|_| format!("eval:{name}: {expr:?} not understood"))?;
            Eval::HtmlTagBalance(text(0)?.to_ascii_lowercase(), cmp, n)
        }
        "html_tag_exists" => Eval::HtmlTagExists(text(0)?.to_ascii_lowercase()),
        "html_tag_reopened" => Eval::HtmlTagReopened(text(0)?.to_ascii_lowercase()),
        "subject_is_all_caps" => Eval::SubjectAllCaps,
        "check_from_local_digits" => Eval::FromLocalDigits(num(0)? as usize),
        "check_for_shifted_date" => Eval::ShiftedDate(num(0)?, num(1)?),
        "check_for_missing_header" => Eval::MissingHeader(text(0)?),
        "check_for_missing_to_header" => Eval::MissingTo,
        "check_https_http_mismatch" => Eval::HttpsHttpMismatch,
        "check_link_domain_mismatch" => Eval::LinkDomainMismatch,
        "check_for_mime" => match text(0)?.as_str() {
            "mime_base64_encoded_text" => Eval::Base64Text,
            "mime_base64_count" => Eval::Base64Count,
            "mime_qp_count" => Eval::QpCount,
            other => return Err(format!("{name}('{other}')")),
        },
        "check_header_count_range" => Eval::HeaderCount(text(0)?, num(1)?, num(2)?),
        "check_for_uppercase" => Eval::Uppercase(num(0)?, num(1)?),
        "check_body_length" => Eval::BodyLength(num(0)?),
        "check_illegal_chars" => Eval::IllegalChars(text(0)?, num(1)?, num(2)? as usize),
        "check_for_mime_html" => Eval::MimeHtml,
        "check_for_matching_env_and_hdr_from" => Eval::EnvelopeIsFrom,
        "check_equal_from_domains" => Eval::FromDomainsDiffer,
        "check_for_to_in_subject" => match text(0)?.as_str() {
            "address" => Eval::ToInSubject { local_part: false },
            "user" => Eval::ToInSubject { local_part: true },
            other => return Err(format!("eval:{name}: {other:?} is not address or user")),
        },
        "check_blank_line_ratio" => {
            let min_lines = args.get(2).map_or(Ok(1.0), |_| num(2))?;
            Eval::BlankLines(num(0)?, num(1)?, (min_lines as usize).max(1))
        }
        _ => return Err(unknown()),
    })
}

/// What evals share about one message, computed once.
pub struct Facts<'m> {
    pub msg: &'m Message<'m>,
    html: Option<HtmlFacts>,
    /// Hours from the Date header to the newest Received line's date, when both parse.
    date_shift: Option<Option<f64>>,
    auth: Option<super::auth::Results>,
    lists: super::lists::Seen,
}

struct HtmlFacts {
    image_area: f64,
    images: usize,
    text_chars: usize,
    tags: TagCounts,
    /// (href, visible text) of every link.
    anchors: Vec<(String, String)>,
}

static DOMAIN_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(?:https?://)?((?:[a-z0-9-]+\.)+[a-z]{2,})(?:[/:?#]\S*)?\s*$")
        .expect("domain pattern is valid")
});

impl<'m> Facts<'m> {
    pub fn new(msg: &'m Message<'m>) -> Facts<'m> {
        Facts {
            msg,
            html: None,
            date_shift: None,
            auth: None,
            lists: Default::default(),
        }
    }

    /// Both date tests read it: parsed once.
    fn date_shift(&mut self) -> Option<f64> {
        let msg = self.msg;
        *self.date_shift.get_or_insert_with(|| {
            let sent = msg.header("date").and_then(parse_date)?;
            let received = msg
                .header_values("received")
                .next()
                .and_then(|r| r.rsplit(';').next())
                .and_then(parse_date)?;
            Some((sent - received) as f64 / 3600.0)
        })
    }

    fn html(&mut self) -> &HtmlFacts {
        let html = self.msg.html.as_str();
        self.html.get_or_insert_with(|| html_facts(html))
    }

    fn anchors(&mut self) -> &[(String, String)] {
        &self.html().anchors
    }
}

/// Opening and closing tags by name, without regard to case. A name (at most 16 bytes) is
/// packed into a number: a message has a few dozen names, and comparing numbers in a list
/// beats hashing strings into a map.
#[derive(Default)]
struct TagCounts(Vec<(u128, Tag)>);

/// What the markup did with one tag name.
#[derive(Default, Clone, Copy)]
struct Tag {
    opened: usize,
    closed: usize,
    /// Opened again after it had been closed.
    reopened: bool,
}

impl TagCounts {
    fn key(name: &[u8]) -> Option<u128> {
        let mut key = [0u8; 16];
        for (k, b) in key.get_mut(..name.len())?.iter_mut().zip(name) {
            *k = b.to_ascii_lowercase();
        }
        Some(u128::from_le_bytes(key))
    }

    fn add(&mut self, key: u128, closing: bool) {
        let at = match self.0.iter().position(|e| e.0 == key) {
            Some(at) => at,
            None => {
                self.0.push((key, Tag::default()));
                self.0.len() - 1
            }
        };
        let tag = &mut self.0[at].1;
        if closing {
            tag.closed += 1;
        } else {
            tag.reopened |= tag.closed > 0;
            tag.opened += 1;
        }
    }

    fn get(&self, name: &[u8]) -> Tag {
        TagCounts::key(name)
            .and_then(|key| self.0.iter().find(|e| e.0 == key))
            .map_or(Tag::default(), |e| e.1)
    }
}

/// One pass over the markup's bytes, the way a lenient reader sees it: a tag runs from
/// `<` to the next `>`, text is what lies between tags. Tag counts, text bytes outside
/// tags (UTF-8 bytes, not characters: a ratio does not need more), image areas from
/// `width`/`height`, and each link's target and visible text.
fn html_facts(html: &str) -> HtmlFacts {
    let mut facts = HtmlFacts {
        image_area: 0.0,
        images: 0,
        text_chars: 0,
        tags: TagCounts::default(),
        anchors: Vec::new(),
    };
    // The link being read: its target and the text so far. A link opened inside another
    // belongs to the outer one, which the first `</a>` closes.
    let mut link: Option<(&str, String)> = None;
    let mut rest = html;
    loop {
        let lt = memchr::memchr(b'<', rest.as_bytes()).unwrap_or(rest.len());
        let text = &rest[..lt];
        facts.text_chars += text.bytes().filter(|b| !b.is_ascii_whitespace()).count();
        if let Some((_, shown)) = &mut link {
            shown.push_str(text);
        }
        if lt == rest.len() {
            break;
        }
        let after = &rest[lt + 1..];
        let (tag, closed) = match memchr::memchr(b'>', after.as_bytes()) {
            Some(e) => (&after[..e], true),
            None => (after, false),
        };
        rest = &after[(tag.len() + usize::from(closed)).min(after.len())..];
        let (closing, tag) = tag.strip_prefix('/').map_or((false, tag), |t| (true, t));
        let bytes = tag.as_bytes();
        let n = bytes
            .iter()
            .take(16)
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if n == 0 {
            continue;
        }
        let Some(key) = TagCounts::key(&bytes[..n]) else {
            continue;
        };
        facts.tags.add(key, closing);
        let lowercase = key.to_le_bytes();
        let name = &lowercase[..n];
        let attributes = &tag[n..];
        if attributes.starts_with('_') || !closed {
            continue;
        }
        match (name, closing) {
            (b"img", false) => {
                facts.images += 1;
                let dimension = |attr: &str| {
                    attribute_values(attributes, attr)
                        .filter_map(|v| {
                            let v = v.strip_prefix(['"', '\'']).unwrap_or(v);
                            let digits = v.bytes().take(5).take_while(u8::is_ascii_digit).count();
                            v[..digits].parse::<f64>().ok()
                        })
                        .last()
                        .unwrap_or(0.0)
                };
                facts.image_area += dimension("width") * dimension("height");
            }
            (b"a", false) if link.is_none() => {
                link = attribute_values(attributes, "href")
                    .map(|v| {
                        let v = v.strip_prefix(['"', '\'']).unwrap_or(v);
                        let end = v.find(|c: char| matches!(c, '"' | '\'') || c.is_whitespace());
                        &v[..end.unwrap_or(v.len())]
                    })
                    .find(|href| !href.is_empty())
                    .map(|href| (href, String::new()));
            }
            (b"a", true) if attributes.trim().is_empty() => {
                if let Some((href, shown)) = link.take() {
                    facts
                        .anchors
                        .push((href.to_string(), shown.trim().to_string()));
                }
            }
            _ => {}
        }
    }
    facts
}

/// What follows each `name =` in a tag's attributes (the name matched without regard to
/// case, at the start of a word): the raw rest of the tag, quote and all.
fn attribute_values<'t>(attributes: &'t str, name: &'t str) -> impl Iterator<Item = &'t str> {
    let bytes = attributes.as_bytes();
    let first = name.as_bytes()[0];
    // Where the name's first letter is, in either case: few places in a tag.
    memchr::memchr2_iter(
        first.to_ascii_lowercase(),
        first.to_ascii_uppercase(),
        bytes,
    )
    .filter_map(move |i| {
        let starts_word = i == 0 || !super::is_word_byte(bytes[i - 1]);
        let candidate = bytes.get(i..i + name.len())?;
        if !starts_word || !candidate.eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        let value =
            attributes[i + name.len()..].trim_start_matches(|c: char| c.is_ascii_whitespace());
        let value = value.strip_prefix('=')?;
        Some(value.trim_start_matches(|c: char| c.is_ascii_whitespace()))
    })
}

/// The registrable part of a host, roughly: its last two labels (three under a two-letter
/// country code with a short second level, as in example.co.uk).
fn base_domain(host: &str) -> String {
    let labels: Vec<&str> = host.split('.').collect();
    let n = labels.len();
    let take = if n >= 3 && labels[n - 1].len() == 2 && labels[n - 2].len() <= 3 {
        3
    } else {
        2
    };
    labels[n.saturating_sub(take)..].join(".")
}

impl Eval {
    pub fn test(&self, facts: &mut Facts) -> bool {
        let msg = facts.msg;
        match self {
            Eval::HtmlOnly => msg.anomalies.contains(&crate::message::Anomaly::HtmlOnly),
            Eval::HtmlImageRatio(min, max) => {
                let h = facts.html();
                h.image_area > 0.0 && {
                    let ratio = h.text_chars as f64 / h.image_area;
                    ratio >= *min && ratio < *max
                }
            }
            Eval::HtmlImageOnly(min, max) => {
                let h = facts.html();
                h.images > 0 && (h.text_chars as f64) >= *min && (h.text_chars as f64) < *max
            }
            Eval::HtmlTagBalance(tag, cmp, n) => {
                if msg.html.is_empty() {
                    return false;
                }
                let t = facts.html().tags.get(tag.as_bytes());
                cmp.holds(t.opened as f64 - t.closed as f64, *n)
            }
            Eval::HtmlTagExists(tag) => {
                !msg.html.is_empty() && facts.html().tags.get(tag.as_bytes()).opened > 0
            }
            Eval::HtmlTagReopened(tag) => {
                !msg.html.is_empty() && facts.html().tags.get(tag.as_bytes()).reopened
            }
            Eval::SubjectAllCaps => {
                let Some(subject) = msg.header("subject") else {
                    return false;
                };
                let mut letters = subject.chars().filter(|c| c.is_alphabetic());
                letters.clone().count() >= 10
                    && subject.split_whitespace().nth(1).is_some()
                    && letters.all(|c| c.is_uppercase() || !c.is_lowercase())
            }
            Eval::FromLocalDigits(n) => msg
                .header("from")
                .and_then(Target::address)
                .is_some_and(|a| a.chars().take_while(char::is_ascii_digit).count() >= *n),
            Eval::ShiftedDate(min, max) => facts
                .date_shift()
                .is_some_and(|hours| hours >= *min && hours < *max),
            Eval::MissingHeader(name) => msg.header(name).is_none(),
            Eval::MissingTo => {
                msg.header("to").is_none()
                    && msg.header("cc").is_none()
                    && msg.header("bcc").is_none()
            }
            Eval::HttpsHttpMismatch => facts.anchors().iter().any(|(href, text)| {
                href.to_ascii_lowercase().starts_with("http:")
                    && text.trim_start().to_ascii_lowercase().starts_with("https:")
            }),
            Eval::LinkDomainMismatch => facts.anchors().iter().any(|(href, text)| {
                let shown = DOMAIN_IN_TEXT
                    .captures(text)
                    .map(|c| c[1].to_ascii_lowercase());
                match (shown, url_host(href)) {
                    (Some(shown), Some(target)) if target.contains('.') => {
                        base_domain(&shown) != base_domain(&target)
                    }
                    _ => false,
                }
            }),
            Eval::Base64Text => msg.encoded.contains(&Encoded::Base64 { text: true }),
            Eval::Base64Count => msg
                .encoded
                .iter()
                .any(|e| matches!(e, Encoded::Base64 { .. })),
            Eval::QpCount => msg.encoded.contains(&Encoded::QuotedPrintable),
            Eval::HeaderCount(name, min, max) => {
                let n = msg.header_values(name).count() as f64;
                n >= *min && n <= *max
            }
            Eval::Uppercase(min, max) => {
                // ASCII letters only: capitals are an ASCII habit, and a loop without
                // branches runs on vector registers.
                let (mut letters, mut upper) = (0usize, 0usize);
                // Byte-wide sums over runs short enough not to overflow them: 32 at once.
                for run in msg.text.as_bytes().chunks(255) {
                    let (mut l, mut u) = (0u8, 0u8);
                    for &b in run {
                        l += u8::from((b | 0x20).wrapping_sub(b'a') < 26);
                        u += u8::from(b.wrapping_sub(b'A') < 26);
                    }
                    letters += usize::from(l);
                    upper += usize::from(u);
                }
                letters >= 200 && {
                    let pct = 100.0 * upper as f64 / letters as f64;
                    pct >= *min && pct <= *max
                }
            }
            Eval::BodyLength(max) => (msg.text.trim().len() as f64) <= *max,
            Eval::IllegalChars(name, ratio, count) => {
                let head = msg.raw_head();
                let values: Vec<&[u8]> = match name.as_str() {
                    _ if head.is_ascii() => Vec::new(),
                    "ALL" => vec![head],
                    _ => msg.raw_header_values(name),
                };
                values.iter().any(|v| {
                    let high = v.iter().filter(|&&b| b >= 0x80).count();
                    !v.is_empty() && high >= *count && high as f64 / v.len() as f64 >= *ratio
                })
            }
            Eval::MimeHtml => !msg.html.is_empty(),
            Eval::EnvelopeIsFrom => match (envelope_sender(msg), from_address(msg)) {
                (Some(sender), Some(from)) => sender.eq_ignore_ascii_case(&from),
                _ => false,
            },
            Eval::FromDomainsDiffer => {
                // The last two labels, as SpamAssassin compares them.
                let last_two = |address: String| {
                    let domain = address.rsplit_once('@')?.1.to_ascii_lowercase();
                    let last_two = crate::tokenize::registered_domain(&domain).unwrap_or(&domain);
                    (!domain.is_empty()).then(|| last_two.to_string())
                };
                match (
                    envelope_sender(msg).and_then(last_two),
                    from_address(msg).and_then(last_two),
                ) {
                    (Some(sender), Some(from)) => sender != from,
                    _ => false,
                }
            }
            Eval::ToInSubject { local_part } => {
                let (Some(to), Some(subject)) = (
                    msg.header("to").and_then(Target::address),
                    msg.header("subject"),
                ) else {
                    return false;
                };
                if *local_part {
                    let local = to.split('@').next().unwrap_or_default();
                    greets(subject.trim(), local)
                } else {
                    contains_word(subject, &to)
                }
            }
            Eval::BlankLines(min, max, min_lines) => {
                let lines = msg.text.lines().count();
                let blank = msg.text.lines().filter(|l| l.trim().is_empty()).count();
                lines >= *min_lines && {
                    let pct = 100.0 * blank as f64 / lines as f64;
                    (*min == 0.0 || pct > *min) && pct <= *max
                }
            }
            Eval::Auth(test) => test.holds(msg, &mut facts.auth, &mut facts.lists),
            Eval::List(test) => test.holds(msg, &mut facts.lists),
        }
    }
}

fn from_address(msg: &Message) -> Option<String> {
    msg.header("from")
        .and_then(Target::address)
        .filter(|a| a.contains('@'))
}

/// Whether `needle` stands in `text` as a whole (no word character on either side), case
/// ignored.
fn contains_word(text: &str, needle: &str) -> bool {
    let (text, needle) = (text.to_lowercase(), needle.to_lowercase());
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(&needle).any(|(at, found)| {
        !word(text[..at].chars().next_back()) && !word(text[at + found.len()..].chars().next())
    })
}

/// Whether a subject greets a recipient by their address's local part as spam does:
/// `jane`, `jane, …` or `jane: …` (written as the address has it), `Re: jane` (after a word
/// at most), `, jane!`.
fn greets(subject: &str, local: &str) -> bool {
    if local.is_empty() {
        return false;
    }
    const MARKS: &[char] = &[',', ':', ';', '!', '?', '-'];
    let lower = subject.to_lowercase();
    let local_lower = local.to_lowercase();
    let reply = ["re:", "fw:"].iter().find_map(|p| lower.strip_prefix(p));
    let after_reply = reply.is_some_and(|rest| {
        let rest = rest.trim_start();
        rest == local_lower
            || rest
                .split_once(char::is_whitespace)
                .is_some_and(|(word, name)| {
                    word.chars().all(|c| c.is_alphanumeric() || c == '_')
                        && name.trim_start() == local_lower
                })
    });
    let addressed = subject.strip_prefix(local).is_some_and(|rest| {
        let rest = rest.trim_start();
        rest.strip_prefix(MARKS)
            .is_some_and(|after| after.is_empty() || after.starts_with(char::is_whitespace))
    });
    let comma = lower.strip_prefix(',').is_some_and(|rest| {
        rest.trim_start()
            .strip_prefix(local_lower.as_str())
            .is_some_and(|mark| mark.len() == 1 && mark.starts_with(MARKS))
    });
    lower == local_lower || after_reply || addressed || comma
}

/// An RFC 5322 date ("Thu, 22 Aug 2002 18:26:25 -0700", tolerant of common mistakes) as
/// seconds since the epoch.
pub fn parse_date(s: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let mut day = None;
    let mut month = None;
    let mut year = None;
    let mut time = None;
    let mut zone = 0i64;
    for word in s.split(|c: char| c.is_whitespace() || c == ',') {
        if word.is_empty() {
            continue;
        }
        let lower = word.to_ascii_lowercase();
        if let Some(m) = MONTHS.iter().position(|m| lower.starts_with(m)) {
            month.get_or_insert(m as i64 + 1);
        } else if word.contains(':') && time.is_none() {
            let mut it = word.split(':').map(|p| p.parse::<i64>().ok());
            let (h, m, sec) = (it.next()??, it.next()??, it.next().flatten().unwrap_or(0));
            time = Some(h * 3600 + m * 60 + sec);
        } else if (word.starts_with('+') || word.starts_with('-')) && word.len() == 5 {
            let v: i64 = word[1..].parse().ok()?;
            let secs = (v / 100) * 3600 + (v % 100) * 60;
            zone = if word.starts_with('-') { -secs } else { secs };
        } else if let Ok(n) = word.parse::<i64>() {
            if day.is_none() && n <= 31 && month.is_none() {
                day = Some(n);
            } else if year.is_none() {
                year = Some(if n < 50 {
                    n + 2000
                } else if n < 100 {
                    n + 1900
                } else {
                    n
                });
            } else if day.is_none() && n <= 31 {
                day = Some(n);
            }
        } else {
            zone = match lower.as_str() {
                "edt" => -4 * 3600,
                "est" | "cdt" => -5 * 3600,
                "cst" | "mdt" => -6 * 3600,
                "mst" | "pdt" => -7 * 3600,
                "pst" => -8 * 3600,
                _ => zone,
            };
        }
    }
    let (y, m, d) = (year?, month?, day?);
    // Days from civil (Howard Hinnant's algorithm).
    let (y2, m2) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + time.unwrap_or(0) - zone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_reads_links_images_and_tags_as_a_lenient_reader_would() {
        let html = "<HTML><body>Hi <A class=x HREF=\"http://a.example/x\" title='t'>Click <b>here</b></a >\
            <a name=top>no target</a><a href=''>empty</a><a_b href=http://no.example>x</a>\
            <a data-href=http://c.example>outer <a href=http://d.example>inner</a> tail</a>\
            <img src=x WIDTH=\"120\" height = '1234567'><img src=y><img_x width=5 height=5>\
            <a href=http://open.example>never closed";
        let f = html_facts(html);
        let links: Vec<(&str, &str)> = f
            .anchors
            .iter()
            .map(|(h, t)| (h.as_str(), t.as_str()))
            .collect();
        assert_eq!(
            links,
            [
                ("http://a.example/x", "Click here"),
                ("http://c.example", "outer inner"),
            ]
        );
        assert_eq!(f.images, 2);
        // Five digits at most, as a height of a million pixels is no image.
        assert_eq!(f.image_area, 120.0 * 12345.0);
        // `<a_b` counts as an `a` tag (its name is read up to the `_`) but is no link.
        let tag = |name: &[u8]| {
            let t = f.tags.get(name);
            (t.opened, t.closed, t.reopened)
        };
        assert_eq!(tag(b"a"), (7, 6, true));
        assert_eq!(tag(b"HTML"), (1, 0, false));
        assert_eq!(tag(b"body"), (1, 0, false));
        assert_eq!(tag(b"head"), (0, 0, false));
        let text = "Hi Click here no target empty x outer inner tail never closed";
        assert_eq!(f.text_chars, text.replace(' ', "").len());
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("Thu, 01 Jan 1970 00:00:00 +0000"), Some(0));
        assert_eq!(
            parse_date("Thu, 22 Aug 2002 18:26:25 -0700"),
            Some(1_030_065_985)
        );
        assert_eq!(parse_date("22 Aug 02 18:26:25 PDT"), Some(1_030_065_985));
        assert_eq!(parse_date("garbage"), None);
    }

    #[test]
    fn unknown_evals_and_arguments_are_errors() {
        let compile = |call| compile(call, &Default::default(), &Default::default());
        assert!(compile("check_rbl('a', 'b')").is_err());
        assert!(compile("check_for_mime('mime_faraway_charset')").is_err());
        assert!(compile("html_image_ratio('x', '1')").is_err());
        assert!(compile("html_image_ratio('0.000','0.002')").is_ok());
        assert!(compile("html_tag_balance('head', '!= 0')").is_ok());
        assert!(compile("check_authres_result('spf')").is_err());
        assert!(compile("check_for_spf_maybe()").is_err());
        assert!(compile("check_dkim_valid_author_sig('a.example')").is_err());
        assert!(compile("check_for_spf_helo_softfail()").is_ok());
    }

    #[test]
    fn base_domains() {
        assert_eq!(base_domain("www.paypal.com"), "paypal.com");
        assert_eq!(base_domain("login.example.co.uk"), "example.co.uk");
    }
}
