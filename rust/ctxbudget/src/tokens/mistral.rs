//! The `mistral_v3` and `mistral_v7` profiles: a request counted as exactly the tokens
//! `mistral-common`'s request encoder (`MistralTokenizer.encode_chat_completion`,
//! instruct tokenizer v3 or v7) produces for it — v3: the encoder of Mistral Nemo,
//! Pixtral 12B, Mistral 7B v0.3 and Mixtral 8x22B, over their tekken or SentencePiece v3
//! files; v7: Mistral Large 2411, Mistral Small 3 and the models whose files say v7.
//! The tests compare the two on generated conversations.
//!
//! A chat-shaped request becomes what an OpenAI-compatible server (vLLM) hands
//! `mistral-common`, then is normalized and encoded as `mistral-common` does:
//! - every system message's text joins one system prompt (`"\n\n"` between them),
//!   which opens the last user message's text;
//! - consecutive user messages are one message, their texts joined by `"\n\n"`, as are
//!   consecutive assistant messages and their tool calls; a conversation that does not
//!   open with a user message gets an empty one first;
//! - `<s>`, then each user message as `[INST]` text `[/INST]`, the function tools as
//!   `[AVAILABLE_TOOLS]` JSON `[/AVAILABLE_TOOLS]` before the last one;
//! - an assistant message's text (trailing spaces dropped) or its tool calls as
//!   `[TOOL_CALLS]` JSON (name, arguments, id), then `</s>` — none after a last
//!   assistant message, which the server sends as a prefix to continue;
//! - each tool result as `[TOOL_RESULTS]` JSON (content, call id) `[/TOOL_RESULTS]`,
//!   content and arguments that are JSON written as parsed JSON.
//!
//! v7 differs in three places: each system message stays where it is, as
//! `[SYSTEM_PROMPT]` text `[/SYSTEM_PROMPT]` (an empty one too), and no empty user
//! message opens a conversation; an assistant message's text comes before its
//! `[TOOL_CALLS]`; a tool result is `[TOOL_RESULTS]` call id `[TOOL_CONTENT]` text
//! `[/TOOL_RESULTS]`, its text as given.
//!
//! JSON is written as Python's `json.dumps(…, ensure_ascii=False)` writes it. Each
//! control token is one token; each text piece is encoded on its own. Where
//! `mistral-common` refuses a request (an assistant message with both text and tool
//! calls, or with neither), the count is of what it would send had it accepted: the
//! text, then the calls. Images count by OpenAI's rule (an estimate: Pixtral's image
//! tokens depend on its encoder's patch size).

use serde_json::Value;

use super::profile::Profile;
use super::python_json::{python_loads_dumps, JsonStyle};
use super::request;
use super::template::{server_shape, server_tool};
use super::{Encoding, TokenError};

/// The text `mistral-common` joins consecutive messages' texts (and a system prompt
/// and its user text) with.
const JOIN: &str = "\n\n";

/// The `mistral-common` instruct tokenizer version a request is encoded as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// Instruct tokenizer v3: system texts join the last user message.
    V3,
    /// Instruct tokenizer v7: system messages in place, tool results with
    /// `[TOOL_CONTENT]`.
    V7,
}

/// A piece of a rendered request, encoded on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// A control token (`[INST]`, `</s>` …): one token.
    Control(&'static str),
    /// Text, encoded without special tokens.
    Text(String),
    /// A media part, counted by OpenAI's rule.
    Media(usize),
}

/// One chunk of message content: text, or a media part's tokens.
enum Chunk {
    Text(String),
    Media(usize),
}

/// A message after `mistral-common`'s normalization.
enum Normalized {
    /// A system message kept in place (v7).
    System(String),
    User(Vec<Chunk>),
    Assistant {
        text: String,
        /// Each call as `[TOOL_CALLS]` lists it, written.
        calls: Vec<String>,
        prefix: bool,
    },
    Tool {
        content: String,
        call_id: Value,
    },
}

/// The role a message counts as: `developer` is a system message; anything that is not
/// a system, assistant or tool message is a user message.
fn role_of(message: &Value) -> &str {
    match message.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => "system",
        Some("assistant") => "assistant",
        Some("tool") => "tool",
        _ => "user",
    }
}

