//! What a provider request costs (SPEC §1): the framing and media allowances, and a
//! counter that adds up a request the way the budget counts it. The Python package reads
//! these constants from here; a Rust host counts its requests with [`RequestCount`].
//! Images count by the providers' documented rules ([`super::media`]).

use super::media::{self, Detail};
use super::{Encoding, TokenError};

/// Tokens per message and per advertised tool schema.
pub const FRAMING_TOKENS: usize = 8;
/// Tokens per request on top of its messages and tools.
pub const REQUEST_TOKENS: usize = 1;
/// Allowance for a media part that is neither an image nor a paged document (audio, a
/// file of unknown kind): images count by [`media`]'s rules, documents per page.
pub const OTHER_MEDIA_TOKENS: usize = 1_024;
/// Allowance per page of a document part.
pub const PDF_PAGE_TOKENS: usize = 3_000;
/// Pages of one document part that are counted at most.
pub const PDF_MAX_PAGES: usize = 100;

/// The running count of one request: system text, messages, media parts and every
/// advertised tool schema, each with its framing.
///
/// ```
/// use ctxbudget::tokens::media::Detail;
/// use ctxbudget::tokens::request::{RequestCount, FRAMING_TOKENS};
/// use ctxbudget::Encoding;
///
/// let enc = Encoding::new("o200k_base")?;
/// let mut request = RequestCount::new(&enc);
/// // A 1024×1024 image at high detail: four tiles, 85 + 4 × 170.
/// request.system("You are terse.").message("Hi").image(Some((1024, 1024)), Detail::High);
/// request.tool_schema(r#"{"name": "read_file", "parameters": {}}"#)?;
/// let expected = 1 + 3 * FRAMING_TOKENS + enc.count("You are terse.") + enc.count("Hi")
///     + 765 + enc.count_json(r#"{"name": "read_file", "parameters": {}}"#)?;
/// assert_eq!(request.total(), expected);
/// # Ok::<(), ctxbudget::TokenError>(())
/// ```
#[derive(Debug)]
pub struct RequestCount<'a> {
    encoding: &'a Encoding,
    total: usize,
}

impl<'a> RequestCount<'a> {
    /// An empty request (its own [`REQUEST_TOKENS`]).
    pub fn new(encoding: &'a Encoding) -> Self {
        RequestCount {
            encoding,
            total: REQUEST_TOKENS,
        }
    }

    /// The system text, framed like a message (nothing for an empty one).
    pub fn system(&mut self, text: &str) -> &mut Self {
        if !text.is_empty() {
            self.message(text);
        }
        self
    }

    /// One message whose content is `text`.
    pub fn message(&mut self, text: &str) -> &mut Self {
        self.total += FRAMING_TOKENS + self.encoding.count(text);
        self
    }

    /// More text in the current message (another text part; no framing).
    pub fn text_part(&mut self, text: &str) -> &mut Self {
        self.total += self.encoding.count(text);
        self
    }

    /// An image part of the current message, by OpenAI's tile rule (`size` `None`:
    /// known only by URL, counted at its detail level's maximum).
    pub fn image(&mut self, size: Option<(u32, u32)>, detail: Detail) -> &mut Self {
        self.total += media::openai_image_tokens(size, detail);
        self
    }

    /// A media part that is neither an image nor a paged document.
    pub fn other_media(&mut self) -> &mut Self {
        self.total += OTHER_MEDIA_TOKENS;
        self
    }

    /// A document part of `pages` pages (at most [`PDF_MAX_PAGES`] count).
    pub fn document(&mut self, pages: usize) -> &mut Self {
        self.total += PDF_PAGE_TOKENS * pages.min(PDF_MAX_PAGES);
        self
    }

    /// One advertised tool schema, as the JSON text that is sent.
    pub fn tool_schema(&mut self, json_text: &str) -> Result<&mut Self, TokenError> {
        self.total += FRAMING_TOKENS + self.encoding.count_json(json_text)?;
        Ok(self)
    }

    /// The request's tokens so far.
    pub fn total(&self) -> usize {
        self.total
    }
}
