//! What a provider request costs (SPEC §1, Request counting): a request counted the way
//! OpenAI's chat format renders it — each message framed by `<|start|>{role}<|message|>`
//! and `<|end|>` (the cookbook's 3 tokens, plus the role's own and, for a `name`, one more
//! and the name's), a tool call as its function's name and arguments, function tools as
//! the TypeScript namespace the model reads ([`super::typescript`]), and 3 tokens that
//! prime the reply. Images count by the providers' rules ([`super::media`]), PDF pages by
//! theirs ([`super::pdf`]). Each [`Profile`] says which rules a provider's requests
//! follow; the `harmony` profile counts its own rendering ([`super::harmony`]). The
//! Python package counts with the same code; a Rust host counts its requests with
//! [`request_tokens`] or [`RequestCount`].

use std::collections::HashMap;

use serde_json::Value;

use super::media::{self, Detail};
use super::pdf::{self, PdfRule};
use super::profile::Profile;
use super::typescript::{tools_section, FunctionTool};
use super::{Encoding, TokenError};

/// Tokens that frame every message besides its role: `<|start|>`, `<|message|>`,
/// `<|end|>` (OpenAI cookbook: 3 per message).
pub const MESSAGE_TOKENS: usize = 3;
/// Tokens a message's `name` adds besides the name's own (cookbook: 1).
pub const NAME_TOKENS: usize = 1;
/// Tokens that prime the reply, once per request: `<|start|>assistant<|message|>`.
pub const REPLY_TOKENS: usize = 3;
/// Tokens that frame one tool call besides its function's name and arguments (a call is
/// rendered as a message of its own addressed to the function).
pub const CALL_TOKENS: usize = 3;
/// Tokens that frame the tools section besides its text, once per request that
/// advertises functions. With [`FUNCTION_TOKENS`], fitted so that the harmony
/// rendering's count agrees with the OpenAI cookbook's tool constants for gpt-4o, which
/// were measured against the API's `prompt_tokens`: on 1–20 realistic tool schemas (the
/// corpus of `tests/request_corpus.py`) the count is within 1.5% of the cookbook's.
pub const FUNCTIONS_TOKENS: usize = 0;
/// Tokens each function tool adds besides its rendered text (see [`FUNCTIONS_TOKENS`]).
pub const FUNCTION_TOKENS: usize = 2;
/// Allowance for a media part that is neither an image nor a paged document (audio, a
/// file of unknown kind): images count by [`media`]'s rules, documents per page
/// ([`pdf`]).
pub const OTHER_MEDIA_TOKENS: usize = 1_024;

/// A tool definition as a function tool, from the shapes hosts send: ctxbudget's neutral
/// `{"name", "description", "parameters"}`, OpenAI Chat's `{"type": "function",
/// "function": {...}}`, OpenAI Responses' `{"type": "function", "name", ...}` and
/// Anthropic's `{"name", "description", "input_schema"}`. `None` for anything else (a
/// provider's built-in tool), which counts as its JSON.
pub fn function_tool(tool: &Value) -> Option<FunctionTool<'_>> {
    let spec = match tool.get("function") {
        Some(inner) if tool.get("type").and_then(Value::as_str) == Some("function") => inner,
        _ => tool,
    };
    if let Some(kind) = spec.get("type").and_then(Value::as_str) {
        if kind != "function" {
            return None;
        }
    }
    let name = spec.get("name")?.as_str()?;
    let description = spec
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let parameters = spec
        .get("parameters")
        .or_else(|| spec.get("input_schema"))
        .filter(|p| !p.is_null());
    Some(FunctionTool {
        name,
        description,
        parameters,
    })
}

/// Tokens of the tools a request advertises: the function tools as one `# Tools` section
/// (with its framing), any other tool as its JSON (with a message's framing). Nothing for
/// no tools.
pub fn tools_tokens(encoding: &Encoding, tools: &[Value]) -> Result<usize, TokenError> {
    let mut functions = Vec::with_capacity(tools.len());
    let mut total = 0;
    for tool in tools {
        match function_tool(tool) {
            Some(f) => functions.push(f),
            None => total += MESSAGE_TOKENS + encoding.count_json(&tool.to_string())?,
        }
    }
    if !functions.is_empty() {
        total += FUNCTIONS_TOKENS
            + FUNCTION_TOKENS * functions.len()
            + encoding.count(&tools_section(&functions));
    }
    Ok(total)
}

