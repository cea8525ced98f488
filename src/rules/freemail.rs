//! SpamAssassin's FreeMail plugin: addresses at free mail providers (`freemail_domains`),
//! where anyone can have one in a minute, and the tests that read them: a From: or another
//! field at one, a Reply-To: that sends the answer to a different one, a body naming one.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::lists::{FROM, REPLY_TO, Seen, globs_regex};
use super::target::{Target, envelope_sender};
use crate::message::Message;

/// The settings as rule files wrote them.
#[derive(Debug, Clone)]
pub struct FreemailSettings {
    /// Domain globs, lowercase.
    domains: Vec<String>,
    /// Addresses and domains that are not free mail whatever their domain, lowercase.
    welcome: Vec<String>,
    /// A body with this many addresses, or this many free mail ones, is not read for them.
    max_body_emails: usize,
    max_body_freemails: usize,
    skip_when_over_max: bool,
    /// The Reply-To test passes over mail whose envelope sender is a list's or a bounce's.
    skip_bulk_envfrom: bool,
}

impl Default for FreemailSettings {
    fn default() -> FreemailSettings {
        FreemailSettings {
            domains: Vec::new(),
            welcome: Vec::new(),
            max_body_emails: 5,
            max_body_freemails: 3,
            skip_when_over_max: true,
            skip_bulk_envfrom: true,
        }
    }
}

impl FreemailSettings {
    /// Reads `directive` if it is one of these settings: none if it is not, else whether
    /// its value could be read.
    pub fn read(&mut self, directive: &str, rest: &str) -> Option<Result<(), String>> {
        let words = || rest.split_whitespace().map(str::to_ascii_lowercase);
        match directive {
            "freemail_domains" => self.domains.extend(words()),
            "freemail_welcomelist" | "freemail_whitelist" => self.welcome.extend(words()),
            "freemail_max_body_emails" | "freemail_max_body_freemails" => {
                let Ok(n) = rest.trim().parse() else {
                    return Some(Err(format!("{directive}: {rest:?} is not a count")));
                };
                if directive == "freemail_max_body_emails" {
                    self.max_body_emails = n;
                } else {
                    self.max_body_freemails = n;
                }
            }
            "freemail_skip_when_over_max" => self.skip_when_over_max = rest.trim() != "0",
            "freemail_skip_bulk_envfrom" => self.skip_bulk_envfrom = rest.trim() != "0",
            _ => return None,
        }
        Some(Ok(()))
    }
}

#[derive(Debug, Clone)]
pub enum FreemailTest {
    /// A From: address is free mail (and matches the pattern).
    From(Option<Regex>),
    /// An address of the field is free mail (and matches the pattern).
    Header(Target, Option<Regex>),
    /// The body names a free mail address (that matches the pattern).
    Body(Option<Regex>),
    /// Reply-To and From are different free mail addresses; or else, the body names a free
    /// mail address other than Reply-To's (`reply`: other than the one a reply goes to).
    ReplyTo { reply: bool },
}

/// What the free mail tests need: the settings, and the domains listed split into those
/// listed as they are and those with wildcards.
#[derive(Debug)]
pub struct Freemail {
    domains: HashSet<String>,
    domain_globs: Option<Regex>,
    settings: FreemailSettings,
}

/// Role and machine addresses, which free mail providers send from and which say nothing
/// of the person writing.
static ROLE_ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:abuse|support|sales|info|helpdesk|contact|kontakt|(?:post|host|domain)master|undisclosed.*|bounced?-.*|request-[0-9a-f]{16}|[0-9a-f]{8}[.-][0-9a-f-]{8,}|.+=.+=.+)@",
    )
    .expect("role address pattern is valid")
});

/// Envelope senders of lists and bounces, whose Reply-To says nothing of a scam.
static BULK_SENDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:^(?:post|host|domain)master|^double-bounce|^(?:sentto|owner|return|(?:gr)?bounced?)-.+|-(?:request|bounces?|admin|owner)|\b(?:do[._-]?)?no[._-]?repl(?:y|ies)|.+=.+)@",
    )
    .expect("bulk sender pattern is valid")
});

/// At most this many addresses are read from a body.
const MAX_BODY_ADDRESSES: usize = 40;

