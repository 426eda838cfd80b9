//! Request profiles (SPEC §1, Request counting): how a provider renders — and so
//! counts — a request. One owner for Rust and Python hosts; [`super::request`] counts
//! by them.
//!
//! ```
//! use ctxbudget::tokens::profile::Profile;
//!
//! assert_eq!(Profile::for_model("openai/gpt-oss-120b"), Profile::Harmony);
//! assert_eq!(Profile::for_model("claude-sonnet-4-5"), Profile::AnthropicMessages);
//! assert_eq!(Profile::for_model("gpt-4o"), Profile::OpenAiChat);
//! assert_eq!(Profile::parse("openai_responses"), Some(Profile::OpenAiResponses));
//! ```

use super::pdf::PdfRule;
use super::request::ImageRule;

/// How a request is rendered and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// OpenAI Chat Completions: the cookbook's framing (3 tokens per message plus its
    /// role, +1 and the name for a `name`, 3 per request), function tools as the
    /// TypeScript namespace plus the calibrated constants, a tool call as its name and
    /// arguments inside an assistant message.
    OpenAiChat,
    /// OpenAI Responses: messages framed as in chat; each `function_call` and
    /// `function_call_output` item is a message of its own, so an assistant turn that
    /// only calls tools has no assistant message around its calls.
    OpenAiResponses,
    /// gpt-oss: exactly the harmony renderer's tokens ([`super::harmony`]).
    Harmony,
    /// Anthropic Messages: chat framing over an estimated tokenizer; Anthropic's image
    /// and PDF rules.
    AnthropicMessages,
    /// Gemini: chat framing over an estimated tokenizer; Gemini's PDF rule.
    Gemini,
    /// Open-weight models: the model's own Jinja chat template, tools and generation
    /// prompt included, counted by its own tokenizer ([`super::template`]). Only an
    /// encoding read with its chat template counts by it.
    ChatTemplate,
    /// Mistral models of instruct tokenizer v3 (Nemo, Pixtral 12B, 7B v0.3, Mixtral
    /// 8x22B): exactly `mistral-common`'s request encoder's tokens
    /// ([`super::mistral`]), counted by the encoding given (the model's tekken or
    /// SentencePiece v3 file).
    MistralV3,
    /// Mistral models of instruct tokenizer v7 (Mistral Large 2411, Mistral Small 3 and
    /// others whose files say v7): the same encoder with system prompts in place
    /// between `[SYSTEM_PROMPT]` tokens and tool results as `[TOOL_RESULTS]` call id
    /// `[TOOL_CONTENT]` text ([`super::mistral`]).
    MistralV7,
}

impl Profile {
    /// Every profile, in the order of its names.
    pub const ALL: [Profile; 8] = [
        Profile::OpenAiChat,
        Profile::OpenAiResponses,
        Profile::Harmony,
        Profile::AnthropicMessages,
        Profile::Gemini,
        Profile::ChatTemplate,
        Profile::MistralV3,
        Profile::MistralV7,
    ];

    /// The profile's name: `openai_chat`, `openai_responses`, `harmony`,
    /// `anthropic_messages`, `gemini`, `chat_template`, `mistral_v3` or `mistral_v7`.
    pub fn name(self) -> &'static str {
        match self {
            Profile::OpenAiChat => "openai_chat",
            Profile::OpenAiResponses => "openai_responses",
            Profile::Harmony => "harmony",
            Profile::AnthropicMessages => "anthropic_messages",
            Profile::Gemini => "gemini",
            Profile::ChatTemplate => "chat_template",
            Profile::MistralV3 => "mistral_v3",
            Profile::MistralV7 => "mistral_v7",
        }
    }

    /// The `mistral-common` instruct tokenizer version a Mistral profile encodes as.
    pub fn mistral_version(self) -> Option<super::mistral::Version> {
        match self {
            Profile::MistralV3 => Some(super::mistral::Version::V3),
            Profile::MistralV7 => Some(super::mistral::Version::V7),
            _ => None,
        }
    }

    /// The profile named `name` (see [`Profile::name`]).
    pub fn parse(name: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The profile a model's requests are counted with: harmony for gpt-oss, Anthropic's
    /// for Claude, Gemini's for Gemini (also behind provider prefixes such as
    /// `openai/`, `anthropic/`, `bedrock/…anthropic.`, `models/`), OpenAI chat for any
    /// other model. A host on the Responses API chooses `openai_responses` itself, one
    /// that reads a model's chat template chooses `chat_template`, and one that serves
    /// a Mistral model through `mistral-common` chooses `mistral_v3` or `mistral_v7` by
    /// the instruct tokenizer version its files name.
    pub fn for_model(model: &str) -> Profile {
        let lower = model.to_ascii_lowercase();
        let forms = super::windows::name_forms(&lower);
        if forms.iter().any(|f| f.starts_with("gpt-oss")) {
            Profile::Harmony
        } else if lower.contains("claude") {
            Profile::AnthropicMessages
        } else if forms.iter().any(|f| f.starts_with("gemini")) {
            Profile::Gemini
        } else {
            Profile::OpenAiChat
        }
    }

    /// Whose rule counts the request's images.
    pub fn image_rule(self) -> ImageRule {
        match self {
            Profile::AnthropicMessages => ImageRule::Anthropic,
            _ => ImageRule::OpenAi,
        }
    }

    /// Whose rule counts the request's PDF pages.
    pub fn pdf_rule(self) -> PdfRule {
        match self {
            Profile::AnthropicMessages => PdfRule::Anthropic,
            Profile::Gemini => PdfRule::Gemini,
            _ => PdfRule::OpenAi,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_resolve() {
        for name in [
            "gpt-oss-20b",
            "gpt-oss-120b",
            "openai/gpt-oss-20b",
            "GPT-OSS-120B",
        ] {
            assert_eq!(Profile::for_model(name), Profile::Harmony, "{name}");
        }
        for name in [
            "anthropic/claude-sonnet-4-5",
            "us.anthropic.claude-3-5-haiku",
        ] {
            assert_eq!(
                Profile::for_model(name),
                Profile::AnthropicMessages,
                "{name}"
            );
        }
        assert_eq!(Profile::for_model("models/gemini-2.5-pro"), Profile::Gemini);
        assert_eq!(Profile::for_model("openai/gpt-4o"), Profile::OpenAiChat);
        for p in Profile::ALL {
            assert_eq!(Profile::parse(p.name()), Some(p));
        }
        assert_eq!(Profile::parse("chat"), None);
    }
}
