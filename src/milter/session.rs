//! The state of one MTA connection, as a pure state machine: commands in, responses out.
//! It negotiates options, collects the headers and (up to a limit) the body of each
//! message, and at end of message hands the reassembled bytes out for scoring
//! ([`Step::Scan`]); [`Session::finish`] turns the verdict into the milter's answer.
//! Sockets, timeouts and the scoring itself belong to [`super::server`].

use std::collections::HashMap;
use std::sync::Arc;

use super::codec::{Command, ProtocolError, Response, VERSION, action, step};
use super::{MilterSettings, SpamAction};
use crate::message::{PREV_SUBJECT, is_own_header, raw_header_values, unfold};
use crate::model::{Decision, ModelConfig, Verdict};
use crate::spam_headers::{
    fold_value, is_tagging_of, lines_of, spam_headers, subject_tag, tagged_values,
};

/// Header bytes kept for scoring. Postfix's own `header_size_limit` is 100 KiB per header;
/// mail with more header than this is scored on its first 256 KiB of it.
const MAX_HEADER_BYTES: usize = 256 * 1024;

/// What the server does after a command.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Send these responses; none when the MTA was told not to wait for one.
    Reply(Vec<Response>),
    /// End of message: score these bytes, then answer with [`Session::finish`].
    Scan(Vec<u8>),
    /// The MTA said goodbye: close the connection.
    Close,
}

/// What was done with a message, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    Tagged,
    Quarantined,
    Rejected,
    /// Scoring failed or took too long: passed on untouched.
    PassedUnscored,
}

/// What option negotiation settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub version: u32,
    pub actions: u32,
    pub steps: u32,
}

/// The message being received.
#[derive(Debug, Default)]
struct Transaction {
    sender: Option<String>,
    /// The header block as `Name: value\r\n` lines, forged `X-Spam-*` fields left out.
    header: Vec<u8>,
    /// Forged `X-Spam-*` fields: name as written, and index among fields of that name.
    forged: Vec<(String, u32)>,
    /// How many `X-Spam-*` fields of each (lowercased) name were seen, for their indexes.
    own_counts: HashMap<String, u32>,
    /// Whether the message came with a Return-Path header (Sendmail passes it on).
    has_return_path: bool,
    /// Whether a Subject came, kept in `header` or not.
    has_subject: bool,
    /// The first incoming [`PREV_SUBJECT`]: the subject as sent, when an earlier pass of
    /// spamnb tagged the Subject (see [`crate::spam_headers::as_sent`]).
    prev_subject: Option<Vec<u8>>,
    body: Vec<u8>,
    /// The RCPT TO addresses, as the client wrote them.
    recipients: Vec<String>,
    /// Body bytes the MTA sent or would have sent, scanned or not.
    body_seen: u64,
    skipped: bool,
}

/// The SMTP client, as the MTA saw it.
struct Client {
    /// The name its address looked up to (`unknown` for none), as the MTA says it.
    name: String,
    address: Option<String>,
    helo: Option<String>,
}

/// `time` as a Received: field dates it, in UTC: `Tue, 1 Dec 2026 23:46:22 +0000`.
fn received_date(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    mail_parser::DateTime::from_timestamp(secs as i64).to_rfc822()
}

pub struct Session {
    settings: Arc<MilterSettings>,
    negotiated: Option<Negotiated>,
    client: Option<Client>,
    macros: HashMap<String, String>,
    transaction: Transaction,
}

/// Whom a session serves, as its log lines name it ([`Session::who`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Who {
    pub queue_id: Option<String>,
    /// The SMTP client's name and, in brackets, its address.
    pub client: Option<String>,
    pub from: Option<String>,
}

impl Session {
    /// A session under `settings`, which it keeps for its whole life: a reload never
    /// changes the rules in the middle of a connection.
    pub fn new(settings: Arc<MilterSettings>) -> Session {
        Session {
            settings,
            negotiated: None,
            client: None,
            macros: HashMap::new(),
            transaction: Transaction::default(),
        }
    }

    /// The queue ID (macro `i`), the SMTP client and the sender, for log lines, each
    /// when known. Control characters the MTA or the sender put in are escaped, so they
    /// cannot forge lines.
    pub fn who(&self) -> Who {
        let escaped = |s: String| crate::message::escape_control(&s).into_owned();
        Who {
            queue_id: self.macros.get("i").cloned().map(escaped),
            client: self.client.as_ref().map(|c| {
                escaped(match &c.address {
                    Some(a) => format!("{}[{a}]", c.name),
                    None => c.name.clone(),
                })
            }),
            from: self.transaction.sender.clone().map(escaped),
        }
    }

    pub fn handle(&mut self, command: Command) -> Result<Step, ProtocolError> {
        let Some(negotiated) = self.negotiated else {
            return match command {
                Command::Negotiate {
                    version,
                    actions,
                    steps,
                } => self.negotiate(version, actions, steps),
                // Macros may be sent ahead of anything; everything else needs options first.
                Command::Macros { pairs, .. } => {
                    self.macros.extend(pairs);
                    Ok(Step::Reply(Vec::new()))
                }
                Command::Quit => Ok(Step::Close),
                Command::Abort => Ok(Step::Reply(Vec::new())),
                other => Err(ProtocolError::BeforeNegotiation { code: other.code() }),
            };
        };
        let unless = |no_reply: u32| {
            if negotiated.steps & no_reply != 0 {
                Step::Reply(Vec::new())
            } else {
                Step::Reply(vec![Response::Continue])
            }
        };
        Ok(match command {
            // Sendmail renegotiates on a reused connection after QUIT_NC.
            Command::Negotiate {
                version,
                actions,
                steps,
            } => self.negotiate(version, actions, steps)?,
            Command::Macros { pairs, .. } => {
                self.macros.extend(pairs);
                Step::Reply(Vec::new())
            }
            Command::Connect { hostname, address } => {
                self.client = Some(Client {
                    name: hostname,
                    address,
                    helo: None,
                });
                unless(step::NR_CONNECT)
            }
            Command::Helo(helo) => {
                if let Some(client) = &mut self.client {
                    client.helo = Some(helo);
                }
                unless(step::NR_HELO)
            }
            Command::Mail(args) => {
                // A new message: whatever a previous one left (without an abort) goes.
                self.transaction = Transaction {
                    sender: args.into_iter().next(),
                    ..Transaction::default()
                };
                unless(step::NR_MAIL)
            }
            Command::Rcpt(args) => {
                self.transaction.recipients.extend(args.into_iter().next());
                unless(step::NR_RCPT)
            }
            Command::Data => unless(step::NR_DATA),
            Command::Unknown(_) => unless(step::NR_UNKNOWN),
            Command::Header { name, value } => {
                self.header(&name, &value, negotiated);
                unless(step::NR_HEADER)
            }
            Command::EndOfHeaders => unless(step::NR_EOH),
            Command::Body(chunk) => {
                if self.body(&chunk) && negotiated.steps & step::SKIP != 0 {
                    self.transaction.skipped = true;
                    Step::Reply(vec![Response::Skip])
                } else {
                    unless(step::NR_BODY)
                }
            }
            Command::EndOfMessage(chunk) => {
                self.body(&chunk);
                Step::Scan(self.message_bytes())
            }
            Command::Abort => {
                // No reply: the MTA does not wait for one. The connection goes on.
                self.transaction = Transaction::default();
                self.macros.retain(|k, _| is_connection_macro(k));
                Step::Reply(Vec::new())
            }
            Command::Quit => Step::Close,
            Command::QuitNewConnection => {
                self.transaction = Transaction::default();
                self.macros.clear();
                self.client = None;
                Step::Reply(Vec::new())
            }
        })
    }

