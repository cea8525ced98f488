//! Built-in tests for what a regex cannot see, called as SpamAssassin calls them
//! (`body NAME eval:html_image_ratio('0.000','0.002')`). Each is compiled once from its
//! arguments; a name or an argument spamnb does not know is a load-time skip, never a
//! silent "no hit".

use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::Target;
use super::argument::Arguments;
use super::body_eval;
use super::html_facts::{Anchor, HtmlFacts, html_facts};
use super::matcher::CountPattern;
use super::mime_eval::Test as MimeTest;
use super::mime_tree::ParseFlag;
use super::mime_tree::{MimePart, MimeTree, mime_tree};
use super::perl::{self, PerlPattern};
use super::target::envelope_sender;
use crate::domain::{base_domain, registered_domain};
use crate::message::{Encoded, Message, unfolded, url_host};

/// Names of every eval spamnb has.
const KNOWN: &[&str] = &[
    "check_for_mime_html_only",
    "html_image_ratio",
    "html_image_only",
    "html_tag_balance",
    "html_tag_exists",
    "html_tag_reopened",
    "subject_is_all_caps",
    "check_from_local_digits",
    "check_for_shifted_date",
    "check_for_missing_header",
    "check_for_missing_to_header",
    "check_https_http_mismatch",
    "check_link_domain_mismatch",
    "check_for_mime",
    "check_header_count_range",
    "check_for_uppercase",
    "check_body_length",
    "check_illegal_chars",
    "check_for_mime_html",
    "check_for_matching_env_and_hdr_from",
    "check_equal_from_domains",
    "check_for_to_in_subject",
    "check_blank_line_ratio",
    "html_range",
    "html_eval",
    "html_test",
    "html_text_match",
    "html_title_subject_ratio",
    "check_iframe_src",
    "tvd_vertical_words",
    "check_stock_info",
    "check_base64_length",
    "check_mime_multipart_ratio",
    "check_msg_parse_flags",
    "check_ma_non_text",
    "multipart_alternative_difference",
    "multipart_alternative_difference_count",
];

pub fn known(name: &str) -> bool {
    KNOWN.contains(&name)
        || super::auth::known(name)
        || super::lists::known(name)
        || super::image_info::known(name)
        || super::header_eval::known(name)
        || super::relay_eval::known(name)
}

/// A compiled eval test.
#[derive(Debug, Clone)]
pub enum Eval {
    HtmlOnly,
    /// Text characters per pixel of image area in [min, max).
    HtmlImageRatio(f64, f64),
    /// HTML with images and text characters in [min, max).
    HtmlImageOnly(f64, f64),
    /// Opening minus closing tags of a name, compared.
    HtmlTagBalance(String, Cmp, f64),
    HtmlTagExists(String),
    /// A tag opened again after one of its name closed (a second `<head>` after `</head>`).
    HtmlTagReopened(String),
    SubjectAllCaps,
    FromLocalDigits(usize),
    /// Date header minus the time the mail was received, in hours, in [min, max).
    ShiftedDate(f64, f64),
    MissingHeader(String),
    MissingTo,
    HttpsHttpMismatch,
    LinkDomainMismatch,
    Base64Text,
    Base64Count,
    QpCount,
    HeaderCount(String, f64, f64),
    /// Percentage of capital letters in the body text in [min, max].
    Uppercase(f64, f64),
    BodyLength(f64),
    /// Characters above 0x7f in a raw header: (header or ALL, ratio, count).
    IllegalChars(String, f64, usize),
    /// A text/html part.
    MimeHtml,
    /// The envelope sender is the From: address.
    EnvelopeIsFrom,
    /// The envelope sender's domain and the From: address's differ (their last two labels).
    FromDomainsDiffer,
    /// The Subject names the To: address (`false`), or greets its local part (`true`).
    ToInSubject {
        local_part: bool,
    },
    /// Percentage of blank lines in the body text in (min, max], or [0, max] for a min of
    /// 0, when it has at least this many lines.
    BlankLines(f64, f64, usize),
    /// One of SpamAssassin's HTML statistics in (min, max].
    HtmlRange(HtmlStat, f64, f64),
    /// One of SpamAssassin's HTML statistics, compared.
    HtmlEval(HtmlStat, Cmp, f64),
    HtmlTest(HtmlFlag),
    /// A pattern matches a comment, a title or a link's text.
    HtmlTextMatch(HtmlText, Arc<CountPattern>),
    /// A title longer than the Subject by more than this ratio.
    TitleSubjectRatio(f64),
    /// An `<iframe>` that loads something.
    IframeSrc,
    /// The largest share of spaces among the body text's lines, in percent, in [min, max).
    VerticalWords(f64, f64),
    /// At least this many kinds of stock-tip label in the first text part (any message for
    /// 0).
    StockInfo(f64),
    /// Image attachments: how many, how large, named how.
    Image(super::image_info::Test),
    /// The MIME parts as written.
    Mime(super::mime_eval::Test),
    /// What trusted Authentication-Results fields say.
    Auth(super::auth::Test),
    /// Whether an address or a link's host is on a list, or at a free mail provider.
    List(super::lists::Test),
    /// A bulk mailer's marks in the header, recipients, forged free mail traces.
    Header(super::header_eval::Test),
    /// What the trace says of the relays.
    Relay(super::relay_eval::Test),
}