impl Freemail {
    pub(super) fn new(settings: &FreemailSettings) -> Freemail {
        let (globs, domains): (Vec<&String>, Vec<&String>) =
            (settings.domains.iter()).partition(|d| d.contains(['*', '?']));
        Freemail {
            domains: domains.into_iter().cloned().collect(),
            domain_globs: globs_regex(globs.into_iter()),
            settings: settings.clone(),
        }
    }

    /// Whether any provider is listed: without one, no test here can hit.
    pub(super) fn lists_any(&self) -> bool {
        !self.domains.is_empty() || self.domain_globs.is_some()
    }

    /// `address` (lowercase) is at a free mail provider, and not a role's or welcomed.
    fn is_freemail(&self, address: &str) -> bool {
        let Some((_, domain)) = address.rsplit_once('@') else {
            return false;
        };
        // Most addresses are at no free mail provider: that is asked first.
        (self.domains.contains(domain)
            || self
                .domain_globs
                .as_ref()
                .is_some_and(|d| d.is_match(domain)))
            && !(self.settings.welcome.iter()).any(|w| w == address || w == domain)
            && !ROLE_ADDRESS.is_match(address)
    }

    /// The free mail addresses the body names, or none when it names so many (or so many
    /// free mail ones) that it is a list of them, which says nothing.
    fn body_addresses<'s>(&self, body: &'s [String]) -> Option<Vec<&'s String>> {
        let mut freemails = Vec::new();
        for (n, address) in body.iter().enumerate() {
            if n + 1 >= self.settings.max_body_emails && self.settings.skip_when_over_max {
                return None;
            }
            if self.is_freemail(address) {
                if freemails.len() + 1 >= self.settings.max_body_freemails
                    && self.settings.skip_when_over_max
                {
                    return None;
                }
                freemails.push(address);
            }
        }
        Some(freemails)
    }
}

/// The addresses a message's body names, in its text and its `mailto:` links, lowercase and
/// each once: what the free mail tests read, found once for all of them.
fn body_addresses(msg: &Message) -> Vec<String> {
    let mailto = msg.urls.iter().filter_map(|u| {
        let rest = u
            .get(..7)?
            .eq_ignore_ascii_case("mailto:")
            .then(|| &u[7..])?;
        let address = rest.split(['?', ',']).next()?;
        address.contains('@').then_some(address)
    });
    let text = addresses_in(&msg.text);
    let mut out: Vec<String> = Vec::new();
    for address in mailto.chain(text) {
        let address = address.to_ascii_lowercase();
        if !out.contains(&address) {
            out.push(address);
            if out.len() == MAX_BODY_ADDRESSES {
                break;
            }
        }
    }
    out
}

/// The addresses written in `text`: from each `@`, the local part before it and the domain
/// after it (two labels or more, the last of letters). A regex would try to begin one at
/// every byte of the body; an `@` is rare.
fn addresses_in(text: &str) -> impl Iterator<Item = &str> {
    const LOCAL: &[u8] = b"!#$%&'*+/=?^_`{|}~.-";
    let bytes = text.as_bytes();
    memchr::memchr_iter(b'@', bytes).filter_map(move |at| {
        let local = bytes[..at]
            .iter()
            .rev()
            .take(65)
            .take_while(|&&b| b.is_ascii_alphanumeric() || LOCAL.contains(&b))
            .count();
        let domain = bytes[at + 1..]
            .iter()
            .take(253)
            .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            .count();
        let start = at - local;
        let local_part = text[start..at].trim_start_matches('.');
        let domain_part = text[at + 1..at + 1 + domain].trim_end_matches(['.', '-']);
        let tld = domain_part.rsplit_once('.')?.1;
        let fits = !local_part.is_empty()
            && local <= 64
            && tld.len() >= 2
            && tld.bytes().all(|b| b.is_ascii_alphabetic())
            && !domain_part.starts_with(['.', '-'])
            && !domain_part.contains("..");
        fits.then(|| &text[at - local_part.len()..at + 1 + domain_part.len()])
    })
}

