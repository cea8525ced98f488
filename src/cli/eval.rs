//! `spamnb eval`: how well spamnb does on labelled mail, by cross-validation, a fixed
//! split or TREC's online order; sweeps over models, vocabulary sizes, α and tokenizer
//! options, with an SVG plot; threshold advice for a target ham loss.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;

use crate::config::Config;
use crate::eval::metrics::Figures;
use crate::eval::plot::{self, Series};
use crate::eval::select::Selector;
use crate::eval::{self, Corpus, Mail, Order, Report, Setting, Target, Training};
use crate::features::Extractor;
use crate::model::{Class, EventModel};
use crate::tokenize::TokenizerOptions;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlotMetric {
    /// Accuracy (%) at the thresholds in force
    Accuracy,
    /// Spam caught (%) at 0.1% ham loss
    Caught,
    /// 1 − AUC (%)
    Auc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChooseBy {
    /// Spam caught at the --target-fp ham loss (0.1% if not given)
    Caught,
    /// 1 − AUC
    Auc,
    /// Accuracy at the configured thresholds
    Accuracy,
    /// TREC's lam%
    Lam,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Spam: files, Maildirs, folders, mboxes (the training set when --test-spam is given)
    #[arg(long, required = true, num_args = 1..)]
    spam: Vec<PathBuf>,
    /// Ham (good mail), as for --spam
    #[arg(long, required = true, num_args = 1..)]
    ham: Vec<PathBuf>,
    /// Spam to test on: a fixed train/test split instead of cross-validation
    #[arg(long, num_args = 1.., requires = "test_ham")]
    test_spam: Vec<PathBuf>,
    /// Ham to test on, with --test-spam
    #[arg(long, num_args = 1.., requires = "test_spam")]
    test_ham: Vec<PathBuf>,
    /// In a fixed split, score the test mail in date order and learn each firm verdict
    /// as it comes, as the daemon does with `[model] autolearn` (its thresholds from the
    /// config)
    #[arg(long, requires = "test_spam")]
    autolearn: bool,
    /// Folds of the stratified cross-validation (and of threshold validation in a split)
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..=100))]
    folds: u64,
    /// Seed of the fold assignment: the same seed gives the same folds and figures
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// TREC online mode: classify each message in turn, then learn it
    #[arg(long, conflicts_with = "test_spam")]
    online: bool,
    /// In online mode, learn every message or only the misclassified ones
    #[arg(long, value_enum, default_value = "everything")]
    train_on: Training,
    /// In online mode, the order of the messages: date (the Date header), input (as
    /// given), or shuffle (seeded by --seed)
    #[arg(long, default_value = "date", value_parser = ["date", "input", "shuffle"])]
    order: String,
    /// Event models, comma-separated: multinomial, binary-multinomial, bernoulli [default: from the config]
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// Log-odds at or above which a message is spam [default: from the config]; 0 with
    /// --ham-threshold 0 gives the plain most-probable-class decision
    #[arg(long, allow_negative_numbers = true)]
    spam_threshold: Option<f64>,
    /// Log-odds at or below which a message is ham [default: from the config]
    #[arg(long, allow_negative_numbers = true)]
    ham_threshold: Option<f64>,
    /// Write every message's held-out score as TSV (setting, input, class, log-odds)
    #[arg(long)]
    scores: Option<PathBuf>,
    /// Features whose |log-likelihood ratio| is below this are not evidence [default: from the config]
    #[arg(long)]
    min_token_weight: Option<f64>,
    /// Divide the log-odds by √(features used) [default: from the config]
    #[arg(long)]
    normalize_length: Option<bool>,
    /// Features learned from fewer messages are not evidence [default: from the config]
    #[arg(long)]
    min_feature_messages: Option<u32>,
    /// How many of a message's strongest features the score leans on; 0 for all alike
    /// [default: from the config]
    #[arg(long)]
    strongest_features: Option<usize>,
    /// The part of the score that comes from every feature, 0 to 1 [default: from the config]
    #[arg(long)]
    all_features_share: Option<f64>,
    /// The textbook model of McCallum & Nigam: α = 1 (unless given), no minimum token
    /// weight, no length normalization, every learned feature used alike (overrides the
    /// five options above)
    #[arg(long)]
    textbook: bool,
    /// Smoothing α [default: from the config]
    #[arg(long)]
    alpha: Option<f64>,
    /// Keep only the N best features by --select (a number, or "all")
    #[arg(long)]
    vocab: Option<String>,
    /// How --vocab chooses features
    #[arg(long, value_enum, default_value = "mi")]
    select: Selector,
    /// Sweep a dimension: vocab=100,1000,all  alpha=0.1,1  tokenizer=default,no-headers,no-urls,pairs
    #[arg(long)]
    sweep: Vec<String>,
    /// Hold this fraction of the mail out (stratified): settings are chosen by
    /// cross-validation on the rest and the chosen one is reported on the held-out part
    #[arg(long, conflicts_with = "test_spam")]
    holdout: Option<f64>,
    /// What a sweep with --holdout chooses by
    #[arg(long, value_enum, default_value = "caught")]
    choose_by: ChooseBy,
    /// Advise the spam threshold that keeps ham loss at this rate (e.g. 0.1% or 0.001)
    #[arg(long)]
    target_fp: Option<String>,
    /// With --target-fp, advise the ham threshold that lets at most this rate of spam be
    /// called ham (what lies between the thresholds is unsure)
    #[arg(long, default_value = "1%")]
    target_fn: String,
    /// Write an SVG chart of a sweep: --plot-metric against vocabulary size (or α)
    #[arg(long)]
    plot: Option<PathBuf>,
    /// What the chart shows
    #[arg(long, value_enum, default_value = "accuracy")]
    plot_metric: PlotMetric,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// One combination of a sweep.
