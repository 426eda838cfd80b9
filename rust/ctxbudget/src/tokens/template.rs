//! The `chat_template` counting profile (SPEC §1): a request rendered by the model's
//! own Jinja chat template, then counted, so the count is that of exactly the text an
//! open-weight server (vLLM, SGLang, llama.cpp, Ollama's HF templates) tokenizes.
//!
//! Templates run on MiniJinja with the environment `transformers` gives them:
//! `trim_blocks` and `lstrip_blocks`, loop controls, Python's string and dict methods
//! (`minijinja-contrib`'s pycompat, with Python's whitespace: [`super::template_python`]),
//! a `trim` that strips what Python's `str.strip` strips, a `tojson` that writes what Python's `json.dumps`
//! writes (no HTML escaping, `ensure_ascii=False`, `indent`), `raise_exception` and
//! `strftime_now`, and the tokenizer's special tokens (`bos_token`, `eos_token`, …).

use std::path::Path;

use minijinja::value::{Kwargs, Value as JinjaValue};
use minijinja::{Environment, Error, ErrorKind};
use serde_json::Value;

use super::python_json::JsonStyle;
use super::{template_python, Encoding, TokenError};

/// Name of the template in its environment.
const MAIN: &str = "chat";

/// A model's chat template, ready to render.
pub struct ChatTemplate {
    /// The default template and, if the model has one, its `tool_use` template, which
    /// `transformers` picks when a request has tools.
    env: Environment<'static>,
    has_tool_use: bool,
    /// `bos_token`, `eos_token`, `pad_token`, `unk_token` as the config names them.
    specials: Vec<(String, String)>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("has_tool_use", &self.has_tool_use)
            .field("specials", &self.specials)
            .finish_non_exhaustive()
    }
}

/// The text of a special token as a config writes it: a string or `{"content": …}`.
fn special_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

impl ChatTemplate {
    /// A template from its Jinja source, with special tokens `(name, text)` such as
    /// `("bos_token", "<s>")`.
    pub fn new(source: &str, specials: Vec<(String, String)>) -> Result<ChatTemplate, TokenError> {
        ChatTemplate::build(source, None, specials).map_err(|e| TokenError::ChatTemplate {
            reason: describe(&e),
        })
    }

    fn build(
        source: &str,
        tool_use: Option<&str>,
        specials: Vec<(String, String)>,
    ) -> Result<ChatTemplate, Error> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(template_python::unknown_method);
        env.add_filter("trim", template_python::trim);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(
            MAIN,
            template_python::join_continued_lines(source).into_owned(),
        )?;
        if let Some(tool_use) = tool_use {
            env.add_template_owned(
                "tool_use",
                template_python::join_continued_lines(tool_use).into_owned(),
            )?;
        }
        Ok(ChatTemplate {
            env,
            has_tool_use: tool_use.is_some(),
            specials,
        })
    }

    /// The template of a model directory's file: `chat_template.jinja` (the source
    /// itself), `chat_template.json` or `tokenizer_config.json` (its `chat_template`:
    /// a string, or a list of named templates). Special tokens come from `config`
    /// (the `tokenizer_config.json` text). `None` when the file names no template.
    pub(crate) fn from_files(
        path: &Path,
        text: &str,
        config: Option<&str>,
    ) -> Result<Option<ChatTemplate>, String> {
        let config: Option<Value> = config
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| format!("tokenizer_config.json is not JSON: {e}"))?;
        let specials = ["bos_token", "eos_token", "pad_token", "unk_token"]
            .iter()
            .filter_map(|name| {
                let value = config.as_ref()?.get(*name)?;
                Some(((*name).to_owned(), special_text(value)?))
            })
            .collect();
        let is_jinja = path.extension().is_some_and(|e| e == "jinja");
        let (default, tool_use) = if is_jinja {
            (Some(text.to_owned()), None)
        } else {
            let json: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
            match json.get("chat_template") {
                Some(Value::String(s)) => (Some(s.clone()), None),
                Some(Value::Array(named)) => {
                    let find = |wanted: &str| {
                        named.iter().find_map(|t| {
                            (t.get("name")?.as_str()? == wanted)
                                .then(|| t.get("template")?.as_str().map(str::to_owned))
                                .flatten()
                        })
                    };
                    (find("default"), find("tool_use"))
                }
                _ => (None, None),
            }
        };
        let Some(default) = default else {
            return Ok(None);
        };
        ChatTemplate::build(&default, tool_use.as_deref(), specials)
            .map(Some)
            .map_err(|e| describe(&e))
    }

    /// The text `transformers`' `apply_chat_template(messages, tools=tools,
    /// add_generation_prompt=…, tokenize=False)` renders; `extra` (an object) adds
    /// template variables such as `enable_thinking`.
    pub fn render(
        &self,
        messages: &Value,
        tools: Option<&Value>,
        add_generation_prompt: bool,
        extra: Option<&Value>,
    ) -> Result<String, TokenError> {
        let use_tools = self.has_tool_use && tools.is_some_and(|t| !t.is_null());
        let template = self
            .env
            .get_template(if use_tools { "tool_use" } else { MAIN })
            .map_err(|e| TokenError::ChatTemplate {
                reason: describe(&e),
            })?;
        let mut context = serde_json::Map::new();
        for (name, text) in &self.specials {
            context.insert(name.clone(), Value::String(text.clone()));
        }
        if let Some(Value::Object(extra)) = extra {
            for (k, v) in extra {
                context.insert(k.clone(), v.clone());
            }
        }
        context.insert("messages".to_owned(), without_null_fields(messages));
        context.insert("tools".to_owned(), tools.cloned().unwrap_or(Value::Null));
        context.insert("documents".to_owned(), Value::Null);
        context.insert(
            "add_generation_prompt".to_owned(),
            Value::Bool(add_generation_prompt),
        );
        template
            .render(JinjaValue::from_serialize(&context))
            .map_err(|e| TokenError::ChatTemplate {
                reason: describe(&e),
            })
    }
}

