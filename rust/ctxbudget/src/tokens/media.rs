//! Images in a request, counted by the providers' documented rules (SPEC §1, Request
//! counting).
//!
//! An image's pixel size is read from its header — PNG, JPEG, GIF or WebP — without
//! decoding it, from raw bytes or straight from a base64 `data:` URL (only the few bytes
//! the header needs are decoded, so a megabyte image costs what a kilobyte one does).
//! The size then goes through the provider's rule:
//!
//! - **OpenAI** (tiles): `low` detail costs 85; `high` (and `auto`, counted as its
//!   upper bound) fits the image into 2048×2048, shrinks it until its shortest side is at
//!   most 768, and costs 85 + 170 per 512-pixel tile.
//! - **Anthropic** (area): an image whose long edge exceeds 1,568 pixels, or that would
//!   cost more than 1,600 tokens, is first shrunk with its aspect ratio kept; it then costs
//!   `width × height / 750`, rounded up.
//!
//! An image known only by URL is counted at the most its rule can charge (OpenAI: 1,445
//! at high detail; Anthropic: 1,600).
//!
//! ```
//! use ctxbudget::tokens::media::{image_size, openai_image_tokens, Detail};
//!
//! // The first bytes of a 1024×1024 PNG: its signature and IHDR chunk.
//! let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
//! png.extend_from_slice(&1024u32.to_be_bytes());
//! png.extend_from_slice(&1024u32.to_be_bytes());
//! let size = image_size(&png)?;
//! assert_eq!((size.width, size.height), (1024, 1024));
//! // 1024² shrinks to 768², four tiles: 85 + 4 × 170.
//! assert_eq!(openai_image_tokens(Some(size.dims()), Detail::High), 765);
//! assert_eq!(openai_image_tokens(None, Detail::Low), 85);
//! # Ok::<(), ctxbudget::tokens::media::MediaError>(())
//! ```

use std::fmt;

use base64::Engine;

/// An image format whose header [`image_size`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageFormat {
    /// PNG (and APNG): the IHDR chunk.
    Png,
    /// JPEG: the first start-of-frame segment.
    Jpeg,
    /// GIF 87a/89a: the logical screen.
    Gif,
    /// WebP: the VP8, VP8L or VP8X chunk.
    Webp,
}

impl ImageFormat {
    /// The format's lower-case name (`"png"`, `"jpeg"`, `"gif"`, `"webp"`).
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpeg",
            ImageFormat::Gif => "gif",
            ImageFormat::Webp => "webp",
        }
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An image's format and pixel size, as its header states them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImageSize {
    /// The format the header was read as.
    pub format: ImageFormat,
    /// Width in pixels (at least 1).
    pub width: u32,
    /// Height in pixels (at least 1).
    pub height: u32,
}

impl ImageSize {
    /// `(width, height)`.
    pub fn dims(&self) -> (u32, u32) {
        (self.width, self.height)
    }
}

/// Why an image's size could not be read. Counting falls back to the rule's maximum for
/// such an image, as for one known only by URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    /// The bytes start like none of the formats read here.
    #[error(
        "not a PNG, JPEG, GIF or WebP image (its first bytes match none of them); \
         count it by its detail level's maximum, or pass its width and height"
    )]
    UnknownFormat,
    /// The header is cut short or states an impossible size.
    #[error("the {format} header is damaged or cut short ({what}); pass the image's width and height instead")]
    Malformed {
        /// The format the bytes started like.
        format: ImageFormat,
        /// What was wrong.
        what: &'static str,
    },
    /// A `data:` URL that is not base64 image data.
    #[error("not a base64 image data URL (expected `data:image/...;base64,...`): {what}")]
    BadDataUrl {
        /// What was wrong.
        what: &'static str,
    },
}

/// Where the header bytes come from: a slice, or a base64 text decoded on demand.
trait Source {
    /// Fills `out` with the bytes at `at..at + out.len()`; false when they are not all
    /// there (or, for base64, not valid).
    fn read(&self, at: usize, out: &mut [u8]) -> bool;
}