/// A numeric comparison, as eval arguments, meta expressions and `if version` spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    /// Two-character operators first, so that `<=` is not read as `<`.
    pub const SPELLINGS: [(&'static str, Cmp); 6] = [
        ("==", Cmp::Eq),
        ("!=", Cmp::Ne),
        ("<=", Cmp::Le),
        (">=", Cmp::Ge),
        ("<", Cmp::Lt),
        (">", Cmp::Gt),
    ];

    /// The comparison `s` starts with, and what follows it.
    pub fn strip_prefix(s: &str) -> Option<(Cmp, &str)> {
        Cmp::SPELLINGS
            .into_iter()
            .find_map(|(op, c)| s.strip_prefix(op).map(|rest| (c, rest)))
    }

    pub fn holds(self, x: f64, y: f64) -> bool {
        match self {
            Cmp::Eq => x == y,
            Cmp::Ne => x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
        }
    }
}

/// SpamAssassin's HTML statistics (`html_range('obfuscation_ratio', …)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HtmlStat {
    /// End tags with none of their name open, per tag.
    ClosedExtraRatio,
    /// Tags that are not HTML elements, per tag.
    BadTagRatio,
    /// Tag names that are not HTML elements, per name.
    NonElementRatio,
    /// Words split by a tag, per tag.
    ObfuscationRatio,
    /// The largest font, as the `<font size>` (1 to 7) it is at least.
    MaxSize,
    /// Bytes of HTML.
    Length,
}

/// SpamAssassin's HTML facts that are yes or no (`html_test('embeds')`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HtmlFlag {
    Html,
    Embeds,
    FormActionMailto,
    FontFaceBad,
    /// Text in (nearly) its background's colour.
    FontLowContrast,
    /// Text in, or on, a colour that is none.
    FontInvalidColor,
}

/// What the pass over a message's HTML reads beyond tags, links and images, each only when
/// a loaded test asks for it: the rules' cost is measured, and most rule sets need neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HtmlExtras {
    /// SpamAssassin's HTML statistics.
    pub stats: bool,
    /// The colours text is drawn in.
    pub colors: bool,
}

impl std::ops::BitOr for HtmlExtras {
    type Output = HtmlExtras;

    fn bitor(self, other: HtmlExtras) -> HtmlExtras {
        HtmlExtras {
            stats: self.stats || other.stats,
            colors: self.colors || other.colors,
        }
    }
}

/// The HTML texts `html_text_match` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HtmlText {
    /// Each comment, `<!--` and `-->` included.
    Comment,
    Title,
    /// Each link's text, and `<img>` and a line end for each image in it.
    Anchor,
}

impl HtmlStat {
    /// `stat` as `eval`'s first argument; one spamnb does not count is an unknown eval.
    fn parse(eval: &str, stat: &str) -> Result<HtmlStat, String> {
        Ok(match stat {
            "closed_extra_ratio" => HtmlStat::ClosedExtraRatio,
            "bad_tag_ratio" => HtmlStat::BadTagRatio,
            "non_element_ratio" => HtmlStat::NonElementRatio,
            "obfuscation_ratio" => HtmlStat::ObfuscationRatio,
            "max_size" => HtmlStat::MaxSize,
            "length" => HtmlStat::Length,
            other => return Err(format!("{eval}('{other}')")),
        })
    }

    /// Its value, where the HTML has one (a ratio needs what it divides by).
    fn of(self, html: &str, facts: &HtmlFacts) -> Option<f64> {
        let s = &facts.stats;
        let ratio = |n: usize, of: usize| (of > 0).then(|| n as f64 / of as f64);
        match self {
            _ if html.is_empty() => None,
            HtmlStat::ClosedExtraRatio => ratio(s.closed_extra, s.tags),
            HtmlStat::BadTagRatio if s.elements > 0 => ratio(s.tags - s.elements, s.tags),
            HtmlStat::NonElementRatio if s.elements_seen > 0 => {
                ratio(s.tags_seen - s.elements_seen, s.tags_seen)
            }
            HtmlStat::ObfuscationRatio if s.obfuscation > 0 => ratio(s.obfuscation, s.tags),
            HtmlStat::MaxSize => Some(super::html_facts::font_size_number(s.max_size)),
            HtmlStat::Length => Some(html.len() as f64),
            _ => None,
        }
    }
}

