//! PDF documents in a request: their page count, read from the file's bytes without a
//! PDF library, and what a page costs by each provider's documented rule (SPEC §1,
//! Request counting).
//!
//! The page count is the number of page objects (`/Type /Page`, not `/Pages`); where
//! the page objects are not readable as text (packed into compressed object streams),
//! the largest `/Count` of a page tree or a linearized file's `/N` is used. A file that
//! does not start like a PDF, or whose pages none of these reveal, is a typed
//! [`PdfError`] (a request then counts the document as one page: see
//! [`super::request`]).
//!
//! ```
//! use ctxbudget::tokens::pdf::{page_count, pdf_tokens, PdfRule};
//!
//! let pdf = b"%PDF-1.4\n1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >> endobj\n\
//!     2 0 obj << /Type /Page /Parent 1 0 R >> endobj\n\
//!     3 0 obj << /Type/Page /Parent 1 0 R >> endobj\ntrailer << /Root 4 0 R >>\n%%EOF";
//! assert_eq!(page_count(pdf)?, 2);
//! assert_eq!(pdf_tokens(2, PdfRule::Gemini), 2 * 258);
//! # Ok::<(), ctxbudget::tokens::pdf::PdfError>(())
//! ```

use super::media::{
    ANTHROPIC_IMAGE_MAX_TOKENS, OPENAI_IMAGE_BASE_TOKENS, OPENAI_IMAGE_MAX_TILES,
    OPENAI_IMAGE_TILE_TOKENS,
};

/// Why a document's pages could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PdfError {
    /// The bytes do not start with a PDF header (`%PDF-`).
    #[error(
        "not a PDF (no `%PDF-` header in its first 1,024 bytes); count it as the file \
         kind it is, or pass its page count"
    )]
    NotPdf,
    /// A PDF whose page objects are all inside compressed object streams, with no page
    /// tree count in plain text.
    #[error(
        "the PDF's pages are not readable without decompressing it (its page objects are \
         in compressed object streams); pass its page count"
    )]
    PagesUnreadable,
    /// Base64 text (or a `data:` URL) that does not decode.
    #[error(
        "the document's data is not valid base64 ({reason}); pass its bytes or its page count"
    )]
    BadBase64 {
        /// What the decoder found wrong.
        reason: String,
    },
}

/// Whose rule counts a document's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PdfRule {
    /// OpenAI: the extracted text and an image of each page.
    OpenAi,
    /// Anthropic: each page's text and the page as an image.
    Anthropic,
    /// Gemini: a flat cost per page.
    Gemini,
}

/// Pages of one document that count at most: Anthropic's documented maximum per
/// request (100 pages); OpenAI and Gemini count at least as many.
pub const PDF_MAX_PAGES: usize = 100;

/// Text tokens of one page, upper bound. Anthropic's PDF guide: "each page typically
/// uses 1,500-3,000 tokens per page depending on content density" — the range's upper
/// end. OpenAI's file-input guide puts "the extracted text and an image of each page"
/// into the context without a per-page figure, so the same upper bound stands for its
/// text.
pub const PDF_PAGE_TEXT_TOKENS: usize = 3_000;

/// Tokens of one page for Gemini: "each document page is equivalent to 258 tokens"
/// (Gemini API, document understanding).
pub const GEMINI_PDF_PAGE_TOKENS: usize = 258;

/// Tokens of one page by `rule`: text plus the page's image for OpenAI (the image at
/// its high-detail maximum, the page's rendered size not being documented) and
/// Anthropic (the image at its documented maximum), a flat 258 for Gemini.
pub const fn pdf_page_tokens(rule: PdfRule) -> usize {
    match rule {
        PdfRule::OpenAi => {
            PDF_PAGE_TEXT_TOKENS
                + OPENAI_IMAGE_BASE_TOKENS
                + OPENAI_IMAGE_TILE_TOKENS * OPENAI_IMAGE_MAX_TILES
        }
        PdfRule::Anthropic => PDF_PAGE_TEXT_TOKENS + ANTHROPIC_IMAGE_MAX_TOKENS,
        PdfRule::Gemini => GEMINI_PDF_PAGE_TOKENS,
    }
}