/// A message's content as chunks: text parts as text, media parts by OpenAI's rule.
fn chunks_of(message: &Value) -> Vec<Chunk> {
    match message.get("content") {
        Some(Value::String(text)) => vec![Chunk::Text(text.clone())],
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part {
                Value::String(text) => Chunk::Text(text.clone()),
                _ => match part.get("text").and_then(Value::as_str) {
                    Some(text) => Chunk::Text(text.to_owned()),
                    None => Chunk::Media(request::media_tokens(part, Profile::OpenAiChat)),
                },
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Chunks of several messages as `mistral-common` aggregates them: adjacent texts
/// joined by `"\n\n"`, empty texts skipped, media kept in place.
fn aggregate(contents: impl IntoIterator<Item = Vec<Chunk>>) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut text: Option<String> = None;
    for chunk in contents.into_iter().flatten() {
        match chunk {
            Chunk::Text(t) if t.is_empty() => {}
            Chunk::Text(t) => match &mut text {
                Some(open) => {
                    open.push_str(JOIN);
                    open.push_str(&t);
                }
                None => text = Some(t),
            },
            Chunk::Media(n) => {
                out.extend(text.take().map(Chunk::Text));
                out.push(Chunk::Media(n));
            }
        }
    }
    out.extend(text.map(Chunk::Text));
    out
}

/// The text of chunks (media left out).
fn text_of(chunks: Vec<Chunk>) -> String {
    let texts: Vec<String> = chunks
        .into_iter()
        .filter_map(|c| match c {
            Chunk::Text(t) => Some(t),
            Chunk::Media(_) => None,
        })
        .collect();
    texts.join(JOIN)
}

/// Content or arguments as `mistral-common` writes them, written: what Python's
/// `json.loads` reads in them, as `json.dumps` writes it back (empty is `{}`), else the
/// text itself as a JSON string.
fn json_or_text(text: &str) -> String {
    if text.is_empty() {
        return "{}".to_owned();
    }
    python_loads_dumps(text)
        .unwrap_or_else(|| JsonStyle::python_default().dumps(&Value::String(text.to_owned())))
}

/// A tool call as `[TOOL_CALLS]` lists it, written: name, arguments, and the id unless
/// absent.
fn call_entry(call: &Value) -> String {
    let json = JsonStyle::python_default();
    let function = call.get("function").unwrap_or(call);
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => json_or_text(""),
        Some(Value::String(text)) => json_or_text(text),
        Some(other) => json.dumps(other),
    };
    let name = json.dumps(function.get("name").unwrap_or(&Value::Null));
    let mut entry = format!("{{\"name\": {name}, \"arguments\": {arguments}");
    if let Some(id) = call.get("id").filter(|id| match id {
        Value::String(s) => !s.is_empty() && s != "null",
        other => !other.is_null(),
    }) {
        entry.push_str(", \"id\": ");
        entry.push_str(&json.dumps(id));
    }
    entry.push('}');
    entry
}

/// The system prompt (v3: every system text, joined) and the normalized messages of a
/// request (v7: its system messages among them, `system` first).
fn normalize(
    version: Version,
    system: Option<&str>,
    messages: &[Value],
) -> (String, Vec<Normalized>) {
    let shaped: Vec<Value> = messages.iter().map(server_shape).collect();
    let mut prompts: Vec<String> = Vec::new();
    let mut out = Vec::new();
    if let Some(text) = system.filter(|t| !t.is_empty()) {
        match version {
            Version::V3 => prompts.push(text.to_owned()),
            Version::V7 => out.push(Normalized::System(text.to_owned())),
        }
    }
    let mut i = 0;
    while i < shaped.len() {
        let role = role_of(&shaped[i]);
        let end = shaped[i..]
            .iter()
            .position(|m| role_of(m) != role)
            .map_or(shaped.len(), |n| i + n);
        let group = &shaped[i..end];
        match role {
            "system" if version == Version::V7 => out.extend(
                group
                    .iter()
                    .map(|m| Normalized::System(text_of(aggregate([chunks_of(m)])))),
            ),
            "system" => prompts.extend(
                group
                    .iter()
                    .map(|m| text_of(aggregate([chunks_of(m)])))
                    .filter(|t| !t.is_empty()),
            ),
            "user" => out.push(Normalized::User(aggregate(group.iter().map(chunks_of)))),
            "assistant" => out.push(Normalized::Assistant {
                text: text_of(aggregate(group.iter().map(assistant_text))),
                calls: group
                    .iter()
                    .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
                    .flatten()
                    .map(call_entry)
                    .collect(),
                prefix: end == shaped.len(),
            }),
            _ => out.extend(group.iter().map(|m| Normalized::Tool {
                content: text_of(aggregate([chunks_of(m)])),
                call_id: m.get("tool_call_id").cloned().unwrap_or(Value::Null),
            })),
        }
        i = end;
    }
    // A request of system text alone is the frame rows are summed onto (see
    // [`render`]): no opening user message. v7 opens with whatever comes first.
    if version == Version::V3
        && !out.is_empty()
        && !matches!(out.first(), Some(Normalized::User(_)))
    {
        out.insert(0, Normalized::User(Vec::new()));
    }
    (prompts.join(JOIN), out)
}

/// An assistant message's text as vLLM hands it on: text parts joined by newlines.
fn assistant_text(message: &Value) -> Vec<Chunk> {
    match message.get("content") {
        Some(Value::Array(parts)) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(t) => Some(t.as_str()),
                    _ => p.get("text").and_then(Value::as_str),
                })
                .collect();
            vec![Chunk::Text(texts.join("\n"))]
        }
        _ => chunks_of(message),
    }
}