/// `name('a', 'b')` to a compiled test; `auth` and `lists` hold what the tests of
/// Authentication-Results and of lists read besides their arguments.
pub fn compile(
    call: &str,
    kind: super::Kind,
    auth: &super::auth::Config,
    lists: &super::lists::Lists,
) -> Result<Eval, String> {
    let call = call.trim();
    let (name, args) = match call.split_once('(') {
        Some((n, rest)) => {
            let inner = rest
                .trim_end()
                .strip_suffix(')')
                .ok_or_else(|| format!("eval:{call}: missing ')'"))?;
            let name = n.trim();
            (name, Arguments::parse(name, inner))
        }
        None => (call, Arguments::parse(call, "")),
    };
    let unknown = || name.to_string();
    let (min, max) = (|i: usize| args.min(i), |i: usize| args.max(i));
    let text = |i: usize| args.text(i).map(str::to_string);
    if let Some(test) = auth.compile(name, args.values()) {
        return test.map(Eval::Auth);
    }
    if let Some(test) = lists.compile(name, args.values()) {
        return test.map(Eval::List);
    }
    if let Some(test) = super::image_info::compile(name, &args, kind == super::Kind::Rawbody) {
        return test.map(Eval::Image);
    }
    if let Some(test) = super::header_eval::compile(name, &args) {
        return test.map(Eval::Header);
    }
    if let Some(test) = super::relay_eval::compile(name, lists.trusted()) {
        return Ok(Eval::Relay(test));
    }
    Ok(match name {
        "check_for_mime_html_only" => Eval::HtmlOnly,
        "html_image_ratio" => Eval::HtmlImageRatio(min(0)?, max(1)?),
        "html_image_only" => Eval::HtmlImageOnly(min(0)?, max(1)?),
        "html_tag_balance" => {
            let expr = text(1)?;
            let (cmp, n) = comparison(&expr)
                .ok_or_else(|| format!("eval:{name}: comparison {expr:?} not understood"))?;
            Eval::HtmlTagBalance(text(0)?.to_ascii_lowercase(), cmp, n)
        }
        "html_tag_exists" => Eval::HtmlTagExists(text(0)?.to_ascii_lowercase()),
        "html_tag_reopened" => Eval::HtmlTagReopened(text(0)?.to_ascii_lowercase()),
        "subject_is_all_caps" => Eval::SubjectAllCaps,
        "check_from_local_digits" => Eval::FromLocalDigits(min(0)? as usize),
        "check_for_shifted_date" => Eval::ShiftedDate(min(0)?, max(1)?),
        "check_for_missing_header" => Eval::MissingHeader(text(0)?),
        "check_for_missing_to_header" => Eval::MissingTo,
        "check_https_http_mismatch" => Eval::HttpsHttpMismatch,
        "check_link_domain_mismatch" => Eval::LinkDomainMismatch,
        "check_for_mime" => match text(0)?.as_str() {
            "mime_base64_encoded_text" => Eval::Base64Text,
            "mime_base64_count" => Eval::Base64Count,
            "mime_qp_count" => Eval::QpCount,
            "mime_attachment" => Eval::Mime(MimeTest::Attachment),
            "mime_bad_iso_charset" => Eval::Mime(MimeTest::BadIsoCharset),
            "mime_qp_long_line" => Eval::Mime(MimeTest::QpLongLine),
            // SpamAssassin 4.0.1 never hits here, a bug: its parser sets the flag on the
            // message, and this test reads its per-message results. spamnb does what the
            // rule says: a multipart of 1000 parts or more.
            "mimepart_limit_exceeded" => Eval::Mime(MimeTest::ParseFlag(ParseFlag::PartLimit)),
            other => return Err(format!("{name}('{other}')")),
        },
        "check_base64_length" => Eval::Mime(MimeTest::Base64Length(min(0)?, args.open_max(1)?)),
        "check_mime_multipart_ratio" => Eval::Mime(MimeTest::MultipartRatio(min(0)?, max(1)?)),
        "check_msg_parse_flags" => {
            let flag = text(0)?;
            let flag = ParseFlag::parse(&flag).ok_or_else(|| format!("{name}('{flag}')"))?;
            Eval::Mime(MimeTest::ParseFlag(flag))
        }
        "check_ma_non_text" => Eval::Mime(MimeTest::AlternativeNotText),
        "multipart_alternative_difference" => {
            Eval::Mime(MimeTest::AlternativeDifference(min(0)?, max(1)?))
        }
        "multipart_alternative_difference_count" => Eval::Mime(MimeTest::AlternativeWordRatio {
            ratio: min(0)?,
            min_html: min(1)?,
        }),
        "check_header_count_range" => Eval::HeaderCount(text(0)?, min(1)?, max(2)?),
        "check_for_uppercase" => Eval::Uppercase(min(0)?, max(1)?),
        "check_body_length" => Eval::BodyLength(max(0)?),
        "check_illegal_chars" => Eval::IllegalChars(text(0)?, min(1)?, min(2)? as usize),
        "check_for_mime_html" => Eval::MimeHtml,
        "check_for_matching_env_and_hdr_from" => Eval::EnvelopeIsFrom,
        "check_equal_from_domains" => Eval::FromDomainsDiffer,
        "check_for_to_in_subject" => match text(0)?.as_str() {
            "address" => Eval::ToInSubject { local_part: false },
            "user" => Eval::ToInSubject { local_part: true },
            other => return Err(format!("eval:{name}: {other:?} is not address or user")),
        },
        "check_blank_line_ratio" => {
            let min_lines = args.min_or(2, 1.0)?;
            Eval::BlankLines(min(0)?, max(1)?, (min_lines as usize).max(1))
        }
        "html_range" => Eval::HtmlRange(
            HtmlStat::parse(name, &text(0)?)?,
            min(1)?,
            args.open_max(2)?,
        ),
        "html_eval" => {
            let expr = text(1)?;
            let (cmp, n) = comparison(&expr).ok_or_else(|| format!("eval:{name}: {expr:?}"))?;
            Eval::HtmlEval(HtmlStat::parse(name, &text(0)?)?, cmp, n)
        }
        "html_test" => Eval::HtmlTest(match text(0)?.as_str() {
            "html" => HtmlFlag::Html,
            "embeds" => HtmlFlag::Embeds,
            "form_action_mailto" => HtmlFlag::FormActionMailto,
            "font_face_bad" => HtmlFlag::FontFaceBad,
            "font_low_contrast" => HtmlFlag::FontLowContrast,
            "font_invalid_color" => HtmlFlag::FontInvalidColor,
            other => return Err(format!("{name}('{other}')")),
        }),
        "html_text_match" => {
            let area = match text(0)?.as_str() {
                "comment" => HtmlText::Comment,
                "title" => HtmlText::Title,
                "anchor" => HtmlText::Anchor,
                other => return Err(format!("{name}('{other}')")),
            };
            let pattern = PerlPattern {
                source: text(1)?,
                flags: String::new(),
            };
            let translated = perl::translate(&pattern).map_err(|e| format!("{name}: {}", e.0))?;
            Eval::HtmlTextMatch(area, Arc::new(CountPattern::new(&translated)?))
        }
        "html_title_subject_ratio" => Eval::TitleSubjectRatio(min(0)?),
        "check_iframe_src" => Eval::IframeSrc,
        // SpamAssassin takes a maximum from 100 up as "no maximum".
        "tvd_vertical_words" => Eval::VerticalWords(min(0)?, max(1)?.min(101.0)),
        "check_stock_info" => Eval::StockInfo(min(0)?),
        _ => return Err(unknown()),
    })
}