impl FreemailTest {
    /// The test `name(args)` reads, if it is one of these; an error for arguments it
    /// cannot use.
    pub(super) fn compile(name: &str, args: &[String]) -> Option<Result<FreemailTest, String>> {
        let pattern = |i: usize| -> Result<Option<Regex>, String> {
            args.get(i)
                .map(|p| Regex::new(p).map_err(|e| format!("eval:{name}: pattern {p:?}: {e}")))
                .transpose()
        };
        Some(match name {
            "check_freemail_from" => pattern(0).map(FreemailTest::From),
            "check_freemail_body" => pattern(0).map(FreemailTest::Body),
            "check_freemail_header" => match args.first() {
                None => Err(format!("eval:{name} needs a header")),
                Some(header) => {
                    let header = header.strip_suffix(":addr").unwrap_or(header);
                    Target::parse(&format!("{header}:addrs"))
                        .map_err(|e| format!("eval:{name}: {e}"))
                        .and_then(|field| Ok(FreemailTest::Header(field, pattern(1)?)))
                }
            },
            "check_freemail_replyto" => match args.first().map(String::as_str) {
                None | Some("replyto") => Ok(FreemailTest::ReplyTo { reply: false }),
                Some("reply") => Ok(FreemailTest::ReplyTo { reply: true }),
                Some(other) => Err(format!("eval:{name}: {other:?} is not replyto or reply")),
            },
            _ => return None,
        })
    }

    pub(super) fn holds(&self, fm: &Freemail, msg: &Message, seen: &mut Seen) -> bool {
        let matches = |pattern: &Option<Regex>, address: &str| {
            pattern.as_ref().is_none_or(|p| p.is_match(address))
        };
        let any_freemail = |addresses: &[String], pattern: &Option<Regex>| {
            addresses
                .iter()
                .any(|a| fm.is_freemail(a) && matches(pattern, a))
        };
        match self {
            FreemailTest::From(pattern) => any_freemail(seen.addresses(&FROM, msg), pattern),
            FreemailTest::Header(field, pattern) => {
                any_freemail(seen.addresses(field, msg), pattern)
            }
            FreemailTest::Body(pattern) => {
                let body = seen.body.get_or_insert_with(|| body_addresses(msg));
                fm.body_addresses(body)
                    .is_some_and(|found| found.iter().any(|a| matches(pattern, a)))
            }
            FreemailTest::ReplyTo { reply } => {
                let (f, r) = (seen.field(&FROM, msg), seen.field(&REPLY_TO, msg));
                let Seen { fields, body, .. } = seen;
                let (from, reply_to) = (&fields[f].1, &fields[r].1);
                let from_free = from.iter().any(|a| fm.is_freemail(a));
                let reply_to_free = reply_to.iter().any(|a| fm.is_freemail(a));
                // The free mail address a reply goes to: Reply-To's; for `reply`, a free mail
                // From's, or a free mail Reply-To beside it.
                let replies_to = match reply {
                    false if reply_to_free => reply_to,
                    true if from_free && reply_to_free => reply_to,
                    true if from_free && reply_to.is_empty() => from,
                    _ => return false,
                };
                let bulk = || envelope_sender(msg).is_some_and(|s| BULK_SENDER.is_match(&s));
                if fm.settings.skip_bulk_envfrom && bulk() {
                    return false;
                }
                if from_free && reply_to_free && !from.iter().any(|a| reply_to.contains(a)) {
                    return true;
                }
                let body = body.get_or_insert_with(|| body_addresses(msg));
                fm.body_addresses(body)
                    .is_some_and(|found| found.iter().any(|b| replies_to.iter().any(|r| r != *b)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_in_text_are_found_from_their_at_signs() {
        let text = "write to joe.b@Mail.example. or <foo+bar@sub.example.org>, not a@b, \
                    x@y.c0m, @@ a@.example, user@domain.com.. héjoe@x.example \
                    .dot@start.example";
        let long = format!("{}@x.example", "a".repeat(65));
        let found: Vec<&str> = addresses_in(text).collect();
        assert_eq!(
            found,
            [
                "joe.b@Mail.example",
                "foo+bar@sub.example.org",
                "user@domain.com",
                "joe@x.example",
                "dot@start.example"
            ]
        );
        assert_eq!(addresses_in(&long).count(), 0);
        assert_eq!(addresses_in("@").count(), 0);
    }
}
