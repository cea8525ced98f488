//! The relay a message came from, as the MTA that took it recorded it, the relays
//! `welcomelist_from_rcvd` entries ask for, and one's own (`trusted_networks`).

use std::net::IpAddr;

/// The relay a `welcomelist_from_rcvd` entry asks for: a host name or a domain above it,
/// or a network.
#[derive(Debug, Clone, PartialEq)]
pub enum Relay {
    Host(String),
    Net(IpAddr, u8),
}

impl Relay {
    /// `mail.example.org`, `example.org`, `[192.0.2.1]`, `[192.0.2.0/24]`, `[192.0.2.0]/24`,
    /// `[192.0.2]` (an IPv4 address cut at a byte: the network of the bytes given),
    /// `[2001:db8::/32]`.
    pub(super) fn parse(text: &str) -> Option<Relay> {
        let Some(bracketed) = text.strip_prefix('[') else {
            let host = text.trim_end_matches('.').to_ascii_lowercase();
            return is_host_name(&host).then_some(Relay::Host(host));
        };
        let (inside, after) = bracketed.split_once(']')?;
        let (address, length) = match (inside.split_once('/'), after.strip_prefix('/')) {
            (Some((address, length)), _) if after.is_empty() => (address, Some(length)),
            (None, Some(length)) => (inside, Some(length)),
            (None, None) if after.is_empty() => (inside, None),
            _ => return None,
        };
        let length = length.map(str::parse::<u8>).transpose().ok()?;
        if let Ok(ip) = address.parse::<IpAddr>() {
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
    pub(super) fn matches(&self, host: Option<&str>, ip: Option<IpAddr>) -> bool {
        match self {
            Relay::Host(want) => host.is_some_and(|h| is_or_under(h, want)),
            Relay::Net(net, length) => ip.is_some_and(|ip| in_network(ip, *net, *length)),
        }
    }
}

/// One `Received:` line's relay: the name its server looked up (none for no reverse DNS),
/// its address, the name it greeted with, and the server that wrote the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// Lowercase, a last dot taken off.
    pub name: Option<String>,
    pub address: Option<IpAddr>,
    /// Lowercase, brackets and a last dot taken off.
    pub helo: Option<String>,
    /// The receiving server's name after `by`, lowercase, a last dot taken off.
    pub by: Option<String>,
    /// Whether the line records the client in a comment (`from HELO (NAME …)`), as a
    /// hand-over from another host does. Internal hand-overs record none: no comment
    /// (`from userid 1000 by …`), Sendmail's local sender (`from localhost
    /// (user@localhost)`), an unverified name, `with local`.
    pub records_client: bool,
}

/// The longest text between brackets read as an address: `IPv6:` and 45 characters.
const MAX_BRACKETED: usize = 64;

/// The parenthesized comments of `text`, each to the next `)` (a comment inside a
/// comment is read on its own too), and where each starts. One pass from the end: a
/// forged line of `((((` costs no more than its length.
fn comments(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut close = text.len();
    for (at, b) in text.bytes().enumerate().rev() {
        match b {
            b')' => close = at,
            b'(' => out.push((at, &text[at + 1..close])),
            _ => {}
        }
    }
    out.reverse();
    out
}

/// Each `[address]` of `text` that is not a HELO (`helo=[…]`), and where its `[` is: read
/// to the `]` or the end of its comment, and never past an address's length, so that
/// `[[[[` costs its length.
fn bracketed(text: &str) -> impl Iterator<Item = (usize, IpAddr)> + '_ {
    (memchr::memchr_iter(b'[', text.as_bytes()))
        .filter(|&at| !text[..at].ends_with("helo="))
        .filter_map(|at| {
            let rest = &text.as_bytes()[at + 1..];
            let near = &rest[..rest.len().min(MAX_BRACKETED + 1)];
            let end = match memchr::memchr2(b']', b')', near) {
                Some(end) => end,
                None if rest.len() <= MAX_BRACKETED => rest.len(),
                None => return None,
            };
            let inside = std::str::from_utf8(&rest[..end]).ok()?;
            Some((at, inside.trim_start_matches("IPv6:").parse().ok()?))
        })
}

