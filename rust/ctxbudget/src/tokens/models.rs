//! Model name → encoding, after tiktoken's own table.

/// How a model's tokens are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelEncoding {
    /// Name of the encoding to count with.
    pub encoding: &'static str,
    /// `None` when the encoding is the model's real tokenizer; otherwise the factor, in
    /// basis points (12_500 = ×1.25), that turns its count into an estimate for a model
    /// whose tokenizer is not public. Estimates are rounded up.
    pub estimate_scale_bp: Option<u32>,
}

/// Exact model names (tiktoken's `MODEL_TO_ENCODING`).
const EXACT: &[(&str, &str)] = &[
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4-mini", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35-turbo", "cl100k_base"),
    ("davinci-002", "cl100k_base"),
    ("babbage-002", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
    ("text-embedding-3-small", "cl100k_base"),
    ("text-embedding-3-large", "cl100k_base"),
    ("text-davinci-003", "p50k_base"),
    ("text-davinci-002", "p50k_base"),
    ("text-davinci-001", "r50k_base"),
    ("text-curie-001", "r50k_base"),
    ("text-babbage-001", "r50k_base"),
    ("text-ada-001", "r50k_base"),
    ("davinci", "r50k_base"),
    ("curie", "r50k_base"),
    ("babbage", "r50k_base"),
    ("ada", "r50k_base"),
    ("code-davinci-002", "p50k_base"),
    ("code-davinci-001", "p50k_base"),
    ("code-cushman-002", "p50k_base"),
    ("code-cushman-001", "p50k_base"),
    ("davinci-codex", "p50k_base"),
    ("cushman-codex", "p50k_base"),
    ("text-davinci-edit-001", "p50k_edit"),
    ("code-davinci-edit-001", "p50k_edit"),
    ("text-similarity-davinci-001", "r50k_base"),
    ("text-similarity-curie-001", "r50k_base"),
    ("text-similarity-babbage-001", "r50k_base"),
    ("text-similarity-ada-001", "r50k_base"),
    ("text-search-davinci-doc-001", "r50k_base"),
    ("text-search-curie-doc-001", "r50k_base"),
    ("text-search-babbage-doc-001", "r50k_base"),
    ("text-search-ada-doc-001", "r50k_base"),
    ("code-search-babbage-code-001", "r50k_base"),
    ("code-search-ada-code-001", "r50k_base"),
    ("gpt2", "gpt2"),
    ("gpt-2", "gpt2"),
];

/// Encodings that are another encoding under a second name: tiktoken registers `gpt2`
/// with the very ranks and split pattern of `r50k_base`.
const ALIASES: &[(&str, &str)] = &[("gpt2", "r50k_base")];

/// The encoding whose rank table `name` uses (`name` itself unless it is an alias).
pub(crate) fn rank_source(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, source)| source)
}