#[derive(Debug, Clone, Serialize)]
struct Variant {
    tokenizer: String,
    setting: Setting,
}

#[derive(Serialize)]
struct SweepRow {
    tokenizer: String,
    #[serde(flatten)]
    report: Report,
}

#[derive(Serialize)]
struct SweepOutput {
    rows: Vec<SweepRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chosen: Option<SweepRow>,
    messages: usize,
    /// Distinct features in all the mail (the first tokenizer setting's).
    vocabulary: usize,
    /// Of `seconds`, the time spent reading, parsing and tokenizing.
    parse_seconds: f64,
    seconds: f64,
}

pub fn run(config: &Config, args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let spam_leak = parse_rate(&args.target_fn).context("--target-fn")?;
    let target = args
        .target_fp
        .as_deref()
        .map(parse_rate)
        .transpose()
        .context("--target-fp")?
        .map(|ham_loss| Target {
            ham_loss,
            spam_leak,
        });
    if let Some(h) = args.holdout
        && !(h > 0.0 && h < 1.0)
    {
        bail!(
            "--holdout {h}: give the fraction of mail to hold out, above 0 and below 1 (e.g. 0.2)"
        );
    }
    // Before the mail is read: the configuration's value is checked where it is loaded.
    if let Some(share) = args.all_features_share
        && !(0.0..=1.0).contains(&share)
    {
        bail!("--all-features-share must be between 0 and 1, not {share}");
    }
    let models = parse_models(&args.models, config)?;
    let alphas = match args.alpha {
        Some(a) if a > 0.0 && a.is_finite() => vec![a],
        Some(a) => bail!("--alpha {a}: α must be above 0"),
        // The paper's Laplace smoothing, unless α is given.
        None if args.textbook => vec![1.0],
        None => vec![config.model.alpha],
    };
    let vocabs = match &args.vocab {
        Some(v) => vec![parse_vocab(v)?],
        None => vec![None],
    };
    let mut dims = Dims {
        tokenizers: vec!["config".to_string()],
        models,
        alphas,
        vocabs,
    };
    for s in &args.sweep {
        dims.apply(s)?;
    }
    // As online mode does: these settings would be scored without the autolearning asked
    // for, and the figures would say nothing about it.
    if args.autolearn
        && (dims.models.contains(&EventModel::Bernoulli) || dims.vocabs.iter().any(Option::is_some))
    {
        bail!(
            "--autolearn learns as the daemon's store does: no bernoulli model and no --vocab \
             selection (drop them, or drop --autolearn)"
        );
    }

    let (mail, problems) = Mail::read(&args.spam, &args.ham);
    let (test_mail, test_problems) = if args.test_spam.is_empty() {
        (Mail::default(), Vec::new())
    } else {
        Mail::read(&args.test_spam, &args.test_ham)
    };
    for p in problems.iter().chain(&test_problems) {
        eprintln!("spamnb: {p}");
    }
    let spam = mail.classes.iter().filter(|c| **c == Class::Spam).count();
    if spam == 0 || spam == mail.classes.len() {
        bail!(
            "eval needs both spam and ham: read {spam} spam and {} ham from --spam and --ham",
            mail.classes.len() - spam
        );
    }

    let mut variants = Vec::new();
    let mut rows = Vec::new();
    let mut vocabulary = None;
    let mut parse_seconds = start.elapsed().as_secs_f64();
    for tok in &dims.tokenizers {
        let extractor = Extractor {
            tokenizer: tokenizer_variant(&config.extractor.tokenizer, tok)?,
            scan_limit: config.extractor.scan_limit,
            rules: config.extractor.rules.clone(),
        };
        // Parse and tokenize once per tokenizer setting, then only count.
        let parse_start = Instant::now();
        let mut corpus = mail.corpus(&extractor);
        let train_len = corpus.items.len();
        if !test_mail.raw.is_empty() {
            corpus.items.extend(test_mail.corpus(&extractor).items);
        }
        parse_seconds += parse_start.elapsed().as_secs_f64();
        if rows.is_empty() && !args.online {
            warn_undertrained(&corpus, train_len, args, config.model.min_learned);
        }
        vocabulary.get_or_insert_with(|| {
            let all: std::collections::HashSet<&str> = corpus
                .items
                .iter()
                .flat_map(|i| i.readings.learned.iter().map(|(f, _)| f))
                .collect();
            all.len()
        });
        for &event_model in &dims.models {
            for &alpha in &dims.alphas {
                for &vocab in &dims.vocabs {
                    let mut model = config.model.clone();
                    model.event_model = event_model;
                    model.alpha = alpha;
                    model.min_token_weight =
                        args.min_token_weight.unwrap_or(model.min_token_weight);
                    model.normalize_length =
                        args.normalize_length.unwrap_or(model.normalize_length);
                    model.min_feature_messages = args
                        .min_feature_messages
                        .unwrap_or(model.min_feature_messages);
                    model.strongest_features =
                        args.strongest_features.unwrap_or(model.strongest_features);
                    model.all_features_share =
                        args.all_features_share.unwrap_or(model.all_features_share);
                    if args.textbook {
                        model.min_token_weight = 0.0;
                        model.normalize_length = false;
                        model.min_feature_messages = 1;
                        model.strongest_features = 0;
                    }
                    model.autolearn |= args.autolearn;
                    model.spam_threshold = args.spam_threshold.unwrap_or(model.spam_threshold);
                    model.ham_threshold = args.ham_threshold.unwrap_or(model.ham_threshold);
                    if model.ham_threshold > model.spam_threshold {
                        bail!(
                            "the ham threshold ({}) must not be above the spam threshold ({})",
                            model.ham_threshold,
                            model.spam_threshold
                        );
                    }
                    let setting = Setting {
                        model,
                        selector: args.select,
                        vocab,
                    };
                    let report = evaluate(&corpus, train_len, &setting, args, target)?;
                    variants.push(Variant {
                        tokenizer: tok.clone(),
                        setting,
                    });
                    rows.push(SweepRow {
                        tokenizer: tok.clone(),
                        report,
                    });
                }
            }
        }
    }

    let chosen = match args.holdout {
        Some(fraction) if !args.online => Some(choose_and_hold_out(
            &mail, config, &variants, &rows, fraction, args, target,
        )?),
        _ => None,
    };
    if let Some(path) = &args.plot {
        let svg = chart(&dims, &rows, args.plot_metric);
        std::fs::write(path, svg)
            .with_context(|| format!("cannot write the plot to {}", path.display()))?;
    }
    if let Some(path) = &args.scores {
        let mut tsv = String::from("setting\ttokenizer\tinput\tclass\tscore\trun\n");
        for r in rows.iter().chain(&chosen) {
            for sc in &r.report.scores {
                let _ = writeln!(
                    tsv,
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    r.report.setting.label(),
                    r.tokenizer,
                    mail.names
                        .get(sc.index)
                        .or_else(|| test_mail.names.get(sc.index - mail.names.len()))
                        .map_or("?", |n| n.as_str()),
                    sc.class.name(),
                    sc.score,
                    r.report.mode
                );
            }
        }
        std::fs::write(path, tsv)
            .with_context(|| format!("cannot write the scores to {}", path.display()))?;
    }
    let out = SweepOutput {
        rows,
        chosen,
        messages: mail.raw.len() + test_mail.raw.len(),
        vocabulary: vocabulary.unwrap_or(0),
        parse_seconds,
        seconds: start.elapsed().as_secs_f64(),
    };
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&out).context("encoding the report as JSON")?
        ),
        Format::Text => print!("{}", text(&out)),
    }
    Ok(if problems.is_empty() && test_problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// The evaluation the mode asks for, of one setting.
fn evaluate(
    corpus: &Corpus,
    train_len: usize,
    setting: &Setting,
    args: &EvalArgs,
    target: Option<Target>,
) -> anyhow::Result<Report> {
    let k = args.folds as usize;
    if args.online {
        // With --holdout, online learning runs over the development part only.
        let subset = match args.holdout {
            Some(fraction) => eval::holdout(corpus, fraction, args.seed).0,
            None => (0..corpus.items.len()).collect(),
        };
        let order = match args.order.as_str() {
            "input" => Order::Input,
            "shuffle" => Order::Shuffle(args.seed),
            _ => Order::Date,
        };
        return eval::online(corpus, &subset, setting, args.train_on, order)
            .map_err(anyhow::Error::msg);
    }
    if train_len < corpus.items.len() {
        let train: Vec<usize> = (0..train_len).collect();
        let test: Vec<usize> = (train_len..corpus.items.len()).collect();
        return Ok(eval::split(
            corpus, &train, &test, setting, k, args.seed, target,
        ));
    }
    if let Some(fraction) = args.holdout {
        // Sweep figures come from the development part only: the held-out part is
        // looked at once, for the chosen setting.
        let (dev, _) = eval::holdout(corpus, fraction, args.seed);
        return Ok(eval::cross_validate_subset(
            corpus, &dev, setting, k, args.seed, target,
        ));
    }
    Ok(eval::cross_validate(corpus, setting, k, args.seed, target))
}

/// Names the folds (or the training mail of a fixed split) that learn fewer than `[model]
/// min_learned` messages of a class: every verdict they give is unsure, and their figures
/// are those of no model at all.
fn warn_undertrained(corpus: &eval::Corpus, train_len: usize, args: &EvalArgs, min: u64) {
    let min = min.max(1);
    let advice = "use more --folds or more mail, or lower [model] min_learned";
    if train_len < corpus.items.len() {
        let mut learned = [0u64; 2];
        for item in &corpus.items[..train_len] {
            learned[item.class.index()] += 1;
        }
        if learned.iter().any(|&n| n < min) {
            tracing::warn!(
                "the training mail is {} spam and {} ham, fewer than [model] min_learned ({min}) \
                 of a class: every verdict is unsure; learn more mail, or lower min_learned",
                learned[1],
                learned[0]
            );
        }
        return;
    }
    let subset: Vec<usize> = match args.holdout {
        Some(fraction) => eval::holdout(corpus, fraction, args.seed).0,
        None => (0..corpus.items.len()).collect(),
    };
    let k = args.folds as usize;
    for (f, learned) in eval::fold_training(corpus, &subset, k, args.seed)
        .into_iter()
        .enumerate()
    {
        if learned.iter().any(|&n| n < min) {
            tracing::warn!(
                "fold {} of {k} learns {} spam and {} ham, fewer than [model] min_learned \
                 ({min}) of a class: its every verdict is unsure; {advice}",
                f + 1,
                learned[1],
                learned[0]
            );
        }
    }
}

/// Picks the best row by `--choose-by` (on development cross-validation) and reports it
/// on the held-out part, trained on all the development part.
fn choose_and_hold_out(
    mail: &Mail,
    config: &Config,
    variants: &[Variant],
    rows: &[SweepRow],
    fraction: f64,
    args: &EvalArgs,
    target: Option<Target>,
) -> anyhow::Result<SweepRow> {
    let at = target.map_or(0.001, |t| t.ham_loss);
    let point = eval::metrics::HAM_LOSS_POINTS
        .iter()
        .position(|p| (p - at).abs() < 1e-12);
    let key = |r: &Report| -> f64 {
        match args.choose_by {
            ChooseBy::Caught => match point {
                Some(p) => -r.micro.caught_at_pct[p],
                None => -100.0 * eval::metrics::spam_caught_at(&pairs(r), at),
            },
            ChooseBy::Auc => r.micro.one_minus_auc_pct,
            ChooseBy::Accuracy => -r.micro.accuracy,
            ChooseBy::Lam => r.micro.lam_pct,
        }
    };
    // Ties (common in spam caught at a tight ham loss) go to the lower 1−AUC.
    let best = (0..rows.len())
        .min_by(|&a, &b| {
            key(&rows[a].report).total_cmp(&key(&rows[b].report)).then(
                rows[a]
                    .report
                    .micro
                    .one_minus_auc_pct
                    .total_cmp(&rows[b].report.micro.one_minus_auc_pct),
            )
        })
        .context("a sweep has at least one setting")?;
    let variant = &variants[best];
    let extractor = Extractor {
        tokenizer: tokenizer_variant(&config.extractor.tokenizer, &variant.tokenizer)?,
        scan_limit: config.extractor.scan_limit,
        rules: config.extractor.rules.clone(),
    };
    let corpus = mail.corpus(&extractor);
    let (dev, test) = eval::holdout(&corpus, fraction, args.seed);
    let mut report = eval::split(
        &corpus,
        &dev,
        &test,
        &variant.setting,
        args.folds as usize,
        args.seed,
        target,
    );
    report.mode = format!(
        "chosen by {:?} on development folds; held-out {:.0}%",
        args.choose_by,
        fraction * 100.0
    );
    Ok(SweepRow {
        tokenizer: variant.tokenizer.clone(),
        report,
    })
}

fn pairs(r: &Report) -> Vec<(f64, Class)> {
    r.scores.iter().map(|s| (s.score, s.class)).collect()
}

struct Dims {
    tokenizers: Vec<String>,
    models: Vec<EventModel>,
    alphas: Vec<f64>,
    vocabs: Vec<Option<usize>>,
}

impl Dims {
    fn apply(&mut self, sweep: &str) -> anyhow::Result<()> {
        let Some((dim, values)) = sweep.split_once('=') else {
            bail!("--sweep {sweep}: write DIMENSION=V1,V2,… (vocab, alpha or tokenizer)");
        };
        let values: Vec<&str> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        match dim.trim() {
            "vocab" => {
                self.vocabs = values
                    .iter()
                    .map(|v| parse_vocab(v))
                    .collect::<anyhow::Result<_>>()?
            }
            "alpha" => {
                self.alphas = values
                    .iter()
                    .map(|v| match v.parse::<f64>() {
                        Ok(a) if a > 0.0 && a.is_finite() => Ok(a),
                        _ => bail!("--sweep alpha: {v} is not a number above 0"),
                    })
                    .collect::<anyhow::Result<_>>()?
            }
            "tokenizer" => {
                for v in &values {
                    tokenizer_variant(&TokenizerOptions::default(), v)?;
                }
                self.tokenizers = values.iter().map(|v| v.to_string()).collect();
            }
            "model" | "models" => {
                self.models = parse_models(
                    &values.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                    &Config::default(),
                )?
            }
            other => {
                bail!("--sweep {other}: the dimensions are vocab, alpha, tokenizer and models")
            }
        }
        Ok(())
    }
}

/// Tokenizer options named for a sweep: `config` (as configured), `default`, or a
/// `+`-joined list of changes to the configured options: no-headers, no-urls, pairs,
/// headers, urls, no-pairs.
fn tokenizer_variant(base: &TokenizerOptions, name: &str) -> anyhow::Result<TokenizerOptions> {
    let mut opts = base.clone();
    for part in name.split('+') {
        match part {
            "config" => {}
            "default" => opts = TokenizerOptions::default(),
            "no-headers" => opts.header_tokens = false,
            "headers" => opts.header_tokens = true,
            "no-urls" => opts.url_tokens = false,
            "urls" => opts.url_tokens = true,
            "pairs" => opts.pair_tokens = true,
            "no-pairs" => opts.pair_tokens = false,
            "html" => opts.html_tokens = true,
            "no-html" => opts.html_tokens = false,
            "caps" => opts.caps_tokens = true,
            "no-caps" => opts.caps_tokens = false,
            other => bail!(
                "tokenizer variant {other:?}: use config, default, or changes joined with +: (no-)headers, (no-)urls, (no-)pairs, (no-)html, (no-)caps"
            ),
        }
    }
    Ok(opts)
}

fn parse_models(names: &[String], config: &Config) -> anyhow::Result<Vec<EventModel>> {
    if names.is_empty() {
        return Ok(vec![config.model.event_model]);
    }
    names
        .iter()
        .map(|n| match n.trim() {
            "multinomial" => Ok(EventModel::Multinomial),
            "binary-multinomial" | "binary" => Ok(EventModel::BinaryMultinomial),
            "bernoulli" => Ok(EventModel::Bernoulli),
            other => {
                bail!("event model {other:?}: use multinomial, binary-multinomial or bernoulli")
            }
        })
        .collect()
}

fn parse_vocab(v: &str) -> anyhow::Result<Option<usize>> {
    if v == "all" {
        return Ok(None);
    }
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => bail!("vocabulary size {v:?}: give a number above 0, or all"),
    }
}

