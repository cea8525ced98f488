//! The milter front end: Postfix and Sendmail hand each message to spamnb while the SMTP
//! session is still open, and get back headers to add, a quarantine, or a reject.
//!
//! Three layers, as the house style has for every protocol: [`codec`] (frames, no I/O),
//! [`session`] (the state machine of one MTA connection, pure), [`server`] (sockets,
//! tasks, timeouts, scoring on the blocking pool). The `[milter]` section of the daemon's
//! configuration is [`MilterSettings`].

pub mod client;
pub mod codec;
pub mod server;
pub mod session;

use serde::Deserialize;

use crate::daemon::listen::Address;

/// What happens to mail whose verdict is spam.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SpamAction {
    /// Deliver it with `X-Spam-Flag: YES`; the user's filters move it.
    #[default]
    Tag,
    /// Tag it and hold it (Postfix's hold queue, Sendmail's quarantine) for an admin.
    Quarantine,
    /// Refuse it in the SMTP session with `550 5.7.1`: the sender gets the bounce.
    Reject,
}

/// The `[milter]` section of the daemon configuration. Every key is optional.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MilterSettings {
    /// Where to listen: `inet:HOST:PORT` or `unix:PATH`, one or a list. Empty: no milter.
    #[serde(deserialize_with = "crate::daemon::listen::one_or_many")]
    pub listen: Vec<Address>,
    /// What to do with spam: `tag`, `quarantine` or `reject`.
    pub action: SpamAction,
    /// Mail scoring at or above this is rejected whatever `action` says. None: never.
    pub reject_score: Option<f64>,
    /// The text after `550 5.7.1` when mail is rejected.
    pub reject_text: String,
    /// Body bytes scanned per message; the rest is passed on unread.
    pub max_body_bytes: usize,
    /// Seconds to wait for the MTA's next packet before closing the connection. Postfix
    /// keeps a milter connection open for a whole SMTP session, which waits for the
    /// client up to `smtpd_timeout` (300 s), so this must be longer.
    pub read_timeout_secs: u64,
    /// Milliseconds scoring may take before the message is passed on untouched.
    pub scan_timeout_ms: u64,
    /// Connections served at once; more wait to be accepted.
    pub max_sessions: usize,
}

impl Default for MilterSettings {
    fn default() -> Self {
        MilterSettings {
            listen: Vec::new(),
            action: SpamAction::Tag,
            reject_score: None,
            reject_text: "Message rejected as spam".into(),
            max_body_bytes: 512 * 1024,
            read_timeout_secs: 400,
            scan_timeout_ms: 5000,
            max_sessions: 256,
        }
    }
}

impl MilterSettings {
    /// Checks what serde cannot: a reply that Postfix and Sendmail accept, limits above 0.
    pub fn validate(&self) -> Result<(), String> {
        if self.reject_text.trim().is_empty() {
            return Err("milter.reject_text must not be empty".into());
        }
        if let Some(c) = self
            .reject_text
            .chars()
            .find(|c| c.is_control() || !c.is_ascii())
        {
            return Err(format!(
                "milter.reject_text must be printable ASCII on one line (SMTP replies are), but holds {c:?}"
            ));
        }
        for (name, value) in [
            ("read_timeout_secs", self.read_timeout_secs),
            ("scan_timeout_ms", self.scan_timeout_ms),
            ("max_sessions", self.max_sessions as u64),
        ] {
            if value == 0 {
                return Err(format!("milter.{name} must be above 0"));
            }
        }
        if self.reject_score.is_some_and(|s| !s.is_finite()) {
            return Err("milter.reject_score must be a number".into());
        }
        Ok(())
    }

    /// The whole SMTP reply for a rejected message. Sendmail's milter code expands `%`,
    /// so a literal one is doubled.
    pub fn reject_reply(&self) -> String {
        format!("550 5.7.1 {}", self.reject_text.replace('%', "%%"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_validate() {
        let s: MilterSettings = toml::from_str(
            "listen = [\"inet:127.0.0.1:11332\", \"unix:/run/spamnb/milter.sock\"]\naction = \"reject\"\nreject_text = \"Go away\"\nmax_body_bytes = 1000\n",
        )
        .expect("valid settings");
        assert_eq!(s.listen.len(), 2);
        assert_eq!(s.action, SpamAction::Reject);
        assert_eq!(s.reject_reply(), "550 5.7.1 Go away");
        assert_eq!(s.max_body_bytes, 1000);
        assert_eq!(s.validate(), Ok(()));
        assert!(toml::from_str::<MilterSettings>("bogus = 1\n").is_err());
        assert!(toml::from_str::<MilterSettings>("action = \"drop\"\n").is_err());
        for bad in [
            "reject_text = \"two\\nlines\"",
            "max_sessions = 0",
            "reject_text = \" \"",
        ] {
            let s: MilterSettings = toml::from_str(bad).expect(bad);
            assert!(s.validate().is_err(), "{bad}");
        }
    }
}
