//! Perl regular expressions, as SpamAssassin rules write them, to the Rust `regex` dialect.
//!
//! Patterns run as byte regexes with Unicode off (`(?-u)`), which is what Perl does with the
//! bytes SpamAssassin hands it: `\xc3` is a byte, `\w` and `\b` are ASCII. ASCII word
//! boundaries also keep the lazy DFA running on non-ASCII text, where a Unicode `\b` makes it
//! give up (a 100× difference). What the automata cannot do (look-around, atomic groups,
//! possessive quantifiers, `\K`) is handed to `fancy-regex`, a bounded backtracker, behind a
//! prefilter: the same pattern with those parts widened away, which matches whenever the full
//! one does and runs in the fast set. Large repetition counts (`.{0,400}`) are widened the
//! same way and checked exactly only where the prefilter matched. Back-references are not
//! run (see `translate`).

/// A Perl pattern split from its delimiters: `/re/flags`, `m{re}flags`, `m!re!flags`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerlPattern {
    pub source: String,
    pub flags: String,
}

/// A pattern made ready for Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    /// For `regex::bytes`: flags and `(?-u)` included. With `fancy` set, this is the
    /// widened prefilter, not the pattern itself.
    pub rust: String,
    /// The full pattern for `fancy-regex` when the automata cannot express it.
    pub fancy: Option<String>,
    /// The exact pattern for `regex::bytes` when `rust` is a widened prefilter (large
    /// repetition counts) and the backtracker is not needed.
    pub exact: Option<String>,
    /// The pattern is a plain string (no metacharacters): (text, case-insensitive).
    pub literal: Option<(String, bool)>,
}

/// Why a pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// Splits `text` (the rest of a rule line after the operator) into a pattern and flags.
pub fn split_delimited(text: &str) -> Result<PerlPattern, Unsupported> {
    let text = text.trim();
    let (open, rest) = if let Some(rest) = text.strip_prefix('/') {
        ('/', rest)
    } else if let Some(rest) = text.strip_prefix('m') {
        let mut chars = rest.chars();
        let open = chars
            .next()
            .filter(|c| !c.is_alphanumeric() && !c.is_whitespace())
            .ok_or_else(|| {
                Unsupported(format!(
                    "expected /pattern/ or m{{pattern}}, found {text:?}"
                ))
            })?;
        (open, chars.as_str())
    } else {
        return Err(Unsupported(format!(
            "expected /pattern/ or m{{pattern}}, found {text:?}"
        )));
    };
    let close = match open {
        '{' => '}',
        '(' => ')',
        '[' => ']',
        '<' => '>',
        c => c,
    };
    let nests = close != open;
    let mut depth = 0usize;
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
        } else if nests && c == open {
            depth += 1;
        } else if c == close {
            if depth == 0 {
                let flags = rest[i + c.len_utf8()..].trim();
                if let Some(bad) = flags.chars().find(|c| !"imsxgoa".contains(*c)) {
                    return Err(Unsupported(format!(
                        "unknown regex flag {bad:?} in {text:?}"
                    )));
                }
                let mut source = rest[..i].to_string();
                if !nests && close != '/' {
                    // m!a\!b! means a literal "!".
                    source = source.replace(&format!("\\{close}"), &close.to_string());
                }
                return Ok(PerlPattern {
                    source,
                    flags: flags.chars().filter(|c| "imsx".contains(*c)).collect(),
                });
            }
            depth -= 1;
        }
    }
    Err(Unsupported(format!(
        "pattern has no closing {close:?}: {text:?}"
    )))
}

/// Repetition counts above this are widened in the prefilter.
const WIDEN_ABOVE: usize = 40;

/// Metacharacters of the Rust regex syntax (regex-syntax's `is_meta_character`).
fn is_meta(c: char) -> bool {
    matches!(
        c,
        '\\' | '.'
            | '+'
            | '*'
            | '?'
            | '('
            | ')'
            | '|'
            | '['
            | ']'
            | '{'
            | '}'
            | '^'
            | '$'
            | '#'
            | '&'
            | '-'
            | '~'
    )
}

struct Out {
    /// The pattern for the automata (the prefilter when `fancy` is needed).
    plain: String,
    /// The full pattern for fancy-regex.
    full: String,
    needs_fancy: bool,
    /// A count was widened in `plain`; `full` has it exact.
    widened: bool,
    literal: Option<String>,
}

struct Group {
    look: bool,
    extended: bool,
}

impl Out {
    fn not_literal(&mut self) {
        self.literal = None;
    }
}

fn hex(c: char) -> String {
    format!("\\x{{{:X}}}", c as u32)
}

/// Whether a group's inline flags turn on `m` somewhere in `source` (`(?m)`, `(?im:`).
fn inline_multiline(source: &str) -> bool {
    source.match_indices("(?").any(|(at, _)| {
        source[at + 2..]
            .chars()
            .take_while(|c| "imsx".contains(*c))
            .any(|c| c == 'm')
    })
}

