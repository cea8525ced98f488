//! The relay a message came from, as the MTA that took it recorded it, and the relays
//! `welcomelist_from_rcvd` entries ask for.

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
    pub fn of_received(received: &str) -> Option<(Option<String>, Option<IpAddr>)> {
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
            n != "unknown" && n.contains('.') && n.parse::<IpAddr>().is_err() && is_host_name(n)
        });
        Some((named, ip))
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
        ] {
            assert_eq!(Relay::of_received(received), Some(want), "{received}");
        }
        assert_eq!(
            Relay::of_received("by mx.example.net; Tue, 1 Dec 2026"),
            None
        );
    }
}
