//! SpamAssassin's lists that need no DNS, and the tests that read them (its WLBLEval,
//! WelcomeListSubject and VBounce plugins): addresses (`welcomelist_from` and its kin,
//! `enlist_addrlist`), the relays mail must come from (`welcomelist_from_rcvd`), the hosts
//! of links (`blocklist_uri_host`, `enlist_uri_host`), subjects (`welcomelist_subject`),
//! one's own relays in bounces (`welcomelist_bounce_relays`), and, through
//! [`super::freemail`], free mail providers.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use regex::Regex;

use super::freemail::{Freemail, FreemailSettings, FreemailTest};
use super::parse::{Origin, glob_regex};
use super::relay::{self, Hop, Relay, TrustedNetworks};
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
    /// `trusted_networks`: where the relays `relayed` entries ask for are looked for;
    /// shared by every test that reads them.
    trusted: Arc<TrustedNetworks>,
    /// `welcomelist_subject` and `blocklist_subject`: globs, lowercase, one a line.
    subjects: HashMap<String, (Vec<String>, Origin)>,
    freemail: FreemailSettings,
    /// The free mail test's settings compiled, once, for every test that reads them.
    compiled_freemail: OnceLock<Arc<Freemail>>,
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
                "trusted_networks" => {
                    if let Err(e) = Arc::make_mut(&mut self.trusted).add(rest) {
                        return Some(Err(e));
                    }
                }
                "clear_trusted_networks" => Arc::make_mut(&mut self.trusted).clear(),
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
                _ => return self.freemail.read(directive, rest),
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
                trusted: self.trusted.clone(),
            })
        };
        let hosts = |list: Result<&str, String>| {
            let list = list?;
            let hosts = self.hosts.get(list).map(|(h, _)| h.clone());
            Ok(Test::UriHost(Arc::new(hosts.unwrap_or_default())))
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
            _ => {
                let test = FreemailTest::compile(name, args)?;
                let compiled = self
                    .compiled_freemail
                    .get_or_init(|| Arc::new(Freemail::new(&self.freemail)));
                test.map(|test| Test::Freemail(compiled.clone(), test))
            }
        })
    }
}

impl Lists {
    /// `trusted_networks`, for the tests of the trace.
    pub(super) fn trusted(&self) -> &Arc<TrustedNetworks> {
        &self.trusted
    }
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
        trusted: Arc<TrustedNetworks>,
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

pub(super) static FROM: LazyLock<Target> =
    LazyLock::new(|| Target::parse("From:addrs").expect("a valid target"));
pub(super) static TO: LazyLock<Target> =
    LazyLock::new(|| Target::parse("ToCc:addrs").expect("a valid target"));
pub(super) static REPLY_TO: LazyLock<Target> =
    LazyLock::new(|| Target::parse("Reply-To:addrs").expect("a valid target"));

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

/// What the list, free mail and DKIM tests read of one message, found when the first test
/// asks: a field's addresses (a dozen tests read From:), the addresses the body names, the
/// relays of the trace.
#[derive(Debug, Default)]
pub struct Seen {
    pub(super) fields: Vec<(Target, Vec<String>)>,
    pub(super) body: Option<Vec<String>>,
    trace: Option<Vec<Option<Hop>>>,
}

/// The message's trace, read into `cache` (a [`Seen`]'s) if no test read it before.
fn trace_of<'s>(cache: &'s mut Option<Vec<Option<Hop>>>, msg: &Message) -> &'s [Option<Hop>] {
    cache.get_or_insert_with(|| relay::trace(msg.header_values("received")))
}

impl Seen {
    /// The message's trace, read now if no test read it before.
    pub(super) fn trace(&mut self, msg: &Message) -> &[Option<Hop>] {
        trace_of(&mut self.trace, msg)
    }

    /// Where `field`'s addresses are in `fields`, read now if no test read them before.
    pub(super) fn field(&mut self, field: &Target, msg: &Message) -> usize {
        match self.fields.iter().position(|(f, _)| f == field) {
            Some(at) => at,
            None => {
                self.fields.push((field.clone(), field.addresses(msg)));
                self.fields.len() - 1
            }
        }
    }

    pub(super) fn addresses(&mut self, field: &Target, msg: &Message) -> &[String] {
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
                trusted,
            } => {
                if list.is_none() && relayed.is_empty() {
                    return false;
                }
                let at = seen.field(field, msg);
                let Seen { fields, trace, .. } = seen;
                let addresses = &fields[at].1;
                let listed = |a: &String| list.as_ref().is_some_and(|l| l.is_match(a));
                addresses.iter().any(listed)
                    || (!relayed.is_empty()
                        && (trusted.relays_to_check(trace_of(trace, msg)))
                            .iter()
                            .any(|hop| {
                                relayed.iter().any(|(glob, wanted)| {
                                    wanted.matches(hop.name.as_deref(), hop.address)
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
                        // url_host gives it lowercase.
                        .any(|host| {
                            lookups(&host)
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
