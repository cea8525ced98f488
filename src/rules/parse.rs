//! SpamAssassin `.cf` files to rule definitions: the line syntax, `if`/`ifplugin` blocks,
//! `describe`/`score`/`tflags`, and ReplaceTags. Nothing is compiled here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::eval::Cmp;

/// What a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Header,
    Mimeheader,
    Body,
    Rawbody,
    Uri,
    Full,
    Meta,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Header => "header",
            Kind::Mimeheader => "mimeheader",
            Kind::Body => "body",
            Kind::Rawbody => "rawbody",
            Kind::Uri => "uri",
            Kind::Full => "full",
            Kind::Meta => "meta",
        }
    }

    fn from_directive(d: &str) -> Option<Kind> {
        Some(match d {
            "header" => Kind::Header,
            "mimeheader" => Kind::Mimeheader,
            "body" => Kind::Body,
            "rawbody" => Kind::Rawbody,
            "uri" => Kind::Uri,
            "full" => Kind::Full,
            "meta" => Kind::Meta,
            _ => return None,
        })
    }
}

/// Where a line came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One rule as written: its kind and the text after its name.
#[derive(Debug, Clone)]
pub struct RuleDef {
    pub name: String,
    pub kind: Kind,
    /// Everything after the name, ReplaceTags not yet applied.
    pub text: String,
    pub origin: Origin,
}

/// A line that could not be used, and why.
#[derive(Debug, Clone)]
pub struct Problem {
    pub origin: Origin,
    pub rule: Option<String>,
    pub reason: Reason,
}

/// Why a rule or line was not loaded; the categories `spamnb rules check` counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Inside `ifplugin X` (or `if plugin(X)`) for a plugin spamnb does not have.
    NeedsPlugin(String),
    /// `eval:NAME(...)` names a test spamnb does not have.
    UnknownEval(String),
    /// The pattern is not valid or uses a construct neither engine runs.
    Regex(String),
    /// The line is not valid rule syntax.
    Syntax(String),
    /// A meta rule that depends on itself.
    MetaCycle,
}

impl Reason {
    /// The category, without details: what the summary counts by.
    pub fn category(&self) -> String {
        match self {
            Reason::NeedsPlugin(p) => format!("needs plugin {p}"),
            Reason::UnknownEval(e) => format!("unknown eval {e}"),
            Reason::Regex(e) if e.starts_with("back-reference") => "regex: back-reference".into(),
            Reason::Regex(_) => "regex not supported".into(),
            Reason::Syntax(_) => "syntax error".into(),
            Reason::MetaCycle => "meta cycle".into(),
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::NeedsPlugin(p) => write!(f, "needs plugin {p}, which spamnb does not have"),
            Reason::UnknownEval(e) => write!(f, "eval:{e} is not a test spamnb has"),
            Reason::Regex(e) => write!(f, "regex: {e}"),
            Reason::Syntax(e) => write!(f, "{e}"),
            Reason::MetaCycle => write!(f, "meta rule depends on itself"),
        }
    }
}

/// Plugins whose rules spamnb can run (in part: an eval it lacks is skipped on its own).
pub const PLUGINS: &[&str] = &[
    "ReplaceTags",
    // Lists of addresses, link hosts and free mail domains, from rule files.
    "WLBLEval",
    "WelcomeListSubject",
    "FreeMail",
    "VBounce",
    // The trace's relays, trusted (`trusted_networks`) or not; its DNS tests are left out.
    "RelayEval",
    // Image attachments' kinds, sizes and names.
    "ImageInfo",
    // Read from trusted Authentication-Results fields, not checked over DNS.
    "AuthRes",
    "SPF",
    "DKIM",
    "DMARC",
    // SpamAssassin's 25_dmarc.cf asks for it by this name.
    "Dmarc",
    "MIMEHeader",
    "HTMLEval",
    "HeaderEval",
    "BodyEval",
    "MIMEEval",
    "URIDetail",
    "Check",
];

/// The SpamAssassin version spamnb answers `if (version >= …)` with.
const SA_VERSION: f64 = 4.000000;