/// Tokens of a document of `pages` pages (at most [`PDF_MAX_PAGES`] count).
pub fn pdf_tokens(pages: usize, rule: PdfRule) -> usize {
    pdf_page_tokens(rule) * pages.min(PDF_MAX_PAGES)
}

/// The number of pages of the PDF in `bytes`.
pub fn page_count(bytes: &[u8]) -> Result<usize, PdfError> {
    let head = &bytes[..bytes.len().min(1_024)];
    if find(head, b"%PDF-").is_none() {
        return Err(PdfError::NotPdf);
    }
    let objects = page_objects(bytes);
    if objects > 0 {
        return Ok(objects);
    }
    tree_count(bytes)
        .filter(|&n| n > 0)
        .ok_or(PdfError::PagesUnreadable)
}

/// The number of pages of a PDF given as base64 text or as a base64 `data:` URL.
pub fn page_count_from_base64(text: &str) -> Result<usize, PdfError> {
    use base64::Engine;
    let data = match text.get(..5) {
        Some(scheme) if scheme.eq_ignore_ascii_case("data:") => {
            text.split_once(',').map_or("", |(_, data)| data)
        }
        _ => text,
    };
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let bytes = engine
        .decode(data.trim_end())
        .map_err(|e| PdfError::BadBase64 {
            reason: e.to_string(),
        })?;
    page_count(&bytes)
}

