//! Handcrafted rules in SpamAssassin's `.cf` language: parsed, compiled once into a
//! [`RuleSet`], evaluated against a [`Message`]. A hit becomes the feature `rule:NAME`;
//! its weight is learned like a word's, so a rule's `score` is not used (see README).
//!
//! - [`parse`]: the file syntax, `if`/`ifplugin`, `describe`/`score`/`tflags`, ReplaceTags.
//! - [`perl`]: Perl patterns to the Rust dialect (look-around goes to a bounded
//!   backtracker behind a prefilter; back-references are skipped).
//! - [`meta`]: meta expressions.
//! - [`eval`]: built-in tests (`eval:html_image_ratio(...)` and friends); `argument`: how
//!   they read their arguments.
//! - `matcher`: every regex rule that reads one text, compiled to run together.
//! - `target`: the header text a header rule reads.
//! - `mime_tree`: the MIME parts as written, for mimeheader rules and MIME tests.
//!
//! Loading never fails: a rule that cannot be used is skipped with its file, line and
//! reason.

mod alternative;
mod anchored;
mod argument;
pub mod auth;
mod body_eval;
pub mod eval;
mod freemail;
mod header_eval;
mod html_facts;
mod image_info;
mod lists;
mod matcher;
pub mod meta;
mod mime_eval;
mod mime_tree;
pub mod parse;
pub mod perl;
mod relay;
mod relay_eval;
mod set;
mod start_scan;
mod target;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub use parse::{Kind, Origin, Problem, Reason};
pub use target::{Part, Target};

use self::matcher::{CountPattern, Counted, Matcher, MatcherBuilder, count_limit};
use self::target::joined;
use crate::message::Message;
use crate::segment::is_word_byte;

/// Where built-in rules say they come from, in reports and `--explain`.
pub const BUILT_IN_DIR: &str = "(built in)";

/// The files of `rules/`, compiled into the binary (a test checks none is missing).
const BUILT_IN: &[(&str, &str)] = &[
    ("10_headers.cf", include_str!("../../rules/10_headers.cf")),
    (
        "20_body_phrases.cf",
        include_str!("../../rules/20_body_phrases.cf"),
    ),
    ("30_html.cf", include_str!("../../rules/30_html.cf")),
    ("40_uri.cf", include_str!("../../rules/40_uri.cf")),
    ("50_scams.cf", include_str!("../../rules/50_scams.cf")),
    ("60_meta.cf", include_str!("../../rules/60_meta.cf")),
];

/// One loaded rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub kind: Kind,
    pub describe: Option<String>,
    /// The `.cf` score (the first of four): kept for reports, weights being learned, but
    /// for a decisive one ([`crate::model::DECISIVE_SCORE`]).
    pub score: Option<f64>,
    pub origin: Origin,
    /// Whether a hit becomes a feature: not for `__SUB` rules (SpamAssassin's helpers for
    /// meta rules) nor rules scored 0 (SpamAssassin's way of switching a rule off).
    pub reported: bool,
    /// A built-in test (`eval:`), not a pattern.
    pub is_eval: bool,
}

/// What loading found: counts by kind, skips with reasons.
#[derive(Debug, Default, Clone)]
pub struct LoadReport {
    pub files: Vec<PathBuf>,
    pub loaded: BTreeMap<Kind, usize>,
    /// Rules that were not loaded, with where and why.
    pub skipped: Vec<(String, Kind, Origin, Reason)>,
    /// Lines that are not rules and could not be read (bad syntax outside a rule).
    pub problems: Vec<Problem>,
    /// Loaded rules run by the bounded backtracker.
    pub backtracking: usize,
    /// Loaded rules run as plain strings through Aho-Corasick.
    pub literal: usize,
    /// Loaded rules that read Authentication-Results, and the authserv-ids whose fields
    /// they read (none: they cannot hit).
    pub auth_readers: usize,
    pub trusted_authserv: Vec<String>,
}

impl LoadReport {
    /// A rule file or directory that could not be used at all.
    fn file_problem(&mut self, path: &Path, why: String) {
        self.problems.push(Problem {
            origin: Origin {
                file: path.to_path_buf(),
                line: 0,
            },
            rule: None,
            reason: Reason::Syntax(why),
        });
    }