impl Source for [u8] {
    fn read(&self, at: usize, out: &mut [u8]) -> bool {
        match at.checked_add(out.len()).and_then(|end| self.get(at..end)) {
            Some(bytes) => {
                out.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }
}

/// Base64 text read as the bytes it encodes, decoding only the quads a read touches.
struct Base64Text<'a>(&'a [u8]);

impl Source for Base64Text<'_> {
    fn read(&self, at: usize, out: &mut [u8]) -> bool {
        if out.is_empty() {
            return true;
        }
        let Some(end) = at.checked_add(out.len()) else {
            return false;
        };
        // Byte i lives in quad i / 3; decode the quads from the first to the last touched.
        let first = at / 3;
        let last = (end - 1) / 3;
        let (Some(from), Some(to)) = (first.checked_mul(4), (last + 1).checked_mul(4)) else {
            return false;
        };
        let Some(text) = self.0.get(from..to.min(self.0.len())) else {
            return false;
        };
        let mut decoded = [0u8; 96];
        let mut buf = Vec::new();
        let bytes: &mut [u8] = if (last - first + 1) * 3 <= decoded.len() {
            &mut decoded
        } else {
            buf.resize((last - first + 1) * 3, 0);
            &mut buf
        };
        let Ok(n) = base64::engine::general_purpose::STANDARD.decode_slice(text, bytes) else {
            return false;
        };
        let skip = at - first * 3;
        match bytes.get(skip..skip + out.len()) {
            Some(wanted) if skip + out.len() <= n => {
                out.copy_from_slice(wanted);
                true
            }
            _ => false,
        }
    }
}

/// Reads an image's format and pixel size from its first bytes (the whole file, or at
/// least its header: for JPEG everything up to the start-of-frame segment).
pub fn image_size(bytes: &[u8]) -> Result<ImageSize, MediaError> {
    size_of(bytes)
}

/// Reads an image's size from a `data:image/...;base64,...` URL, decoding only the
/// header's bytes.
pub fn image_size_from_data_url(url: &str) -> Result<ImageSize, MediaError> {
    let rest = strip_prefix_ignore_case(url, "data:").ok_or(MediaError::BadDataUrl {
        what: "it does not start with `data:`",
    })?;
    let comma = rest.find(',').ok_or(MediaError::BadDataUrl {
        what: "no `,` before the data",
    })?;
    let (meta, data) = (&rest[..comma], &rest[comma + 1..]);
    if !meta
        .rsplit(';')
        .next()
        .is_some_and(|p| p.eq_ignore_ascii_case("base64"))
    {
        return Err(MediaError::BadDataUrl {
            what: "the data is not marked `;base64`",
        });
    }
    size_of(&Base64Text(data.as_bytes()))
}

/// Reads an image's size from its bytes given as base64 text (as in an Anthropic image
/// block), decoding only the header's bytes.
pub fn image_size_from_base64(data: &str) -> Result<ImageSize, MediaError> {
    size_of(&Base64Text(data.as_bytes()))
}

/// Whether `text` is a `data:` URL (the scheme in any case).
pub fn is_data_url(text: &str) -> bool {
    strip_prefix_ignore_case(text, "data:").is_some()
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

fn malformed(format: ImageFormat, what: &'static str) -> MediaError {
    MediaError::Malformed { format, what }
}

fn sized(format: ImageFormat, width: u32, height: u32) -> Result<ImageSize, MediaError> {
    if width == 0 || height == 0 {
        return Err(malformed(format, "a zero width or height"));
    }
    Ok(ImageSize {
        format,
        width,
        height,
    })
}

fn size_of<S: Source + ?Sized>(src: &S) -> Result<ImageSize, MediaError> {
    let mut head = [0u8; 12];
    let mut got = head.len();
    if !src.read(0, &mut head) {
        // Shorter than 12 bytes: it can still start like a format (and be cut short).
        got = 0;
        while got < head.len() && src.read(got, &mut head[got..got + 1]) {
            got += 1;
        }
    }
    let head = &head[..got];
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(src)
    } else if head.starts_with(b"\xff\xd8\xff") {
        jpeg(src)
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        gif(src)
    } else if head.len() == 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        webp(src)
    } else {
        Err(MediaError::UnknownFormat)
    }
}

fn png<S: Source + ?Sized>(src: &S) -> Result<ImageSize, MediaError> {
    // Signature (8), IHDR length (4), "IHDR" (4), width (4), height (4): all big-endian.
    let mut b = [0u8; 24];
    if !src.read(0, &mut b) {
        return Err(malformed(ImageFormat::Png, "it ends before the IHDR chunk"));
    }
    if &b[12..16] != b"IHDR" {
        return Err(malformed(ImageFormat::Png, "the first chunk is not IHDR"));
    }
    let width = u32::from_be_bytes([b[16], b[17], b[18], b[19]]);
    let height = u32::from_be_bytes([b[20], b[21], b[22], b[23]]);
    if width > i32::MAX as u32 || height > i32::MAX as u32 {
        return Err(malformed(ImageFormat::Png, "a size above 2^31 - 1"));
    }
    sized(ImageFormat::Png, width, height)
}