/// The byte offset of the first `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// PDF whitespace (ISO 32000-1, 7.2.2).
fn is_space(b: u8) -> bool {
    matches!(b, b'\0' | b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// Bytes that end a name: whitespace and the delimiters (ISO 32000-1, 7.2.2).
fn ends_name(b: u8) -> bool {
    is_space(b) || b"()<>[]{}/%".contains(&b)
}

/// The offsets just past each `key` (a name such as `/Type`) that is a whole name.
fn names<'a>(bytes: &'a [u8], key: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let mut from = 0;
    std::iter::from_fn(move || loop {
        let at = from + find(&bytes[from..], key)?;
        let end = at + key.len();
        from = end;
        if bytes.get(end).is_none_or(|&b| ends_name(b)) {
            return Some(end);
        }
    })
}

/// `from` moved past whitespace.
fn skip_space(bytes: &[u8], mut from: usize) -> usize {
    while bytes.get(from).is_some_and(|&b| is_space(b)) {
        from += 1;
    }
    from
}

/// The name that starts at `from` (after whitespace), without its `/`.
fn name_at(bytes: &[u8], from: usize) -> Option<&[u8]> {
    let start = skip_space(bytes, from);
    if bytes.get(start) != Some(&b'/') {
        return None;
    }
    let rest = &bytes[start + 1..];
    let len = rest
        .iter()
        .position(|&b| ends_name(b))
        .unwrap_or(rest.len());
    Some(&rest[..len])
}

/// The unsigned integer that starts at `from` (after whitespace).
fn integer_at(bytes: &[u8], from: usize) -> Option<usize> {
    let start = skip_space(bytes, from);
    let digits = bytes[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 9 {
        return None;
    }
    std::str::from_utf8(&bytes[start..start + digits])
        .ok()?
        .parse()
        .ok()
}

/// Objects whose `/Type` is `/Page`.
fn page_objects(bytes: &[u8]) -> usize {
    names(bytes, b"/Type")
        .filter(|&end| name_at(bytes, end) == Some(b"Page"))
        .count()
}

/// The pages a page tree or a linearization dictionary states: the largest `/Count`
/// in a `/Type /Pages` dictionary (the root's is the whole document's), else a
/// linearized file's `/N`.
fn tree_count(bytes: &[u8]) -> Option<usize> {
    let mut best = None;
    for end in names(bytes, b"/Type").filter(|&e| name_at(bytes, e) == Some(b"Pages")) {
        // The dictionary around this /Type: from its last `<<` to its next `>>`.
        let open = bytes[..end]
            .windows(2)
            .rposition(|w| w == b"<<")
            .unwrap_or(0);
        let close = find(&bytes[end..], b">>").map_or(bytes.len(), |c| end + c);
        let dict = &bytes[open..close];
        if let Some(n) = names(dict, b"/Count").find_map(|e| integer_at(dict, e)) {
            best = best.max(Some(n));
        }
    }
    best.or_else(|| {
        let lin = names(bytes, b"/Linearized").next()?;
        let close = find(&bytes[lin..], b">>").map_or(bytes.len(), |c| lin + c);
        let dict = &bytes[lin..close];
        names(dict, b"/N").find_map(|e| integer_at(dict, e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdf(body: &str) -> Vec<u8> {
        format!("%PDF-1.7\n%\u{e2}\u{e3}\n{body}\ntrailer << /Root 1 0 R >>\n%%EOF\n").into_bytes()
    }

    #[test]
    fn counts_page_objects_not_page_trees() {
        let doc = pdf(
            "1 0 obj <</Type/Pages/Kids[2 0 R 3 0 R 4 0 R]/Count 3>> endobj \
             2 0 obj <</Type /Page>> endobj 3 0 obj <</Type\n/Page/Parent 1 0 R>> endobj \
             4 0 obj <</Parent 1 0 R /Type /Page >> endobj 5 0 obj <</Type /PageLabel>> endobj",
        );
        assert_eq!(page_count(&doc), Ok(3));
    }

    #[test]
    fn compressed_pages_fall_back_to_the_tree_count_or_linearization() {
        let tree = pdf("1 0 obj << /Type /Pages /Count 12 /Kids [5 0 R] >> endobj \
             2 0 obj << /Type /Pages /Count 4 >> endobj 9 0 obj << /Type /ObjStm /N 40 >> endobj");
        assert_eq!(page_count(&tree), Ok(12));
        let lin = pdf("1 0 obj << /Linearized 1 /L 9000 /N 7 /T 8000 >> endobj");
        assert_eq!(page_count(&lin), Ok(7));
        let none = pdf("1 0 obj << /Type /ObjStm /N 40 >> stream\nxx\nendstream endobj");
        assert_eq!(page_count(&none), Err(PdfError::PagesUnreadable));
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert_eq!(page_count(b""), Err(PdfError::NotPdf));
        assert_eq!(page_count(b"\x89PNG\r\n\x1a\n"), Err(PdfError::NotPdf));
        assert_eq!(page_count(b"%PDF-"), Err(PdfError::PagesUnreadable));
        assert_eq!(
            page_count(b"%PDF-1.4 /Type"),
            Err(PdfError::PagesUnreadable)
        );
        assert_eq!(
            page_count(b"%PDF-1.4 << /Type /Pages /Count 99999999999999 >>"),
            Err(PdfError::PagesUnreadable)
        );
        // Any bytes at all: an answer, never a panic.
        for len in 0..64 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            let mut doc = b"%PDF-".to_vec();
            doc.extend(&junk);
            let _ = page_count(&doc);
        }
    }

    #[test]
    fn base64_and_data_urls_decode() {
        use base64::Engine;
        let doc = pdf("1 0 obj <</Type /Page>> endobj");
        let b64 = base64::engine::general_purpose::STANDARD.encode(&doc);
        assert_eq!(page_count_from_base64(&b64), Ok(1));
        let url = format!("data:application/pdf;base64,{b64}");
        assert_eq!(page_count_from_base64(&url), Ok(1));
        assert!(matches!(
            page_count_from_base64("%%%"),
            Err(PdfError::BadBase64 { .. })
        ));
    }

    #[test]
    fn providers_rules() {
        assert_eq!(pdf_page_tokens(PdfRule::Anthropic), 4_600);
        assert_eq!(pdf_page_tokens(PdfRule::OpenAi), 3_000 + 1_445);
        assert_eq!(pdf_tokens(3, PdfRule::Gemini), 774);
        assert_eq!(pdf_tokens(500, PdfRule::Gemini), 25_800);
    }
}