    /// The rule files and directories named that could not be read at all (a path that
    /// is gone, a file without permission): the rules they hold are missing, not broken.
    /// Their problems are the ones [`LoadReport::file_problem`] records, at line 0.
    pub fn lost_files(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.origin.line == 0)
    }

    pub fn total_loaded(&self) -> usize {
        self.loaded.values().sum()
    }

    /// Skips counted by category (for the summary).
    pub fn skipped_by_reason(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for (_, _, _, r) in &self.skipped {
            *out.entry(r.category()).or_insert(0) += 1;
        }
        out
    }

    /// Whether any rule or line failed for a reason of its own (not a plugin spamnb lacks).
    pub fn has_errors(&self) -> bool {
        !self.problems.is_empty()
            || self
                .skipped
                .iter()
                .any(|(_, _, _, r)| !matches!(r, Reason::NeedsPlugin(_)))
    }
}

/// Header rules that read one target.
#[derive(Debug)]
struct HeaderGroup {
    target: Target,
    if_unset: Option<String>,
    mime: bool,
    matcher: Matcher,
    /// No rule of the group hits an empty value, so a missing header needs no scan.
    skip_if_missing: bool,
}

/// Which header rules share a matcher: their target, their `[if-unset: …]` value, and
/// whether they read each MIME part's header (`mimeheader`).
type HeaderKey = (Target, Option<String>, bool);

/// Compiled rules, immutable and shared (`Arc`) between threads.
#[derive(Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    index: HashMap<String, usize>,
    headers: Vec<HeaderGroup>,
    body: Matcher,
    rawbody: Matcher,
    uri: Matcher,
    full: Matcher,
    exists: Vec<(usize, Target)>,
    /// `tflags multiple` rules: counted past their first hit, up to their `maxhits`.
    counted: Vec<Counted>,
    evals: Vec<(usize, eval::Eval)>,
    /// What the evals read of the HTML beyond tags, links and images.
    html_extras: eval::HtmlExtras,
    /// In dependency order.
    metas: meta::Program,
    /// The rules scored as decisive ([`crate::model::DECISIVE_SCORE`]), with their scores:
    /// found once here, so that a message's hits are not looked up by name.
    decisive: Vec<(String, f64)>,
}

impl RuleSet {
    /// Loads `.cf` files and directories of them (their `*.cf`, in name order). Never
    /// fails: unreadable files and unusable rules are in the report.
    pub fn load(paths: &[PathBuf]) -> (RuleSet, LoadReport) {
        let mut report = LoadReport::default();
        let parsed = read_files(paths, &mut report);
        let set = RuleSet::compile(parsed, &mut report);
        (set, report)
    }

    /// spamnb's own rules (the repository's `rules/`), built into the binary: what runs
    /// when no rule directory is installed, so that `cargo install` gives the same filter.
    pub fn built_in() -> (RuleSet, LoadReport) {
        let mut parsed = parse::Parsed::default();
        let mut report = LoadReport::default();
        for (name, text) in BUILT_IN {
            let file = Path::new(BUILT_IN_DIR).join(name);
            parsed.read(text, &file);
            report.files.push(file);
        }
        let set = RuleSet::compile(parsed, &mut report);
        (set, report)
    }

    /// Compiles rules from text (tests, `rules check -`).
    pub fn from_text(text: &str, name: &Path) -> (RuleSet, LoadReport) {
        let mut parsed = parse::Parsed::default();
        parsed.read(text, name);
        let mut report = LoadReport {
            files: vec![name.to_path_buf()],
            ..LoadReport::default()
        };
        let set = RuleSet::compile(parsed, &mut report);
        (set, report)
    }