/// [`tools_tokens`] of tool definitions given as one JSON array.
pub fn tools_tokens_json(encoding: &Encoding, json_text: &str) -> Result<usize, TokenError> {
    let tools: Vec<Value> =
        serde_json::from_str(json_text).map_err(|e| TokenError::InvalidJson {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
    tools_tokens(encoding, &tools)
}

/// Whose rule counts a request's images ([`media`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageRule {
    /// OpenAI's tiles by detail level.
    OpenAi,
    /// Anthropic's area rule (also for Anthropic-shaped image blocks under any rule).
    Anthropic,
}

impl ImageRule {
    /// Parses `"openai"` or `"anthropic"`.
    pub fn parse(text: &str) -> Option<ImageRule> {
        match text {
            "openai" => Some(ImageRule::OpenAi),
            "anthropic" => Some(ImageRule::Anthropic),
            _ => None,
        }
    }
}

/// Tokens of a request by `profile`: its reply priming, the system text as a system
/// message, the advertised tools and every message (see [`message_tokens`]); for
/// [`Profile::Harmony`], the harmony rendering's tokens ([`super::harmony`]).
pub fn request_tokens(
    encoding: &Encoding,
    system: Option<&str>,
    messages: &[Value],
    tools: &[Value],
    profile: Profile,
) -> Result<usize, TokenError> {
    if profile == Profile::Harmony {
        return super::harmony::request_tokens(encoding, system, messages, tools);
    }
    if profile == Profile::ChatTemplate {
        return super::template::request_tokens(encoding, system, messages, tools);
    }
    if let Some(version) = profile.mistral_version() {
        return super::mistral::request_tokens(encoding, version, system, messages, tools);
    }
    let mut total = REPLY_TOKENS + tools_tokens(encoding, tools)?;
    if let Some(text) = system.filter(|t| !t.is_empty()) {
        total += MESSAGE_TOKENS + encoding.count("system") + encoding.count(text);
    }
    let names = call_names(messages);
    for message in messages {
        total += framed_message_tokens(encoding, message, profile, &names)?;
    }
    Ok(total)
}

/// Tokens of `messages` by `profile`, each with its framing, without the request's reply
/// priming (nor, for harmony, its system and developer messages): [`message_tokens`]
/// summed, a tool result framed by the name of a call among `messages`.
pub fn messages_tokens(
    encoding: &Encoding,
    messages: &[Value],
    profile: Profile,
) -> Result<usize, TokenError> {
    if profile == Profile::Harmony {
        return messages.iter().try_fold(0, |sum, m| {
            Ok(sum + super::harmony::message_tokens(encoding, m)?)
        });
    }
    if profile == Profile::ChatTemplate {
        return super::template::messages_tokens(encoding, messages);
    }
    if let Some(version) = profile.mistral_version() {
        return super::mistral::messages_tokens(encoding, version, messages);
    }
    let names = call_names(messages);
    messages.iter().try_fold(0, |sum, m| {
        Ok(sum + framed_message_tokens(encoding, m, profile, &names)?)
    })
}

/// Tool-call ids → function names, from every call in `messages` (Chat's `tool_calls`
/// and Responses' `function_call` items): a result is framed by its function's name.
pub(crate) fn call_names(messages: &[Value]) -> HashMap<&str, &str> {
    let mut names = HashMap::new();
    for message in messages {
        let calls = message.get("tool_calls").and_then(Value::as_array);
        for call in calls.into_iter().flatten() {
            let spec = call.get("function").unwrap_or(call);
            if let (Some(id), Some(name)) = (
                call.get("id").and_then(Value::as_str),
                spec.get("name").and_then(Value::as_str),
            ) {
                names.insert(id, name);
            }
        }
        if message.get("type").and_then(Value::as_str) == Some("function_call") {
            if let (Some(id), Some(name)) = (
                message.get("call_id").and_then(Value::as_str),
                message.get("name").and_then(Value::as_str),
            ) {
                names.insert(id, name);
            }
        }
    }
    names
}

/// Tokens of a tool result's author: the function it answers, as harmony names a tool
/// message's author (`functions.NAME`); the role `tool` when the name is unknown.
fn result_author_tokens(encoding: &Encoding, name: Option<&str>) -> usize {
    match name.filter(|n| !n.is_empty()) {
        Some(name) => encoding.count(&format!("functions.{name}")),
        None => encoding.count("tool"),
    }
}

/// Tokens of one message as sent by `profile`, framing included, in any of the shapes
/// hosts send: OpenAI Chat messages (`content` text or parts, `name`, `tool_calls`),
/// OpenAI Responses items (`function_call`, `function_call_output`, messages; other
/// items as their JSON), Anthropic messages (`text`, `image`, `document`, `tool_use`,
/// `tool_result` blocks) and ctxbudget's own (a `media` list, `reasoning`).
///
/// Under [`Profile::OpenAiResponses`] an assistant message that only calls tools (no
/// content) is sent as its `function_call` items alone, without a message around them.
pub fn message_tokens(
    encoding: &Encoding,
    message: &Value,
    profile: Profile,
) -> Result<usize, TokenError> {
    if profile == Profile::Harmony {
        return super::harmony::message_tokens(encoding, message);
    }
    if profile == Profile::ChatTemplate {
        return super::template::messages_tokens(encoding, std::slice::from_ref(message));
    }
    if let Some(version) = profile.mistral_version() {
        return super::mistral::messages_tokens(encoding, version, std::slice::from_ref(message));
    }
    framed_message_tokens(
        encoding,
        message,
        profile,
        &call_names(std::slice::from_ref(message)),
    )
}

/// [`message_tokens`] with the request's call names (`names`) for its tool results.
fn framed_message_tokens(
    encoding: &Encoding,
    message: &Value,
    profile: Profile,
    names: &HashMap<&str, &str>,
) -> Result<usize, TokenError> {
    let Some(role) = message.get("role").and_then(Value::as_str) else {
        return item_tokens(encoding, message, profile, names);
    };
    let calls_only = profile == Profile::OpenAiResponses
        && role == "assistant"
        && message
            .get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|calls| !calls.is_empty())
        && is_empty_content(message.get("content"))
        && message.get("media").is_none();
    let mut total = if calls_only {
        0
    } else if role == "tool" {
        let name = message.get("name").and_then(Value::as_str).or_else(|| {
            let id = message.get("tool_call_id").and_then(Value::as_str)?;
            names.get(id).copied()
        });
        MESSAGE_TOKENS + result_author_tokens(encoding, name)
    } else {
        MESSAGE_TOKENS + encoding.count(role)
    };
    if role != "tool" {
        if let Some(name) = message.get("name").and_then(Value::as_str) {
            total += NAME_TOKENS + encoding.count(name);
        }
    }
    total += match message.get("content") {
        None | Some(Value::Null) => 0,
        Some(content) => content_tokens(encoding, content, profile)?,
    };
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let spec = call.get("function").unwrap_or(call);
        let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
        total += call_tokens(encoding, name, spec.get("arguments"));
    }
    for part in message
        .get("media")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        total += media_tokens(part, profile);
    }
    if let Some(reasoning) = message.get("reasoning").filter(|r| !r.is_null()) {
        total += encoding.count_json(&reasoning.to_string())?;
    }
    Ok(total)
}