/// `< 512`, `!= 0`: a comparison and its number.
fn comparison(expr: &str) -> Option<(Cmp, f64)> {
    let (cmp, rest) = Cmp::strip_prefix(expr.trim())?;
    Some((cmp, rest.trim().parse().ok()?))
}

/// What evals share about one message, computed once.
pub struct Facts<'m> {
    pub msg: &'m Message<'m>,
    html_extras: HtmlExtras,
    html: Option<HtmlFacts>,
    mime_tree: Option<MimeTree>,
    alternative: Option<super::alternative::Difference>,
    body: Option<String>,
    /// The Date header's time and the newest Received line's, where they parse.
    dates: Option<(Option<i64>, Option<i64>)>,
    auth: Option<super::auth::Results>,
    pub(super) lists: super::lists::Seen,
}

static DOMAIN_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(?:https?://)?((?:[a-z0-9-]+\.)+[a-z]{2,})(?:[/:?#]\S*)?\s*$")
        .expect("domain pattern is valid")
});

/// File name extensions that no top-level domain has, so that link text ending in one
/// names a file (`zip` and `mov` are domains, and phishers' favourites: not here).
const NOT_TOP_LEVEL_DOMAINS: &[&str] = &[
    "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "rtf", "txt", "csv",
    "jpg", "jpeg", "png", "gif", "htm", "html", "eml", "ics", "vcf", "mp3", "mp4",
];