/// The function tools as `[AVAILABLE_TOOLS]` lists them: type, then name,
/// description (empty when absent) and parameters (`{}` when absent); a tool of
/// another kind as given.
fn tools_json(tools: &[Value]) -> String {
    let listed: Vec<Value> = tools
        .iter()
        .map(|tool| {
            let tool = server_tool(tool);
            let Some(function) = tool.get("function") else {
                return tool;
            };
            let field = |key: &str, default: Value| match function.get(key) {
                None | Some(Value::Null) => default,
                Some(value) => value.clone(),
            };
            serde_json::json!({
                "type": "function",
                "function": {
                    "name": field("name", Value::Null),
                    "description": field("description", Value::from("")),
                    "parameters": field("parameters", Value::Object(serde_json::Map::new())),
                }
            })
        })
        .collect();
    JsonStyle::python_default().dumps(&Value::Array(listed))
}

/// The pieces `mistral-common`'s request encoder of `version` produces for a request
/// with `system` text, `messages` and `tools`, in order.
///
/// A request without user, assistant or tool messages is the frame a session sums its
/// rows onto: `<s>`, the tools, then the system prompt — v3: its text and the `"\n\n"`
/// that joins it to the last user message (`mistral-common` wraps a lone system prompt
/// in an empty user message's `[INST]` and `[/INST]`, 2 tokens more; every row that is a
/// user message brings those); v7: its `[SYSTEM_PROMPT]` message. (The encoder lists the
/// tools before the last user message, so a request with one carries them.)
pub fn render(
    version: Version,
    system: Option<&str>,
    messages: &[Value],
    tools: &[Value],
) -> Vec<Piece> {
    let (prompt, normalized) = normalize(version, system, messages);
    let last_user = normalized
        .iter()
        .rposition(|m| matches!(m, Normalized::User(_)));
    let json = JsonStyle::python_default();
    let mut out = vec![Piece::Control("<s>")];
    let frame = last_user.is_none()
        && normalized
            .iter()
            .all(|m| matches!(m, Normalized::System(_)));
    if frame {
        if !tools.is_empty() {
            out.push(Piece::Control("[AVAILABLE_TOOLS]"));
            out.push(Piece::Text(tools_json(tools)));
            out.push(Piece::Control("[/AVAILABLE_TOOLS]"));
        }
        if !prompt.is_empty() {
            out.push(Piece::Text(format!("{prompt}{JOIN}")));
        }
    }
    for (index, message) in normalized.into_iter().enumerate() {
        match message {
            Normalized::System(text) => {
                out.push(Piece::Control("[SYSTEM_PROMPT]"));
                out.push(Piece::Text(text));
                out.push(Piece::Control("[/SYSTEM_PROMPT]"));
            }
            Normalized::User(chunks) => {
                let last = Some(index) == last_user;
                if last && !tools.is_empty() {
                    out.push(Piece::Control("[AVAILABLE_TOOLS]"));
                    out.push(Piece::Text(tools_json(tools)));
                    out.push(Piece::Control("[/AVAILABLE_TOOLS]"));
                }
                out.push(Piece::Control("[INST]"));
                user_pieces(
                    chunks,
                    (last && !prompt.is_empty()).then_some(&*prompt),
                    &mut out,
                );
                out.push(Piece::Control("[/INST]"));
            }
            Normalized::Assistant {
                text,
                calls,
                prefix,
            } => {
                let text = text.trim_end_matches(' ');
                // v3 sends text or calls (text only when there are none); v7 both.
                if !text.is_empty() || calls.is_empty() || version == Version::V7 {
                    out.push(Piece::Text(text.to_owned()));
                }
                if !calls.is_empty() {
                    out.push(Piece::Control("[TOOL_CALLS]"));
                    out.push(Piece::Text(format!("[{}]", calls.join(", "))));
                }
                if !prefix {
                    out.push(Piece::Control("</s>"));
                }
            }
            Normalized::Tool { content, call_id } if version == Version::V7 => {
                out.push(Piece::Control("[TOOL_RESULTS]"));
                out.push(Piece::Text(match call_id {
                    Value::String(id) => id,
                    other => json.dumps(&other),
                }));
                out.push(Piece::Control("[TOOL_CONTENT]"));
                out.push(Piece::Text(content));
                out.push(Piece::Control("[/TOOL_RESULTS]"));
            }
            Normalized::Tool { content, call_id } => {
                let result = format!(
                    "{{\"content\": {}, \"call_id\": {}}}",
                    json_or_text(&content),
                    json.dumps(&call_id)
                );
                out.push(Piece::Control("[TOOL_RESULTS]"));
                out.push(Piece::Text(result));
                out.push(Piece::Control("[/TOOL_RESULTS]"));
            }
        }
    }
    out
}

