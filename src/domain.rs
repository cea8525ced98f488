//! A host name cut to the domain its owner registered, roughly and without a public-suffix
//! list: the last labels of the name. Tokens and rules cut names differently (tokens by two
//! labels, as learned databases hold them), from one way of taking labels off the end.

/// The last `n` labels of `host` (all of it, if it has no more).
pub(crate) fn last_labels(host: &str, n: usize) -> &str {
    match host.rmatch_indices('.').nth(n.saturating_sub(1)) {
        Some((at, _)) => &host[at + 1..],
        None => host,
    }
}

/// The last two labels of a host name; none for a name of one label. Tokens (`rcvd:`) are
/// made of it: what it returns is what learned databases hold.
pub(crate) fn registered_domain(host: &str) -> Option<&str> {
    host.contains('.').then(|| last_labels(host, 2))
}

/// The registrable part of a host, roughly: its last two labels, three under a two-letter
/// country code with a short second level (example.co.uk). Called for each hop of a trace:
/// a slice of `host`, not a copy.
pub(crate) fn base_domain(host: &str) -> &str {
    let mut labels = host.rsplit('.');
    let (last, second, third) = (labels.next(), labels.next(), labels.next());
    let country_second_level = third.is_some()
        && last.is_some_and(|l| l.len() == 2)
        && second.is_some_and(|s| s.len() <= 3);
    last_labels(host, if country_second_level { 3 } else { 2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_the_last_labels() {
        // (host, registered domain, base domain)
        for (host, registered, base) in [
            ("www.paypal.com", Some("paypal.com"), "paypal.com"),
            ("login.example.co.uk", Some("co.uk"), "example.co.uk"),
            ("mail.example.com.au", Some("com.au"), "example.com.au"),
            ("a.b.example.info.de", Some("info.de"), "info.de"),
            ("co.uk", Some("co.uk"), "co.uk"),
            ("paypal.com", Some("paypal.com"), "paypal.com"),
            ("localhost", None, "localhost"),
            ("", None, ""),
            ("example.com.", Some("com."), "com."),
            (".com", Some(".com"), ".com"),
            ("a..b", Some(".b"), ".b"),
        ] {
            assert_eq!(registered_domain(host), registered, "{host:?}");
            assert_eq!(base_domain(host), base, "{host:?}");
        }
    }
}