fn gif<S: Source + ?Sized>(src: &S) -> Result<ImageSize, MediaError> {
    // "GIF8?a" (6), logical screen width (2), height (2): little-endian.
    let mut b = [0u8; 10];
    if !src.read(0, &mut b) {
        return Err(malformed(
            ImageFormat::Gif,
            "it ends before the logical screen",
        ));
    }
    let width = u16::from_le_bytes([b[6], b[7]]);
    let height = u16::from_le_bytes([b[8], b[9]]);
    sized(ImageFormat::Gif, width.into(), height.into())
}

fn webp<S: Source + ?Sized>(src: &S) -> Result<ImageSize, MediaError> {
    // RIFF header (12), chunk FourCC (4), chunk size (4), then the chunk's own header.
    let mut b = [0u8; 30];
    if !src.read(0, &mut b) {
        return Err(malformed(
            ImageFormat::Webp,
            "it ends before the first chunk's header",
        ));
    }
    let le24 = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], 0]);
    match &b[12..16] {
        b"VP8 " => {
            // Lossy: frame tag (3), start code 9d 01 2a, then 14-bit width and height.
            if b[23..26] != [0x9d, 0x01, 0x2a] {
                return Err(malformed(
                    ImageFormat::Webp,
                    "a VP8 frame without its start code",
                ));
            }
            let width = u16::from_le_bytes([b[26], b[27]]) & 0x3fff;
            let height = u16::from_le_bytes([b[28], b[29]]) & 0x3fff;
            sized(ImageFormat::Webp, width.into(), height.into())
        }
        b"VP8L" => {
            // Lossless: signature 0x2f, then width - 1 and height - 1 in 14 bits each.
            if b[20] != 0x2f {
                return Err(malformed(
                    ImageFormat::Webp,
                    "a VP8L chunk without its signature",
                ));
            }
            let bits = u32::from_le_bytes([b[21], b[22], b[23], b[24]]);
            sized(
                ImageFormat::Webp,
                (bits & 0x3fff) + 1,
                ((bits >> 14) & 0x3fff) + 1,
            )
        }
        // Extended: flags (4), then canvas width - 1 and height - 1 in 24 bits each.
        b"VP8X" => sized(ImageFormat::Webp, le24(24) + 1, le24(27) + 1),
        _ => Err(malformed(
            ImageFormat::Webp,
            "no VP8, VP8L or VP8X chunk first",
        )),
    }
}

/// Segments a JPEG header may have before its frame: a bound, so that a hostile file
/// costs a bounded number of reads.
const JPEG_MAX_SEGMENTS: usize = 4_096;

fn jpeg<S: Source + ?Sized>(src: &S) -> Result<ImageSize, MediaError> {
    let cut = || {
        malformed(
            ImageFormat::Jpeg,
            "it ends before the start-of-frame segment",
        )
    };
    let mut at = 2; // after SOI (ff d8)
    for _ in 0..JPEG_MAX_SEGMENTS {
        let mut marker = [0u8; 2];
        if !src.read(at, &mut marker) {
            return Err(cut());
        }
        if marker[0] != 0xff {
            return Err(malformed(
                ImageFormat::Jpeg,
                "a segment that does not start with a marker",
            ));
        }
        let kind = marker[1];
        match kind {
            // Fill bytes: a marker may be preceded by any number of 0xff.
            0xff => {
                at += 1;
                continue;
            }
            // Markers without a length: TEM, RSTn, SOI.
            0x01 | 0xd0..=0xd8 => {
                at += 2;
                continue;
            }
            0xd9 | 0xda => {
                return Err(malformed(
                    ImageFormat::Jpeg,
                    "the image data starts before any frame",
                ))
            }
            _ => {}
        }
        let mut len = [0u8; 2];
        if !src.read(at + 2, &mut len) {
            return Err(cut());
        }
        let len = usize::from(u16::from_be_bytes(len));
        if len < 2 {
            return Err(malformed(
                ImageFormat::Jpeg,
                "a segment shorter than its length field",
            ));
        }
        // SOF0–SOF15 carry the frame size, except DHT (c4), JPG (c8) and DAC (cc).
        if (0xc0..=0xcf).contains(&kind) && !matches!(kind, 0xc4 | 0xc8 | 0xcc) {
            // Length (2), precision (1), height (2), width (2).
            let mut frame = [0u8; 5];
            if len < 7 || !src.read(at + 4, &mut frame) {
                return Err(cut());
            }
            let height = u16::from_be_bytes([frame[1], frame[2]]);
            let width = u16::from_be_bytes([frame[3], frame[4]]);
            if height == 0 {
                // A height of 0 is defined later (DNL): not in the header.
                return Err(malformed(
                    ImageFormat::Jpeg,
                    "the frame's height is defined later (DNL)",
                ));
            }
            return sized(ImageFormat::Jpeg, width.into(), height.into());
        }
        at += 2 + len;
    }
    Err(malformed(
        ImageFormat::Jpeg,
        "too many segments before the frame",
    ))
}