/// A user message's content: text alone is one piece (the system prompt opening it);
/// with media, an image that ends text-only content moves first, and each chunk (and
/// the system prompt) is a piece of its own.
fn user_pieces(mut chunks: Vec<Chunk>, prompt: Option<&str>, out: &mut Vec<Piece>) {
    let text_only = chunks.iter().all(|c| matches!(c, Chunk::Text(_)));
    if text_only {
        let text = text_of(chunks);
        out.push(Piece::Text(match prompt {
            Some(prompt) => format!("{prompt}{JOIN}{text}"),
            None => text,
        }));
        return;
    }
    if chunks.len() >= 2 && matches!(chunks.last(), Some(Chunk::Media(_))) {
        let all_text_before = chunks[..chunks.len() - 1]
            .iter()
            .all(|c| matches!(c, Chunk::Text(_)));
        if all_text_before {
            chunks.rotate_right(1);
        }
    }
    if let Some(prompt) = prompt {
        out.push(Piece::Text(format!("{prompt}{JOIN}")));
    }
    out.extend(chunks.into_iter().map(|c| match c {
        Chunk::Text(t) => Piece::Text(t),
        Chunk::Media(n) => Piece::Media(n),
    }));
}

/// Tokens of pieces: one per control token, the encoding's count of each text.
fn pieces_tokens(encoding: &Encoding, pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .map(|piece| match piece {
            Piece::Control(_) => 1,
            Piece::Text(text) => encoding.count(text),
            Piece::Media(tokens) => *tokens,
        })
        .sum()
}

/// Tokens of a whole request as `mistral-common` encodes it: `len(tokens)` of
/// `encode_chat_completion`.
pub fn request_tokens(
    encoding: &Encoding,
    version: Version,
    system: Option<&str>,
    messages: &[Value],
    tools: &[Value],
) -> Result<usize, TokenError> {
    Ok(pieces_tokens(
        encoding,
        &render(version, system, messages, tools),
    ))
}

/// The request as `mistral-common` shows it (`Tokenized.text`): the pieces one after
/// another, control tokens by name (media parts left out).
pub fn request_text(
    version: Version,
    system: Option<&str>,
    messages: &[Value],
    tools: &[Value],
) -> String {
    render(version, system, messages, tools)
        .into_iter()
        .map(|piece| match piece {
            Piece::Control(name) => name.to_owned(),
            Piece::Text(text) => text,
            Piece::Media(_) => String::new(),
        })
        .collect()
}

