//! SpamAssassin's HeaderEval tests that a regex alone cannot judge: a bulk mailer's
//! fingerprints (a template left unfilled, a Message-ID made of the From address or on the
//! wrong clock, an envelope sender made of the recipient's address), recipient lists
//! sorted or alike, and Received: trails that deny the free mail provider From names.

use std::sync::LazyLock;

use super::argument::Arguments;
use super::eval::Facts;
use super::lists::{FROM, Seen, TO};
use super::relay::{is_or_under, is_private};
use super::target::{Target, envelope_sender};
use crate::domain::base_domain;
use crate::message::Message;

#[derive(Debug, Clone)]
pub enum Test {
    /// A field other than the address and reference ones holds `%WORD`: a mail merge
    /// that left its placeholder.
    UnresolvedTemplate,
    /// A Message-ID of 28 capitals, a dot and the From address.
    RatwareNameId,
    /// The envelope sender is made of the recipient's domain and local part
    /// (`example.com.joe@bulk.example`).
    RatwareEnvelopeFrom,
    /// An Outlook Express Message-ID whose embedded time is neither the Date's nor the
    /// newest Received line's.
    OutlookMessageId,
    /// Seven or more recipients, in sorted order.
    SortedRecipients,
    /// How alike five or more recipients' addresses are, in [min, max).
    SimilarRecipients(f64, f64),
    /// The trace cannot be judged: there is none, or a list server replaced it.
    GatedThroughReceivedRemover,
    /// From names this provider, and the trace does not show its servers.
    ForgedFreemail(Provider),
    /// A Received line names hotmail.com as the sending host without its servers' marks.
    ForgedHotmailTrace,
    /// From is at hotmail.com, and no Received line names it.
    NoHotmailTrace,
    /// An AOL relay name in the trace without AOL's relay marks.
    FakeAolRelay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Yahoo,
    Gmail,
    Juno,
    Eudoramail,
}

const NAMES: &[&str] = &[
    "check_unresolved_template",
    "check_ratware_name_id",
    "check_ratware_envelope_from",
    "check_outlook_message_id",
    "sorted_recipients",
    "similar_recipients",
    "gated_through_received_hdr_remover",
    "check_for_no_hotmail_received_headers",
    "check_for_forged_hotmail_received_headers",
    "check_for_forged_yahoo_received_headers",
    "check_for_forged_gmail_received_headers",
    "check_for_forged_juno_received_headers",
    "check_for_forged_eudoramail_received_headers",
    "check_for_fake_aol_relay_in_rcvd",
];

pub fn known(name: &str) -> bool {
    NAMES.contains(&name)
}

/// `name(args)` if it is a test of this module.
pub(super) fn compile(name: &str, args: &Arguments) -> Option<Result<Test, String>> {
    let test = || -> Result<Test, String> {
        Ok(match name {
            "check_unresolved_template" => Test::UnresolvedTemplate,
            "check_ratware_name_id" => Test::RatwareNameId,
            "check_ratware_envelope_from" => Test::RatwareEnvelopeFrom,
            "check_outlook_message_id" => Test::OutlookMessageId,
            "sorted_recipients" => Test::SortedRecipients,
            // An end left out is open, as one written `undef`.
            "similar_recipients" => {
                Test::SimilarRecipients(args.min_or(0, f64::NEG_INFINITY)?, args.open_max(1)?)
            }
            "gated_through_received_hdr_remover" => Test::GatedThroughReceivedRemover,
            "check_for_no_hotmail_received_headers" => Test::NoHotmailTrace,
            "check_for_forged_hotmail_received_headers" => Test::ForgedHotmailTrace,
            "check_for_forged_yahoo_received_headers" => Test::ForgedFreemail(Provider::Yahoo),
            "check_for_forged_gmail_received_headers" => Test::ForgedFreemail(Provider::Gmail),
            "check_for_forged_juno_received_headers" => Test::ForgedFreemail(Provider::Juno),
            "check_for_forged_eudoramail_received_headers" => {
                Test::ForgedFreemail(Provider::Eudoramail)
            }
            "check_for_fake_aol_relay_in_rcvd" => Test::FakeAolRelay,
            other => return Err(other.to_string()),
        })
    };
    known(name).then(test)
}

