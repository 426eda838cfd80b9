//! Model names → context windows, from one data file (`data/models.json`) in which every
//! figure names its source, and the name forms hosts use: LiteLLM-style
//! `provider/model` names (`openai/gpt-4o`, `openrouter/anthropic/claude-…`), Bedrock's
//! `us.anthropic.claude-…`, Hugging Face repository names (`Qwen/Qwen2.5-7B-Instruct`)
//! and Ollama tags (`llama3.1:8b`).
//!
//! ```
//! use ctxbudget::tokens::windows::{context_window, WindowError};
//!
//! assert_eq!(context_window("openai/gpt-4o")?.context_window, 128_000);
//! assert_eq!(context_window("meta-llama/Llama-3.1-8B-Instruct")?.context_window, 131_072);
//! // Ollama serves a model with its num_ctx, not the model's window: the host must say.
//! assert!(matches!(context_window("ollama/llama3.1"), Err(WindowError::ServerDecides { .. })));
//! # Ok::<(), WindowError>(())
//! ```

use std::sync::OnceLock;

use serde::Deserialize;

/// A model family's context window, as the table states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelWindow {
    /// Input plus output tokens the model takes.
    pub context_window: u32,
    /// Who makes the model (`"openai"`, `"anthropic"`, `"meta"`, …).
    pub provider: &'static str,
    /// The name prefix that matched (lower case).
    pub family: &'static str,
    /// Where the figure comes from.
    pub source: &'static str,
}

/// Why a model's window is not known.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// No family in the table matches the name.
    #[error("no known context window for model {model:?}; pass context_window=N")]
    Unknown {
        /// The name asked for.
        model: String,
    },
    /// The server, not the model, decides the window (Ollama's `num_ctx`).
    #[error(
        "model {model:?} is served by {provider}, and {why}: pass the window the server \
         runs it with, context_window=N"
    )]
    ServerDecides {
        /// The name asked for.
        model: String,
        /// The serving provider named in the model's prefix.
        provider: String,
        /// Why its window must be given.
        why: String,
    },
}

#[derive(Deserialize)]
struct Family {
    prefix: String,
    provider: String,
    context_window: u32,
    source: String,
}

#[derive(Deserialize)]
struct Table {
    explicit_window_providers: std::collections::BTreeMap<String, String>,
    families: Vec<Family>,
}

/// The table, parsed once. The file ships inside the library and a test parses it, so a
/// parse failure is a build defect; it then behaves as an empty table (every lookup
/// asks for `context_window=`), never a panic.
fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str(include_str!("data/models.json")).unwrap_or(Table {
            explicit_window_providers: Default::default(),
            families: Vec::new(),
        })
    })
}

/// Vendor prefixes of Bedrock-style model IDs (`anthropic.claude-…`, `meta.llama3-…`),
/// optionally after a region (`us.`, `eu.`, `apac.`).
const VENDOR_DOTS: &[&str] = &[
    "anthropic.",
    "meta.",
    "mistral.",
    "deepseek.",
    "qwen.",
    "openai.",
];

/// The forms of `model` to look up, most specific first: the name as given, then with
/// each leading `provider/` segment taken off in turn, each also without a Bedrock-style
/// `vendor.` prefix.
pub(crate) fn name_forms(model: &str) -> Vec<&str> {
    let mut forms = Vec::with_capacity(4);
    let mut rest = model;
    loop {
        forms.push(rest);
        if let Some(tail) = without_vendor(rest) {
            forms.push(tail);
        }
        match rest.split_once('/') {
            Some((_, tail)) if !tail.is_empty() => rest = tail,
            _ => break,
        }
    }
    forms
}

/// `name` without a Bedrock-style `vendor.` prefix (and the region before it), if it
/// has one.
fn without_vendor(name: &str) -> Option<&str> {
    let unregioned = name
        .split_once('.')
        .filter(|(region, tail)| {
            (2..=4).contains(&region.len())
                && region.bytes().all(|b| b.is_ascii_lowercase())
                && VENDOR_DOTS.iter().any(|v| tail.starts_with(v))
        })
        .map_or(name, |(_, tail)| tail);
    VENDOR_DOTS
        .iter()
        .find_map(|v| unregioned.strip_prefix(v))
        .filter(|tail| !tail.is_empty())
}

