//! A [`Message`] to word tokens: body words, header-tagged tokens, URL and domain tokens.
//!
//! Tagging keeps "free" in a Subject apart from "free" in a body (`subj:free`). Scripts
//! written without spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) have no word
//! boundaries a segmenter can find without a dictionary, so their runs become overlapping
//! character bigrams, the way search engines index them (Lucene's CJK analyzer).

use std::borrow::Cow;

use serde::Deserialize;

use crate::domain::registered_domain;
use crate::features::Features;
use crate::message::{Message, is_mailto, unfolded, url_host};

/// Which token families a message is turned into. Each family can be switched off to
/// measure what it is worth (`spamnb eval` does).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenizerOptions {
    /// Tokens from Subject, From, To, Received, Content-Type, X-Mailer, Message-ID and
    /// the names of all headers present.
    pub header_tokens: bool,
    /// `url:HOST` and `url:PARENT.DOMAIN` for each link.
    pub url_tokens: bool,
    /// Words inside HTML tags (`html:font`, `html:color`): the markup of bulk mail is
    /// evidence its rendered text hides.
    pub html_tokens: bool,
    /// Words in capitals also as themselves (`caps:FREE`), beside their lowercase form.
    pub caps_tokens: bool,
    /// Adjacent body word pairs (`a+b`) beside single words.
    pub pair_tokens: bool,
    /// Words shorter than this (in characters) are dropped, except in no-space scripts.
    pub min_token_chars: usize,
    /// Words longer than this become `long:<first char>:<length / 10>`.
    pub max_token_chars: usize,
}

impl Default for TokenizerOptions {
    fn default() -> Self {
        TokenizerOptions {
            header_tokens: true,
            url_tokens: true,
            html_tokens: false,
            caps_tokens: false,
            pair_tokens: false,
            min_token_chars: 2,
            max_token_chars: 40,
        }
    }
}

/// What a word of HTML its reader is not shown becomes: `hidden:WORD`.
pub const HIDDEN_PREFIX: &str = "hidden:";

/// The sign of a message whose text is mostly hidden ([`mostly_hidden`]).
const MOSTLY_HIDDEN: &str = "anomaly:mostly_hidden";

/// Whether most of `msg`'s text is hidden from its reader. Padding is part of a message,
/// not most of it: a message so hidden may be shown whole by a style sheet that spamnb
/// does not read, and its words are then what it says.
pub fn mostly_hidden(msg: &Message) -> bool {
    let hidden_bytes: usize = msg.hidden.iter().map(|r| r.len()).sum();
    hidden_bytes * 2 > msg.text.len()
}

/// Adds the words of `msg`'s text to `out`. Its hidden words are features of their own
/// (`hidden:WORD`).
pub fn body_words(msg: &Message, opts: &TokenizerOptions, out: &mut Features) {
    if msg.hidden.is_empty() {
        add_words(&msg.text, opts, out);
        return;
    }
    // Words padded in where the reader cannot see them (Bayes poisoning: ham words in
    // spam) are features of their own, learned apart: they cannot lend spam the ham
    // standing of the words shown. Not dropped: a style sheet can show what an inline
    // style hid, and then they are what the spam says.
    let (shown, hidden) = split_hidden(&msg.text, &msg.hidden);
    add_words(&shown, opts, out);
    words(&hidden, opts, &mut |w| out.add_joined(&[HIDDEN_PREFIX, w]));
}

/// Whether `msg` is read a second time (see [`crate::features::Readings`]): its text is
/// mostly hidden, or some of what is hidden is shown to some readers.
pub fn read_twice(msg: &Message) -> bool {
    !msg.maybe_shown.is_empty() || mostly_hidden(msg)
}

/// Adds `msg`'s hidden words to `out` as words too, what the second reading has beside the
/// first: all of them when most of its text is hidden, else those some readers may see.
pub fn hidden_as_words(msg: &Message, opts: &TokenizerOptions, out: &mut Features) {
    let hidden = if mostly_hidden(msg) {
        &msg.hidden
    } else {
        &msg.maybe_shown
    };
    if !hidden.is_empty() {
        add_words(&split_hidden(&msg.text, hidden).1, opts, out);
    }
}

/// Adds the words of `text` to `out`, and each pair of neighbours with `pair_tokens`.
fn add_words(text: &str, opts: &TokenizerOptions, out: &mut Features) {
    let mut previous: Option<String> = None;
    words(text, opts, &mut |w| {
        if opts.pair_tokens {
            if let Some(prev) = &previous {
                out.add_joined(&[prev, "+", w]);
            }
            previous = Some(w.to_string());
        }
        out.add(w);
    });
}

/// Adds every token of `msg` but the words of its text to `out`: the sign of a message
/// mostly hidden, and the header, HTML tag, URL, anomaly and attachment tokens.
pub fn other_tokens(msg: &Message, opts: &TokenizerOptions, out: &mut Features) {
    if mostly_hidden(msg) {
        out.add(MOSTLY_HIDDEN);
    }
    if opts.header_tokens {
        header_tokens(msg, opts, out);
    }
    if opts.html_tokens {
        html_tokens(&msg.html, out);
    }
    if opts.url_tokens {
        for url in &msg.urls {
            url_tokens(url, out);
        }
    }
    for anomaly in &msg.anomalies {
        out.add_joined(&["anomaly:", anomaly.name()]);
    }
    for att in &msg.attachments {
        out.add_joined(&["att:type:", &att.content_type]);
        if let Some(ext) = att.name.as_deref().and_then(|n| n.rsplit_once('.')) {
            out.add_joined(&["att:ext:", &ext.1.to_lowercase()]);
        }
    }
}