/// A pattern over ASCII marks. Built without Unicode classes (`\\S`, `\\w`), the trace
/// tests' two dozen patterns compile in a fraction of the time: each process builds them
/// when the first message from such a provider comes.
struct Pattern(regex::bytes::Regex);

impl Pattern {
    fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text.as_bytes())
    }

    /// What the first group matched.
    fn group<'t>(&self, text: &'t str) -> Option<&'t str> {
        let group = self.0.captures(text.as_bytes())?.get(1)?;
        text.get(group.range())
    }
}

fn re(pattern: &str) -> Pattern {
    let compiled = regex::bytes::RegexBuilder::new(pattern)
        .unicode(false)
        .build()
        .expect("a valid pattern");
    Pattern(compiled)
}

/// An IPv4 or IPv6 address, as text in a trace.
const IP: &str = r"(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F]*:[0-9a-fA-F:.]+)";

/// Fields where `%` and capitals are an address's or an identifier's own.
const TEMPLATE_EXEMPT: &[&str] = &[
    "x-vms-to",
    "x-uidl",
    "x-face",
    "to",
    "cc",
    "from",
    "subject",
    "references",
    "in-reply-to",
    "message-id",
    "x-message-id",
    "resent-message-id",
    "x-original-message-id",
];
static RATWARE_ID: LazyLock<Pattern> = LazyLock::new(|| re(r"<[A-Z]{28}\.([^>]+?)>"));
static OUTLOOK_ID: LazyLock<Pattern> =
    LazyLock::new(|| re(r"^<[0-9a-f]{4}([0-9a-f]{8})\$[0-9a-f]{8}\$[0-9a-f]{8}@"));
static SRS: LazyLock<Pattern> = LazyLock::new(|| re(r"(?i)^srs\d[=+-]"));

static IP_IN: LazyLock<Pattern> = LazyLock::new(|| re(IP));
static HOTMAIL_PICKUP: LazyLock<Pattern> =
    LazyLock::new(|| re(r"from mail pickup service by hotmail\.com with Microsoft SMTPSVC;"));
/// Hotmail's and Outlook.com's own servers in a trace, each with the header it adds
/// beside (`true`: X-Originating-IP names an address; `false`: X-OriginatorOrg is theirs).
static HOTMAIL_PATHS: LazyLock<Vec<(Pattern, bool)>> = LazyLock::new(|| {
    vec![
        (
            re(r"from (?:\S+\.)?hotmail.com \(\S+\.hotmail(?:\.msn)?\.com[ )]"),
            true,
        ),
        (
            re(
                r"from \S+\.outbound\.protection\.outlook\.com \(\S+\.outbound\.protection\.outlook\.com[ )]",
            ),
            false,
        ),
        (
            re(&format!(
                r"from \S+\.(?:eur|nam)prd\d+\.prod\.outlook\.com \({IP}\)"
            )),
            false,
        ),
        (re(&format!(r"from \S+\.hotmail.com \(\[{IP}\][ ):]")), true),
        (
            re(r"from \S+ by \S+\.hotmail(?:\.msn)?\.com with HTTP;"),
            true,
        ),
        (re(r"from \[66\.218\.\S+\] by \S+\.yahoo\.com"), true),
    ]
});
static HOTMAIL_SENDER: LazyLock<Pattern> =
    LazyLock::new(|| re(r"(?:from |HELO |helo=)\S*hotmail\.com\b"));
