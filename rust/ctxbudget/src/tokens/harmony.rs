//! The `harmony` profile (gpt-oss, `o200k_harmony`): a request counted as exactly the
//! tokens OpenAI's published harmony renderer (`openai-harmony`,
//! `render_conversation_for_completion`) produces for it — the tests compare the two
//! token for token on generated conversations.
//!
//! A chat-shaped request becomes a harmony conversation the way the harmony guide
//! lays one out:
//! - a system message with `SystemContent`'s defaults (model identity, knowledge
//!   cutoff 2024-06, reasoning medium, the three channels, and the line that sends
//!   function calls to `commentary` when the request has function tools; no current
//!   date — a server that adds one sends about 8 tokens more);
//! - a developer message with the request's system text (and any system or developer
//!   messages that open the conversation) as `# Instructions` and the function tools
//!   as the `# Tools` namespace ([`super::typescript`]), when there is either;
//! - user messages as they are; a later system or developer message as a developer
//!   message with its `# Instructions`;
//! - an assistant message's reasoning on the `analysis` channel, its text on `final`
//!   (on `commentary`, as a preamble, when it also calls tools), and each tool call as
//!   a message `to=functions.NAME` on `commentary` with content type
//!   `<|constrain|>json`, ended by `<|call|>`;
//! - a tool result as a message from `functions.NAME` `to=assistant` on `commentary`
//!   (the name from the result, else from the call it answers);
//! - `<|start|>assistant`, the generation prompt.
//!
//! As the renderer does, the analysis messages before the first `final` message are
//! left out when the last assistant message is on `final`. Each header piece is
//! encoded on its own, as the renderer encodes it; each special token is one token.
//! Images (which gpt-oss does not read) count by OpenAI's rule; tools that are not
//! functions count as their JSON.

use std::collections::HashMap;

use serde_json::Value;

use super::profile::Profile;
use super::request;
use super::typescript::tools_section;
use super::{Encoding, TokenError};

/// The system message's model identity (`SystemContent`'s default).
pub const MODEL_IDENTITY: &str = "You are ChatGPT, a large language model trained by OpenAI.";
/// The system message's knowledge cutoff (`SystemContent`'s default).
pub const KNOWLEDGE_CUTOFF: &str = "2024-06";
/// The system message's reasoning effort (`SystemContent`'s default).
pub const REASONING_EFFORT: &str = "medium";
/// Tokens of the generation prompt: `<|start|>` and the role `assistant`.
pub const GENERATION_PROMPT_TOKENS: usize = 2;

/// The system message's text (what goes between `<|message|>` and `<|end|>`).
pub fn system_text(has_function_tools: bool) -> String {
    let mut channels = "# Valid channels: analysis, commentary, final. Channel must be \
                        included for every message."
        .to_owned();
    if has_function_tools {
        channels.push_str("\nCalls to these tools must go to the commentary channel: 'functions'.");
    }
    format!(
        "{MODEL_IDENTITY}\nKnowledge cutoff: {KNOWLEDGE_CUTOFF}\n\nReasoning: \
         {REASONING_EFFORT}\n\n{channels}"
    )
}

