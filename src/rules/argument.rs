//! The arguments of an eval call as SpamAssassin's rule files write them
//! (`eval:similar_recipients('0.65', 'undef')`): split at the commas outside quotes, each
//! unquoted, and numbers read alike by every eval module: `undef` for a bound left open,
//! `inf` for infinity.

/// The arguments of one eval call, quotes and white space taken off, empty ones left out.
#[derive(Debug)]
pub(super) struct Arguments<'c> {
    /// The eval's name, for what an error says.
    eval: &'c str,
    values: Vec<String>,
}

impl<'c> Arguments<'c> {
    /// The arguments of `eval(inner)`; `inner` is what stands between the parentheses.
    pub(super) fn parse(eval: &'c str, inner: &str) -> Arguments<'c> {
        let values = split(inner)
            .map(|a| a.trim().trim_matches(|c| c == '\'' || c == '"').to_string())
            .filter(|a| !a.is_empty())
            .collect();
        Arguments { eval, values }
    }

    /// Every argument, for the tests that read words and patterns, not numbers.
    pub(super) fn values(&self) -> &[String] {
        &self.values
    }

    /// Argument `i`, if the call gives it.
    pub(super) fn get(&self, i: usize) -> Option<&str> {
        self.values.get(i).map(String::as_str)
    }

    /// Argument `i`; an error where the call gives none.
    pub(super) fn text(&self, i: usize) -> Result<&str, String> {
        self.get(i)
            .ok_or_else(|| format!("eval:{} needs argument {}", self.eval, i + 1))
    }

    /// Argument `i`, a number that is no bound (an exact size): `undef` is an error.
    pub(super) fn number(&self, i: usize) -> Result<f64, String> {
        let a = self.text(i)?;
        // Rust reads `inf`, `-inf` and `infinity` as infinities, as Perl does.
        a.parse()
            .map_err(|_| format!("eval:{}: argument {a:?} is not a number", self.eval))
    }

    /// Argument `i`, a lower bound: `undef` leaves it open.
    pub(super) fn min(&self, i: usize) -> Result<f64, String> {
        self.bound(i, f64::NEG_INFINITY)
    }

    /// Argument `i`, an upper bound: `undef` leaves it open.
    pub(super) fn max(&self, i: usize) -> Result<f64, String> {
        self.bound(i, f64::INFINITY)
    }

    /// [`Arguments::min`], or `missing` where the call gives no argument `i`.
    pub(super) fn min_or(&self, i: usize, missing: f64) -> Result<f64, String> {
        self.get(i).map_or(Ok(missing), |_| self.min(i))
    }

    /// [`Arguments::max`], open (infinity) where the call gives no argument `i` as well.
    pub(super) fn open_max(&self, i: usize) -> Result<f64, String> {
        self.get(i).map_or(Ok(f64::INFINITY), |_| self.max(i))
    }

    fn bound(&self, i: usize, open: f64) -> Result<f64, String> {
        match self.text(i)? {
            "undef" => Ok(open),
            _ => self.number(i),
        }
    }
}

/// The arguments of an eval call, split at the commas outside quotes: a pattern's
/// `{0,6}` is one argument.
fn split(inner: &str) -> impl Iterator<Item = &str> {
    let mut quote = None;
    let mut start = 0;
    let mut cuts = inner.char_indices().filter_map(move |(i, c)| {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if q == c => quote = None,
            (None, ',') => return Some(i),
            _ => {}
        }
        None
    });
    std::iter::from_fn(move || {
        let from = start;
        if from > inner.len() {
            return None;
        }
        let end = cuts.next().unwrap_or(inner.len());
        start = end + 1;
        Some(&inner[from..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_split_at_commas_outside_quotes() {
        let split = |s| split(s).collect::<Vec<_>>();
        assert_eq!(
            split("'comment', '<!(?!-).{0,6}>'"),
            ["'comment'", " '<!(?!-).{0,6}>'"]
        );
        assert_eq!(split("a,\"b,c\",d"), ["a", "\"b,c\"", "d"]);
        assert_eq!(split(""), [""]);
        assert_eq!(split("x,"), ["x", ""]);
        let args = Arguments::parse("e", " 'a' ,\"b, c\",, '' ");
        assert_eq!(args.values(), ["a", "b, c"]);
    }

    #[test]
    fn numbers_are_read_as_spamassassin_writes_them() {
        let inf = f64::INFINITY;
        // (argument, as a number, as a lower bound, as an upper bound); an error for None.
        let cases = [
            ("'0.65'", Some(0.65), Some(0.65), Some(0.65)),
            ("\"-96\"", Some(-96.0), Some(-96.0), Some(-96.0)),
            ("12", Some(12.0), Some(12.0), Some(12.0)),
            ("'inf'", Some(inf), Some(inf), Some(inf)),
            ("'-inf'", Some(-inf), Some(-inf), Some(-inf)),
            ("'undef'", None, Some(-inf), Some(inf)),
            ("'many'", None, None, None),
        ];
        for (written, number, min, max) in cases {
            let args = Arguments::parse("e", written);
            assert_eq!(args.number(0).ok(), number, "{written} as a number");
            assert_eq!(args.min(0).ok(), min, "{written} as a minimum");
            assert_eq!(args.max(0).ok(), max, "{written} as a maximum");
            assert_eq!(args.min_or(0, 1.0).ok(), min, "{written} as a minimum");
            assert_eq!(args.open_max(0).ok(), max, "{written} as a maximum");
        }
        let none = Arguments::parse("e", "");
        assert_eq!(none.min_or(0, 1.0), Ok(1.0), "a minimum left out");
        assert_eq!(none.open_max(0), Ok(inf), "a maximum left out");
        assert_eq!(none.max(0), Err("eval:e needs argument 1".to_string()));
        assert_eq!(
            Arguments::parse("e", "'x'").min(0),
            Err("eval:e: argument \"x\" is not a number".to_string())
        );
    }
}