static YAHOO_PATHS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        re(r"by web\S+\.mail\S*\.yahoo\.com via HTTP"),
        re(r"by sonic\S+\.consmr\.mail\S*\.yahoo\.com with HTTP"),
        re(r"by smtp\S+\.yahoo\.com with SMTP"),
        re(&format!(
            r"from \[{IP}\] by \S+\.(?:groups|scd|dcn)\.yahoo\.com with NNFMP"
        )),
        re(r"by \w+\.\w+\.yahoo\.com \(\d+\.\d+\.\d+/\d+\.\d+\.\d+\)(?: with ESMTP)? id \w+"),
    ]
});
static YAHOO_BULK: LazyLock<Pattern> =
    LazyLock::new(|| re(r"\bmailer\d+\.bulk\.scd\.yahoo\.com\b"));
static GMAIL_X_RECEIVED: LazyLock<Pattern> =
    LazyLock::new(|| re(r"by (?:10\.\S+|2002:a\d\d:\w+:\S+) with SMTP id \S+"));
static GMAIL_SUBMISSION: LazyLock<Pattern> =
    LazyLock::new(|| re(r"by smtp\.googlemail\.com with ESMTPSA id \S+"));
static JUNO_RELAY: LazyLock<Pattern> =
    LazyLock::new(|| re(&format!(r"from.*\b(?:juno|untd)\.com.*[\[(]{IP}[\])].*by")));
static JUNO_COOKIE: LazyLock<Pattern> = LazyLock::new(|| re(r" cookie\.(?:juno|untd)\.com "));
static EUDORAMAIL_RELAY: LazyLock<Pattern> = LazyLock::new(|| re(r"by \S*whowhere.com;"));
static AOL_RELAY_NAME: LazyLock<Pattern> = LazyLock::new(|| re(r"(?i) rly-[a-z][a-z]\d\d\."));
static AOL_RELAY_MARK: LazyLock<Pattern> =
    LazyLock::new(|| re(r"/AOL-\d+\.\d+\.\d+\)|ESMTP id (?:RELAY|MAILRELAY|MAILIN)"));
static EZMLM_LIST: LazyLock<Pattern> = LazyLock::new(|| re(r"(?m)^contact \S+@\S+; run by ezmlm$"));
static EZMLM_DELIVERED: LazyLock<Pattern> = LazyLock::new(|| re(r"(?m)^mailing list \S+@\S+"));
static EZMLM_RECEIVED: LazyLock<Pattern> =
    LazyLock::new(|| re(r"qmail \d+ invoked (?:from network|by .{3,20})\); \d+ ... \d+"));
static MSN_GROUPS: LazyLock<Pattern> =
    LazyLock::new(|| re(r"from groups\.msn\.com \(\S+\.msn\.com "));

/// `%` and two capitals (or `_`, `-`): a mail merge's placeholder, `%FIRST_NAME`. Not a
/// URL's escape of one byte, `%EF` of `%EF%BB%BF` (two hex letters and no more), which
/// SpamAssassin's test takes for one.
fn has_placeholder(value: &str) -> bool {
    let bytes = value.as_bytes();
    let name_byte = |at: usize| matches!(bytes.get(at), Some(b'A'..=b'Z' | b'_' | b'-'));
    let hex_letter = |at: usize| matches!(bytes.get(at), Some(b'A'..=b'F'));
    memchr::memchr_iter(b'%', bytes).any(|at| {
        matches!(bytes.get(at + 1), Some(b'A'..=b'Z'))
            && name_byte(at + 2)
            && !(hex_letter(at + 1) && hex_letter(at + 2) && !name_byte(at + 3))
    })
}

/// A field's values, one a line; empty where it is absent.
fn field(msg: &Message, name: &str) -> String {
    msg.header_values(name).collect::<Vec<_>>().join("\n")
}

/// The first address of From, lowercase, empty where there is none: read through `seen`,
/// as the free mail tests read it.
fn from_address<'s>(msg: &Message, seen: &'s mut Seen) -> &'s str {
    seen.addresses(&FROM, msg)
        .first()
        .map_or("", String::as_str)
}

/// Whether `address` (lowercase) is at `domain` or a host under it.
fn at_domain(address: &str, domain: &str) -> bool {
    address
        .rsplit_once('@')
        .is_some_and(|(_, host)| is_or_under(host, domain))
}