/// Tokens of messages counted one by one (a window's rows), without `<s>` and the
/// tools: each rendered on its own — a v3 system message as its text and the `"\n\n"`
/// that joins it to a user message, a last assistant message with its `</s>`.
/// Consecutive messages that the encoder merges each carry a frame here, so the sum
/// errs high by those frames.
pub fn messages_tokens(
    encoding: &Encoding,
    version: Version,
    messages: &[Value],
) -> Result<usize, TokenError> {
    let mut total = 0;
    for message in messages {
        if version == Version::V3 && role_of(message) == "system" {
            let text = text_of(aggregate([chunks_of(message)]));
            if !text.is_empty() {
                total += encoding.count(&format!("{text}{JOIN}"));
            }
            continue;
        }
        let pieces = render(version, None, std::slice::from_ref(message), &[]);
        let mut pieces = &pieces[1..];
        // A lone non-user message gets v3's empty opening user message.
        if version == Version::V3 && !matches!(role_of(message), "user" | "system") {
            pieces = pieces.get(3..).unwrap_or(&[]);
        }
        total += pieces_tokens(encoding, pieces);
        if role_of(message) == "assistant" {
            total += 1;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(messages: Value, tools: Value) -> String {
        let messages = messages.as_array().cloned().unwrap_or_default();
        let tools = tools.as_array().cloned().unwrap_or_default();
        request_text(Version::V3, None, &messages, &tools)
    }

    #[test]
    fn renders_as_mistral_common_v3() {
        let got = text(
            json!([
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call00001",
                  "type": "function", "function": {"name": "get_weather",
                  "arguments": "{\"city\": \"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "call00001", "content": "{\"temp\": 4}"},
                {"role": "assistant", "content": "4 °C.  "},
                {"role": "user", "content": "And Bergen?"}
            ]),
            json!([{"type": "function", "function": {"name": "get_weather",
                    "description": "Weather", "parameters": {"type": "object",
                    "properties": {"city": {"type": "string"}}}}}]),
        );
        // mistral-common 1.13's Tokenized.text for the same request.
        assert_eq!(
            got,
            "<s>[INST]Weather in Oslo?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \
             \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"call00001\"}]</s>[TOOL_RESULTS]\
             {\"content\": {\"temp\": 4}, \"call_id\": \"call00001\"}[/TOOL_RESULTS]4 °C.</s>\
             [AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \
             \"get_weather\", \"description\": \"Weather\", \"parameters\": {\"type\": \
             \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]\
             [/AVAILABLE_TOOLS][INST]You are terse.\n\nAnd Bergen?[/INST]"
        );
    }

    #[test]
    fn a_request_without_messages_is_the_frame_rows_are_summed_onto() {
        let tools = [json!({"name": "f"})];
        let frame = request_text(Version::V3, Some("Be brief."), &[], &tools);
        assert_eq!(
            frame,
            "<s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"f\", \
             \"description\": \"\", \"parameters\": {}}}][/AVAILABLE_TOOLS]Be brief.\n\n"
        );
        let user = json!({"role": "user", "content": "Hi"});
        let whole = request_text(
            Version::V3,
            Some("Be brief."),
            std::slice::from_ref(&user),
            &tools,
        );
        assert_eq!(whole.len(), frame.len() + "[INST]Hi[/INST]".len());
    }

    #[test]
    fn merges_consecutive_messages_and_opens_with_a_user_message() {
        let got = text(
            json!([
                {"role": "assistant", "content": "Hi"},
                {"role": "user", "content": "a"},
                {"role": "user", "content": [{"type": "text", "text": "b"},
                                             {"type": "text", "text": ""}]},
                {"role": "system", "content": "s1"},
                {"role": "system", "content": "s2"},
                {"role": "tool", "tool_call_id": "x", "content": "not json"},
                {"role": "assistant", "content": "continued"}
            ]),
            json!([]),
        );
        // mistral-common's text for the request, the last message sent as a prefix.
        assert_eq!(
            got,
            "<s>[INST][/INST]Hi</s>[INST]s1\n\ns2\n\na\n\nb[/INST][TOOL_RESULTS]\
             {\"content\": \"not json\", \"call_id\": \"x\"}[/TOOL_RESULTS]continued"
        );
    }
}
