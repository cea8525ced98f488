//! Any bytes as what an MTA sends a milter: decoded frame by frame and played through a
//! session, answering each message with a verdict, as the server does. Nothing may panic.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use spamnb::milter::MilterSettings;
use spamnb::milter::codec;
use spamnb::milter::session::{Session, Step};
use spamnb::model::{Decision, ModelConfig, Verdict};

fuzz_target!(|data: &[u8]| {
    let settings = Arc::new(MilterSettings::default());
    let mut session = Session::new(settings);
    let model = ModelConfig {
        subject_tag: "[SPAM _SCORE_]".into(),
        ..ModelConfig::default()
    };
    let mut buf = data;
    let mut out = Vec::new();
    let mut turn = 0u8;
    while let Ok(Some((command, used))) = codec::decode(buf, 1 << 20) {
        buf = &buf[used..];
        match session.handle(command) {
            Ok(Step::Reply(responses)) => {
                for r in &responses {
                    codec::encode(r, &mut out);
                }
            }
            Ok(Step::Scan(raw)) => {
                turn = turn.wrapping_add(1);
                let decision = [Decision::Spam, Decision::Ham, Decision::Unsure][turn as usize % 3];
                let verdict = Verdict {
                    decision,
                    score: raw.len() as f64 - 100.0,
                    probability: 0.5,
                    reasons: Vec::new(),
                    rules: vec!["RULE".into()],
                    note: None,
                    parts: None,
                    decided_by: Vec::new(),
                };
                let given = (turn % 4 != 0).then_some((&verdict, &model));
                let (responses, _) = session.finish(given);
                for r in &responses {
                    codec::encode(r, &mut out);
                }
            }
            Ok(Step::Close) | Err(_) => break,
        }
        out.clear();
    }
    session.who();
});