impl<'m> Facts<'m> {
    /// `html_extras`: what of the HTML the tests read beyond tags, links and images.
    pub fn new(msg: &'m Message<'m>, html_extras: HtmlExtras) -> Facts<'m> {
        Facts {
            msg,
            html_extras,
            html: None,
            mime_tree: None,
            alternative: None,
            body: None,
            dates: None,
            auth: None,
            lists: Default::default(),
        }
    }

    /// The Date header's time and the newest Received line's (Unix seconds), where they
    /// parse: the date tests and the Outlook Message-ID test read them.
    pub(super) fn dates(&mut self) -> (Option<i64>, Option<i64>) {
        let msg = self.msg;
        *self.dates.get_or_insert_with(|| {
            let sent = msg.header("date").and_then(parse_date);
            let received = msg
                .header_values("received")
                .next()
                .and_then(|r| r.rsplit(';').next())
                .and_then(parse_date);
            (sent, received)
        })
    }

    /// Hours from the Date header to the newest Received line's date, when both parse.
    fn date_shift(&mut self) -> Option<f64> {
        match self.dates() {
            (Some(sent), Some(received)) => Some((sent - received) as f64 / 3600.0),
            _ => None,
        }
    }

    fn html(&mut self) -> &HtmlFacts {
        let html = self.msg.html.as_str();
        let extras = self.html_extras;
        self.html.get_or_insert_with(|| html_facts(html, extras))
    }

    /// The text body rules read ([`super::body_text`]), for them and the tests.
    pub(super) fn body_text(&mut self) -> &str {
        let msg = self.msg;
        self.body.get_or_insert_with(|| super::body_text(msg))
    }

    /// The MIME parts as written, for mimeheader rules and the MIME tests.
    pub(super) fn mime_parts(&mut self) -> &[MimePart] {
        &self.mime_tree().parts
    }

    /// The MIME parts as written, with the part holding each, and what was malformed.
    pub(super) fn mime_tree(&mut self) -> &MimeTree {
        let msg = self.msg;
        self.mime_tree.get_or_insert_with(|| mime_tree(msg))
    }

    /// How the text of the message's multipart/alternatives differs from their HTML: two
    /// tests read it.
    pub(super) fn alternative_difference(&mut self) -> super::alternative::Difference {
        if let Some(difference) = self.alternative {
            return difference;
        }
        let msg = self.msg;
        let difference = super::alternative::difference(msg, self.mime_tree());
        *self.alternative.insert(difference)
    }

    fn anchors(&mut self) -> &[Anchor] {
        &self.html().anchors
    }
}

impl Eval {
    /// What it reads of the HTML beyond tags, links and images.
    pub fn html_extras(&self) -> HtmlExtras {
        match self {
            Eval::HtmlTest(HtmlFlag::FontLowContrast | HtmlFlag::FontInvalidColor) => HtmlExtras {
                colors: true,
                ..HtmlExtras::default()
            },
            Eval::HtmlTest(HtmlFlag::Html) => HtmlExtras::default(),
            Eval::HtmlRange(..)
            | Eval::HtmlEval(..)
            | Eval::HtmlTest(..)
            | Eval::HtmlTextMatch(..)
            | Eval::TitleSubjectRatio(..) => HtmlExtras {
                stats: true,
                ..HtmlExtras::default()
            },
            _ => HtmlExtras::default(),
        }
    }

