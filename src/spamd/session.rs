//! What a spamd request means: score and answer (CHECK, SYMBOLS, REPORT, PROCESS, …),
//! or learn (TELL). The answers are built by pure functions of the verdict, so that they
//! are tested without sockets; [`serve`] adds the engine, the limits and the metrics.

use std::sync::Arc;
use std::time::Instant;

use super::codec::{Code, Head, Method, ProtocolError, Reply, Request, SpamLine};
use crate::config::Config;
use crate::daemon::learner::Durable;
use crate::daemon::listen::Peer;
use crate::daemon::metrics::Protocol;
use crate::daemon::{CheckError, Context, Reading, Scored};
use crate::message::escape_control;
use crate::model::{Class, Decision, ModelConfig, Verdict};
use crate::spam_headers::tagged;
use crate::store::Outcome;

/// The extension header through which TELL says exactly what happened, for `spamnb learn`.
pub const OUTCOME_HEADER: &str = "X-Spamnb-Outcome";

/// Answers one request under the configuration its connection started with. Never fails:
/// a failure becomes the error reply spamd would give, on which spamc passes the message
/// on unchanged (the daemon fails open).
pub async fn serve(
    request: Request,
    peer: Peer,
    ctx: &Context,
    config: &Config,
    protocol: Protocol,
) -> Reply {
    let head = &request.head;
    match head.method {
        Method::Ping => Reply::Pong,
        Method::Skip => {
            tracing::debug!(
                user = &*user(head),
                "spamd: client skipped a message (too large for it)"
            );
            Reply::Nothing
        }
        Method::Tell => tell(request, peer, ctx, config).await,
        Method::Flush => flush(ctx).await,
        // The model holds words of users' mail, and the ledger who learned what: they are
        // told only to local clients.
        Method::Stats | Method::Export | Method::Prune | Method::Ledger if peer != Peer::Local => {
            Reply::error(
                Code::NoPerm,
                "Service Unavailable: STATS, EXPORT, PRUNE and LEDGER are served on the local \
                 sockets only",
            )
        }
        Method::Stats | Method::Export | Method::Prune | Method::Ledger => {
            database(&request, ctx).await
        }
        _ => check(request, ctx, protocol).await,
    }
}

async fn check(request: Request, ctx: &Context, protocol: Protocol) -> Reply {
    let started = Instant::now();
    let Request { head, body } = request;
    let raw: Arc<[u8]> = body.into();
    // Mail in transit teaches; a `spamnb check` through the control socket is a question,
    // and teaches nothing.
    let reading = if protocol == Protocol::Control && head.method != Method::Deliver {
        Reading::Stored
    } else if head.cut {
        Reading::InTransitCut
    } else {
        Reading::InTransit
    };
    match ctx.check(protocol, raw.clone(), reading).await {
        Ok(Scored { verdict, engine }) => {
            tracing::info!(
                method = head.method.name(),
                user = &*user(&head),
                message_id = message_id(&raw).as_deref(),
                verdict = verdict.decision.name(),
                score = format_args!("{:.2}", verdict.score),
                bytes = raw.len(),
                ms = format_args!("{:.2}", started.elapsed().as_secs_f64() * 1e3),
                "spamd: scored"
            );
            answer(&head, &verdict, &raw, &engine.model)
        }
        Err(e) => {
            ctx.metrics.fail_open(protocol);
            if matches!(e, CheckError::Internal(_)) {
                ctx.metrics.error(protocol);
            }
            tracing::warn!(
                method = head.method.name(),
                user = &*user(&head),
                "spamd: passing the message on unscored: {e}"
            );
            Reply::error(Code::TempFail, format!("Service Unavailable: {e}"))
        }
    }
}

