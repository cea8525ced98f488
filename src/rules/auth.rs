//! What the receiving server's own checks found: Authentication-Results fields (RFC 8601)
//! whose authserv-id the administrator trusts (`authres_trusted_authserv`, as SpamAssassin
//! 4's AuthRes plugin spells it), and the tests and lists that read them: SPF, DKIM, ARC
//! and DMARC results, `welcomelist_auth`, `welcomelist_from_spf`, `welcomelist_from_dkim`.
//!
//! spamnb asks no DNS questions, so these fields are how it knows that a sender is who
//! they say. A field any other server wrote is ignored, since a sender can write any field
//! it likes; nothing is trusted until an id is named. The MTA must drop incoming fields
//! that carry its own id (README, "Authentication results").

use std::sync::Arc;

use regex::Regex;

use super::lists::{FROM, ListRule, Seen, globs_regex};
use super::parse::Origin;
use super::target::envelope_sender;
use crate::message::Message;

/// The settings and address lists read from rule files.
#[derive(Debug, Default)]
pub struct Config {
    /// The authserv-ids whose fields are believed, lowercase.
    trusted: Vec<String>,
    /// Each list: `[the administrator's, the defaults']`, address globs lowercase.
    auth: [Vec<String>; 2],
    spf: [Vec<String>; 2],
    /// Globs, each with the signing domain it asks for (none: the author's own).
    dkim: [Vec<(String, Option<String>)>; 2],
    /// Where each of [`RULES`]' lists was first written to.
    first: [Option<Origin>; 4],
}

/// The lists' kinds: for either check, for SPF, for DKIM.
enum List {
    Auth,
    Spf,
    Dkim,
}

/// The rules the lists feed, as SpamAssassin names and scores them: its own welcomelists
/// decide, its defaults are learned features.
pub static RULES: [ListRule; 4] = [
    (
        "USER_IN_SPF_WELCOMELIST",
        "check_for_spf_welcomelist_from()",
        -100.0,
        "Envelope sender is on the SPF welcomelist and SPF passed (welcomelist_auth)",
    ),
    (
        "USER_IN_DEF_SPF_WL",
        "check_for_def_spf_welcomelist_from()",
        -7.5,
        "Envelope sender is on the default SPF welcomelist and SPF passed",
    ),
    (
        "USER_IN_DKIM_WELCOMELIST",
        "check_for_dkim_welcomelist_from()",
        -100.0,
        "From: address is on the DKIM welcomelist and its signature verified (welcomelist_auth)",
    ),
    (
        "USER_IN_DEF_DKIM_WL",
        "check_for_def_dkim_welcomelist_from()",
        -7.5,
        "From: address is on the default DKIM welcomelist and its signature verified",
    ),
];

impl Config {
    /// Reads `directive` if it is one of these settings; whether it was.
    pub fn read(&mut self, directive: &str, rest: &str, origin: &Origin) -> bool {
        let words = || rest.split_whitespace().map(str::to_ascii_lowercase);
        // (which list, 1 for the defaults) of a directive that adds to a list.
        let (list, default) = match directive {
            "authres_trusted_authserv" => {
                self.trusted.extend(words());
                return true;
            }
            "unwelcomelist_auth" | "unwhitelist_auth" => {
                for glob in words() {
                    self.auth.iter_mut().for_each(|l| l.retain(|g| *g != glob));
                }
                return true;
            }
            "unwelcomelist_from_spf" | "unwhitelist_from_spf" => {
                for glob in words() {
                    self.spf.iter_mut().for_each(|l| l.retain(|g| *g != glob));
                }
                return true;
            }
            "unwelcomelist_from_dkim" | "unwhitelist_from_dkim" => {
                let mut w = words();
                if let Some(glob) = w.next() {
                    let domain = w.next();
                    for list in &mut self.dkim {
                        list.retain(|(g, d)| {
                            *g != glob || domain.as_ref().is_some_and(|x| Some(x) != d.as_ref())
                        });
                    }
                }
                return true;
            }
            "welcomelist_auth" | "whitelist_auth" => (List::Auth, 0),
            "def_welcomelist_auth" | "def_whitelist_auth" => (List::Auth, 1),
            "welcomelist_from_spf" | "whitelist_from_spf" => (List::Spf, 0),
            "def_welcomelist_from_spf" | "def_whitelist_from_spf" => (List::Spf, 1),
            "welcomelist_from_dkim" | "whitelist_from_dkim" => (List::Dkim, 0),
            "def_welcomelist_from_dkim" | "def_whitelist_from_dkim" => (List::Dkim, 1),
            _ => return false,
        };
        // Where each rule's list was begun: the SPF rules read `auth` and `spf`, the DKIM
        // rules `auth` and `dkim` (the order of [`RULES`]).
        let rules: &[usize] = match list {
            List::Auth => {
                self.auth[default].extend(words());
                &[default, 2 + default]
            }
            List::Spf => {
                self.spf[default].extend(words());
                &[default]
            }
            List::Dkim => {
                // One address a line, and the signing domain it may come with.
                let mut w = words();
                if let Some(glob) = w.next() {
                    self.dkim[default].push((glob, w.next()));
                }
                &[2 + default]
            }
        };
        for &r in rules {
            self.first[r].get_or_insert_with(|| origin.clone());
        }
        true
    }