    pub fn test(&self, facts: &mut Facts) -> bool {
        let msg = facts.msg;
        match self {
            Eval::HtmlOnly => msg.anomalies.contains(&crate::message::Anomaly::HtmlOnly),
            Eval::HtmlImageRatio(min, max) => {
                let h = facts.html();
                h.image_area > 0.0 && {
                    let ratio = h.text_chars as f64 / h.image_area;
                    ratio >= *min && ratio < *max
                }
            }
            Eval::HtmlImageOnly(min, max) => {
                let h = facts.html();
                h.images > 0 && (h.text_chars as f64) >= *min && (h.text_chars as f64) < *max
            }
            Eval::HtmlTagBalance(tag, cmp, n) => {
                if msg.html.is_empty() {
                    return false;
                }
                let t = facts.html().tags.get(tag.as_bytes());
                cmp.holds(t.opened as f64 - t.closed as f64, *n)
            }
            Eval::HtmlTagExists(tag) => {
                !msg.html.is_empty() && facts.html().tags.get(tag.as_bytes()).opened > 0
            }
            Eval::HtmlTagReopened(tag) => {
                !msg.html.is_empty() && facts.html().tags.get(tag.as_bytes()).reopened
            }
            Eval::SubjectAllCaps => {
                let Some(subject) = msg.header("subject") else {
                    return false;
                };
                let mut letters = subject.chars().filter(|c| c.is_alphabetic());
                letters.clone().count() >= 10
                    && subject.split_whitespace().nth(1).is_some()
                    && letters.all(|c| c.is_uppercase() || !c.is_lowercase())
            }
            Eval::FromLocalDigits(n) => from_address(msg)
                .is_some_and(|a| a.chars().take_while(char::is_ascii_digit).count() >= *n),
            Eval::ShiftedDate(min, max) => facts
                .date_shift()
                .is_some_and(|hours| hours >= *min && hours < *max),
            Eval::MissingHeader(name) => msg.header(name).is_none(),
            Eval::MissingTo => {
                msg.header("to").is_none()
                    && msg.header("cc").is_none()
                    && msg.header("bcc").is_none()
            }
            Eval::HttpsHttpMismatch => facts.anchors().iter().any(|a| {
                a.href.to_ascii_lowercase().starts_with("http:")
                    && a.text
                        .trim_start()
                        .to_ascii_lowercase()
                        .starts_with("https:")
            }),
            Eval::LinkDomainMismatch => facts.anchors().iter().any(|a| {
                // The target only for a link that shows a domain: most show words.
                let Some(shown) = DOMAIN_IN_TEXT.captures(&a.text) else {
                    return false;
                };
                // A shared file's link shows its name, `report.pdf`: no domain.
                let ending = shown[1].rsplit('.').next().unwrap_or_default();
                if NOT_TOP_LEVEL_DOMAINS
                    .iter()
                    .any(|e| e.eq_ignore_ascii_case(ending))
                {
                    return false;
                }
                url_host(&a.href).is_some_and(|target| {
                    target.contains('.')
                        && base_domain(&shown[1].to_ascii_lowercase()) != base_domain(&target)
                })
            }),
            Eval::Base64Text => msg.encoded.contains(&Encoded::Base64 { text: true }),
            Eval::Base64Count => msg
                .encoded
                .iter()
                .any(|e| matches!(e, Encoded::Base64 { .. })),
            Eval::QpCount => msg.encoded.contains(&Encoded::QuotedPrintable),
            Eval::HeaderCount(name, min, max) => {
                let n = msg.header_values(name).count() as f64;
                n >= *min && n <= *max
            }
            Eval::Uppercase(min, max) => {
                // ASCII letters only: capitals are an ASCII habit, and a loop without
                // branches runs on vector registers.
                let (mut letters, mut upper) = (0usize, 0usize);
                // Byte-wide sums over runs short enough not to overflow them: 32 at once.
                for run in msg.text.as_bytes().chunks(255) {
                    let (mut l, mut u) = (0u8, 0u8);
                    for &b in run {
                        l += u8::from((b | 0x20).wrapping_sub(b'a') < 26);
                        u += u8::from(b.wrapping_sub(b'A') < 26);
                    }
                    letters += usize::from(l);
                    upper += usize::from(u);
                }
                letters >= 200 && {
                    let pct = 100.0 * upper as f64 / letters as f64;
                    pct >= *min && pct <= *max
                }
            }
            Eval::BodyLength(max) => (msg.text.trim().len() as f64) <= *max,
            Eval::IllegalChars(name, ratio, count) => {
                let head = msg.raw_head();
                let values: Vec<&[u8]> = match name.as_str() {
                    _ if head.is_ascii() => Vec::new(),
                    "ALL" => vec![head],
                    _ => msg.raw_header_values(name),
                };
                values.iter().any(|v| {
                    let high = v.iter().filter(|&&b| b >= 0x80).count();
                    !v.is_empty() && high >= *count && high as f64 / v.len() as f64 >= *ratio
                })
            }
            Eval::MimeHtml => !msg.html.is_empty(),
            Eval::EnvelopeIsFrom => match (envelope_sender(msg), from_address(msg)) {
                (Some(sender), Some(from)) => sender.eq_ignore_ascii_case(&from),
                _ => false,
            },
            Eval::FromDomainsDiffer => {
                // The last two labels, as SpamAssassin compares them.
                let last_two = |address: String| {
                    let domain = address.rsplit_once('@')?.1.to_ascii_lowercase();
                    let last_two = registered_domain(&domain).unwrap_or(&domain);
                    (!domain.is_empty()).then(|| last_two.to_string())
                };
                match (
                    envelope_sender(msg).and_then(last_two),
                    from_address(msg).and_then(last_two),
                ) {
                    (Some(sender), Some(from)) => sender != from,
                    _ => false,
                }
            }
            Eval::ToInSubject { local_part } => {
                let (Some(to), Some(subject)) = (
                    msg.header("to").and_then(Target::address),
                    msg.header("subject"),
                ) else {
                    return false;
                };
                if *local_part {
                    let local = to.split('@').next().unwrap_or_default();
                    greets(subject.trim(), local)
                } else {
                    contains_word(subject, &to)
                }
            }
            Eval::BlankLines(min, max, min_lines) => {
                let lines = msg.text.lines().count();
                let blank = msg.text.lines().filter(|l| l.trim().is_empty()).count();
                lines >= *min_lines && {
                    let pct = 100.0 * blank as f64 / lines as f64;
                    (*min == 0.0 || pct > *min) && pct <= *max
                }
            }
            Eval::HtmlRange(stat, min, max) => {
                let html = msg.html.as_str();
                stat.of(html, facts.html())
                    .is_some_and(|v| v > *min && v <= *max)
            }
            Eval::HtmlEval(stat, cmp, n) => {
                let html = msg.html.as_str();
                stat.of(html, facts.html())
                    .is_some_and(|v| cmp.holds(v, *n))
            }
            Eval::HtmlTest(flag) => {
                !msg.html.is_empty()
                    && match flag {
                        // That there is HTML needs no pass over it.
                        HtmlFlag::Html => true,
                        HtmlFlag::Embeds => facts.html().stats.embeds,
                        HtmlFlag::FormActionMailto => facts.html().stats.form_action_mailto,
                        HtmlFlag::FontFaceBad => facts.html().stats.font_face_bad,
                        HtmlFlag::FontLowContrast => facts.html().colors.low_contrast,
                        HtmlFlag::FontInvalidColor => facts.html().colors.invalid_color,
                    }
            }
            Eval::HtmlTextMatch(area, pattern) => {
                let h = facts.html();
                let matches = |text: &str| pattern.count(text.as_bytes(), 1) > 0;
                match area {
                    HtmlText::Comment => h.stats.comments.iter().any(|c| matches(c)),
                    HtmlText::Title => h.stats.titles.iter().any(|t| matches(t)),
                    HtmlText::Anchor => h
                        .anchors
                        .iter()
                        .any(|a| matches(&format!("{}{}", a.text, "<img>\n".repeat(a.images)))),
                }
            }
            Eval::TitleSubjectRatio(ratio) => {
                let subject = msg.header("subject").unwrap_or_default().len();
                subject > 0
                    && !msg.html.is_empty()
                    && (facts.html().stats.titles.iter())
                        .any(|t| t.len() as f64 / subject as f64 > *ratio)
            }
            Eval::IframeSrc => facts.html().iframe_src,
            Eval::VerticalWords(min, max) => {
                let percent = body_eval::space_percent(facts.body_text()) as f64;
                percent >= *min && percent < *max
            }
            Eval::StockInfo(min) => {
                // The first text part as sent; an HTML part is no stock tip's form.
                let first = msg.plain.first().and_then(|r| msg.text.get(r.clone()));
                *min == 0.0 || body_eval::stock_labels(first.unwrap_or_default()) as f64 >= *min
            }
            Eval::Image(test) => test.holds(facts),
            Eval::Mime(test) => test.holds(facts),
            Eval::Auth(test) => test.holds(msg, &mut facts.auth, &mut facts.lists),
            Eval::List(test) => test.holds(msg, &mut facts.lists),
            Eval::Header(test) => test.holds(facts),
            Eval::Relay(test) => test.holds(msg, &mut facts.lists),
        }
    }
}

