//! Rule kinds and built-in tests on messages written for them, each with a message that
//! must match and one that must not.

use std::path::{Path, PathBuf};

use super::*;

const LIMIT: usize = 1 << 20;

fn set(text: &str) -> RuleSet {
    let (set, report) = RuleSet::from_text(text, Path::new("test.cf"));
    assert!(
        report.skipped.is_empty() && report.problems.is_empty(),
        "{:?} {:?}",
        report.skipped,
        report.problems
    );
    set
}

fn hits(set: &RuleSet, raw: &str) -> Vec<String> {
    let msg = Message::parse(raw.as_bytes(), LIMIT);
    set.evaluate(&msg).into_iter().map(str::to_string).collect()
}

/// Asserts `rule` hits `yes` and not `no`.
fn check(rules: &str, rule: &str, yes: &str, no: &str) {
    let s = set(rules);
    assert!(
        hits(&s, yes).contains(&rule.to_string()),
        "{rule} should hit:\n{yes}\nhits: {:?}",
        hits(&s, yes)
    );
    assert!(
        !hits(&s, no).contains(&rule.to_string()),
        "{rule} should not hit:\n{no}\nhits: {:?}",
        hits(&s, no)
    );
}

fn mail(headers: &str, body: &str) -> String {
    format!("{headers}\n\n{body}\n")
}

const HTML_HEAD: &str =
    "From: a@example.org\nSubject: hi\nMIME-Version: 1.0\nContent-Type: text/html";
const MULTIPART: &str = "Subject: a\nContent-Type: multipart/mixed; boundary=\"b\"";

#[test]
fn header_rules() {
    check(
        "header SUBJ_FREE Subject =~ /\\bfree\\b/i",
        "SUBJ_FREE",
        &mail("Subject: Get it FREE now", "x"),
        &mail("Subject: freedom", "x"),
    );
    check(
        "header NO_XM X-Mailer !~ /outlook/i",
        "NO_XM",
        &mail("Subject: a\nX-Mailer: BulkBlaster", "x"),
        &mail("Subject: a\nX-Mailer: Microsoft Outlook", "x"),
    );
    check(
        "header NUMS From:addr =~ /^\\d{3,}[^0-9@]/",
        "NUMS",
        &mail("From: \"Bob\" <12345abc@example.org>", "x"),
        &mail("From: \"12345 Bob\" <bob@example.org>", "x"),
    );
    check(
        "header NAME From:name =~ /paypal/i",
        "NAME",
        &mail("From: \"PayPal Service\" <x@evil.example>", "x"),
        &mail("From: \"Bob\" <paypal@example.org>", "x"),
    );
    check(
        "header HAS_LID exists:List-Id",
        "HAS_LID",
        &mail("List-Id: <a.b>", "x"),
        &mail("Subject: a", "x"),
    );
    check(
        "header ALLH ALL =~ /^X-Bulk: yes$/mi",
        "ALLH",
        &mail("Subject: a\nX-Bulk: yes", "x"),
        &mail("Subject: X-Bulk: yes", "x"),
    );
    check(
        "header TOCC ToCc =~ /undisclosed/i",
        "TOCC",
        &mail("Cc: undisclosed-recipients:;", "x"),
        &mail("To: bob@example.org", "x"),
    );
    check(
        "header RAWSUBJ Subject:raw =~ /=\\?utf-8\\?b\\?/i",
        "RAWSUBJ",
        &mail("Subject: =?utf-8?b?SGVsbG8=?=", "x"),
        &mail("Subject: Hello", "x"),
    );
    // [if-unset: ...] stands in for a missing header.
    check(
        "header NODATE Date =~ /^UNSET$/ [if-unset: UNSET]",
        "NODATE",
        &mail("Subject: a", "x"),
        &mail("Date: Thu, 22 Aug 2002 18:26:25 -0700", "x"),
    );
}

#[test]
fn body_rawbody_uri_full_rules() {
    check(
        "body GUAR /one hundred percent guaranteed/i",
        "GUAR",
        &mail("Subject: a", "It is One Hundred Percent\nGuaranteed!"),
        &mail("Subject: a", "one hundred percent sure"),
    );
    // The Subject is the body's first line; ^ is a paragraph start.
    check(
        "body DEAR /^dear friend/i",
        "DEAR",
        &mail("Subject: a", "Hello.\n\nDear Friend,\nhow are you"),
        &mail("Subject: a", "Hello my dear friend"),
    );
    // body sees rendered HTML text, rawbody the markup.
    let html = mail(
        HTML_HEAD,
        "<html><body><p>Cheap <b>pills</b></p><script>x</script></body></html>",
    );
    check(
        "body PILLS /cheap pills/i",
        "PILLS",
        &html,
        &mail("Subject: a", "cheap <b>pills</b>"),
    );
    check(
        "rawbody SCRIPT /<script\\b/i",
        "SCRIPT",
        &html,
        &mail("Subject: a", "no markup"),
    );
    // Each HTML paragraph is a line of its own, as SpamAssassin renders it; the words
    // around inline markup keep their spaces, and `&nbsp;` is a space.
    check(
        "body DEAR /^\\s*dear friend\\b/im",
        "DEAR",
        &mail(
            HTML_HEAD,
            "<p>Greetings.</p>\n<p>Dear friend, I am a prince.</p>",
        ),
        &mail(HTML_HEAD, "<p>Greetings. Dear friend, I am a prince.</p>"),
    );
    check(
        "body PRICE /price: 100 pills/",
        "PRICE",
        &mail(HTML_HEAD, "<p><i>price:</i>&nbsp;100 pills</p>"),
        &mail(HTML_HEAD, "<p>price:</p><p>100 pills</p>"),
    );
    // uri rules read links as a browser follows them, and mailto: links too.
    check(
        "uri AMP /\\?a=1&b=2/",
        "AMP",
        &mail(
            HTML_HEAD,
            "<a href=\"http://x.example/?a=1&amp;b=2\">go</a>",
        ),
        &mail(
            HTML_HEAD,
            "<a href=\"http://x.example/?a=1&amp;c=2\">go</a>",
        ),
    );
    check(
        "uri MAILTO /^mailto:remove@/i",
        "MAILTO",
        &mail(
            HTML_HEAD,
            "<a href=\"mailto:remove@list.example\">remove</a>",
        ),
        &mail(HTML_HEAD, "write to remove@list.example"),
    );
    // Rawbody is the markup and the text parts as sent, not HTML rendered: escaped markup
    // shown as text is no markup.
    check(
        "rawbody SCRIPT /<script\\b/i",
        "SCRIPT",
        &mail("Subject: a", "a plain <script> part"),
        &mail(HTML_HEAD, "<p>a &lt;script&gt; shown</p>"),
    );
    check(
        "uri SHORT m{^https?://(?:bit\\.ly|tinyurl\\.com)/}i",
        "SHORT",
        &mail("Subject: a", "see https://bit.ly/abc"),
        &mail("Subject: a", "see https://example.org/bit.ly/abc"),
    );
    check(
        "full XORIG /^X-Originating-IP: \\[10\\./m",
        "XORIG",
        &mail("Subject: a\nX-Originating-IP: [10.0.0.1]", "x"),
        &mail("Subject: a", "X-Originating-IP: 10.0.0.1"),
    );
    // A plain string goes through Aho-Corasick and still respects case flags.
    check(
        "body LIT /click here/i",
        "LIT",
        &mail("Subject: a", "CLICK HERE"),
        &mail("Subject: a", "click  here"),
    );
    check(
        "body LITCS /Click Here/",
        "LITCS",
        &mail("Subject: a", "Click Here"),
        &mail("Subject: a", "click here"),
    );
    // Look-around runs in the backtracker behind its prefilter.
    check(
        "body NOTBAR /foo(?!bar)/",
        "NOTBAR",
        &mail("Subject: a", "foobaz"),
        &mail("Subject: a", "foobar"),
    );
}

#[test]
fn meta_rules_and_helpers() {
    let rules = "body __A /alpha/\nbody __B /beta/\nbody C /gamma/\n\
meta BOOL (__A && !__B) || C\nmeta SUM (__A + __B + C) > 1\nmeta MISSING __A && __NOT_DEFINED\n\
meta NOT_MISSING __A && !__NOT_DEFINED\nmeta M2 BOOL && SUM\n";
    let s = set(rules);
    assert_eq!(
        hits(&s, &mail("Subject: x", "alpha")),
        ["BOOL", "NOT_MISSING"]
    );
    assert_eq!(
        hits(&s, &mail("Subject: x", "alpha beta")),
        ["SUM", "NOT_MISSING"]
    );
    assert_eq!(
        hits(&s, &mail("Subject: x", "alpha gamma")),
        ["C", "BOOL", "SUM", "NOT_MISSING", "M2"]
    );
    assert!(hits(&s, &mail("Subject: x", "nothing")).is_empty());
}

/// A misspelt rule directive is an error, where SpamAssassin's own settings are not; so
/// is a file that is no rule file, named a few lines at a time.
#[test]
fn misspelt_directives_and_files_of_garbage_are_errors() {
    let text = "bdoy TYPO_BODY /x/\nhaeder TYPO_HDR Subject =~ /x/\nbody GOOD /fine/\n\
         socre GOOD 1\nrequired_score 5\nreport_safe 0\nuridnsbl_skip_domain example.com\n";
    let (set, report) = RuleSet::from_text(text, Path::new("typos.cf"));
    let names: Vec<&str> = set.rules().iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["GOOD"]);
    let lines: Vec<usize> = report.problems.iter().map(|p| p.origin.line).collect();
    assert_eq!(lines, [1, 2, 4], "{:?}", report.problems);
    assert!(
        report.problems[0]
            .reason
            .to_string()
            .contains("did you mean \"body\"")
    );

    let garbage: String = (0..100)
        .map(|i| format!("\u{1}{i}\u{7f}garbage\n"))
        .collect();
    let (_, report) = RuleSet::from_text(&garbage, Path::new("garbage.cf"));
    assert_eq!(report.problems.len(), 6, "{:?}", report.problems);
    assert!(
        report.problems[5]
            .reason
            .to_string()
            .contains("95 more lines")
    );
}

/// `exists:` asks of a pseudo-header what a header rule would read of it.
#[test]
fn exists_knows_pseudo_headers() {
    let s = set("header E_TOCC exists:ToCc\nheader E_MID exists:MESSAGEID\n\
         header E_ENV exists:EnvelopeFrom\nheader E_REPLY exists:Reply-To\n");
    let with = mail(
        "To: b@example.org\nReply-To: c@example.com\nMessage-ID: <1@x>\nReturn-Path: <a@x>",
        "x",
    );
    assert_eq!(hits(&s, &with), ["E_TOCC", "E_MID", "E_ENV", "E_REPLY"]);
    assert!(hits(&s, &mail("Subject: none of them", "x")).is_empty());
}

#[test]
fn score_zero_switches_a_rule_off_and_other_scores_are_ignored() {
    // Off means off for the meta rules that read it too, as in SpamAssassin; a `__`
    // helper scored 0 stays on, and so does a rule with four scores not all 0.
    let s = set("body A /x/\nscore A 0\nbody B /x/\nscore B 99\nmeta C A\n\
         body __H /x/\nscore __H 0\nmeta D __H\n\
         body E /x/\nscore E 0 1.2 0 1.5\nbody F /x/\nscore F 0 0 0 0\n");
    assert_eq!(hits(&s, &mail("Subject: s", "x")), ["B", "D", "E"]);
    assert_eq!(s.rule("B").and_then(|r| r.score), Some(99.0));
}

/// `inf` and `NaN` parse as numbers, and a decisive rule scored so made verdicts NaN:
/// such a score is a problem of the file, and the rule keeps no score.
#[test]
fn scores_that_are_no_finite_number_are_refused() {
    let text = "body A /x/\nscore A inf\nbody B /x/\nscore B 1 NaN 1 1\n\
                body C /x/\nscore C -1e400\nbody D /x/\nscore D 2.5\n";
    let (set, report) = RuleSet::from_text(text, Path::new("scores.cf"));
    let lines: Vec<usize> = report.problems.iter().map(|p| p.origin.line).collect();
    assert_eq!(lines, [2, 4, 6], "{:?}", report.problems);
    for name in ["A", "B", "C"] {
        assert_eq!(set.rule(name).and_then(|r| r.score), None, "{name}");
    }
    assert_eq!(set.rule("D").and_then(|r| r.score), Some(2.5));
}

/// SpamAssassin's address lists become its decisive USER_IN_* rules: globs over the
/// whole From address, case ignored, the old directive names too, an `un…` line taking an
/// entry back; with no list, no rule.
#[test]
fn welcomelist_and_blocklist_from_become_decisive_rules() {
    let s = set("welcomelist_from *@partner.example Boss@Corp.example\n\
         whitelist_from friend?@old.example\n\
         blacklist_from *@spammer.example\n\
         unwelcomelist_from boss@corp.example\n");
    for (from, want) in [
        ("Ann <ann@Partner.Example>", &["USER_IN_WELCOMELIST"][..]),
        ("friend1@old.example", &["USER_IN_WELCOMELIST"]),
        ("friend12@old.example", &[]),
        ("boss@corp.example", &[]),
        ("x@spammer.example", &["USER_IN_BLOCKLIST"]),
        ("x@partner.example.spammer.example", &[]),
        ("x@notpartner.example", &[]),
    ] {
        assert_eq!(
            hits(&s, &mail(&format!("From: {from}"), "hi")),
            want,
            "{from}"
        );
    }
    assert_eq!(
        s.rule("USER_IN_WELCOMELIST").and_then(|r| r.score),
        Some(-100.0)
    );
    assert_eq!(
        s.rule("USER_IN_BLOCKLIST").and_then(|r| r.score),
        Some(100.0)
    );
    let unlisted = set("welcomelist_from a@b.example\nunwelcomelist_from a@b.example\n");
    assert!(unlisted.is_empty());
}