/// Every white space run made one space: the trace as one line.
fn collapsed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The recipients as SpamAssassin lists them for its recipient tests: To and Cc (and Bcc
/// where those name fewer than five), a repeat of the one before left out, at most 256.
/// Read through `seen`, which the list tests share.
fn recipients(msg: &Message, seen: &mut Seen) -> Vec<String> {
    // Most mail names one or two: neither test holds for fewer than five, and reading
    // address lists is most of what they cost.
    let at_signs: usize = (["to", "cc", "bcc"].iter())
        .flat_map(|name| msg.header_values(name))
        .map(|value| memchr::memchr_iter(b'@', value.as_bytes()).count())
        .sum();
    if at_signs < 5 {
        return Vec::new();
    }
    let mut all = seen.addresses(&TO, msg).to_vec();
    if all.len() < 5 {
        all.extend_from_slice(seen.addresses(&BCC, msg));
    }
    all.dedup();
    all.truncate(256);
    all
}

static BCC: LazyLock<Target> =
    LazyLock::new(|| Target::parse("Bcc:addrs").expect("a valid target"));

/// How alike the recipients are: for each pair, one for the same first two characters, one
/// for domains that differ yet start alike (`ab.example`, `ab.example.net`), over the
/// pairs; none for fewer than five.
fn similarity(recipients: &[String]) -> Option<f64> {
    if recipients.len() < 5 {
        return None;
    }
    let keys: Vec<(&str, &str, &str)> = (recipients.iter())
        .map(|a| {
            let domain = a.split_once('@').map_or("", |(_, d)| d);
            (prefix(a), domain, prefix(domain))
        })
        .collect();
    let (mut hits, mut pairs) = (0usize, 0usize);
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            hits += usize::from(a.0 == b.0);
            hits += usize::from(a.2 == b.2 && a.1 != b.1);
            pairs += 1;
        }
    }
    Some(hits as f64 / pairs as f64)
}

/// The first two characters.
fn prefix(s: &str) -> &str {
    s.char_indices().nth(2).map_or(s, |(at, _)| &s[..at])
}

/// The high half of a Windows FILETIME (100 ns since 1601) for a Unix time, as Outlook
/// Express writes it into its Message-IDs.
fn filetime_high(unix: i64) -> f64 {
    (unix as f64 * 10_000_000.0 / 4_294_967_296.0 + 116_444_736_000_000_000.0 / 4_294_967_296.0)
        .floor()
}

