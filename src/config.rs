//! The configuration file (TOML), validated into an immutable [`Config`].
//!
//! Every key is optional; `contrib/spamnb.toml` documents them all. Command-line flags
//! override the file.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::daemon::config::{ControlConfig, DaemonConfig, HttpConfig, SpamdConfig};
use crate::daemon::milter_config::MilterConfig;
use crate::features::Extractor;
use crate::model::ModelConfig;
use crate::store::StoreOptions;
use crate::tokenize::TokenizerOptions;
use crate::watch::{RawWatch, WatchSettings};

/// Where the configuration is looked for when `--config` and `SPAMNB_CONFIG` are not given:
/// the user's own, then the system's.
pub fn default_paths() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(dir) = dirs::config_dir() {
        paths.push(dir.join("spamnb").join("spamnb.toml"));
    }
    paths.push(PathBuf::from("/etc/spamnb/spamnb.toml"));
    paths
}

/// Where the database lives when nothing says otherwise.
pub fn default_db() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("spamnb")
        .join("db")
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
    pub db: PathBuf,
    pub store: StoreOptions,
    pub extractor: Extractor,
    pub model: ModelConfig,
    /// `[daemon]`, `[spamd]`, `[control]`, `[http]`, `[milter]`: see `crate::daemon::config`.
    pub daemon: DaemonConfig,
    pub spamd: SpamdConfig,
    pub control: ControlConfig,
    pub http: HttpConfig,
    pub milter: MilterConfig,
    /// The folder watcher's settings, when the file has a `[watch]` section.
    pub watch: Option<WatchSettings>,
    /// Rule files and directories (`rules` key); `None`: [`default_rules`].
    pub rules: Option<Vec<PathBuf>>,
}

/// Where rules are looked for when neither `--rules`/`SPAMNB_RULES` nor the `rules` key
/// says: the first of /etc/spamnb/rules, /usr/share/spamnb/rules, and `rules/` in the
/// current directory (a checkout of spamnb) that holds `.cf` files. None there: spamnb's
/// own rules, built in (see `cli::rule_source`).
pub fn default_rules() -> Vec<PathBuf> {
    let has_cf = |d: &Path| {
        std::fs::read_dir(d).is_ok_and(|mut rd| {
            rd.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "cf")))
        })
    };
    ["/etc/spamnb/rules", "/usr/share/spamnb/rules", "rules"]
        .into_iter()
        .map(PathBuf::from)
        .find(|d| has_cf(d))
        .into_iter()
        .collect()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            source: None,
            db: default_db(),
            store: StoreOptions::default(),
            extractor: Extractor {
                tokenizer: TokenizerOptions::default(),
                scan_limit: DEFAULT_SCAN_LIMIT,
                rules: None,
            },
            model: ModelConfig::default(),
            daemon: DaemonConfig::default(),
            spamd: SpamdConfig::default(),
            control: ControlConfig::default(),
            http: HttpConfig::default(),
            milter: MilterConfig::default(),
            watch: None,
            rules: None,
        }
    }
}

/// SpamAssassin's spamc sends at most 500 KB by default; mail beyond a megabyte is almost
/// always attachments, which add nothing a classifier can read.
pub const DEFAULT_SCAN_LIMIT: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    /// Directory of the sled database.
    db: Option<PathBuf>,
    /// Megabytes of sled's page cache.
    cache_mb: Option<u64>,
    /// Bytes of each message that are parsed.
    scan_limit: Option<usize>,
    #[serde(default)]
    model: ModelConfig,
    #[serde(default)]
    tokenizer: TokenizerOptions,
    #[serde(default)]
    daemon: DaemonConfig,
    #[serde(default)]
    spamd: SpamdConfig,
    #[serde(default)]
    control: ControlConfig,
    #[serde(default)]
    http: HttpConfig,
    #[serde(default)]
    milter: MilterConfig,
    watch: Option<RawWatch>,
    /// Rule files and directories; an empty list means no rules.
    rules: Option<Vec<PathBuf>>,
}

