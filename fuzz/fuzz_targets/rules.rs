//! Any text as a rule file: loading never panics, whatever it holds (broken regexes,
//! meta expressions, eval arguments, `if` blocks), and the rules that load evaluate on a
//! message without panicking.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use spamnb::message::Message;

const MESSAGE: &[u8] = b"Received: from mx.example.com (mx.example.com [192.0.2.1])\n\
    \tby mail.example.org; Mon, 1 Jan 2024 00:00:00 +0000\n\
    From: \"Someone\" <12345someone@example.com>\nTo: you@example.org\n\
    Subject: URGENT REPLY\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n\
    MIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=b\n\n\
    --b\nContent-Type: text/plain\n\nOne hundred percent guaranteed http://example.net/x\n\
    --b\nContent-Type: text/html\n\n<html><head></head><body><a href=\"http://192.0.2.2/\">\
    example.com</a><img src=\"x.gif\" width=500 height=500></body></html>\n--b--\n";

fuzz_target!(|text: &[u8]| {
    let text = String::from_utf8_lossy(text);
    let (rules, _report) = spamnb::rules::RuleSet::from_text(&text, Path::new("fuzz.cf"));
    rules.evaluate(&Message::parse(MESSAGE, 1 << 20));
});