fn header_tokens(msg: &Message, opts: &TokenizerOptions, out: &mut Features) {
    let mut name = String::new();
    for h in &msg.headers {
        name.clear();
        name.push_str(&h.name);
        name.make_ascii_lowercase();
        out.add_joined(&["hdr:", &name]);
        let tag = match name.as_str() {
            "subject" => "subj",
            "from" => "from",
            "reply-to" => "replyto",
            "to" | "cc" => "to",
            "x-mailer" | "user-agent" => "mailer",
            "received" => {
                received_tokens(&h.value, out);
                continue;
            }
            "message-id" => {
                if let Some((_, domain)) = h.value.trim_matches(['<', '>', ' ']).rsplit_once('@') {
                    out.add_joined(&["mid:", &domain.to_ascii_lowercase()]);
                }
                continue;
            }
            "content-type" => {
                let ct = h.value.split(';').next().unwrap_or_default().trim();
                out.add_joined(&["ct:", &ct.to_ascii_lowercase()]);
                if let Some(cs) = charset_of(&h.value) {
                    out.add_joined(&["charset:", &cs]);
                }
                continue;
            }
            _ => continue,
        };
        // Words of what is left: the subject, a display name; not the address again. Of
        // To and Cc only the addresses are kept.
        let mut rest = (tag != "to").then(|| h.value.clone());
        if matches!(tag, "from" | "replyto" | "to") {
            // As sent: an encoded word (RFC 2047) is a display name's, whatever quotes or
            // brackets it decodes to.
            let addrs = addresses(&unfolded(msg.raw_value(h)));
            for addr in &addrs {
                out.add_joined(&[tag, ":addr:", addr]);
                if let Some((_, domain)) = addr.rsplit_once('@') {
                    out.add_joined(&[tag, ":dom:", domain]);
                }
            }
            if let Some(rest) = &mut rest
                && !addrs.is_empty()
            {
                *rest = without_words(&rest.to_lowercase(), &addrs);
            }
        }
        if let Some(rest) = rest {
            words(&rest, opts, &mut |w| out.add_joined(&[tag, ":", w]));
        }
    }
}

/// `text` as its reader sees it, without the `hidden` spans (each a run of words with the
/// space before it, unless the reader sees that space), and those words, a line a span.
fn split_hidden(text: &str, hidden: &[std::ops::Range<usize>]) -> (String, String) {
    let mut shown = String::with_capacity(text.len());
    let mut unseen = String::new();
    let mut at = 0;
    for span in hidden {
        let (Some(before), Some(words)) = (text.get(at..span.start), text.get(span.clone())) else {
            continue;
        };
        shown.push_str(before);
        unseen.push_str(words);
        unseen.push('\n');
        at = span.end;
    }
    shown.push_str(text.get(at..).unwrap_or_default());
    (shown, unseen)
}

fn html_tokens(html: &str, out: &mut Features) {
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let end = after.find('>').unwrap_or(after.len());
        let inside = after[..end].trim_start_matches('/');
        let name_end = inside
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(inside.len());
        if name_end > 0 && name_end <= 12 {
            out.add(&format!("html:{}", inside[..name_end].to_ascii_lowercase()));
            // Attribute names, not values: `html:font:color`.
            for attr in inside[name_end..]
                .split('=')
                .filter_map(|s| s.split_whitespace().last())
            {
                if attr.len() <= 12 && attr.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
                    out.add(&format!(
                        "html:{}:{}",
                        inside[..name_end].to_ascii_lowercase(),
                        attr.to_ascii_lowercase()
                    ));
                }
            }
        }
        rest = &after[end..];
    }
}

fn charset_of(content_type: &str) -> Option<String> {
    let lower = content_type.to_ascii_lowercase();
    let at = lower.find("charset=")? + "charset=".len();
    let cs = lower[at..].trim_start_matches('"');
    let end = cs.find(['"', ';', ' ']).unwrap_or(cs.len());
    (end > 0).then(|| cs[..end].to_string())
}

/// What ends an address in a header value.
const ADDRESS_ENDS: [char; 8] = [',', ' ', '<', '>', '"', '(', ')', ';'];

/// Lowercased e-mail addresses in a raw header value: of each mailbox the one in angle
/// brackets when it has one, not what its display name or a comment says. Those are the
/// sender's free text, which no check authenticates (`"service@paypal.com" <x@spam>`,
/// `x@spam (<service@paypal.com>)`).
fn addresses(value: &str) -> Vec<String> {
    let is_address = |s: &&str| s.contains('@') && s.len() <= 254;
    let mut out = Vec::new();
    for mailbox in without_quoted_or_comments(value).split(',') {
        let angled = mailbox
            .split('<')
            .skip(1)
            .filter_map(|s| s.split('>').next())
            .filter(is_address);
        let before = out.len();
        out.extend(angled.map(str::to_lowercase));
        if out.len() == before {
            let bare = mailbox.split(ADDRESS_ENDS).filter(is_address);
            out.extend(bare.map(str::to_lowercase));
        }
    }
    out
}

/// `value` with its quoted strings and comments (RFC 5322 3.2.2: nested, with escapes)
/// blanked, quotes and parentheses too: a comma or bracket inside one ends no mailbox and
/// marks no address. One pass, a character at a time, however deep the nesting.
fn without_quoted_or_comments(value: &str) -> Cow<'_, str> {
    if !value.contains(['"', '(']) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len());
    let (mut quoted, mut comment_depth, mut escaped) = (false, 0usize, false);
    for c in value.chars() {
        let was_inside = quoted || comment_depth > 0;
        match c {
            _ if escaped => escaped = false,
            '\\' if was_inside => escaped = true,
            // A quote in a comment, or a parenthesis in a quoted string, is text.
            '"' if comment_depth == 0 => quoted = !quoted,
            '(' if !quoted => comment_depth += 1,
            ')' if comment_depth > 0 => comment_depth -= 1,
            _ => {}
        }
        let inside = was_inside || quoted || comment_depth > 0;
        out.push(if inside || c == '"' { ' ' } else { c });
    }
    Cow::Owned(out)
}

/// `text` with each of `addrs` that stands as a word of it blanked, in one pass.
fn without_words(text: &str, addrs: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in text.split_inclusive(ADDRESS_ENDS) {
        let word = piece.strip_suffix(ADDRESS_ENDS).unwrap_or(piece);
        if addrs.iter().any(|a| a == word) {
            out.push(' ');
            out.push_str(&piece[word.len()..]);
        } else {
            out.push_str(piece);
        }
    }
    out
}