/// Whether a message's content sends nothing (absent, null, empty text or no parts).
fn is_empty_content(content: Option<&Value>) -> bool {
    match content {
        None | Some(Value::Null) => true,
        Some(Value::String(text)) => text.is_empty(),
        Some(Value::Array(parts)) => parts.is_empty(),
        Some(_) => false,
    }
}

/// A Responses API item without a role.
fn item_tokens(
    encoding: &Encoding,
    item: &Value,
    profile: Profile,
    names: &HashMap<&str, &str>,
) -> Result<usize, TokenError> {
    Ok(match item.get("type").and_then(Value::as_str) {
        Some("function_call") => {
            let name = item.get("name").and_then(Value::as_str).unwrap_or("");
            call_tokens(encoding, name, item.get("arguments"))
        }
        Some("function_call_output") => {
            let name = item
                .get("call_id")
                .and_then(Value::as_str)
                .and_then(|id| names.get(id).copied())
                .or_else(|| item.get("name").and_then(Value::as_str));
            MESSAGE_TOKENS
                + result_author_tokens(encoding, name)
                + match item.get("output") {
                    Some(Value::String(text)) => encoding.count(text),
                    Some(output) => content_tokens(encoding, output, profile)?,
                    None => 0,
                }
        }
        // Reasoning, hosted tool calls and anything else: the JSON it is sent as.
        _ => MESSAGE_TOKENS + encoding.count_json(&item.to_string())?,
    })
}