    /// The rules of [`RULES`] whose lists have entries, with where each list was begun.
    pub fn list_rules(&self) -> impl Iterator<Item = (&'static ListRule, &Origin)> {
        let has_entries = [
            !self.spf[0].is_empty() || !self.auth[0].is_empty(),
            !self.spf[1].is_empty() || !self.auth[1].is_empty(),
            !self.dkim[0].is_empty() || !self.auth[0].is_empty(),
            !self.dkim[1].is_empty() || !self.auth[1].is_empty(),
        ];
        RULES
            .iter()
            .zip(&self.first)
            .zip(has_entries)
            .filter_map(|((rule, first), has)| Some((rule, first.as_ref().filter(|_| has)?)))
    }

    /// The authserv-ids whose fields are read: without one, no test here can hit.
    pub fn trusted(&self) -> &[String] {
        &self.trusted
    }

    /// The test `name(args)` reads, if it is one of these; an error for arguments it
    /// cannot use.
    pub fn compile(&self, name: &str, args: &[String]) -> Option<Result<Test, String>> {
        let trusted: Arc<[String]> = self.trusted.clone().into();
        let domains = || args.iter().map(|d| d.to_ascii_lowercase()).collect();
        let check = match name {
            "check_authres_result" => match args {
                [method, result] => Check::Result {
                    method: method.to_ascii_lowercase(),
                    result: result.to_ascii_lowercase(),
                },
                _ => return Some(Err(format!("eval:{name} needs a method and a result"))),
            },
            "check_dkim_signed" => Check::DkimSigned(domains()),
            "check_dkim_valid" => Check::DkimValid(domains()),
            "check_dkim_valid_author_sig"
            | "check_dkim_valid_envelopefrom"
            | "check_arc_signed"
            | "check_arc_valid"
                if !args.is_empty() =>
            {
                return Some(Err(format!("eval:{name} with arguments is not supported")));
            }
            "check_dkim_valid_author_sig" => Check::DkimValidAuthor,
            "check_dkim_valid_envelopefrom" => Check::DkimValidEnvelopeFrom,
            "check_arc_signed" => Check::ArcSigned,
            "check_arc_valid" => Check::ArcValid,
            "check_dmarc_pass" => Check::Dmarc("pass", None),
            "check_dmarc_reject" => Check::Dmarc("fail", Some("reject")),
            "check_dmarc_quarantine" => Check::Dmarc("fail", Some("quarantine")),
            "check_dmarc_none" => Check::Dmarc("fail", Some("none")),
            // `dmarc=none`: the domain publishes no policy.
            "check_dmarc_missing" => Check::Dmarc("none", None),
            "check_for_spf_welcomelist_from" | "check_for_spf_whitelist_from" => {
                Check::SpfListed(self.spf_list(0))
            }
            "check_for_def_spf_welcomelist_from" | "check_for_def_spf_whitelist_from" => {
                Check::SpfListed(self.spf_list(1))
            }
            "check_for_dkim_welcomelist_from" | "check_for_dkim_whitelist_from" => {
                Check::DkimListed(self.dkim_list(0))
            }
            "check_for_def_dkim_welcomelist_from" | "check_for_def_dkim_whitelist_from" => {
                Check::DkimListed(self.dkim_list(1))
            }
            _ => {
                let rest = name.strip_prefix("check_for_spf_")?;
                let (helo, result) = match rest.strip_prefix("helo_") {
                    Some(result) => (true, result),
                    None => (false, rest),
                };
                if !SPF_RESULTS.contains(&result) {
                    return None;
                }
                Check::Spf {
                    helo,
                    result: result.to_string(),
                }
            }
        };
        Some(Ok(Test { trusted, check }))
    }