/// The From address, read from the field as sent: an encoded word is display name,
/// whatever address it decodes to.
fn from_address(msg: &Message) -> Option<String> {
    let from = msg.raw_header_values("from").into_iter().next()?;
    Target::address(&unfolded(from)).filter(|a| a.contains('@'))
}

/// Whether `needle` stands in `text` as a whole (no word character on either side), case
/// ignored.
fn contains_word(text: &str, needle: &str) -> bool {
    let (text, needle) = (text.to_lowercase(), needle.to_lowercase());
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(&needle).any(|(at, found)| {
        !word(text[..at].chars().next_back()) && !word(text[at + found.len()..].chars().next())
    })
}

/// Whether a subject greets a recipient by their address's local part as spam does:
/// `jane`, `jane, …` or `jane: …` (written as the address has it), `Re: jane` (after a word
/// at most), `, jane!`.
fn greets(subject: &str, local: &str) -> bool {
    if local.is_empty() {
        return false;
    }
    const MARKS: &[char] = &[',', ':', ';', '!', '?', '-'];
    let lower = subject.to_lowercase();
    let local_lower = local.to_lowercase();
    let reply = ["re:", "fw:"].iter().find_map(|p| lower.strip_prefix(p));
    let after_reply = reply.is_some_and(|rest| {
        let rest = rest.trim_start();
        rest == local_lower
            || rest
                .split_once(char::is_whitespace)
                .is_some_and(|(word, name)| {
                    word.chars().all(|c| c.is_alphanumeric() || c == '_')
                        && name.trim_start() == local_lower
                })
    });
    let addressed = subject.strip_prefix(local).is_some_and(|rest| {
        let rest = rest.trim_start();
        rest.strip_prefix(MARKS)
            .is_some_and(|after| after.is_empty() || after.starts_with(char::is_whitespace))
    });
    let comma = lower.strip_prefix(',').is_some_and(|rest| {
        rest.trim_start()
            .strip_prefix(local_lower.as_str())
            .is_some_and(|mark| mark.len() == 1 && mark.starts_with(MARKS))
    });
    lower == local_lower || after_reply || addressed || comma
}