/// The reply to a scoring request, spamd's way.
pub fn answer(head: &Head, verdict: &Verdict, raw: &[u8], model: &ModelConfig) -> Reply {
    let is_spam = verdict.decision == Decision::Spam;
    let spam = SpamLine {
        is_spam,
        yes_no: head.method == Method::ReportIfSpam,
        score: verdict.score,
        threshold: model.spam_threshold,
    };
    let body = match head.method {
        Method::Check => None,
        Method::Symbols => {
            let mut s = verdict.rules.join(",");
            if head.version < 13 {
                s.push_str("\r\n");
            }
            Some(s.into_bytes())
        }
        Method::Report => Some(report(verdict, model).into_bytes()),
        Method::ReportIfSpam => Some(if is_spam {
            report(verdict, model).into_bytes()
        } else {
            Vec::new()
        }),
        Method::Process => Some(tagged(raw, verdict, model)),
        // The header block alone, rewritten: the body is neither copied nor sent.
        Method::Headers => Some(tagged(crate::message::raw_head(raw), verdict, model)),
        Method::Verdict | Method::Deliver => {
            Some(serde_json::to_vec(verdict).expect("a verdict serializes"))
        }
        Method::Ping
        | Method::Skip
        | Method::Tell
        | Method::Flush
        | Method::Stats
        | Method::Export
        | Method::Prune
        | Method::Ledger => {
            unreachable!("answer is only called for scoring methods")
        }
    };
    // Before SPAMC/1.3 a reply had one header: the message's length for PROCESS and
    // HEADERS, the Spam line for the others.
    let rewrites = matches!(head.method, Method::Process | Method::Headers);
    Reply::Result {
        version: head.version,
        spam: (head.version >= 13 || !rewrites).then_some(spam),
        headers: Vec::new(),
        body,
    }
}

/// The text of REPORT: the verdict and what moved it, laid out like SpamAssassin's
/// "Content analysis details" table so that people who read those can read this.
pub fn report(verdict: &Verdict, model: &ModelConfig) -> String {
    let mut out = format!(
        "spamnb judged this message {} (probability of spam {:.4}).\n",
        verdict.decision.name(),
        verdict.probability
    );
    if let Some(note) = &verdict.note {
        out.push_str(&format!("Note: {note}.\n"));
    }
    out.push_str(&format!(
        "\nContent analysis details:   ({:.1} points, {:.1} required)\n\n",
        verdict.score, model.spam_threshold
    ));
    if let Some(parts) = &verdict.parts {
        out.push_str(&format!("{}.\n\n", parts.describe()));
    }
    out.push_str(" pts rule name              description\n");
    out.push_str(
        "---- ---------------------- --------------------------------------------------\n",
    );
    for rule in &verdict.rules {
        out.push_str(&format!(
            " {:>4} {:<22} rule hit (weighed with the words below)\n",
            "", rule
        ));
    }
    for r in &verdict.reasons {
        let feature = escape_control(&r.feature);
        let towards = if r.weight > 0.0 { "spam" } else { "ham" };
        out.push_str(&format!(
            "{:>4.1} {feature:<22} learned evidence for {towards}, {}×\n",
            r.weight, r.count
        ));
    }
    out
}

async fn tell(request: Request, peer: Peer, ctx: &Context, config: &Config) -> Reply {
    let Request { head, body } = request;
    if peer != Peer::Local && !config.spamd.allow_tell {
        tracing::warn!(
            ?peer,
            "spamd: TELL refused: learning over TCP needs allow_tell"
        );
        return Reply::error(
            Code::Unavailable,
            "Service Unavailable: TELL commands are not enabled over TCP, set allow_tell in [spamd].",
        );
    }
    let target = match (head.set.local, head.remove.local, head.message_class) {
        (true, _, Some(class)) => Some(Some(class)),
        (true, _, None) => return protocol_error(&ProtocolError::BadClass),
        (false, true, _) => Some(None),
        // Set or Remove of `remote` only: spamnb reports to no remote service.
        (false, false, _) => None,
    };
    let Some(target) = target else {
        return told(&head, None);
    };
    let Some(_slot) = ctx.slot().await else {
        ctx.metrics.fail_open(Protocol::Spamd);
        return Reply::error(Code::TempFail, "Service Unavailable: overloaded, try again");
    };
    let engine = ctx.engine.current();
    let user_name = head.user.clone();
    let learner = ctx.learner.clone();
    let learned = tokio::task::spawn_blocking(move || {
        let lesson = engine.lesson(&body, target, user_name.as_deref());
        learner.learn(&engine, lesson, Durable::Synced)
    })
    .await;
    match learned {
        Ok(Ok(outcome)) => {
            if matches!(
                outcome,
                Outcome::Learned | Outcome::Relearned | Outcome::Forgotten
            ) {
                ctx.metrics.learned(1);
            }
            tracing::info!(
                user = &*user(&head),
                class = target.map_or("forget", Class::name),
                outcome = outcome.name(),
                "spamd: told"
            );
            told(&head, Some(outcome))
        }
        Ok(Err(e)) => {
            ctx.metrics.error(Protocol::Spamd);
            tracing::error!("spamd: TELL could not learn: {e}");
            Reply::error(Code::TempFail, format!("Service Unavailable: {e}"))
        }
        Err(e) => {
            ctx.metrics.error(Protocol::Spamd);
            Reply::error(
                Code::Software,
                format!("Service Unavailable: internal error: {e}"),
            )
        }
    }
}