/// Everything read from a set of files. A later definition of a name replaces an earlier one,
/// as in SpamAssassin.
#[derive(Debug, Default)]
pub struct Parsed {
    pub rules: Vec<RuleDef>,
    index: HashMap<String, usize>,
    pub describe: HashMap<String, String>,
    /// A rule's four scores (without and with network tests, without and with Bayes),
    /// one given for all four when only one is.
    pub score: HashMap<String, [f64; 4]>,
    pub tflags: HashMap<String, String>,
    pub problems: Vec<Problem>,
    /// Rules skipped before being defined (by `ifplugin`): name → reason, for the report.
    pub skipped: Vec<(RuleDef, Reason)>,
    pub tags: Tags,
    /// Address, link host and free mail lists.
    pub lists: super::lists::Lists,
    /// Trusted authserv-ids and the lists that read their results.
    pub auth: super::auth::Config,
}

/// ReplaceTags state: `<A>` in a rule named by `replace_rules` becomes the tag's text.
#[derive(Debug, Default)]
pub struct Tags {
    pub start: String,
    pub end: String,
    pub tags: HashMap<String, String>,
    pub pre: Vec<String>,
    pub inter: Vec<String>,
    pub post: Vec<String>,
    pub rules: Vec<String>,
}

impl Tags {
    /// The pattern text with tags replaced, for a rule named in `replace_rules`.
    pub fn apply(&self, text: &str) -> String {
        let (start, end) = if self.start.is_empty() {
            ("<", ">")
        } else {
            (self.start.as_str(), self.end.as_str())
        };
        let mut out = String::with_capacity(text.len() * 4);
        let mut rest = text;
        let mut prev_was_tag = false;
        while let Some(at) = rest.find(start) {
            // Past the limit the rule is refused (`compile_rule`): no need to grow further,
            // and a few kilobytes of tags can ask for gigabytes.
            if out.len() > MAX_RULE_TEXT {
                return out;
            }
            let after = &rest[at + start.len()..];
            let Some(close) = after.find(end) else { break };
            let name = &after[..close];
            let (inter_tag, plain) = name
                .strip_prefix("inter ")
                .map_or((false, name), |n| (true, n));
            let Some(value) = self.tags.get(plain.trim()) else {
                out.push_str(&rest[..at + start.len()]);
                rest = after;
                prev_was_tag = false;
                continue;
            };
            out.push_str(&rest[..at]);
            if inter_tag {
                out.push_str(value);
                rest = &after[close + end.len()..];
                continue;
            }
            if prev_was_tag && at == 0 {
                for t in &self.inter {
                    out.push_str(self.tags.get(t).map_or("", String::as_str));
                }
            }
            for t in &self.pre {
                out.push_str(self.tags.get(t).map_or("", String::as_str));
            }
            out.push_str(value);
            for t in &self.post {
                out.push_str(self.tags.get(t).map_or("", String::as_str));
            }
            rest = &after[close + end.len()..];
            prev_was_tag = true;
        }
        out.push_str(rest);
        out
    }
}

/// The longest rule text compiled, its tags replaced: SpamAssassin's longest line is
/// 10 KB, up to 256 KB with its tags replaced; a 4 MB pattern took a gigabyte to compile.
pub const MAX_RULE_TEXT: usize = 512 << 10;

impl Parsed {
    pub fn get(&self, name: &str) -> Option<&RuleDef> {
        self.index.get(name).map(|&i| &self.rules[i])
    }

    /// Whether `score NAME 0` switched the rule off, SpamAssassin's way to silence one (with
    /// four scores, all of them 0); a `__` helper has no score of its own, and stays on.
    pub fn switched_off(&self, name: &str) -> bool {
        !name.starts_with("__")
            && self
                .score
                .get(name)
                .is_some_and(|s| s.iter().all(|&s| s == 0.0))
    }

    /// The rules the lists read so far feed, as SpamAssassin scores them (see
    /// [`super::lists`] and [`super::auth`]). Called once every file is read.
    pub fn define_lists(&mut self) {
        let list_rules: Vec<_> = (self.lists.list_rules())
            .chain(self.auth.list_rules())
            .map(|(rule, origin)| (rule, origin.clone()))
            .collect();
        for (&(name, call, score, describe), origin) in list_rules {
            self.define(RuleDef {
                name: name.to_string(),
                kind: Kind::Header,
                text: format!("eval:{call}"),
                origin,
            });
            self.describe.insert(name.to_string(), describe.to_string());
            self.score.insert(name.to_string(), [score; 4]);
        }
    }