/// `all_spam_to` (decisive), `welcomelist_to` and `blocklist_to` (learned features) read
/// every To and Cc address, each matched whole: a quoted name with a comma, a group, a
/// second Cc line.
#[test]
fn address_lists_of_recipients_read_every_to_and_cc_address() {
    let s = set("all_spam_to abuse@* Postmaster@Example.org\n\
         whitelist_to sales@example.org\n\
         blocklist_to *@old.example.org\n");
    for (to, want) in [
        (
            "To: \"Doe, Jane\" <jane@example.org>, ABUSE@example.net",
            &["USER_IN_ALL_SPAM_TO"][..],
        ),
        (
            "To: jane@example.org\nCc: x@y.example\nCc: postmaster@example.org",
            &["USER_IN_ALL_SPAM_TO"],
        ),
        (
            "To: team: sales@example.org, b@old.example.org;",
            &["USER_IN_WELCOMELIST_TO", "USER_IN_BLOCKLIST_TO"],
        ),
        ("To: \"abuse@x.example\" <jane@example.org>", &[]),
        (
            "To: myabuse@example.org, postmaster@example.org.evil.example",
            &[],
        ),
        ("Cc: sales@example.org", &["USER_IN_WELCOMELIST_TO"]),
        ("From: abuse@example.org", &[]),
    ] {
        assert_eq!(hits(&s, &mail(to, "hi")), want, "{to}");
    }
    assert_eq!(
        s.rule("USER_IN_ALL_SPAM_TO").and_then(|r| r.score),
        Some(-100.0)
    );
    assert_eq!(
        s.rule("USER_IN_WELCOMELIST_TO").and_then(|r| r.score),
        Some(-6.0)
    );
}

/// The hits of `set` on `raw`, sorted.
fn sorted_hits(set: &RuleSet, raw: &str) -> Vec<String> {
    let mut hits = hits(set, raw);
    hits.sort();
    hits
}

/// WLBLEval's tests read named address lists (`enlist_addrlist`, whose namespace the
/// welcomelist directives share) from From, To/Cc and Reply-To; a list never filled is no
/// error and never hits; SpamAssassin's own definition of USER_IN_WELCOMELIST keeps the
/// lists' decisive score.
#[test]
fn named_address_lists_are_read_by_the_wlbleval_tests() {
    let s = set("enlist_addrlist (GOV) *@*.gov *@gov.example\n\
         enlist_addrlist (PAYPAL) *@paypal.com\n\
         enlist_addrlist (welcomelist_from) friend@x.example\n\
         header FROM_GOV eval:check_from_in_list('GOV')\n\
         header TO_GOV eval:check_to_in_list('GOV')\n\
         header REPLYTO_PAYPAL eval:check_replyto_in_list('PAYPAL')\n\
         header FROM_NOSUCH eval:check_from_in_list('NOSUCH')\n\
         header USER_IN_WELCOMELIST eval:check_from_in_welcomelist()\n\
         score USER_IN_WELCOMELIST -0.01\n\
         header MORE_SPAM eval:check_to_in_more_spam()\n");
    for (headers, want) in [
        ("From: clerk@tax.gov", &["FROM_GOV"][..]),
        (
            "From: clerk@gov.example\nTo: me@tax.gov",
            &["FROM_GOV", "TO_GOV"],
        ),
        ("From: clerk@gov.example.evil.example", &[]),
        ("From: \"clerk@tax.gov\" <x@evil.example>", &[]),
        ("Cc: a@b.example, c@irs.gov", &["TO_GOV"]),
        (
            "From: x@evil.example\nReply-To: Service <SERVICE@PayPal.com>",
            &["REPLYTO_PAYPAL"],
        ),
        ("From: service@paypal.com", &[]),
        ("From: Friend <friend@x.example>", &["USER_IN_WELCOMELIST"]),
    ] {
        assert_eq!(sorted_hits(&s, &mail(headers, "hi")), want, "{headers}");
    }
    assert_eq!(
        s.rule("USER_IN_WELCOMELIST").and_then(|r| r.score),
        Some(-100.0)
    );
    // A list without its name in parentheses, or a count that is none, is named.
    let (_, report) = RuleSet::from_text(
        "enlist_addrlist GOV *@x.gov\nenlist_uri_host (SHORT)\nfreemail_max_body_emails many\n",
        Path::new("lists.cf"),
    );
    let lines: Vec<usize> = report.problems.iter().map(|p| p.origin.line).collect();
    assert_eq!(lines, [1, 2, 3], "{:?}", report.problems);
}

/// `welcomelist_from_rcvd`: the From: address on the list and the newest Received: line
/// naming, as the relay the server looked up, the host or domain or network beside it;
/// the HELO name counts for nothing, an older Received: line neither.
#[test]
fn welcomelist_from_rcvd_needs_the_listed_relay() {
    let s = set("welcomelist_from_rcvd *@partner.example partner.example\n\
         whitelist_from_rcvd boss@corp.example [192.0.2.0/24]\n\
         def_welcomelist_from_rcvd *@news.example [198.51.100]\n");
    let by = "by mx.example.net (Postfix) with ESMTP id 1; Tue, 1 Dec 2026 10:00:00 +0000";
    for (received, from, want) in [
        (
            "from x (out.Partner.example [203.0.113.5])",
            "a@partner.example",
            &["USER_IN_WELCOMELIST"][..],
        ),
        (
            "from out.partner.example ([203.0.113.5] helo=x)",
            "a@partner.example",
            &["USER_IN_WELCOMELIST"],
        ),
        (
            "from out.partner.example (unknown [203.0.113.5])",
            "a@partner.example",
            &[],
        ),
        (
            "from x (evilpartner.example [203.0.113.5])",
            "a@partner.example",
            &[],
        ),
        (
            "from x (out.partner.example [203.0.113.5])",
            "a@evil.example",
            &[],
        ),
        (
            "from x (unknown [192.0.2.77])",
            "Boss <boss@corp.example>",
            &["USER_IN_WELCOMELIST"],
        ),
        (
            "from x (mail.corp.example [192.0.3.1])",
            "boss@corp.example",
            &[],
        ),
        (
            "from x (unknown [198.51.100.9])",
            "n@news.example",
            &["USER_IN_DEF_WELCOMELIST"],
        ),
    ] {
        let raw = mail(&format!("Received: {received}\n\t{by}\nFrom: {from}"), "hi");
        assert_eq!(hits(&s, &raw), want, "{received} {from}");
    }
    let older = mail(
        &format!(
            "Received: from x (mail.evil.example [203.0.113.9]) {by}\n\
                  Received: from y (out.partner.example [203.0.113.5]) by mail.evil.example\n\
                  From: a@partner.example"
        ),
        "hi",
    );
    assert!(hits(&s, &older).is_empty());
    assert_eq!(
        s.rule("USER_IN_WELCOMELIST").and_then(|r| r.score),
        Some(-100.0)
    );
    assert_eq!(
        s.rule("USER_IN_DEF_WELCOMELIST").and_then(|r| r.score),
        Some(-15.0)
    );
    let (_, report) = RuleSet::from_text(
        "welcomelist_from_rcvd a@b.example\nwelcomelist_from_rcvd a@b.example [300.1.1.1/8]\n",
        Path::new("rcvd.cf"),
    );
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
}

/// `trusted_networks`: behind a relay of one's own (an MX in front of the mailbox server),
/// `welcomelist_from_rcvd` reads the relay that handed the mail to it, and no older line.
#[test]
fn trusted_networks_let_welcomelist_from_rcvd_look_past_ones_own_relays() {
    let listed = "welcomelist_from_rcvd *@partner.example partner.example\n";
    let trace = |hops: &[&str]| -> String {
        let lines: Vec<String> = (hops.iter())
            .map(|h| {
                format!(
                    "Received: from h ({h})\n\tby mx.example.net; Tue, 1 Dec 2026 10:00:00 +0000"
                )
            })
            .collect();
        mail(
            &format!("{}\nFrom: a@partner.example", lines.join("\n")),
            "hi",
        )
    };
    let (inner, partner) = (
        "mx1.corp.example [10.1.2.3]",
        "out.partner.example [203.0.113.5]",
    );
    let behind_mx = trace(&[inner, partner]);
    assert!(hits(&set(listed), &behind_mx).is_empty());
    let trusting = set(&format!("{listed}trusted_networks 10.0.0.0/8 !10.9.9.9\n"));
    assert_eq!(hits(&trusting, &behind_mx), ["USER_IN_WELCOMELIST"]);
    // A sender's forged line under an untrusted relay is never reached.
    let forged = trace(&[inner, "evil.example [198.51.100.1]", partner]);
    assert!(hits(&trusting, &forged).is_empty());
    let excluded = trace(&["mx9.corp.example [10.9.9.9]", partner]);
    assert!(hits(&trusting, &excluded).is_empty());
    // Loopback is trusted only when named (any local user may send over it).
    let filtered = trace(&["localhost [127.0.0.1]", partner]);
    assert!(hits(&set(listed), &filtered).is_empty());
    let named = set(&format!("{listed}trusted_networks 127.0.0.0/8\n"));
    assert_eq!(hits(&named, &filtered), ["USER_IN_WELCOMELIST"]);
    // SpamAssassin's ALL_TRUSTED: mail from inside, relayed by one's own only.
    let all_trusted = set("trusted_networks 10.\nheader ALL_TRUSTED eval:check_all_trusted()\n");
    assert_eq!(
        hits(
            &all_trusted,
            &trace(&[inner, "mx2.corp.example [10.7.7.7]"])
        ),
        ["ALL_TRUSTED"]
    );
    assert!(hits(&all_trusted, &behind_mx).is_empty());
    let cleared = set(&format!(
        "{listed}trusted_networks 10.\nclear_trusted_networks\n"
    ));
    assert!(hits(&cleared, &behind_mx).is_empty());
    let (_, report) = RuleSet::from_text("trusted_networks 10.0.0.0/40\n", Path::new("t.cf"));
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
}

/// `welcomelist_subject` and `blocklist_subject`: a glob found anywhere in the Subject,
/// case ignored, a whole line one glob; each feeds a decisive rule.
#[test]
fn subject_lists_find_their_globs_in_the_subject() {
    let s = set("welcomelist_subject [Ticket *]\nblacklist_subject cheap meds\n");
    for (subject, want) in [
        (
            "Re: [TICKET #4711] printer",
            &["SUBJECT_IN_WELCOMELIST"][..],
        ),
        ("Re: Ticket 4711 printer", &[]),
        ("buy CHEAP MEDS now", &["SUBJECT_IN_BLOCKLIST"]),
        ("cheap  meds", &[]),
    ] {
        assert_eq!(
            hits(&s, &mail(&format!("Subject: {subject}"), "hi")),
            want,
            "{subject}"
        );
    }
    assert!(hits(&s, &mail("From: a@b.example", "cheap meds")).is_empty());
    assert_eq!(
        s.rule("SUBJECT_IN_BLOCKLIST").and_then(|r| r.score),
        Some(100.0)
    );
}

/// VBounce's relays: a bounce whose quoted trace names one of the relays one's own mail
/// leaves through (globs, case ignored), in its text or in the message it carries, with
/// continuation lines read as part of their field.
#[test]
fn bounce_relays_are_found_in_the_trace_a_bounce_carries() {
    let tests = "body MY_SERVERS eval:check_welcomelist_bounce_relays()\n\
                 body HAVE_RELAYS eval:have_any_bounce_relays()\n";
    let s = set(&format!(
        "welcomelist_bounce_relays Mail.example.org\nwhitelist_bounce_relays relay?.example.net\n{tests}"
    ));
    let quoted = "Your message could not be delivered.\n\n\
                  > Received: from mail.example.org (mail.example.org [192.0.2.1])\n\
                  >\tby mx.other.example with ESMTP\n";
    let attached = format!(
        "{MULTIPART}\n\n--b\nContent-Type: text/plain\n\nDelivery failed.\n\
         --b\nContent-Type: message/rfc822\n\n\
         Received: from laptop.example.org (laptop [10.0.0.2])\n\
         \tby relay7.example.net (Postfix) with ESMTP\n\
         From: me@example.org\nSubject: hello\n\nhi\n--b--\n"
    );
    let backscatter = "> Received: from evil.example (evil.example [203.0.113.9])\n\
                       >\tby mx.other.example\n\nMail.example.org was mentioned here.";
    assert_eq!(
        sorted_hits(&s, &mail("Subject: failure", quoted)),
        ["HAVE_RELAYS", "MY_SERVERS"]
    );
    assert_eq!(sorted_hits(&s, &attached), ["HAVE_RELAYS", "MY_SERVERS"]);
    assert_eq!(
        sorted_hits(&s, &mail("Subject: failure", backscatter)),
        ["HAVE_RELAYS"]
    );
    assert!(hits(&set(tests), &mail("Subject: failure", quoted)).is_empty());
}

/// WLBLEval's host lists: a link's host or any domain above it, the most specific entry
/// deciding (`!` excludes), an address literal only as itself, `delist_uri_host` taking
/// entries back, mailto: links not read; `blocklist_uri_host` feeds a decisive rule.
#[test]
fn uri_host_lists_match_hosts_and_the_domains_above_them() {
    let s = set("blocklist_uri_host Bad.example\n\
         enlist_uri_host (SHORT) bit.ly !ok.bit.ly t.co\n\
         enlist_uri_host (IPS) 192.0.2.7\n\
         delist_uri_host (SHORT) t.co\n\
         body SHORTENER eval:check_uri_host_listed('SHORT')\n\
         body LISTED_IP eval:check_uri_host_listed('IPS')\n\
         body NOSUCH eval:check_uri_host_listed('NOSUCH')\n");
    for (body, want) in [
        (
            "see http://www.BAD.example/x",
            &["URI_HOST_IN_BLOCKLIST"][..],
        ),
        (
            "see http://notbad.example/x and http://bad.example.org/",
            &[],
        ),
        ("see https://bit.ly/abc", &["SHORTENER"]),
        ("see https://ok.bit.ly/abc or https://a.ok.bit.ly/", &[]),
        ("see https://t.co/abc", &[]),
        ("see http://192.0.2.7/x", &["LISTED_IP"]),
        ("see http://10.192.0.2.7.example/x", &[]),
        ("write to <a href=\"mailto:x@bad.example\">us</a>", &[]),
    ] {
        assert_eq!(sorted_hits(&s, &mail("Subject: s", body)), want, "{body}");
    }
    assert_eq!(
        s.rule("URI_HOST_IN_BLOCKLIST").and_then(|r| r.score),
        Some(100.0)
    );
}