    fn spf_list(&self, default: usize) -> Option<Regex> {
        globs_regex(self.spf[default].iter().chain(&self.auth[default]))
    }

    /// The DKIM list's globs, grouped by the signing domain they ask for.
    fn dkim_list(&self, default: usize) -> Vec<(Regex, Option<String>)> {
        let mut by_domain: Vec<(Option<String>, Vec<&String>)> = Vec::new();
        let entries = self.dkim[default]
            .iter()
            .map(|(g, d)| (g, d.clone()))
            .chain(self.auth[default].iter().map(|g| (g, None)));
        for (glob, domain) in entries {
            match by_domain.iter_mut().find(|(d, _)| *d == domain) {
                Some((_, globs)) => globs.push(glob),
                None => by_domain.push((domain, vec![glob])),
            }
        }
        by_domain
            .into_iter()
            .filter_map(|(domain, globs)| Some((globs_regex(globs.into_iter())?, domain)))
            .collect()
    }
}

/// Whether `name` is a test of this module.
pub fn known(name: &str) -> bool {
    Config::default().compile(name, &[]).is_some()
}

/// The SPF results SpamAssassin has a `check_for_spf_…` test for.
const SPF_RESULTS: &[&str] = &[
    "pass",
    "neutral",
    "none",
    "fail",
    "softfail",
    "permerror",
    "temperror",
];

/// A compiled test over the trusted results.
#[derive(Debug, Clone)]
pub struct Test {
    trusted: Arc<[String]>,
    check: Check,
}

#[derive(Debug, Clone)]
enum Check {
    /// `check_authres_result(method, result)`; result `missing`: no result at all.
    Result {
        method: String,
        result: String,
    },
    /// An SPF result for the envelope sender, or for the HELO name.
    Spf {
        helo: bool,
        result: String,
    },
    /// A signature, verified or not, by one of these domains when any are named.
    DkimSigned(Vec<String>),
    /// A verified signature, by one of these domains when any are named.
    DkimValid(Vec<String>),
    /// A verified signature by the From: address's own domain.
    DkimValidAuthor,
    /// A verified signature by the envelope sender's domain.
    DkimValidEnvelopeFrom,
    ArcSigned,
    ArcValid,
    /// The DMARC result, and for a failure, the policy the domain asks for.
    Dmarc(&'static str, Option<&'static str>),
    /// An envelope sender that SPF passed and the list names.
    SpfListed(Option<Regex>),
    /// A From: address the list names, signed by the domain its entry asks for.
    DkimListed(Vec<(Regex, Option<String>)>),
}

impl Test {
    /// `results` and `seen` are what the tests of a rule set read of the message, found
    /// when the first asks.
    pub fn holds(&self, msg: &Message, results: &mut Option<Results>, seen: &mut Seen) -> bool {
        if self.trusted.is_empty() {
            return false;
        }
        // Every test of a rule set trusts the same ids: read once a message.
        let results = results.get_or_insert_with(|| Results::read(msg, &self.trusted));
        match &self.check {
            Check::Result { method, result } => match counting(results.of(method)) {
                None => result == "missing",
                Some(found) => found.result == *result,
            },
            Check::Spf { helo, result } => {
                counting(results.spf(*helo)).is_some_and(|r| r.result == *result)
            }
            Check::DkimSigned(domains) => results
                .of("dkim")
                .filter(|r| r.result != "none")
                .any(|r| domains.is_empty() || r.domain().is_some_and(|d| domains.contains(&d))),
            Check::DkimValid(domains) => results
                .dkim_domains()
                .any(|d| domains.is_empty() || domains.contains(&d)),
            Check::DkimValidAuthor => {
                let authors = seen.addresses(&FROM, msg);
                results
                    .dkim_domains()
                    .any(|d| authors.iter().any(|a| domain_of(a) == Some(d.as_str())))
            }
            Check::DkimValidEnvelopeFrom => {
                let sender = envelope_sender(msg);
                results
                    .dkim_domains()
                    .any(|d| sender.as_deref().and_then(domain_of) == Some(d.as_str()))
            }
            Check::ArcSigned => results.of("arc").any(|r| r.result != "none"),
            Check::ArcValid => results.of("arc").any(|r| r.result == "pass"),
            Check::Dmarc(result, policy) => counting(results.of("dmarc")).is_some_and(|r| {
                r.result == *result && policy.is_none_or(|p| r.dmarc_policy().as_deref() == Some(p))
            }),
            Check::SpfListed(list) => {
                let Some(list) = list else { return false };
                results
                    .spf_passed_senders(msg)
                    .iter()
                    .any(|s| list.is_match(s))
            }
            Check::DkimListed(list) => seen.addresses(&FROM, msg).iter().any(|author| {
                list.iter()
                    .filter(|(globs, _)| globs.is_match(author))
                    .any(|(_, wanted)| {
                        let Some(own) = domain_of(author) else {
                            return false;
                        };
                        results
                            .dkim_domains()
                            .any(|d| signed_as_wanted(&d, wanted.as_deref(), own))
                    })
            }),
        }
    }
}

