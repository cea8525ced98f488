//! SpamAssassin's lists that need no DNS, and the tests that read them (its WLBLEval and
//! FreeMail plugins): addresses (`welcomelist_from` and its kin, `enlist_addrlist`), the
//! hosts of links (`blocklist_uri_host`, `enlist_uri_host`), and free mail providers
//! (`freemail_domains`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use regex::Regex;

use super::parse::{Origin, glob_regex};
use super::target::Target;
use crate::message::{Message, url_host};

/// The lists read from rule files.
#[derive(Debug, Default)]
pub struct Lists {
    /// Address lists by name (a directive's, as `welcomelist_from`, or an
    /// `enlist_addrlist` name): globs, lowercase, and where the list was begun.
    addresses: HashMap<String, (Vec<String>, Origin)>,
    /// Host lists by name: host or domain, lowercase → listed (false: excluded by `!`), and
    /// where the list was begun.
    hosts: HashMap<String, (HashMap<String, bool>, Origin)>,
    /// `welcomelist_from_rcvd` and `def_welcomelist_from_rcvd`, by the list they add to
    /// (`welcomelist_from`, `def_welcomelist_from`): an address glob (lowercase) and the
    /// relay the mail must have come from.
    relayed: HashMap<String, (Vec<(String, Relay)>, Origin)>,
    /// `welcomelist_subject` and `blocklist_subject`: globs, lowercase, one a line.
    subjects: HashMap<String, (Vec<String>, Origin)>,
    freemail: FreemailSettings,
    /// The free mail test's settings compiled, once, for every test that reads them.
    compiled_freemail: OnceLock<Arc<Freemail>>,
}