    fn negotiate(
        &mut self,
        version: u32,
        offered_actions: u32,
        offered_steps: u32,
    ) -> Result<Step, ProtocolError> {
        if version < 2 {
            return Err(ProtocolError::Malformed {
                code: b'O',
                why: "the MTA speaks milter version 1, spamnb needs 2 or later",
            });
        }
        // Ask only for what is used: headers to add and change; quarantine when configured.
        let mut wanted_actions = action::ADD_HEADERS | action::CHANGE_HEADERS;
        if self.settings.action == SpamAction::Quarantine {
            wanted_actions |= action::QUARANTINE;
        }
        // Stages spamnb does not read are not sent; stages it reads need no answer, except
        // body chunks, answered with "skip" once the scan limit is reached. Each bit only
        // if the MTA offers it: asking for one it does not know fails the negotiation.
        // HELO and RCPT are read for the trace the MTA writes (see `own_received`).
        let wanted_steps = step::NO_DATA
            | step::NO_UNKNOWN
            | step::NO_EOH
            | step::NR_CONNECT
            | step::NR_HELO
            | step::NR_MAIL
            | step::NR_RCPT
            | step::NR_DATA
            | step::NR_UNKNOWN
            | step::NR_EOH
            | step::NR_HEADER
            | step::SKIP
            | step::HEADER_LEADING_SPACE;
        let mut steps = wanted_steps & offered_steps;
        if steps & step::SKIP == 0 {
            // Without "skip" there is nothing to say to a body chunk but "continue".
            steps |= step::NR_BODY & offered_steps;
        }
        let negotiated = Negotiated {
            version: version.min(VERSION),
            actions: wanted_actions & offered_actions,
            steps,
        };
        self.negotiated = Some(negotiated);
        Ok(Step::Reply(vec![Response::Negotiate {
            version: negotiated.version,
            actions: negotiated.actions,
            steps: negotiated.steps,
        }]))
    }

    fn header(&mut self, name: &[u8], value: &[u8], negotiated: Negotiated) {
        let t = &mut self.transaction;
        let name_text = String::from_utf8_lossy(name);
        if is_own_header(&name_text) {
            let count = t
                .own_counts
                .entry(name_text.to_ascii_lowercase())
                .or_insert(0);
            *count += 1;
            if name_text.trim_ascii().eq_ignore_ascii_case(PREV_SUBJECT) && *count == 1 {
                t.prev_subject = Some(value.to_vec());
            }
            t.forged.push((name_text.into_owned(), *count));
            return;
        }
        t.has_return_path |= name_text.eq_ignore_ascii_case("return-path");
        t.has_subject |= name_text.trim_ascii().eq_ignore_ascii_case("subject");
        if t.header.len() + name.len() + value.len() + 4 > MAX_HEADER_BYTES {
            return;
        }
        t.header.extend_from_slice(name);
        t.header.push(b':');
        if negotiated.steps & step::HEADER_LEADING_SPACE == 0 {
            // The MTA took the space after the colon off; put the usual one back.
            t.header.push(b' ');
        }
        t.header.extend_from_slice(value);
        t.header.extend_from_slice(b"\r\n");
    }

    /// Keeps `chunk` up to the body limit; says whether the limit is now reached.
    fn body(&mut self, chunk: &[u8]) -> bool {
        let t = &mut self.transaction;
        t.body_seen += chunk.len() as u64;
        let room = self.settings.max_body_bytes.saturating_sub(t.body.len());
        t.body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        t.body.len() >= self.settings.max_body_bytes && !t.skipped
    }

    /// The message as it will be stored: header block, empty line, body (as far as kept).
    /// Delivery adds `Return-Path: <envelope sender>` (Postfix drops an incoming one
    /// before the milter sees the headers), so the scored bytes carry it too: `spamnb
    /// check` on the delivered file then sees the same evidence. So does the MTA's own
    /// Received: field, which Postfix does not show a milter: without it, the newest trace
    /// a rule read would be one the sender wrote.
    fn message_bytes(&self) -> Vec<u8> {
        let t = &self.transaction;
        let mut raw = Vec::with_capacity(t.header.len() + 2 + t.body.len() + 256);
        if let Some(sender) = t.sender.as_deref().filter(|_| !t.has_return_path) {
            raw.extend_from_slice(b"Return-Path: ");
            if sender.starts_with('<') {
                raw.extend_from_slice(sender.as_bytes());
            } else {
                raw.extend_from_slice(format!("<{sender}>").as_bytes());
            }
            raw.extend_from_slice(b"\r\n");
        }
        if let Some(received) = self.own_received() {
            raw.extend_from_slice(received.as_bytes());
        }
        raw.extend_from_slice(&t.header);
        if let Some(prev) = &t.prev_subject {
            // For the engine to tell an earlier pass's tag; it scores neither.
            raw.extend_from_slice(PREV_SUBJECT.as_bytes());
            raw.extend_from_slice(b": ");
            raw.extend_from_slice(prev.trim_ascii_start());
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"\r\n");
        raw.extend_from_slice(&t.body);
        raw
    }