    fn compile(mut parsed: parse::Parsed, report: &mut LoadReport) -> RuleSet {
        parsed.define_lists();
        report.problems.extend(parsed.problems.iter().cloned());
        report.trusted_authserv = parsed.auth.trusted().to_vec();
        for (def, why) in &parsed.skipped {
            // A rule skipped in one branch may be defined in another.
            if parsed.get(&def.name).is_none() {
                report
                    .skipped
                    .push((def.name.clone(), def.kind, def.origin.clone(), why.clone()));
            }
        }
        let mut set = RuleSet::default();
        // Header rules by what they read, in the order each group's first rule came.
        let mut header_groups: Vec<(HeaderKey, MatcherBuilder)> = Vec::new();
        let mut header_group_of: HashMap<HeaderKey, usize> = HashMap::new();
        let [mut body, mut rawbody, mut uri, mut full]: [MatcherBuilder; 4] = Default::default();
        let mut metas = Vec::new();
        let mut counted = Vec::new();
        let needed = needed_rules(&parsed);
        // Rules nothing reads (helpers no meta uses, rules scored 0) are checked but not
        // run: SpamAssassin ships hundreds of them.
        let compiled = in_parallel(parsed.rules.iter().collect(), |def| {
            compile_rule(def, &parsed, needed.contains(def.name.as_str()))
        });
        for (def, compiled) in parsed.rules.iter().zip(compiled) {
            let compiled = match compiled {
                Ok(compiled) => compiled,
                Err(reason) => {
                    report
                        .skipped
                        .push((def.name.clone(), def.kind, def.origin.clone(), reason));
                    continue;
                }
            };
            let id = set.rules.len();
            let is_eval = matches!(compiled, CompiledRule::Eval(_));
            if matches!(compiled, CompiledRule::Eval(eval::Eval::Auth(_))) {
                report.auth_readers += 1;
            }
            match compiled {
                CompiledRule::Eval(e) => {
                    set.html_extras = set.html_extras | e.html_extras();
                    set.evals.push((id, e))
                }
                CompiledRule::Meta(expr) => metas.push((id, expr)),
                CompiledRule::Exists(target) => set.exists.push((id, target)),
                CompiledRule::Header { key, pattern } => {
                    report.backtracking += usize::from(pattern.backtracks());
                    let group = *header_group_of.entry(key.clone()).or_insert_with(|| {
                        header_groups.push((key, MatcherBuilder::default()));
                        header_groups.len() - 1
                    });
                    header_groups[group].1.push(id, pattern);
                }
                CompiledRule::Text {
                    kind,
                    pattern,
                    count,
                } => {
                    report.backtracking += usize::from(pattern.backtracks());
                    report.literal += usize::from(pattern.is_literal());
                    counted.extend(count.map(|(pattern, max_hits)| Counted {
                        rule: id,
                        kind,
                        pattern,
                        max_hits,
                    }));
                    let builder = match kind {
                        Kind::Body => &mut body,
                        Kind::Rawbody => &mut rawbody,
                        Kind::Uri => &mut uri,
                        _ => &mut full,
                    };
                    builder.push(id, pattern);
                }
                CompiledRule::Unused {
                    backtracks,
                    literal,
                } => {
                    report.backtracking += usize::from(backtracks);
                    report.literal += usize::from(literal);
                }
            }
            let score = parsed.score.get(&def.name).map(|s| s[0]);
            set.index.insert(def.name.clone(), id);
            set.rules.push(Rule {
                name: def.name.clone(),
                kind: def.kind,
                describe: parsed.describe.get(&def.name).cloned(),
                score,
                origin: def.origin.clone(),
                reported: !def.name.starts_with("__") && !parsed.switched_off(&def.name),
                is_eval,
            });
            *report.loaded.entry(def.kind).or_insert(0) += 1;
        }
        // Each matcher builds apart from the others, on every core where the rules compiled
        // on every core; a big one (SpamAssassin's body rules) finds its patterns'
        // triggers in parallel too.
        let (keys, mut builders): (Vec<HeaderKey>, Vec<MatcherBuilder>) =
            header_groups.into_iter().unzip();
        builders.extend([body, rawbody, uri, full]);
        let mut matchers = in_parallel(builders, MatcherBuilder::build);
        let [body, rawbody, uri, full] = <[Matcher; 4]>::try_from(matchers.split_off(keys.len()))
            .expect("four text matchers were built");
        // A pattern too large for the automaton even alone never runs: skipped, with why,
        // not counted as loaded while it could not hit.
        for m in matchers.iter().chain([&body, &rawbody, &uri, &full]) {
            for (id, why) in &m.refused {
                let reason = Reason::Regex(format!("too large to compile: {why}"));
                unload(&mut set.rules[*id], report, reason);
            }
        }
        let n_rules = set.rules.len();
        set.headers = keys
            .into_iter()
            .zip(matchers)
            .map(|(key, matcher)| {
                let mut probe = vec![0u32; n_rules];
                matcher.run([&b""[..]], &mut probe);
                HeaderGroup {
                    skip_if_missing: key.1.is_none() && probe.iter().all(|&h| h == 0),
                    target: key.0,
                    if_unset: key.1,
                    mime: key.2,
                    matcher,
                }
            })
            .collect();
        (set.body, set.rawbody, set.uri, set.full) = (body, rawbody, uri, full);
        let mut read_by_metas = Vec::new();
        for (_, expr) in &metas {
            expr.names(&mut read_by_metas);
        }
        counted.retain(|c: &Counted| read_by_metas.contains(&set.rules[c.rule].name));
        set.counted = counted;
        set.metas = meta::Program::new(&order_metas(metas, &set.index, report, &mut set.rules));
        set.decisive = set
            .rules
            .iter()
            .filter_map(|r| Some((r.name.clone(), r.score?)))
            .filter(|(_, score)| score.abs() >= crate::model::DECISIVE_SCORE)
            .collect();
        set
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The matchers of the rules that read a message's texts, by kind.
    fn text_matchers(&self) -> [(Kind, &Matcher); 4] {
        [
            (Kind::Body, &self.body),
            (Kind::Rawbody, &self.rawbody),
            (Kind::Uri, &self.uri),
            (Kind::Full, &self.full),
        ]
    }

    pub fn rule(&self, name: &str) -> Option<&Rule> {
        self.index.get(name).map(|&i| &self.rules[i])
    }

    /// Of the rules in `hits`, those scored as decisive ([`crate::model::DECISIVE_SCORE`]),
    /// with their scores.
    pub fn decisive(&self, hits: &[impl AsRef<str>]) -> Vec<(String, f64)> {
        self.decisive
            .iter()
            .filter(|(name, _)| hits.iter().any(|h| h.as_ref() == name))
            .cloned()
            .collect()
    }

    /// Hit count of every rule (by index in [`RuleSet::rules`]), helpers included.
    pub fn evaluate_all(&self, msg: &Message) -> Vec<u32> {
        let mut hits = vec![0u32; self.rules.len()];
        // What several rules read of the message, found once when first asked for.
        let mut facts = eval::Facts::new(msg, self.html_extras);
        for g in &self.headers {
            let value = if g.mime {
                let name = match &g.target {
                    Target::Header { name, .. } => name.as_str(),
                    _ => "",
                };
                joined(
                    (facts.mime_parts().iter())
                        .flat_map(|p| &p.headers)
                        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map(|(_, v)| v.as_str()),
                )
            } else {
                g.target.text(msg)
            };
            if value.is_none() && g.skip_if_missing {
                continue;
            }
            let value = value
                .or_else(|| g.if_unset.as_deref().map(std::borrow::Cow::Borrowed))
                .unwrap_or_default();
            g.matcher.run([value.as_bytes()], &mut hits);
        }
        for (id, target) in &self.exists {
            if target.text(msg).is_some() {
                hits[*id] = 1;
            }
        }
        let body = match self.body.is_empty() {
            true => "",
            false => facts.body_text(),
        };
        for (kind, matcher) in self.text_matchers() {
            matcher.run(texts(kind, msg, body), &mut hits);
        }
        for c in &self.counted {
            if hits[c.rule] == 0 {
                continue;
            }
            let mut n = 0;
            for t in texts(c.kind, msg, body) {
                n += c.pattern.count(t, c.max_hits - n);
            }
            // The matcher saw a hit the count may miss (a backtracking limit): one at least.
            hits[c.rule] = n.max(1);
        }
        if !self.evals.is_empty() {
            for (id, e) in &self.evals {
                if e.test(&mut facts) {
                    hits[*id] = 1;
                }
            }
        }
        self.metas.run(&mut hits);
        hits
    }

    /// Names of the reported rules that hit, in rule order.
    pub fn evaluate(&self, msg: &Message) -> Vec<&str> {
        self.evaluate_all(msg)
            .iter()
            .zip(&self.rules)
            .filter(|(h, r)| **h > 0 && r.reported)
            .map(|(_, r)| r.name.as_str())
            .collect()
    }
}

/// What rules of `kind` (body, rawbody, uri or full) read in `msg`; `body` is its
/// [`body_text`], made once by the caller.
fn texts<'m>(kind: Kind, msg: &'m Message, body: &'m str) -> impl Iterator<Item = &'m [u8]> {
    // Every link the message keeps (it bounds them): a cap of the rules' own let two
    // hundred empty anchors hide the one that mattered.
    let (whole, plain, urls): (Option<&[u8]>, &[std::ops::Range<usize>], &[String]) = match kind {
        Kind::Body => (Some(body.as_bytes()), &[], &[]),
        // As SpamAssassin reads it: text parts and the HTML's markup, not HTML rendered.
        Kind::Rawbody => (Some(msg.html.as_bytes()), &msg.plain, &[]),
        Kind::Uri => (None, &[], &msg.urls),
        _ => (Some(msg.raw), &[], &[]),
    };
    let plain = plain.iter().map(|r| &msg.text.as_bytes()[r.clone()]);
    let urls = urls.iter().map(|u| u.as_bytes());
    whole.into_iter().chain(plain).chain(urls)
}

/// The text `body` rules read, as SpamAssassin renders it: the Subject first, then each
/// paragraph on one line (line breaks inside a paragraph become spaces).
pub fn body_text(msg: &Message) -> String {
    let mut out = String::with_capacity(msg.text.len() + 100);
    if let Some(s) = msg.header("subject") {
        out.push_str(s);
        out.push('\n');
    }
    let mut in_para = false;
    let text = msg.text.as_str();
    let mut start = 0;
    while start < text.len() {
        // `str::lines`, with memchr's faster search for the line end (which `trim` drops).
        let end = crate::message::line_end(text.as_bytes(), start);
        let line = trimmed(&text[start..end]);
        start = end;
        if line.is_empty() {
            if in_para {
                out.push('\n');
                in_para = false;
            }
            continue;
        }
        if in_para {
            out.push(' ');
        }
        out.push_str(line);
        in_para = true;
    }
    out
}

/// `line` as `str::trim` leaves it, with a short way for the ASCII white space that ends
/// most lines: `trim` reads each character as Unicode, which was a third of making the
/// body text. ASCII's own test leaves the vertical tab, which Unicode counts as space.
fn trimmed(line: &str) -> &str {
    let ascii = line.trim_ascii();
    let ends_plain = |b: Option<&u8>| b.is_none_or(|&b| b.is_ascii() && b != b'\x0b');
    if ends_plain(ascii.as_bytes().first()) && ends_plain(ascii.as_bytes().last()) {
        ascii
    } else {
        ascii.trim()
    }
}

/// One rule compiled on its own, before it takes its place in the set.
enum CompiledRule {
    Eval(eval::Eval),
    Meta(meta::Expr),
    /// `exists:Header`, a pseudo-header (`ToCc`, `MESSAGEID`…) included, as in SpamAssassin.
    Exists(Target),
    Header {
        key: HeaderKey,
        pattern: matcher::CompiledPattern,
    },
    /// A body, rawbody, uri or full rule, and for a `tflags multiple` rule, what counts its
    /// matches and how many at most.
    Text {
        kind: Kind,
        pattern: matcher::CompiledPattern,
        count: Option<(CountPattern, u32)>,
    },
    /// A header or text rule whose hits nothing reads: checked, then dropped (SpamAssassin
    /// ships hundreds), with how it would run, for the report. Literal counts text rules.
    Unused {
        backtracks: bool,
        literal: bool,
    },
}

/// Compiles the rule `def` of `parsed` alone; `runs` when its hits are read (see
/// [`needed_rules`]), else it is only checked.
fn compile_rule(
    def: &parse::RuleDef,
    parsed: &parse::Parsed,
    runs: bool,
) -> Result<CompiledRule, Reason> {
    let text = if parsed.tags.rules.contains(&def.name) {
        std::borrow::Cow::Owned(parsed.tags.apply(&def.text))
    } else {
        std::borrow::Cow::Borrowed(def.text.as_str())
    };
    if text.len() > parse::MAX_RULE_TEXT {
        return Err(Reason::Syntax(format!(
            "longer than {} KB, its tags replaced",
            parse::MAX_RULE_TEXT >> 10
        )));
    }
    if let Some(call) = text.strip_prefix("eval:") {
        return eval::compile(call, def.kind, &parsed.auth, &parsed.lists)
            .map(CompiledRule::Eval)
            .map_err(|e| {
                if e.contains(' ') {
                    Reason::Syntax(e)
                } else {
                    Reason::UnknownEval(e)
                }
            });
    }
    match def.kind {
        Kind::Meta => meta::parse(&text)
            .map(CompiledRule::Meta)
            .map_err(Reason::Syntax),
        Kind::Header | Kind::Mimeheader => {
            if let Some(name) = text.strip_prefix("exists:") {
                let target = Target::parse(name.trim()).map_err(Reason::Syntax)?;
                return Ok(CompiledRule::Exists(target));
            }
            let (spec, op, rest) = split_header_rule(&text).map_err(Reason::Syntax)?;
            let (rest, if_unset) = split_if_unset(rest);
            let target = Target::parse(spec).map_err(Reason::Syntax)?;
            let t = translate(rest, false)?;
            let pattern = matcher::CompiledPattern::new(t, op == "!~").map_err(Reason::Regex)?;
            Ok(if runs {
                CompiledRule::Header {
                    key: (target, if_unset, def.kind == Kind::Mimeheader),
                    pattern,
                }
            } else {
                CompiledRule::Unused {
                    backtracks: pattern.backtracks(),
                    literal: false,
                }
            })
        }
        kind => {
            // Body text is one paragraph per line: `^` and `$` mean a paragraph's start and
            // end, as in SpamAssassin.
            let t = translate(&text, kind == Kind::Body)?;
            let count = match count_limit(parsed.tflags.get(&def.name)) {
                Some(max_hits) if runs => {
                    Some((CountPattern::new(&t).map_err(Reason::Regex)?, max_hits))
                }
                _ => None,
            };
            let pattern = matcher::CompiledPattern::new(t, false).map_err(Reason::Regex)?;
            Ok(if runs {
                CompiledRule::Text {
                    kind,
                    pattern,
                    count,
                }
            } else {
                CompiledRule::Unused {
                    backtracks: pattern.backtracks(),
                    literal: pattern.is_literal(),
                }
            })
        }
    }
}

/// A rule's `/pattern/flags`, translated; `multiline` adds Perl's `m`.
fn translate(delimited: &str, multiline: bool) -> Result<perl::Translated, Reason> {
    let mut pattern = perl::split_delimited(delimited).map_err(|e| Reason::Regex(e.0))?;
    if multiline && !pattern.flags.contains('m') {
        pattern.flags.push('m');
    }
    perl::translate(&pattern).map_err(|e| Reason::Regex(e.0))
}

/// `f` of each of `items`, in order: across rayon's thread pool when the caller runs on it
/// (`check` and `learn` compile their rules there while the database opens; the daemon and
/// `rules` put their loading there), else one after the other, so that a hook, perhaps
/// under a memory limit, starts no threads. SpamAssassin's rules take a second to compile
/// on one core.
fn in_parallel<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync + Send) -> Vec<R> {
    use rayon::prelude::*;
    if rayon::current_thread_index().is_some() {
        items.into_par_iter().map(f).collect()
    } else {
        items.into_iter().map(f).collect()
    }
}

