//! SpamAssassin's RelayEval tests, where they need no DNS: what the trace of `Received:`
//! lines says about the relays outside one's own network (`trusted_networks`).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use super::lists::Seen;
use super::relay::{Hop, TrustedNetworks, is_or_under, is_private};
use super::target::envelope_sender;
use crate::domain::base_domain;
use crate::message::Message;

#[derive(Debug, Clone)]
pub enum Test {
    /// `check_all_trusted()`: the trace names relays, all of them trusted.
    AllTrusted(Arc<TrustedNetworks>),
    /// `check_no_relays()`: the trace names no relay (the message never went over SMTP).
    NoRelays,
    /// `helo_ip_mismatch()`: an untrusted relay greeted as a public IPv4 address outside
    /// the /24 of its own.
    HeloIpMismatch(Arc<TrustedNetworks>),
    /// `check_for_no_rdns_dotcom_helo()`: an untrusted relay with no reverse DNS greeted
    /// as a big free mail provider, which always has it.
    NoRdnsDotcomHelo(Arc<TrustedNetworks>),
    /// `check_for_forged_received_trail()`: twice or more, the server that took the mail
    /// is not the relay that sent it on in the next line up.
    ForgedReceivedTrail(Arc<TrustedNetworks>),
    /// `check_relays_unparseable()`: a line that records a client (`from … (…)`) without
    /// its address or the server that wrote it.
    RelaysUnparseable,
    /// `check_mailfrom_matches_rcvd()`: the envelope sender's domain is the domain of the
    /// relay it came from.
    MailfromMatchesRcvd(Arc<TrustedNetworks>),
}

const NAMES: &[&str] = &[
    "check_all_trusted",
    "check_no_relays",
    "helo_ip_mismatch",
    "check_for_no_rdns_dotcom_helo",
    "check_for_forged_received_trail",
    "check_relays_unparseable",
    "check_mailfrom_matches_rcvd",
];

pub fn known(name: &str) -> bool {
    NAMES.contains(&name)
}

/// `name()` if it is a test of this module.
pub fn compile(name: &str, trusted: &Arc<TrustedNetworks>) -> Option<Test> {
    let trusted = trusted.clone();
    Some(match name {
        "check_all_trusted" => Test::AllTrusted(trusted),
        "check_no_relays" => Test::NoRelays,
        "helo_ip_mismatch" => Test::HeloIpMismatch(trusted),
        "check_for_no_rdns_dotcom_helo" => Test::NoRdnsDotcomHelo(trusted),
        "check_for_forged_received_trail" => Test::ForgedReceivedTrail(trusted),
        "check_relays_unparseable" => Test::RelaysUnparseable,
        "check_mailfrom_matches_rcvd" => Test::MailfromMatchesRcvd(trusted),
        _ => return None,
    })
}

/// The providers whose own servers always have reverse DNS, as SpamAssassin lists them.
const DOTCOMS: &[&str] = &[
    "lycos.com",
    "lycos.co.uk",
    "hotmail.com",
    "localhost.com",
    "excite.com",
    "caramail.com",
    "cs.com",
    "aol.com",
    "msn.com",
    "yahoo.com",
    "drizzle.com",
];

/// The domain a trail's link is compared by: the last two labels (three under a two-letter
/// country code other than ie, fr and de, which register names at the second level); an
/// address as it is.
fn trail_domain(host: &str) -> &str {
    if !host.bytes().any(|b| b.is_ascii_alphabetic()) {
        return host;
    }
    let labels = host.split('.').count();
    let last = host.rsplit('.').next().unwrap_or_default();
    let keep = if labels >= 2 && (last.len() >= 3 || ["ie", "fr", "de"].contains(&last)) {
        2
    } else if labels >= 3 {
        3
    } else {
        return host;
    };
    crate::domain::last_labels(host, keep)
}

/// A dotted host name, with at least two characters before its last dot.
fn is_dotted_host(host: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    host.rfind('.').is_some_and(|dot| dot >= 2)
        && host.starts_with(word)
        && host.ends_with(word)
        && host.chars().all(|c| word(c) || c == '.' || c == '-')
}

/// How many links of the untrusted trail (newest first) break: the server that took the
/// mail in one line is not the relay the line above names as its sender.
fn broken_links(hops: &[&Hop]) -> usize {
    let mut senders: Vec<Option<&str>> = (hops.iter())
        .map(|h| h.name.as_deref().map(trail_domain))
        .collect();
    let mut broken = 0;
    for (i, hop) in hops.iter().enumerate() {
        let Some(by) = hop
            .by
            .as_deref()
            .map(trail_domain)
            .filter(|b| is_dotted_host(b))
        else {
            continue;
        };
        let loopback = hop.address == Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        if loopback && senders[i] == Some("localhost.localdomain") {
            senders[i] = None;
        }
        let Some(sender) = i.checked_sub(1).and_then(|up| senders[up]) else {
            continue;
        };
        // Hotmail's servers hand mail to MSN's.
        let hotmail = by == "msn.com" && sender == "hotmail.com";
        if is_dotted_host(sender) && by != sender && !hotmail {
            broken += 1;
        }
    }
    broken
}