/// Name prefixes, tried in order (tiktoken's `MODEL_PREFIX_TO_ENCODING`).
const PREFIXES: &[(&str, &str)] = &[
    ("o1-", "o200k_base"),
    ("o3-", "o200k_base"),
    ("o4-mini-", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-4.5-", "o200k_base"),
    ("gpt-4.1-", "o200k_base"),
    ("chatgpt-4o-", "o200k_base"),
    ("gpt-4o-", "o200k_base"),
    ("gpt-4-", "cl100k_base"),
    ("gpt-3.5-turbo-", "cl100k_base"),
    ("gpt-35-turbo-", "cl100k_base"),
    ("gpt-oss-", "o200k_harmony"),
    ("ft:gpt-4o", "o200k_base"),
    ("ft:gpt-4", "cl100k_base"),
    ("ft:gpt-3.5-turbo", "cl100k_base"),
    ("ft:davinci-002", "cl100k_base"),
    ("ft:babbage-002", "cl100k_base"),
];

/// Families whose tokenizer is not public: counted with a stated encoding and scaled up.
///
/// Claude's tokenizer yields noticeably more tokens than cl100k on English and code
/// (its newer models more still), so the estimate is cl100k × 1.30. Gemini's
/// SentencePiece vocabulary is close to o200k in density; o200k × 1.10 leaves margin.
/// Both err high on purpose: a budget that overestimates hands off early, one that
/// underestimates overflows the model.
pub const ESTIMATES: &[(&str, &str, u32)] = &[
    ("claude-", "cl100k_base", 13_000),
    ("gemini-", "o200k_base", 11_000),
];

/// Resolves a model name; `None` when nothing is known about it. Provider-qualified
/// names (`openai/gpt-4o`, `us.anthropic.claude-…`, `models/gemini-…`) resolve like the
/// model they name ([`super::windows`] lists the forms).
pub fn model_encoding(model: &str) -> Option<ModelEncoding> {
    super::windows::name_forms(model)
        .into_iter()
        .find_map(direct)
        // A fine-tune of a model we know counts like its base model.
        .or_else(|| model.strip_prefix("ft:").and_then(model_encoding))
}

/// `name` looked up as it stands: tiktoken's exact names, then its prefixes, then the
/// estimated families.
fn direct(name: &str) -> Option<ModelEncoding> {
    let exact = |encoding| ModelEncoding {
        encoding,
        estimate_scale_bp: None,
    };
    if let Some(&(_, enc)) = EXACT.iter().find(|(n, _)| *n == name) {
        return Some(exact(enc));
    }
    if let Some(&(_, enc)) = PREFIXES.iter().find(|(p, _)| name.starts_with(p)) {
        return Some(exact(enc));
    }
    ESTIMATES
        .iter()
        .find(|(p, _, _)| name.starts_with(p))
        .map(|&(_, enc, scale)| ModelEncoding {
            encoding: enc,
            estimate_scale_bp: Some(scale),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_tiktoken_table() {
        let enc = |m| model_encoding(m).map(|e| e.encoding);
        assert_eq!(enc("gpt-4o"), Some("o200k_base"));
        assert_eq!(enc("gpt-4o-2024-05-13"), Some("o200k_base"));
        assert_eq!(enc("gpt-4"), Some("cl100k_base"));
        assert_eq!(enc("gpt-4-32k"), Some("cl100k_base"));
        assert_eq!(enc("gpt-5-mini"), Some("o200k_base"));
        assert_eq!(enc("ft:gpt-4o-mini:org::abc"), Some("o200k_base"));
        assert_eq!(enc("ft:o3-mini:org::abc"), Some("o200k_base"));
        assert_eq!(enc("gpt-oss-20b"), Some("o200k_harmony"));
        assert_eq!(enc("text-davinci-003"), Some("p50k_base"));
        assert_eq!(enc("gpt2"), Some("gpt2"));
        assert_eq!(enc("gpt-2"), Some("gpt2"));
        assert_eq!(rank_source("gpt2"), "r50k_base");
        assert_eq!(rank_source("r50k_base"), "r50k_base");
        assert_eq!(enc("llama-3"), None);
        assert_eq!(enc("openai/gpt-4o"), Some("o200k_base"));
        assert_eq!(enc("azure/gpt-35-turbo"), Some("cl100k_base"));
        assert_eq!(enc("openrouter/openai/gpt-4.1-mini"), Some("o200k_base"));
        assert_eq!(enc("ollama/llama3.1"), None);
        assert_eq!(enc("ft:unknown"), None);
    }

    #[test]
    fn estimates_are_marked() {
        let claude = model_encoding("claude-sonnet-4-5").unwrap_or_else(|| panic!("claude"));
        assert_eq!(claude.estimate_scale_bp, Some(13_000));
        let bedrock = model_encoding("us.anthropic.claude-3.5-sonnet").map(|e| e.encoding);
        assert_eq!(bedrock, Some("cl100k_base"));
        let prefixed = model_encoding("anthropic/claude-sonnet-4-5").map(|e| e.estimate_scale_bp);
        assert_eq!(prefixed, Some(Some(13_000)));
        let gemini = model_encoding("models/gemini-2.5-pro").unwrap_or_else(|| panic!("gemini"));
        assert_eq!(gemini.estimate_scale_bp, Some(11_000));
        assert_eq!(
            model_encoding("gpt-4o").and_then(|e| e.estimate_scale_bp),
            None
        );
    }
}