/// Whether a signature by `domain` is what an entry asks for: the domain it names (`*.x`
/// or `.x`: any domain under x, not x itself), or without one, the author's own.
fn signed_as_wanted(domain: &str, wanted: Option<&str>, author_domain: &str) -> bool {
    match wanted {
        None => domain == author_domain,
        Some(w) => match w.strip_prefix('*').unwrap_or(w).strip_prefix('.') {
            Some(parent) => domain
                .strip_suffix(parent)
                .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
            None => domain == w,
        },
    }
}

fn domain_of(address: &str) -> Option<&str> {
    address
        .rsplit_once('@')
        .map(|(_, d)| d.trim_end_matches('.'))
}

/// One method's result in a field.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodResult {
    /// Lowercase, without a version: `spf`, `dkim`, `arc`, `dmarc`…
    pub method: String,
    /// Lowercase: `pass`, `fail`…
    pub result: String,
    /// `ptype.property` (lowercase) and value: `smtp.mailfrom`, `header.d`…, and
    /// `reason` or any other pair a server writes.
    pub properties: Vec<(String, String)>,
    /// What the server wrote in comments, where some write a DMARC policy: `(p=reject)`.
    pub comments: String,
}

impl MethodResult {
    /// A DKIM result's signing domain (`header.d`, or the domain of `header.i`), lowercase.
    fn domain(&self) -> Option<String> {
        let domain = self
            .property("header.d")
            .or_else(|| self.property("header.i").and_then(domain_of))?;
        Some(domain.trim_end_matches('.').to_ascii_lowercase())
    }

    /// The policy a DMARC result names: `policy.dmarc=reject`, or in a comment,
    /// `(p=reject)` or `(policy=reject)`; lowercase.
    fn dmarc_policy(&self) -> Option<String> {
        let in_comment = || {
            self.comments.split_whitespace().find_map(|w| {
                let (key, value) = w.split_once('=')?;
                matches!(key.to_ascii_lowercase().as_str(), "p" | "policy")
                    .then(|| value.trim_end_matches([',', ';']))
            })
        };
        let policy = self.property("policy.dmarc").or_else(in_comment)?;
        Some(policy.to_ascii_lowercase())
    }

    fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The results of one message's trusted fields, the newest field first.
#[derive(Debug, Default)]
pub struct Results {
    results: Vec<MethodResult>,
}

impl Results {
    pub fn read(msg: &Message, trusted: &[String]) -> Results {
        let mut results = Vec::new();
        for value in msg.header_values("authentication-results") {
            if let Some((id, found)) = parse_field(value)
                && trusted.iter().any(|t| t.eq_ignore_ascii_case(&id))
            {
                results.extend(found);
            }
        }
        Results { results }
    }

    fn of<'r>(&'r self, method: &'r str) -> impl Iterator<Item = &'r MethodResult> + 'r {
        self.results.iter().filter(move |r| r.method == method)
    }

    /// The SPF results for the envelope sender (or, `helo`, for the HELO name).
    fn spf(&self, helo: bool) -> impl Iterator<Item = &MethodResult> {
        self.of("spf")
            .filter(move |r| r.property("smtp.helo").is_some() == helo)
    }