/// Host names and addresses a message passed through: `rcvd:mail.example.org`, and
/// `rcvd:example.org` for the domain around it.
fn received_tokens(value: &str, out: &mut Features) {
    // Host names are ASCII: runs of host bytes, found a byte at a time (splitting on
    // chars decoded every character of the header).
    let is_host_byte = |b: &u8| b.is_ascii_alphanumeric() || *b == b'.' || *b == b'-';
    for run in value.as_bytes().split(|b| !is_host_byte(b)) {
        let Ok(run) = std::str::from_utf8(run) else {
            continue;
        };
        let part = run.trim_matches('.');
        if part.len() < 4 || part.len() > 80 || !part.contains('.') {
            continue;
        }
        let part = part.to_ascii_lowercase();
        if part.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            // Class-C network of an IPv4 address: the host part changes, the network doesn't.
            // Other dotted numbers are the relays' software versions (`8.11.6` of
            // sendmail's `(8.11.6/8.11.6)`, `SMTPSVC(5.0.2195.2966)`): a sign of the
            // software that handled the mail, and no address.
            match part.parse::<std::net::Ipv4Addr>() {
                Ok(_) => {
                    let net = part.rsplit_once('.').map_or(part.as_str(), |(net, _)| net);
                    out.add_joined(&["rcvd:ip:", net]);
                }
                Err(_) => out.add_joined(&["rcvd:ver:", &part]),
            }
            continue;
        }
        out.add_joined(&["rcvd:", &part]);
        if let Some(parent) = registered_domain(&part)
            && parent != part
        {
            out.add_joined(&["rcvd:", parent]);
        }
    }
}

/// The longest host name DNS can hold.
const MAX_HOST_BYTES: usize = 253;

/// At most this many `url:PARENT` features a link: `a.b.c.d.example.co.uk` has five.
const MAX_URL_PARENTS: usize = 5;

fn url_tokens(url: &str, out: &mut Features) {
    // Links that lead somewhere: a `mailto:` link's domain is a mailbox, not a site.
    if is_mailto(url) {
        return;
    }
    let Some(host) = url_host(url) else {
        return;
    };
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') || host.contains(':') {
        out.add("url:ip-literal");
        return;
    }
    // No host name is longer (RFC 1035); one that is, is a sign in itself, and its
    // parents would be features in the square of its length.
    if host.len() > MAX_HOST_BYTES {
        out.add("url:overlong-host");
        return;
    }
    out.add_joined(&["url:", &host]);
    // Parent domains down to two labels, the nearest to the top few: mail from one
    // sender's many hosts shares them.
    let labels = host.bytes().filter(|&b| b == b'.').count() + 1;
    let mut rest = host.as_str();
    for _ in MAX_URL_PARENTS + 2..labels {
        rest = rest.split_once('.').map_or(rest, |(_, parent)| parent);
    }
    while let Some((_, parent)) = rest.split_once('.') {
        if !parent.contains('.') {
            break;
        }
        out.add_joined(&["url:", parent]);
        rest = parent;
    }
}

/// Calls `emit` with each normalised word of `text`, words cut at colons.
pub fn words(text: &str, opts: &TokenizerOptions, emit: &mut dyn FnMut(&str)) {
    let text = &*without_invisible(text);
    let mut buf = String::new();
    for (no_space, run) in script_runs(text) {
        if no_space {
            bigrams(run, emit);
            continue;
        }
        crate::segment::for_each_word(run, |word| {
            // Unicode lets a colon join letters (`c:a`), and header features are tagged
            // `from:ann`: split, a body's `From:Ann` cannot pass for a header's words.
            for word in word.split(':').filter(|w| !w.is_empty()) {
                emit_word(word, opts, &mut buf, emit);
            }
        });
    }
}

/// Emits `word` normalised: lowercased, or summarised when too long; nothing when too short.
fn emit_word(word: &str, opts: &TokenizerOptions, buf: &mut String, emit: &mut dyn FnMut(&str)) {
    let ascii = word.is_ascii();
    let chars = if ascii {
        word.len()
    } else {
        word.chars().count()
    };
    if chars < opts.min_token_chars {
        return;
    }
    if chars > opts.max_token_chars {
        let first = word.chars().next().unwrap_or('?').to_lowercase();
        emit(&format!("long:{first}:{}", chars / 10));
        return;
    }
    buf.clear();
    if ascii {
        if opts.caps_tokens
            && word.bytes().any(|b| b.is_ascii_uppercase())
            && !word.bytes().any(|b| b.is_ascii_lowercase())
        {
            emit(&format!("caps:{word}"));
        }
        buf.push_str(word);
        buf.make_ascii_lowercase();
    } else {
        buf.extend(word.chars().flat_map(char::to_lowercase));
    }
    emit(buf);
}

fn bigrams(run: &str, emit: &mut dyn FnMut(&str)) {
    let chars: Vec<char> = run.chars().filter(|&c| is_alphanumeric(c)).collect();
    if chars.len() == 1 {
        emit(&chars[0].to_string());
    }
    let mut pair = String::with_capacity(8);
    for w in chars.windows(2) {
        pair.clear();
        pair.push(w[0]);
        pair.push(w[1]);
        emit(&pair);
    }
}

/// Characters of scripts written without spaces that are all letters: Han ideographs (and
/// extension A), hiragana and katakana. Most characters of Chinese and Japanese text are,
/// and the general lookup of `char::is_alphanumeric` for each was an eighth of extracting
/// its features.
const ALL_LETTERS: [std::ops::RangeInclusive<char>; 4] = [
    '\u{4e00}'..='\u{9fff}',
    '\u{3400}'..='\u{4dbf}',
    '\u{3041}'..='\u{3096}',
    '\u{30a1}'..='\u{30fa}',
];

fn is_alphanumeric(c: char) -> bool {
    ALL_LETTERS.iter().any(|r| r.contains(&c)) || c.is_alphanumeric()
}

/// `text` without the characters a reader never sees (Unicode's default-ignorable code
/// points: soft hyphens, zero-width spaces and joiners, bidirectional marks, variation
/// selectors). Inside a word they made it a token never learned (`vi\u{ad}agra`), or cut
/// it in two, while the reader saw the word whole.
fn without_invisible(text: &str) -> Cow<'_, str> {
    // Most mail is ASCII: one pass over it, not three.
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    // Each of them starts with one of these bytes: most text has none, and is passed
    // over at memchr's speed. (Each is a lead byte, so a char boundary.)
    let bytes = text.as_bytes();
    let first_in = |mut at: memchr::Memchr3<'_>| {
        at.find(|&at| text[at..].chars().next().is_some_and(is_invisible))
    };
    let first = [
        first_in(memchr::memchr3_iter(0xC2, 0xCD, 0xD8, bytes)),
        first_in(memchr::memchr3_iter(0xE1, 0xE2, 0xEF, bytes)),
        first_in(memchr::memchr3_iter(0xF0, 0xF3, 0xF3, bytes)),
    ]
    .into_iter()
    .flatten()
    .min();
    let Some(first) = first else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..first]);
    out.extend(text[first..].chars().filter(|&c| !is_invisible(c)));
    Cow::Owned(out)
}