/// Perl's `\Z`, and its `$` without `m`: the end, or before a newline that ends the text.
const PERL_END: &str = "(?:\\n?\\z)";

/// How far past a `{` or `[:` the translator looks for its end: further than any
/// quantifier's count or class name reaches.
const MAX_LOOKAHEAD: usize = 64;

/// Translates a Perl pattern. `flags` are Perl's (`i m s x`).
pub fn translate(p: &PerlPattern) -> Result<Translated, Unsupported> {
    let chars: Vec<char> = p.source.chars().collect();
    // `x` is the translator's own, group by group as in Perl (`(?-x:a b)` within `/…/x`);
    // Rust never sees it.
    let mut extended = p.flags.contains('x');
    // Perl's `$` without `m` is its `\Z`: the end, or before a newline that ends the text.
    // Rust's is the very end, and `full` and `rawbody` texts end with a newline.
    let dollar_ends_lines = p.flags.contains('m') || inline_multiline(&p.source);
    let mut out = Out {
        plain: String::new(),
        full: String::new(),
        needs_fancy: false,
        widened: false,
        literal: Some(String::new()),
    };
    // Each open group: whether it is a look-around, so that its closing paren is dropped
    // from the prefilter, and whether `x` held outside it, to be restored when it closes.
    let mut groups: Vec<Group> = Vec::new();
    // The prefilter drops look-around groups whole: while inside one, only `full` grows.
    let mut dropping = 0usize;
    let mut in_class = false;
    let mut class_start = false;
    // Where the open class began (in `plain`, in `full`), whether it is negated, and its
    // non-ASCII characters and ranges, which a byte class cannot hold.
    let mut class_at = (0, 0);
    let mut class_negated = false;
    let mut class_chars = String::new();
    // Why `full` cannot be written, should the pattern need it.
    let mut full_unsupported: Option<String> = None;
    let mut last_quantifiable = false;
    // Whether a quantifier just ended: Perl refuses another one after it (`a{2}{3}`).
    let mut after_quantifier = false;
    let mut i = 0;
    macro_rules! emit {
        ($s:expr) => {{
            let s: &str = &$s;
            out.full.push_str(s);
            if dropping == 0 {
                out.plain.push_str(s);
            }
        }};
    }
    while i < chars.len() {
        let c = chars[i];
        if in_class {
            let first = class_start;
            class_start = false;
            match c {
                ']' if !first => {
                    in_class = false;
                    emit!("]");
                    if !class_chars.is_empty() {
                        // `[eé]` is `e` or the character `é` (UTF-8, as the text is), and
                        // `[^eé]` any character but those.
                        if out.plain.len() > class_at.0 {
                            let class = unicode_class(
                                &out.plain[class_at.0..],
                                class_negated,
                                &class_chars,
                            );
                            out.plain.replace_range(class_at.0.., &class);
                        }
                        let caseless = p.flags.contains('i');
                        match spelled_class(
                            &out.full[class_at.1..],
                            class_negated,
                            &class_chars,
                            caseless,
                        ) {
                            Ok(class) => out.full.replace_range(class_at.1.., &class),
                            Err(why) => full_unsupported = Some(why),
                        }
                    }
                    last_quantifiable = true;
                }
                '\\' => {
                    let (s, n) = class_escape(&chars[i + 1..])?;
                    emit!(s);
                    i += n;
                }
                '[' => {
                    if chars.get(i + 1) == Some(&':') {
                        // A class name is short: looking no further keeps a long pattern
                        // of `[:` from costing its length at each one.
                        let rest: String = chars[i..].iter().take(MAX_LOOKAHEAD).collect();
                        if let Some(end) = rest.find(":]") {
                            emit!(rest[..end + 2]);
                            i += rest[..end + 2].chars().count();
                            continue;
                        }
                    }
                    emit!("\\[");
                }
                '^' if first => {
                    emit!("^");
                    class_start = true;
                    class_negated = true;
                }
                '&' | '~' | '#' | ' ' | '\t' => emit!(hex(c)),
                '-' if chars.get(i + 1) == Some(&'-') => emit!("\\-"),
                c if c.is_whitespace() && extended => emit!(hex(c)),
                c if !c.is_ascii() => {
                    if i >= 2 && chars[i - 1] == '-' && !matches!(chars[i - 2], '[' | '^' | '\\') {
                        return Err(Unsupported(
                            "a class range from an ASCII to a non-ASCII character".into(),
                        ));
                    }
                    class_chars.push(c);
                    if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&d| d != ']')
                    {
                        if chars[i + 2].is_ascii() {
                            return Err(Unsupported(
                                "a class range from a non-ASCII to an ASCII character".into(),
                            ));
                        }
                        class_chars.push('-');
                        class_chars.push(chars[i + 2]);
                        i += 2;
                    }
                }
                c => emit!(c.to_string()),
            }
            i += 1;
            continue;
        }
        let quantified = std::mem::take(&mut after_quantifier);
        match c {
            '\\' => {
                let next = *chars
                    .get(i + 1)
                    .ok_or_else(|| Unsupported("pattern ends with a lone backslash".into()))?;
                i += 2;
                match next {
                    '1'..='9' => {
                        // A back-reference widens to "anything" in a prefilter, which then
                        // passes nearly every message on to the backtracker: SpamAssassin's
                        // "To equals From" rules cost milliseconds each per message that way.
                        return Err(Unsupported(format!(
                            "back-reference \\{next} (too costly to run on every message)"
                        )));
                    }
                    'K' => {
                        out.needs_fancy = true;
                        out.full.push_str("\\K");
                        out.not_literal();
                        last_quantifiable = false;
                    }
                    'Q' => {
                        // \Q…\E: everything literal.
                        let mut lit = String::new();
                        while i < chars.len()
                            && !(chars[i] == '\\' && chars.get(i + 1) == Some(&'E'))
                        {
                            lit.push(chars[i]);
                            i += 1;
                        }
                        i = (i + 2).min(chars.len().max(i));
                        let escaped: String = lit.chars().map(escape_literal).collect();
                        emit!(escaped);
                        if let Some(l) = &mut out.literal {
                            l.push_str(&lit);
                        }
                        last_quantifiable = true;
                    }
                    'G' => {
                        return Err(Unsupported(
                            "\\G (end of previous match) has no meaning here".into(),
                        ));
                    }
                    'k' | 'g' => {
                        return Err(Unsupported(format!(
                            "named back-reference \\{next} is not supported"
                        )));
                    }
                    c if c.is_ascii_alphanumeric() => {
                        let (s, n, lit) = letter_escape(c, &chars[i..])?;
                        i += n;
                        emit!(s);
                        match (lit, &mut out.literal) {
                            (Some(lit), Some(l)) => l.push(lit),
                            _ => out.literal = None,
                        }
                        last_quantifiable = !matches!(c, 'b' | 'B' | 'A' | 'z' | 'Z');
                    }
                    c => {
                        emit!(escape_literal(c));
                        if let Some(l) = &mut out.literal {
                            l.push(c);
                        }
                        last_quantifiable = true;
                    }
                }
                continue;
            }
            '[' => {
                in_class = true;
                class_start = true;
                class_at = (out.plain.len(), out.full.len());
                class_negated = false;
                class_chars.clear();
                emit!("[");
                out.not_literal();
            }
            '(' => {
                out.not_literal();
                let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
                if rest.starts_with("(?#") {
                    // A comment: skip to its close.
                    while i < chars.len() && chars[i] != ')' {
                        i += 1;
                    }
                    i += 1;
                    continue;
                }
                let look = ["(?<=", "(?<!", "(?=", "(?!"]
                    .into_iter()
                    .find(|l| rest.starts_with(l));
                if let Some(look) = look {
                    out.needs_fancy = true;
                    out.full.push_str(look);
                    dropping += 1;
                    groups.push(Group {
                        look: true,
                        extended,
                    });
                    i += look.chars().count();
                    last_quantifiable = false;
                    continue;
                } else if rest.starts_with("(?>") {
                    out.needs_fancy = true;
                    out.full.push_str("(?>");
                    if dropping == 0 {
                        out.plain.push_str("(?:");
                    }
                    groups.push(Group {
                        look: false,
                        extended,
                    });
                    i += 3;
                    continue;
                } else if rest.starts_with("(?'") {
                    emit!("(?<");
                    i += 3;
                    while i < chars.len() && chars[i] != '\'' {
                        emit!(chars[i].to_string());
                        i += 1;
                    }
                    emit!(">");
                    groups.push(Group {
                        look: false,
                        extended,
                    });
                    i += 1;
                    continue;
                } else if rest.starts_with("(?|")
                    || rest.starts_with("(?{")
                    || rest.starts_with("(??")
                {
                    return Err(Unsupported(format!(
                        "Perl construct {rest:?}… is not supported"
                    )));
                } else if rest.starts_with("(?^") {
                    return Err(Unsupported("(?^…) flag reset is not supported".into()));
                } else if rest.starts_with("(?")
                    && !rest.starts_with("(?:")
                    && !rest.starts_with("(?<")
                    && !rest.starts_with("(?P")
                {
                    // Inline flags: Rust knows i m s U; `x` is kept here; Perl's others (a,
                    // u, l, d, n, p) are dropped.
                    let mut j = i + 2;
                    let (mut on, mut off) = (String::new(), String::new());
                    let mut turning_off = false;
                    let mut x_flag = None;
                    while j < chars.len() && (chars[j].is_ascii_alphabetic() || chars[j] == '-') {
                        match chars[j] {
                            '-' => turning_off = true,
                            'x' => x_flag = Some(!turning_off),
                            f if "ims".contains(f) && turning_off => off.push(f),
                            f if "ims".contains(f) => on.push(f),
                            _ => {}
                        }
                        j += 1;
                    }
                    let closer = chars.get(j).copied();
                    let flags = if off.is_empty() {
                        on
                    } else {
                        format!("{on}-{off}")
                    };
                    if flags.is_empty() {
                        if closer == Some(')') {
                            extended = x_flag.unwrap_or(extended);
                            i = j + 1;
                            // Perl reads a count after flags alone as text: `a(?-x){2}`.
                            last_quantifiable = false;
                            continue;
                        }
                        emit!("(?:");
                    } else {
                        emit!(format!("(?{flags}"));
                        if closer == Some(':') {
                            emit!(":");
                        } else if closer == Some(')') {
                            emit!(")");
                            extended = x_flag.unwrap_or(extended);
                            i = j + 1;
                            last_quantifiable = false;
                            continue;
                        }
                    }
                    groups.push(Group {
                        look: false,
                        extended,
                    });
                    extended = x_flag.unwrap_or(extended);
                    i = j + 1;
                    last_quantifiable = false;
                    continue;
                }
                groups.push(Group {
                    look: false,
                    extended,
                });
                // `(?:` whole: taken a character at a time, its `:` was a literal that a
                // count could follow (`(?: {2})` under `x`, text to Perl).
                let open = if rest.starts_with("(?:") { "(?:" } else { "(" };
                emit!(open);
                last_quantifiable = false;
                i += open.len();
                continue;
            }
            ')' => {
                out.not_literal();
                let group = groups
                    .pop()
                    .ok_or_else(|| Unsupported("unmatched ')'".into()))?;
                extended = group.extended;
                out.full.push(')');
                if group.look {
                    dropping -= 1;
                    // A quantifier on a look-around is meaningless; skip it in the prefilter too.
                    last_quantifiable = false;
                    i += 1;
                    if matches!(chars.get(i), Some('?' | '*')) {
                        out.full.push(chars[i]);
                        i += 1;
                    }
                    continue;
                } else if dropping == 0 {
                    out.plain.push(')');
                }
                last_quantifiable = true;
            }
            '{' => {
                // A quantifier when it looks like one, else a literal brace (as in Perl).
                // Its count is short: see `MAX_LOOKAHEAD`.
                let rest: String = chars[i..].iter().take(MAX_LOOKAHEAD).collect();
                let end = rest.find('}');
                let body = end.map(|e| &rest[1..e]);
                let is_quant = body.is_some_and(|b| {
                    let (lo, hi) = b.split_once(',').unwrap_or((b, "0"));
                    !b.is_empty()
                        && lo.chars().all(|c| c.is_ascii_digit())
                        && hi.chars().all(|c| c.is_ascii_digit())
                        && !(lo.is_empty() && hi.is_empty())
                });
                if is_quant && quantified {
                    return Err(Unsupported(
                        "nested quantifiers (Perl refuses them too)".into(),
                    ));
                }
                if is_quant && last_quantifiable {
                    let body = body.expect("is_quant implies a body");
                    let body = if body.starts_with(',') {
                        format!("0{body}")
                    } else {
                        body.to_string()
                    };
                    let (lo, hi) = body.split_once(',').unwrap_or((&body, &body));
                    let lo: usize = lo.parse().unwrap_or(0);
                    let hi: usize = hi.parse().unwrap_or(usize::MAX);
                    if lo > WIDEN_ABOVE || (hi != usize::MAX && hi > WIDEN_ABOVE) {
                        // Large counts blow up the automata; the prefilter takes `*`/`+`
                        // (which match whenever the count does) and the exact count is
                        // checked only where the prefilter matched.
                        out.full.push_str(&format!("{{{body}}}"));
                        if dropping == 0 {
                            out.plain.push(if lo == 0 { '*' } else { '+' });
                        }
                        out.widened = true;
                    } else {
                        emit!(format!("{{{body}}}"));
                    }
                    i += end.expect("is_quant implies a closing brace") + 1;
                    out.not_literal();
                    if let Some('+') = chars.get(i) {
                        out.needs_fancy = true;
                        out.full.push('+');
                        i += 1;
                    }
                    last_quantifiable = false;
                    after_quantifier = true;
                    continue;
                }
                emit!("\\{");
                if let Some(l) = &mut out.literal {
                    l.push('{');
                }
                last_quantifiable = true;
            }
            '}' => {
                emit!("\\}");
                if let Some(l) = &mut out.literal {
                    l.push('}');
                }
                last_quantifiable = true;
            }
            '*' | '+' | '?' => {
                out.not_literal();
                if !last_quantifiable {
                    if c == '?' || c == '+' {
                        // Lazy `*?` and possessive `*+` follow a quantifier.
                        if c == '+' {
                            out.needs_fancy = true;
                            out.full.push('+');
                        } else {
                            emit!("?");
                        }
                        after_quantifier = true;
                        i += 1;
                        continue;
                    }
                    if quantified {
                        return Err(Unsupported(
                            "nested quantifiers (Perl refuses them too)".into(),
                        ));
                    }
                    return Err(Unsupported(format!("quantifier {c:?} follows nothing")));
                }
                emit!(c.to_string());
                last_quantifiable = false;
                after_quantifier = true;
                i += 1;
                // The lazy suffix is handled on the next turn; mark it.
                continue;
            }
            '#' if extended => {
                // Comment to end of line in /x mode.
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                after_quantifier = quantified;
                continue;
            }
            c if c.is_whitespace() && extended => after_quantifier = quantified,
            '$' if !dollar_ends_lines => {
                emit!(PERL_END);
                out.not_literal();
                last_quantifiable = false;
            }
            '.' | '^' | '$' | '|' => {
                emit!(c.to_string());
                out.not_literal();
                last_quantifiable = c == '.';
            }
            '&' | '~' | '-' | '#' => {
                emit!(format!("\\{c}"));
                if let Some(l) = &mut out.literal {
                    l.push(c);
                }
                last_quantifiable = true;
            }
            c => {
                emit!(c.to_string());
                if let Some(l) = &mut out.literal {
                    l.push(c);
                }
                last_quantifiable = true;
            }
        }
        i += 1;
    }
    if in_class {
        return Err(Unsupported("unterminated character class".into()));
    }
    if !groups.is_empty() {
        return Err(Unsupported("unclosed group".into()));
    }
    if let Some(why) = full_unsupported.filter(|_| out.needs_fancy) {
        return Err(Unsupported(why));
    }
    // Perl allows a flag twice (`/x/ii`); Rust does not.
    let flags: String = "ims".chars().filter(|c| p.flags.contains(*c)).collect();
    let prefix = if flags.is_empty() {
        String::new()
    } else {
        format!("(?{flags})")
    };
    let literal = out
        .literal
        .filter(|l| !l.is_empty() && l.is_ascii() && !p.flags.contains('x'))
        .map(|l| (l, p.flags.contains('i')));
    Ok(Translated {
        rust: format!("(?-u){prefix}{}", out.plain),
        exact: (out.widened && !out.needs_fancy).then(|| format!("(?-u){prefix}{}", out.full)),
        fancy: out.needs_fancy.then(|| format!("{prefix}{}", out.full)),
        literal,
    })
}

