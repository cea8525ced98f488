//! What a MIME part's Content-Type and Content-Transfer-Encoding fields say, read once from
//! the text as written: the MIME tree, the MIME tests and the alternatives' word counts all
//! ask for the same media type, boundary, charset and encoding. mail-parser reads the
//! parameters, as it reads them for [`super::Message`].

use mail_parser::HeaderValue;
use mail_parser::parsers::MessageStream;

/// A Content-Type field as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContentType {
    /// The media type as written: lowercase, without parameters, empty where no field gives
    /// one. It may be quoted: the MIME tests compare the text as written, where a quoted
    /// type is none of theirs, and [`ContentType::media_type`] takes the quotes off.
    written: String,
    pub boundary: Option<String>,
    pub charset: Option<String>,
    /// The `name` parameter: a file name.
    pub name: Option<String>,
}

impl ContentType {
    /// The Content-Type field `value` (unfolded); none: the part has no such field.
    pub fn read(value: Option<&str>) -> ContentType {
        let Some(value) = value else {
            return ContentType::default();
        };
        let kind = value.split(';').next().unwrap_or_default();
        let [boundary, charset, name] = parameters(value, ["boundary", "charset", "name"]);
        ContentType {
            written: kind.trim().to_ascii_lowercase(),
            boundary,
            charset,
            name,
        }
    }

    /// The media type (`text/html`), quotes taken off; `default` where none is written.
    pub fn media_type<'s>(&'s self, default: &'s str) -> &'s str {
        match self.written.trim_matches('"').trim() {
            "" => default,
            kind => kind,
        }
    }

    /// Whether the media type as written, quotes and all, starts with `prefix`
    /// (`multipart/`, `text/plain`).
    pub fn is_written_as(&self, prefix: &str) -> bool {
        self.written.starts_with(prefix)
    }
}

/// A parameter of a Content-Type or Content-Disposition value (`charset`, `filename`), as
/// mail-parser reads it.
pub fn parameter(value: &str, name: &str) -> Option<String> {
    let [found] = parameters(value, [name]);
    found
}

/// The parameters `names` of a Content-Type or Content-Disposition value, from one parse.
fn parameters<const N: usize>(value: &str, names: [&str; N]) -> [Option<String>; N] {
    // The parser reads a field to its line end.
    let field = format!("{value}\n");
    match MessageStream::new(field.as_bytes()).parse_content_type() {
        HeaderValue::ContentType(ct) => names.map(|name| ct.attribute(name).map(String::from)),
        _ => names.map(|_| None),
    }
}

/// How a part's body was sent, as its Content-Transfer-Encoding field says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TransferEncoding {
    Base64,
    QuotedPrintable,
    /// 7bit, 8bit, binary, none given or one not known: the body is read as it stands.
    #[default]
    Unencoded,
}

impl TransferEncoding {
    /// The Content-Transfer-Encoding field `value`; none: the part has no such field.
    pub fn read(value: Option<&str>) -> TransferEncoding {
        let value = value.map(str::trim).unwrap_or_default();
        if value.eq_ignore_ascii_case("base64") {
            TransferEncoding::Base64
        } else if value.eq_ignore_ascii_case("quoted-printable") {
            TransferEncoding::QuotedPrintable
        } else {
            TransferEncoding::Unencoded
        }
    }

    /// Whether the body must be decoded to be read.
    pub fn is_encoded(self) -> bool {
        self != TransferEncoding::Unencoded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_type_is_read_once_for_all_it_says() {
        // (field, media type, boundary, charset, name)
        let cases = [
            (None, "text/plain", None, None, None),
            // No type, no parameters: mail-parser reads none without a type.
            (Some("  ; charset=utf-8"), "text/plain", None, None, None),
            (
                Some("text/plain; charset=\"ISO-8859-1\""),
                "text/plain",
                None,
                Some("ISO-8859-1"),
                None,
            ),
            (
                Some("text/html;charset=utf-8; format=flowed"),
                "text/html",
                None,
                Some("utf-8"),
                None,
            ),
            (
                Some("Multipart/Alternative; boundary=\"=_b 1\""),
                "multipart/alternative",
                Some("=_b 1"),
                None,
                None,
            ),
            (
                Some("application/pdf; name=\"a.pdf\""),
                "application/pdf",
                None,
                None,
                Some("a.pdf"),
            ),
            (Some(" \"text/html\" "), "text/html", None, None, None),
        ];
        for (field, media_type, boundary, charset, name) in cases {
            let ct = ContentType::read(field);
            assert_eq!(ct.media_type("text/plain"), media_type, "{field:?}");
            assert_eq!(ct.boundary.as_deref(), boundary, "{field:?}");
            assert_eq!(ct.charset.as_deref(), charset, "{field:?}");
            assert_eq!(ct.name.as_deref(), name, "{field:?}");
        }
    }

    /// The MIME tests compare the type as written: a quoted one is none of theirs, though
    /// the tree reads it.
    #[test]
    fn the_type_as_written_keeps_its_quotes() {
        for (field, prefix, written_as) in [
            (" Text/Plain; charset=x", "text/plain", true),
            ("text/plain-ish", "text/plain", true),
            ("\"text/plain\"", "text/plain", false),
            ("", "text/plain", false),
        ] {
            let ct = ContentType::read(Some(field));
            assert_eq!(ct.is_written_as(prefix), written_as, "{field:?}");
        }
        assert!(!ContentType::default().is_written_as("text/"));
    }

    #[test]
    fn transfer_encodings() {
        for (field, encoding) in [
            (Some(" Base64 "), TransferEncoding::Base64),
            (Some("QUOTED-PRINTABLE"), TransferEncoding::QuotedPrintable),
            (Some("7bit"), TransferEncoding::Unencoded),
            (Some("x-uuencode"), TransferEncoding::Unencoded),
            (None, TransferEncoding::Unencoded),
        ] {
            assert_eq!(TransferEncoding::read(field), encoding, "{field:?}");
        }
    }
}