    /// The domains of the verified DKIM signatures, lowercase.
    fn dkim_domains(&self) -> impl Iterator<Item = String> + '_ {
        self.of("dkim")
            .filter(|r| r.result == "pass")
            .filter_map(MethodResult::domain)
    }

    /// The envelope senders SPF passed: the address a result names, or for one that names
    /// only a domain (as some SPF checkers write it), the Return-Path in that domain.
    fn spf_passed_senders(&self, msg: &Message) -> Vec<String> {
        self.spf(false)
            .filter(|r| r.result == "pass")
            .filter_map(|r| {
                let named = r
                    .property("smtp.mailfrom")
                    .or_else(|| r.property("smtp.mfrom"))?
                    .to_ascii_lowercase();
                if named.contains('@') {
                    return Some(named);
                }
                envelope_sender(msg).filter(|s| domain_of(s) == Some(named.as_str()))
            })
            .collect()
    }
}

/// Of one method's results, newest first, the one that counts, as SpamAssassin takes them:
/// the newest, unless any is a pass.
fn counting<'r>(mut results: impl Iterator<Item = &'r MethodResult>) -> Option<&'r MethodResult> {
    let first = results.next()?;
    if first.result == "pass" {
        return Some(first);
    }
    Some(results.find(|r| r.result == "pass").unwrap_or(first))
}

/// An Authentication-Results value: its authserv-id and the results it reports.
pub fn parse_field(value: &str) -> Option<(String, Vec<MethodResult>)> {
    let mut parts = segments(value).into_iter();
    let id = words(&parts.next()?.0).into_iter().next()?;
    let mut results = Vec::new();
    for (text, comments) in parts {
        let words = words(&text);
        // `method=result`, then `reason=…` and `ptype.property=value` pairs.
        let mut pairs = words.windows(3).filter(|w| w[1] == "=");
        let Some([method, _, result]) = pairs.next() else {
            continue;
        };
        let method = method.split('/').next().unwrap_or_default();
        results.push(MethodResult {
            method: method.to_ascii_lowercase(),
            result: result.to_ascii_lowercase(),
            properties: pairs
                .map(|w| (w[0].to_ascii_lowercase(), w[2].clone()))
                .collect(),
            comments,
        });
    }
    Some((id.to_ascii_lowercase(), results))
}

/// The value's parts between `;`s (outside quoted strings and comments): each one's text
/// with its comments made spaces, and the text of those comments, nested ones included.
fn segments(value: &str) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), String::new())];
    let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
    for c in value.chars() {
        if !quoted && depth == 0 && c == ';' {
            out.push((String::new(), String::new()));
            continue;
        }
        let (text, comments) = out.last_mut().expect("a segment is open");
        let was_in_comment = depth > 0;
        if escaped {
            escaped = false;
        } else if c == '\\' && (quoted || depth > 0) {
            escaped = true;
        } else if c == '"' && depth == 0 {
            quoted = !quoted;
        } else if c == '(' && !quoted {
            depth += 1;
            comments.push(' ');
            continue;
        } else if c == ')' && depth > 0 {
            depth -= 1;
            if depth == 0 {
                text.push(' ');
            }
            continue;
        }
        if was_in_comment {
            comments.push(c);
        } else {
            text.push(c);
        }
    }
    out
}

