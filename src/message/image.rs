//! The kind and size of an image attachment, read from the first bytes of its data: spam
//! that is one picture of text says little in words, and much in its images.

/// The image formats whose size is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Gif,
    Png,
    Jpeg,
}

impl ImageKind {
    /// The kind a part's `image/…` content type names (`jpg` and `pjpeg` are JPEG).
    pub fn of_content_type(content_type: &str) -> Option<ImageKind> {
        ImageKind::from_name(content_type.strip_prefix("image/")?)
    }

    /// `gif`, `png`, `jpeg` (`jpg`, `pjpeg`).
    pub fn from_name(name: &str) -> Option<ImageKind> {
        match name {
            "gif" => Some(ImageKind::Gif),
            "png" => Some(ImageKind::Png),
            "jpeg" | "jpg" | "pjpeg" => Some(ImageKind::Jpeg),
            _ => None,
        }
    }
}

/// An image attachment: its kind, from its content type, and its size in pixels where its
/// data says it (data that is not of that kind has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub kind: ImageKind,
    /// (width, height).
    pub size: Option<(u32, u32)>,
}

impl Image {
    pub fn read(kind: ImageKind, data: &[u8]) -> Image {
        let size = match kind {
            ImageKind::Gif => gif_size(data),
            ImageKind::Png => png_size(data),
            ImageKind::Jpeg => jpeg_size(data),
        };
        Image {
            kind,
            size: size.filter(|&(w, h)| w > 0 && h > 0),
        }
    }
}

fn u16_le(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(
        data.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn u16_be(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(
        data.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn u32_be(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// The logical screen of a GIF87a or GIF89a.
fn gif_size(data: &[u8]) -> Option<(u32, u32)> {
    if !(data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a")) {
        return None;
    }
    Some((u16_le(data, 6)?, u16_le(data, 8)?))
}

/// The PNG header chunk (IHDR), which comes first.
fn png_size(data: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if !data.starts_with(SIGNATURE) || data.get(12..16)? != b"IHDR" {
        return None;
    }
    Some((u32_be(data, 16)?, u32_be(data, 20)?))
}

/// The first start-of-frame segment of a JPEG, found by walking the segments before it.
fn jpeg_size(data: &[u8]) -> Option<(u32, u32)> {
    if !data.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut at = 2;
    loop {
        let (&[0xFF, marker], len) = (data.get(at..at + 2)?, u16_be(data, at + 2)?) else {
            return None;
        };
        // Start of scan or end of image: no frame header before them.
        if marker == 0xDA || marker == 0xD9 || len < 2 {
            return None;
        }
        // SOF0 to SOF15, but for DHT (C4), JPG (C8) and DAC (CC).
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            return Some((u16_be(data, at + 7)?, u16_be(data, at + 5)?));
        }
        at += 2 + len as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_come_from_each_formats_header() {
        let gif = b"GIF89a\x2c\x01\x96\x00\xf7\x00\x00rest";
        assert_eq!(gif_size(gif), Some((300, 150)));
        let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(png_size(&png), Some((640, 480)));
        // An APP0 segment, then a baseline frame: precision, height 200, width 100.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x4A, 0x46, 0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00,
            0xC8, 0x00, 0x64, 0x03,
        ];
        assert_eq!(jpeg_size(&jpeg), Some((100, 200)));
        // A Huffman table (C4) is no frame; the scan begins before any frame.
        let no_frame = [0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x02, 0xFF, 0xDA, 0x00, 0x02];
        assert_eq!(jpeg_size(&no_frame), None);
        for data in [
            &b""[..],
            b"GIF8",
            b"\x89PNG",
            b"\xFF\xD8\xFF",
            b"not an image",
        ] {
            assert_eq!(gif_size(data), None);
            assert_eq!(png_size(data), None);
            assert_eq!(jpeg_size(data), None);
        }
        let zero = Image::read(ImageKind::Gif, b"GIF87a\x00\x00\x10\x00");
        assert_eq!(zero.size, None);
        assert_eq!(
            ImageKind::of_content_type("image/pjpeg"),
            Some(ImageKind::Jpeg)
        );
        assert_eq!(ImageKind::of_content_type("image/bmp"), None);
    }
}