impl Test {
    pub(super) fn holds(&self, facts: &mut Facts) -> bool {
        let msg = facts.msg;
        match self {
            Test::UnresolvedTemplate => msg.headers.iter().any(|h| {
                has_placeholder(&h.value)
                    && !(TEMPLATE_EXEMPT.iter()).any(|e| h.name.eq_ignore_ascii_case(e))
            }),
            Test::RatwareNameId => {
                let ids = Target::MessageId.text(msg).unwrap_or_default();
                let Some(address) = RATWARE_ID.group(&ids) else {
                    return false;
                };
                // `"Name" <address>`: the same address, behind a quoted display name.
                let from = field(msg, "from");
                let bracketed = format!("<{address}>");
                from.match_indices(&bracketed).any(|(at, _)| {
                    let name = from[..at].trim_end().strip_suffix('"');
                    name.and_then(|n| n.rfind('"').map(|q| q + 1 < n.len()))
                        .unwrap_or(false)
                })
            }
            Test::RatwareEnvelopeFrom => ratware_envelope_from(msg),
            Test::OutlookMessageId => outlook_message_id(msg, facts.dates()),
            Test::SortedRecipients => {
                let all = recipients(msg, &mut facts.lists);
                all.len() >= 7 && all.is_sorted()
            }
            Test::SimilarRecipients(min, max) => similarity(&recipients(msg, &mut facts.lists))
                .is_some_and(|s| s >= *min && s < *max),
            Test::GatedThroughReceivedRemover => gated(msg),
            Test::NoHotmailTrace => {
                at_domain(from_address(msg, &mut facts.lists), "hotmail.com")
                    && hotmail(msg) == Some(false)
            }
            Test::ForgedHotmailTrace => hotmail(msg) == Some(true),
            Test::ForgedFreemail(Provider::Yahoo) => {
                // What is asked of From, read before the trace takes the shared cache.
                let from = from_address(msg, &mut facts.lists);
                let (yahoo, bulk) = (
                    at_domain(from, "yahoo.com"),
                    from.ends_with("@reply.yahoo.com"),
                );
                yahoo && forged_yahoo(msg, bulk, &mut facts.lists)
            }
            Test::ForgedFreemail(Provider::Gmail) => {
                forged_gmail(msg, from_address(msg, &mut facts.lists))
            }
            Test::ForgedFreemail(Provider::Juno) => {
                forged_juno(msg, from_address(msg, &mut facts.lists))
            }
            Test::ForgedFreemail(Provider::Eudoramail) => {
                at_domain(from_address(msg, &mut facts.lists), "eudoramail.com")
                    && !gated(msg)
                    && !(EUDORAMAIL_RELAY.is_match(&collapsed(&field(msg, "received")))
                        && IP_IN.is_match(&field(msg, "x-sender-ip")))
            }
            Test::FakeAolRelay => {
                let trace = collapsed(&field(msg, "received"));
                AOL_RELAY_NAME.is_match(&trace) && !AOL_RELAY_MARK.is_match(&trace)
            }
        }
    }
}

/// An Outlook Express Message-ID whose time (a FILETIME's high half) is neither `dates`'
/// (the Date header's, the newest Received line's). A time that does not parse is 1970, as
/// in SpamAssassin: far from any stamp.
fn outlook_message_id(msg: &Message, (sent, received): (Option<i64>, Option<i64>)) -> bool {
    let ids = Target::MessageId.text(msg).unwrap_or_default();
    let Some(stamp) = OUTLOOK_ID
        .group(&ids)
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
    else {
        return false;
    };
    let near =
        |date: Option<i64>| (f64::from(stamp) - filetime_high(date.unwrap_or(0))).abs() < 250.0;
    !near(sent) && !near(received)
}

fn forged_gmail(msg: &Message, from: &str) -> bool {
    if !at_domain(from, "gmail.com") {
        return false;
    }
    // Gmail's own submission fields run long; a forger's copies seldom do.
    let long = |name: &str| msg.header_values(name).map(|v| v.len() + 1).sum::<usize>() >= 60;
    let by_google = GMAIL_X_RECEIVED.is_match(&field(msg, "x-received"))
        || GMAIL_SUBMISSION.is_match(&field(msg, "received"))
        || (long("x-gm-message-state") && long("x-google-smtp-source"));
    !by_google
}

fn ratware_envelope_from(msg: &Message) -> bool {
    let (Some(to), Some(sender)) = (
        msg.header("to").and_then(Target::address),
        envelope_sender(msg),
    ) else {
        return false;
    };
    if SRS.is_match(&sender) {
        return false;
    }
    let to = to.to_ascii_lowercase();
    let Some((user, domain)) =
        (to.split_once('@')).map(|(u, d)| (u, base_domain(d.trim_end_matches('.'))))
    else {
        return false;
    };
    if user.is_empty() || !domain.contains('.') {
        return false;
    }
    // `DOMAIN?USER@`, the domain starting a word.
    let word = |c: char| c.is_alphanumeric() || c == '_';
    sender.match_indices(&domain).any(|(at, _)| {
        let starts_word = !sender[..at].chars().next_back().is_some_and(word);
        let mut rest = sender[at + domain.len()..].chars();
        starts_word && rest.next().is_some() && rest.as_str().starts_with(&format!("{user}@"))
    })
}

