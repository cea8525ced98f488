//! SpamAssassin's ImageInfo tests: how many GIF, PNG and JPEG attachments a message has,
//! their sizes, their names, and how much text stands beside their area.

use std::sync::Arc;

use super::argument::Arguments;
use super::eval::Facts;
use super::matcher::CountPattern;
use super::perl;
use crate::message::image::{Image, ImageKind};

/// A compiled ImageInfo test; `kind` None is SpamAssassin's `all`.
#[derive(Debug, Clone)]
pub enum Test {
    /// Images in [min, max].
    Count(Option<ImageKind>, f64, f64),
    /// Pixels of all images, in [min, max].
    Coverage(Option<ImageKind>, f64, f64),
    /// An image of exactly (width, height).
    SizeExact(Option<ImageKind>, u32, u32),
    /// An image at least (width, height) and at most the maximum.
    SizeRange(Option<ImageKind>, (u32, u32), (u32, u32)),
    Named(String),
    NameMatches(Arc<CountPattern>),
    /// Characters of text per pixel of image, in [min, max); `raw`: of the text as sent
    /// (a rawbody rule), else as shown (a body rule).
    TextRatio {
        kind: Option<ImageKind>,
        min: f64,
        max: f64,
        raw: bool,
    },
}

/// `name(args)` if it is an ImageInfo test; `raw` for a rawbody rule.
pub(super) fn compile(name: &str, args: &Arguments, raw: bool) -> Option<Result<Test, String>> {
    let kind = || -> Result<Option<ImageKind>, String> {
        match args.get(0) {
            Some("all") => Ok(None),
            Some(kind) => ImageKind::from_name(kind)
                .map(Some)
                .ok_or_else(|| format!("{name}('{kind}')")),
            None => Err(format!("eval:{name} needs an image type")),
        }
    };
    let pixels = |v: f64| v.clamp(0.0, f64::from(u32::MAX)) as u32;
    let test = || -> Result<Test, String> {
        Ok(match name {
            "image_count" => Test::Count(kind()?, args.min(1)?, args.open_max(2)?),
            "pixel_coverage" => Test::Coverage(kind()?, args.min(1)?, args.open_max(2)?),
            // SpamAssassin's arguments give the height first.
            "image_size_exact" => {
                Test::SizeExact(kind()?, pixels(args.number(2)?), pixels(args.number(1)?))
            }
            "image_size_range" => Test::SizeRange(
                kind()?,
                (pixels(args.min(2)?), pixels(args.min(1)?)),
                (pixels(args.open_max(4)?), pixels(args.open_max(3)?)),
            ),
            "image_named" => Test::Named(
                args.get(0)
                    .map(str::to_string)
                    .ok_or_else(|| format!("eval:{name} needs a name"))?,
            ),
            "image_name_regex" => {
                let delimited = args
                    .get(0)
                    .ok_or_else(|| format!("eval:{name} needs a pattern"))?;
                let translated = perl::split_delimited(delimited)
                    .and_then(|p| perl::translate(&p))
                    .map_err(|e| format!("eval:{name}: {}", e.0))?;
                Test::NameMatches(Arc::new(CountPattern::new(&translated)?))
            }
            "image_to_text_ratio" => Test::TextRatio {
                kind: kind()?,
                min: args.min(1)?,
                max: args.max(2)?,
                raw,
            },
            other => return Err(other.to_string()),
        })
    };
    known(name).then(test)
}

const NAMES: &[&str] = &[
    "image_count",
    "pixel_coverage",
    "image_size_exact",
    "image_size_range",
    "image_named",
    "image_name_regex",
    "image_to_text_ratio",
];

pub fn known(name: &str) -> bool {
    NAMES.contains(&name)
}

impl Test {
    pub(super) fn holds(&self, facts: &mut Facts) -> bool {
        let msg = facts.msg;
        let images = |kind: Option<ImageKind>| {
            (msg.attachments.iter())
                .filter_map(|a| a.image.map(|image| (a, image)))
                .filter(move |(_, image)| kind.is_none_or(|k| image.kind == k))
        };
        let sizes = |kind| images(kind).filter_map(|(_, image): (_, Image)| image.size);
        let coverage = |kind| {
            sizes(kind)
                .map(|(w, h)| f64::from(w) * f64::from(h))
                .sum::<f64>()
        };
        // A name counts where the image could be read, as in SpamAssassin.
        let mut names = images(None)
            .filter(|(_, image)| image.size.is_some())
            .filter_map(|(a, _)| a.name.as_deref());
        match self {
            Test::Count(kind, min, max) => {
                let n = images(*kind).count() as f64;
                n >= *min && n <= *max
            }
            Test::Coverage(kind, min, max) => {
                let area = coverage(*kind);
                area >= *min && area <= *max
            }
            Test::SizeExact(kind, w, h) => sizes(*kind).any(|size| size == (*w, *h)),
            Test::SizeRange(kind, (min_w, min_h), (max_w, max_h)) => {
                sizes(*kind).any(|(w, h)| w >= *min_w && h >= *min_h && w <= *max_w && h <= *max_h)
            }
            Test::Named(name) => names.any(|n| n == name),
            Test::NameMatches(pattern) => names.any(|n| pattern.count(n.as_bytes(), 1) > 0),
            Test::TextRatio {
                kind,
                min,
                max,
                raw,
            } => {
                let area = coverage(*kind);
                area > 0.0 && {
                    let text = if *raw {
                        msg.html.len() + msg.plain.iter().map(|r| r.len()).sum::<usize>()
                    } else {
                        facts.body_text().len()
                    };
                    let ratio = text as f64 / area;
                    text > 0 && ratio >= *min && ratio < *max
                }
            }
        }
    }
}