/// The FreeMail plugin's tests: addresses at the listed providers (globs), but not a
/// welcomed one or a role's; Reply-To and From as different free mail; a body naming
/// another free mail address, unless it names so many that it is a list.
#[test]
fn freemail_tests_read_the_listed_providers() {
    let tests = "header FM_FROM eval:check_freemail_from()\n\
         header FM_FROM_DIGIT eval:check_freemail_from('\\d@')\n\
         header FM_REPLYTO eval:check_freemail_header('Reply-To')\n\
         header FM_ENV_DIGIT eval:check_freemail_header('EnvelopeFrom', '\\d@')\n\
         header FM_DIFFERENT eval:check_freemail_replyto('replyto')\n\
         header FM_REPLY eval:check_freemail_replyto('reply')\n\
         body FM_BODY eval:check_freemail_body()\n";
    let s = set(&format!(
        "freemail_domains gmail.com *.yahoo.example\nfreemail_domains mail.example\n\
         freemail_welcomelist friendly@gmail.com\n{tests}"
    ));
    for (headers, body, want) in [
        ("From: a@gmail.com", "hi", &["FM_FROM"][..]),
        ("From: A1@Gmail.com", "hi", &["FM_FROM", "FM_FROM_DIGIT"]),
        ("From: x@uk.yahoo.example", "hi", &["FM_FROM"]),
        ("From: x@yahoo.example", "hi", &[]),
        ("From: friendly@gmail.com", "hi", &[]),
        ("From: support@gmail.com", "hi", &[]),
        ("From: x@gmail.com.evil.example", "hi", &[]),
        // A company's From with a private free mail Reply-To.
        (
            "From: boss@corp.example\nReply-To: boss.private@gmail.com",
            "hi",
            &["FM_REPLYTO"],
        ),
        (
            "From: a@gmail.com\nReply-To: b@mail.example",
            "hi",
            &["FM_DIFFERENT", "FM_FROM", "FM_REPLY", "FM_REPLYTO"],
        ),
        (
            "From: a@gmail.com\nReply-To: a@gmail.com",
            "hi",
            &["FM_FROM", "FM_REPLYTO"],
        ),
        (
            "From: a@gmail.com",
            "write to c@mail.example at once",
            &["FM_BODY", "FM_FROM", "FM_REPLY"],
        ),
        (
            "From: a@corp.example\nReply-To: b@gmail.com",
            "or write to <a href=\"mailto:c@mail.example\">me</a>",
            &["FM_BODY", "FM_DIFFERENT", "FM_REPLYTO"],
        ),
        (
            "From: a@gmail.com",
            "a@x.example b@x.example c@x.example d@x.example c@mail.example",
            &["FM_FROM"],
        ),
        // A list's bounces come back to its own address: not a scam's Reply-To.
        (
            "Return-Path: <news-bounces@gmail.com>\nFrom: a@gmail.com\nReply-To: b@gmail.com",
            "hi",
            &["FM_FROM", "FM_REPLYTO"],
        ),
        (
            "Return-Path: <joe7@gmail.com>\nFrom: joe7@gmail.com",
            "hi",
            &["FM_ENV_DIGIT", "FM_FROM", "FM_FROM_DIGIT"],
        ),
        (
            "Return-Path: <bounce-7@gmail.com>\nFrom: x@corp.example",
            "hi",
            &[],
        ),
    ] {
        assert_eq!(
            sorted_hits(&s, &mail(headers, body)),
            want,
            "{headers} / {body}"
        );
    }
    let unlisted = set(tests);
    assert!(
        hits(
            &unlisted,
            &mail("From: a@gmail.com\nReply-To: b@gmail.com", "hi")
        )
        .is_empty()
    );
}

/// The SPF, DKIM and AuthRes tests read only the fields of a trusted authserv-id (its
/// case ignored), the newest result or a pass for each method, and nothing at all while no
/// id is trusted.
#[test]
fn authentication_results_are_read_from_trusted_servers_only() {
    let tests = "header SPF_PASS eval:check_for_spf_pass()\n\
         header SPF_FAIL eval:check_for_spf_fail()\n\
         header SPF_HELO_PASS eval:check_for_spf_helo_pass()\n\
         header DKIM_SIGNED eval:check_dkim_signed()\n\
         header DKIM_VALID eval:check_dkim_valid()\n\
         header DKIM_VALID_AU eval:check_dkim_valid_author_sig()\n\
         header DKIM_VALID_LI eval:check_dkim_valid('linkedin.com')\n\
         header AR_DMARC_FAIL eval:check_authres_result('dmarc','fail')\n\
         header AR_DMARC_MISSING eval:check_authres_result('dmarc', 'missing')\n\
         header DMARC_REJECT eval:check_dmarc_reject()\n\
         header DMARC_QUAR eval:check_dmarc_quarantine()\n\
         header DMARC_PASS eval:check_dmarc_pass()\n\
         header DMARC_MISSING eval:check_dmarc_missing()\n\
         header DKIM_VALID_EF eval:check_dkim_valid_envelopefrom()\n\
         header ARC_SIGNED eval:check_arc_signed()\n\
         header ARC_VALID eval:check_arc_valid()\n";
    let s = set(&format!("authres_trusted_authserv MX.example.org\n{tests}"));
    let aligned = "Authentication-Results: mx.example.org; spf=pass smtp.mailfrom=a@example.com;\n \
                   dkim=pass (good) header.d=example.com\nFrom: A <a@Example.com>";
    let forged = aligned.replace("mx.example.org;", "mx.example.org.evil.example;");
    let ar = |results: &str| format!("Authentication-Results: mx.example.org; {results}");
    let cases: [(&str, String, &[&str]); 9] = [
        (
            "the author's domain signed, SPF passed",
            aligned.to_string(),
            &[
                "SPF_PASS",
                "DKIM_SIGNED",
                "DKIM_VALID",
                "DKIM_VALID_AU",
                "AR_DMARC_MISSING",
            ],
        ),
        (
            "the same from a server not trusted",
            forged,
            &["AR_DMARC_MISSING"],
        ),
        (
            "a trusted id inside a comment",
            "Authentication-Results: (mx.example.org;) evil.example; spf=pass".into(),
            &["AR_DMARC_MISSING"],
        ),
        (
            "a third party signed, SPF failed the sender and passed the HELO name",
            format!(
                "{}\n{}\nFrom: a@example.com",
                ar(
                    "dkim=fail header.d=example.com; dkim=pass header.d=LinkedIn.com;\n \
                    spf=fail smtp.mailfrom=a@example.com; spf=pass smtp.helo=mx.linkedin.com"
                ),
                ar("dmarc=fail (p=reject) header.from=example.com"),
            ),
            &[
                "SPF_FAIL",
                "SPF_HELO_PASS",
                "DKIM_SIGNED",
                "DKIM_VALID",
                "DKIM_VALID_LI",
                "AR_DMARC_FAIL",
                "DMARC_REJECT",
            ],
        ),
        (
            "a list signed as the envelope sender's domain, relayed under ARC",
            format!(
                "Return-Path: <bounce@lists.example>\n{}\nFrom: a@example.com",
                ar("dkim=pass header.d=lists.example; arc=pass; \
                    dmarc=fail (p=quarantine) header.from=example.com"),
            ),
            &[
                "DKIM_SIGNED",
                "DKIM_VALID",
                "AR_DMARC_FAIL",
                "DMARC_QUAR",
                "DKIM_VALID_EF",
                "ARC_SIGNED",
                "ARC_VALID",
            ],
        ),
        (
            "no DMARC policy published",
            ar("dmarc=none"),
            &["DMARC_MISSING"],
        ),
        ("DMARC passed", ar("dmarc=pass"), &["DMARC_PASS"]),
        (
            "ARC failed",
            ar("arc=fail"),
            &["AR_DMARC_MISSING", "ARC_SIGNED"],
        ),
        (
            "of two results for one method, the pass counts, whichever is newer",
            format!(
                "{}\n{}",
                ar("spf=fail smtp.mailfrom=a@example.com"),
                ar("spf=pass smtp.mailfrom=a@example.com")
            ),
            &["SPF_PASS", "AR_DMARC_MISSING"],
        ),
    ];
    for (what, head, want) in cases {
        assert_eq!(hits(&s, &mail(&head, "hi")), want, "{what}");
    }
    let untrusting = set(tests);
    assert!(hits(&untrusting, &mail(aligned, "hi")).is_empty());
    let (_, report) = RuleSet::from_text(tests, Path::new("t.cf"));
    assert_eq!(
        (report.auth_readers, report.trusted_authserv.len()),
        (16, 0)
    );
}

/// `welcomelist_auth` welcomes a From: address its own domain signed, or an envelope
/// sender SPF passed; `welcomelist_from_dkim` names the signer it accepts, `*.` any under
/// a domain; the `def_` lists feed learned features; an `un…` line takes an entry back.
#[test]
fn authenticated_welcomelists_need_a_trusted_pass_for_the_listed_sender() {
    let s = set("authres_trusted_authserv mx.example.org\n\
         welcomelist_auth *@bank.example *@gone.example\n\
         def_whitelist_auth *@shop.example\n\
         welcomelist_from_dkim *@lists.example relay.example\n\
         whitelist_from_dkim news@corp.example *.mail.example\n\
         welcomelist_from_spf billing@vendor.example\n\
         unwelcomelist_auth *@gone.example\n");
    let ar = |results: &str| format!("Authentication-Results: mx.example.org; {results}");
    let dkim = |from: &str, signer: &str| {
        mail(
            &format!(
                "{}\nFrom: {from}",
                ar(&format!("dkim=pass header.d={signer}"))
            ),
            "hi",
        )
    };
    for (from, signer, want) in [
        (
            "Alice <alice@Bank.example>",
            "bank.example",
            &["USER_IN_DKIM_WELCOMELIST"][..],
        ),
        ("alice@bank.example", "evil.example", &[]),
        ("alice@bank.example", "sub.bank.example", &[]),
        ("alice@evil.example", "bank.example", &[]),
        ("a@shop.example", "shop.example", &["USER_IN_DEF_DKIM_WL"]),
        (
            "a@lists.example",
            "relay.example",
            &["USER_IN_DKIM_WELCOMELIST"],
        ),
        ("a@lists.example", "lists.example", &[]),
        (
            "news@corp.example",
            "out.mail.example",
            &["USER_IN_DKIM_WELCOMELIST"],
        ),
        ("news@corp.example", "mail.example", &[]),
        ("x@gone.example", "gone.example", &[]),
    ] {
        assert_eq!(
            hits(&s, &dkim(from, signer)),
            want,
            "{from} signed by {signer}"
        );
    }
    let untrusted =
        dkim("alice@bank.example", "bank.example").replace("mx.example.org", "mx.evil.example");
    assert!(hits(&s, &untrusted).is_empty());

    // SPF: the sender a result names, or the Return-Path in the domain it names.
    for (head, want) in [
        (
            ar("spf=pass smtp.mailfrom=bounce@bank.example"),
            &["USER_IN_SPF_WELCOMELIST"][..],
        ),
        (
            format!(
                "Return-Path: <bounce@bank.example>\n{}",
                ar("spf=pass smtp.mailfrom=bank.example")
            ),
            &["USER_IN_SPF_WELCOMELIST"],
        ),
        (
            format!(
                "Return-Path: <bounce@evil.example>\n{}",
                ar("spf=pass smtp.mailfrom=bank.example")
            ),
            &[],
        ),
        (ar("spf=softfail smtp.mailfrom=bounce@bank.example"), &[]),
        (ar("spf=pass smtp.helo=bank.example"), &[]),
        (
            ar("spf=pass smtp.mailfrom=billing@vendor.example"),
            &["USER_IN_SPF_WELCOMELIST"],
        ),
        (
            ar("spf=pass smtp.mailfrom=x@shop.example"),
            &["USER_IN_DEF_SPF_WL"],
        ),
    ] {
        assert_eq!(
            hits(&s, &mail(&format!("{head}\nFrom: x@y.example"), "hi")),
            want,
            "{head}"
        );
    }
    let score = |rule| s.rule(rule).and_then(|r| r.score);
    assert_eq!(score("USER_IN_DKIM_WELCOMELIST"), Some(-100.0));
    assert_eq!(score("USER_IN_SPF_WELCOMELIST"), Some(-100.0));
    assert_eq!(score("USER_IN_DEF_DKIM_WL"), Some(-7.5));
    let unlisted = set("welcomelist_auth a@b.example\nunwelcomelist_auth a@b.example\n");
    assert!(unlisted.is_empty());
}

/// `:addrs` lists every address of a header, one a line; `ToCc` takes modifiers as any
/// header does.
#[test]
fn every_address_of_a_header() {
    let s = set(
        "header TWO_AT_B To:addrs =~ /\\@b\\.example$(?s:.*)\\@b\\.example$/m\n\
         header FIRST_CC ToCc:addr =~ /^first\\@/\n",
    );
    assert_eq!(
        hits(&s, &mail("To: <x@b.example>, \"Y, Z\" <y@b.example>", "hi")),
        ["TWO_AT_B"]
    );
    assert_eq!(
        hits(
            &s,
            &mail("To: Ann <first@a.example>\nCc: x@b.example", "hi")
        ),
        ["FIRST_CC"]
    );
    assert!(hits(&s, &mail("To: x@b.example (y@b.example)", "hi")).is_empty());
}

/// A pattern too large for the automaton, even alone, is skipped and reported, and the
/// others of its text run: it was counted as loaded and never ran.
#[test]
fn a_pattern_too_large_to_compile_is_skipped_and_said() {
    let big = "(?:(?:(?:(?:a{40}){40}){40}){40})?zqx";
    let text = format!("body BIG /{big}/\nheader HBIG Subject =~ /{big}/\nbody SMALL /zqx/\n");
    let (set, report) = RuleSet::from_text(&text, Path::new("big.cf"));
    let mut skipped: Vec<&str> = report.skipped.iter().map(|(n, ..)| n.as_str()).collect();
    skipped.sort();
    assert_eq!(skipped, ["BIG", "HBIG"], "{:?}", report.skipped);
    assert!(report.has_errors());
    assert_eq!(report.loaded.get(&Kind::Body), Some(&1));
    assert_eq!(hits(&set, &mail("Subject: zqx", "zqx")), ["SMALL"]);
}