impl Hop {
    /// The relay that handed the mail to the server that wrote `received` (one Received:
    /// field); none for a line that names none (local submission, LMTP).
    /// Postfix and Sendmail write `from HELO (NAME [ADDRESS])`, Exim `from NAME ([ADDRESS]
    /// helo=HELO)` or `from [ADDRESS] (helo=HELO)`, qmail `from NAME (HELO HELO)
    /// (ADDRESS)`, Exchange `from HELO (ADDRESS)`; a name of `unknown` is none. What the
    /// client chose comes first and the server's own comment last: the address is read
    /// from the last comment that holds one, never from a HELO (`from [192.0.2.1]
    /// (unknown [ADDRESS])`, qmail's `(HELO [192.0.2.1])`).
    pub fn of_received(received: &str) -> Option<Hop> {
        let line = received.trim_start();
        let from = line.strip_prefix("from ")?;
        let (from, after) = from.split_once(" by ").unwrap_or((from, ""));
        let mut comments = comments(from);
        let records_client = !line.contains("with local for")
            && (comments.iter()).any(|&(_, comment)| is_client_record(comment));
        // qmail's record of the greeting names no relay.
        comments.retain(|(_, c)| !c.starts_with("HELO ") && !c.starts_with("helo "));
        // Comments overlap (each runs to the next `)`): the `[address]`es are read once,
        // and each comment takes the first that starts inside it.
        let addresses: Vec<(usize, IpAddr)> = bracketed(from).collect();
        let in_comment = (comments.iter().rev()).find_map(|&(at, c)| {
            let first = addresses.partition_point(|&(a, _)| a <= at);
            (addresses.get(first))
                .filter(|&&(a, _)| a <= at + c.len())
                .map(|&(_, ip)| (at, c, ip))
        });
        let bare = || {
            (comments.iter().rev())
                .filter(|(_, c)| c.len() <= MAX_BRACKETED)
                .find_map(|&(_, c)| c.trim().parse::<IpAddr>().ok())
        };
        // Outside the comments, Exim without reverse DNS writes `from [ADDRESS]
        // (helo=…)`, others `from HELO [ADDRESS]`; qmail writes `from ADDRESS (HELO …)`.
        let outside = || -> String {
            (from.split('(').enumerate())
                .map(|(i, piece)| match i {
                    0 => piece,
                    _ => piece.split_once(')').map_or("", |(_, rest)| rest),
                })
                .collect()
        };
        let qmail = || {
            let (word, rest) = from.split_once(' ')?;
            rest.starts_with("(HELO ").then(|| word.parse().ok())?
        };
        let address = (in_comment.map(|(_, _, ip)| ip))
            .or_else(bare)
            .or_else(|| bracketed(&outside()).next().map(|(_, ip)| ip))
            .or_else(qmail);
        // Only a name the server looked up: never the HELO name the client chose.
        let name = in_comment.and_then(|(at, comment, _)| {
            let (name, _) = comment.split_once('[')?;
            Some(match name.trim() {
                "" => from[..at].trim(),
                name => name,
            })
        });
        let name = name.map(|n| n.trim_end_matches('.').to_ascii_lowercase());
        let name = name.filter(|n| {
            n != "unknown" && n.contains('.') && n.parse::<IpAddr>().is_err() && is_host_name(n)
        });
        // Exim's `helo=NAME`, qmail's `(HELO NAME)`, else the name after `from`.
        let helo = match (from.split_once("helo="), from.split_once("(HELO ")) {
            (Some((_, rest)), _) | (None, Some((_, rest))) => rest.split([')', ' ']).next(),
            (None, None) => from.split([' ', '(']).next(),
        };
        let helo = helo.map(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .trim_end_matches('.')
        });
        let helo = helo.filter(|h| !h.is_empty()).map(str::to_ascii_lowercase);
        let by = (after.split([' ', ';', '(', '\t', '\n']).next())
            .map(|b| b.trim_end_matches('.').to_ascii_lowercase())
            .filter(|b| !b.is_empty());
        Some(Hop {
            name,
            address,
            helo,
            by,
            records_client,
        })
    }
}