/// Whether the trace cannot be judged: there is none, or ezmlm or MSN Groups rewrote it.
fn gated(msg: &Message) -> bool {
    if msg.header("received").is_none() {
        return true;
    }
    let received = field(msg, "received");
    let ezmlm = EZMLM_LIST.is_match(&field(msg, "mailing-list"))
        && EZMLM_DELIVERED.is_match(&field(msg, "delivered-to"))
        && EZMLM_RECEIVED.is_match(&received);
    ezmlm || MSN_GROUPS.is_match(&received)
}

/// What the trace says of Hotmail: `Some(true)` it names hotmail.com as a sender without
/// Hotmail's marks, `Some(false)` it does not name it at all, `None` it shows Hotmail's
/// own path (or cannot be judged).
fn hotmail(msg: &Message) -> Option<bool> {
    if gated(msg) {
        return None;
    }
    let trace = collapsed(&field(msg, "received"));
    // Every mark below names one of these: most traces hold none, and need no pattern.
    if !["hotmail", "outlook.com", "66.218."]
        .iter()
        .any(|mark| trace.contains(mark))
    {
        return Some(false);
    }
    if HOTMAIL_PICKUP.is_match(&trace) {
        return None;
    }
    let originating_ip = IP_IN.is_match(&field(msg, "x-originating-ip"));
    let org = field(msg, "x-originatororg");
    let own_org = org.contains("hotmail.com") || org.contains("msonline-outlook");
    let own_path = HOTMAIL_PATHS.iter().any(|(path, by_ip)| {
        path.is_match(&trace) && if *by_ip { originating_ip } else { own_org }
    });
    if own_path {
        return None;
    }
    Some(HOTMAIL_SENDER.is_match(&trace))
}

/// For mail From yahoo.com (`bulk_sender`: from Yahoo's reply address): whether no Yahoo
/// server handed it on. The trace's relays are read through `seen`, which the list tests
/// share, and only for such mail: reading them was a tenth of what spamnb's rules cost.
fn forged_yahoo(msg: &Message, bulk_sender: bool, seen: &mut Seen) -> bool {
    if gated(msg) {
        return false;
    }
    // A message Yahoo resent carries its own trace in X-Received.
    let resent = msg
        .header("resent-from")
        .is_some_and(|v| !v.trim().is_empty())
        && msg
            .header("resent-to")
            .is_some_and(|v| !v.trim().is_empty());
    let x_received = field(msg, "x-received");
    let trace = if resent && !x_received.is_empty() {
        collapsed(&x_received)
    } else {
        collapsed(&field(msg, "received"))
    };
    // The relays one's own network handed on (private addresses, with no trusted_networks
    // named) and the first one outside it: a Yahoo server among them is Yahoo's path.
    let mut by_yahoo = false;
    for hop in seen
        .trace(msg)
        .iter()
        .flatten()
        .filter(|h| h.address.is_some())
    {
        by_yahoo |= hop
            .name
            .as_deref()
            .is_some_and(|n| n.ends_with(".yahoo.com"));
        if hop.address.is_some_and(|ip| !is_private(ip)) {
            break;
        }
    }
    if by_yahoo || YAHOO_PATHS.iter().any(|p| p.is_match(&trace)) {
        return false;
    }
    !(YAHOO_BULK.is_match(&trace) && bulk_sender)
}

fn forged_juno(msg: &Message, from: &str) -> bool {
    if !at_domain(from, "juno.com") || gated(msg) {
        return false;
    }
    // Juno's servers add X-Originating-IP to all they send (SpamAssassin's test ends the
    // same way without one, through a longer path).
    let originating = field(msg, "x-originating-ip");
    if originating.trim().is_empty() {
        return true;
    }
    let received: Vec<&str> = msg.header_values("received").collect();
    let by_juno = received.iter().any(|r| JUNO_RELAY.is_match(r))
        || JUNO_COOKIE.is_match(&collapsed(&received.join("\n")));
    !by_juno || !field(msg, "x-mailer").contains("Juno ")
}