/// A rule longer than any real one, as written or once its tags are replaced, is
/// refused before it is compiled: 34 KB of tags asked for 11 GB.
#[test]
fn rules_too_long_to_be_real_are_refused_quickly() {
    let started = std::time::Instant::now();
    let tags = format!(
        "replace_tag A {}\nbody T /{}/\nreplace_rules T\n",
        "[xy]".repeat(1000),
        "<A>".repeat(10_000)
    );
    let long = format!("body L /x{}/\nbody OK /fine/\n", ".{".repeat(300_000));
    let (set, report) = RuleSet::from_text(&(tags + &long), Path::new("long.cf"));
    let mut skipped: Vec<&str> = report.skipped.iter().map(|(n, ..)| n.as_str()).collect();
    skipped.sort();
    assert_eq!(skipped, ["L", "T"], "{:?}", report.skipped);
    assert_eq!(hits(&set, &mail("Subject: s", "fine")), ["OK"]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// Long patterns below that length load in time linear in it: the translator looked
/// for the end of each `{` and `[:` over the rest of the pattern, and a long plain string
/// built a DFA in the square of its length (100 KB: 20 s).
#[test]
fn long_patterns_load_in_linear_time() {
    let started = std::time::Instant::now();
    let text = format!(
        "body BRACES /x{}/\nbody PLAIN /{}/\n",
        ".{".repeat(100_000),
        "a".repeat(200_000)
    );
    let (_, report) = RuleSet::from_text(&text, Path::new("long.cf"));
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// Metas read each other in chains: ordered in linear time (10,000 took 2.8 s), each
/// after what it reads, whatever the order of the file, and what waits on a cycle skipped.
#[test]
fn meta_chains_order_in_linear_time() {
    let started = std::time::Instant::now();
    let n = 10_000;
    let mut text = String::from("body B0 /zqx/\n");
    // Written last first, so that no meta's reads are ready before it.
    for i in (1..=n).rev() {
        text.push_str(&format!("meta M{i} M{} || B0\n", i - 1));
    }
    text.push_str("meta M0 B0\nmeta C1 C2 && M5\nmeta C2 C1\nmeta AFTER C1 || M0\n");
    let (set, report) = RuleSet::from_text(&text, Path::new("chain.cf"));
    let mut skipped: Vec<&str> = report.skipped.iter().map(|(n, ..)| n.as_str()).collect();
    skipped.sort();
    assert_eq!(skipped, ["AFTER", "C1", "C2"], "{:?}", report.skipped);
    let hit = hits(&set, &mail("Subject: s", "zqx"));
    assert_eq!(hit.len(), n + 2, "{hit:?}");
    assert!(hit.iter().any(|h| h == &format!("M{n}")));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn syntax_errors_among_good_rules() {
    let text = "body GOOD1 /fine/\n\
body BAD_RE /unclosed(/\n\
header BAD_HDR Subject /no operator/\n\
body GOOD2 /also fine/\n\
body BAD_EVAL eval:check_rbl('zen')\n\
meta BAD_META (GOOD1 &&\n\
body BAD_LOOK /a\\Gb/\n\
meta CYCLE1 CYCLE2\nmeta CYCLE2 CYCLE1\n\
header GOOD3 Subject =~ /fine/\n\
endif\n";
    let (set, report) = RuleSet::from_text(text, Path::new("broken.cf"));
    let loaded: Vec<&str> = set
        .rules()
        .iter()
        .filter(|r| r.reported)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(loaded, ["GOOD1", "GOOD2", "GOOD3"]);
    let mut skipped: Vec<(String, usize)> = report
        .skipped
        .iter()
        .map(|(n, _, o, _)| (n.clone(), o.line))
        .collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            ("BAD_EVAL".to_string(), 5),
            ("BAD_HDR".into(), 3),
            ("BAD_LOOK".into(), 7),
            ("BAD_META".into(), 6),
            ("BAD_RE".into(), 2),
            ("CYCLE1".into(), 8),
            ("CYCLE2".into(), 9),
        ]
    );
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(report.problems[0].origin.line, 11);
    assert!(report.has_errors());
    assert_eq!(
        hits(&set, &mail("Subject: fine", "fine, also fine")),
        ["GOOD1", "GOOD2", "GOOD3"]
    );
}

#[test]
fn builtin_evals() {
    // (eval, message that must hit, message that must not)
    let tall = "<img src=\"http://x.example/a.png\" width=\"600\" height=\"800\">";
    let helo = |helo: &str, from: &str| {
        format!(
            "Received: from {helo} ({from})\n\tby mx.example.net; Tue, 1 Dec 2026 10:00:00 +0000\nSubject: a"
        )
    };
    let relayed = |from: &str| {
        format!(
            "Received: from h ({from})\n\tby mx.example.net; Tue, 1 Dec 2026 10:00:00 +0000\nSubject: a"
        )
    };
    // Three hops, newest first: the first two servers named after the relays above them.
    let trail = |takers: [&str; 2]| {
        format!(
            "Received: from relay.isp.example (relay.isp.example [198.51.100.7])\n\tby mx.example.net; Tue, 1 Dec 2026 10:00:00 +0000\n\
             Received: from host.sender.example (host.sender.example [203.0.113.5])\n\tby {}; Tue, 1 Dec 2026 09:59:00 +0000\n\
             Received: from pc.sender.example (pc.sender.example [203.0.113.6])\n\tby {}; Tue, 1 Dec 2026 09:58:00 +0000\nSubject: a",
            takers[0], takers[1]
        )
    };
    let html = |body: &str| mail(HTML_HEAD, &format!("<html><body>{body}</body></html>"));
    // A GIF of 321 x 34 pixels, a PNG of 10 x 10.
    let gif = b"GIF89aA\x01\x22\x00\xf7\x00\x00";
    let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    png.extend_from_slice(&[0, 0, 0, 10, 0, 0, 0, 10]);
    let images = |text: &str, parts: &[(&str, &str, &[u8])]| {
        let mut m = format!("{MULTIPART}\n\n--b\nContent-Type: text/plain\n\n{text}\n");
        for (kind, name, data) in parts {
            m.push_str(&format!(
                "--b\nContent-Type: image/{kind}; name=\"{name}\"\n\
                 Content-Transfer-Encoding: base64\n\n{}\n",
                base64(data)
            ));
        }
        m + "--b--\n"
    };
    let one_gif = images("hi", &[("gif", "scan.gif", gif)]);
    let gif_and_png = images("hi", &[("gif", "a.gif", gif), ("png", "b.png", &png)]);
    let png_only = images("hi", &[("png", "abcd.png", &png)]);
    // A PNG of 100 x 150: as many pixels as the GIF, give or take.
    let mut wide_png = png[..16].to_vec();
    wide_png.extend_from_slice(&[0, 0, 0, 100, 0, 0, 0, 150]);
    let big_png_only = images("hi", &[("png", "wide.png", &wide_png)]);
    let plain_html = html("free gift");
    let with_part = |headers: &str, body: &str| {
        format!(
            "{MULTIPART}\n\n--b\nContent-Type: text/plain\n\nhi\n--b\n{headers}\n\n{body}\n--b--\n"
        )
    };
    let alternative = |text: &str, html: &str| {
        format!(
            "Subject: a\nContent-Type: multipart/alternative; boundary=\"b\"\n\n\
             --b\nContent-Type: text/plain\n\n{text}\n\
             --b\nContent-Type: text/html\n\n{html}\n--b--\n"
        )
    };
    let stock =
        "Company: Acme Mining Corp\nS.y.m.b.o.l : ACMM\n  Current Price:\t$0.12\nTarget: $1.50";
    // A multipart/mixed of `n` text parts.
    let parts = |n: usize| {
        let mut m = format!("{MULTIPART}\n\n");
        for i in 0..n {
            m.push_str(&format!("--b\nContent-Type: text/plain\n\npart {i}\n"));
        }
        m + "--b--\n"
    };
    let mixed = |body: &str| mail(MULTIPART, body);
    let cases: Vec<(&str, String, String)> = vec![
        (
            "html_test('font_low_contrast')",
            html("<p>Hello</p><font color=\"#FFFFFE\">hidden words</font>"),
            html(
                "<font color=navy>navy</font><font color=white>&nbsp; </font>\
                 <table bgcolor=#000000><tr><td><font color=white>white on black</font></td></tr></table>",
            ),
        ),
        // A CSS background shorthand, and nothing called a colour.
        (
            "html_test('font_low_contrast')",
            html("<div style=\"background: #000\">dark on dark</div>"),
            html("<div style=\"background: url(a.png) #000\">painted over</div>"),
        ),
        // A page that names no colour but its text's, spaced as an attribute may be.
        (
            "html_test('font_low_contrast')",
            html("<body text\t=\"#ffffff\">white on white</body>"),
            html("<body text\t=\"#000000\">black on white</body>"),
        ),
        // spamnb reads `bgcolor`, where SpamAssassin does not.
        (
            "html_test('font_low_contrast')",
            html("<table bgcolor=\"#000000\"><tr><td>black on black</td></tr></table>"),
            html("<div style=\"background-color: #000; color: #fff\">white on black</div>"),
        ),
        (
            "html_test('font_invalid_color')",
            html("<font color=\"zzz\">x</font>"),
            html(
                "<font color=\"#F00\">x</font><span style=\"color: rgb(10%, 20, 30) !important\">y</span>",
            ),
        ),
        (
            "tvd_vertical_words('0', '10')",
            mail(
                "Subject: a",
                "BuyCheapPillsOnline\n\nV\n\ni\n\na\n\ng\n\nr\n\na",
            ),
            mail(
                "Subject: a",
                "BuyCheapPillsOnline\n\nbuy   cheap pills online",
            ),
        ),
        (
            "check_stock_info('3')",
            mail("Subject: a", stock),
            with_part("Content-Type: text/plain", stock),
        ),
        (
            "check_stock_info('2')",
            mail("Subject: a", "Ticker: ACMM\nOur stock symbol: ACMM"),
            mail(
                "Subject: a",
                "Symbol:\nMeeting: noon\nx: target: y\nThe stock price: up",
            ),
        ),
        (
            "check_iframe_src()",
            html("<iframe width=1 SRC = 'http://x.example/t'></iframe>"),
            html("<iframe src=' \u{a0}'></iframe><iframe></iframe><p>src=http://x.example/</p>"),
        ),
        (
            "check_msg_parse_flags('missing_head_body_separator')",
            "Subject: a\nContent-Type: multipart/mixed; boundary=b\n--b\n\nx\n--b--\n".into(),
            mixed("--b\n\nx\n--b--"),
        ),
        (
            "check_msg_parse_flags('truncated_header')",
            mail(&format!("Subject: {}", "word ".repeat(2000)), "x"),
            mail(&format!("Subject: {}", "word ".repeat(1600)), "x"),
        ),
        (
            "check_msg_parse_flags('missing_mime_headers')",
            mixed("--b\nHello, no header here.\n--b--"),
            mixed("--b\nContent-Type: text/plain\n\nHello.\n--b--"),
        ),
        (
            "check_msg_parse_flags('missing_mime_head_body_separator')",
            mixed("--b\nContent-Type: text/plain\nHello, no empty line.\n--b--"),
            mixed("--b\nContent-Type: text/plain\n\nHello.\n--b--"),
        ),
        (
            "check_msg_parse_flags('mime_epilogue_exists')",
            mixed("--b\nContent-Type: text/plain\n\nHello.\n--b--\nBuy now\n"),
            mixed("--b\nContent-Type: text/plain\n\nHello.\n--b--\n.\n\n"),
        ),
        (
            "check_msg_parse_flags('mimepart_limit_exceeded')",
            parts(1000),
            parts(999),
        ),
        (
            "check_for_mime('mimepart_limit_exceeded')",
            parts(1000),
            parts(999),
        ),
        (
            "check_ma_non_text()",
            format!(
                "{}--b\nContent-Type: image/gif\n\nGIF89a\n--b--\n",
                alternative("hi", "<p>hi</p>").trim_end_matches("--b--\n")
            ),
            format!(
                "{}--b\nContent-Type: multipart/related; boundary=r\n\n\
                 --r\nContent-Type: image/gif\n\nGIF89a\n--r--\n--b--\n",
                alternative("hi", "<p>hi</p>").trim_end_matches("--b--\n")
            ),
        ),
        (
            "multipart_alternative_difference('99', '100')",
            alternative(
                "Dear friend, see you soon.",
                "<p>Cheap <b>pills</b> now</p>",
            ),
            alternative("Cheap pills now", "<p>Cheap <b>pills</b> now</p>"),
        ),
        (
            "multipart_alternative_difference_count('3', '1')",
            alternative("one two three four five six seven", "<p>one two</p>"),
            alternative("one two three", "<p>one two</p>"),
        ),
        (
            "check_for_mime('mime_attachment')",
            with_part(
                "Content-Type: application/pdf\nContent-Disposition: attachment; filename=a.pdf",
                "x",
            ),
            with_part("Content-Type: text/plain\nContent-Disposition: inline", "x"),
        ),
        (
            "check_for_mime('mime_bad_iso_charset')",
            with_part("Content-Type: text/plain; charset=\"ISO-10646-UCS-2\"", "x"),
            with_part("Content-Type: text/plain; charset=iso-8859-15", "x"),
        ),
        (
            "check_for_mime('mime_qp_long_line')",
            mail(
                "Subject: a\nContent-Transfer-Encoding: quoted-printable",
                &"x".repeat(100),
            ),
            mail(
                "Subject: a\nContent-Transfer-Encoding: quoted-printable",
                &format!("{}=\n{}", "x".repeat(75), "x".repeat(75)),
            ),
        ),
        (
            "check_base64_length('79')",
            with_part("Content-Transfer-Encoding: base64", &"QUJD".repeat(25)),
            with_part("Content-Transfer-Encoding: base64", &"QUJD".repeat(19)),
        ),
        (
            "check_mime_multipart_ratio('0.00', '0.01')",
            alternative("x", &format!("<p>{}</p>", "y".repeat(300))),
            alternative(&"y".repeat(300), &format!("<p>{}</p>", "y".repeat(300))),
        ),
        (
            "image_count('gif', '1', '1')",
            one_gif.clone(),
            png_only.clone(),
        ),
        (
            "image_count('all', '2')",
            gif_and_png.clone(),
            one_gif.clone(),
        ),
        (
            "pixel_coverage('gif', '10000', '20000')",
            one_gif.clone(),
            big_png_only.clone(),
        ),
        (
            "pixel_coverage('png', '10000', '20000')",
            big_png_only.clone(),
            one_gif.clone(),
        ),
        (
            "image_size_exact('gif', '34', '321')",
            one_gif.clone(),
            images("hi", &[("gif", "x.gif", b"GIF87a\x22\x00A\x01")]),
        ),
        (
            "image_size_range('all', '30', '300')",
            one_gif.clone(),
            png_only.clone(),
        ),
        (
            "image_named('scan.gif')",
            one_gif.clone(),
            gif_and_png.clone(),
        ),
        (
            "image_name_regex('/^\\w{2,9}\\.\\.gif$/i')",
            images("hi", &[("gif", "abcd..GIF", gif)]),
            images("hi", &[("gif", "abcd.gif", gif)]),
        ),
        (
            "image_to_text_ratio('all', '0.000', '0.015')",
            one_gif.clone(),
            images(&"words ".repeat(50), &[("gif", "scan.gif", gif)]),
        ),
        (
            "html_range('obfuscation_ratio', '0.1', '1.0')",
            html("fr<b></b>ee gi<i></i>ft"),
            plain_html.clone(),
        ),
        (
            "html_range('bad_tag_ratio', '0.4', '1.0')",
            html("<blink><blink><foo>x</foo>"),
            plain_html.clone(),
        ),
        (
            "html_range('non_element_ratio', '0.3', '1.0')",
            html("<blink><foo>x</foo><bar>"),
            plain_html.clone(),
        ),
        (
            "html_range('closed_extra_ratio', '0.09', 'inf')",
            html("x</p></p>"),
            plain_html.clone(),
        ),
        (
            "html_range('max_size', '6', 'inf')",
            html("<font size=7>x</font>"),
            html("<font size=6>x</font>"),
        ),
        // A style sheet's size counts as the `<font size>` it is at least.
        (
            "html_range('max_size', '6', 'inf')",
            html("<p style=\"font-size: 50px\">x</p>"),
            html("<p style=\"font-size: 40px\">x</p>"),
        ),
        (
            "html_eval('length', '< 100')",
            plain_html.clone(),
            html(&"words ".repeat(30)),
        ),
        (
            "html_test('html')",
            plain_html.clone(),
            mail("Subject: a", "free gift"),
        ),
        (
            "html_test('embeds')",
            html("<object data=x></object>"),
            plain_html.clone(),
        ),
        (
            "html_test('form_action_mailto')",
            html("<form action='mailto:a@example.org'></form>"),
            html("<form action='https://example.org/'></form>"),
        ),
        (
            "html_text_match('comment', '<!(?!-).{0,6}>')",
            html("fr<!x>ee"),
            html("<!-- a comment -->"),
        ),
        (
            "html_text_match('anchor', '<img>')",
            html("<a href=http://x.example/><img src=a.gif></a>"),
            html("<a href=http://x.example/>text</a>"),
        ),
        (
            "html_title_subject_ratio('2')",
            mail(
                HTML_HEAD,
                "<html><head><title>a long title</title></head></html>",
            ),
            mail(HTML_HEAD, "<html><head><title>hi</title></head></html>"),
        ),
        (
            "helo_ip_mismatch()",
            mail(&helo("[203.0.113.9]", "unknown [198.51.100.7]"), "x"),
            mail(&helo("[198.51.100.9]", "unknown [198.51.100.7]"), "x"),
        ),
        (
            "check_for_no_rdns_dotcom_helo()",
            mail(&helo("mx3.mail.yahoo.com", "unknown [198.51.100.7]"), "x"),
            mail(
                &helo("mx3.mail.yahoo.com", "mx3.mail.yahoo.com [198.51.100.7]"),
                "x",
            ),
        ),
        (
            "check_no_relays()",
            mail(
                "Received: by mx.example.net (Postfix, from userid 1000)\nSubject: a",
                "x",
            ),
            mail(&relayed("localhost [127.0.0.1]"), "x"),
        ),
        (
            "check_unresolved_template()",
            mail("X-Campaign: %CUSTOMER_ID\nSubject: a", "x"),
            mail(
                "X-Campaign: 100%\nSubject: save %PERCENT off\n\
                 List-Unsubscribe: <https://x.example/u?n=%EF%BB%BF%CE%A9>",
                "x",
            ),
        ),
        (
            "check_ratware_name_id()",
            mail(
                "Message-ID: <ABCDEFGHIJKLMNOPQRSTUVWXYZAB.joe@bulk.example>\nFrom: \"Joe\" <joe@bulk.example>",
                "x",
            ),
            mail(
                "Message-ID: <ABCDEFGHIJKLMNOPQRSTUVWXYZAB.joe@bulk.example>\nFrom: \"Joe\" <ann@bulk.example>",
                "x",
            ),
        ),
        (
            "check_ratware_envelope_from()",
            mail(
                "Return-Path: <example.com.joe@bulk.example>\nTo: joe@mail.example.com",
                "x",
            ),
            mail("Return-Path: <news@bulk.example>\nTo: joe@example.com", "x"),
        ),
        (
            // 01dd817a is the Date's time as Outlook Express writes it.
            "check_outlook_message_id()",
            mail(
                &format!(
                    "Message-ID: <000000000000$4fe5d9a0$0100a8c0@pc>\n{}",
                    relayed("h [198.51.100.7]")
                ),
                "x",
            ),
            mail(
                "Message-ID: <000001dd817a$4fe5d9a0$0100a8c0@pc>\nDate: Tue, 1 Dec 2026 10:01:00 +0000",
                "x",
            ),
        ),
        (
            "sorted_recipients()",
            mail(
                "To: a@x.example, b@x.example, c@x.example, d@x.example\nCc: e@x.example, f@x.example, g@x.example",
                "x",
            ),
            mail(
                "To: a@x.example, c@x.example, b@x.example, d@x.example\nCc: e@x.example, f@x.example, g@x.example",
                "x",
            ),
        ),
        (
            "similar_recipients('0.65', 'undef')",
            mail(
                "To: ab1@ab1.example, ab2@ab2.example, ab3@ab3.example, ab4@ab4.example, ab5@ab5.example",
                "x",
            ),
            mail(
                "To: a@one.example, b@two.example, c@three.example, d@four.example, e@five.example",
                "x",
            ),
        ),
        (
            "gated_through_received_hdr_remover()",
            mail("Subject: a", "x"),
            mail(&relayed("h [198.51.100.7]"), "x"),
        ),
        (
            "check_for_forged_yahoo_received_headers()",
            mail(
                &format!("From: joe@yahoo.com\n{}", relayed("h [198.51.100.7]")),
                "x",
            ),
            mail(
                "From: joe@yahoo.com\nReceived: from [203.0.113.5] by sonic301.consmr.mail.ne1.yahoo.com with HTTP; Tue, 1 Dec 2026 10:00:00 +0000",
                "x",
            ),
        ),
        // Handed on by a relay that Yahoo's name is on, in no path the patterns know.
        (
            "check_for_forged_yahoo_received_headers()",
            mail(
                &format!("From: joe@yahoo.com\n{}", relayed("h [198.51.100.7]")),
                "x",
            ),
            mail(
                &format!(
                    "From: joe@yahoo.com\n{}",
                    relayed("mta.mail.yahoo.com [198.51.100.7]")
                ),
                "x",
            ),
        ),
        (
            "check_for_forged_gmail_received_headers()",
            mail(
                &format!("From: joe@gmail.com\n{}", relayed("h [198.51.100.7]")),
                "x",
            ),
            mail(
                &format!(
                    "From: joe@gmail.com\nX-Received: by 2002:a05:6a00:1a8e:b0:70d with SMTP id x14mr\n{}",
                    relayed("mail-pf1-f170.google.com [209.85.210.170]")
                ),
                "x",
            ),
        ),
        (
            "check_for_no_hotmail_received_headers()",
            mail(
                &format!("From: joe@hotmail.com\n{}", relayed("h [198.51.100.7]")),
                "x",
            ),
            mail(
                "From: joe@hotmail.com\nX-OriginatorOrg: sct-15-20-4755-11-msonline-outlook-12345.templateTenant\n\
                 Received: from EUR05-AM6-obe.outbound.protection.outlook.com (mail-am6eur05olkn2010.outbound.protection.outlook.com [40.92.1.1]) by mx.example.net",
                "x",
            ),
        ),
        (
            "check_for_forged_hotmail_received_headers()",
            mail(
                "Received: from hotmail.com (unknown [198.51.100.7]) by mx.example.net\nSubject: a",
                "x",
            ),
            mail(&relayed("h [198.51.100.7]"), "x"),
        ),
        // Hotmail's own path, with the sender's address it records.
        (
            "check_for_forged_hotmail_received_headers()",
            mail(
                "Received: from hotmail.com (unknown [198.51.100.7]) by mx.example.net\nSubject: a",
                "x",
            ),
            mail(
                "Received: from hotmail.com (bay1.hotmail.com [198.51.100.7]) by mx.example.net\n\
                 X-Originating-IP: [203.0.113.5]\nSubject: a",
                "x",
            ),
        ),
        (
            "check_for_forged_juno_received_headers()",
            mail(
                &format!("From: ann@juno.com\n{}", relayed("h [198.51.100.7]")),
                "x",
            ),
            mail(
                "From: ann@juno.com\nX-Originating-IP: [203.0.113.5]\nX-Mailer: Juno 5.0.33\n\
                 Received: from m1.untd.com (m1.untd.com [64.136.1.1]) by mx.example.net",
                "x",
            ),
        ),
        (
            "check_for_forged_eudoramail_received_headers()",
            mail(
                &format!("From: ann@eudoramail.com\n{}", relayed("h [198.51.100.7]")),
                "x",
            ),
            mail(
                "From: ann@eudoramail.com\nX-Sender-IP: 203.0.113.5\n\
                 Received: from [203.0.113.5] by mail.whowhere.com; Tue, 1 Dec 2026 10:00:00 +0000",
                "x",
            ),
        ),
        (
            "check_for_fake_aol_relay_in_rcvd()",
            mail(
                "Received: from rly-xa01.mx.aol.com (rly-xa01.mx.aol.com [198.51.100.7]) by mx.example.net\nSubject: a",
                "x",
            ),
            mail(
                "Received: from rly-xa01.mx.aol.com (rly-xa01.mx.aol.com [198.51.100.7]) by mx.example.net with ESMTP id MAILRELAYXA012\nSubject: a",
                "x",
            ),
        ),
        (
            "check_for_forged_received_trail()",
            mail(&trail(["smtp.other.example", "out.third.example"]), "x"),
            mail(&trail(["relay.isp.example", "out.sender.example"]), "x"),
        ),
        (
            "check_relays_unparseable()",
            mail(&relayed("mail.example.org"), "x"),
            mail(&relayed("mail.example.org [198.51.100.7]"), "x"),
        ),
        (
            "check_mailfrom_matches_rcvd()",
            mail(
                &format!(
                    "Return-Path: <bounce@news.example.com>\n{}",
                    relayed("mta1.example.com [198.51.100.7]")
                ),
                "x",
            ),
            mail(
                &format!(
                    "Return-Path: <bounce@news.example.com>\n{}",
                    relayed("mta1.other.example [198.51.100.7]")
                ),
                "x",
            ),
        ),
        (
            "check_for_mime_html_only()",
            mail(HTML_HEAD, "<html><body>hi</body></html>"),
            mail("Subject: a", "plain"),
        ),
        (
            "html_image_ratio('0.000', '0.004')",
            mail(HTML_HEAD, &format!("<html><body>{tall} buy</body></html>")),
            mail(
                HTML_HEAD,
                &format!("<html><body>{tall} {}</body></html>", "words ".repeat(400)),
            ),
        ),
        (
            "html_image_only('0', '400')",
            mail(HTML_HEAD, &format!("<html><body>{tall} buy</body></html>")),
            mail(HTML_HEAD, "<html><body>no images here</body></html>"),
        ),
        (
            "html_tag_balance('head', '!= 0')",
            mail(
                HTML_HEAD,
                "<html><head><title>x</title><head><body>x</body></html>",
            ),
            mail(
                HTML_HEAD,
                "<html><head><title>x</title></head><body>x</body></html>",
            ),
        ),
        (
            "html_tag_reopened('head')",
            mail(
                HTML_HEAD,
                "<html><head><title>x</title></head><HEAD >\n<body>x</body></html>",
            ),
            mail(
                HTML_HEAD,
                "<html><head><title>x</title></head><headline>x</headline></html>",
            ),
        ),
        (
            "html_tag_exists('iframe')",
            mail(
                HTML_HEAD,
                "<html><body><iframe src=x></iframe></body></html>",
            ),
            mail(HTML_HEAD, "<html><body>x</body></html>"),
        ),
        (
            "check_for_mime_html()",
            mail(HTML_HEAD, "<p>hi</p>"),
            mail("Subject: a", "<p>markup in plain text</p>"),
        ),
        (
            "check_for_matching_env_and_hdr_from()",
            mail(
                "Return-Path: <Ann@Example.org>\nFrom: Ann <ann@example.org>",
                "x",
            ),
            mail(
                "Return-Path: <bounce-1@lists.example>\nFrom: ann@example.org",
                "x",
            ),
        ),
        (
            "check_equal_from_domains()",
            mail("Return-Path: <a@bulk.example>\nFrom: b@bank.example", "x"),
            mail(
                "Return-Path: <a@mail.bank.example>\nFrom: b@BANK.example",
                "x",
            ),
        ),
        (
            "check_for_to_in_subject('address')",
            mail(
                "To: jane@example.org\nSubject: for JANE@example.org only",
                "x",
            ),
            mail("To: jane@example.org\nSubject: for myjane@example.org", "x"),
        ),
        (
            "check_for_to_in_subject('user')",
            mail(
                "To: Jane <jane@example.org>\nSubject: jane, your prize",
                "x",
            ),
            mail("To: jane@example.org\nSubject: janet, your prize", "x"),
        ),
        (
            "check_for_to_in_subject('user')",
            mail("To: jane@example.org\nSubject: Re: hello Jane", "x"),
            mail("To: jane@example.org\nSubject: Re: hello there Jane", "x"),
        ),
        (
            "check_blank_line_ratio('50', '100', '4')",
            mail("Subject: a", "one\n\n\n\n\ntwo"),
            mail("Subject: a", "one\n\n\n\n\ntwo\nthree\nfour\nfive\nsix"),
        ),
        (
            "check_blank_line_ratio('0', '10', '3')",
            mail("Subject: a", "one\ntwo\nthree"),
            mail("Subject: a", "one\n\n"),
        ),
        (
            "subject_is_all_caps()",
            mail("Subject: MAKE MONEY FAST TODAY", "x"),
            mail("Subject: Make MONEY fast", "x"),
        ),
        (
            "check_from_local_digits('5')",
            mail("From: <1234567x@example.org>", "x"),
            mail("From: <bob1234567@example.org>", "x"),
        ),
        (
            // An encoded word is display name, whatever address it decodes to.
            "check_from_local_digits('5')",
            mail("From: =?utf-8?q?bob?= <1234567x@example.org>", "x"),
            mail(
                "From: =?utf-8?q?1234567=40x=2Eexample_=22?= <bob@example.org>",
                "x",
            ),
        ),
        (
            "check_for_shifted_date('undef', '-48')",
            mail(
                "Received: from a by b; Thu, 22 Aug 2002 18:26:25 -0700\nDate: Mon, 1 Jul 2002 10:00:00 -0700",
                "x",
            ),
            mail(
                "Received: from a by b; Thu, 22 Aug 2002 18:26:25 -0700\nDate: Thu, 22 Aug 2002 18:20:00 -0700",
                "x",
            ),
        ),
        (
            "check_for_shifted_date('12', 'undef')",
            mail(
                "Received: from a by b; Thu, 22 Aug 2002 18:26:25 -0700\nDate: Sat, 24 Aug 2002 10:00:00 -0700",
                "x",
            ),
            mail(
                "Received: from a by b; Thu, 22 Aug 2002 18:26:25 -0700\nDate: Thu, 22 Aug 2002 18:20:00 -0700",
                "x",
            ),
        ),
        (
            "check_for_missing_header('Message-Id')",
            mail("Subject: a", "x"),
            mail("Subject: a\nMessage-ID: <a@b>", "x"),
        ),
        (
            "check_for_missing_to_header()",
            mail("Subject: a", "x"),
            mail("To: <a@b.example>", "x"),
        ),
        (
            "check_link_domain_mismatch()",
            mail(
                HTML_HEAD,
                "<a href=\"http://evil.example.net/login\">www.paypal.com</a>",
            ),
            mail(
                HTML_HEAD,
                "<a href=\"https://www.paypal.com/login\">paypal.com</a> <a href=\"http://x.example\">click</a>",
            ),
        ),
        (
            "check_https_http_mismatch()",
            mail(
                HTML_HEAD,
                "<a href=\"http://bank.example/\">https://bank.example/</a>",
            ),
            mail(
                HTML_HEAD,
                "<a href=\"https://bank.example/\">https://bank.example/</a>",
            ),
        ),
        (
            "check_for_mime('mime_base64_encoded_text')",
            mail(
                "Subject: a\nContent-Type: text/plain\nContent-Transfer-Encoding: base64",
                "aGVsbG8gd29ybGQ=",
            ),
            mail("Subject: a\nContent-Type: text/plain", "hello world"),
        ),
        // Parts as the parser found them: a text that quotes a MIME part's headers is text,
        // and a base64 attachment is no base64 text.
        (
            "check_for_mime('mime_base64_encoded_text')",
            mail(
                MULTIPART,
                "--b\nContent-Type: text/html\nContent-Transfer-Encoding: base64\n\n\
                 PGI+aGk8L2I+\n--b--\n",
            ),
            mail(
                MULTIPART,
                "--b\nContent-Type: text/plain\n\nThe report, as sent:\n--x\n\
                 Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\n--b\n\
                 Content-Type: application/pdf\nContent-Transfer-Encoding: base64\n\n\
                 JVBERi0=\n--b--\n",
            ),
        ),
        (
            "check_for_mime('mime_base64_count')",
            mail(
                MULTIPART,
                "--b\nContent-Type: text/plain\n\nhi\n--b\nContent-Type: application/pdf\n\
                 Content-Transfer-Encoding: base64\n\nJVBERi0=\n--b--\n",
            ),
            mail(
                "Subject: a\nContent-Type: text/plain",
                "Content-Transfer-Encoding: base64",
            ),
        ),
        (
            "check_for_mime('mime_qp_count')",
            mail(
                "Subject: a\nContent-Type: text/plain\nContent-Transfer-Encoding: Quoted-Printable",
                "caf=C3=A9",
            ),
            mail(
                "Subject: a\nContent-Type: text/plain",
                "Content-Transfer-Encoding: quoted-printable",
            ),
        ),
        (
            "check_header_count_range('Subject', '2', '9')",
            mail("Subject: a\nSubject: b", "x"),
            mail("Subject: a", "x"),
        ),
        (
            "check_for_uppercase('50', '100')",
            mail("Subject: a", &"BUY NOW CHEAP ".repeat(30)),
            mail("Subject: a", &"Buy now cheap ".repeat(30)),
        ),
        (
            "check_body_length('10')",
            mail("Subject: a", "hi"),
            mail("Subject: a", &"long text ".repeat(10)),
        ),
        (
            "check_illegal_chars('Subject', '0.30', '3')",
            "Subject: \u{e9}\u{e9}\u{e9}\u{e9}\n\nx\n".to_string(),
            mail("Subject: plain words", "x"),
        ),
        // ALL is the header block alone, with CRLF line ends too: the body's bytes are
        // not the headers'.
        (
            "check_illegal_chars('ALL', '0.10', '3')",
            "Subject: \u{e9}\u{e9}\u{e9}\u{e9}\r\n\r\nx\r\n".to_string(),
            "Subject: plain words\r\n\r\n\u{e9}\u{e9}\u{e9}\u{e9}\r\n".to_string(),
        ),
    ];
    for (call, yes, no) in cases {
        let rules = format!("body T eval:{call}\ndescribe T t\n");
        check(&rules, "T", &yes, &no);
    }
}

/// SpamAssassin calls check_msg_parse_flags from header rules and from body rules: both
/// read the same flags.
#[test]
fn parse_flags_are_read_by_header_and_body_rules() {
    let headers_only = "Subject: a\nFrom: b@example.org".to_string();
    let whole = mail("Subject: a\nFrom: b@example.org", "x");
    for kind in ["header", "body"] {
        let rules = format!("{kind} T eval:check_msg_parse_flags('missing_head_body_separator')\n");
        check(&rules, "T", &headers_only, &whole);
    }
}

#[test]
fn plugin_blocks_and_replace_tags() {
    let text = "ifplugin Mail::SpamAssassin::Plugin::DNSEval\nheader RBL eval:check_rbl('x')\nendif\n\
replace_tag V (?:v|\\\\\\/)\nreplace_tag I [i1!|]\nbody VIAG /<V><I>agra/i\nreplace_rules VIAG\n";
    let (set, report) = RuleSet::from_text(text, Path::new("t.cf"));
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert!(
        !report.has_errors(),
        "a missing plugin is not an error: {:?}",
        report.skipped
    );
    assert_eq!(hits(&set, &mail("Subject: a", "cheap \\/1agra")), ["VIAG"]);
}

#[test]
fn unicode_text_does_not_break_ascii_rules() {
    check(
        "body W /\\bprix\\b/i",
        "W",
        &mail(
            "Subject: a\nContent-Type: text/plain; charset=utf-8",
            "Le meilleur prix — très bas",
        ),
        &mail(
            "Subject: a\nContent-Type: text/plain; charset=utf-8",
            "leprix très bas",
        ),
    );
}

/// Older rule files are Latin-1: a byte that is not UTF-8 is read as its Latin-1
/// character, and matches that character in the (UTF-8) text.
#[test]
fn a_latin1_rule_file_means_its_characters() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.cf");
    std::fs::write(
        &file,
        b"body GUEI /\\bgu[e\xe9]i\\b/\ndescribe GUEI gu\xe9i\n",
    )
    .unwrap();
    let (s, report) = RuleSet::load(&[file]);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(
        s.rule("GUEI").and_then(|r| r.describe.as_deref()),
        Some("guéi")
    );
    let utf8 = "Subject: a\nContent-Type: text/plain; charset=utf-8";
    assert_eq!(hits(&s, &mail(utf8, "le gu\u{e9}i")), ["GUEI"]);
    assert!(hits(&s, &mail(utf8, "le guai")).is_empty());
}

#[test]
fn our_rules_load_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let (set, report) = RuleSet::load(&[dir]);
    assert!(
        !report.has_errors(),
        "{:?} {:?}",
        report.skipped,
        report.problems
    );
    let reported: Vec<&Rule> = set.rules().iter().filter(|r| r.reported).collect();
    assert!(reported.len() >= 80, "only {} rules", reported.len());
    for r in reported {
        assert!(
            r.describe.is_some(),
            "{} at {} has no describe",
            r.name,
            r.origin
        );
    }
}