/// For the automata, a byte class just closed (`[ab]`, `[^ab]`, `[]` when it held only
/// non-ASCII characters) with its non-ASCII characters and ranges `chars` put back, as a
/// Unicode class beside it (or within it, negated).
fn unicode_class(class: &str, negated: bool, chars: &str) -> String {
    if negated {
        let rest = &class[2..class.len() - 1];
        format!("(?u:[^{rest}{chars}])")
    } else if class == "[]" {
        format!("(?u:[{chars}])")
    } else {
        format!("(?:{class}|(?u:[{chars}]))")
    }
}

/// For fancy-regex, which has no inline Unicode mode on bytes: the same, the characters
/// spelled out (both cases when `caseless`). A negated one cannot be spelled.
fn spelled_class(
    class: &str,
    negated: bool,
    chars: &str,
    caseless: bool,
) -> Result<String, String> {
    if negated {
        return Err(
            "a negated class with non-ASCII characters in a pattern with look-around".into(),
        );
    }
    let chars = spell_out(chars, caseless)?;
    Ok(if class == "[]" {
        format!("(?:{chars})")
    } else {
        format!("(?:{class}|{chars})")
    })
}

/// A class's non-ASCII characters and ranges (`éà-ÿ`) as an alternation of characters,
/// each in both cases when `caseless`; too many to spell is an error.
fn spell_out(class: &str, caseless: bool) -> Result<String, String> {
    const MAX: u32 = 256;
    let chars: Vec<char> = class.chars().collect();
    let mut all = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        // The only `-` here joins a range (an ASCII `-` stays in the byte class).
        let (lo, hi, len) = match chars.get(i + 1) {
            Some('-') => (chars[i], chars[i + 2], 3),
            _ => (chars[i], chars[i], 1),
        };
        i += len;
        if u32::from(hi).saturating_sub(u32::from(lo)) + all.len() as u32 > MAX {
            return Err(format!("a class range {lo}-{hi} too wide to spell out"));
        }
        for c in lo..=hi {
            all.push(c);
            if caseless {
                all.extend(c.to_lowercase().chain(c.to_uppercase()));
            }
        }
    }
    all.sort_unstable();
    all.dedup();
    Ok(all
        .iter()
        .map(char::to_string)
        .collect::<Vec<_>>()
        .join("|"))
}