/// OpenAI's `detail` setting of an image part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Detail {
    /// A fixed 85 tokens.
    Low,
    /// Tiles of the image as it is shrunk for the model.
    High,
    /// The model chooses; counted as `High`, its upper bound.
    Auto,
}

impl Detail {
    /// Parses `"low"`, `"high"` or `"auto"`.
    pub fn parse(text: &str) -> Option<Detail> {
        match text {
            "low" => Some(Detail::Low),
            "high" => Some(Detail::High),
            "auto" => Some(Detail::Auto),
            _ => None,
        }
    }
}

/// OpenAI: tokens of any image at low detail, and the base of every high-detail one.
pub const OPENAI_IMAGE_BASE_TOKENS: usize = 85;
/// OpenAI: tokens per 512-pixel tile at high detail.
pub const OPENAI_IMAGE_TILE_TOKENS: usize = 170;
/// OpenAI: the most tiles a high-detail image can have (768 × 2048 after shrinking).
pub const OPENAI_IMAGE_MAX_TILES: usize = 8;
/// Anthropic: the most an image can cost (larger ones are shrunk first).
pub const ANTHROPIC_IMAGE_MAX_TOKENS: usize = 1_600;
/// Anthropic: the longest edge an image keeps.
pub const ANTHROPIC_IMAGE_MAX_EDGE: u32 = 1_568;
/// Anthropic: pixels per token.
pub const ANTHROPIC_PIXELS_PER_TOKEN: u64 = 750;