    fn define(&mut self, def: RuleDef) {
        if let Some(&i) = self.index.get(&def.name) {
            self.rules[i] = def;
        } else {
            self.index.insert(def.name.clone(), self.rules.len());
            self.rules.push(def);
        }
    }

    /// Reads one file's bytes: UTF-8, and where a byte is not, Latin-1, which older rule
    /// files are written in (SpamAssassin's `gu[e\xE9\xE8]i` means `é` and `è`).
    pub fn read_bytes(&mut self, bytes: &[u8], file: &Path) {
        let mut text = String::with_capacity(bytes.len());
        for chunk in bytes.utf8_chunks() {
            text.push_str(chunk.valid());
            text.extend(chunk.invalid().iter().map(|&b| char::from(b)));
        }
        self.read(&text, file);
    }

    /// Reads one file's text.
    pub fn read(&mut self, text: &str, file: &Path) {
        // Each open block: whether its body is active, and why not if not.
        let mut blocks: Vec<Result<(), Reason>> = Vec::new();
        // Lines that begin with no directive: a few are named, then counted.
        let mut strays = 0;
        for (n, line) in text.lines().enumerate() {
            let origin = Origin {
                file: file.to_path_buf(),
                line: n + 1,
            };
            let line = strip_comment(line).trim();
            if line.is_empty() {
                continue;
            }
            let (directive, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let rest = rest.trim();
            let inactive = blocks.iter().find_map(|b| b.as_ref().err()).cloned();
            match directive {
                "ifplugin" => {
                    let plugin = rest.rsplit("::").next().unwrap_or(rest).to_string();
                    blocks.push(if PLUGINS.contains(&plugin.as_str()) {
                        Ok(())
                    } else {
                        Err(Reason::NeedsPlugin(plugin))
                    });
                    continue;
                }
                "if" if rest.len() > MAX_CONDITION => {
                    let why = format!("if: a condition of {} bytes", rest.len());
                    self.problem(origin, None, Reason::Syntax(why.clone()));
                    blocks.push(Err(Reason::Syntax(why)));
                    continue;
                }
                "if" => {
                    blocks.push(eval_if(rest));
                    continue;
                }
                "else" => {
                    match blocks.last_mut() {
                        Some(b) => {
                            *b = if b.is_ok() {
                                Err(Reason::Syntax("in the else branch".into()))
                            } else {
                                Ok(())
                            }
                        }
                        None => {
                            self.problem(origin, None, Reason::Syntax("else without if".into()))
                        }
                    }
                    continue;
                }
                "endif" => {
                    if blocks.pop().is_none() {
                        self.problem(origin, None, Reason::Syntax("endif without if".into()));
                    }
                    continue;
                }
                _ => {}
            }
            if let Some(kind) = Kind::from_directive(directive) {
                let (name, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                let def = RuleDef {
                    name: name.to_string(),
                    kind,
                    text: text.trim().to_string(),
                    origin: origin.clone(),
                };
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    self.problem(
                        origin,
                        None,
                        Reason::Syntax(format!("{directive}: bad rule name {name:?}")),
                    );
                } else if def.text.is_empty() {
                    self.problem(
                        origin,
                        Some(def.name),
                        Reason::Syntax(format!("{directive} {name}: nothing to test")),
                    );
                } else if let Some(why) = inactive {
                    // A definition in an inactive `else` branch is an alternative, not a loss.
                    if !matches!(why, Reason::Syntax(_)) {
                        self.skipped.push((def, why));
                    }
                } else {
                    self.define(def);
                }
                continue;
            }
            if inactive.is_some() {
                continue;
            }
            if self.auth.read(directive, rest, &origin) {
                continue;
            }
            match self.lists.read(directive, rest, &origin) {
                Some(Ok(())) => continue,
                Some(Err(why)) => {
                    self.problem(origin, None, Reason::Syntax(why));
                    continue;
                }
                None => {}
            }
            let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let value = value.trim();
            match directive {
                "describe" => {
                    self.describe.insert(name.to_string(), value.to_string());
                }
                // One score, or four: with and without Bayes and network tests.
                "score" => match value
                    .split_whitespace()
                    .map(str::parse::<f64>)
                    .collect::<Result<Vec<f64>, _>>()
                {
                    // `inf` and `NaN` parse as numbers: decisive, they made verdicts NaN.
                    Ok(scores)
                        if matches!(scores.len(), 1 | 4)
                            && scores.iter().all(|s| s.is_finite()) =>
                    {
                        let four = std::array::from_fn(|i| scores[i % scores.len()]);
                        self.score.insert(name.to_string(), four);
                    }
                    _ => self.problem(
                        origin,
                        Some(name.into()),
                        Reason::Syntax(format!(
                            "score {name}: not one finite number or four: {value:?}"
                        )),
                    ),
                },
                "tflags" => {
                    self.tflags.insert(name.to_string(), value.to_string());
                }
                "replace_tag" => {
                    self.tags.tags.insert(name.to_string(), value.to_string());
                }
                "replace_pre" => self.tags.pre.push(name.to_string()),
                "replace_inter" => self.tags.inter.push(name.to_string()),
                "replace_post" => self.tags.post.push(name.to_string()),
                "replace_start" => self.tags.start = name.to_string(),
                "replace_end" => self.tags.end = name.to_string(),
                "replace_rules" => self
                    .tags
                    .rules
                    .extend(rest.split_whitespace().map(str::to_string)),
                // SpamAssassin's own settings (priority, lang, report, bayes_*, loadplugin,
                // …) are not about rules; a slip of the keyboard on a rule is.
                other => {
                    if !other
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    {
                        strays += 1;
                        if strays <= MAX_STRAYS_NAMED {
                            let line: String = line.chars().take(40).collect();
                            let why = format!("not a directive: {line:?}");
                            self.problem(origin, None, Reason::Syntax(why));
                        }
                    } else if let Some(meant) = misspelt_directive(other) {
                        let why = format!("unknown directive {other:?}: did you mean {meant:?}?");
                        self.problem(origin, None, Reason::Syntax(why));
                    }
                }
            }
        }
        // What only the whole file tells is told at its last line.
        let end = Origin {
            file: file.to_path_buf(),
            line: text.lines().count(),
        };
        if strays > MAX_STRAYS_NAMED {
            let more = strays - MAX_STRAYS_NAMED;
            let why = format!("{more} more lines that are not directives: is this a rule file?");
            self.problem(end.clone(), None, Reason::Syntax(why));
        }
        if !blocks.is_empty() {
            let why = format!(
                "{} if/ifplugin block(s) not closed with endif",
                blocks.len()
            );
            self.problem(end, None, Reason::Syntax(why));
        }
    }

    fn problem(&mut self, origin: Origin, rule: Option<String>, reason: Reason) {
        self.problems.push(Problem {
            origin,
            rule,
            reason,
        });
    }
}

/// An address glob of SpamAssassin's lists as a regex, fit to stand between `/` delimiters.
pub(super) fn glob_regex(glob: &str) -> String {
    let mut out = String::new();
    for c in glob.chars() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '/' => out.push_str("\\/"),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out
}

/// Lines that are no directive named one by one in a file; a binary file has thousands.
const MAX_STRAYS_NAMED: usize = 5;

/// The directive that defines or describes rules that `word` is one slip away from (a
/// letter missing, extra, wrong, or two swapped): `bdoy`, `haeder`, `socre`.
fn misspelt_directive(word: &str) -> Option<&'static str> {
    const RULE_DIRECTIVES: &[&str] = &[
        "header",
        "mimeheader",
        "body",
        "rawbody",
        "uri",
        "full",
        "meta",
        "describe",
        "score",
        "tflags",
    ];
    RULE_DIRECTIVES
        .iter()
        .copied()
        .find(|d| word.len() >= 3 && one_slip_apart(word.as_bytes(), d.as_bytes()))
}