    /// The Received: field the MTA writes for this client, as Postfix and Sendmail write
    /// it (`from HELO (NAME [ADDRESS]) by HOST for <RECIPIENT>; DATE`, the recipient when
    /// there is one), unless the MTA showed its own (see `shows_own_received`).
    fn own_received(&self) -> Option<String> {
        let client = self.client.as_ref()?;
        let address = client.address.as_deref()?;
        let literal = if address.contains(':') {
            format!("[IPv6:{address}]")
        } else {
            format!("[{address}]")
        };
        if self.shows_own_received(&literal) {
            return None;
        }
        let clean = |s: &str| -> String {
            s.chars()
                .filter(|c| !c.is_control() && !matches!(c, '(' | ')' | '[' | ']' | ';'))
                .collect()
        };
        // Sendmail names a client without reverse DNS by its address in brackets, Postfix
        // as `unknown`: written as Postfix writes it.
        let name = match client.name.starts_with('[') {
            true => "unknown".to_string(),
            false => clean(&client.name),
        };
        let helo = client.helo.as_deref().map_or_else(|| name.clone(), clean);
        let host = self
            .macros
            .get("j")
            .map_or_else(|| "localhost".into(), |j| clean(j));
        // One recipient is named, as Postfix and Sendmail name it.
        let recipient = match self.transaction.recipients.as_slice() {
            [one] => format!("\r\n\tfor {}", clean(one)),
            _ => String::new(),
        };
        Some(format!(
            "Received: from {helo} ({name} {literal})\r\n\tby {host}{recipient}; {}\r\n",
            received_date(std::time::SystemTime::now())
        ))
    }

    /// The answer at end of message, from the verdict (None: scoring failed or timed
    /// out, and the message passes untouched). Resets the session for the next message.
    pub fn finish(
        &mut self,
        verdict: Option<(&Verdict, &ModelConfig)>,
    ) -> (Vec<Response>, Disposition) {
        let result = self.answer(verdict);
        self.transaction = Transaction::default();
        self.macros.retain(|k, _| is_connection_macro(k));
        result
    }

    fn answer(&self, verdict: Option<(&Verdict, &ModelConfig)>) -> (Vec<Response>, Disposition) {
        let granted = self.negotiated.map_or(0, |n| n.actions);
        let mut out = Vec::new();
        // Forged fields go whatever the verdict: left on mail passed on unscored, a
        // forged `X-Spam-Status: No` would read as spamnb's own after delivery.
        if granted & action::CHANGE_HEADERS != 0 {
            for (name, index) in forged_deletions(&self.transaction.forged) {
                out.push(Response::ChangeHeader {
                    index: *index,
                    name: name.clone(),
                    value: String::new(),
                });
            }
        }
        let Some((verdict, model)) = verdict else {
            out.push(Response::Continue);
            return (out, Disposition::PassedUnscored);
        };
        let leading_space = self
            .negotiated
            .is_some_and(|n| n.steps & step::HEADER_LEADING_SPACE != 0);
        let is_spam = verdict.decision == Decision::Spam;
        let over_reject = self
            .settings
            .reject_score
            .is_some_and(|s| verdict.score >= s);
        if over_reject || (is_spam && self.settings.action == SpamAction::Reject) {
            return (
                vec![Response::ReplyCode(self.settings.reject_reply())],
                Disposition::Rejected,
            );
        }
        let with_space = |value: String| {
            if leading_space {
                format!(" {value}")
            } else {
                value
            }
        };
        // A value folded with its space after the colon, as the MTA takes it.
        let spaced = |value: String| match value.strip_prefix(' ') {
            Some(bare) if !leading_space => bare.to_string(),
            _ => value,
        };
        let mut subject_tagged = false;
        if granted & action::ADD_HEADERS != 0 {
            for (name, value) in spam_headers(verdict, model) {
                out.push(Response::AddHeader {
                    name: name.to_string(),
                    value: with_space(value),
                });
            }
            if let Some((subject, sent)) = self.tagged_subject(verdict, model, granted) {
                subject_tagged = true;
                out.push(match sent {
                    Some(_) => Response::ChangeHeader {
                        index: 1,
                        name: "Subject".into(),
                        value: spaced(subject),
                    },
                    None => Response::AddHeader {
                        name: "Subject".into(),
                        value: spaced(subject),
                    },
                });
                out.push(Response::AddHeader {
                    name: PREV_SUBJECT.into(),
                    value: sent.map_or_else(|| with_space(String::new()), spaced),
                });
            }
        }
        // A subject an earlier pass tagged goes back as sent when this one does not tag
        // it (an empty value removes the field, as one that was not sent).
        if !subject_tagged
            && granted & action::CHANGE_HEADERS != 0
            && let (Some(sent), true) = self.sent_subject(&model.subject_tag)
            && std::str::from_utf8(sent).is_ok()
        {
            out.push(Response::ChangeHeader {
                index: 1,
                name: "Subject".into(),
                value: if sent.is_empty() {
                    String::new()
                } else {
                    spaced(folded("Subject", &lines_of(sent)))
                },
            });
        }
        let mut disposition = Disposition::Tagged;
        if is_spam
            && self.settings.action == SpamAction::Quarantine
            && granted & action::QUARANTINE != 0
        {
            out.push(Response::Quarantine(format!(
                "spamnb: spam, score {:.1}",
                verdict.score
            )));
            disposition = Disposition::Quarantined;
        }
        out.push(Response::Continue);
        (out, disposition)
    }