/// An RFC 5322 date ("Thu, 22 Aug 2002 18:26:25 -0700", tolerant of common mistakes) as
/// seconds since the epoch.
pub fn parse_date(s: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let mut day = None;
    let mut month = None;
    let mut year = None;
    let mut time = None;
    let mut zone = 0i64;
    for word in s.split(|c: char| c.is_whitespace() || c == ',') {
        if word.is_empty() {
            continue;
        }
        let is = |name: &str| word.eq_ignore_ascii_case(name);
        let prefix = word.get(..3).unwrap_or_default();
        if let Some(m) = MONTHS.iter().position(|m| prefix.eq_ignore_ascii_case(m)) {
            month.get_or_insert(m as i64 + 1);
        } else if word.contains(':') && time.is_none() {
            let mut it = word.split(':').map(|p| p.parse::<i64>().ok());
            let (h, m, sec) = (it.next()??, it.next()??, it.next().flatten().unwrap_or(0));
            time = Some(h * 3600 + m * 60 + sec);
        } else if (word.starts_with('+') || word.starts_with('-')) && word.len() == 5 {
            let v: i64 = word[1..].parse().ok()?;
            let secs = (v / 100) * 3600 + (v % 100) * 60;
            zone = if word.starts_with('-') { -secs } else { secs };
        } else if let Ok(n) = word.parse::<i64>() {
            if day.is_none() && n <= 31 && month.is_none() {
                day = Some(n);
            } else if year.is_none() {
                year = Some(if n < 50 {
                    n + 2000
                } else if n < 100 {
                    n + 1900
                } else {
                    n
                });
            } else if day.is_none() && n <= 31 {
                day = Some(n);
            }
        } else {
            const ZONES: [(&str, i64); 8] = [
                ("edt", -4),
                ("est", -5),
                ("cdt", -5),
                ("cst", -6),
                ("mdt", -6),
                ("mst", -7),
                ("pdt", -7),
                ("pst", -8),
            ];
            if let Some((_, hours)) = ZONES.iter().find(|(name, _)| is(name)) {
                zone = hours * 3600;
            }
        }
    }
    let (y, m, d) = (year?, month?, day?);
    // Days from civil (Howard Hinnant's algorithm).
    let (y2, m2) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + time.unwrap_or(0) - zone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(parse_date("Thu, 01 Jan 1970 00:00:00 +0000"), Some(0));
        assert_eq!(
            parse_date("Thu, 22 Aug 2002 18:26:25 -0700"),
            Some(1_030_065_985)
        );
        assert_eq!(parse_date("22 Aug 02 18:26:25 PDT"), Some(1_030_065_985));
        assert_eq!(parse_date("garbage"), None);
    }

    #[test]
    fn unknown_evals_and_arguments_are_errors() {
        let compile = |call| {
            compile(
                call,
                crate::rules::Kind::Body,
                &Default::default(),
                &Default::default(),
            )
        };
        assert!(compile("check_rbl('a', 'b')").is_err());
        assert!(compile("check_for_mime('mime_faraway_charset')").is_err());
        assert!(compile("html_image_ratio('x', '1')").is_err());
        assert!(compile("html_image_ratio('0.000','0.002')").is_ok());
        assert!(compile("html_tag_balance('head', '!= 0')").is_ok());
        assert!(compile("check_authres_result('spf')").is_err());
        assert!(compile("check_for_spf_maybe()").is_err());
        assert!(compile("check_dkim_valid_author_sig('a.example')").is_err());
        assert!(compile("check_for_spf_helo_softfail()").is_ok());
        // HTML facts spamnb does not gather are skips, not silent misses.
        assert!(compile("html_test('font_face_caps')").is_err());
        assert!(compile("html_range('backhair_count', '0', '1')").is_err());
        assert!(compile("html_text_match('script', 'x')").is_err());
        assert!(compile("html_eval('length', 'about 5')").is_err());
        assert!(compile("html_range('length', '0', '1024')").is_ok());
        // SpamAssassin answers for any key of its message object; spamnb for its flags.
        assert!(compile("check_msg_parse_flags('type')").is_err());
        assert!(compile("check_msg_parse_flags('mime_epilogue_exists')").is_ok());
    }
}