/// Whether `a` and `b` differ by one edit: an insertion, a deletion, a substitution or a
/// swap of neighbours.
fn one_slip_apart(a: &[u8], b: &[u8]) -> bool {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[common..], &b[common..]);
    match (a.len(), b.len()) {
        (0, 0) => false,
        (n, m) if n == m => {
            a[1..] == b[1..] || (n >= 2 && a[0] == b[1] && a[1] == b[0] && a[2..] == b[2..])
        }
        (n, m) if n == m + 1 => a[1..] == *b,
        (n, m) if n + 1 == m => *a == b[1..],
        _ => false,
    }
}

/// A `#` starts a comment unless escaped (`\#`, which SpamAssassin rules use in patterns).
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && (i == 0 || bytes[i - 1] != b'\\') {
            return &line[..i];
        }
    }
    line
}

/// The longest `if` condition read: each `(` and `!` costs its reading a stack frame, and
/// a rule file must not be able to overflow the stack. SpamAssassin's longest has 80 bytes.
const MAX_CONDITION: usize = 1000;

/// `if` conditions: `(version >= 3.004000)`, `can(...)`, `plugin(...)`, `!…`, `&&`, `||`.
fn eval_if(cond: &str) -> Result<(), Reason> {
    let ok = eval_cond(cond);
    if ok {
        Ok(())
    } else {
        // Whether it names a plugin we lack decides if skipped rules count as lost.
        let plugin = cond
            .split("plugin(")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .map(|p| p.rsplit("::").next().unwrap_or(p).to_string());
        match plugin {
            Some(p) if !cond.trim_start_matches('(').trim_start().starts_with('!') => {
                Err(Reason::NeedsPlugin(p))
            }
            _ => Err(Reason::Syntax(format!("condition {cond:?} is false"))),
        }
    }
}