/// A tool call: its name and arguments (a string as sent, anything else as compact JSON).
fn call_tokens(encoding: &Encoding, name: &str, arguments: Option<&Value>) -> usize {
    let args = match arguments {
        None | Some(Value::Null) => 0,
        Some(Value::String(text)) => encoding.count(text),
        Some(other) => encoding.count(&other.to_string()),
    };
    CALL_TOKENS + encoding.count(name) + args
}

const TEXT_PARTS: &[&str] = &["text", "input_text", "output_text"];

/// Message content: a string, or a list of parts (media by `profile`'s rules).
pub(crate) fn content_tokens(
    encoding: &Encoding,
    content: &Value,
    profile: Profile,
) -> Result<usize, TokenError> {
    let parts = match content {
        Value::String(text) => return Ok(encoding.count(text)),
        Value::Array(parts) => parts,
        other => return encoding.count_json(&other.to_string()),
    };
    let mut total = 0;
    for part in parts {
        let kind = part.get("type").and_then(Value::as_str);
        total += match (part, kind) {
            (Value::String(text), _) => encoding.count(text),
            (_, Some(k)) if TEXT_PARTS.contains(&k) => match part.get("text") {
                Some(Value::String(text)) => encoding.count(text),
                _ => encoding.count_json(&part.to_string())?,
            },
            (_, Some("refusal")) => str_field(encoding, part, "refusal"),
            (_, Some("thinking")) => str_field(encoding, part, "thinking"),
            (_, Some("tool_use")) => {
                let name = part.get("name").and_then(Value::as_str).unwrap_or("");
                call_tokens(encoding, name, part.get("input"))
            }
            (_, Some("tool_result")) => {
                MESSAGE_TOKENS
                    + match part.get("content") {
                        Some(inner) => content_tokens(encoding, inner, profile)?,
                        None => 0,
                    }
            }
            _ => match media_part_tokens(part, profile) {
                Some(tokens) => tokens,
                None => encoding.count_json(&part.to_string())?,
            },
        };
    }
    Ok(total)
}

fn str_field(encoding: &Encoding, part: &Value, key: &str) -> usize {
    part.get(key)
        .and_then(Value::as_str)
        .map_or(0, |t| encoding.count(t))
}

/// Tokens of a media part (ctxbudget's `media` list): an image or a document by
/// `profile`'s rules, anything else [`OTHER_MEDIA_TOKENS`].
pub(crate) fn media_tokens(part: &Value, profile: Profile) -> usize {
    media_part_tokens(part, profile).unwrap_or(OTHER_MEDIA_TOKENS)
}