/// Names of the rules whose hits matter: those reported, and what their meta rules read.
/// A rule scored 0 is switched off, as in SpamAssassin: not run, so that a meta rule
/// reading it sees no hit.
fn needed_rules(parsed: &parse::Parsed) -> std::collections::HashSet<&str> {
    let mut needed: std::collections::HashSet<&str> = parsed
        .rules
        .iter()
        .filter(|d| !d.name.starts_with("__") && !parsed.switched_off(&d.name))
        .map(|d| d.name.as_str())
        .collect();
    let mut todo: Vec<&str> = needed.iter().copied().collect();
    while let Some(name) = todo.pop() {
        let Some(def) = parsed.get(name).filter(|d| d.kind == Kind::Meta) else {
            continue;
        };
        let mut deps = Vec::new();
        if let Ok(e) = meta::parse(&def.text) {
            e.names(&mut deps);
        }
        for dep in deps {
            if let Some(d) = parsed.get(&dep)
                && !parsed.switched_off(&d.name)
                && needed.insert(d.name.as_str())
            {
                todo.push(d.name.as_str());
            }
        }
    }
    needed
}

/// `Subject =~ /x/` to ("Subject", "=~", "/x/").
fn split_header_rule(text: &str) -> Result<(&str, &str, &str), String> {
    for op in ["=~", "!~"] {
        if let Some(at) = text.find(op) {
            return Ok((text[..at].trim(), op, text[at + 2..].trim()));
        }
    }
    Err(format!(
        "header rule needs Header =~ /pattern/, exists:Header or eval:test(): {text:?}"
    ))
}