/// TELL's reply: `DidSet`/`DidRemove` as spamd gives them (spamc prints "successfully
/// un/learned" when one is there), and the exact outcome for spamnb's own CLI.
fn told(head: &Head, outcome: Option<Outcome>) -> Reply {
    let mut headers = Vec::new();
    match outcome {
        Some(Outcome::Learned | Outcome::Relearned) => {
            headers.push(("DidSet", "local".to_string()))
        }
        Some(Outcome::Forgotten) => headers.push(("DidRemove", "local".to_string())),
        _ => {}
    }
    if let Some(o) = outcome {
        headers.push((OUTCOME_HEADER, o.name().to_string()));
    }
    Reply::Result {
        version: head.version,
        spam: None,
        headers,
        body: None,
    }
}

async fn flush(ctx: &Context) -> Reply {
    let engine = ctx.engine.current();
    match tokio::task::spawn_blocking(move || engine.store.flush()).await {
        Ok(Ok(())) => Reply::Result {
            version: 15,
            spam: None,
            headers: Vec::new(),
            body: None,
        },
        Ok(Err(e)) => Reply::error(Code::TempFail, format!("Service Unavailable: {e}")),
        Err(e) => Reply::error(
            Code::Software,
            format!("Service Unavailable: internal error: {e}"),
        ),
    }
}

/// What `spamnb prune` asks of the daemon: the body of its PRUNE request.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct PruneRequest {
    pub min_messages: u32,
    pub dry_run: bool,
}

/// A message of a LEDGER request: its digest under each kind, by the kind's name. The
/// client does not know which kind the daemon's ledger is keyed by, and asking (STATS)
/// would count the whole ledger.
pub type LedgerAsk = std::collections::HashMap<String, crate::message::Digest>;

/// STATS, EXPORT, PRUNE and LEDGER: what `spamnb stats`, `export`, `prune` and `check
/// --explain` do with the database, for a CLI that cannot open it while the daemon holds it.
async fn database(request: &Request, ctx: &Context) -> Reply {
    enum Job {
        Stats,
        Export,
        Prune(PruneRequest),
        Ledger(Vec<crate::message::Digest>),
    }
    // One engine for the request: the digest kind looked up is the kind of the store read.
    let engine = ctx.engine.current();
    let job = match request.head.method {
        Method::Stats => Job::Stats,
        Method::Prune => match serde_json::from_slice::<PruneRequest>(&request.body) {
            Ok(ask) => Job::Prune(ask),
            Err(e) => return Reply::error(Code::Protocol, format!("Bad PRUNE request: {e}")),
        },
        Method::Ledger => {
            let kind = engine.store.digest_kind().name();
            let digests = serde_json::from_slice::<Vec<LedgerAsk>>(&request.body)
                .map_err(|e| e.to_string())
                .and_then(|asks| {
                    asks.iter()
                        .map(|ask| ask.get(kind).copied())
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| format!("a message without its {kind} digest"))
                });
            match digests {
                Ok(digests) => Job::Ledger(digests),
                Err(e) => return Reply::error(Code::Protocol, format!("Bad LEDGER request: {e}")),
            }
        }
        _ => Job::Export,
    };
    let work = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, crate::store::Error> {
        let store = &*engine.store;
        match job {
            // Made durable by the FLUSH that `spamnb prune` sends next, as after learning.
            Job::Prune(ask) => {
                let pruned = store.prune(ask.min_messages, ask.dry_run)?;
                tracing::info!(
                    removed = pruned.removed,
                    kept = pruned.kept,
                    min_messages = ask.min_messages,
                    dry_run = ask.dry_run,
                    "pruned rare tokens"
                );
                Ok(serde_json::to_vec(&pruned).expect("counts serialize"))
            }
            Job::Stats => {
                let s = store.stats()?;
                let t = s.totals;
                let json = serde_json::json!({
                    "schema_version": s.schema_version,
                    "ledger_digest": s.ledger_digest.name(),
                    "ledger_entries": s.ledger_entries,
                    "size_on_disk": s.size_on_disk,
                    "messages": t.messages,
                    "occurrences": t.occurrences,
                    "presences": t.presences,
                    "vocabulary": t.vocabulary,
                });
                Ok(json.to_string().into_bytes())
            }
            Job::Export => {
                let mut out = Vec::new();
                crate::store::export(store, &mut out)?;
                Ok(out)
            }
            Job::Ledger(digests) => {
                let entries = digests
                    .iter()
                    .map(|d| store.ledger_entry(d))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(serde_json::to_vec(&entries).expect("ledger entries serialize"))
            }
        }
    });
    match work.await {
        Ok(Ok(body)) => Reply::Result {
            version: 15,
            spam: None,
            headers: Vec::new(),
            body: Some(body),
        },
        Ok(Err(e)) => Reply::error(Code::TempFail, format!("Service Unavailable: {e}")),
        Err(e) => Reply::error(
            Code::Software,
            format!("Service Unavailable: internal error: {e}"),
        ),
    }
}