fn escape_literal(c: char) -> String {
    if is_meta(c) {
        format!("\\{c}")
    } else if c.is_whitespace() || !c.is_ascii() || c.is_ascii_control() {
        hex(c)
    } else {
        c.to_string()
    }
}

/// A letter or digit escape outside a class: (Rust text, chars consumed after the letter,
/// the literal char it stands for if it is one).
fn letter_escape(c: char, rest: &[char]) -> Result<(String, usize, Option<char>), Unsupported> {
    Ok(match c {
        'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B' | 'A' | 'z' => (format!("\\{c}"), 0, None),
        'Z' => (PERL_END.into(), 0, None),
        'n' => ("\\n".into(), 0, Some('\n')),
        'r' => ("\\r".into(), 0, Some('\r')),
        't' => ("\\t".into(), 0, Some('\t')),
        'f' => ("\\x0C".into(), 0, Some('\x0C')),
        'e' => ("\\x1B".into(), 0, Some('\x1B')),
        'a' => ("\\x07".into(), 0, Some('\x07')),
        'h' => ("[\\t\\x20]".into(), 0, None),
        'H' => ("[^\\t\\x20]".into(), 0, None),
        'v' => ("[\\n\\x0B\\x0C\\r]".into(), 0, None),
        'V' => ("[^\\n\\x0B\\x0C\\r]".into(), 0, None),
        'R' => ("(?:\\r\\n|\\n|\\r)".into(), 0, None),
        'N' if rest.first() != Some(&'{') => ("[^\\n]".into(), 0, None),
        'x' | '0' | 'c' => {
            let (byte, n) = numeric_escape(c, rest)?;
            return Ok((hex_byte(byte), n, None));
        }
        'p' | 'P' => {
            // \pL or \p{Name}: Unicode classes, which need Unicode mode.
            let n = if rest.first() == Some(&'{') {
                rest.iter()
                    .position(|&c| c == '}')
                    .map(|p| p + 1)
                    .unwrap_or(rest.len())
            } else {
                1
            };
            let name: String = rest[..n.min(rest.len())].iter().collect();
            (format!("(?u:\\{c}{name})"), n, None)
        }
        c => return Err(Unsupported(format!("unknown escape \\{c}"))),
    })
}