/// Words, `=` signs and quoted strings (unquoted), in order.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '=' {
            chars.next();
            out.push("=".to_string());
        } else if c == '"' {
            chars.next();
            let mut s = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => s.extend(chars.next()),
                    c => s.push(c),
                }
            }
            out.push(s);
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '=' || c == '"' {
                    break;
                }
                s.push(c);
                chars.next();
            }
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(
        method: &str,
        result: &str,
        properties: &[(&str, &str)],
        comments: &str,
    ) -> MethodResult {
        MethodResult {
            method: method.into(),
            result: result.into(),
            properties: properties
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            comments: comments.into(),
        }
    }

    /// RFC 8601's syntax as servers write it: comments (nested, and holding `;` and `=`),
    /// a version after the id and after a method, spaces around `=`, quoted values,
    /// unknown properties and a field that reports nothing.
    #[test]
    fn fields_are_read_as_servers_write_them() {
        let (id, results) = parse_field(
            "MX.Example.org 1; spf=pass (sender SPF authorized; a=b) smtp.mailfrom=Bounce@News.example.com;\r\n \
             dkim/1 = pass (2048-bit key (rsa); unprotected) header.d=example.com \
             header.i=@example.com header.b=\"AbC=+/\"; arc=none; dmarc=fail reason=\"a; b\" header.from=x.example",
        )
        .expect("a field");
        assert_eq!(id, "mx.example.org");
        assert_eq!(
            results,
            [
                result(
                    "spf",
                    "pass",
                    &[("smtp.mailfrom", "Bounce@News.example.com")],
                    " sender SPF authorized; a=b"
                ),
                result(
                    "dkim",
                    "pass",
                    &[
                        ("header.d", "example.com"),
                        ("header.i", "@example.com"),
                        ("header.b", "AbC=+/")
                    ],
                    " 2048-bit key  rsa; unprotected"
                ),
                result("arc", "none", &[], ""),
                result(
                    "dmarc",
                    "fail",
                    &[("reason", "a; b"), ("header.from", "x.example")],
                    ""
                ),
            ]
        );
        assert_eq!(
            parse_field("mx.example.org; none"),
            Some(("mx.example.org".into(), vec![]))
        );
        assert_eq!(parse_field(" (only a comment) "), None);
        assert_eq!(
            parse_field("\"quoted id\"; spf=pass").map(|f| f.0),
            Some("quoted id".into())
        );
    }

    /// A field a hostile sender wrote: unbalanced comments and quotes, a lone backslash
    /// at the end, deep nesting, no `=` where one belongs. Read to what it says, quickly.
    #[test]
    fn hostile_fields_are_read_without_a_panic() {
        let deep = format!(
            "mx.example.org; dkim=pass {}header.d=x",
            "(".repeat(100_000)
        );
        let started = std::time::Instant::now();
        for field in [
            "",
            ";;;",
            "=",
            "mx.example.org; =pass; spf=; ==",
            "mx.example.org; spf=pass (unclosed comment",
            "mx.example.org; spf=pass smtp.mailfrom=\"unclosed quote",
            "mx.example.org; spf=pass smtp.mailfrom=a@b\\",
            "(\\) mx.example.org; dkim=pass \"\\\" header.d=x",
            "mx.example.org; dkim=pass ))) header.d=x",
            "mx.example.org; d\u{0}kim=pa\u{1b}ss header.d=\u{7f}",
            &deep,
        ] {
            let _ = parse_field(field);
        }
        // The comment never closes: what follows it is comment, not a signing domain.
        let (_, results) = parse_field(&deep).expect("a field");
        assert_eq!(
            (results[0].result.as_str(), results[0].domain()),
            ("pass", None)
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    /// Servers write a DMARC policy as a property or in a comment, in any case.
    #[test]
    fn dmarc_policies_are_found_where_servers_write_them() {
        let policy = |field: &str| {
            parse_field(field).expect("a field").1[0]
                .dmarc_policy()
                .unwrap_or_default()
        };
        assert_eq!(
            policy("a; dmarc=fail (p=reject dis=none) header.from=x"),
            "reject"
        );
        assert_eq!(
            policy("a; dmarc=fail (p=QUARANTINE sp=REJECT dis=NONE) header.from=x"),
            "quarantine"
        );
        assert_eq!(policy("a; dmarc=fail header.from=x (policy=none)"), "none");
        assert_eq!(policy("a; dmarc=fail policy.dmarc=reject"), "reject");
        assert_eq!(policy("a; dmarc=fail (sp=reject) header.from=x"), "");
    }

    #[test]
    fn signing_domains_are_matched_as_the_lists_ask() {
        assert!(signed_as_wanted("bank.example", None, "bank.example"));
        assert!(!signed_as_wanted("mail.bank.example", None, "bank.example"));
        assert!(signed_as_wanted(
            "relay.example",
            Some("relay.example"),
            "x.example"
        ));
        assert!(signed_as_wanted(
            "out.mail.example",
            Some("*.mail.example"),
            "x"
        ));
        assert!(signed_as_wanted(
            "out.mail.example",
            Some(".mail.example"),
            "x"
        ));
        assert!(!signed_as_wanted(
            "mail.example",
            Some("*.mail.example"),
            "x"
        ));
        assert!(!signed_as_wanted(
            "evilmail.example",
            Some("*.mail.example"),
            "x"
        ));
    }
}