/// Tokens of a content part that is an image or a document in any provider's shape;
/// `None` for any other part.
fn media_part_tokens(part: &Value, profile: Profile) -> Option<usize> {
    let images = profile.image_rule();
    let kind = part.get("type").and_then(Value::as_str)?;
    fn str_of(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str)
    }
    let detail = |v: Option<&Value>| str_of(v).and_then(Detail::parse).unwrap_or(Detail::Auto);
    match kind {
        "image_url" => {
            let r = part.get("image_url")?;
            let (url, d) = match r {
                Value::String(url) => (Some(url.as_str()), Detail::Auto),
                _ => (str_of(r.get("url")), detail(r.get("detail"))),
            };
            Some(rule_tokens(url_size(url), d, images))
        }
        "input_image" => Some(rule_tokens(
            url_size(str_of(part.get("image_url"))),
            detail(part.get("detail")),
            images,
        )),
        "image" => match part.get("source") {
            // Anthropic's block: Anthropic's rule, whatever the request's.
            Some(source @ Value::Object(_)) => {
                let size = (str_of(source.get("type")) == Some("base64"))
                    .then(|| str_of(source.get("data")))
                    .flatten()
                    .and_then(|data| media::image_size_from_base64(data).ok());
                Some(media::anthropic_image_tokens(size.map(|s| s.dims())))
            }
            _ => Some(rule_tokens(
                part_size(part),
                detail(part.get("detail")),
                images,
            )),
        },
        "media" => {
            let media_type = str_of(part.get("media_type")).unwrap_or("");
            if media_type == "image" || media_type.starts_with("image/") {
                let w = part.get("width").and_then(Value::as_u64);
                let h = part.get("height").and_then(Value::as_u64);
                if let (Some(w), Some(h)) = (w, h) {
                    if w > 0 && h > 0 {
                        let size = (clamp_u32(w), clamp_u32(h));
                        return Some(rule_tokens(Some(size), detail(part.get("detail")), images));
                    }
                }
                return Some(rule_tokens(
                    part_size(part),
                    detail(part.get("detail")),
                    images,
                ));
            }
            Some(document_tokens(part, profile.pdf_rule()))
        }
        // Anthropic's document block: Anthropic's rule, whatever the request's.
        "document" => Some(document_tokens(part, PdfRule::Anthropic)),
        "file" | "input_file" => Some(document_tokens(part, profile.pdf_rule())),
        _ => None,
    }
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A document part's tokens by `rule`: its `pages` as given, else the pages read from
/// its inline PDF (ctxbudget's `data`, OpenAI's `file_data` or `file.file_data`,
/// Anthropic's base64 `source`); a PDF whose pages cannot be read counts as one page.
/// A part that is not a PDF costs [`OTHER_MEDIA_TOKENS`].
fn document_tokens(part: &Value, rule: PdfRule) -> usize {
    if let Some(pages) = part.get("pages").and_then(Value::as_u64) {
        return pdf::pdf_tokens(usize::try_from(pages).unwrap_or(usize::MAX), rule);
    }
    let inline = part
        .get("data")
        .or_else(|| part.get("file_data"))
        .or_else(|| part.get("file").and_then(|f| f.get("file_data")))
        .or_else(|| part.get("source").and_then(|s| s.get("data")))
        .and_then(Value::as_str);
    let media_type = part
        .get("media_type")
        .or_else(|| part.get("source").and_then(|s| s.get("media_type")))
        .and_then(Value::as_str)
        .unwrap_or("");
    match inline.map(pdf::page_count_from_base64) {
        Some(Ok(pages)) => pdf::pdf_tokens(pages, rule),
        Some(Err(pdf::PdfError::PagesUnreadable)) => pdf::pdf_tokens(1, rule),
        _ if media_type == "application/pdf" => pdf::pdf_tokens(1, rule),
        _ => OTHER_MEDIA_TOKENS,
    }
}

/// The size of an image given by URL: a `data:` URL is sized from its header; any other
/// URL, or an unreadable header, is `None` (counted at the rule's maximum).
fn url_size(url: Option<&str>) -> Option<(u32, u32)> {
    let url = url.filter(|u| media::is_data_url(u))?;
    media::image_size_from_data_url(url).ok().map(|s| s.dims())
}

/// The size of a neutral image part's image: its `url`, or its `data`/`base64` (base64
/// text, read in place, or a data URL).
fn part_size(part: &Value) -> Option<(u32, u32)> {
    if let Some(url) = part.get("url").and_then(Value::as_str) {
        return url_size(Some(url));
    }
    let data = part
        .get("data")
        .or_else(|| part.get("base64"))
        .and_then(Value::as_str)?;
    let size = if media::is_data_url(data) {
        media::image_size_from_data_url(data)
    } else {
        media::image_size_from_base64(data)
    };
    size.ok().map(|s| s.dims())
}