/// Whether a comment of a Received line's `from` part records the client: not empty, not a
/// local sender (`user@localhost`), not `unverified`, not the greeting. A comment with one
/// inside it is read to the inner one, which is read on its own.
fn is_client_record(comment: &str) -> bool {
    let c = comment.split('(').next().unwrap_or_default().trim();
    !c.is_empty()
        && !c.contains('@')
        && c != "unverified"
        && !c.starts_with("HELO ")
        && !c.starts_with("helo=")
}

/// A message's trace, newest first: each `Received:` line's relay, none where a line
/// names none. Read once a message, for every test that reads it.
pub fn trace<'r>(received: impl Iterator<Item = &'r str>) -> Vec<Option<Hop>> {
    received.map(Hop::of_received).collect()
}

/// `trusted_networks`: the networks of one's own relays, whose `Received:` lines are
/// believed, so that the relay a message came from is the newest one outside them. For an
/// address, the most specific entry that holds it decides, and a `!` entry says no (`10.
/// !10.1.2.3`: all of 10/8 but one host). Unlike SpamAssassin, spamnb does not trust
/// loopback unasked: any local user can send over it, with a trace of their making; a
/// content filter on the same host that hands mail back over it is named like any relay.
#[derive(Debug, Clone, Default)]
pub struct TrustedNetworks(Vec<(IpAddr, u8, bool)>);

impl TrustedNetworks {
    /// Adds the entries of a `trusted_networks` line: `192.0.2.0/24`, `192.0.2.1`,
    /// `10.` or `10.1` (the network of the bytes given), `[2001:db8::]/32`, `!192.0.2.9`.
    pub(super) fn add(&mut self, entries: &str) -> Result<(), String> {
        for entry in entries.split_whitespace() {
            let (excluded, network) = match entry.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, entry),
            };
            let bracketed = if network.starts_with('[') {
                network.to_string()
            } else {
                match network.split_once('/') {
                    Some((address, length)) => format!("[{address}/{length}]"),
                    None => format!("[{}]", network.trim_end_matches('.')),
                }
            };
            match Relay::parse(&bracketed) {
                Some(Relay::Net(net, length)) => self.0.push((net, length, !excluded)),
                _ => return Err(format!("trusted_networks: {entry:?} is no network")),
            }
        }
        Ok(())
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    pub(super) fn trusts(&self, ip: IpAddr) -> bool {
        (self.0.iter())
            .filter(|&&(net, length, _)| in_network(ip, net, length))
            // The first of the longest: `10. !10.1.2.3` excludes 10.1.2.3.
            .rev()
            .max_by_key(|&&(_, length, _)| length)
            .is_some_and(|&(_, _, trusted)| trusted)
    }

    fn trusts_hop(&self, hop: &Hop) -> bool {
        hop.address.is_some_and(|ip| self.trusts(ip))
    }

    /// The relays of `trace` a `welcomelist_from_rcvd` entry is held against: the newest
    /// one outside the trusted networks, which handed the mail to them; where every relay
    /// is trusted (mail from inside), all of them, as SpamAssassin takes them. A line that
    /// names no relay ends the search: what is older than a line one cannot read is
    /// anyone's word.
    pub fn relays_to_check<'t>(&self, trace: &'t [Option<Hop>]) -> Vec<&'t Hop> {
        let mut trusted = Vec::new();
        for hop in trace {
            match hop {
                Some(hop) if self.trusts_hop(hop) => trusted.push(hop),
                Some(hop) => return vec![hop],
                None => break,
            }
        }
        trusted
    }

    /// Every relay of `trace` past the trusted ones, newest first, as SpamAssassin's relay
    /// tests read them: beyond the first, each line is that relay's word, and a forged one
    /// is itself a sign.
    pub fn untrusted<'t>(&self, trace: &'t [Option<Hop>]) -> impl Iterator<Item = &'t Hop> {
        trace
            .iter()
            .flatten()
            .skip_while(|hop| self.trusts_hop(hop))
    }
}

/// Whether `host` is `domain` or a host under it.
pub(super) fn is_or_under(host: &str, domain: &str) -> bool {
    host.strip_suffix(domain)
        .is_some_and(|sub| sub.is_empty() || sub.ends_with('.'))
}