/// `messages` as `transformers` hands them to a template: each message without the
/// fields whose value is null (`content: null` beside tool calls reads as no content,
/// so `is defined` is false and `is none` is false, as in `transformers` 5).
fn without_null_fields(messages: &Value) -> Value {
    let Value::Array(list) = messages else {
        return messages.clone();
    };
    let kept = list.iter().map(|message| match message {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    });
    Value::Array(kept.collect())
}

/// Tokens of a request as the model's own chat template renders it, with the prompt
/// for the reply (`add_generation_prompt`): the count of `apply_chat_template(messages,
/// tools=tools, add_generation_prompt=True, tokenize=True)`.
pub fn chat_template_tokens(
    encoding: &Encoding,
    template: &ChatTemplate,
    messages: &Value,
    tools: Option<&Value>,
    extra: Option<&Value>,
) -> Result<usize, TokenError> {
    let text = template.render(messages, tools, true, extra)?;
    Ok(encoding.count(&text))
}

/// The encoding's chat template, or an error saying how to read one.
fn template_of(encoding: &Encoding) -> Result<&'static ChatTemplate, TokenError> {
    encoding
        .chat_template()
        .ok_or_else(|| TokenError::ChatTemplate {
            reason: format!(
                "the tokenizer {:?} came without a chat template, so the chat_template \
                 profile cannot count with it; read its model directory (Encoding.from_dir) \
                 or choose another profile",
                encoding.name()
            ),
        })
}

/// Tokens of a request by the `chat_template` profile: the system text as a leading
/// system message, then `messages`, rendered with `tools` (none when empty) and the
/// prompt for the reply, then counted.
pub fn request_tokens(
    encoding: &Encoding,
    system: Option<&str>,
    messages: &[Value],
    tools: &[Value],
) -> Result<usize, TokenError> {
    let template = template_of(encoding)?;
    let mut all = Vec::with_capacity(messages.len() + 1);
    if let Some(text) = system.filter(|t| !t.is_empty()) {
        all.push(serde_json::json!({"role": "system", "content": text}));
    }
    all.extend(messages.iter().map(server_shape));
    let tools = (!tools.is_empty()).then(|| Value::Array(tools.iter().map(server_tool).collect()));
    chat_template_tokens(encoding, template, &Value::Array(all), tools.as_ref(), None)
}