/// A message written for `rules/`, with the rules it must hit and those it must miss.
struct Example {
    at: String,
    hits: Vec<String>,
    misses: Vec<String>,
    raw: String,
}

/// The examples of one file: blocks that each open with a line `=== hits A B; misses C D`
/// (either half may be left out), the message being the lines up to the next block. Lines
/// before the first block are comments.
fn read_examples(path: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut examples: Vec<Example> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some(head) = line.strip_prefix("=== ") else {
            if let Some(e) = examples.last_mut() {
                e.raw.push_str(line);
                e.raw.push('\n');
            }
            continue;
        };
        let mut e = Example {
            at: format!("{}:{}", path.file_name().unwrap().to_string_lossy(), n + 1),
            hits: Vec::new(),
            misses: Vec::new(),
            raw: String::new(),
        };
        for part in head.split(';') {
            let mut words = part.split_whitespace();
            let names = words.clone().skip(1).map(String::from);
            match words.next() {
                Some("hits") => e.hits.extend(names),
                Some("misses") => e.misses.extend(names),
                _ => panic!("{}: `=== hits A B; misses C D`, not `{line}`", e.at),
            }
        }
        examples.push(e);
    }
    examples
}

/// Every rule of `rules/` on messages written for it, in `tests/rule-examples/` (a file of
/// examples for each rule file, and a `local.cf` that trusts the examples' receiving
/// server, as a site would): each reported rule hits one example and misses another, so a
/// rule that cannot match what it describes, or matches what it should not, is caught
/// here rather than by the corpus, in which today's scams do not appear at all.
#[test]
fn our_rules_hit_their_examples_and_miss_their_near_misses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let examples_dir = root.join("tests").join("rule-examples");
    let (set, report) = RuleSet::load(&[root.join("rules"), examples_dir.clone()]);
    assert!(!report.has_errors(), "{:?}", report.problems);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&examples_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let examples: HashMap<PathBuf, Vec<Example>> = files
        .iter()
        .map(|f| (f.clone(), read_examples(f)))
        .collect();

    let mut failures = Vec::new();
    for rule in set.rules().iter().filter(|r| r.reported) {
        let stem = rule.origin.file.file_stem().unwrap().to_string_lossy();
        let file = examples_dir.join(format!("{stem}.txt"));
        let ours = examples.get(&file).map_or(&[][..], Vec::as_slice);
        let named = |list: &[String]| list.contains(&rule.name);
        let shown = file.strip_prefix(root).unwrap().display();
        if !ours.iter().any(|e| named(&e.hits)) {
            failures.push(format!("{}: no example in {shown} hits it", rule.name));
        }
        if !ours.iter().any(|e| named(&e.misses)) {
            failures.push(format!("{}: no example in {shown} misses it", rule.name));
        }
    }
    for file in &files {
        for e in &examples[file] {
            let found = set.evaluate(&Message::parse(e.raw.as_bytes(), LIMIT));
            for name in e.hits.iter().chain(&e.misses) {
                if set.rule(name).is_none_or(|r| !r.reported) {
                    failures.push(format!("{}: no reported rule {name}", e.at));
                }
            }
            for name in &e.hits {
                if !found.contains(&name.as_str()) {
                    failures.push(format!("{}: {name} should hit; hits {found:?}", e.at));
                }
            }
            for name in &e.misses {
                if found.contains(&name.as_str()) {
                    failures.push(format!("{}: {name} should miss; hits {found:?}", e.at));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The list of message files the profiles read: one path a line, in the file that
/// `PROFILE_MESSAGES` names.
fn profile_messages() -> String {
    let list = std::env::var("PROFILE_MESSAGES")
        .expect("PROFILE_MESSAGES names a file listing one message path a line");
    std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("{list}: {e}"))
}

#[test]
#[ignore = "a profile, not a test: PROFILE_MESSAGES=list cargo test --release -- --ignored rules_profile --nocapture"]
fn rules_profile() {
    let dir = std::env::var("RULES")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/rules").into());
    let (set, _) = RuleSet::load(&[dir.into()]);
    let files: Vec<String> = profile_messages().lines().map(String::from).collect();
    let raws: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let t = std::time::Instant::now();
    let msgs: Vec<Message> = raws.iter().map(|r| Message::parse(r, LIMIT)).collect();
    println!("parse {:?}", t.elapsed());
    for (what, d) in profile(&set, &msgs) {
        println!("{d:>12?} {what}");
    }
}

#[test]
#[ignore = "a profile, not a test"]
fn rules_profile_patterns() {
    let dir = std::env::var("RULES")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/rules").into());
    let files: Vec<String> = profile_messages().lines().map(String::from).collect();
    let raws: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let msgs: Vec<Message> = raws.iter().map(|r| Message::parse(r, LIMIT)).collect();
    let bodies: Vec<String> = msgs.iter().map(body_text).collect();
    let parsed = read_files(&[dir.into()], &mut LoadReport::default());
    let mut times = Vec::new();
    let alls: Vec<String> = msgs
        .iter()
        .map(|m| Target::All.text(m).unwrap_or_default().into_owned())
        .collect();
    for def in parsed
        .rules
        .iter()
        .filter(|d| d.kind == Kind::Header && d.text.starts_with("ALL "))
    {
        let Ok(p) = perl::split_delimited(split_header_rule(&def.text).unwrap().2) else {
            continue;
        };
        let Ok(t) = perl::translate(&p) else { continue };
        let Ok(re) = regex::bytes::Regex::new(&t.rust) else {
            continue;
        };
        let start = std::time::Instant::now();
        for b in &alls {
            let _ = re.is_match(b.as_bytes());
        }
        times.push((start.elapsed(), format!("{} {}", def.name, t.rust)));
    }
    for def in parsed
        .rules
        .iter()
        .filter(|d| d.kind == Kind::Body && !d.text.starts_with("eval:"))
    {
        let Ok(mut p) = perl::split_delimited(&def.text) else {
            continue;
        };
        p.flags.push('m');
        let Ok(t) = perl::translate(&p) else { continue };
        let Ok(re) = regex::bytes::Regex::new(&t.rust) else {
            continue;
        };
        let start = std::time::Instant::now();
        for b in &bodies {
            let _ = re.is_match(b.as_bytes());
        }
        times.push((start.elapsed(), format!("{} {}", def.name, t.rust)));
    }
    times.sort();
    for (d, n) in times.iter().rev().take(15) {
        println!("{d:>12?} {n}");
    }
}

#[test]
fn tflags_multiple_counts_matches_up_to_maxhits() {
    let s = set("body __CASH /\\bcash\\b/i\n\
         tflags __CASH multiple maxhits=3\n\
         body __FREE /\\bfree\\b/i\n\
         meta CASH_TWICE __CASH > 1\n\
         meta CASH_THRICE __CASH >= 3\n\
         meta FREE_TWICE __FREE > 1\n\
         rawbody __CLICK /click/i\n\
         tflags __CLICK multiple\n\
         meta CLICKS __CLICK >= 2\n\
         body __PRICE /\\d+(?= USD)/\n\
         tflags __PRICE multiple\n\
         meta PRICES __PRICE >= 2\n");
    let body = "Subject: hi\n\nCash now. More cash, cash and cash. Free, free!\nclick click\n\
        10 USD or 20 USD\n";
    let got = hits(&s, body);
    // Counted by the backtracker too (look-ahead).
    assert!(got.contains(&"PRICES".to_string()), "{got:?}");
    assert!(got.contains(&"CASH_TWICE".to_string()), "{got:?}");
    assert!(got.contains(&"CASH_THRICE".to_string()), "{got:?}");
    assert!(got.contains(&"CLICKS".to_string()), "{got:?}");
    // Without `multiple` a rule hits once, however often it matches.
    assert!(!got.contains(&"FREE_TWICE".to_string()), "{got:?}");
    let once = hits(&s, "Subject: hi\n\nCash now.\nclick\n10 USD or 20 EUR\n");
    assert!(once.is_empty(), "{once:?}");
    // maxhits caps the count.
    let msg = Message::parse(body.as_bytes(), LIMIT);
    let all = s.evaluate_all(&msg);
    let cash = s.rules().iter().position(|r| r.name == "__CASH").unwrap();
    assert_eq!(all[cash], 3);
}

#[test]
fn the_built_in_rules_are_the_repository_rules() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/rules");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cf"))
        .collect();
    files.sort();
    let listed: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
    assert_eq!(files, listed, "a file of rules/ is missing from BUILT_IN");
    let (built_in, report) = RuleSet::built_in();
    let (from_files, _) = RuleSet::load(&[dir.into()]);
    assert!(report.skipped.is_empty() && report.problems.is_empty());
    let names = |s: &RuleSet| s.rules().iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&built_in), names(&from_files));
    assert!(
        built_in.rules()[0]
            .origin
            .to_string()
            .starts_with(BUILT_IN_DIR)
    );
}