#[derive(Debug)]
struct FreemailSettings {
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

/// Directives that add to the list named after them (old names beside new ones), and those
/// that take from it.
const ADD_ADDRESS: &[(&str, &str)] = &[
    ("welcomelist_from", "welcomelist_from"),
    ("whitelist_from", "welcomelist_from"),
    ("blocklist_from", "blocklist_from"),
    ("blacklist_from", "blocklist_from"),
    ("welcomelist_to", "welcomelist_to"),
    ("whitelist_to", "welcomelist_to"),
    ("blocklist_to", "blocklist_to"),
    ("blacklist_to", "blocklist_to"),
    ("all_spam_to", "all_spam_to"),
    ("more_spam_to", "more_spam_to"),
    // Host globs, not addresses: the relays one's own outgoing mail leaves through.
    ("welcomelist_bounce_relays", "welcomelist_bounce_relays"),
    ("whitelist_bounce_relays", "welcomelist_bounce_relays"),
];
const REMOVE_ADDRESS: &[(&str, &str)] = &[
    ("unwelcomelist_from", "welcomelist_from"),
    ("unwhitelist_from", "welcomelist_from"),
    ("unblocklist_from", "blocklist_from"),
    ("unblacklist_from", "blocklist_from"),
];
const ADD_SUBJECT: &[(&str, &str)] = &[
    ("welcomelist_subject", "welcomelist_subject"),
    ("whitelist_subject", "welcomelist_subject"),
    ("blocklist_subject", "blocklist_subject"),
    ("blacklist_subject", "blocklist_subject"),
];

/// A rule a list feeds: its name, its eval, its score and its description.
pub type ListRule = (&'static str, &'static str, f64, &'static str);

/// The rules the lists of their own directives feed, with the list each reads, as
/// SpamAssassin names and scores them: most decide, the `_TO` lists are learned features.
/// `more_spam_to` only lowers a fixed score in SpamAssassin and feeds no rule here.
static RULES: [(&str, ListRule); 10] = [
    (
        "welcomelist_from",
        (
            "USER_IN_WELCOMELIST",
            "check_from_in_welcomelist()",
            -100.0,
            "From: address is on the welcomelist (welcomelist_from)",
        ),
    ),
    (
        "def_welcomelist_from",
        (
            "USER_IN_DEF_WELCOMELIST",
            "check_from_in_default_welcomelist()",
            -15.0,
            "From: address is on the default welcomelist, relayed as listed",
        ),
    ),
    (
        "blocklist_from",
        (
            "USER_IN_BLOCKLIST",
            "check_from_in_blocklist()",
            100.0,
            "From: address is on the blocklist (blocklist_from)",
        ),
    ),
    (
        "all_spam_to",
        (
            "USER_IN_ALL_SPAM_TO",
            "check_to_in_all_spam()",
            -100.0,
            "To: or Cc: address wants all mail, spam too (all_spam_to)",
        ),
    ),
    (
        "welcomelist_to",
        (
            "USER_IN_WELCOMELIST_TO",
            "check_to_in_welcomelist()",
            -6.0,
            "To: or Cc: address is on the welcomelist (welcomelist_to)",
        ),
    ),
    (
        "blocklist_to",
        (
            "USER_IN_BLOCKLIST_TO",
            "check_to_in_blocklist()",
            10.0,
            "To: or Cc: address is on the blocklist (blocklist_to)",
        ),
    ),
    (
        "BLOCK",
        (
            "URI_HOST_IN_BLOCKLIST",
            "check_uri_host_in_blocklist()",
            100.0,
            "A link's host or domain is on the blocklist (blocklist_uri_host)",
        ),
    ),
    (
        "WELCOME",
        (
            "URI_HOST_IN_WELCOMELIST",
            "check_uri_host_in_welcomelist()",
            -100.0,
            "A link's host or domain is on the welcomelist (welcomelist_uri_host)",
        ),
    ),
    (
        "welcomelist_subject",
        (
            "SUBJECT_IN_WELCOMELIST",
            "check_subject_in_welcomelist()",
            -100.0,
            "Subject: holds a text on the welcomelist (welcomelist_subject)",
        ),
    ),
    (
        "blocklist_subject",
        (
            "SUBJECT_IN_BLOCKLIST",
            "check_subject_in_blocklist()",
            100.0,
            "Subject: holds a text on the blocklist (blocklist_subject)",
        ),
    ),
];

impl Lists {
    /// Reads `directive` if it is one of these settings: none if it is not, else whether
    /// its value could be read.
    pub fn read(
        &mut self,
        directive: &str,
        rest: &str,
        origin: &Origin,
    ) -> Option<Result<(), String>> {
        let words = || rest.split_whitespace().map(str::to_ascii_lowercase);
        let find = |table: &[(&str, &'static str)]| {
            table
                .iter()
                .find(|(d, _)| *d == directive)
                .map(|&(_, list)| list)
        };
        let named =
            || named(rest).ok_or_else(|| format!("{directive}: expected (LISTNAME) and entries"));
        if let Some(list) = find(ADD_ADDRESS) {
            self.add_addresses(list, words(), origin);
        } else if let Some(list) = find(REMOVE_ADDRESS) {
            if let Some((globs, _)) = self.addresses.get_mut(list) {
                for glob in words() {
                    globs.retain(|g| *g != glob);
                }
            }
        } else if let Some(list) = find(ADD_SUBJECT) {
            // A whole line is one glob: subjects have spaces.
            let (globs, _) = self
                .subjects
                .entry(list.to_string())
                .or_insert_with(|| (Vec::new(), origin.clone()));
            globs.push(rest.trim().to_lowercase());
        } else {
            match directive {
                "welcomelist_from_rcvd"
                | "whitelist_from_rcvd"
                | "def_welcomelist_from_rcvd"
                | "def_whitelist_from_rcvd" => {
                    let mut w = words();
                    let (Some(glob), Some(relay), None) = (w.next(), w.next(), w.next()) else {
                        return Some(Err(format!("{directive}: expected an address and a relay")));
                    };
                    let relay = Relay::parse(&relay).ok_or_else(|| {
                        format!("{directive}: {relay:?} is no host name or [address]")
                    });
                    let list = if directive.starts_with("def_") {
                        "def_welcomelist_from"
                    } else {
                        "welcomelist_from"
                    };
                    match relay {
                        Ok(relay) => {
                            let (entries, _) = self
                                .relayed
                                .entry(list.to_string())
                                .or_insert_with(|| (Vec::new(), origin.clone()));
                            entries.push((glob, relay));
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
                "unwelcomelist_from_rcvd" | "unwhitelist_from_rcvd" => {
                    for glob in words() {
                        for (entries, _) in self.relayed.values_mut() {
                            entries.retain(|(g, _)| *g != glob);
                        }
                    }
                }
                "enlist_addrlist" => match named() {
                    Ok((list, addresses)) => {
                        let addresses = addresses.split_whitespace().map(str::to_ascii_lowercase);
                        self.add_addresses(list, addresses, origin);
                    }
                    Err(e) => return Some(Err(e)),
                },
                "enlist_uri_host" => match named() {
                    Ok((list, hosts)) => self.add_hosts(list, hosts, origin),
                    Err(e) => return Some(Err(e)),
                },
                "blocklist_uri_host" | "blacklist_uri_host" => {
                    self.add_hosts("BLOCK", rest, origin)
                }
                "welcomelist_uri_host" | "whitelist_uri_host" => {
                    self.add_hosts("WELCOME", rest, origin)
                }
                // Without a list name, from every list.
                "delist_uri_host" => {
                    let (only, hosts) = named().map_or((None, rest), |(l, h)| (Some(l), h));
                    for (name, (list, _)) in &mut self.hosts {
                        if only.is_none_or(|o| o == name) {
                            for host in hosts.split_whitespace() {
                                list.remove(&host.trim_start_matches('!').to_ascii_lowercase());
                            }
                        }
                    }
                }
                "freemail_domains" => self.freemail.domains.extend(words()),
                "freemail_welcomelist" | "freemail_whitelist" => {
                    self.freemail.welcome.extend(words())
                }
                "freemail_max_body_emails" | "freemail_max_body_freemails" => {
                    let Ok(n) = rest.trim().parse() else {
                        return Some(Err(format!("{directive}: {rest:?} is not a count")));
                    };
                    if directive == "freemail_max_body_emails" {
                        self.freemail.max_body_emails = n;
                    } else {
                        self.freemail.max_body_freemails = n;
                    }
                }
                "freemail_skip_when_over_max" => {
                    self.freemail.skip_when_over_max = rest.trim() != "0"
                }
                "freemail_skip_bulk_envfrom" => {
                    self.freemail.skip_bulk_envfrom = rest.trim() != "0"
                }
                _ => return None,
            }
        }
        Some(Ok(()))
    }

    fn add_addresses(&mut self, list: &str, globs: impl Iterator<Item = String>, at: &Origin) {
        let (entries, _) = self
            .addresses
            .entry(list.to_string())
            .or_insert_with(|| (Vec::new(), at.clone()));
        entries.extend(globs);
    }

    fn add_hosts(&mut self, list: &str, hosts: &str, at: &Origin) {
        let (entries, _) = self
            .hosts
            .entry(list.to_string())
            .or_insert_with(|| (HashMap::new(), at.clone()));
        for host in hosts.split_whitespace() {
            let host = host.to_ascii_lowercase();
            match host.strip_prefix('!') {
                Some(excluded) => entries.insert(excluded.to_string(), false),
                None => entries.insert(host, true),
            };
        }
    }

    /// The rules of the lists their own directives fill, for the lists that have entries,
    /// with where each list was begun.
    pub fn list_rules(&self) -> impl Iterator<Item = (&'static ListRule, &Origin)> {
        RULES
            .iter()
            .filter_map(|(list, rule)| Some((rule, self.begun(list)?)))
    }

    /// Where the list `name` was begun, if it has entries.
    fn begun(&self, name: &str) -> Option<&Origin> {
        fn filled<T>(list: Option<&(Vec<T>, Origin)>) -> Option<&Origin> {
            list.filter(|(entries, _)| !entries.is_empty())
                .map(|(_, o)| o)
        }
        filled(self.addresses.get(name))
            .or_else(|| filled(self.relayed.get(name)))
            .or_else(|| filled(self.subjects.get(name)))
            .or_else(|| {
                let (hosts, origin) = self.hosts.get(name)?;
                (!hosts.is_empty()).then_some(origin)
            })
    }

    /// A subject list's globs as one pattern found anywhere in a subject, case ignored.
    fn subject_list(&self, list: &str) -> Option<Regex> {
        let (globs, _) = self.subjects.get(list)?;
        let alternatives: Vec<String> = globs.iter().map(|g| glob_regex(g)).collect();
        Regex::new(&format!("(?i)(?:{})", alternatives.join("|"))).ok()
    }

    /// The test `name(args)` reads, if it is one of these; an error for arguments it
    /// cannot use.
    pub fn compile(&self, name: &str, args: &[String]) -> Option<Result<Test, String>> {
        let list_arg = || match args {
            [list] => Ok(list.as_str()),
            _ => Err(format!("eval:{name} needs one list name")),
        };
        let pattern = |i: usize| -> Result<Option<Regex>, String> {
            args.get(i)
                .map(|p| Regex::new(p).map_err(|e| format!("eval:{name}: pattern {p:?}: {e}")))
                .transpose()
        };
        let addresses = |field: &Target, list: Result<&str, String>| {
            let list = list?;
            let globs = self.addresses.get(list).map(|(g, _)| g.iter());
            let relayed = self
                .relayed
                .get(list)
                .map_or_else(Vec::new, |(entries, _)| {
                    (entries.iter())
                        .filter_map(|(glob, relay)| {
                            Some((globs_regex(std::iter::once(glob))?, relay.clone()))
                        })
                        .collect()
                });
            Ok(Test::Address {
                field: field.clone(),
                list: globs.and_then(globs_regex),
                relayed: relayed.into(),
            })
        };
        let hosts = |list: Result<&str, String>| {
            let list = list?;
            let hosts = self.hosts.get(list).map(|(h, _)| h.clone());
            Ok(Test::UriHost(Arc::new(hosts.unwrap_or_default())))
        };
        let freemail = |test: Result<FreemailTest, String>| {
            let compiled = self
                .compiled_freemail
                .get_or_init(|| Arc::new(Freemail::new(&self.freemail)));
            Ok(Test::Freemail(compiled.clone(), test?))
        };
        Some(match name {
            "check_from_in_welcomelist" | "check_from_in_whitelist" => {
                addresses(&FROM, Ok("welcomelist_from"))
            }
            "check_from_in_default_welcomelist" | "check_from_in_default_whitelist" => {
                addresses(&FROM, Ok("def_welcomelist_from"))
            }
            "check_from_in_blocklist" | "check_from_in_blacklist" => {
                addresses(&FROM, Ok("blocklist_from"))
            }
            "check_to_in_welcomelist" | "check_to_in_whitelist" => {
                addresses(&TO, Ok("welcomelist_to"))
            }
            "check_to_in_blocklist" | "check_to_in_blacklist" => addresses(&TO, Ok("blocklist_to")),
            "check_to_in_all_spam" => addresses(&TO, Ok("all_spam_to")),
            "check_to_in_more_spam" => addresses(&TO, Ok("more_spam_to")),
            "check_from_in_list" => addresses(&FROM, list_arg()),
            "check_to_in_list" => addresses(&TO, list_arg()),
            "check_replyto_in_list" => addresses(&REPLY_TO, list_arg()),
            "check_uri_host_listed" => hosts(list_arg()),
            "check_uri_host_in_blocklist" | "check_uri_host_in_blacklist" => hosts(Ok("BLOCK")),
            "check_uri_host_in_welcomelist" | "check_uri_host_in_whitelist" => hosts(Ok("WELCOME")),
            "check_subject_in_welcomelist" | "check_subject_in_whitelist" => {
                Ok(Test::Subject(self.subject_list("welcomelist_subject")))
            }
            "check_subject_in_blocklist" | "check_subject_in_blacklist" => {
                Ok(Test::Subject(self.subject_list("blocklist_subject")))
            }
            // SpamAssassin's VBounce plugin: a bounce of mail that left through one of
            // one's own relays is a real bounce, not backscatter.
            "have_any_bounce_relays" => Ok(Test::Listed(
                self.addresses
                    .get("welcomelist_bounce_relays")
                    .is_some_and(|(globs, _)| !globs.is_empty()),
            )),
            "check_welcomelist_bounce_relays" | "check_whitelist_bounce_relays" => {
                let globs = self.addresses.get("welcomelist_bounce_relays");
                Ok(Test::BounceRelays(
                    globs.and_then(|(g, _)| globs_regex(g.iter())),
                ))
            }
            "check_freemail_from" => freemail(pattern(0).map(FreemailTest::From)),
            "check_freemail_body" => freemail(pattern(0).map(FreemailTest::Body)),
            "check_freemail_header" => freemail(match args.first() {
                None => Err(format!("eval:{name} needs a header")),
                Some(header) => {
                    let header = header.strip_suffix(":addr").unwrap_or(header);
                    Target::parse(&format!("{header}:addrs"))
                        .map_err(|e| format!("eval:{name}: {e}"))
                        .and_then(|field| Ok(FreemailTest::Header(field, pattern(1)?)))
                }
            }),
            "check_freemail_replyto" => freemail(match args.first().map(String::as_str) {
                None | Some("replyto") => Ok(FreemailTest::ReplyTo { reply: false }),
                Some("reply") => Ok(FreemailTest::ReplyTo { reply: true }),
                Some(other) => Err(format!("eval:{name}: {other:?} is not replyto or reply")),
            }),
            _ => return None,
        })
    }
}

/// The relay a `welcomelist_from_rcvd` entry asks for: a host name or a domain above it,
/// or a network.
#[derive(Debug, Clone, PartialEq)]
pub enum Relay {
    Host(String),
    Net(std::net::IpAddr, u8),
}

impl Relay {
    /// `mail.example.org`, `example.org`, `[192.0.2.1]`, `[192.0.2.0/24]`, `[192.0.2.0]/24`,
    /// `[192.0.2]` (an IPv4 address cut at a byte: the network of the bytes given),
    /// `[2001:db8::/32]`.
    fn parse(text: &str) -> Option<Relay> {
        let Some(bracketed) = text.strip_prefix('[') else {
            let host = text.trim_end_matches('.').to_ascii_lowercase();
            let valid = !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            return valid.then_some(Relay::Host(host));
        };
        let (inside, after) = bracketed.split_once(']')?;
        let (address, length) = match (inside.split_once('/'), after.strip_prefix('/')) {
            (Some((address, length)), _) if after.is_empty() => (address, Some(length)),
            (None, Some(length)) => (inside, Some(length)),
            (None, None) if after.is_empty() => (inside, None),
            _ => return None,
        };
        let length = length.map(str::parse::<u8>).transpose().ok()?;
        if let Ok(ip) = address.parse::<std::net::IpAddr>() {
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let length = length.unwrap_or(max);
            return (length <= max).then_some(Relay::Net(ip, length));
        }
        // A classful IPv4 prefix: `10.1.2`, `10.1`, `10`.
        let bytes: Vec<u8> = (address.split('.'))
            .map(|b| b.parse().ok())
            .collect::<Option<_>>()?;
        if bytes.is_empty() || bytes.len() > 3 || length.is_some() {
            return None;
        }
        let mut octets = [0u8; 4];
        octets[..bytes.len()].copy_from_slice(&bytes);
        Some(Relay::Net(octets.into(), 8 * bytes.len() as u8))
    }

    /// Whether the relay with this name (none: no reverse DNS) and address is this one.
    fn matches(&self, host: Option<&str>, ip: Option<std::net::IpAddr>) -> bool {
        match self {
            Relay::Host(want) => host.is_some_and(|h| {
                h == want
                    || h.strip_suffix(want.as_str())
                        .is_some_and(|sub| sub.ends_with('.'))
            }),
            Relay::Net(net, length) => ip.is_some_and(|ip| in_network(ip, *net, *length)),
        }
    }

    /// The relay that handed the mail to the server that wrote `received` (the newest
    /// Received: field, your own MTA's): its reverse DNS name, lowercase, and its address.
    /// Postfix and Sendmail write `from HELO (NAME [ADDRESS])`, Exim `from NAME ([ADDRESS]
    /// helo=HELO)`; a name of `unknown` is none.
    pub fn of_received(received: &str) -> Option<(Option<String>, Option<std::net::IpAddr>)> {
        let from = received.trim_start().strip_prefix("from ")?;
        let from = from.split(" by ").next().unwrap_or(from);
        let ip = (from
            .split_once('[')
            .and_then(|(_, rest)| rest.split(']').next()))
        .map(|a| a.trim_start_matches("IPv6:"))
        .and_then(|a| a.parse().ok());
        // Only a name the server looked up: never the HELO name the client chose.
        let name = from.split_once('(').and_then(|(before, inside)| {
            let (name, _) = inside.split_once('[')?;
            Some(match name.trim() {
                "" => before.trim(),
                name => name,
            })
        });
        let name = name.map(|n| n.trim_end_matches('.').to_ascii_lowercase());
        let named = name.filter(|n| {
            n != "unknown"
                && n.contains('.')
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        });
        Some((named, ip))
    }
}

/// Whether `ip` is in the network `net`/`length` (an IPv4 address in an IPv6 network, or
/// the other way round, is not).
fn in_network(ip: std::net::IpAddr, net: std::net::IpAddr, length: u8) -> bool {
    use std::net::IpAddr;
    let (ip, net, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    let shift = bits - u32::from(length).min(bits);
    shift >= bits || (ip >> shift) == (net >> shift)
}

/// `(NAME) rest`: the list's name and the rest.
fn named(value: &str) -> Option<(&str, &str)> {
    let (list, rest) = value.trim().strip_prefix('(')?.split_once(')')?;
    let rest = rest.trim();
    (!list.is_empty() && !rest.is_empty()).then_some((list.trim(), rest))
}

/// Whether `name` is a test of this module.
pub fn known(name: &str) -> bool {
    // Arguments that every test here accepts: a list name, or a header.
    let args = ["From".to_string()];
    let lists = Lists::default();
    lists.compile(name, &[]).is_some() || lists.compile(name, &args).is_some()
}

/// Address globs as one case-insensitive pattern over a whole address; none for no globs.
pub(super) fn globs_regex<'g>(globs: impl Iterator<Item = &'g String>) -> Option<Regex> {
    let alternatives: Vec<String> = globs.map(|glob| glob_regex(glob)).collect();
    if alternatives.is_empty() {
        return None;
    }
    let pattern = format!("(?is)^(?:{})$", alternatives.join("|"));
    // Escaped globs always make a valid pattern; a list too large for the engine's
    // limits matches nothing rather than stopping the rules from loading.
    Regex::new(&pattern).ok()
}

/// A compiled test.
#[derive(Debug, Clone)]
pub enum Test {
    /// An address of the field is on the list (none: the list is empty), or on it for mail
    /// from a relay named beside it.
    Address {
        field: Target,
        list: Option<Regex>,
        relayed: Arc<[(Regex, Relay)]>,
    },
    /// A link's host, or a domain above it, is on the list: the most specific entry found
    /// decides, and a `!` entry says no.
    UriHost(Arc<HashMap<String, bool>>),
    /// The Subject holds a text on the list (none: the list is empty).
    Subject(Option<Regex>),
    /// Whether a list has entries.
    Listed(bool),
    /// A `Received:` line quoted in the body names a relay on the list (none: the list is
    /// empty): the bounced message left through it.
    BounceRelays(Option<Regex>),
    Freemail(Arc<Freemail>, FreemailTest),
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

/// What the free mail tests need, compiled.
#[derive(Debug)]
pub struct Freemail {
    /// The domains listed as they are, and those listed with wildcards.
    domains: std::collections::HashSet<String>,
    domain_globs: Option<Regex>,
    welcome: Vec<String>,
    max_body_emails: usize,
    max_body_freemails: usize,
    skip_when_over_max: bool,
    skip_bulk_envfrom: bool,
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

static FROM: LazyLock<Target> =
    LazyLock::new(|| Target::parse("From:addrs").expect("a valid target"));
static TO: LazyLock<Target> =
    LazyLock::new(|| Target::parse("ToCc:addrs").expect("a valid target"));
static REPLY_TO: LazyLock<Target> =
    LazyLock::new(|| Target::parse("Reply-To:addrs").expect("a valid target"));

/// At most this many addresses are read from a body.
const MAX_BODY_ADDRESSES: usize = 40;

impl Freemail {
    fn new(settings: &FreemailSettings) -> Freemail {
        Freemail {
            domains: (settings.domains.iter())
                .filter(|d| !d.contains(['*', '?']))
                .cloned()
                .collect(),
            domain_globs: globs_regex(settings.domains.iter().filter(|d| d.contains(['*', '?']))),
            welcome: settings.welcome.clone(),
            max_body_emails: settings.max_body_emails,
            max_body_freemails: settings.max_body_freemails,
            skip_when_over_max: settings.skip_when_over_max,
            skip_bulk_envfrom: settings.skip_bulk_envfrom,
        }
    }

    fn lists_any(&self) -> bool {
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
            && !self.welcome.iter().any(|w| w == address || w == domain)
            && !ROLE_ADDRESS.is_match(address)
    }

    /// The free mail addresses the body names, or none when it names so many (or so many
    /// free mail ones) that it is a list of them, which says nothing.
    fn body_addresses<'s>(&self, body: &'s [String]) -> Option<Vec<&'s String>> {
        let mut freemails = Vec::new();
        for (n, address) in body.iter().enumerate() {
            if n + 1 >= self.max_body_emails && self.skip_when_over_max {
                return None;
            }
            if self.is_freemail(address) {
                if freemails.len() + 1 >= self.max_body_freemails && self.skip_when_over_max {
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
pub fn body_addresses(msg: &Message) -> Vec<String> {
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

/// The `Received:` lines in a body, quoted (`> `) or not, each with its continuation lines:
/// the trace of a message a bounce carries.
fn quoted_received_lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_received = false;
    for line in text.lines() {
        let unquoted = line.trim_start_matches(['>', ' ']);
        let continues = line.starts_with([' ', '\t']) && !unquoted.is_empty();
        if in_received && continues {
            if let Some(last) = out.last_mut() {
                last.push(' ');
                last.push_str(line.trim());
            }
            continue;
        }
        in_received = unquoted
            .get(..9)
            .is_some_and(|h| h.eq_ignore_ascii_case("received:"));
        if in_received {
            out.push(unquoted.to_string());
        }
    }
    out
}

/// The hosts and domains to look a link's host up under, most specific first: itself, then
/// each domain above it (at most ten lookups); an address literal as itself.
fn lookups(host: &str) -> impl Iterator<Item = &str> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    let host = literal.unwrap_or(host);
    let is_address = literal.is_some() || host.parse::<std::net::IpAddr>().is_ok();
    std::iter::successors(Some(host), move |h| {
        if is_address {
            None
        } else {
            h.split_once('.').map(|(_, parent)| parent)
        }
    })
    .filter(|h| !h.is_empty())
    .take(10)
}

/// What the tests here read of one message, found when the first test asks: a field's
/// addresses (three tests read From:, two Reply-To:), the addresses the body names.
#[derive(Debug, Default)]
pub struct Seen {
    fields: Vec<(Target, Vec<String>)>,
    body: Option<Vec<String>>,
}

impl Seen {
    /// Where `field`'s addresses are in `fields`, read now if no test read them before.
    fn field(&mut self, field: &Target, msg: &Message) -> usize {
        match self.fields.iter().position(|(f, _)| f == field) {
            Some(at) => at,
            None => {
                self.fields.push((field.clone(), field.addresses(msg)));
                self.fields.len() - 1
            }
        }
    }

    fn addresses(&mut self, field: &Target, msg: &Message) -> &[String] {
        let at = self.field(field, msg);
        &self.fields[at].1
    }
}

impl Test {
    pub fn holds(&self, msg: &Message, seen: &mut Seen) -> bool {
        match self {
            Test::Address {
                field,
                list,
                relayed,
            } => {
                if list.is_none() && relayed.is_empty() {
                    return false;
                }
                let addresses = seen.addresses(field, msg);
                let listed = |a: &String| list.as_ref().is_some_and(|l| l.is_match(a));
                let relay = || msg.header("received").and_then(Relay::of_received);
                addresses.iter().any(listed)
                    || (!relayed.is_empty()
                        && relay().is_some_and(|(host, ip)| {
                            relayed.iter().any(|(glob, wanted)| {
                                wanted.matches(host.as_deref(), ip)
                                    && addresses.iter().any(|a| glob.is_match(a))
                            })
                        }))
            }
            Test::UriHost(list) => {
                !list.is_empty()
                    && msg
                        .urls
                        .iter()
                        .filter(|u| !crate::message::is_mailto(u))
                        .filter_map(|u| url_host(u))
                        .any(|host| {
                            lookups(&host.to_ascii_lowercase())
                                .find_map(|key| list.get(key).copied())
                                .unwrap_or(false)
                        })
            }
            Test::Listed(listed) => *listed,
            Test::BounceRelays(list) => list.as_ref().is_some_and(|list| {
                let raw = String::from_utf8_lossy(msg.raw_body());
                [msg.text.as_str(), &raw]
                    .into_iter()
                    .flat_map(quoted_received_lines)
                    .any(|line| {
                        line.split_whitespace()
                            .any(|word| word.contains('.') && list.is_match(word))
                    })
            }),
            Test::Subject(list) => list
                .as_ref()
                .is_some_and(|list| msg.header("subject").is_some_and(|s| list.is_match(s))),
            Test::Freemail(freemail, test) => {
                freemail.lists_any() && test.holds(freemail, msg, seen)
            }
        }
    }
}

impl FreemailTest {
    fn holds(&self, fm: &Freemail, msg: &Message, seen: &mut Seen) -> bool {
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
                let Seen { fields, body } = seen;
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
                let bulk = || {
                    Target::EnvelopeFrom
                        .text(msg)
                        .is_some_and(|sender| BULK_SENDER.is_match(sender.trim()))
                };
                if fm.skip_bulk_envfrom && bulk() {
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
    fn relays_are_names_domains_or_networks() {
        let relay = |s: &str| Relay::parse(s);
        let ip = |s: &str| Some(s.parse().unwrap());
        for (pattern, name, address, want) in [
            ("example.org", Some("mail.example.org"), None, true),
            ("Example.org.", Some("example.org"), None, true),
            ("example.org", Some("badexample.org"), None, false),
            ("example.org", None, ip("192.0.2.1"), false),
            ("[192.0.2.1]", None, ip("192.0.2.1"), true),
            ("[192.0.2.0/24]", None, ip("192.0.2.200"), true),
            ("[192.0.2.0]/24", None, ip("192.0.3.1"), false),
            ("[192.0.2]", None, ip("192.0.2.9"), true),
            ("[10]", None, ip("11.0.0.1"), false),
            ("[2001:db8::/32]", None, ip("2001:db8:1::1"), true),
            ("[2001:db8::/32]", None, ip("192.0.2.1"), false),
            ("[0.0.0.0/0]", None, ip("203.0.113.1"), true),
        ] {
            let r = relay(pattern).unwrap_or_else(|| panic!("{pattern}"));
            assert_eq!(
                r.matches(name, address),
                want,
                "{pattern} {name:?} {address:?}"
            );
        }
        for bad in [
            "[192.0.2.1/33]",
            "[x]",
            "[1.2.3.4.5]",
            "[10]/8",
            "a_b.example",
            "[1.2.3.4]x",
        ] {
            assert_eq!(relay(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_relay_is_the_name_the_server_looked_up() {
        let ip = |s: &str| Some(s.parse().unwrap());
        for (received, want) in [
            (
                "from helo.example (mail.Example.org. [192.0.2.1]) by mx.example.net",
                (Some("mail.example.org".to_string()), ip("192.0.2.1")),
            ),
            (
                "from bank.example (unknown [192.0.2.1]) by mx.example.net",
                (None, ip("192.0.2.1")),
            ),
            (
                "from mail.example.org ([192.0.2.1] helo=bank.example) by mx.example.net",
                (Some("mail.example.org".to_string()), ip("192.0.2.1")),
            ),
            (
                "from [192.0.2.1] (helo=bank.example) by mx.example.net",
                (None, ip("192.0.2.1")),
            ),
            (
                "from h (mail.example.org [IPv6:2001:db8::1]) by mx",
                (Some("mail.example.org".to_string()), ip("2001:db8::1")),
            ),
            ("from bank.example (bank.example) by mx", (None, None)),
        ] {
            assert_eq!(Relay::of_received(received), Some(want), "{received}");
        }
        assert_eq!(
            Relay::of_received("by mx.example.net; Tue, 1 Dec 2026"),
            None
        );
    }

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