/// One rendered harmony message: its tokens and what the analysis-dropping rule needs.
#[derive(Clone, Copy, Debug)]
struct Rendered {
    tokens: usize,
    assistant: bool,
    channel: Channel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Channel {
    None,
    Analysis,
    Commentary,
    Final,
}

/// Tokens of a harmony message: `<|start|>`, the header pieces (each encoded on its
/// own), `<|channel|>` when there is a channel, `<|message|>`, the content and the end
/// token (`<|end|>` or `<|call|>`).
fn framed(encoding: &Encoding, header: &[&str], channel: Option<&str>, content: usize) -> usize {
    let mut tokens = 3 + content;
    tokens += header
        .iter()
        .map(|piece| encoding.count(piece))
        .sum::<usize>();
    if let Some(name) = channel {
        tokens += 1 + encoding.count(name);
    }
    tokens
}

/// Tokens of a whole request as the harmony renderer renders it for completion.
pub fn request_tokens(
    encoding: &Encoding,
    system: Option<&str>,
    messages: &[Value],
    tools: &[Value],
) -> Result<usize, TokenError> {
    // System or developer messages that open the conversation join the instructions.
    let leading = messages
        .iter()
        .take_while(|m| matches!(role_of(m), Some("system" | "developer")))
        .count();
    let mut instructions: Vec<String> = system
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .into_iter()
        .collect();
    for message in &messages[..leading] {
        let text = text_of(message);
        if !text.is_empty() {
            instructions.push(text);
        }
    }
    let mut total = prefix_tokens(encoding, &instructions.join("\n\n"), tools)?;
    let names = request::call_names(messages);
    let mut rendered = Vec::new();
    for message in &messages[leading..] {
        render_message(encoding, message, &names, &mut rendered)?;
    }
    let last_is_final = rendered
        .iter()
        .rev()
        .find(|r| r.assistant)
        .is_some_and(|r| r.channel == Channel::Final);
    let first_final = rendered.iter().position(|r| r.channel == Channel::Final);
    for (i, r) in rendered.iter().enumerate() {
        let dropped =
            last_is_final && first_final.is_some_and(|f| i < f) && r.channel == Channel::Analysis;
        if !dropped {
            total += r.tokens;
        }
    }
    Ok(total + GENERATION_PROMPT_TOKENS)
}

/// Tokens of the system and developer messages and the generation prompt: what a
/// request with these instructions and tools costs before its messages.
fn prefix_tokens(
    encoding: &Encoding,
    instructions: &str,
    tools: &[Value],
) -> Result<usize, TokenError> {
    let mut functions = Vec::with_capacity(tools.len());
    let mut other = 0;
    for tool in tools {
        match request::function_tool(tool) {
            Some(f) => functions.push(f),
            None => {
                other += request::MESSAGE_TOKENS + encoding.count_json(&tool.to_string())?;
            }
        }
    }
    let mut total = framed(
        encoding,
        &["system"],
        None,
        encoding.count(&system_text(!functions.is_empty())),
    );
    let mut sections = Vec::new();
    if !instructions.is_empty() {
        sections.push(format!("# Instructions\n\n{instructions}"));
    }
    if !functions.is_empty() {
        sections.push(tools_section(&functions));
    }
    if !sections.is_empty() {
        total += framed(
            encoding,
            &["developer"],
            None,
            encoding.count(&sections.join("\n\n")),
        );
    }
    Ok(total + other)
}

/// Tokens of messages counted one by one (a window's rows), without the system and
/// developer messages and the generation prompt: each as [`request_tokens`] renders
/// it, reasoning included (the renderer's dropping of earlier analysis depends on the
/// whole conversation, so a piecewise sum is at most one analysis message per earlier
/// turn above it).
pub fn message_tokens(encoding: &Encoding, message: &Value) -> Result<usize, TokenError> {
    let mut rendered = Vec::new();
    render_message(
        encoding,
        message,
        &request::call_names(std::slice::from_ref(message)),
        &mut rendered,
    )?;
    Ok(rendered.iter().map(|r| r.tokens).sum())
}

/// Tokens before the messages of a request with `system` text and `tools`, plus the
/// generation prompt: [`request_tokens`] of a request without messages.
pub fn bare_request_tokens(
    encoding: &Encoding,
    system: Option<&str>,
    tools: &[Value],
) -> Result<usize, TokenError> {
    request_tokens(encoding, system, &[], tools)
}

fn role_of(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

/// The text of a message's content: a string, or its text parts one after another.
fn text_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(text) => Some(text.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect(),
        _ => String::new(),
    }
}

/// The content of a user, developer or assistant message: its text and any media
/// parts (images by OpenAI's rule).
fn content_tokens(encoding: &Encoding, message: &Value) -> Result<usize, TokenError> {
    let mut total = match message.get("content") {
        None | Some(Value::Null) => 0,
        Some(content) => request::content_tokens(encoding, content, Profile::Harmony)?,
    };
    let media = message.get("media").and_then(Value::as_array);
    for part in media.into_iter().flatten() {
        total += request::media_tokens(part, Profile::Harmony);
    }
    Ok(total)
}

fn has_content(message: &Value) -> bool {
    match message.get("content") {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(parts)) => !parts.is_empty(),
        Some(_) => true,
    }
}

