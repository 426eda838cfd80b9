//! Errors of the token-counting module.

/// Everything that can go wrong while choosing an encoding or counting tokens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The encoding name is not one this library ships.
    #[error("unknown encoding {name:?}; choose one of: {known}")]
    UnknownEncoding {
        /// The name that was asked for.
        name: String,
        /// The encodings that exist, comma-separated.
        known: String,
    },
    /// No tokenizer is known for the model, exact or estimated.
    #[error(
        "unknown model {model:?}: no tokenizer is known for it; pass an explicit encoding \
         (for example \"o200k_base\") instead of guessing from characters"
    )]
    UnknownModel {
        /// The model name that was asked for.
        model: String,
    },
    /// The text given to `count_json` is not valid JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}; pass valid JSON text")]
    InvalidJson {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser found wrong.
        message: String,
    },
    /// The rank table of an encoding could not be built.
    #[error("could not load the rank table of {name}: {reason}")]
    RankTable {
        /// The encoding whose table failed.
        name: String,
        /// Why it failed.
        reason: String,
    },
    /// A tokenizer file or model directory could not be read.
    #[error("could not read the tokenizer at {path}: {reason}")]
    TokenizerFile {
        /// The file or directory.
        path: String,
        /// Why: what is missing or not supported.
        reason: String,
    },
    /// A chat template could not be rendered.
    #[error("the chat template could not be rendered: {reason}")]
    ChatTemplate {
        /// The template engine's message (the template's own `raise_exception` text
        /// included).
        reason: String,
    },
}