fn hex_byte(v: u32) -> String {
    if v < 0x100 {
        format!("\\x{v:02X}")
    } else {
        format!("(?u:\\x{{{v:X}}})")
    }
}

/// `\xHH`, `\x{HHHH}`, `\0oo`, `\cX`: (value, chars consumed after the letter).
fn numeric_escape(c: char, rest: &[char]) -> Result<(u32, usize), Unsupported> {
    match c {
        'x' => {
            if rest.first() == Some(&'{') {
                let end = rest
                    .iter()
                    .position(|&c| c == '}')
                    .ok_or_else(|| Unsupported("\\x{ without }".into()))?;
                let digits: String = rest[1..end].iter().collect();
                let v = u32::from_str_radix(digits.trim(), 16)
                    .map_err(|_| Unsupported(format!("bad hex escape \\x{{{digits}}}")))?;
                Ok((v, end + 1))
            } else {
                let digits: String = rest
                    .iter()
                    .take(2)
                    .take_while(|c| c.is_ascii_hexdigit())
                    .collect();
                let v = if digits.is_empty() {
                    0
                } else {
                    u32::from_str_radix(&digits, 16).unwrap_or(0)
                };
                Ok((v, digits.len()))
            }
        }
        '0' => {
            let digits: String = rest
                .iter()
                .take(2)
                .take_while(|c| ('0'..='7').contains(*c))
                .collect();
            let v = if digits.is_empty() {
                0
            } else {
                u32::from_str_radix(&digits, 8).unwrap_or(0)
            };
            Ok((v, digits.len()))
        }
        'c' => {
            let x = rest
                .first()
                .ok_or_else(|| Unsupported("\\c at end of pattern".into()))?;
            Ok(((x.to_ascii_uppercase() as u32) ^ 0x40, 1))
        }
        _ => Err(Unsupported(format!("unknown escape \\{c}"))),
    }
}