fn rule_tokens(size: Option<(u32, u32)>, detail: Detail, images: ImageRule) -> usize {
    match images {
        ImageRule::OpenAi => media::openai_image_tokens(size, detail),
        ImageRule::Anthropic => media::anthropic_image_tokens(size),
    }
}

/// The running count of one request: system text, messages, tool calls, media parts and
/// the advertised tools, each with its framing.
///
/// ```
/// use ctxbudget::tokens::media::Detail;
/// use ctxbudget::tokens::request::{RequestCount, MESSAGE_TOKENS, REPLY_TOKENS};
/// use ctxbudget::Encoding;
///
/// let enc = Encoding::new("o200k_base")?;
/// let mut request = RequestCount::new(&enc);
/// // A 1024×1024 image at high detail: four tiles, 85 + 4 × 170.
/// request.system("You are terse.").message("user", "Hi").image(Some((1024, 1024)), Detail::High);
/// let expected = REPLY_TOKENS
///     + 2 * MESSAGE_TOKENS + enc.count("system") + enc.count("You are terse.")
///     + enc.count("user") + enc.count("Hi") + 765;
/// assert_eq!(request.total(), expected);
/// # Ok::<(), ctxbudget::TokenError>(())
/// ```
#[derive(Debug)]
pub struct RequestCount<'a> {
    encoding: &'a Encoding,
    total: usize,
}

impl<'a> RequestCount<'a> {
    /// An empty request (its [`REPLY_TOKENS`]).
    pub fn new(encoding: &'a Encoding) -> Self {
        RequestCount {
            encoding,
            total: REPLY_TOKENS,
        }
    }

    /// The system text, as a system message (nothing for an empty one).
    pub fn system(&mut self, text: &str) -> &mut Self {
        if !text.is_empty() {
            self.message("system", text);
        }
        self
    }

    /// One message from `role` whose content is `text`.
    pub fn message(&mut self, role: &str, text: &str) -> &mut Self {
        self.total += MESSAGE_TOKENS + self.encoding.count(role) + self.encoding.count(text);
        self
    }

    /// The current message's `name`.
    pub fn name(&mut self, name: &str) -> &mut Self {
        self.total += NAME_TOKENS + self.encoding.count(name);
        self
    }

    /// More text in the current message (another text part; no framing).
    pub fn text_part(&mut self, text: &str) -> &mut Self {
        self.total += self.encoding.count(text);
        self
    }

    /// A tool call: its function's name and its arguments as the JSON text sent.
    pub fn tool_call(&mut self, name: &str, arguments: &str) -> &mut Self {
        self.total += CALL_TOKENS + self.encoding.count(name) + self.encoding.count(arguments);
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

    /// A PDF document part of `pages` pages, by OpenAI's rule (at most
    /// [`pdf::PDF_MAX_PAGES`] count).
    pub fn document(&mut self, pages: usize) -> &mut Self {
        self.total += pdf::pdf_tokens(pages, PdfRule::OpenAi);
        self
    }

    /// The tools the request advertises, each a JSON definition (see [`tools_tokens`]).
    pub fn tools(&mut self, tools: &[Value]) -> Result<&mut Self, TokenError> {
        self.total += tools_tokens(self.encoding, tools)?;
        Ok(self)
    }

    /// The request's tokens so far.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_tool_shape_is_the_same_function() {
        let params = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let shapes = [
            json!({"name": "find", "description": "Finds.", "parameters": params}),
            json!({"type": "function", "function": {"name": "find", "description": "Finds.", "parameters": params}}),
            json!({"type": "function", "name": "find", "description": "Finds.", "parameters": params, "strict": true}),
            json!({"name": "find", "description": "Finds.", "input_schema": params}),
        ];
        let enc = Encoding::new("o200k_base").unwrap_or_else(|e| panic!("{e}"));
        let counts: Vec<usize> = shapes
            .iter()
            .map(|t| tools_tokens(&enc, std::slice::from_ref(t)).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
        let builtin = json!({"type": "web_search_preview"});
        assert!(function_tool(&builtin).is_none());
        assert_eq!(tools_tokens(&enc, &[]).unwrap_or(1), 0);
    }
}