    /// The Subject of spam with `[model] subject_tag` before it, and the subject as sent
    /// (none: the message had no Subject), when the MTA lets it be changed. A subject not
    /// in UTF-8 is left be: the milter protocol carries text, and it would come out changed.
    fn tagged_subject(
        &self,
        verdict: &Verdict,
        model: &ModelConfig,
        granted: u32,
    ) -> Option<(String, Option<String>)> {
        let tag = subject_tag(verdict, model)?;
        let (sent, _) = self.sent_subject(&model.subject_tag);
        match sent {
            None if self.transaction.has_subject => None,
            None => Some((folded("Subject", tag.as_bytes()), None)),
            Some(_) if granted & action::CHANGE_HEADERS == 0 => None,
            Some(sent) if std::str::from_utf8(sent).is_err() => None,
            Some(sent) => {
                let (subject, prev) = tagged_values(&tag, &lines_of(sent));
                Some((
                    folded("Subject", &subject),
                    Some(folded(PREV_SUBJECT, &prev)),
                ))
            }
        }
    }

    /// The first Subject as sent, and whether the message carries it tagged by an earlier
    /// pass of spamnb, when it is the incoming [`PREV_SUBJECT`]'s value (see
    /// [`crate::spam_headers::as_sent`]).
    fn sent_subject(&self, template: &str) -> (Option<&[u8]>, bool) {
        let t = &self.transaction;
        let subject = raw_header_values(&t.header, "Subject").first().copied();
        match (subject, &t.prev_subject) {
            (Some(subject), Some(prev))
                if is_tagging_of(&unfold(subject), &unfold(prev), template) =>
            {
                (Some(prev.trim_ascii()), true)
            }
            _ => (subject, false),
        }
    }

    /// Whether the header begins with the MTA's own Received: field for this client
    /// (`literal`, its address in brackets). Sendmail shows milters the field it wrote;
    /// Postfix does not, so that there the first field is always one the sender wrote, and
    /// one naming the client's address and a trusted host would pass for the MTA's (a
    /// welcomelist entry's). So Postfix (macro `v`) never shows it, and the field must say
    /// it was written `by` this MTA (macro `j`) when its name is known.
    fn shows_own_received(&self, literal: &str) -> bool {
        let postfix = (self.macros.get("v")).is_some_and(|v| {
            v.get(..7)
                .is_some_and(|p| p.eq_ignore_ascii_case("postfix"))
        });
        if postfix {
            return false;
        }
        // The first field with its folded lines: Sendmail writes `by` on the second.
        let header = &self.transaction.header;
        let end = (memchr::memchr_iter(b'\n', header))
            .find(|&nl| !matches!(header.get(nl + 1), Some(b' ' | b'\t')))
            .unwrap_or(header.len());
        let first = &header[..end];
        let by_this_mta = self
            .macros
            .get("j")
            .is_none_or(|j| memchr::memmem::find(first, format!("by {j}").as_bytes()).is_some());
        first
            .get(..9)
            .is_some_and(|n| n.eq_ignore_ascii_case(b"received:"))
            && memchr::memmem::find(first, literal.as_bytes()).is_some()
            && by_this_mta
    }

    /// Whether the MTA has negotiated: until then the peer may be anyone who can connect.
    pub fn negotiated(&self) -> bool {
        self.negotiated.is_some()
    }

    /// Whether a message is under way (begun and not yet ended or aborted).
    pub fn in_message(&self) -> bool {
        let t = &self.transaction;
        t.sender.is_some() || !t.header.is_empty() || !t.forged.is_empty() || t.body_seen > 0
    }

    /// Whether the body was cut at `max_body_bytes`: what is scored is only its start.
    pub fn body_cut(&self) -> bool {
        self.transaction.body_seen > self.transaction.body.len() as u64
    }

    /// Body bytes of the current message, scanned or not.
    pub fn body_seen(&self) -> u64 {
        self.transaction.body_seen
    }
}

/// Header `name`'s `value` (UTF-8, lines split at LF), folded as a milter carries a
/// folded value: its lines joined by LF alone, which Postfix and Sendmail write with the
/// line ending of their queue files.
fn folded(name: &str, value: &[u8]) -> String {
    String::from_utf8_lossy(&fold_value(name, value, b"\n")).into_owned()
}

/// Forged `X-Spam-*` fields deleted from one message at most. Postfix's cleanup reads the
/// header again for each deletion: 12,000 of them (a 150 KB message) made it give up and
/// refuse all mail for a minute, and the sender could send it again.
const MAX_FORGED_DELETIONS: usize = 64;

/// The forged fields to delete, at most [`MAX_FORGED_DELETIONS`]: [`PREV_SUBJECT`] first
/// (learning reads it as the subject as sent), then the first of each name that filters
/// read (what spamnb and SpamAssassin write), then their other copies, then the rest;
/// the last first, so that a deletion never moves a field still to delete, whichever way
/// the MTA counts them.
fn forged_deletions(forged: &[(String, u32)]) -> Vec<&(String, u32)> {
    let rank = |(name, index): &(String, u32)| {
        let name = name.trim().to_ascii_lowercase();
        let read_by_filters = [
            "flag",
            "status",
            "level",
            "class",
            "report",
            "score",
            "checker-version",
        ]
        .iter()
        .any(|n| name.strip_prefix("x-spam-") == Some(*n));
        match (name.eq_ignore_ascii_case(PREV_SUBJECT), read_by_filters) {
            (true, _) => 0,
            (false, true) if *index == 1 => 1,
            (false, true) => 2,
            (false, false) => 3,
        }
    };
    let mut chosen: Vec<usize> = (0..forged.len()).collect();
    chosen.sort_by_key(|&i| rank(&forged[i]));
    chosen.truncate(MAX_FORGED_DELETIONS);
    chosen.sort_unstable_by(|a, b| b.cmp(a));
    chosen.into_iter().map(|i| &forged[i]).collect()
}