/// An escape inside a character class: (Rust text, chars consumed including the backslash's follower).
fn class_escape(rest: &[char]) -> Result<(String, usize), Unsupported> {
    let c = *rest
        .first()
        .ok_or_else(|| Unsupported("pattern ends with a lone backslash".into()))?;
    Ok(match c {
        'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'n' | 'r' | 't' => (format!("\\{c}"), 1),
        'f' => ("\\x0C".into(), 1),
        'e' => ("\\x1B".into(), 1),
        'a' => ("\\x07".into(), 1),
        'b' => ("\\x08".into(), 1),
        'h' => ("\\t\\x20".into(), 1),
        'v' => ("\\n\\x0B\\x0C\\r".into(), 1),
        'x' | 'c' => {
            let (v, n) = numeric_escape(c, &rest[1..])?;
            (class_byte(v), n + 1)
        }
        '0'..='7' => {
            let digits: String = rest
                .iter()
                .take(3)
                .take_while(|c| ('0'..='7').contains(*c))
                .collect();
            let v = u32::from_str_radix(&digits, 8).unwrap_or(0);
            (class_byte(v), digits.len())
        }
        'p' | 'P' => {
            return Err(Unsupported(
                "Unicode property inside a class is not supported".into(),
            ));
        }
        c if c.is_ascii_alphanumeric() => {
            return Err(Unsupported(format!("unknown escape \\{c} in a class")));
        }
        c => (escape_literal(c), 1),
    })
}