/// Whether `c` is a default-ignorable code point (Unicode's DerivedCoreProperties), less
/// the Hangul fillers, which stand for letters.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{AD}'
            | '\u{34F}'
            | '\u{61C}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Splits text into maximal runs that are, or are not, in a script written without spaces.
fn script_runs(text: &str) -> impl Iterator<Item = (bool, &str)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let kind = is_no_space_script(first);
        let end = if kind {
            rest.char_indices()
                .find(|&(_, c)| !is_no_space_script(c))
                .map_or(rest.len(), |(at, _)| at)
        } else {
            spaced_run_len(rest)
        };
        let (run, tail) = rest.split_at(end);
        rest = tail;
        Some((kind, run))
    })
}

/// How far `text` goes before a character of a script written without spaces. All of
/// them are at U+0E00 or above, so they start with a UTF-8 byte of 0xE0 or more: eight
/// bytes at a time are checked for one (the top three bits of a byte all set), and only
/// such characters are decoded. Most mail is Latin text and never has one.
fn spaced_run_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8) {
            let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            if x & (x << 1) & (x << 2) & 0x8080_8080_8080_8080 == 0 {
                at += 8;
                continue;
            }
        }
        if bytes[at] >= 0xE0 && text[at..].chars().next().is_some_and(is_no_space_script) {
            return at;
        }
        at += 1;
    }
    bytes.len()
}