/// `tool` as an OpenAI-compatible server hands it to a chat template: a function tool as
/// `{"type": "function", "function": {"name", "description", "parameters"}}` (ctxbudget's
/// own definitions and Responses tools carry these at the top; `strict` only when set);
/// a tool already in that shape, or a provider's built-in tool, as given.
pub(crate) fn server_tool(tool: &Value) -> Value {
    let kind = tool.get("type").and_then(Value::as_str);
    if tool.get("function").is_some() || kind.is_some_and(|k| k != "function") {
        return tool.clone();
    }
    let Some(name) = tool.get("name") else {
        return tool.clone();
    };
    let mut function = serde_json::Map::new();
    function.insert("name".to_owned(), name.clone());
    for key in ["description", "parameters"] {
        if let Some(value) = tool.get(key) {
            function.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(strict @ Value::Bool(_)) = tool.get("strict") {
        function.insert("strict".to_owned(), strict.clone());
    }
    serde_json::json!({"type": "function", "function": function})
}

/// `message` as an OpenAI-compatible server hands it to a chat template: each tool call
/// as `{"id", "type": "function", "function": {"name", "arguments"}}` (ctxbudget's own
/// calls carry `name` and `arguments` at the top), its arguments an object (vLLM parses
/// a JSON string's arguments before rendering, so templates `tojson` them once).
pub(crate) fn server_shape(message: &Value) -> Value {
    let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
        return message.clone();
    };
    let calls: Vec<Value> = calls
        .iter()
        .map(|call| {
            let spec = call.get("function").unwrap_or(call);
            let arguments = match spec.get("arguments") {
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(parsed @ Value::Object(_)) => parsed,
                    _ => Value::String(text.clone()),
                },
                other => other.cloned().unwrap_or(Value::Null),
            };
            let mut shaped = serde_json::Map::new();
            if let Some(id) = call.get("id") {
                shaped.insert("id".to_owned(), id.clone());
            }
            shaped.insert("type".to_owned(), Value::from("function"));
            let name = spec.get("name").cloned().unwrap_or(Value::Null);
            shaped.insert(
                "function".to_owned(),
                serde_json::json!({"name": name, "arguments": arguments}),
            );
            Value::Object(shaped)
        })
        .collect();
    let mut shaped = message.clone();
    if let Some(fields) = shaped.as_object_mut() {
        fields.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    shaped
}

/// Tokens `messages` add to a request by the `chat_template` profile, for callers that
/// sum a request piecewise: the rendering of `messages` (without the prompt for the
/// reply) less that of no messages, so what a template adds to any conversation (a
/// default system message) is counted once, with the request's frame. Templates frame
/// each message between special tokens, which never merge with their neighbours, so the
/// pieces sum to the whole request's count; where a template frames consecutive
/// messages together (tool results sharing one turn), each piece carries the frame and
/// the sum errs high.
pub fn messages_tokens(encoding: &Encoding, messages: &[Value]) -> Result<usize, TokenError> {
    if messages.is_empty() {
        return Ok(0);
    }
    let template = template_of(encoding)?;
    let shaped = messages.iter().map(server_shape).collect();
    let with = template.render(&Value::Array(shaped), None, false, None)?;
    // A template that needs a message to render frames nothing by itself.
    let without = template
        .render(&Value::Array(Vec::new()), None, false, None)
        .map_or(0, |text| encoding.count(&text));
    Ok(encoding.count(&with).saturating_sub(without))
}

/// An error's message with its cause (a template's `raise_exception` text is the
/// message itself).
fn describe(e: &Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn raise_exception(message: String) -> Result<JinjaValue, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// `datetime.now().strftime(format)` for the directives templates use (`%d %b %Y`,
/// `%Y-%m-%d`, `%B`, `%A`…), in UTC.
fn strftime_now(format: String) -> Result<String, Error> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(strftime(secs, &format))
}

/// `format` for the UTC time `secs` seconds after the epoch.
fn strftime(secs: u64, format: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let month_name = MONTHS[(month - 1) as usize];
    let day_name = DAYS[(days % 7) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('-') if chars.clone().next() == Some('d') => {
                chars.next();
                out.push_str(&day.to_string());
            }
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year % 100)),
            Some('b') => out.push_str(&month_name[..3]),
            Some('B') => out.push_str(month_name),
            Some('a') => out.push_str(&day_name[..3]),
            Some('A') => out.push_str(day_name),
            Some('H') => out.push_str(&format!("{:02}", rem / 3_600)),
            Some('M') => out.push_str(&format!("{:02}", rem % 3_600 / 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// `tojson` as `transformers` defines it: `json.dumps(value, ensure_ascii=False,
/// indent=indent, separators=separators, sort_keys=sort_keys)`.
fn tojson(value: JinjaValue, kwargs: Kwargs) -> Result<JinjaValue, Error> {
    let indent: Option<JinjaValue> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<JinjaValue> = kwargs.get("separators")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let mut style = JsonStyle::python_default();
    style.sort_keys = sort_keys.unwrap_or(false);
    style.indent = match indent {
        Some(v) if v.is_integer() => Some(" ".repeat(v.as_i64().unwrap_or(0).max(0) as usize)),
        Some(v) if v.as_str().is_some() => v.as_str().map(str::to_owned),
        _ => None,
    };
    // Python drops the space after `,` when it indents, unless `separators` says.
    if style.indent.is_some() {
        style.item = ",".to_owned();
    }
    if let Some((item, key)) = separators.as_ref().and_then(|s| {
        let a = s.get_item_by_index(0).ok()?;
        let b = s.get_item_by_index(1).ok()?;
        Some((a.as_str()?.to_owned(), b.as_str()?.to_owned()))
    }) {
        style.item = item;
        style.key = key;
    }
    let json = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    Ok(JinjaValue::from_safe_string(style.dumps(&json)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_with_transformers_whitespace_rules_and_filters() {
        let source = "{% for m in messages %}\n<{{ m.role }}>{{ m.content | trim }}\n{% endfor %}\
                      {% if tools %}{{ tools | tojson }}{% endif %}\
                      {% if add_generation_prompt %}{{ bos_token }}{% endif %}";
        let t = ChatTemplate::new(source, vec![("bos_token".into(), "<s>".into())])
            .unwrap_or_else(|e| panic!("{e}"));
        let messages = json!([{"role": "user", "content": " hi "}]);
        let tools = json!([{"name": "f", "p": {"a": [1, 2.5, "<é>"]}}]);
        let text = t
            .render(&messages, Some(&tools), true, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            text,
            "<user>hi\n[{\"name\": \"f\", \"p\": {\"a\": [1, 2.5, \"<é>\"]}}]<s>"
        );
    }

    #[test]
    fn python_methods_and_raise_exception() {
        let source = "{{ messages[0].content.strip().upper() }}{% if messages|length > 1 %}\
                      {{ raise_exception('only one message') }}{% endif %}";
        let t = ChatTemplate::new(source, vec![]).unwrap_or_else(|e| panic!("{e}"));
        let one = json!([{"role": "user", "content": " ab "}]);
        assert_eq!(
            t.render(&one, None, false, None).ok().as_deref(),
            Some("AB")
        );
        let two = json!([{"content": "a"}, {"content": "b"}]);
        let err = t
            .render(&two, None, false, None)
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("only one message"));
    }

    #[test]
    fn a_null_field_is_absent_as_transformers_passes_it() {
        let source = "{% for m in messages %}{% if m.content is none %}none\
                      {% elif m.content is defined %}{{ m.content }}{% else %}absent\
                      {% endif %};{% endfor %}{{ (messages[0].content + 'x') }}";
        let t = ChatTemplate::new(source, vec![]).unwrap_or_else(|e| panic!("{e}"));
        let messages = json!([{"role": "user", "content": "a"},
                              {"role": "assistant", "content": null, "tool_calls": []}]);
        assert_eq!(
            t.render(&messages, None, false, None).ok().as_deref(),
            Some("a;absent;ax")
        );
        // Adding text to the absent content fails, as Jinja's undefined does.
        let refused = json!([{"role": "assistant", "content": null}]);
        assert!(t.render(&refused, None, false, None).is_err());
    }

    #[test]
    fn whitespace_is_pythons_in_trim_and_methods() {
        let t = ChatTemplate::new(
            "[{{ x | trim }}|{{ x.strip() }}|{{ x.split() | length }}|{{ x.isspace() }}]",
            vec![],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let text = t
            .render(
                &json!([]),
                None,
                false,
                Some(&json!({"x": "\u{1f} a\u{1c}"})),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text, "[a|a|1|False]");
    }

    #[test]
    fn tojson_indent_matches_python() {
        let t = ChatTemplate::new("{{ x | tojson(indent=4) }}", vec![])
            .unwrap_or_else(|e| panic!("{e}"));
        let text = t
            .render(
                &json!([]),
                None,
                false,
                Some(&json!({"x": {"a": [1], "b": {}}})),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text, "{\n    \"a\": [\n        1\n    ],\n    \"b\": {}\n}");
    }

    #[test]
    fn strftime_formats_a_known_day() {
        // 2024-07-23 is a Tuesday.
        let secs = 1_721_692_800 + 3_661;
        assert_eq!(strftime(secs, "%d %b %Y"), "23 Jul 2024");
        assert_eq!(
            strftime(secs, "%A %B %-d, %H:%M:%S %%"),
            "Tuesday July 23, 01:01:01 %"
        );
    }
}