/// The reasoning text of an assistant message (ctxbudget's `reasoning` list: strings,
/// `{"text"}` objects or Responses reasoning items with `summary`/`content` parts).
fn reasoning_text(message: &Value) -> Option<String> {
    fn texts(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => out.push_str(text),
            Value::Array(items) => items.iter().for_each(|v| texts(v, out)),
            Value::Object(map) => {
                if let Some(text) = map.get("text").and_then(Value::as_str) {
                    out.push_str(text);
                }
                for key in ["summary", "content"] {
                    if let Some(inner) = map.get(key) {
                        texts(inner, out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = String::new();
    texts(message.get("reasoning")?, &mut out);
    (!out.is_empty()).then_some(out)
}

fn render_message(
    encoding: &Encoding,
    message: &Value,
    names: &HashMap<&str, &str>,
    out: &mut Vec<Rendered>,
) -> Result<(), TokenError> {
    let plain = |tokens, assistant, channel| Rendered {
        tokens,
        assistant,
        channel,
    };
    let role = match role_of(message) {
        Some(role) => role,
        None => return render_item(encoding, message, names, out),
    };
    match role {
        "assistant" => {
            if let Some(reasoning) = reasoning_text(message) {
                let tokens = framed(
                    encoding,
                    &["assistant"],
                    Some("analysis"),
                    encoding.count(&reasoning),
                );
                out.push(plain(tokens, true, Channel::Analysis));
            }
            let calls = message.get("tool_calls").and_then(Value::as_array);
            let calls = calls.map(Vec::as_slice).unwrap_or_default();
            if has_content(message) || message.get("media").is_some() {
                let (name, channel) = if calls.is_empty() {
                    ("final", Channel::Final)
                } else {
                    ("commentary", Channel::Commentary)
                };
                let tokens = framed(
                    encoding,
                    &["assistant"],
                    Some(name),
                    content_tokens(encoding, message)?,
                );
                out.push(plain(tokens, true, channel));
            }
            for call in calls {
                let spec = call.get("function").unwrap_or(call);
                let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
                out.push(call_message(encoding, name, spec.get("arguments")));
            }
        }
        "tool" => {
            let name = message
                .get("name")
                .and_then(Value::as_str)
                .or_else(|| {
                    let id = message.get("tool_call_id").and_then(Value::as_str)?;
                    names.get(id).copied()
                })
                .unwrap_or("");
            let content = content_tokens(encoding, message)?;
            out.push(result_message(encoding, name, content));
        }
        "system" | "developer" => {
            let text = format!("# Instructions\n\n{}", text_of(message));
            let tokens = framed(encoding, &["developer"], None, encoding.count(&text));
            out.push(plain(tokens, false, Channel::None));
        }
        other => {
            let tokens = framed(encoding, &[other], None, content_tokens(encoding, message)?);
            out.push(plain(tokens, other == "assistant", Channel::None));
        }
    }
    Ok(())
}

/// A Responses API item without a role: a `function_call`, its output, or anything
/// else as its JSON in a message of its own.
fn render_item(
    encoding: &Encoding,
    item: &Value,
    names: &HashMap<&str, &str>,
    out: &mut Vec<Rendered>,
) -> Result<(), TokenError> {
    match item.get("type").and_then(Value::as_str) {
        Some("function_call") => {
            let name = item.get("name").and_then(Value::as_str).unwrap_or("");
            out.push(call_message(encoding, name, item.get("arguments")));
        }
        Some("function_call_output") => {
            let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
            let name = names.get(id).copied().unwrap_or("");
            let content = match item.get("output") {
                Some(Value::String(text)) => encoding.count(text),
                Some(output) => request::content_tokens(encoding, output, Profile::Harmony)?,
                None => 0,
            };
            out.push(result_message(encoding, name, content));
        }
        _ => out.push(Rendered {
            tokens: request::MESSAGE_TOKENS + encoding.count_json(&item.to_string())?,
            assistant: false,
            channel: Channel::None,
        }),
    }
    Ok(())
}

/// `<|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|>json
/// <|message|>ARGS<|call|>`.
fn call_message(encoding: &Encoding, name: &str, arguments: Option<&Value>) -> Rendered {
    let args = match arguments {
        None | Some(Value::Null) => 0,
        Some(Value::String(text)) => encoding.count(text),
        Some(other) => encoding.count(&other.to_string()),
    };
    let recipient = format!(" to=functions.{name}");
    // " " and "json" around the one <|constrain|> token.
    let content_type = 1 + encoding.count(" ") + encoding.count("json");
    Rendered {
        tokens: framed(
            encoding,
            &["assistant", &recipient],
            Some("commentary"),
            content_type + args,
        ),
        assistant: true,
        channel: Channel::Commentary,
    }
}

/// `<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>OUT<|end|>`.
fn result_message(encoding: &Encoding, name: &str, content: usize) -> Rendered {
    let author = format!("functions.{name}");
    Rendered {
        tokens: framed(
            encoding,
            &[&author, " to=assistant"],
            Some("commentary"),
            content,
        ),
        assistant: false,
        channel: Channel::Commentary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc() -> Encoding {
        Encoding::new("o200k_harmony").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_bare_request_is_the_system_message_and_the_prompt() {
        let e = enc();
        let system = 3 + e.count("system") + e.count(&system_text(false));
        assert_eq!(request_tokens(&e, None, &[], &[]).ok(), Some(system + 2));
        let with_instructions = request_tokens(&e, Some("Be terse."), &[], &[]).ok();
        let developer = 3 + e.count("developer") + e.count("# Instructions\n\nBe terse.");
        assert_eq!(with_instructions, Some(system + developer + 2));
    }

    #[test]
    fn earlier_analysis_is_dropped_once_the_last_reply_is_final() {
        let e = enc();
        let thinking = json!({"role": "assistant", "content": "Hi!", "reasoning": ["Greet."]});
        let user = json!({"role": "user", "content": "Hello"});
        let with = request_tokens(&e, None, &[user.clone(), thinking], &[]).ok();
        let plain = json!({"role": "assistant", "content": "Hi!"});
        let without = request_tokens(&e, None, &[user, plain], &[]).ok();
        assert_eq!(with, without);
    }
}