fn is_no_space_script(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF       // Thai, Lao
        | 0x1000..=0x109F     // Myanmar
        | 0x1780..=0x17FF     // Khmer
        | 0x3040..=0x30FF     // Hiragana, Katakana
        | 0x31F0..=0x31FF     // Katakana phonetic extensions
        | 0x3400..=0x4DBF     // CJK extension A
        | 0x4E00..=0x9FFF     // CJK unified ideographs
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0xFF66..=0xFF9F     // halfwidth Katakana
        | 0x20000..=0x2FA1F) // CJK extensions B–F, compatibility supplement
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_letters_are_letters() {
        for c in ALL_LETTERS.into_iter().flatten() {
            assert!(c.is_alphanumeric(), "{c:?}");
        }
    }

    fn tokens_of(raw: &[u8], opts: &TokenizerOptions) -> Features {
        let msg = Message::parse(raw, 1 << 20);
        let mut f = Features::new();
        body_words(&msg, opts, &mut f);
        other_tokens(&msg, opts, &mut f);
        f
    }

    fn word_list(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        words(text, &TokenizerOptions::default(), &mut |w| {
            out.push(w.to_string())
        });
        out
    }

    /// A message whose text is mostly hidden may be shown whole by a style sheet that is not
    /// read (here, one linked and not sent). As learned, its hidden words stay apart, with
    /// a sign that says so; its second reading (`hidden_as_words`, see `Readings`) has
    /// them as words too. So too when a style sheet that is read hides them.
    #[test]
    fn a_message_mostly_hidden_is_read_both_ways() {
        for html in [
            "<link rel=stylesheet href=\"https://example.org/a.css\">\
             <p>Hi <span style=\"display:none\">cheap pills without prescription</span>",
            "<style>.a{display:none}</style><p>Hi <span class=a>cheap pills without \
             prescription</span>",
        ] {
            let raw =
                format!("From: a@example.org\nSubject: x\nContent-Type: text/html\n\n{html}\n");
            let msg = Message::parse(raw.as_bytes(), 1 << 20);
            assert!(mostly_hidden(&msg), "{html:?}");
            for (second, as_word) in [(false, 0), (true, 1)] {
                let (opts, mut f) = (TokenizerOptions::default(), Features::new());
                body_words(&msg, &opts, &mut f);
                if second {
                    hidden_as_words(&msg, &opts, &mut f);
                }
                other_tokens(&msg, &opts, &mut f);
                for word in ["cheap", "pills", "prescription"] {
                    let apart = format!("{HIDDEN_PREFIX}{word}");
                    let counts = (f.count(word), f.count(&apart));
                    assert_eq!(counts, (as_word, 1), "{word}: {:?}", f.sorted());
                }
                assert_eq!(f.count(MOSTLY_HIDDEN), 1);
            }
        }
    }

    /// A style sheet that hides the words an inline style shows and shows those it hides
    /// (ham words padded in where the reader does not see them, spam words where a
    /// reader of inline styles alone would not): read, it is read as the reader sees it,
    /// whether its selectors are simple or have combinators. Its rules in a sheet that is
    /// not sent, it is taken at its inline styles, most of the message hidden, and its
    /// second reading reads every word.
    #[test]
    fn a_style_sheet_that_swaps_shown_and_hidden_is_caught() {
        let body = "<div><p class=a>meeting</p> <span class=b style=\"display:none\">cheap pills \
                    without prescription</span></div>";
        let swap = |hide: &str, show: &str| {
            format!(
                "<style>{hide}{{display:none}} {show}{{display:inline!important}}</style>{body}"
            )
        };
        for read in [swap(".a", ".b"), swap("div .a", "div > .b")] {
            let f = tokens_of(&html_message(&read), &TokenizerOptions::default());
            assert_shown_and_hidden(&read, &["cheap", "pills", "prescription"], &["meeting"]);
            assert_eq!(f.count(MOSTLY_HIDDEN), 0);
        }
        let unread = format!("<link rel=stylesheet href=\"https://example.org/a.css\">{body}");
        let raw = format!("From: a@example.org\nSubject: x\nContent-Type: text/html\n\n{unread}\n");
        let msg = Message::parse(raw.as_bytes(), 1 << 20);
        let (opts, mut f) = (TokenizerOptions::default(), Features::new());
        body_words(&msg, &opts, &mut f);
        hidden_as_words(&msg, &opts, &mut f);
        other_tokens(&msg, &opts, &mut f);
        for word in ["cheap", "pills", "prescription", "meeting", MOSTLY_HIDDEN] {
            assert_eq!(f.count(word), 1, "{word} in {unread:?}: {:?}", f.sorted());
        }
    }

    /// A pitch hidden inline, under half the message's text, and shown again by a rule
    /// that holds for some readers (`@media` with a condition) or has combinators or a
    /// pseudo-class is read as words, as its readers see it; a newsletter's preheader,
    /// hidden inline with no rule to show it, keeps its words apart beside rules that hide
    /// blocks on phones.
    #[test]
    fn a_pitch_shown_again_by_a_style_sheet_is_read_as_words() {
        let pitch = |rule: &str| {
            format!(
                "<style>{rule}</style><div>Hello <span class=p style=\"display:none\">cheap \
                 pills</span></div>"
            )
        };
        for rule in [
            "div > .p {display:inline !important}",
            "body .p{display:inline!important}",
        ] {
            assert_shown_and_hidden(&pitch(rule), &["cheap", "pills"], &[]);
        }
        // Shown to some readers only: hidden words, and words too in the second reading.
        for rule in [
            "@media (min-width:1px){.p{display:inline!important}}",
            "@media all and (max-width: 9999px){.p{display:inline!important}}",
            ".p:not(.q){display:inline!important}",
        ] {
            let html = pitch(rule);
            assert_shown_and_hidden(&html, &[], &["cheap", "pills"]);
            let raw = html_message(&html);
            let msg = Message::parse(&raw, 1 << 20);
            assert!(read_twice(&msg), "{html:?}");
            let mut f = Features::new();
            hidden_as_words(&msg, &TokenizerOptions::default(), &mut f);
            assert_eq!(f.count("cheap") + f.count("pills"), 2, "{html:?}");
        }
        let newsletter = "<style>@media (max-width:600px){.desktop{display:none!important}}\
                          </style><div style=\"display:none;max-height:0;overflow:hidden\">\
                          free shipping weekend</div><div class=desktop>summer sale</div>";
        assert_shown_and_hidden(newsletter, &["summer", "sale"], &["shipping", "weekend"]);
        let raw = html_message(newsletter);
        let msg = Message::parse(&raw, 1 << 20);
        assert!(!read_twice(&msg));
    }

    /// A message of HTML `html`, after more shown text: most of a message hidden is read
    /// another way (see `a_message_mostly_hidden_is_read_both_ways`).
    fn html_message(html: &str) -> Vec<u8> {
        format!(
            "From: a@example.org\nSubject: x\nContent-Type: text/html\n\n<p>{}</p>\n{html}\n",
            "Plenty of shown text comes first. ".repeat(4)
        )
        .into_bytes()
    }

    /// Each of `shown` is a plain feature of the message with HTML `html` and no hidden
    /// one; each of `hidden` the other way round.
    fn assert_shown_and_hidden(html: &str, shown: &[&str], hidden: &[&str]) {
        let f = tokens_of(&html_message(html), &TokenizerOptions::default());
        for word in shown {
            let as_hidden = format!("{HIDDEN_PREFIX}{word}");
            assert!(
                f.count(word) > 0 && f.count(&as_hidden) == 0,
                "{word} should be shown in {html:?}: {:?}",
                f.sorted()
            );
        }
        for word in hidden {
            let as_hidden = format!("{HIDDEN_PREFIX}{word}");
            assert!(
                f.count(&as_hidden) > 0 && f.count(word) == 0,
                "{word} should be hidden in {html:?}: {:?}",
                f.sorted()
            );
        }
    }

    /// Bayes poisoning: ham words padded into spam where its reader cannot see them lent
    /// the spam their ham standing.
    #[test]
    fn hidden_html_words_are_features_of_their_own() {
        for (html, shown, hidden) in [
            (
                "<p>cheap pills <span style=\"display:none\">meeting agenda</span> today</p>",
                &["cheap", "pills", "today"][..],
                &["meeting", "agenda"][..],
            ),
            (
                "cheap <div style='visibility: hidden'>meeting</div>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "cheap <span style=\"font-size:0\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "cheap <span style=\"font-size: 1px\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "cheap <span style=\"font-size:0.3em\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "cheap <span style=\"opacity:0\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
            ("cheap <p hidden>meeting</p>", &["cheap"], &["meeting"]),
            (
                "cheap <font color=\"#ffffff\">meeting</font>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "cheap <span style=\"color:#fefefe\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "<table bgcolor=black><tr><td><font color=black>meeting</font> \
                 <font color=white>cheap</font></td></tr></table>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "cheap <SPAN STYLE=\"DISPLAY : None !important\">meeting</SPAN>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "cheap <span style=\"display&#58;none\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
            // The reader sees the word the hidden text splits, and so does the model.
            (
                "Via<span style=\"display:none\">meeting</span>gra now",
                &["viagra", "now"],
                &["meeting"],
            ),
            // And the words it stands between, when it took the space before it.
            ("cheap <b hidden>.</b>pills today", &["cheap", "pills"], &[]),
            (
                "cheap <span style=\"display:none\">meeting</span>pills",
                &["cheap", "pills"],
                &["meeting"],
            ),
            // But not a space inside the hidden run, which the reader is not shown: it
            // parted the word it stands in (`vi agra`).
            (
                "Via<span style=\"display:none\"> meeting</span>gra now",
                &["viagra", "now"],
                &["meeting"],
            ),
            (
                "Via<span style=\"display:none\">meeting </span>gra now",
                &["viagra", "now"],
                &["meeting"],
            ),
            (
                "cheap <b style=\"font-size:0\">. meeting </b>pills",
                &["cheap", "pills"],
                &["meeting"],
            ),
            // A block that is not displayed makes no line either: the reader sees no
            // break, and the words around it run on (`vi agra` again).
            (
                "Via<div style=\"display:none\">meeting</div>gra now",
                &["viagra", "now"],
                &["meeting"],
            ),
            (
                "Via<p hidden>meeting</p>gra now",
                &["viagra", "now"],
                &["meeting"],
            ),
            // But white space shown beside it parts the words.
            (
                "cheap <div style=\"display:none\">meeting</div> pills",
                &["cheap", "pills"],
                &["meeting"],
            ),
            // Shown again: an element's own size and visibility count.
            (
                "<td style=\"font-size:0\">meeting <div style=\"font-size:14px\">cheap</div></td>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "<div style=\"visibility:hidden\">meeting \
                 <b style=\"visibility:visible\">cheap</b></div>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "<p hidden style=\"display:block\">cheap</p><p hidden>meeting</p>",
                &["cheap"],
                &["meeting"],
            ),
        ] {
            assert_shown_and_hidden(html, shown, hidden);
        }
    }

    /// A block not displayed makes no break, but one displayed after it still does. Its
    /// line was taken for the hidden block's and hidden with it: `cheap` and `pills`, on
    /// two lines for the reader, were read as `cheappills`, a word the model never saw.
    #[test]
    fn a_break_shown_after_a_block_not_displayed_parts_the_words() {
        for (html, hidden) in [
            (
                "cheap<div style=\"display:none\">meeting</div><div>pills</div>",
                &["meeting"][..],
            ),
            ("cheap<p hidden>meeting</p><p>pills", &["meeting"]),
            ("cheap<p hidden></p><p>pills", &[]),
            ("cheap<b hidden><br></b><br>pills", &[]),
            (
                "<div>cheap<div hidden>meeting</div></div>pills",
                &["meeting"],
            ),
        ] {
            assert_shown_and_hidden(html, &["cheap", "pills"], hidden);
            let f = tokens_of(&html_message(html), &TokenizerOptions::default());
            assert_eq!(f.count("cheappills"), 0, "{html:?}: {:?}", f.sorted());
        }
    }

    /// A `<br>` or `<hr>` not displayed (`hidden`, `display: none`) makes no break either:
    /// `Via<br hidden>gra` is `Viagra` to its reader, and was `via` and `gra` to the model.
    #[test]
    fn a_break_not_displayed_parts_no_words() {
        for html in [
            "Via<br hidden>gra now",
            "Via<br style=\"display:none\">gra now",
            "<style>.x{display:none}</style>Via<br class=x>gra now",
            "Via<hr hidden>gra now",
        ] {
            assert_shown_and_hidden(html, &["viagra", "now"], &[]);
        }
        // One displayed still breaks.
        assert_shown_and_hidden(
            "<style>.x{display:none}</style>cheap<br class=y>pills <br hidden>",
            &["cheap", "pills"],
            &[],
        );
    }

    /// An end tag inside a table's cell ends nothing outside the table, for the hidden
    /// text's elements as for their colours: a stray `</span>` in a cell of tiny text
    /// showed the ham padded in after it, which the reader does not see.
    #[test]
    fn an_end_tag_in_a_cell_ends_nothing_outside_its_table() {
        for (html, shown, hidden) in [
            (
                "<span><table><tr><td style=\"font-size:0\">meeting</span> agenda</td></tr>\
                 </table></span>cheap",
                &["cheap"][..],
                &["meeting", "agenda"][..],
            ),
            (
                "<div><table><tr><td style=\"display:none\">meeting</div> agenda</table></div>\
                 cheap",
                &["cheap"],
                &["meeting", "agenda"],
            ),
        ] {
            assert_shown_and_hidden(html, shown, hidden);
        }
    }

    /// Elements end where a browser ends them: an inner end tag of the same name does not
    /// end the hidden element, and an element left open does not hide what follows it.
    #[test]
    fn nested_and_unclosed_tags_hide_what_a_browser_hides() {
        for (html, shown, hidden) in [
            (
                "<div style=\"display:none\">meeting <div>agenda</div> minutes</div> cheap",
                &["cheap"][..],
                &["meeting", "agenda", "minutes"][..],
            ),
            (
                "<span style=\"display:none\">meeting <span style=\"display:inline\">agenda\
                 </span></span>cheap",
                &["cheap"],
                &["meeting", "agenda"],
            ),
            (
                "<p style=\"display:none\">meeting<p>cheap",
                &["cheap"],
                &["meeting"],
            ),
            (
                "<div style=\"display:none\">meeting <b>agenda</div> cheap",
                &["cheap"],
                &["meeting", "agenda"],
            ),
            (
                "<table><tr style=\"display:none\"><td>meeting<tr><td>cheap</table>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "<ul><li hidden>meeting<li>cheap</ul><p>pills",
                &["cheap", "pills"],
                &["meeting"],
            ),
            // Never closed: hidden to the end, as in a browser.
            (
                "cheap <span style=\"display:none\">meeting <b>agenda",
                &["cheap"],
                &["meeting", "agenda"],
            ),
            // An end tag that ends nothing open changes nothing.
            (
                "<span style=\"display:none\">meeting </div></p></td> agenda</span> cheap",
                &["cheap"],
                &["meeting", "agenda"],
            ),
            // Text after `</body>` is still the body's.
            (
                "<body style=\"display:none\">meeting</body> agenda</html>",
                &[],
                &["meeting", "agenda"],
            ),
        ] {
            assert_shown_and_hidden(html, shown, hidden);
        }
        // Nested deeper than the elements followed one by one: still hidden.
        let deep = format!(
            "cheap <div style=\"display:none\">{}{}meeting</div>",
            "<span>".repeat(1000),
            "</span>".repeat(1000)
        );
        assert_shown_and_hidden(&deep, &["cheap"], &["meeting"]);
    }

    /// A style in another attribute's value, or in a comment, is no style.
    #[test]
    fn a_style_inside_a_value_or_a_comment_hides_nothing() {
        for (html, shown, hidden) in [
            (
                "<span title=\"style=display:none\">cheap</span> \
                 <span style=\"display:none\">meeting</span>",
                &["cheap"][..],
                &["meeting"][..],
            ),
            (
                "<span alt='a hidden b' data-x=\"hidden\">cheap</span> \
                 <i hidden>meeting</i>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "<img alt=\"<span style='display:none'>\">cheap \
                 <span style=\"display:none\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
            (
                "<!-- <div style=\"display:none\"> -->cheap \
                 <span style=\"display:none\">meeting</span> pills",
                &["cheap", "pills"],
                &["meeting"],
            ),
            (
                "<p>display:none hides text</p><p style=\"display:none\">meeting</p>",
                &["display", "none", "hides", "text"],
                &["meeting"],
            ),
            (
                "<span style=\"font-family:'display:none'\">cheap</span>\
                 <span style=\"display:none\">meeting</span>",
                &["cheap"],
                &["meeting"],
            ),
        ] {
            assert_shown_and_hidden(html, shown, hidden);
        }
    }

    #[test]
    fn words_are_normalised() {
        for (text, expected) in [
            ("FREE Money, now!", vec!["free", "money", "now"]),
            ("a I x", vec![]),
            ("Straße ÄRGER", vec!["straße", "ärger"]),
            ("don't e-mail", vec!["don't", "mail"]),
            ("price 3.50 2002", vec!["price", "3.50", "2002"]),
        ] {
            assert_eq!(word_list(text), expected, "input {text:?}");
        }
        let long = "x".repeat(55);
        assert_eq!(word_list(&long), ["long:x:5"]);
    }

    #[test]
    fn no_space_scripts_become_bigrams() {
        assert_eq!(word_list("免费发票"), ["免费", "费发", "发票"]);
        assert_eq!(
            word_list("限定セール。今すぐ"),
            ["限定", "定セ", "セー", "ール", "今す", "すぐ"]
        );
        assert_eq!(word_list("ลดราคา"), ["ลด", "ดร", "รา", "าค", "คา"]);
        assert_eq!(word_list("buy 免费 now"), ["buy", "免费", "now"]);
    }

    /// The runs found eight bytes at a time are the runs a character-by-character walk
    /// finds: other three-byte characters (€, ™) and accented Latin stay in a spaced run,
    /// wherever the eight-byte steps fall.
    #[test]
    fn script_runs_split_where_the_script_changes() {
        fn runs(t: &str) -> Vec<(bool, &str)> {
            script_runs(t).collect()
        }
        assert_eq!(
            runs("Preis 10€ für Café™ — jetzt免费发票ok"),
            [
                (false, "Preis 10€ für Café™ — jetzt"),
                (true, "免费发票"),
                (false, "ok")
            ]
        );
        for pad in 1..10 {
            let latin = "é".repeat(pad) + &"x".repeat(pad);
            let text = format!("{latin}ลดราคา{latin}");
            assert_eq!(
                runs(&text),
                [(false, &latin[..]), (true, "ลดราคา"), (false, &latin[..])],
                "{text}"
            );
        }
    }

    #[test]
    fn headers_are_tagged() {
        let raw = b"From: \"Big Bargains\" <deals@Shop.Example.com>\nTo: you@example.org\n\
Subject: Free offer\nReceived: from mx1.spam.example.net ([192.0.2.44]) by mail.example.org\n\
Message-ID: <123@shop.example.com>\nContent-Type: text/plain; charset=\"UTF-8\"\n\nfree stuff at http://www.shop.example.com/buy\n";
        let f = tokens_of(raw, &TokenizerOptions::default());
        for t in [
            "subj:free",
            "subj:offer",
            "free",
            "stuff",
            "from:addr:deals@shop.example.com",
            "from:dom:shop.example.com",
            "from:big",
            "to:dom:example.org",
            "rcvd:mx1.spam.example.net",
            "rcvd:example.net",
            "rcvd:ip:192.0.2",
            "mid:shop.example.com",
            "ct:text/plain",
            "charset:utf-8",
            "hdr:received",
            "url:www.shop.example.com",
            "url:shop.example.com",
            "url:example.com",
        ] {
            assert!(f.count(t) > 0, "missing {t}; got {:?}", f.sorted());
        }
        assert_eq!(
            f.count("free"),
            1,
            "body free counted apart from subject free"
        );
        // An address counts once, as an address: its words would say the same thing again.
        for t in ["from:deals", "from:shop.example.com"] {
            assert_eq!(
                f.count(t),
                0,
                "{t} repeats the address; got {:?}",
                f.sorted()
            );
        }
        let list = tokens_of(
            b"From: a@x.example\nSender: list-admin@lists.example\nReply-To: b@y.example\n\nhi there\n",
            &TokenizerOptions::default(),
        );
        assert_eq!(
            list.count("replyto:dom:y.example"),
            1,
            "{:?}",
            list.sorted()
        );
        assert!(
            list.iter().all(|(t, _)| !t.contains("lists.example")),
            "Sender is the list's, not the author's: {:?}",
            list.sorted()
        );
        let plain = tokens_of(
            raw,
            &TokenizerOptions {
                header_tokens: false,
                url_tokens: false,
                ..Default::default()
            },
        );
        assert!(
            plain.iter().all(|(t, _)| !t.contains(':')),
            "{:?}",
            plain.sorted()
        );
    }

    #[test]
    fn a_body_word_cannot_pass_for_a_header_feature() {
        let raw = b"From: Bob <bob@example.org>\nSubject: fwd\n\nFrom:Ann mailto:ann sent this\n";
        let f = tokens_of(raw, &TokenizerOptions::default());
        for t in ["from", "ann", "mailto", "from:bob"] {
            assert!(f.count(t) > 0, "missing {t}; got {:?}", f.sorted());
        }
        for t in ["from:ann", "mailto:ann"] {
            assert_eq!(f.count(t), 0, "{t}; got {:?}", f.sorted());
        }
    }

    #[test]
    fn received_versions_are_not_addresses() {
        let raw = b"Received: from mx.example.net ([192.0.2.44]) by relay.example.org \
(8.11.6/8.11.6) with ESMTP\nReceived: from h.example.com by example.com with Microsoft \
SMTPSVC(5.0.2195.2966)\nSubject: hi\n\nhello there\n";
        let f = tokens_of(raw, &TokenizerOptions::default());
        for t in [
            "rcvd:ip:192.0.2",
            "rcvd:ver:8.11.6",
            "rcvd:ver:5.0.2195.2966",
        ] {
            assert!(f.count(t) > 0, "missing {t}; got {:?}", f.sorted());
        }
        let ips: Vec<_> = f
            .iter()
            .filter(|(t, _)| t.starts_with("rcvd:ip:"))
            .collect();
        assert_eq!(ips.len(), 1, "only the address is one: {ips:?}");
    }

    #[test]
    fn caps_tokens_when_asked() {
        let opts = TokenizerOptions {
            caps_tokens: true,
            ..Default::default()
        };
        let mut out = Vec::new();
        words("FREE Money NOW2", &opts, &mut |w| out.push(w.to_string()));
        assert_eq!(out, ["caps:FREE", "free", "money", "caps:NOW2", "now2"]);
    }

    #[test]
    fn pair_tokens_when_asked() {
        let opts = TokenizerOptions {
            pair_tokens: true,
            ..Default::default()
        };
        let f = tokens_of(b"Subject: x\n\nclick here now\n", &opts);
        assert_eq!(f.count("click+here"), 1, "{:?}", f.sorted());
        assert_eq!(f.count("here+now"), 1);
    }

    #[test]
    fn ip_literal_urls() {
        let f = tokens_of(
            b"Subject: x\n\ngo to http://192.0.2.7/login now\n",
            &TokenizerOptions::default(),
        );
        assert_eq!(f.count("url:ip-literal"), 1, "{:?}", f.sorted());
    }

    /// Each address of a From was cut out of the whole header in its own pass: 20,000
    /// addresses (330 KB) took 8 s, a 1 MB `From: @ @ @ …` two minutes.
    #[test]
    fn many_addresses_in_from_are_tokenized_in_linear_time() {
        let addrs: Vec<String> = (0..20_000).map(|i| format!("a{i}@b.example")).collect();
        let raw = format!("From: {}\nSubject: hi\n\nhello world\n", addrs.join(" "));
        let started = std::time::Instant::now();
        let f = tokens_of(raw.as_bytes(), &TokenizerOptions::default());
        assert_eq!(f.count("from:addr:a19999@b.example"), 1);
        // Linear takes milliseconds; this guards against the square, it measures nothing.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    /// The display name is the sender's free text: an address there is no sender.
    #[test]
    fn an_address_in_the_display_name_is_not_the_sender() {
        let f = tokens_of(
            b"From: \"service@paypal.com, x\" <X@spam.example>\n\
              Reply-To: service@paypal.com <y@spam.example>\n\
              To: \"Doe, Ann\" <ann@example.org>, bob@example.org\n\nhello\n",
            &TokenizerOptions::default(),
        );
        for t in [
            "from:addr:x@spam.example",
            "from:dom:spam.example",
            "replyto:addr:y@spam.example",
            "to:addr:ann@example.org",
            "to:addr:bob@example.org",
        ] {
            assert_eq!(f.count(t), 1, "{t}: {:?}", f.sorted());
        }
        let sorted = f.sorted();
        let borrowed: Vec<_> = (sorted.iter())
            .filter(|(t, _)| t.contains(":addr:service") || t.contains(":dom:paypal"))
            .collect();
        assert!(borrowed.is_empty(), "{borrowed:?}");
        // Its words are still words of the header.
        assert_eq!(f.count("from:paypal.com"), 1, "{sorted:?}");
    }

    #[test]
    fn invisible_characters_do_not_hide_a_word() {
        assert_eq!(
            word_list("cheap vi\u{ad}agra ci\u{200d}alis le\u{200b}vitra \u{feff}pills\u{e0041}"),
            ["cheap", "viagra", "cialis", "levitra", "pills"]
        );
        // What a reader sees stays: accents, dashes, quotes, Hangul.
        assert_eq!(
            word_list("café “quoted” — 한국어"),
            ["café", "quoted", "한국어"]
        );
        // Every default-ignorable code point, the four-byte ones and Khmer's included.
        for c in [
            '\u{17B4}',
            '\u{17B5}',
            '\u{1BCA0}',
            '\u{1BCA3}',
            '\u{1D173}',
            '\u{1D17A}',
        ] {
            assert_eq!(
                word_list(&format!("cheap vi{c}agra")),
                ["cheap", "viagra"],
                "{c:?}"
            );
        }
    }

    /// A host of k labels made k parent features of up to its length each: 1 MB of
    /// `a.a.a.…` took 15 GB.
    #[test]
    fn a_link_with_many_labels_makes_few_features() {
        let raw = format!("Subject: x\n\nhttp://{}example.com/\n", "a.".repeat(5000));
        let f = tokens_of(raw.as_bytes(), &TokenizerOptions::default());
        let urls: Vec<_> = f.iter().filter(|(t, _)| t.starts_with("url:")).collect();
        assert_eq!(urls.len(), 1, "{urls:?}");
        assert_eq!(f.count("url:overlong-host"), 1);
        let deep = b"Subject: x\n\nhttp://a.b.c.d.e.f.g.h.example.co.uk/\n";
        let f = tokens_of(deep, &TokenizerOptions::default());
        let mut urls: Vec<_> = (f.iter())
            .filter(|(t, _)| t.starts_with("url:"))
            .map(|(t, _)| t.to_string())
            .collect();
        urls.sort();
        assert_eq!(
            urls,
            [
                "url:a.b.c.d.e.f.g.h.example.co.uk",
                "url:co.uk",
                "url:example.co.uk",
                "url:f.g.h.example.co.uk",
                "url:g.h.example.co.uk",
                "url:h.example.co.uk",
            ]
        );
    }

    // `addresses` took only what is in angle brackets when a mailbox has any, wherever they
    // are: in a comment (RFC 5322 3.2.2, CFWS) or in an encoded word that decodes to a quote.
    // The real address (the one DMARC aligns) was then dropped and the sender's free text read
    // as the sender: the very forgery the display-name change set out to stop.
    #[test]
    fn a_comment_or_encoded_word_lends_no_sender() {
        for raw in [
            &b"From: x@spam.example (<service@paypal.com>)\nSubject: hi\n\nhello\n"[..],
            b"From: =?utf-8?q?=3Cservice=40paypal.com=3E_=22?= <x@spam.example>\nSubject: hi\n\nhello\n",
        ] {
            let f = tokens_of(raw, &TokenizerOptions::default());
            let sorted = f.sorted();
            let text = String::from_utf8_lossy(raw);
            assert_eq!(f.count("from:addr:x@spam.example"), 1, "{text}: {sorted:?}");
            assert_eq!(f.count("from:addr:service@paypal.com"), 0, "{text}: {sorted:?}");
        }
    }

    /// A comment may hold comments, quoted parentheses and quotes; a quoted string may
    /// hold parentheses. None of them ends where its text says.
    #[test]
    fn comments_and_quoted_strings_nest_as_rfc_5322_writes_them() {
        for value in [
            "Bob (a \\) <c@d.example> (b)) <bob@example.org>",
            "(a \" <c@d.example>) bob@example.org",
            "\"a (b\" <bob@example.org>",
            "\"a \\\" (b\" <bob@example.org> (c, <c@d.example>)",
        ] {
            assert_eq!(addresses(value), ["bob@example.org"], "{value}");
        }
    }

    /// Quotes and comments are read a character at a time, whatever their nesting: a From
    /// of 1 MB of them is read in one pass. No clock here: a reading that went back over
    /// the nesting would take hours, not a slow second.
    #[test]
    fn a_from_of_nested_comments_and_brackets_is_read_in_one_pass() {
        const MB: usize = 1 << 20;
        let x = || vec!["x@spam.example".to_string()];
        // Junk after the address, then junk before it in angle brackets (which a comment
        // left open takes in).
        for (junk, after, before) in [
            ("(", x(), vec![]),
            ("<", x(), x()),
            (")", x(), x()),
            ("\"(", x(), vec![]),
            ("(\\", x(), vec![]),
            ("<(", x(), vec![]),
            ("\"<", x(), x()),
        ] {
            let junk = junk.repeat(MB / junk.len());
            let field = format!("x@spam.example {junk}");
            assert_eq!(addresses(&field), after, "{:.40}", field);
            let field = format!("{junk}<x@spam.example>");
            assert_eq!(addresses(&field), before, "{:.40}", field);
        }
    }
}