/// `/x/i [if-unset: foo]` to ("/x/i", Some("foo")).
fn split_if_unset(text: &str) -> (&str, Option<String>) {
    match text.rfind("[if-unset:") {
        Some(at) if text.trim_end().ends_with(']') => {
            let value = text[at + 10..]
                .trim_end()
                .trim_end_matches(']')
                .trim()
                .to_string();
            (text[..at].trim(), Some(value))
        }
        _ => (text, None),
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .to_string()
}

/// The rules of `.cf` files and directories of them (their `*.cf`, in name order), read;
/// what cannot be read is in `report`.
fn read_files(paths: &[PathBuf], report: &mut LoadReport) -> parse::Parsed {
    let mut parsed = parse::Parsed::default();
    for file in expand(paths, report) {
        match std::fs::read(&file) {
            Ok(bytes) => parsed.read_bytes(&bytes, &file),
            Err(e) => report.file_problem(&file, format!("cannot read the rule file: {e}")),
        }
        report.files.push(file);
    }
    parsed
}

/// Files named, and the `*.cf` of directories named, in name order.
fn expand(paths: &[PathBuf], report: &mut LoadReport) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            match std::fs::read_dir(p) {
                Ok(rd) => {
                    let mut files: Vec<PathBuf> = rd
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|f| f.extension().is_some_and(|e| e == "cf") && f.is_file())
                        .collect();
                    files.sort();
                    out.extend(files);
                }
                Err(e) => report.file_problem(p, format!("cannot list the rule directory: {e}")),
            }
        } else {
            out.push(p.clone());
        }
    }
    out
}