/// Macros sent with CONNECT and HELO describe the connection and outlive a message;
/// the others (`i`, `{mail_addr}`, …) belong to one message.
fn is_connection_macro(name: &str) -> bool {
    matches!(
        name,
        "j" | "_"
            | "v"
            | "{daemon_name}"
            | "{daemon_addr}"
            | "{client_addr}"
            | "{client_name}"
            | "{client_port}"
            | "{if_name}"
            | "{if_addr}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Verdict;

    use crate::milter::client::{POSTFIX_ACTIONS, POSTFIX_STEPS};

    fn session(settings: MilterSettings) -> Session {
        Session::new(Arc::new(settings))
    }

    /// A session past the negotiation with what Postfix offers, where most tests start.
    fn postfix_session(settings: MilterSettings) -> Session {
        let mut s = session(settings);
        negotiate(&mut s, POSTFIX_ACTIONS, POSTFIX_STEPS);
        s
    }

    fn verdict(decision: Decision, score: f64) -> Verdict {
        Verdict {
            decision,
            score,
            probability: 0.5,
            reasons: vec![],
            rules: vec![],
            note: None,
            parts: None,
            decided_by: Vec::new(),
        }
    }

    fn run(s: &mut Session, commands: Vec<Command>) -> Vec<Step> {
        commands
            .into_iter()
            .map(|c| s.handle(c).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    fn end_of_message(s: &mut Session) -> Step {
        s.handle(Command::EndOfMessage(Vec::new())).expect("eom")
    }

    /// Answers the message as a clear ham with the default model settings.
    fn finish_as_ham(s: &mut Session) -> (Vec<Response>, Disposition) {
        s.finish(Some((
            &verdict(Decision::Ham, -8.0),
            &ModelConfig::default(),
        )))
    }

    fn header(name: &str, value: &str) -> Command {
        Command::Header {
            name: name.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        }
    }

    fn negotiate(s: &mut Session, actions: u32, steps: u32) -> Negotiated {
        let step = s
            .handle(Command::Negotiate {
                version: 6,
                actions,
                steps,
            })
            .expect("negotiates");
        let Step::Reply(r) = step else {
            panic!("{step:?}")
        };
        let Response::Negotiate {
            version,
            actions,
            steps,
        } = r[0]
        else {
            panic!("{r:?}")
        };
        Negotiated {
            version,
            actions,
            steps,
        }
    }

    #[test]
    fn negotiation_asks_only_for_what_is_offered_and_needed() {
        let mut s = session(MilterSettings::default());
        let n = negotiate(&mut s, POSTFIX_ACTIONS, POSTFIX_STEPS);
        assert_eq!(n.version, 6);
        assert_eq!(
            n.actions,
            action::ADD_HEADERS | action::CHANGE_HEADERS,
            "tag mode needs no quarantine"
        );
        for bit in [
            step::NO_EOH,
            step::NR_HELO,
            step::NR_RCPT,
            step::NR_HEADER,
            step::SKIP,
        ] {
            assert_ne!(n.steps & bit, 0, "bit {bit:#x} in {:#x}", n.steps);
        }
        for bit in [
            step::NO_CONNECT,
            step::NO_HELO,
            step::NO_RCPT,
            step::NO_MAIL,
            step::NO_HEADERS,
            step::NO_BODY,
            step::NR_BODY,
        ] {
            assert_eq!(n.steps & bit, 0, "bit {bit:#x} in {:#x}", n.steps);
        }

        let mut s = session(MilterSettings {
            action: SpamAction::Quarantine,
            ..Default::default()
        });
        assert_ne!(
            negotiate(&mut s, POSTFIX_ACTIONS, POSTFIX_STEPS).actions & action::QUARANTINE,
            0
        );

        // An old MTA offering few steps: nothing it does not know is asked for.
        let mut s = session(MilterSettings::default());
        let n = negotiate(&mut s, 0x3f, 0x7f);
        assert_eq!(n.steps & !0x7f, 0, "{:#x}", n.steps);
        assert!(
            s.handle(Command::Negotiate {
                version: 1,
                actions: 0,
                steps: 0
            })
            .is_err()
        );
    }

    #[test]
    fn dates_are_written_as_received_fields_write_them() {
        let at =
            |secs: u64| received_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(at(0), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
        assert_eq!(at(1_796_168_782), "Tue, 1 Dec 2026 23:46:22 +0000");
        assert_eq!(at(4_102_444_800), "Fri, 1 Jan 2100 00:00:00 +0000");
    }

    /// The client's trace names its HELO, its looked-up name and its address; an MTA that
    /// showed its own trace first is believed; what the client chose cannot break the field.
    #[test]
    fn the_mtas_own_trace_is_added_once() {
        let scanned = |connect: Command, helo: Option<&str>, headers: Vec<Command>| {
            let mut s = session(MilterSettings::default());
            negotiate(&mut s, POSTFIX_ACTIONS, 0);
            let mut commands = vec![connect];
            commands.extend(helo.map(|h| Command::Helo(h.into())));
            commands.push(Command::Mail(vec!["<a@example.org>".into()]));
            commands.push(Command::Rcpt(vec!["<b@example.net>".into()]));
            commands.extend(headers);
            commands.push(Command::EndOfHeaders);
            run(&mut s, commands);
            match end_of_message(&mut s) {
                Step::Scan(bytes) => String::from_utf8(bytes).expect("UTF-8"),
                other => panic!("{other:?}"),
            }
        };
        let connect = |name: &str, address: Option<&str>| Command::Connect {
            hostname: name.into(),
            address: address.map(str::to_string),
        };
        let out = scanned(
            connect("unknown", Some("2001:db8::1")),
            Some("evil (bank.example [192.0.2.9])\r\nX: y"),
            vec![header("Subject", "s")],
        );
        assert!(
            out.contains(
                "Received: from evil bank.example 192.0.2.9X: y (unknown [IPv6:2001:db8::1])\r\n\t\
                 by localhost\r\n\tfor <b@example.net>; "
            ),
            "{out}"
        );
        // Sendmail shows its own field, `by` its name on a folded line. Postfix never
        // shows its own, and another MTA's says `by` another host: then the sender wrote
        // it, and the MTA's own goes on top, for rules to read.
        let shown = "from c.example (c.example [192.0.2.1])\r\n\tby mx.example.org (8.17.1)";
        let mta = |pairs: &[(&str, &str)]| Command::Macros {
            stage: b'C',
            pairs: (pairs.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        for (macros, fields) in [
            (vec![], 1),
            (vec![("j", "mx.example.org")], 1),
            (vec![("j", "mx.example.org"), ("v", "Postfix 3.7.11")], 2),
            (vec![("j", "gw.example.net")], 2),
        ] {
            let out = scanned(
                connect("c.example", Some("192.0.2.1")),
                Some("c.example"),
                vec![
                    mta(&macros),
                    header("Received", shown),
                    header("Subject", "s"),
                ],
            );
            assert_eq!(
                out.matches("Received:").count(),
                fields,
                "{macros:?}: {out}"
            );
            let on_top = "Return-Path: <a@example.org>\r\nReceived: from c.example \
                          (c.example [192.0.2.1])\r\n\tby ";
            assert!(out.starts_with(on_top), "{out}");
        }
        let out = scanned(
            connect("[192.0.2.7]", Some("192.0.2.7")),
            Some("h.example"),
            vec![header("Subject", "s")],
        );
        assert!(
            out.contains(
                "Received: from h.example (unknown [192.0.2.7])\r\n\tby localhost\r\n\t\
                 for <b@example.net>; "
            ),
            "{out}"
        );
        // A client without an address (a local pipe) has no trace to add.
        let out = scanned(
            connect("localhost", None),
            None,
            vec![header("Subject", "s")],
        );
        assert!(!out.contains("Received:"), "{out}");
    }

    #[test]
    fn a_message_is_reassembled_and_tagged() {
        let mut s = session(MilterSettings::default());
        negotiate(&mut s, POSTFIX_ACTIONS, 0); // no "no reply" steps: every stage answers
        let steps = run(
            &mut s,
            vec![
                Command::Macros {
                    stage: b'C',
                    pairs: vec![("j".into(), "mx".into())],
                },
                Command::Connect {
                    hostname: "c.example".into(),
                    address: Some("192.0.2.1".into()),
                },
                Command::Mail(vec!["<a@example.org>".into()]),
                header("Subject", "hello"),
                header("X-Spam-Flag", "NO"),
                header("x-spam-flag", "NO"),
                header("X-Spam-Status", "No"),
                Command::EndOfHeaders,
                Command::Body(b"body\r\n".to_vec()),
            ],
        );
        assert_eq!(steps[0], Step::Reply(vec![]), "macros never get a reply");
        assert!(
            steps[1..]
                .iter()
                .all(|s| *s == Step::Reply(vec![Response::Continue])),
            "{steps:?}"
        );
        let step = end_of_message(&mut s);
        let Step::Scan(scanned) = step else {
            panic!("{step:?}")
        };
        let scanned = String::from_utf8(scanned).expect("UTF-8");
        // Delivery's Return-Path, then the MTA's own trace, dated now, then the header.
        let (trace, rest) = scanned.split_once("\tby mx; ").expect(&scanned);
        assert_eq!(
            trace,
            "Return-Path: <a@example.org>\r\nReceived: from c.example (c.example [192.0.2.1])\r\n"
        );
        let (date, rest) = rest.split_once("\r\n").expect(rest);
        assert_eq!(rest, "Subject: hello\r\n\r\nbody\r\n");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs() as i64;
        let dated = crate::rules::eval::parse_date(date).expect(date);
        assert!((now - dated).abs() < 60, "{date}");
        assert_eq!(s.who().client.as_deref(), Some("c.example[192.0.2.1]"));

        let (responses, d) = finish_as_ham(&mut s);
        assert_eq!(d, Disposition::Tagged);
        assert_eq!(
            &responses[..3],
            &[
                Response::ChangeHeader {
                    index: 1,
                    name: "X-Spam-Status".into(),
                    value: String::new()
                },
                Response::ChangeHeader {
                    index: 2,
                    name: "x-spam-flag".into(),
                    value: String::new()
                },
                Response::ChangeHeader {
                    index: 1,
                    name: "X-Spam-Flag".into(),
                    value: String::new()
                },
            ]
        );
        assert_eq!(
            responses[3],
            Response::AddHeader {
                name: "X-Spam-Flag".into(),
                value: "NO".into()
            }
        );
        assert_eq!(responses.last(), Some(&Response::Continue));
        // The next message starts clean: only the connection's trace is left.
        let Step::Scan(next) = end_of_message(&mut s) else {
            panic!("no scan")
        };
        let next = String::from_utf8(next).expect("UTF-8");
        assert!(
            next.starts_with("Received: from c.example ") && next.ends_with(" +0000\r\n\r\n"),
            "{next}"
        );
    }

    #[test]
    fn a_subject_an_earlier_pass_tagged_is_tagged_once_or_put_back() {
        let model = ModelConfig {
            subject_tag: "[SPAM _SCORE_]".into(),
            ..ModelConfig::default()
        };
        for (decision, score, want) in [
            (Decision::Spam, 7.0, " [SPAM 7.0] cheap pills"),
            (Decision::Ham, -3.0, " cheap pills"),
        ] {
            let mut s = postfix_session(MilterSettings::default());
            run(
                &mut s,
                vec![
                    Command::Mail(vec!["<a@example.org>".into()]),
                    header("Subject", " [SPAM 9.1] cheap pills"),
                    header("X-Spam-Prev-Subject", " cheap pills"),
                    Command::EndOfHeaders,
                    Command::Body(b"body\r\n".to_vec()),
                ],
            );
            let Step::Scan(scanned) = end_of_message(&mut s) else {
                panic!("no scan")
            };
            // The engine is shown the field, and reads the subject as sent.
            let as_sent = crate::spam_headers::as_sent(&scanned, &model.subject_tag);
            assert_eq!(
                crate::message::raw_header_values(&as_sent, "Subject"),
                [&b"cheap pills"[..]],
                "{}",
                String::from_utf8_lossy(&scanned)
            );
            let (responses, _) = s.finish(Some((&verdict(decision, score), &model)));
            let subjects: Vec<_> = responses
                .iter()
                .filter(|r| {
                    matches!(r, Response::ChangeHeader { name, .. }
                        | Response::AddHeader { name, .. } if name.contains("ubject"))
                })
                .collect();
            let mut expected = vec![Response::ChangeHeader {
                index: 1,
                name: "X-Spam-Prev-Subject".into(),
                value: String::new(),
            }];
            expected.push(Response::ChangeHeader {
                index: 1,
                name: "Subject".into(),
                value: want.into(),
            });
            if decision == Decision::Spam {
                expected.push(Response::AddHeader {
                    name: "X-Spam-Prev-Subject".into(),
                    value: " cheap pills".into(),
                });
            }
            assert_eq!(
                subjects,
                expected.iter().collect::<Vec<_>>(),
                "{decision:?}"
            );
        }
    }

    /// RFC 5322 2.1.1: a long subject, tagged, is folded as a milter carries a folded
    /// value (lines joined by LF, each after the first starting with white space), no
    /// line over 998 octets, and its white space is kept as sent.
    #[test]
    fn a_tagged_subject_is_folded_not_squeezed() {
        let model = ModelConfig {
            subject_tag: "[SPAM _SCORE_]".into(),
            ..ModelConfig::default()
        };
        let sent = format!("{} end", "cheap  pills\tnow ".repeat(100));
        let mut s = postfix_session(MilterSettings::default());
        run(
            &mut s,
            vec![
                Command::Mail(vec!["<a@example.org>".into()]),
                header("Subject", &format!(" {sent}")),
                Command::EndOfHeaders,
                Command::Body(b"body\r\n".to_vec()),
            ],
        );
        end_of_message(&mut s);
        let (responses, _) = s.finish(Some((&verdict(Decision::Spam, 9.14), &model)));
        let value = |field: &str| {
            responses
                .iter()
                .find_map(|r| match r {
                    Response::ChangeHeader { name, value, .. }
                    | Response::AddHeader { name, value }
                        if name == field && !value.is_empty() =>
                    {
                        Some(value.clone())
                    }
                    _ => None,
                })
                .unwrap_or_else(|| panic!("no {field} in {responses:?}"))
        };
        for (field, want) in [
            ("Subject", format!(" [SPAM 9.1] {sent}")),
            ("X-Spam-Prev-Subject", format!(" {sent}")),
        ] {
            let folded = value(field);
            let lines: Vec<&str> = folded.split('\n').collect();
            assert!(lines.len() > 1, "{field}: {folded:?}");
            assert!(
                lines[1..].iter().all(|l| l.starts_with([' ', '\t'])),
                "{field}: {folded:?}"
            );
            assert!(
                lines.iter().all(|l| field.len() + 1 + l.len() <= 998),
                "{field}: {folded:?}"
            );
            assert!(!folded.contains('\r'), "{field}: {folded:?}");
            assert_eq!(folded.replace('\n', ""), want, "{field}");
        }
    }

    #[test]
    fn actions_follow_the_settings() {
        let model = ModelConfig::default();
        let spam = verdict(Decision::Spam, 20.0);
        let ham = verdict(Decision::Ham, -20.0);
        let cases = [
            (SpamAction::Tag, None, &spam, Disposition::Tagged),
            (
                SpamAction::Quarantine,
                None,
                &spam,
                Disposition::Quarantined,
            ),
            (SpamAction::Quarantine, None, &ham, Disposition::Tagged),
            (SpamAction::Reject, None, &spam, Disposition::Rejected),
            (SpamAction::Reject, None, &ham, Disposition::Tagged),
            (SpamAction::Tag, Some(15.0), &spam, Disposition::Rejected),
            (SpamAction::Tag, Some(25.0), &spam, Disposition::Tagged),
        ];
        for (action, reject_score, v, want) in cases {
            let mut s = postfix_session(MilterSettings {
                action,
                reject_score,
                reject_text: "No spam".into(),
                ..Default::default()
            });
            let (responses, d) = s.finish(Some((v, &model)));
            assert_eq!(d, want, "{action:?} {reject_score:?} {:?}", v.decision);
            match want {
                Disposition::Rejected => assert_eq!(
                    responses,
                    vec![Response::ReplyCode("550 5.7.1 No spam".into())]
                ),
                Disposition::Quarantined => {
                    assert!(
                        responses
                            .iter()
                            .any(|r| matches!(r, Response::Quarantine(_))),
                        "{responses:?}"
                    );
                    assert!(
                        responses
                            .iter()
                            .any(|r| matches!(r, Response::AddHeader { .. })),
                        "{responses:?}"
                    );
                }
                _ => assert!(
                    !responses
                        .iter()
                        .any(|r| matches!(r, Response::Quarantine(_))),
                    "{responses:?}"
                ),
            }
        }
        // Scoring failed: the message passes untouched.
        let mut s = postfix_session(MilterSettings::default());
        assert_eq!(
            s.finish(None),
            (vec![Response::Continue], Disposition::PassedUnscored)
        );
    }

    #[test]
    fn no_reply_steps_and_leading_space() {
        let mut s = postfix_session(MilterSettings::default());
        let steps = run(
            &mut s,
            vec![
                Command::Connect {
                    hostname: "h".into(),
                    address: None,
                },
                Command::Mail(vec!["<a@b>".into()]),
                header("Subject", " spaced"),
                Command::Body(b"x\r\n".to_vec()),
            ],
        );
        assert_eq!(
            steps[..3],
            [
                Step::Reply(vec![]),
                Step::Reply(vec![]),
                Step::Reply(vec![])
            ]
        );
        assert_eq!(
            steps[3],
            Step::Reply(vec![Response::Continue]),
            "body chunks are answered (for skip)"
        );
        assert_eq!(
            end_of_message(&mut s),
            Step::Scan(b"Return-Path: <a@b>\r\nSubject: spaced\r\n\r\nx\r\n".to_vec())
        );
        let (responses, _) = finish_as_ham(&mut s);
        assert_eq!(
            responses[0],
            Response::AddHeader {
                name: "X-Spam-Flag".into(),
                value: " NO".into()
            }
        );
    }

    #[test]
    fn body_is_cut_at_the_limit_and_skipped() {
        let mut s = postfix_session(MilterSettings {
            max_body_bytes: 10,
            ..Default::default()
        });
        assert_eq!(
            s.handle(Command::Body(b"12345".to_vec())).expect("body"),
            Step::Reply(vec![Response::Continue])
        );
        assert!(!s.body_cut());
        assert_eq!(
            s.handle(Command::Body(b"6789abcdef".to_vec()))
                .expect("body"),
            Step::Reply(vec![Response::Skip])
        );
        // A chunk already on its way after the skip is taken and not scanned.
        assert_eq!(
            s.handle(Command::Body(b"more".to_vec())).expect("body"),
            Step::Reply(vec![Response::Continue])
        );
        assert_eq!(s.body_seen(), 19);
        assert!(s.body_cut(), "what is scored is only the body's start");
        assert_eq!(
            end_of_message(&mut s),
            Step::Scan(b"\r\n123456789a".to_vec())
        );
    }

    #[test]
    fn abort_resets_and_quit_closes() {
        let mut s = postfix_session(MilterSettings::default());
        let steps = run(
            &mut s,
            vec![
                Command::Macros {
                    stage: b'C',
                    pairs: vec![("j".into(), "mx".into())],
                },
                Command::Macros {
                    stage: b'M',
                    pairs: vec![("i".into(), "ABC123".into())],
                },
                Command::Mail(vec!["<a@b>".into()]),
                header("Subject", "first"),
                header("X-Spam-Flag", "YES"),
                Command::Body(b"half a bo".to_vec()),
                Command::Abort,
            ],
        );
        assert_eq!(
            steps.last(),
            Some(&Step::Reply(vec![])),
            "abort gets no reply"
        );
        assert_eq!(
            s.who(),
            Who::default(),
            "message macros and sender are gone"
        );
        assert_eq!(
            s.macros.get("j").map(String::as_str),
            Some("mx"),
            "connection macros stay"
        );
        run(
            &mut s,
            vec![
                Command::Mail(vec!["<c@d>".into()]),
                header("Subject", " second"),
            ],
        );
        assert_eq!(
            end_of_message(&mut s),
            Step::Scan(b"Return-Path: <c@d>\r\nSubject: second\r\n\r\n".to_vec())
        );
        let (responses, _) = finish_as_ham(&mut s);
        assert!(
            !responses
                .iter()
                .any(|r| matches!(r, Response::ChangeHeader { .. })),
            "{responses:?}"
        );

        assert_eq!(
            s.handle(Command::QuitNewConnection).expect("quit_nc"),
            Step::Reply(vec![])
        );
        assert!(s.macros.is_empty());
        assert!(
            s.handle(Command::Connect {
                hostname: "next".into(),
                address: None
            })
            .is_ok()
        );
        assert_eq!(s.handle(Command::Quit).expect("quit"), Step::Close);
    }

    #[test]
    fn return_path_is_added_only_when_missing() {
        let mut s = postfix_session(MilterSettings::default());
        for (sender, fields, want) in [
            ("<>", vec![], &b"Return-Path: <>\r\n\r\n"[..]),
            (
                "bare@example.org",
                vec![],
                b"Return-Path: <bare@example.org>\r\n\r\n",
            ),
            (
                "<a@b>",
                vec![header("Return-Path", " <x@y>")],
                b"Return-Path: <x@y>\r\n\r\n",
            ),
        ] {
            let mut commands = vec![Command::Mail(vec![sender.into()])];
            commands.extend(fields);
            run(&mut s, commands);
            let step = end_of_message(&mut s);
            assert_eq!(step, Step::Scan(want.to_vec()), "{sender}");
            s.finish(None);
        }
    }

    #[test]
    fn forged_fields_are_deleted_up_to_a_bound_those_filters_read_first() {
        let mut forged: Vec<(String, u32)> = (1..=200).map(|i| ("X-Spam-A".into(), i)).collect();
        forged.insert(150, ("X-Spam-Flag".into(), 1));
        forged.push(("x-spam-status".into(), 1));
        let deleted = forged_deletions(&forged);
        assert_eq!(deleted.len(), MAX_FORGED_DELETIONS);
        let flag = deleted.iter().position(|(n, _)| n == "X-Spam-Flag");
        let status = deleted.iter().position(|(n, _)| n == "x-spam-status");
        assert_eq!((status, flag), (Some(0), Some(1)), "{deleted:?}");
        // The others from the first, deleted from the last.
        let others: Vec<u32> = deleted[2..].iter().map(|(_, i)| *i).collect();
        assert_eq!(others, (1..=62).rev().collect::<Vec<u32>>());

        // Copies of one read name cannot push out the field learning reads, nor the
        // first of another read name.
        let mut forged: Vec<(String, u32)> =
            (1..=100).map(|i| ("X-Spam-Level".into(), i)).collect();
        forged.push(("X-Spam-Prev-Subject".into(), 1));
        forged.push(("X-Spam-Status".into(), 1));
        let deleted = forged_deletions(&forged);
        assert_eq!(deleted.len(), MAX_FORGED_DELETIONS);
        for field in [
            ("X-Spam-Prev-Subject", 1),
            ("X-Spam-Status", 1),
            ("X-Spam-Level", 1),
        ] {
            assert!(
                deleted.iter().any(|(n, i)| (n.as_str(), *i) == field),
                "{field:?} not in {deleted:?}"
            );
        }
    }

    #[test]
    fn forged_fields_go_even_when_the_message_passes_unscored() {
        let mut s = postfix_session(MilterSettings::default());
        run(
            &mut s,
            vec![
                Command::Mail(vec!["<a@example.org>".into()]),
                header("X-Spam-Status", " No, score=-8.0"),
                header("X-Spam-Flag", " NO"),
                Command::EndOfHeaders,
                Command::Body(b"body\r\n".to_vec()),
            ],
        );
        end_of_message(&mut s);
        let (responses, d) = s.finish(None);
        assert_eq!(d, Disposition::PassedUnscored);
        let deleted: Vec<_> = (responses.iter())
            .filter_map(|r| match r {
                Response::ChangeHeader { name, value, .. } if value.is_empty() => {
                    Some(name.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(deleted, ["X-Spam-Flag", "X-Spam-Status"], "{responses:?}");
        assert_eq!(responses.last(), Some(&Response::Continue));
    }

    #[test]
    fn commands_before_negotiation_are_refused() {
        let mut s = session(MilterSettings::default());
        assert_eq!(
            s.handle(Command::Body(b"x".to_vec())),
            Err(ProtocolError::BeforeNegotiation { code: b'B' })
        );
        assert_eq!(s.handle(Command::Quit).expect("quit"), Step::Close);
    }
}