/// Whether an address is one no relay on the Internet has: private, loopback, link-local.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private() || v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00 || v6.is_unicast_link_local()
        }
    }
}

/// Letters, digits, hyphens and dots, and something of them.
fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// Whether `ip` is in the network `net`/`length` (an IPv4 address in an IPv6 network, or
/// the other way round, is not).
fn in_network(ip: IpAddr, net: IpAddr, length: u8) -> bool {
    let (ip, net, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    let shift = bits - u32::from(length).min(bits);
    shift >= bits || (ip >> shift) == (net >> shift)
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
    fn the_relay_checked_is_the_newest_outside_the_trusted_networks() {
        let by = "by mx.example.net; Tue, 1 Dec 2026 10:00:00 +0000";
        let lines = |hops: &[&str]| -> Vec<String> {
            hops.iter().map(|h| format!("from h ({h}) {by}")).collect()
        };
        let relays = |trusted: &str, hops: &[&str]| -> Vec<String> {
            let mut t = TrustedNetworks::default();
            t.add(trusted).unwrap();
            let lines = lines(hops);
            let trace = trace(lines.iter().map(String::as_str));
            (t.relays_to_check(&trace).into_iter())
                .map(|hop| {
                    let name = hop.name.as_deref().unwrap_or_default();
                    format!("{name} {}", hop.address.unwrap())
                })
                .collect()
        };
        let partner = "out.partner.example [203.0.113.5]";
        let inner = "mx1.corp.example [10.1.2.3]";
        // Nothing trusted: the newest line's relay, as the MTA saw it.
        assert_eq!(relays("", &[inner, partner]), ["mx1.corp.example 10.1.2.3"]);
        // Loopback is trusted only when named: a content filter handing mail back over it.
        let filter = "localhost [127.0.0.1]";
        assert_eq!(relays("", &[filter, partner]), [" 127.0.0.1"]);
        assert_eq!(
            relays("127.0.0.1", &[filter, partner]),
            ["out.partner.example 203.0.113.5"]
        );
        for trusted in [
            "10.0.0.0/8",
            "10.",
            "10",
            "[10.0.0.0]/8",
            "192.0.2.1 10.1.2.3",
        ] {
            assert_eq!(
                relays(trusted, &[inner, partner]),
                ["out.partner.example 203.0.113.5"],
                "{trusted}"
            );
        }
        // The most specific entry that holds an address decides, wherever it stands.
        for trusted in ["!10.1.2.3 10.", "10. !10.1.2.3", "10. !10.1.2.0/24"] {
            assert_eq!(
                relays(trusted, &[inner, partner]),
                ["mx1.corp.example 10.1.2.3"],
                "{trusted}"
            );
        }
        for trusted in ["!10.1.0.0/16 10.1.2.0/24", "10. !10.1.2.0/24 10.1.2.3/31"] {
            assert_eq!(
                relays(trusted, &[inner, partner]),
                ["out.partner.example 203.0.113.5"],
                "{trusted}"
            );
        }
        // Beyond the first untrusted relay, lines are that relay's word: never read.
        assert_eq!(
            relays("10.", &[inner, "evil.example [198.51.100.1]", partner]),
            ["evil.example 198.51.100.1"]
        );
        // Mail from inside: every relay.
        assert_eq!(
            relays(
                "10. 2001:db8::/32",
                &[inner, "h6.corp.example [IPv6:2001:db8::1]"]
            ),
            ["mx1.corp.example 10.1.2.3", "h6.corp.example 2001:db8::1"]
        );
        // A line that names no relay ends the search.
        let mut t = TrustedNetworks::default();
        t.add("10.").unwrap();
        let hops = [
            format!("from h ({inner}) {by}"),
            by.to_string(),
            lines(&[partner])[0].clone(),
        ];
        let trace = trace(hops.iter().map(String::as_str));
        let found = t.relays_to_check(&trace);
        assert_eq!(found, [trace[0].as_ref().unwrap()]);
        assert_eq!(found[0].name.as_deref(), Some("mx1.corp.example"));
        for bad in ["10.1.2.3/33", "example.org", "[x]", "!"] {
            assert!(TrustedNetworks::default().add(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn untrusted_relays_and_the_names_they_greeted_with() {
        let mut t = TrustedNetworks::default();
        t.add("10.").unwrap();
        let lines = [
            "from mx1 (mx1.corp.example [10.1.2.3]) by mx2",
            "from Mail.Example.org. (out.example.org [192.0.2.1]) by mx1",
            "from out.example.org ([192.0.2.1] helo=[192.0.2.77]) by x",
            "by local.example with LMTP",
            "from a (unknown [198.51.100.3]) by b",
        ];
        let trace = trace(lines.into_iter());
        let seen: Vec<(Option<IpAddr>, Option<String>)> = (t.untrusted(&trace))
            .map(|hop| (hop.address, hop.helo.clone()))
            .collect();
        let ip = |s: &str| s.parse().ok();
        assert_eq!(
            seen,
            [
                (ip("192.0.2.1"), Some("mail.example.org".into())),
                (ip("192.0.2.1"), Some("192.0.2.77".into())),
                (ip("198.51.100.3"), Some("a".into())),
            ]
        );
        for (address, private) in [
            ("10.0.0.1", true),
            ("192.168.1.1", true),
            ("127.0.0.1", true),
            ("169.254.0.1", true),
            ("fd00::1", true),
            ("192.0.2.1", false),
            ("2001:db8::1", false),
        ] {
            assert_eq!(is_private(address.parse().unwrap()), private, "{address}");
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
            (
                "from h (192.0.2.1 [192.0.2.1]) by mx",
                (None, ip("192.0.2.1")),
            ),
            // A client greeting with the address it would be taken for.
            (
                "from [192.0.2.1] (unknown [198.51.100.7]) by mx",
                (None, ip("198.51.100.7")),
            ),
            (
                "from [198.51.100.7] (helo=[192.0.2.1]) by mx",
                (None, ip("198.51.100.7")),
            ),
            // qmail and Exchange write the address bare; qmail's HELO is no address.
            (
                "from unknown (HELO [192.0.2.1]) (198.51.100.7) by mx",
                (None, ip("198.51.100.7")),
            ),
            (
                "from EXCH1.corp.example (10.1.2.3) by EXCH2.corp.example",
                (None, ip("10.1.2.3")),
            ),
            (
                "from 198.51.100.7 (HELO [192.0.2.1]) by mx (192.0.2.9)",
                (None, ip("198.51.100.7")),
            ),
            (
                "from yahoo.com [198.51.100.7] by mx",
                (None, ip("198.51.100.7")),
            ),
            // A greeting shaped like a comment comes before the server's own.
            (
                "from (a [192.0.2.1]) (unknown [198.51.100.7]) by mx",
                (None, ip("198.51.100.7")),
            ),
        ] {
            let hop = Hop::of_received(received).unwrap_or_else(|| panic!("{received}"));
            assert_eq!((hop.name, hop.address), want, "{received}");
        }
        assert_eq!(Hop::of_received("by mx.example.net; Tue, 1 Dec 2026"), None);
    }

    /// Each `(` made a comment to the next `)`, and each `[` in it was read to the next
    /// `]`: a forged line of `([([…` cost the cube of its length (50 KB: eight minutes).
    #[test]
    fn a_received_line_of_parentheses_is_read_in_linear_time() {
        for piece in ["(", "([", "[", "(x [1.2.3.4"] {
            let line = format!(
                "from x {} by mx.example.org",
                piece.repeat(50_000 / piece.len())
            );
            let started = std::time::Instant::now();
            let _ = Hop::of_received(&line);
            // Linear takes a millisecond; this guards against the cube, it measures nothing.
            assert!(
                started.elapsed() < std::time::Duration::from_secs(1),
                "{piece:?}: {:?}",
                started.elapsed()
            );
        }
        let nested = Hop::of_received(
            "from mail.example.com (mail.example.com (via relay) [192.0.2.7]) by mx.example.org",
        )
        .expect("a hop");
        assert_eq!(
            nested.address,
            Some("192.0.2.7".parse().unwrap()),
            "{nested:?}"
        );
    }
}