/// Resolves names and orders metas so that each comes after the metas it reads; a cycle
/// is skipped (its rules stay, never hitting).
fn order_metas(
    metas: Vec<(usize, meta::Expr)>,
    index: &HashMap<String, usize>,
    report: &mut LoadReport,
    rules: &mut [Rule],
) -> Vec<(usize, meta::Expr)> {
    let lookup = |n: &str| index.get(n).copied();
    let mut pending: BTreeMap<usize, meta::Expr> = metas
        .into_iter()
        .map(|(id, mut e)| {
            e.resolve(&lookup);
            (id, e)
        })
        .collect();
    // Kahn's algorithm: a meta is ready once every meta it reads is out (a chain of
    // thousands orders in linear time). What never gets ready is in or behind a cycle.
    let mut unmet: HashMap<usize, usize> = HashMap::new();
    let mut readers: HashMap<usize, Vec<usize>> = HashMap::new();
    for (&id, e) in &pending {
        let mut names = Vec::new();
        e.names(&mut names);
        let metas_read: Vec<usize> = (names.iter().filter_map(|n| lookup(n)))
            .filter(|d| pending.contains_key(d))
            .collect();
        unmet.insert(id, metas_read.len());
        for d in metas_read {
            readers.entry(d).or_default().push(id);
        }
    }
    let mut ready: std::collections::VecDeque<usize> = (pending.keys().copied())
        .filter(|id| unmet[id] == 0)
        .collect();
    let mut out = Vec::new();
    while let Some(id) = ready.pop_front() {
        let e = pending.remove(&id).expect("ready ids are pending");
        out.push((id, e));
        for &reader in readers.get(&id).into_iter().flatten() {
            let left = unmet.get_mut(&reader).expect("every reader is pending");
            *left -= 1;
            if *left == 0 {
                ready.push_back(reader);
            }
        }
    }
    for id in pending.into_keys() {
        unload(&mut rules[id], report, Reason::MetaCycle);
    }
    out
}