/// A rule can fail after its pattern compiled: here the exact form of a widened count is
/// too big to build. Nothing of it may stay behind to answer for the next rule.
#[test]
fn a_rule_that_fails_late_leaves_nothing_behind() {
    let (s, report) = RuleSet::from_text(
        "body HUGE /a{9000000}b/\nbody NEXT /zzz/\n",
        Path::new("late.cf"),
    );
    let skipped: Vec<&str> = report.skipped.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(skipped, ["HUGE"]);
    assert!(hits(&s, &mail("Subject: a", "aaab")).is_empty());
    assert_eq!(hits(&s, &mail("Subject: a", "zzz")), ["NEXT"]);
}

/// On a thread pool the work spreads over its threads, in order; off one it stays on the
/// caller's thread and starts none (a hook).
#[test]
fn in_parallel_spreads_on_a_pool_and_stays_home_off_it() {
    let work = |i: usize| {
        std::thread::sleep(std::time::Duration::from_millis(1));
        (i, rayon::current_thread_index())
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let pooled = pool.install(|| in_parallel((0..64).collect(), work));
    assert!(pooled.iter().map(|(i, _)| *i).eq(0..64));
    let threads: std::collections::HashSet<_> = pooled.iter().map(|(_, t)| *t).collect();
    assert_eq!(threads.len(), 2, "{threads:?}");
    let alone = in_parallel((0..64).collect(), work);
    assert!(alone.iter().map(|(i, _)| *i).eq(0..64));
    assert!(alone.iter().all(|(_, t)| t.is_none()));
}

/// `check` compiles on rayon's threads, a hook on its own: each rule must land in the same
/// place either way, skipped ones skipped alike, big matchers (triggers) included.
#[test]
fn rules_compiled_across_threads_are_the_rules_compiled_in_turn() {
    let mut text: String = BUILT_IN
        .iter()
        .map(|(_, t)| *t)
        .collect::<Vec<_>>()
        .join("\n");
    for i in 0..80 {
        text.push_str(&format!("body GEN_{i} /\\bword{i}x\\w*\\b/i\n"));
        text.push_str(&format!("header GENH_{i} Subject =~ /subject{i}y/\n"));
    }
    text.push_str("body BROKEN /(unclosed/\nmeta GEN_BOTH GEN_3 && GENH_4\n");
    let compile = || RuleSet::from_text(&text, Path::new("mixed.cf"));
    let (alone, alone_report) = compile();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let (pooled, pooled_report) = pool.install(compile);
    let described = |s: &RuleSet| {
        s.rules()
            .iter()
            .map(|r| format!("{} {:?} {} {}", r.name, r.kind, r.reported, r.is_eval))
            .collect::<Vec<_>>()
    };
    assert_eq!(described(&alone), described(&pooled));
    assert!(alone.len() > 250, "{} rules", alone.len());
    assert_eq!(alone_report.loaded, pooled_report.loaded);
    let skipped = |r: &LoadReport| r.skipped.iter().map(|s| s.0.clone()).collect::<Vec<_>>();
    assert_eq!(skipped(&alone_report), ["BROKEN"]);
    assert_eq!(skipped(&alone_report), skipped(&pooled_report));
    for raw in [
        mail("Subject: subject4y", "word3x and word77xyz, click here"),
        mail("Subject: URGENT", "100% guaranteed! word12x"),
        mail(
            HTML_HEAD,
            "<html><img src=a.gif width=1 height=1>word79x</html>",
        ),
    ] {
        let got = hits(&pooled, &raw);
        assert_eq!(got, hits(&alone, &raw));
        assert!(got.len() >= 2, "{got:?}");
    }
    assert!(hits(&pooled, &mail("Subject: subject4y", "word3x")).contains(&"GEN_BOTH".into()));
}

/// Patterns per set of those a matcher runs unanchored.
fn unanchored_sets(m: &Matcher) -> Vec<usize> {
    m.sets.iter().map(|(set, _)| set.len()).collect()
}

/// A pattern that counts far multiplies the states of the patterns it shares a lazy DFA
/// with: where they run unanchored (here each may begin at any letter), it runs in a set
/// of its own, and still hits beside the others.
#[test]
fn a_pattern_that_counts_far_runs_in_a_set_of_its_own() {
    let rules = "uri LONG /[a-z0-9]{30}/i\n\
        uri SHORT m{^https?://bit\\.ly/}i\n\
        uri EXAMPLE m{[a-z]\\.example/}i\n\
        uri EXE /[a-z]\\.exe$/i\n";
    let s = set(rules);
    assert_eq!(unanchored_sets(&s.uri), [2, 1]);
    let long = "https://averyveryverylonghostnameforatest.example/x.exe";
    assert_eq!(
        hits(
            &s,
            &mail("Subject: a", &format!("see {long} and https://bit.ly/x"))
        ),
        ["LONG", "SHORT", "EXAMPLE", "EXE"]
    );
    assert_eq!(
        hits(&s, &mail("Subject: a", "see https://short.test/x")),
        Vec::<String>::new()
    );
}

/// One pattern that may begin at any letter keeps no other pattern of its set from
/// running anchored: it runs unanchored beside them, and all still hit.
#[test]
fn a_pattern_that_begins_anywhere_runs_beside_the_anchored_set() {
    let s = set("body FREE /\\bfree\\b/i\n\
        body SPLIT /[a-z]<!--/i\n\
        body GIFT /\\bgift\\b/\n");
    assert!(s.body.is_anchored());
    assert_eq!(unanchored_sets(&s.body), [1]);
    assert_eq!(
        hits(&s, &mail("Subject: a", "a FREE gift: x<!-- y")),
        ["FREE", "SPLIT", "GIFT"]
    );
    assert_eq!(
        hits(&s, &mail("Subject: a", "freedom, gifts, <!--")),
        Vec::<String>::new()
    );
}

/// Patterns that each may begin anywhere at a few bytes join the set until together they
/// would begin at too many: the one past that budget runs beside it, not the whole set.
#[test]
fn the_anywhere_budget_leaves_out_the_pattern_past_it_not_the_set() {
    let s = set("body FREE /\\bfree\\b/i\n\
        body LOW /[a-j]@@/\n\
        body HIGH /[k-t]@@/\n");
    assert!(s.body.is_anchored());
    assert_eq!(unanchored_sets(&s.body), [1]);
    assert_eq!(
        hits(&s, &mail("Subject: a", "free a@@ and k@@")),
        ["FREE", "LOW", "HIGH"]
    );
}

/// Anchored runs are an optimisation: a rule edit that quietly left a pattern out of them
/// (one whose beginning cannot be told) would cost a tenth of `check`.
#[test]
fn the_built_in_text_rules_run_anchored_and_match_as_sets_would() {
    let (set, _) = RuleSet::built_in();
    for (kind, matcher) in [
        ("body", &set.body),
        ("rawbody", &set.rawbody),
        ("uri", &set.uri),
    ] {
        assert!(
            matcher.is_anchored() && matcher.sets.is_empty(),
            "a {kind} pattern runs unanchored"
        );
    }
    let (mut plain, _) = RuleSet::built_in();
    for matcher in [&mut plain.body, &mut plain.rawbody, &mut plain.uri] {
        *matcher = std::mem::take(matcher).unanchored();
    }
    // Text made of the words, tags and URL pieces the patterns look for.
    let words: Vec<&str> = "free gift $$$ !!!! click here dear friend you have been selected \
        lottery winner 1,000,000 dollars v1agra no prescription needed act now \
        one hundred percent guaranteed urgent reply <font size=1> <img width=1> <!-- x --> \
        &#104;&#105;&#106;&#107; color:#fff;background:white <script <form action= \
        https:// bit.ly/ 10.0.0.1 .exe ?url=http: xn-- paypal-login.top \
        \n \t . , : ' - _ x y 7"
        .split(' ')
        .collect();
    let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
    let mut matched = [0; 3];
    for _ in 0..3000 {
        let text: Vec<&str> = (0..(next() % 12))
            .map(|_| words[(next() % words.len() as u64) as usize])
            .collect();
        let text = text.join(if next().is_multiple_of(3) { "" } else { " " });
        for (i, (anchored, unanchored)) in [
            (&set.body, &plain.body),
            (&set.rawbody, &plain.rawbody),
            (&set.uri, &plain.uri),
        ]
        .into_iter()
        .enumerate()
        {
            let mut got = vec![0u32; set.rules.len()];
            anchored.run([text.as_bytes()], &mut got);
            let mut expected = vec![0u32; set.rules.len()];
            unanchored.run([text.as_bytes()], &mut expected);
            matched[i] += usize::from(expected.iter().any(|&h| h > 0));
            assert_eq!(got, expected, "{text:?}");
        }
    }
    assert!(
        matched.iter().all(|&m| m > 100),
        "the texts hit body, rawbody and uri rules only {matched:?} times"
    );
}

/// The states of an anchored set are the combinations of its patterns' progress: a big
/// matcher's patterns anchor in sets of a small matcher's size at most, evenly, and hit
/// where one unanchored set would.
#[test]
fn many_anchored_patterns_run_in_even_sets() {
    let mut rules = String::new();
    for i in 0..100 {
        // A word start, then classes too wide for literals: no trigger, few beginnings.
        rules.push_str(&format!(
            "body W{i} /\\b[a-z]{{2}}[0-9]{{{}}}[a-z]{{{}}}\\b/\n",
            i % 10 + 1,
            i / 10 + 1
        ));
    }
    let s = set(&rules);
    assert_eq!(s.body.anchored_sets(), [50, 50]);
    assert!(s.body.sets.is_empty());
    let (mut plain, _) = RuleSet::from_text(&rules, Path::new("test.cf"));
    plain.body = std::mem::take(&mut plain.body).unanchored();
    let mut next = crate::xorshift(7);
    let mut matched = 0;
    for _ in 0..1000 {
        let text: String = (0..40)
            .map(|_| match next() % 4 {
                0 => ' ',
                1 => char::from(b'0' + (next() % 10) as u8),
                _ => char::from(b'a' + (next() % 4) as u8),
            })
            .collect();
        let mut got = vec![0u32; s.rules.len()];
        s.body.run([text.as_bytes()], &mut got);
        let mut expected = vec![0u32; s.rules.len()];
        plain.body.run([text.as_bytes()], &mut expected);
        assert_eq!(got, expected, "{text:?}");
        matched += expected.iter().filter(|&&h| h > 0).count();
    }
    assert!(
        matched > 150,
        "only {matched} hits: the texts test too little"
    );
}

/// Matchers look for a pattern's least match (a repetition that ends it takes its fewest
/// turns): that must hit on the same texts as the whole pattern.
#[test]
fn a_pattern_hits_where_its_least_match_does() {
    let patterns = [
        r"\${3,}",
        r"\bfree.{0,40}",
        r"a(?:b|c*)",
        r"x\d+\b",
        r"(?:ab)+",
        r"q(?:r|s)*t?",
        r"^z+$",
        r"(y+)",
    ];
    let rules: String = patterns
        .iter()
        .enumerate()
        .map(|(i, p)| format!("body R{i} /{p}/\n"))
        .collect();
    let s = set(&rules);
    let whole: Vec<regex::bytes::Regex> = patterns
        .iter()
        .map(|p| regex::bytes::Regex::new(&format!("(?-u)(?m){p}")).unwrap())
        .collect();
    let pieces = [
        "$", "$$", "free", " ", "a", "b", "c", "x", "x7", "7", "q", "r", "s", "t", "z", "y", "\n",
    ];
    let mut next = crate::xorshift(0x5eed);
    let mut hit = vec![0; patterns.len()];
    for _ in 0..5000 {
        let text: String = (0..(next() % 10))
            .map(|_| pieces[(next() % pieces.len() as u64) as usize])
            .collect();
        let mut got = vec![0u32; s.rules.len()];
        s.body.run([text.as_bytes()], &mut got);
        for (i, re) in whole.iter().enumerate() {
            let expected = re.is_match(text.as_bytes());
            assert_eq!(got[i] > 0, expected, "{} on {text:?}", patterns[i]);
            hit[i] += usize::from(expected);
        }
    }
    assert!(hit.iter().all(|&h| h > 40), "too few texts hit: {hit:?}");
}

/// A run of one byte that a pattern repeats before what it looks for (`\${3,}!`) makes
/// anchored runs read from every `$` to the end of the run: quadratic, over ten minutes
/// for 900 KB of `$`. The runs give up, the unanchored sets answer, and the rule still
/// hits. A repetition that ends a pattern needs only its fewest turns: the built-in
/// `\${3,}` runs three steps from each `$` and has no need to give up.
#[test]
fn a_long_run_of_one_byte_makes_the_anchored_runs_give_up() {
    let s = set("body BANG /\\${3,}!/\nbody FREE /\\bfree\\b/i\n");
    assert!(s.body.is_anchored());
    let text = format!("{}!", "$".repeat(100_000));
    let mut hits = vec![0u32; s.rules.len()];
    s.body.run([text.as_bytes()], &mut hits);
    assert!(s.body.gave_up_anchoring());
    assert_eq!(hits, [1, 0]);

    let (built_in, _) = RuleSet::built_in();
    let mut hits = vec![0u32; built_in.rules.len()];
    built_in.body.run([text.as_bytes()], &mut hits);
    assert!(!built_in.body.gave_up_anchoring());
    let run = built_in
        .rules
        .iter()
        .position(|r| r.name == "MONEY_SYMBOLS_RUN");
    assert_eq!(run.map(|i| hits[i]), Some(1));
}

#[test]
fn body_text_is_the_subject_then_each_paragraph_on_one_line() {
    let raw = "Subject: Hello there\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n  \
        First line\r\n\tsecond line  \r\n\r\n\r\n\u{a0}Next paragraph\u{a0}\r\nlast\r\n \r\nend";
    let msg = Message::parse(raw.as_bytes(), LIMIT);
    assert_eq!(
        body_text(&msg),
        "Hello there\nFirst line second line\nNext paragraph last\nend"
    );
}

#[test]
fn body_lines_are_trimmed_of_unicode_white_space() {
    for line in [
        "",
        " \t\r\n",
        "  a b \r\n",
        "\x0ba\x0b",
        "\u{a0}x\u{3000}\r\n",
        " \u{2028} y \u{85}",
        "\x0c\x1fz\x1c ",
        "é",
    ] {
        assert_eq!(super::trimmed(line), line.trim(), "{line:?}");
    }
}

/// Both date tests read one shared parse: each must still judge its own range.
#[test]
fn date_tests_in_one_set_judge_their_own_ranges() {
    let s = set("header PAST eval:check_for_shifted_date('undef', '-48')\n\
         header FUTURE eval:check_for_shifted_date('12', 'undef')\n");
    let received = "Received: from a by b; Thu, 22 Aug 2002 18:26:25 -0700";
    let past = mail(
        &format!("{received}\nDate: Mon, 1 Jul 2002 10:00:00 -0700"),
        "x",
    );
    let future = mail(
        &format!("{received}\nDate: Sat, 24 Aug 2002 10:00:00 -0700"),
        "x",
    );
    assert_eq!(hits(&s, &past), ["PAST"]);
    assert_eq!(hits(&s, &future), ["FUTURE"]);
    assert!(hits(&s, &mail(received, "x")).is_empty());
}

/// mimeheader rules read the headers of the message's MIME parts, not its own, and not
/// text that looks like them.
#[test]
fn mimeheader_rules_read_each_parts_headers() {
    let pdf = "--b\nContent-Type: text/plain\n\nsee attached\n\
               --b\nContent-Type: application/pdf; name=\"invoice.pdf\"\n\n%PDF-1.4\n--b--\n";
    let quoted = "--b\nContent-Type: text/plain\n\nWhat the scanner saw:\n------------\n\
                  Content-Type: application/pdf\n\n--b--\n";
    check(
        "mimeheader PDF Content-Type =~ /application\\/pdf/i\n",
        "PDF",
        &mail(MULTIPART, pdf),
        &mail(MULTIPART, quoted),
    );
    // The message's own Content-Type is not a part's.
    check(
        "mimeheader MIXED Content-Type =~ /multipart\\/mixed/\n",
        "MIXED",
        &mail(
            MULTIPART,
            "--b\nContent-Type: multipart/mixed; boundary=c\n\n--c\n\n--c--\n--b--\n",
        ),
        &mail(MULTIPART, pdf),
    );
}

/// Each MIME part's header block, found past bodies of any size: folded fields joined,
/// CRLF or LF, nested multiparts read by their own boundary (as written: spaces, any case of
/// `boundary`). A line that merely starts with `--` (a rule of dashes, a part quoted in a
/// text) is no boundary.
#[test]
fn mime_header_blocks_are_found_past_the_bodies() {
    let attachment = "QUJD\r\n".repeat(5000);
    let raw = format!(
        "Subject: x\r\nContent-Type: multipart/mixed;\r\n boundary=\"b\"\r\n\r\npreamble\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nhi\r\n----------\r\nX-Fake: dashes\r\n\r\n\
         --x\r\nX-Fake: quoted\r\n\r\n\
         --b\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n\
         {attachment}--b\nContent-Type: multipart/alternative; BOUNDARY=\"= in\"\n\n\
         --= in\nContent-Type: text/html;\n\tcharset=utf-8\n\n<p>hi</p>\n--= in--\n--b--\n"
    );
    let msg = Message::parse(raw.as_bytes(), LIMIT);
    let parts = mime_tree::mime_tree(&msg).parts;
    let blocks: Vec<&Vec<(String, String)>> = parts.iter().map(|p| &p.headers).collect();
    let names: Vec<Vec<&str>> = blocks
        .iter()
        .map(|b| b.iter().map(|(n, _)| n.as_str()).collect())
        .collect();
    assert_eq!(
        names,
        [
            vec!["Content-Type"],
            vec!["Content-Type", "Content-Transfer-Encoding"],
            vec!["Content-Type"],
            vec!["Content-Type"],
        ],
        "{blocks:?}"
    );
    assert_eq!(blocks[1][1].1, "base64");
    assert_eq!(blocks[3][0].1, "text/html; charset=utf-8");
    // Each body runs to the line break before the next boundary line, its own or a parent's.
    let body = |i: usize| String::from_utf8_lossy(&msg.raw[parts[i].body.clone()]);
    assert_eq!(
        body(0),
        "hi\r\n----------\r\nX-Fake: dashes\r\n\r\n--x\r\nX-Fake: quoted\r\n"
    );
    assert_eq!(body(1), attachment.trim_end());
    assert_eq!(body(3), "<p>hi</p>");
}

/// The rule reads on from the start of To and Cc alone (run from every `@` it cost a
/// quarter of all header rule steps): it still counts across both headers and their lines.
#[test]
fn many_recipients_are_counted_across_to_and_cc() {
    let (set, _) = RuleSet::built_in();
    let recipients = |n: usize| {
        (0..n)
            .map(|i| format!("u{i}@example.org"))
            .collect::<Vec<_>>()
    };
    let hits = |to: &[String], cc: &[String]| {
        let raw = mail(
            &format!(
                "Subject: hi\nTo: {}\nCc: {}",
                to.join(",\n  "),
                cc.join(", ")
            ),
            "x",
        );
        let msg = Message::parse(raw.as_bytes(), LIMIT);
        set.evaluate(&msg).contains(&"TO_MANY_RECIPIENTS")
    };
    let fifteen = recipients(15);
    assert!(hits(&fifteen[..9], &fifteen[9..]));
    assert!(hits(&fifteen, &[]));
    assert!(!hits(&fifteen[..9], &fifteen[10..]));
}

/// A count too large for the automata runs widened, and is confirmed exactly only on texts
/// long enough to hold it: both ends of that must still hold.
#[test]
fn large_counts_match_exactly() {
    let url = |host_len: usize| format!("http://{}/x", "a".repeat(host_len));
    let with_urls = |host_len: usize| mail("Subject: hi", &format!("see {} now", url(host_len)));
    check(
        r"uri LONG_HOST m{^https?://[^/]{60}}",
        "LONG_HOST",
        &with_urls(60),
        &with_urls(59),
    );
    check(
        r"body SPACED /\bgo.{0,50}away\b/",
        "SPACED",
        &mail("Subject: hi", &format!("go{}away", " ".repeat(50))),
        &mail("Subject: hi", &format!("go{}away", " ".repeat(51))),
    );
}

/// A look-around rule runs on the backtracker, which must look for its match where the
/// pattern can start, not spend its step budget at every byte before it: the one hit here
/// follows thousands of near misses.
#[test]
fn a_look_around_rule_finds_a_match_after_many_near_misses() {
    let near_misses = "Total: 12 USD. ".repeat(4000);
    check(
        r"body LATE_SUM /(?<![a-z])\d+ USD(?=!)/",
        "LATE_SUM",
        &mail("Subject: hi", &format!("{near_misses}Now 40 USD!")),
        &mail("Subject: hi", &format!("{near_misses}Now 40 USD.")),
    );
    check(
        r"header LATE_FIELD ALL =~ /^(?!X-)[a-z]+-[a-z]+:\s+\d(?=\S{6})/im",
        "LATE_FIELD",
        &mail(
            &format!(
                "Subject: hi\n{}Foo-Bar: 1234567",
                "X-Some-Thing: 12 3\n".repeat(3000)
            ),
            "text",
        ),
        &mail(
            &format!(
                "Subject: hi\n{}Foo-Bar: 12345",
                "X-Some-Thing: 12 3\n".repeat(3000)
            ),
            "text",
        ),
    );
}

/// Seeking is fancy-regex's newer search. On real rules and real mail, every look-around
/// rule must answer as the backtracker does when it tries every byte with no step budget.
/// Reads SpamAssassin's rules and the corpus where they are (CI has both).
#[test]
fn look_around_rules_answer_as_an_unbounded_backtracker_on_the_corpus() {
    let corpus = std::env::var_os("SA_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("spamnb-corpus/package/data"));
    let sa = Path::new("/usr/share/spamassassin");
    if !(corpus.join("spam-2").is_dir() && sa.is_dir()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must provide the corpus and SpamAssassin"
        );
        eprintln!("skipped: no corpus or no SpamAssassin rules");
        return;
    }
    let mut paths = Vec::new();
    for group in std::fs::read_dir(&corpus).unwrap() {
        let mut files: Vec<_> = std::fs::read_dir(group.unwrap().path())
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        files.sort();
        paths.extend(files.into_iter().step_by(8));
    }
    let raws: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let msgs: Vec<Message> = raws.iter().map(|r| Message::parse(r, LIMIT)).collect();
    let bodies: Vec<String> = msgs.iter().map(body_text).collect();
    let headers: Vec<String> = msgs
        .iter()
        .map(|m| Target::All.text(m).unwrap_or_default().into_owned())
        .collect();
    let parsed = read_files(&[sa.into()], &mut LoadReport::default());
    let (mut rules, mut hits) = (0, 0);
    for def in &parsed.rules {
        let (source, texts, multiline) = match def.kind {
            Kind::Body if !def.text.starts_with("eval:") => (def.text.as_str(), &bodies, true),
            Kind::Header if def.text.starts_with("ALL ") => {
                (split_header_rule(&def.text).unwrap().2, &headers, false)
            }
            _ => continue,
        };
        let Ok(mut pattern) = perl::split_delimited(source) else {
            continue;
        };
        if multiline {
            pattern.flags.push('m');
        }
        let Ok(t) = perl::translate(&pattern) else {
            continue;
        };
        let Some(full) = t.fancy.clone() else {
            continue;
        };
        let prefilter_source = t.rust.clone();
        let Ok(compiled) = matcher::CompiledPattern::new(t, false) else {
            continue;
        };
        let mut builder = MatcherBuilder::default();
        builder.push(0, compiled);
        let ours = builder.build();
        // Where the pattern without its look-arounds misses, so does the pattern.
        let prefilter = regex::bytes::Regex::new(&prefilter_source).unwrap();
        let unbounded = fancy_regex::RegexBuilder::new(&full)
            .bytes_mode(fancy_regex::BytesMode::Ascii)
            .backtrack_limit(usize::MAX)
            .build()
            .unwrap();
        rules += 1;
        for text in texts.iter() {
            let truth =
                prefilter.is_match(text.as_bytes()) && unbounded.is_match(text.as_bytes()).unwrap();
            let mut found = [0u32];
            ours.run([text.as_bytes()], &mut found);
            assert_eq!(found[0] == 1, truth, "{} on {text:.200}", def.name);
            hits += u32::from(truth);
        }
    }
    assert!(
        rules > 50 && hits > 50,
        "{rules} rules, {hits} hits: too few to tell"
    );
}

/// Standard base64, for attachments in messages written for the tests.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, &b| n << 8 | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// `:addr` is the address the mail is from, never text in a quoted display name or a
/// comment: the sender writes those freely, and a decisive welcome rule hit on them.
#[test]
fn addr_is_the_address_not_a_bracketed_text_in_the_display_name_or_a_comment() {
    let s = set(
        "header LOCAL_PARTNER From:addr =~ /\\@partner\\.example$/i\n\
                 header LOCAL_HOST From:host =~ /^partner\\.example$/i\n",
    );
    for from in [
        "\"<boss@partner.example>\" <spam@evil.example>",
        "spam@evil.example (<boss@partner.example>)",
        "\"boss@partner.example\" spam@evil.example",
        // An encoded word is display name, whatever it decodes to (`<boss@…> "`).
        "=?utf-8?q?=3Cboss=40partner=2Eexample=3E_=22?= <spam@evil.example>",
        "=?utf-8?b?PGJvc3NAcGFydG5lci5leGFtcGxlPg==?=",
    ] {
        let raw = format!("From: {from}\nTo: a@b.example\nSubject: hi\n\nhello\n");
        assert_eq!(hits(&s, &raw), Vec::<String>::new(), "From: {from}");
    }
    for from in [
        "\"Boss, The\" <boss@partner.example>",
        "boss@partner.example (The Boss)",
        "<boss@partner.example>",
        "=?utf-8?q?Boss=2C_The?= <boss@partner.example>",
    ] {
        let raw = format!("From: {from}\nTo: a@b.example\nSubject: hi\n\nhello\n");
        assert_eq!(
            hits(&s, &raw),
            ["LOCAL_PARTNER", "LOCAL_HOST"],
            "From: {from}"
        );
    }
}

/// `uri` rules read every link the message keeps: two hundred empty anchors first hid
/// the one that mattered.
#[test]
fn uri_rules_see_a_link_after_two_hundred_others() {
    let s = set("uri LOCAL_BAD_LINK /evil\\.example/\n");
    let mut html = String::new();
    for i in 0..200 {
        html.push_str(&format!("<a href=\"http://host{i}.example.org/\"></a>"));
    }
    html.push_str("<a href=\"http://evil.example/buy\">click</a>");
    let raw = format!(
        "From: a@b.example\nSubject: hi\nMIME-Version: 1.0\nContent-Type: text/html\n\n{html}\n"
    );
    assert_eq!(hits(&s, &raw), ["LOCAL_BAD_LINK"]);
}