impl Config {
    /// Reads `path`, or with `None` the first default path that exists, or built-in defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => match default_paths().into_iter().find(|p| p.is_file()) {
                Some(p) => p,
                None => return Ok(Config::default()),
            },
        };
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
            path: path.clone(),
            line: None,
            message: format!("cannot read it: {e}"),
        })?;
        Config::parse(&text, &path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError {
            path: path.into(),
            line: e.span().map(|s| text[..s.start].matches('\n').count() + 1),
            message: e.message().to_string(),
        })?;
        let invalid = |message: String| ConfigError {
            path: path.into(),
            line: None,
            message,
        };
        let defaults = Config::default();
        // TOML has nan and inf: a NaN passes every comparison below (each is false), and
        // then no score is ever spam.
        let m = &raw.model;
        for (key, value) in [
            ("alpha", m.alpha),
            ("spam_threshold", m.spam_threshold),
            ("ham_threshold", m.ham_threshold),
            ("min_token_weight", m.min_token_weight),
            ("all_features_share", m.all_features_share),
            ("autolearn_spam", m.autolearn_spam),
            ("autolearn_ham", m.autolearn_ham),
        ] {
            if !value.is_finite() {
                return Err(invalid(format!(
                    "model.{key} must be a finite number, not {value}"
                )));
            }
        }
        if raw.model.alpha <= 0.0 {
            return Err(invalid(format!(
                "model.alpha must be above 0, not {}",
                raw.model.alpha
            )));
        }
        if !(0.0..=1.0).contains(&raw.model.all_features_share) {
            return Err(invalid(format!(
                "model.all_features_share must be between 0 and 1, not {}",
                raw.model.all_features_share
            )));
        }
        if raw.model.ham_threshold > raw.model.spam_threshold {
            return Err(invalid(format!(
                "model.ham_threshold ({}) must not be above model.spam_threshold ({})",
                raw.model.ham_threshold, raw.model.spam_threshold
            )));
        }
        if raw.model.autolearn
            && (raw.model.autolearn_spam < raw.model.spam_threshold
                || raw.model.autolearn_ham > raw.model.ham_threshold)
        {
            return Err(invalid(format!(
                "model.autolearn_spam ({}) must not be below model.spam_threshold ({}), nor \
                 model.autolearn_ham ({}) above model.ham_threshold ({}): only firm verdicts \
                 may teach",
                raw.model.autolearn_spam,
                raw.model.spam_threshold,
                raw.model.autolearn_ham,
                raw.model.ham_threshold
            )));
        }
        if !raw
            .model
            .subject_tag
            .bytes()
            .all(|b| b.is_ascii_graphic() || b == b' ')
        {
            return Err(invalid(format!(
                "model.subject_tag {:?} must be printable ASCII on one line: it is written \
                 into the Subject header as it is",
                raw.model.subject_tag
            )));
        }
        if raw.model.event_model == crate::model::EventModel::Bernoulli {
            return Err(invalid(
                "model.event_model = \"bernoulli\" is for `spamnb eval --models bernoulli` only (its score \
                 needs a pass over the whole vocabulary after every lesson); use \"multinomial\" or \
                 \"binary-multinomial\""
                    .into(),
            ));
        }
        let scan_limit = raw.scan_limit.unwrap_or(DEFAULT_SCAN_LIMIT);
        if scan_limit < 1024 {
            return Err(invalid(format!(
                "scan_limit must be at least 1024 bytes, not {scan_limit}"
            )));
        }
        // sled panics on a cache of no bytes, which `cache_mb << 20` wraps to from 2^44 up.
        let cache_bytes = match raw.cache_mb {
            None => defaults.store.cache_bytes,
            Some(mb) => mb.checked_mul(1 << 20).filter(|_| mb >= 1).ok_or_else(|| {
                invalid(format!(
                    "cache_mb must be between 1 and {} (megabytes), not {mb}",
                    u64::MAX >> 20
                ))
            })?,
        };
        // A shell expands `~`, TOML does not: `db = "~/spamdb"` made a directory named `~`
        // in whichever directory spamnb ran from, a different one for the daemon and a hook.
        let paths = (raw.db.iter().map(|p| ("db", p)))
            .chain(raw.rules.iter().flatten().map(|p| ("rules", p)))
            .chain(
                raw.daemon
                    .runtime_dir
                    .iter()
                    .map(|p| ("daemon.runtime_dir", p)),
            );
        for (key, p) in paths {
            if p.to_string_lossy().starts_with('~') {
                return Err(invalid(format!(
                    "{key} {:?}: `~` is not expanded in the configuration; write the home \
                     directory out (/home/ann/…)",
                    p.display().to_string()
                )));
            }
        }
        crate::daemon::config::validate(&raw.daemon, &raw.spamd, &raw.http).map_err(invalid)?;
        raw.milter.validate().map_err(invalid)?;
        let watch = raw
            .watch
            .map(RawWatch::validate)
            .transpose()
            .map_err(invalid)?;
        Ok(Config {
            source: Some(path.into()),
            db: raw.db.unwrap_or(defaults.db),
            store: StoreOptions {
                cache_bytes,
                ..defaults.store
            },
            extractor: Extractor {
                tokenizer: raw.tokenizer,
                scan_limit,
                rules: None,
            },
            model: raw.model,
            daemon: raw.daemon,
            spamd: raw.spamd,
            control: raw.control,
            http: raw.http,
            milter: raw.milter,
            watch,
            // Relative rule paths are relative to the configuration file.
            rules: raw.rules.map(|paths| {
                let base = path.parent().unwrap_or(Path::new(""));
                paths.into_iter().map(|p| base.join(p)).collect()
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `listen` of `[spamd]` and `[milter]` is a list, or one address as a plain string,
    /// as `[control]`'s and `[http]`'s are; a bad address in either form is named.
    #[test]
    fn a_listen_list_may_be_one_address() {
        let p = Path::new("spamnb.toml");
        let one = "[spamd]\nlisten = \"inet:127.0.0.1:11783\"\n\
                   [milter]\nlisten = \"unix:/tmp/m.sock\"\n";
        let many = "[spamd]\nlisten = [\"inet:127.0.0.1:11783\"]\n\
                    [milter]\nlisten = [\"unix:/tmp/m.sock\"]\n";
        for text in [one, many] {
            let c = Config::parse(text, p).unwrap();
            let spamd = c.spamd.listen.expect("set");
            assert_eq!(spamd, ["inet:127.0.0.1:11783".parse().unwrap()], "{text}");
            assert_eq!(
                c.milter.listen,
                ["unix:/tmp/m.sock".parse().unwrap()],
                "{text}"
            );
        }
        assert_eq!(
            Config::parse("[milter]\nlisten = []\n", p)
                .unwrap()
                .milter
                .listen,
            []
        );
        for bad in [
            "[spamd]\nlisten = \"nowhere\"\n",
            "[milter]\nlisten = [\"nowhere\"]\n",
        ] {
            let e = Config::parse(bad, p).unwrap_err().to_string();
            assert!(e.contains("nowhere") && e.contains("inet:HOST:PORT"), "{e}");
        }
    }

    #[test]
    fn parses_and_validates() {
        let p = Path::new("spamnb.toml");
        let c = Config::parse("db = \"/tmp/x\"\ncache_mb = 8\n[model]\nalpha = 0.5\n[tokenizer]\npair_tokens = true\n", p).unwrap();
        assert_eq!(c.db, PathBuf::from("/tmp/x"));
        assert_eq!(c.store.cache_bytes, 8 << 20);
        assert_eq!(c.model.alpha, 0.5);
        assert!(c.extractor.tokenizer.pair_tokens);

        for (text, line, wanted) in [
            ("db = \"x\"\nbogus = 1\n", Some(2), "unknown field"),
            ("[model]\nalpha = 0\n", None, "alpha must be above 0"),
            (
                "[model]\nall_features_share = 1.5\n",
                None,
                "all_features_share must be between 0 and 1",
            ),
            (
                "[model]\nspam_threshold = -10.0\n",
                None,
                "must not be above",
            ),
            (
                "[model]\nautolearn = true\nautolearn_spam = 3.0\n",
                None,
                "only firm verdicts may teach",
            ),
            (
                "[model]\nautolearn = true\nham_threshold = -8.0\n",
                None,
                "only firm verdicts may teach",
            ),
            (
                "[model]\nsubject_tag = \"[SPAM]\\r\\nBcc: x\"\n",
                None,
                "printable ASCII on one line",
            ),
            ("[model\n", Some(1), ""),
            (
                "[watch]\nusers = { ann = \"Maildir\" }\n",
                None,
                "absolute path",
            ),
            ("[watch]\nspam_folder = []\n", Some(2), "unknown field"),
            ("db = \"~/spamdb\"\n", None, "`~` is not expanded"),
            (
                "rules = [\"/etc/spamnb/rules\", \"~ann/local.cf\"]\n",
                None,
                "\"~ann/local.cf\"",
            ),
            (
                "[daemon]\nruntime_dir = \"~/run\"\n",
                None,
                "daemon.runtime_dir",
            ),
        ] {
            let e = Config::parse(text, p).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(wanted), "{text:?}: {e}");
            assert!(e.to_string().starts_with("spamnb.toml"), "{e}");
        }
        // Thresholds beyond the autolearning ones are fine while it is off.
        assert!(Config::parse("[model]\nspam_threshold = 10.0\n", p).is_ok());
        assert!(Config::parse("[model]\nsubject_tag = \"[SPAM _SCORE_]\"\n", p).is_ok());
    }

    /// `cache_mb = 0`, or any value from 2^44 up (which `mb << 20` wrapped to 0), passed
    /// validation; sled then panicked on open and every command called a whole database
    /// damaged.
    #[test]
    fn a_cache_of_no_bytes_is_refused() {
        let p = Path::new("spamnb.toml");
        for text in ["cache_mb = 0\n", "cache_mb = 17592186044416\n"] {
            match Config::parse(text, p) {
                Err(e) => assert!(e.to_string().contains("cache_mb must be"), "{text:?}: {e}"),
                Ok(c) => panic!("{text:?} accepted: {} bytes", c.store.cache_bytes),
            }
        }
        let c = Config::parse("cache_mb = 17592186044415\n", p).unwrap();
        assert_eq!(c.store.cache_bytes, u64::MAX >> 20 << 20);
    }

    /// A threshold that is no number (TOML's `nan`) passed the ordering check, every
    /// comparison with NaN being false, and then no score was ever spam.
    #[test]
    fn every_number_of_the_model_must_be_finite() {
        let p = Path::new("spamnb.toml");
        for key in [
            "alpha",
            "spam_threshold",
            "ham_threshold",
            "min_token_weight",
            "all_features_share",
            "autolearn_spam",
            "autolearn_ham",
        ] {
            for value in ["nan", "inf", "-inf"] {
                let text = format!("[model]\n{key} = {value}\n");
                match Config::parse(&text, p) {
                    Err(e) => assert!(
                        e.to_string()
                            .contains(&format!("model.{key} must be a finite number")),
                        "{text:?}: {e}"
                    ),
                    Ok(_) => panic!("{text:?} accepted"),
                }
            }
        }
    }
}