/// The context window of `model` (see the module docs for the name forms).
pub fn context_window(model: &str) -> Result<ModelWindow, WindowError> {
    let table = table();
    if let Some((provider, _)) = model.split_once('/') {
        if let Some(why) = table
            .explicit_window_providers
            .get(&provider.to_ascii_lowercase())
        {
            return Err(WindowError::ServerDecides {
                model: model.to_owned(),
                provider: provider.to_owned(),
                why: why.clone(),
            });
        }
    }
    for form in name_forms(model) {
        let lower = form.to_ascii_lowercase();
        let best = table
            .families
            .iter()
            .filter(|f| lower.starts_with(&f.prefix))
            .max_by_key(|f| f.prefix.len());
        if let Some(f) = best {
            return Ok(ModelWindow {
                context_window: f.context_window,
                provider: &f.provider,
                family: &f.prefix,
                source: &f.source,
            });
        }
    }
    Err(WindowError::Unknown {
        model: model.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(model: &str) -> Option<u32> {
        context_window(model).ok().map(|w| w.context_window)
    }

    #[test]
    fn the_table_parses_and_every_entry_has_a_source() {
        let t: Table = serde_json::from_str(include_str!("data/models.json"))
            .unwrap_or_else(|e| panic!("data/models.json: {e}"));
        assert!(t.families.len() > 50);
        for f in &t.families {
            assert!(f.source.starts_with("https://"), "{}", f.prefix);
            assert_eq!(f.prefix, f.prefix.to_ascii_lowercase());
            assert!(f.context_window >= 2_048, "{}", f.prefix);
        }
        let mut prefixes: Vec<_> = t.families.iter().map(|f| &f.prefix).collect();
        prefixes.sort();
        prefixes.dedup();
        assert_eq!(prefixes.len(), t.families.len(), "a prefix listed twice");
    }

    #[test]
    fn provider_prefixed_names_resolve() {
        assert_eq!(window("gpt-4o"), Some(128_000));
        assert_eq!(window("openai/gpt-4o-mini"), Some(128_000));
        assert_eq!(window("azure/gpt-4.1-nano"), Some(1_047_576));
        assert_eq!(window("anthropic/claude-sonnet-4-5"), Some(200_000));
        assert_eq!(
            window("openrouter/anthropic/claude-3.5-sonnet"),
            Some(200_000)
        );
        assert_eq!(
            window("bedrock/us.anthropic.claude-3-5-sonnet-20241022-v2:0"),
            Some(200_000)
        );
        assert_eq!(
            window("vertex_ai/claude-3-5-sonnet-v2@20241022"),
            Some(200_000)
        );
        assert_eq!(window("gemini/gemini-2.5-pro"), Some(1_048_576));
        assert_eq!(
            window("bedrock/meta.llama3-1-70b-instruct-v1:0"),
            Some(131_072)
        );
        assert_eq!(window("Qwen/Qwen2.5-7B-Instruct"), Some(32_768));
        assert_eq!(
            window("hosted_vllm/meta-llama/Llama-3.3-70B-Instruct"),
            Some(131_072)
        );
        assert_eq!(window("deepseek/deepseek-chat"), Some(131_072));
        assert_eq!(window("mistral/mistral-large-latest"), Some(131_072));
        assert_eq!(window("gpt-4"), Some(8_192));
        assert_eq!(window("gpt-4-turbo-2024-04-09"), Some(128_000));
        assert_eq!(window("o1-mini"), Some(128_000));
        assert_eq!(window("gemma-3-1b-it"), Some(32_768));
    }

    #[test]
    fn unknown_and_server_decided_windows_are_errors() {
        assert!(matches!(
            context_window("my-finetune"),
            Err(WindowError::Unknown { .. })
        ));
        let err = context_window("ollama/llama3.1:8b").unwrap_err();
        assert!(matches!(err, WindowError::ServerDecides { .. }));
        assert!(err.to_string().contains("num_ctx"), "{err}");
        assert!(context_window("").is_err());
        assert!(context_window("/").is_err());
    }

    #[test]
    fn name_forms_peel_provider_segments_and_vendor_dots() {
        assert_eq!(
            name_forms("bedrock/us.anthropic.claude-x"),
            vec![
                "bedrock/us.anthropic.claude-x",
                "us.anthropic.claude-x",
                "claude-x"
            ]
        );
        assert_eq!(name_forms("a/b/"), vec!["a/b/", "b/"]);
        assert_eq!(name_forms("gpt-4.1"), vec!["gpt-4.1"]);
    }
}