fn class_byte(v: u32) -> String {
    if v < 0x100 {
        format!("\\x{v:02X}")
    } else {
        format!("\\x{{{v:X}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tr(src: &str, flags: &str) -> Translated {
        translate(&PerlPattern {
            source: src.into(),
            flags: flags.into(),
        })
        .unwrap_or_else(|e| panic!("{src:?}: {e:?}"))
    }

    #[test]
    fn delimiters_and_flags() {
        for (text, source, flags) in [
            ("/abc/i", "abc", "i"),
            ("m{a/b}x", "a/b", "x"),
            ("m!a\\!b!", "a!b", ""),
            ("/a\\/b/ ", "a\\/b", ""),
            ("m{a{2}b}", "a{2}b", ""),
            ("/x/gism", "x", "ism"),
        ] {
            let p = split_delimited(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert_eq!(
                (p.source.as_str(), p.flags.as_str()),
                (source, flags),
                "{text}"
            );
        }
        for bad in ["abc", "/abc", "/abc/q", "m"] {
            assert!(split_delimited(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn translations_compile_and_match_like_perl() {
        // (pattern, flags, must match, must not match)
        for (src, flags, yes, no) in [
            (r"\bviagra\b", "i", "buy VIAGRA now", "viagras"),
            (r"a\/b\@c\<d\>", "", "a/b@c<d>", "ab"),
            (r"^\d{3,}[^0-9\@]", "", "12345x", "12@"),
            (r"foo{bar}", "", "foo{bar}", "foo"),
            (r"a{,2}b", "", "b", "c"),
            (r"[[\]]x", "", "[x", "x"),
            (r"[a&&b]", "", "&", "c"),
            (r"\xc3\xa9", "", "é", "e"),
            (r"hello world # a comment", "x", "helloworld", "hello world"),
            (r"a\ b", "x", "a b", "ab"),
            (r"(?i:abc)", "", "ABC", "ab"),
            (r"x\Z", "", "x\n", "xy"),
            // Without `m`, Perl's `$` takes a final newline too; with it, any line's end.
            (r"endword$", "", "an endword\n", "endword\nmore"),
            (r"^a$", "m", "b\na\nb", "ab"),
            (r"(?m)^a$", "", "b\na\nb", "ab"),
            (r"\Qa.b\E", "", "a.b", "axb"),
            (r"(?#comment)z", "", "z", "y"),
            // `x` holds group by group, as Perl's does, turned on or off inline.
            (r"(?-x:o b)", "x", "foo bar", "foobar"),
            (r"(?x:a b) c", "", "ab c", "abc"),
            (r"a(?x) b(?-x) c", "", "ab c", "a b c"),
            (r"(?x: a (?-x:b c) d ) e", "", "ab cd e", "ab cde"),
            // A count after flags alone, or just inside `(?:`, is text to Perl.
            (r"a(?-x){1,2}b", "", "a{1,2}b", "aab"),
            (r"c(?x)  {1,2}", "", "c{1,2}", "cc"),
            (r"^(?:   {2})$", "x", "{2}", ""),
            (r"(?i){2}a", "", "{2}A", "a"),
        ] {
            let t = tr(src, flags);
            assert!(t.fancy.is_none(), "{src}");
            let re = regex::bytes::Regex::new(&t.rust)
                .unwrap_or_else(|e| panic!("{src} -> {}: {e}", t.rust));
            assert!(
                re.is_match(yes.as_bytes()),
                "{src} -> {} on {yes:?}",
                t.rust
            );
            assert!(!re.is_match(no.as_bytes()), "{src} -> {} on {no:?}", t.rust);
        }
    }

    /// A byte class cannot hold `é`; the text rules read is UTF-8, so a class's non-ASCII
    /// characters are characters, in both engines.
    #[test]
    fn non_ascii_characters_in_a_class_are_characters() {
        for (src, flags, yes, no) in [
            (
                "gu[eéè]i",
                "",
                &["guei", "guéi", "guèi"][..],
                &["gui", "guai"][..],
            ),
            ("[éè]", "", &["é"], &["e"]),
            ("[^é]x", "", &["ax", "àx"], &["éx", "x"]),
            ("[à-ÿ]{2}", "", &["àé"], &["ab", "Àa"]),
            ("CAF[é]", "i", &["café", "CAFÉ"], &["CAFE"]),
            ("(?<=gu)[eé]i", "", &["guéi"], &["gai", "éi"]),
            ("(?<=gu)[é]i", "i", &["GUÉI", "guéi"], &["guei"]),
        ] {
            let t = tr(src, flags);
            let pre = regex::bytes::Regex::new(&t.rust)
                .unwrap_or_else(|e| panic!("{src} -> {}: {e}", t.rust));
            let full = t.fancy.as_deref().map(|f| {
                super::super::matcher::backtracker(f)
                    .unwrap_or_else(|e| panic!("{src} -> {f}: {e}"))
            });
            let matches = |text: &str| match &full {
                Some(full) => full.is_match(text.as_bytes()).unwrap(),
                None => pre.is_match(text.as_bytes()),
            };
            for text in yes {
                assert!(
                    pre.is_match(text.as_bytes()),
                    "{src} -> {} on {text}",
                    t.rust
                );
                assert!(matches(text), "{src} -> {:?} on {text}", t.fancy);
            }
            for text in no {
                assert!(
                    !matches(text),
                    "{src} -> {} {:?} on {text}",
                    t.rust,
                    t.fancy
                );
            }
        }
        for bad in ["[a-é]", "[é-z]", "(?<=a)[^é]", "(?=x)[\u{100}-\u{10FFFF}]"] {
            assert!(
                translate(&PerlPattern {
                    source: bad.into(),
                    flags: String::new()
                })
                .is_err()
            );
        }
    }

    #[test]
    fn look_around_goes_to_fancy_with_a_wider_prefilter() {
        for (src, yes, no) in [
            (r"foo(?!bar)", "foobaz", "foobar"),
            (r"(?<=\$)\d+", "$100", "100"),
            (r"(?>a+)b", "aab", "aac"),
            (r"a++b", "aab", "ac"),
        ] {
            let t = tr(src, "");
            let fancy = t
                .fancy
                .clone()
                .unwrap_or_else(|| panic!("{src} needs fancy"));
            let pre = regex::bytes::Regex::new(&t.rust)
                .unwrap_or_else(|e| panic!("{src} -> {}: {e}", t.rust));
            let full =
                fancy_regex::Regex::new(&fancy).unwrap_or_else(|e| panic!("{src} -> {fancy}: {e}"));
            assert!(pre.is_match(yes.as_bytes()), "{src} prefilter {}", t.rust);
            assert!(full.is_match(yes).unwrap(), "{src} -> {fancy}");
            assert!(!full.is_match(no).unwrap(), "{src} -> {fancy} on {no}");
        }
    }

    #[test]
    fn large_counts_are_widened_in_the_prefilter_and_checked_exactly() {
        let t = tr(r"a.{0,100}b", "");
        assert_eq!(t.rust, "(?-u)a.*b");
        let exact = regex::bytes::Regex::new(t.exact.as_deref().expect("exact pattern")).unwrap();
        assert!(exact.is_match(b"a123b"));
        assert!(!exact.is_match(format!("a{}b", "x".repeat(150)).as_bytes()));
        assert_eq!(tr(r"a{2,5}", "").exact, None);
    }

    #[test]
    fn literals_are_recognised() {
        assert_eq!(
            tr("click here", "i").literal,
            Some(("click here".into(), true))
        );
        assert_eq!(
            tr(r"100\% free", "").literal,
            Some(("100% free".into(), false))
        );
        assert_eq!(tr(r"\bfree\b", "i").literal, None);
        assert_eq!(tr("a.b", "").literal, None);
    }

    #[test]
    fn unsupported_is_an_error_not_a_panic() {
        for src in [
            r"(\w)\1",
            r"a\G",
            r"(?{ code })",
            "(abc",
            "abc)",
            "[abc",
            r"\k<x>",
            "*a",
            r"\q",
            // Nested quantifiers: Perl refuses these rather than repeat a repetition.
            "a{2}{3}",
            "a**",
            "a*?{2}",
        ] {
            let r = translate(&PerlPattern {
                source: src.into(),
                flags: String::new(),
            });
            assert!(r.is_err(), "{src}: {r:?}");
        }
    }
}