fn eval_cond(cond: &str) -> bool {
    let cond = cond.trim();
    if let Some((a, b)) = split_top(cond, "||") {
        return eval_cond(a) || eval_cond(b);
    }
    if let Some((a, b)) = split_top(cond, "&&") {
        return eval_cond(a) && eval_cond(b);
    }
    if let Some(inner) = cond.strip_prefix('!') {
        return !eval_cond(inner);
    }
    if cond.starts_with('(') && cond.ends_with(')') {
        return eval_cond(&cond[1..cond.len() - 1]);
    }
    if let Some(arg) = cond
        .strip_prefix("plugin(")
        .and_then(|s| s.strip_suffix(')'))
    {
        let name = arg.trim().rsplit("::").next().unwrap_or(arg);
        return PLUGINS.contains(&name);
    }
    if let Some(arg) = cond.strip_prefix("can(").and_then(|s| s.strip_suffix(')')) {
        // The `has_*` probes of plugins ask for evals, which we answer for those we have;
        // the rest ask for features of SpamAssassin 4's configuration.
        let what = arg.trim().rsplit("::").next().unwrap_or(arg);
        return if let Some(eval) = what.strip_prefix("has_") {
            super::eval::known(eval) || super::eval::known(&format!("check_{eval}"))
        } else {
            CONF_FEATURES.contains(&what)
        };
    }
    if let Some(v) = cond.strip_prefix("version")
        && let Some((cmp, num)) = Cmp::strip_prefix(v.trim())
    {
        let Ok(n) = num.trim().parse::<f64>() else {
            return false;
        };
        return cmp.holds(SA_VERSION, n);
    }
    if let Some(v) = cond.strip_prefix("perl_version") {
        return v.contains(">");
    }
    false
}

/// What `can(Mail::SpamAssassin::Conf::…)` finds: the features of SpamAssassin 4.0's
/// configuration that change only syntax spamnb reads anyway. Capture rules
/// (`feature_capture_rules`) and `rules_matching()` in meta rules are not among them; a
/// name SpamAssassin does not have is not either.
const CONF_FEATURES: &[&str] = &[
    "compat_welcomelist_blocklist",
    "feature_bayes_auto_learn_on_error",
    "feature_bayes_stopwords",
    "feature_blocklist_welcomelist",
    "feature_bug6558_free",
    "feature_compile_regexp",
    "feature_dns_block_rule",
    "feature_dns_local_ports_permit_avoid",
    "feature_dns_query_restriction",
    "feature_edns",
    "feature_geodb",
    "feature_get_host",
    "feature_header_address_parser",
    "feature_header_first_last",
    "feature_header_match_many",
    "feature_local_tests_only",
    "feature_originating_ip_headers",
    "feature_registryboundaries",
    "feature_subjprefix",
    "feature_uri_host_listed",
    "feature_welcomelist_blocklist",
    "feature_yesno_takes_args",
    "perl_min_version_5010000",
];