/// `(a × num) / den`, rounded down, in integers.
fn scale(a: u32, num: u32, den: u32) -> u32 {
    let v = u64::from(a) * u64::from(num) / u64::from(den.max(1));
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The size OpenAI tiles at high detail: fit into 2048×2048, then shortest side at most
/// 768 (images are only ever shrunk, with their aspect ratio kept; each side rounded
/// down, never below one pixel).
pub fn openai_high_detail_size(width: u32, height: u32) -> (u32, u32) {
    let (mut w, mut h) = (width.max(1), height.max(1));
    let long = w.max(h);
    if long > 2048 {
        (w, h) = (scale(w, 2048, long).max(1), scale(h, 2048, long).max(1));
    }
    let short = w.min(h);
    if short > 768 {
        (w, h) = (scale(w, 768, short).max(1), scale(h, 768, short).max(1));
    }
    (w, h)
}

/// OpenAI's tokens for one image of `size` pixels (`None`: known only by URL, counted at
/// the maximum of its detail level).
pub fn openai_image_tokens(size: Option<(u32, u32)>, detail: Detail) -> usize {
    if detail == Detail::Low {
        return OPENAI_IMAGE_BASE_TOKENS;
    }
    let tiles = match size {
        None => OPENAI_IMAGE_MAX_TILES,
        Some((width, height)) => {
            let (w, h) = openai_high_detail_size(width, height);
            (w.div_ceil(512) as usize) * (h.div_ceil(512) as usize)
        }
    };
    OPENAI_IMAGE_BASE_TOKENS + OPENAI_IMAGE_TILE_TOKENS * tiles
}

/// The size Anthropic measures: long edge at most 1,568 pixels and at most 1,600 tokens
/// of area, aspect ratio kept (only ever shrunk; sides rounded down, at least 1).
pub fn anthropic_image_size(width: u32, height: u32) -> (u32, u32) {
    let (mut w, mut h) = (width.max(1), height.max(1));
    let long = w.max(h);
    if long > ANTHROPIC_IMAGE_MAX_EDGE {
        (w, h) = (
            scale(w, ANTHROPIC_IMAGE_MAX_EDGE, long).max(1),
            scale(h, ANTHROPIC_IMAGE_MAX_EDGE, long).max(1),
        );
    }
    let max_area = ANTHROPIC_IMAGE_MAX_TOKENS as u64 * ANTHROPIC_PIXELS_PER_TOKEN;
    let area = u64::from(w) * u64::from(h);
    if area > max_area {
        // Shrink both sides by sqrt(max_area / area); IEEE sqrt is correctly rounded, so
        // every platform agrees. Step down until the area fits, in case of rounding up.
        let f = (max_area as f64 / area as f64).sqrt();
        let (mut sw, mut sh) = (
            ((f64::from(w) * f) as u32).max(1),
            ((f64::from(h) * f) as u32).max(1),
        );
        while u64::from(sw) * u64::from(sh) > max_area && sw.max(sh) > 1 {
            if sw >= sh {
                sw -= 1;
            } else {
                sh -= 1;
            }
        }
        (w, h) = (sw, sh);
    }
    (w, h)
}

/// Anthropic's tokens for one image of `size` pixels (`None`: known only by URL, counted
/// at the most an image can cost).
pub fn anthropic_image_tokens(size: Option<(u32, u32)>) -> usize {
    match size {
        None => ANTHROPIC_IMAGE_MAX_TOKENS,
        Some((width, height)) => {
            let (w, h) = anthropic_image_size(width, height);
            let area = u64::from(w) * u64::from(h);
            usize::try_from(area.div_ceil(ANTHROPIC_PIXELS_PER_TOKEN))
                .unwrap_or(ANTHROPIC_IMAGE_MAX_TOKENS)
                .min(ANTHROPIC_IMAGE_MAX_TOKENS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_bytes(w: u32, h: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    fn jpeg_bytes(w: u16, h: u16, app_len: usize) -> Vec<u8> {
        let mut b = vec![0xff, 0xd8];
        // An APP1 segment of app_len payload bytes, as EXIF data would be.
        b.extend_from_slice(&[0xff, 0xe1]);
        b.extend_from_slice(&((app_len + 2) as u16).to_be_bytes());
        b.extend(std::iter::repeat_n(0xab, app_len));
        b.extend_from_slice(&[0xff, 0xff, 0xc2, 0, 17, 8]);
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&[3; 12]);
        b.extend_from_slice(&[0xff, 0xda]);
        b
    }

    fn data_url(kind: &str, bytes: &[u8]) -> String {
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        format!("data:image/{kind};base64,{text}")
    }

    #[test]
    fn every_format_reads_its_size() {
        assert_eq!(image_size(&png_bytes(640, 480)).unwrap().dims(), (640, 480));
        assert_eq!(
            image_size(&jpeg_bytes(1920, 1080, 5000)).unwrap(),
            ImageSize {
                format: ImageFormat::Jpeg,
                width: 1920,
                height: 1080
            }
        );
        let gif = b"GIF89a\x40\x01\xf0\x00\xf7\0\0";
        assert_eq!(image_size(gif).unwrap().dims(), (320, 240));
        let mut vp8x = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        vp8x.extend_from_slice(&[0x7f, 0x07, 0, 0x37, 0x04, 0]); // 1920 - 1, 1080 - 1
        assert_eq!(image_size(&vp8x).unwrap().dims(), (1920, 1080));
        let mut vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        let bits: u32 = 99 | (49 << 14);
        vp8l.extend_from_slice(&bits.to_le_bytes());
        vp8l.extend_from_slice(&[0; 5]);
        assert_eq!(image_size(&vp8l).unwrap().dims(), (100, 50));
        let mut vp8 = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0\0\0\0\x9d\x01\x2a".to_vec();
        vp8.extend_from_slice(&(800u16 | 0x4000).to_le_bytes()); // scale bits ignored
        vp8.extend_from_slice(&600u16.to_le_bytes());
        assert_eq!(image_size(&vp8).unwrap().dims(), (800, 600));
    }

    #[test]
    fn data_urls_decode_only_the_header() {
        for bytes in [png_bytes(3000, 17), jpeg_bytes(17, 3000, 40_000)] {
            let direct = image_size(&bytes).unwrap();
            for cut in [bytes.len(), bytes.len() - 1, bytes.len() - 2] {
                // Any tail after the header is irrelevant, even one base64 cannot end on.
                let mut url = data_url("x", &bytes);
                url.truncate(url.len() - (bytes.len() - cut));
                let _ = image_size_from_data_url(&url);
            }
            assert_eq!(
                image_size_from_data_url(&data_url("png", &bytes)).unwrap(),
                direct
            );
        }
        assert!(matches!(
            image_size_from_data_url("data:image/png,rawtext"),
            Err(MediaError::BadDataUrl { .. })
        ));
        assert!(matches!(
            image_size_from_data_url("https://example.com/a.png"),
            Err(MediaError::BadDataUrl { .. })
        ));
        assert!(matches!(
            image_size_from_data_url("data:image/png;base64,!!!!!!!!!!!!!!!!!!!!!!!!"),
            Err(MediaError::UnknownFormat)
        ));
    }

    #[test]
    fn damaged_headers_are_errors_never_panics() {
        let png = png_bytes(640, 480);
        for n in 0..png.len() {
            let cut = &png[..n];
            if n < 8 {
                assert_eq!(image_size(cut), Err(MediaError::UnknownFormat), "{n}");
            } else if n < 24 {
                assert!(
                    matches!(image_size(cut), Err(MediaError::Malformed { .. })),
                    "{n}"
                );
            }
        }
        let jpeg = jpeg_bytes(10, 10, 100);
        // SOI, APP1 (4 + 100), fill byte, SOF marker, length, precision, height, width.
        for n in 3..2 + 104 + 10 {
            assert!(image_size(&jpeg[..n]).is_err(), "{n}");
        }
        assert!(image_size(&png_bytes(0, 10)).is_err());
        assert!(image_size(b"\xff\xd8\xff\xda").is_err());
        assert_eq!(image_size(b""), Err(MediaError::UnknownFormat));
    }

    #[test]
    fn openai_matches_the_documented_examples() {
        // OpenAI's vision guide: 1024² high = 765; 2048×4096 high = 1105; low = 85.
        assert_eq!(openai_image_tokens(Some((1024, 1024)), Detail::High), 765);
        assert_eq!(openai_image_tokens(Some((2048, 4096)), Detail::High), 1105);
        assert_eq!(openai_image_tokens(Some((4096, 8192)), Detail::Low), 85);
        assert_eq!(openai_image_tokens(Some((512, 512)), Detail::Auto), 255);
        assert_eq!(openai_image_tokens(Some((513, 512)), Detail::High), 425);
        // A tall screenshot: 1000×4000 → 512×2048 → 1 × 4 tiles.
        assert_eq!(openai_high_detail_size(1000, 4000), (512, 2048));
        assert_eq!(openai_image_tokens(None, Detail::High), 1445);
        for (w, h) in [
            (1, 1),
            (1, 100_000),
            (100_000, 1),
            (3000, 1200),
            (u32::MAX, u32::MAX),
        ] {
            let t = openai_image_tokens(Some((w, h)), Detail::High);
            assert!((255..=1445).contains(&t), "{w}×{h}: {t}");
        }
    }

    #[test]
    fn anthropic_shrinks_then_measures_area() {
        // Anthropic's table: 1092² ≈ 1590 tokens, 200×200 ≈ 54.
        assert_eq!(anthropic_image_tokens(Some((1092, 1092))), 1590);
        assert_eq!(anthropic_image_tokens(Some((200, 200))), 54);
        assert_eq!(anthropic_image_size(3136, 100), (1568, 50));
        // 8000² → 1568² (long edge) → 1095² (1,600 tokens of area at most).
        assert_eq!(anthropic_image_size(8000, 8000), (1095, 1095));
        assert_eq!(anthropic_image_tokens(Some((8000, 8000))), 1599);
        assert_eq!(anthropic_image_tokens(None), 1600);
        for (w, h) in [(1, 1), (1, 100_000), (4000, 3000), (u32::MAX, 7)] {
            let (sw, sh) = anthropic_image_size(w, h);
            assert!(sw.max(sh) <= ANTHROPIC_IMAGE_MAX_EDGE, "{w}×{h}");
            assert!(anthropic_image_tokens(Some((w, h))) <= 1600);
        }
    }
}