/// "0.1%" or "0.001" as a fraction.
fn parse_rate(s: &str) -> anyhow::Result<f64> {
    let (number, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (s, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(r) if (0.0..1.0).contains(&(r * scale)) => Ok(r * scale),
        _ => bail!("{s}: give a rate like 0.1% or 0.001"),
    }
}

/// Accuracy against vocabulary size (α if vocabulary is not swept), one line per model
/// and tokenizer (and α).
fn chart(dims: &Dims, rows: &[SweepRow], metric: PlotMetric) -> String {
    let by_vocab = dims.vocabs.len() > 1 || dims.alphas.len() == 1;
    let largest = rows
        .iter()
        .filter_map(|r| r.report.setting.vocab)
        .max()
        .unwrap_or(1000);
    // "all" is drawn one decade past the largest number swept.
    let all_x = (largest as f64) * 10.0;
    let mut series: Vec<Series> = Vec::new();
    for r in rows {
        let s = &r.report.setting;
        let (x, name) = if by_vocab {
            let mut name = s.model.event_model.name().to_string();
            if dims.alphas.len() > 1 {
                let _ = write!(name, " α={}", s.model.alpha);
            }
            (s.vocab.map_or(all_x, |v| v as f64), name)
        } else {
            (s.model.alpha, s.model.event_model.name().to_string())
        };
        let name = if dims.tokenizers.len() > 1 {
            format!("{name} ({})", r.tokenizer)
        } else {
            name
        };
        let m = &r.report.micro;
        let y = match metric {
            PlotMetric::Accuracy => 100.0 * m.accuracy,
            PlotMetric::Caught => m.caught_at_pct[0],
            PlotMetric::Auc => m.one_minus_auc_pct,
        };
        match series.iter_mut().find(|x| x.name == name) {
            Some(existing) => existing.points.push((x, y)),
            None => series.push(Series {
                name,
                points: vec![(x, y)],
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let mut ticks: Vec<(f64, String)> = Vec::new();
    if by_vocab {
        for v in &dims.vocabs {
            ticks.push(v.map_or((all_x, "all".into()), |n| (n as f64, n.to_string())));
        }
    } else {
        ticks = dims.alphas.iter().map(|a| (*a, a.to_string())).collect();
    }
    let x_label = if by_vocab {
        "vocabulary size (features kept)"
    } else {
        "smoothing α"
    };
    plot::line_chart(
        match metric {
            PlotMetric::Accuracy => "Accuracy on held-out folds",
            PlotMetric::Caught => "Spam caught at 0.1% ham loss, held-out folds",
            PlotMetric::Auc => "1 − AUC on held-out folds (lower is better)",
        },
        x_label,
        match metric {
            PlotMetric::Accuracy => "accuracy (%)",
            PlotMetric::Caught => "spam caught (%)",
            PlotMetric::Auc => "1 − AUC (%)",
        },
        &series,
        true,
        &ticks,
    )
}

fn text(out: &SweepOutput) -> String {
    let mut s = String::new();
    if out.rows.len() == 1 && out.chosen.is_none() {
        report_text(&mut s, &out.rows[0].report);
    } else {
        let _ = writeln!(
            s,
            "{:<12} {:<19} {:>6} {:>6} {:>8} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8}",
            "tokenizer",
            "model",
            "alpha",
            "vocab",
            "accuracy",
            "hm%",
            "sm%",
            "lam%",
            "1-AUC%",
            "@0.1%",
            "@1%"
        );
        for r in &out.rows {
            let st = &r.report.setting;
            let m = &r.report.micro;
            let _ = writeln!(
                s,
                "{:<12} {:<19} {:>6} {:>6} {:>8.4} {:>7.3} {:>7.3} {:>7.3} {:>8.4} {:>8.2} {:>8.2}",
                r.tokenizer,
                st.model.event_model.name(),
                st.model.alpha,
                st.vocab.map_or("all".to_string(), |v| v.to_string()),
                m.accuracy,
                m.hm_pct,
                m.sm_pct,
                m.lam_pct,
                m.one_minus_auc_pct,
                m.caught_at_pct[0],
                m.caught_at_pct[2]
            );
        }
        if let Some(c) = &out.chosen {
            let _ = writeln!(
                s,
                "\nchosen: tokenizer {}, {}",
                c.tokenizer,
                c.report.setting.label()
            );
            report_text(&mut s, &c.report);
        }
    }
    let _ = writeln!(
        s,
        "\n{} messages, {} distinct features; {:.1} s ({:.1} s reading and parsing)",
        out.messages, out.vocabulary, out.seconds, out.parse_seconds
    );
    s
}

fn report_text(s: &mut String, r: &Report) {
    let _ = writeln!(s, "{} — {}", r.setting.label(), r.mode);
    let _ = writeln!(
        s,
        "thresholds: spam at log-odds >= {}, ham at <= {}",
        r.setting.model.spam_threshold, r.setting.model.ham_threshold
    );
    let _ = writeln!(
        s,
        "{:<6} {:>6} {:>6} {:>5} {:>6} {:>5} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7}",
        "fold",
        "msgs",
        "tp",
        "fp",
        "tn",
        "fn",
        "unsure",
        "prec",
        "recall",
        "F1",
        "acc",
        "hm%",
        "sm%",
        "lam%",
        "1-AUC%",
        "@0.1%",
        "@1%"
    );
    let row = |s: &mut String, name: &str, f: &Figures| {
        let c = &f.confusion;
        let _ = writeln!(
            s,
            "{:<6} {:>6} {:>6} {:>5} {:>6} {:>5} {:>7} {:>7.4} {:>7.4} {:>8.4} {:>7.4} {:>7.3} {:>7.3} {:>8.3} {:>7.4} {:>7.2} {:>7.2}",
            name,
            f.messages,
            c.tp,
            c.fp,
            c.tn,
            c.fn_,
            c.unsure[0] + c.unsure[1],
            f.precision,
            f.recall,
            f.f1,
            f.accuracy,
            f.hm_pct,
            f.sm_pct,
            f.lam_pct,
            f.one_minus_auc_pct,
            f.caught_at_pct[0],
            f.caught_at_pct[2]
        );
    };
    if r.per_fold.len() > 1 {
        for (i, f) in r.per_fold.iter().enumerate() {
            row(s, &(i + 1).to_string(), f);
        }
        row(s, "micro", &r.micro);
        row(s, "macro", &r.macro_);
    } else {
        row(s, "all", &r.micro);
    }
    if let Some(n) = r.learned {
        let _ = writeln!(s, "learned {n} of {} messages", r.micro.messages);
    }
    if let Some(a) = &r.advice {
        let h = &a.held_out;
        let _ = writeln!(
            s,
            "advice for at most {}% ham lost and {}% spam called ham, chosen on validation folds:\n  \
             spam_threshold = {:.2}, ham_threshold = {:.2}\n  \
             on held-out mail (thresholds from each fold's own validation): {:.3}% of ham lost, {:.2}% of spam caught, \
             {:.2}% of spam called ham, unsure {:.2}% of ham and {:.2}% of spam",
            a.target.ham_loss * 100.0,
            a.target.spam_leak * 100.0,
            a.chosen.spam_threshold,
            a.chosen.ham_threshold,
            h.ham_lost_pct,
            h.spam_caught_pct,
            h.spam_as_ham_pct,
            h.ham_unsure_pct,
            h.spam_unsure_pct
        );
    }
}