/// Splits at the first `op` outside parentheses.
fn split_top<'a>(s: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0i32;
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            // Bytes, not `s[i..]`: `i` may fall inside a character of a non-ASCII
            // condition; `op` is ASCII, so where it starts is a character boundary.
            _ if depth == 0 && bytes[i..].starts_with(op.as_bytes()) => {
                return Some((&s[..i], &s[i + op.len()..]));
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_definitions_and_directives() {
        let mut p = Parsed::default();
        p.read(
            "# comment\n\
header A Subject =~ /x/ # trailing\n\
describe A has x\n\
score A 1.5 2 3 4\n\
ifplugin Mail::SpamAssassin::Plugin::DNSEval\n\
header B eval:check_rbl('x', 'y')\n\
endif\n\
if (version >= 3.004000)\n\
body C /y/\n\
else\n\
body C /old/\n\
endif\n\
if !plugin(Mail::SpamAssassin::Plugin::HTMLEval)\n\
body D /no/\n\
endif\n\
if can(Mail::SpamAssassin::Conf::feature_does_not_exist)\n\
body F /no/\n\
endif\n\
if can(Mail::SpamAssassin::Conf::feature_bug6558_free)\n\
body G /yes/\n\
endif\n\
body E /a\\#b/\n\
header A Subject =~ /redefined/\n\
body\n\
",
            Path::new("t.cf"),
        );
        let names: Vec<&str> = p.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["A", "C", "G", "E"]);
        assert_eq!(p.get("A").unwrap().text, "Subject =~ /redefined/");
        assert_eq!(p.get("C").unwrap().text, "/y/");
        assert_eq!(p.get("E").unwrap().text, "/a\\#b/");
        assert_eq!(p.describe["A"], "has x");
        assert_eq!(p.score["A"], [1.5, 2.0, 3.0, 4.0]);
        assert_eq!(p.skipped.len(), 1, "{:?}", p.skipped);
        assert_eq!(p.skipped[0].1, Reason::NeedsPlugin("DNSEval".into()));
        assert_eq!(p.problems.len(), 1, "{:?}", p.problems);
        assert_eq!(p.problems[0].origin.line, 24);
    }

    #[test]
    fn replace_tags() {
        let mut p = Parsed::default();
        p.read(
            "replace_tag A (?:a|4)\nreplace_tag B b\nreplace_tag SP [\\s_]\nreplace_inter SP\nbody X /<A><B>c/\nreplace_rules X\n",
            Path::new("t.cf"),
        );
        assert_eq!(p.tags.apply("<A><B>c"), "(?:a|4)[\\s_]bc");
        assert_eq!(p.tags.apply("<Q>x"), "<Q>x");
    }

    /// Found by `fuzz/` (the `rules` target): a condition with a character of more than
    /// one byte before its `&&` panicked at load, so one odd line stopped every rule.
    #[test]
    fn a_condition_that_is_not_ascii_is_false_not_a_panic() {
        for cond in [
            "(version >\u{fffd}\u{fffd}= 3.004000)",
            "plugin(\u{e9}) && can(x)",
            "\u{2603} || version >= 3.000000",
        ] {
            let mut p = Parsed::default();
            p.read(
                &format!("if {cond}\nbody A /a/\nendif\nbody B /b/\n"),
                Path::new("t.cf"),
            );
            assert!(
                p.rules.iter().any(|r| r.name == "B"),
                "{cond:?}: the rule after the block was lost"
            );
        }
    }

    /// Nested deeper than a thread's stack would hold if each level cost a frame.
    #[test]
    fn deeply_nested_conditions_and_metas_load_or_fail_without_overflow() {
        let deep = 100_000;
        let cond = format!("{}version >= 3.0{}", "(".repeat(deep), ")".repeat(deep));
        let nots = format!("{}plugin(X)", "!".repeat(deep));
        // A flat chain builds a tree as deep as it is long: only its length stops it
        // (under the length of text any rule may have).
        let chain = vec!["A"; 10_000].join(" && ");
        let nested = format!("{}A{}", "(".repeat(150), ")".repeat(150));
        // (rule file, the word of the reason it is skipped for)
        for (text, why) in [
            (format!("if {cond}\nbody A /a/\nendif\n"), "bytes"),
            (format!("if {nots}\nbody A /a/\nendif\n"), "bytes"),
            (format!("body A /a/\nmeta M {chain}\n"), "tokens"),
            (format!("body A /a/\nmeta M {nested}\n"), "levels"),
        ] {
            let loading = std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || crate::rules::RuleSet::from_text(&text, Path::new("t.cf")).1)
                .expect("a thread starts");
            let report = loading.join().expect("loading does not overflow the stack");
            let reasons = format!("{:?} {:?}", report.skipped, report.problems);
            assert!(reasons.contains(why), "{why}: {reasons}");
        }
    }
}