/// Takes back a rule counted as loaded that turned out not to run, and says why.
fn unload(rule: &mut Rule, report: &mut LoadReport, why: Reason) {
    rule.reported = false;
    let skipped = (rule.name.clone(), rule.kind, rule.origin.clone(), why);
    report.skipped.push(skipped);
    if let Some(n) = report.loaded.get_mut(&rule.kind) {
        *n -= 1;
    }
}

#[cfg(test)]
mod tests;

/// Where evaluation time goes, per part and per pattern group: for tuning rule sets
/// (`PROFILE_MESSAGES=list cargo test --release -- --ignored rules_profile --nocapture`, RULES=dir).
#[doc(hidden)]
pub fn profile(set: &RuleSet, msgs: &[Message]) -> Vec<(String, std::time::Duration)> {
    use std::time::Instant;
    let mut out = Vec::new();
    let mut hits = vec![0u32; set.rules.len()];
    let t = Instant::now();
    for m in msgs {
        for g in &set.headers {
            let v = g.target.text(m).unwrap_or_default();
            g.matcher.run([v.as_bytes()], &mut hits);
        }
    }
    out.push(("headers".to_string(), t.elapsed()));
    for g in &set.headers {
        let t = Instant::now();
        for m in msgs {
            let v = g.target.text(m).unwrap_or_default();
            g.matcher.run([v.as_bytes()], &mut hits);
        }
        out.push((
            format!(
                "header {:?}: {} in sets, {} triggered",
                g.target,
                g.matcher.set_patterns(),
                g.matcher.triggered.len()
            ),
            t.elapsed(),
        ));
    }
    let bodies: Vec<String> = msgs.iter().map(body_text).collect();
    for (kind, matcher) in set.text_matchers() {
        let name = kind.name();
        for (i, (s, _)) in matcher.sets.iter().enumerate() {
            let t = Instant::now();
            for (m, body) in msgs.iter().zip(&bodies) {
                for text in texts(kind, m, body) {
                    s.matches(text, |_| {});
                }
            }
            out.push((
                format!("{name} set {i} ({} patterns)", s.len()),
                t.elapsed(),
            ));
        }
        let t = Instant::now();
        let mut hits = vec![0u32; set.rules.len()];
        for (m, body) in msgs.iter().zip(&bodies) {
            matcher.run(texts(kind, m, body), &mut hits);
        }
        out.push((
            format!(
                "{name} all: {} in sets, {} triggered, {} literal",
                matcher.set_patterns(),
                matcher.triggered.len(),
                matcher.literals.iter().map(|s| s.1.len()).sum::<usize>()
            ),
            t.elapsed(),
        ));
    }
    for (id, e) in &set.evals {
        let t = Instant::now();
        for m in msgs {
            let mut facts = eval::Facts::new(m, set.html_extras);
            e.test(&mut facts);
        }
        out.push((format!("eval {}", set.rules[*id].name), t.elapsed()));
    }
    let t = Instant::now();
    for m in msgs {
        let _ = body_text(m);
    }
    out.push(("body_text".to_string(), t.elapsed()));
    out
}