/// Whether a `Received:` line (what the trace read of it) records a client but not its
/// address, or not the server that wrote it.
fn unparseable(hop: &Hop) -> bool {
    hop.records_client && (hop.address.is_none() || hop.by.is_none())
}

impl Test {
    pub(super) fn holds(&self, msg: &Message, seen: &mut Seen) -> bool {
        match self {
            Test::AllTrusted(trusted) => {
                let mut relays = (seen.trace(msg).iter())
                    .flatten()
                    .filter_map(|hop| hop.address)
                    .peekable();
                relays.peek().is_some() && relays.all(|ip| trusted.trusts(ip))
            }
            Test::NoRelays => !(seen.trace(msg).iter())
                .flatten()
                .any(|hop| hop.address.is_some()),
            Test::HeloIpMismatch(trusted) => trusted.untrusted(seen.trace(msg)).any(|hop| {
                let helo = hop.helo.as_deref().and_then(|h| h.parse::<Ipv4Addr>().ok());
                match (helo, hop.address) {
                    (Some(helo), Some(IpAddr::V4(ip))) => {
                        !is_private(helo.into()) && helo.octets()[..3] != ip.octets()[..3]
                    }
                    _ => false,
                }
            }),
            Test::NoRdnsDotcomHelo(trusted) => trusted.untrusted(seen.trace(msg)).any(|hop| {
                let big = |helo: &str| DOTCOMS.iter().any(|d| is_or_under(helo, d));
                hop.name.is_none()
                    && hop.address.is_some_and(|ip| !is_private(ip))
                    && hop.helo.as_deref().is_some_and(big)
            }),
            Test::ForgedReceivedTrail(trusted) => {
                let hops: Vec<&Hop> = trusted.untrusted(seen.trace(msg)).collect();
                broken_links(&hops) > 1
            }
            Test::RelaysUnparseable => seen.trace(msg).iter().flatten().any(unparseable),
            Test::MailfromMatchesRcvd(trusted) => {
                let Some(domain) = envelope_sender(msg)
                    .and_then(|s| s.rsplit_once('@').map(|(_, d)| d.to_string()))
                    .filter(|d| d.contains('.'))
                else {
                    return false;
                };
                let domain = base_domain(domain.trim_end_matches('.'));
                (trusted.relays_to_check(seen.trace(msg)).iter())
                    .filter_map(|hop| hop.name.as_deref())
                    .any(|name| base_domain(name) == domain)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trail_domains_keep_what_a_registry_gives_out() {
        for (host, want) in [
            ("mx1.mail.example.com", "example.com"),
            ("mx.example.co.uk", "example.co.uk"),
            ("mx.example.de", "example.de"),
            ("example.com", "example.com"),
            ("localhost", "localhost"),
            ("192.0.2.1", "192.0.2.1"),
            ("a.b", "a.b"),
        ] {
            assert_eq!(trail_domain(host), want, "{host}");
        }
    }

    #[test]
    fn a_trail_breaks_where_the_taker_is_not_the_next_sender() {
        let hop = |name: &str, by: &str| Hop {
            name: Some(name.to_string()),
            address: Some("198.51.100.7".parse().unwrap()),
            helo: None,
            by: Some(by.to_string()),
            records_client: true,
        };
        // Newest first: mx.example.net took it from relay.isp.example, which took it
        // from the sender's host.
        let whole = [
            hop("relay.isp.example", "mx.example.net"),
            hop("host.sender.example", "smtp.isp.example"),
            hop("pc.sender.example", "out.sender.example"),
        ];
        assert_eq!(broken_links(&whole.iter().collect::<Vec<_>>()), 0);
        let forged = [
            hop("relay.isp.example", "mx.example.net"),
            hop("host.sender.example", "smtp.other.example"),
            hop("pc.sender.example", "out.third.example"),
        ];
        assert_eq!(broken_links(&forged.iter().collect::<Vec<_>>()), 2);
    }

    #[test]
    fn unparseable_lines_record_a_client_without_its_address() {
        for (line, want) in [
            (
                "from h (mail.example.org [192.0.2.1]) by mx.example.net",
                false,
            ),
            ("from h (mail.example.org) by mx.example.net", true),
            ("from h (mail.example.org [192.0.2.1])", true),
            ("from userid 1000 by mx.example.net", false),
            (
                "from localhost (ann@localhost) by mx.example.net (8.11.6/8.11.6)",
                false,
            ),
            (
                "from pc.corp.example (unverified) by gw.corp.example",
                false,
            ),
            ("by mx.example.net with LMTP", false),
            ("(qmail 123 invoked by uid 0); 1 Dec 2026", false),
            ("from h (h) by mx with local for <a@example.org>", false),
            // A comment inside a comment: each is read to the next parenthesis.
            ("from h (a@b (mail.example.org)) by mx.example.net", true),
            (
                "from h (unverified (ann@localhost)) by mx.example.net",
                false,
            ),
            (
                "from h (mail.example.org (192.0.2.1)) by mx.example.net",
                false,
            ),
        ] {
            let hop = Hop::of_received(line);
            assert_eq!(hop.as_ref().is_some_and(unparseable), want, "{line}");
        }
    }
}