pub fn protocol_error(e: &ProtocolError) -> Reply {
    Reply::error(e.code(), format!("Bad header line: ({e})"))
}

/// The `User:` a client sent, for the log: the codec refuses control characters in it,
/// and the JSON log writes the Unicode line separators as they are.
fn user(head: &Head) -> std::borrow::Cow<'_, str> {
    escape_control(head.user.as_deref().unwrap_or("-"))
}

/// The Message-ID, for the log: read from the raw header block (no full parse for a log
/// line), unfolded, with control characters escaped.
fn message_id(raw: &[u8]) -> Option<String> {
    let head = crate::message::raw_head(&raw[..raw.len().min(64 * 1024)]);
    let value = *crate::message::raw_header_values(head, "message-id").first()?;
    let value = String::from_utf8_lossy(value);
    let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(escape_control(&value).chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Reason;

    fn head(method: Method) -> Head {
        Head {
            method,
            version: 15,
            content_length: None,
            user: None,
            message_class: None,
            set: Default::default(),
            remove: Default::default(),
            compressed: false,
            cut: false,
        }
    }

    fn verdict(decision: Decision, score: f64) -> Verdict {
        Verdict {
            decision,
            score,
            probability: 0.99,
            reasons: vec![Reason {
                feature: "word:\x1b[31mfree".into(),
                count: 2,
                weight: 3.25,
            }],
            rules: vec!["SUBJ_ALL_CAPS".into(), "HTML_ONLY".into()],
            note: None,
            parts: None,
            decided_by: Vec::new(),
        }
    }

    #[test]
    fn a_user_with_line_separators_is_logged_escaped() {
        for sent in ["a\u{2028}b", "a\u{2029}b", "a\u{85}b"] {
            let mut h = head(Method::Check);
            h.user = Some(sent.into());
            let shown = user(&h);
            assert!(
                !shown
                    .chars()
                    .any(|c| matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}')),
                "{sent:?} logged as {shown:?}"
            );
        }
    }

    #[test]
    fn answers_each_method() {
        // A threshold of the test's own: the default is recalibrated from time to time.
        let model = ModelConfig {
            spam_threshold: 5.0,
            ..ModelConfig::default()
        };
        let raw = b"Subject: hi\r\nX-Spam-Flag: YES\r\n\r\nbody\r\n";
        let spam = verdict(Decision::Spam, 12.0);
        let enc = |m: Method, v: &Verdict| {
            String::from_utf8(answer(&head(m), v, raw, &model).encode()).unwrap()
        };

        assert_eq!(
            enc(Method::Check, &spam),
            "SPAMD/1.1 0 EX_OK\r\nSpam: True ; 12.0 / 5.0\r\n\r\n"
        );
        assert_eq!(
            enc(Method::Symbols, &spam),
            "SPAMD/1.1 0 EX_OK\r\nContent-length: 23\r\nSpam: True ; 12.0 / 5.0\r\n\r\nSUBJ_ALL_CAPS,HTML_ONLY"
        );
        let report = enc(Method::Report, &spam);
        assert!(
            report.contains("Content analysis details:   (12.0 points, 5.0 required)"),
            "{report}"
        );
        assert!(
            report.contains("word:\\u{1b}[31mfree"),
            "control characters from mail are escaped: {report}"
        );
        let ham = verdict(Decision::Ham, -8.0);
        assert_eq!(
            enc(Method::ReportIfSpam, &ham),
            "SPAMD/1.1 0 EX_OK\r\nContent-length: 0\r\nSpam: No ; -8.0 / 5.0\r\n\r\n"
        );
        assert!(
            enc(Method::ReportIfSpam, &spam)
                .contains("Spam: Yes ; 12.0 / 5.0\r\n\r\nspamnb judged")
        );

        let process = enc(Method::Process, &ham);
        let (reply_head, body) = process.split_once("\r\n\r\n").unwrap();
        assert!(
            reply_head.contains(&format!("Content-length: {}", body.len())),
            "{process}"
        );
        assert!(
            body.starts_with("Subject: hi\r\nX-Spam-Flag: NO\r\n"),
            "forged flag replaced: {body}"
        );
        assert!(body.ends_with("\r\n\r\nbody\r\n"));
        let headers = enc(Method::Headers, &ham);
        let (_, body) = headers.split_once("\r\n\r\n").unwrap();
        assert!(
            body.starts_with("Subject: hi\r\nX-Spam-Flag: NO\r\n") && body.ends_with("\r\n\r\n"),
            "{body:?}"
        );
        assert!(!body.contains("body"));

        let json = enc(Method::Verdict, &spam);
        assert!(json.contains("\"decision\":\"spam\""), "{json}");
    }

    /// SIGHUP may swap the configuration between a session's start and its scoring: the
    /// reply gives the threshold of the engine that judged, not the one the session began
    /// under.
    #[tokio::test]
    async fn the_reply_states_the_threshold_that_judged() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::SledStore::open(dir.path(), &Default::default()).unwrap();
        let engine = crate::engine::Engine {
            extractor: Default::default(),
            model: ModelConfig {
                spam_threshold: 7.5,
                ..ModelConfig::default()
            },
            store: Arc::new(store),
        };
        let mut config = Config::default();
        config.model.spam_threshold = 5.0;
        let ctx = Context::new(engine, config);
        let request = Request {
            head: head(Method::Check),
            body: b"Subject: hi\r\n\r\nbody\r\n".to_vec(),
        };
        let reply =
            String::from_utf8(check(request, &ctx, Protocol::Spamd).await.encode()).unwrap();
        assert!(reply.contains(" / 7.5\r\n"), "{reply}");
    }

    #[test]
    fn old_clients_get_old_replies() {
        // A threshold of the test's own: the default is recalibrated from time to time.
        let model = ModelConfig {
            spam_threshold: 5.0,
            ..ModelConfig::default()
        };
        let mut h = head(Method::Symbols);
        h.version = 12;
        let out =
            String::from_utf8(answer(&h, &verdict(Decision::Spam, 6.0), b"", &model).encode())
                .unwrap();
        assert_eq!(
            out,
            "SPAMD/1.1 0 EX_OK\r\nSpam: True ; 6.0 / 5.0\r\n\r\nSUBJ_ALL_CAPS,HTML_ONLY\r\n"
        );
        h.method = Method::Process;
        let raw = b"S: x\n\nb\n";
        let out = answer(&h, &verdict(Decision::Spam, 6.0), raw, &model).encode();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("SPAMD/1.1 0 EX_OK\r\nContent-length: "),
            "{out}"
        );
        assert!(!out.contains("Spam: "), "{out}");
    }

    #[test]
    fn told_says_what_spamc_expects() {
        let h = head(Method::Tell);
        let enc = |o| String::from_utf8(told(&h, o).encode()).unwrap();
        assert_eq!(
            enc(Some(Outcome::Learned)),
            "SPAMD/1.1 0 EX_OK\r\nDidSet: local\r\nX-Spamnb-Outcome: learned\r\n\r\n"
        );
        assert_eq!(
            enc(Some(Outcome::Forgotten)),
            "SPAMD/1.1 0 EX_OK\r\nDidRemove: local\r\nX-Spamnb-Outcome: forgotten\r\n\r\n"
        );
        assert_eq!(
            enc(Some(Outcome::AlreadyKnown)),
            "SPAMD/1.1 0 EX_OK\r\nX-Spamnb-Outcome: known\r\n\r\n"
        );
    }

    #[test]
    fn message_ids_for_logs() {
        assert_eq!(
            message_id(b"Message-ID: <a@b>\r\n\r\n").as_deref(),
            Some("<a@b>")
        );
        assert_eq!(
            message_id(b"message-id:\n <x\x07@y>\n\n").as_deref(),
            Some("<x\\u{7}@y>")
        );
        assert_eq!(message_id(b"Subject: x\n\nMessage-ID: <body@x>\n"), None);
    }
}
