//! Exact, linear-time token counting.
//!
//! Counts equal `len(tiktoken.get_encoding(name).encode_ordinary(text))` for every
//! text of every shipped encoding, and the original's count for an open-weight
//! tokenizer read from its files ([`Encoding::from_file`], [`Encoding::from_dir`]:
//! HuggingFace `tokenizer.json` byte-level BPE, Mistral tekken, SentencePiece models
//! counted by the `sentencepiece` library's own steps), whose chat template
//! [`template`] renders. The rank tables are tiktoken's own files, embedded
//! in the library (no network, ever); the split into pre-tokens is a hand-written
//! scanner equivalent to tiktoken's regex, which runs in one forward pass and never
//! backtracks; pieces are merged by a hash lookup (most are one token), tiktoken's
//! quadratic merge (short ones) or a linear backtracking encoder (long ones: a megabyte
//! of spaces, one enormous word, a base64 blob).
//!
//! ```
//! use ctxbudget::tokens::Encoding;
//!
//! let enc = Encoding::new("o200k_base")?;
//! assert_eq!(enc.count("Hello, world!"), 4);
//! let detail = enc.count_detail(&" ".repeat(1 << 20));
//! assert_eq!(detail.tokens, 8_192); // exact, in linear time
//! assert!(detail.exact);
//! # Ok::<(), ctxbudget::tokens::TokenError>(())
//! ```

mod added;
mod backtrack;
mod bpe;
mod cache;
mod chunk;
#[cfg(test)]
mod cl100k_reference;
mod deepseek;
mod error;
mod files;
pub mod harmony;
mod hf;
mod hf_bpe;
mod json;
mod json_scan;
pub mod media;
mod merges;
pub mod mistral;
mod models;
#[cfg(test)]
mod o200k_reference;
pub mod pdf;
mod pieces;
mod pretokenize;
pub mod profile;
mod python_json;
pub mod request;
mod segments;
mod sentencepiece;
mod split;
pub mod template;
mod template_python;
mod token_index;
pub mod typescript;
mod unicode;
mod vocab;
pub mod windows;

use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

pub use error::TokenError;
pub use models::{model_encoding, ModelEncoding};

use added::TextRules;
use bpe::{Ranks, Scratch};
use cache::CountCache;
use pretokenize::Family;
use segments::SegmentCache;
use vocab::Vocab;

/// Counts cached per [`Encoding`] by default (see [`Encoding::with_cache_capacity`]).
pub const DEFAULT_CACHE_CAPACITY: usize = 16_384;

/// Texts shorter than this are recounted rather than looked up: hashing and locking
/// would cost about as much as counting them.
const CACHE_MIN_BYTES: usize = 64;

/// Batches of [`Encoding::count_many`] smaller than this in all are counted on the
/// calling thread.
const PARALLEL_MIN_BYTES: usize = 32 * 1024;

/// Texts of [`Encoding::count_many`] at least this long are cut into parts counted in
/// parallel.
const SPLIT_MIN_BYTES: usize = 1 << 20;

/// The size of those parts (a part runs on where the text has no exact boundary).
const SPLIT_PART_BYTES: usize = 256 * 1024;

/// The encodings this library ships, with their split-pattern family.
const ENCODINGS: &[(&str, Family)] = &[
    ("o200k_base", Family::O200k),
    ("o200k_harmony", Family::O200k),
    ("cl100k_base", Family::Cl100k),
    ("p50k_base", Family::Gpt2),
    ("p50k_edit", Family::Gpt2),
    ("r50k_base", Family::Gpt2),
    ("gpt2", Family::Gpt2),
];

/// Names of every encoding [`Encoding::new`] accepts.
pub fn encoding_names() -> impl Iterator<Item = &'static str> {
    ENCODINGS.iter().map(|(name, _)| *name)
}

/// The result of counting one text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TokenCount {
    /// Number of tokens; an estimate when `exact` is false.
    pub tokens: usize,
    /// True when `tokens` equals the tokenizer's own count (tiktoken's for the shipped
    /// encodings, the original's for a file read by [`Encoding::from_file`]): always,
    /// unless the encoding estimates another model's tokenizer ([`Encoding::for_model`]).
    pub exact: bool,
}

/// Rank table and pattern of one encoding, shared by every [`Encoding`] of that name.
struct Tables {
    family: Family,
    ranks: Ranks,
    /// Added tokens and normalizers of a tokenizer read from a file (`None` for
    /// tiktoken's encodings, whose counts are `encode_ordinary`'s).
    rules: Option<TextRules>,
    /// The chat template that came with a tokenizer read from a directory.
    template: Option<template::ChatTemplate>,
    /// A SentencePiece model, which counts text on its own (`ranks` is then empty).
    sentencepiece: Option<sentencepiece::Model>,
}

/// A tokenizer: counts tokens of text for one encoding.
///
/// Cloning is cheap and clones share the count cache.
#[derive(Clone)]
pub struct Encoding {
    name: &'static str,
    tables: &'static Tables,
    estimate_scale_bp: Option<u32>,
    chunk_bytes: usize,
    cache_capacity: usize,
    cache: Option<Arc<CountCache>>,
}

impl std::fmt::Debug for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoding")
            .field("name", &self.name)
            .field("estimate_scale_bp", &self.estimate_scale_bp)
            .finish_non_exhaustive()
    }
}

fn load_tables(name: &str) -> Result<Tables, TokenError> {
    let fail = |reason: String| TokenError::RankTable {
        name: name.to_owned(),
        reason,
    };
    let family = ENCODINGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .ok_or_else(|| fail("not a shipped encoding".to_owned()))?;
    let data = vocab::source(name).ok_or_else(|| fail("no rank table shipped".to_owned()))?;
    let ranks = Ranks::new(Vocab::parse(data).map_err(fail)?);
    if ranks.len() < 256 {
        return Err(fail(format!("only {} ranks decoded", ranks.len())));
    }
    unicode::warm_up();
    Ok(Tables {
        family,
        ranks,
        rules: None,
        template: None,
        sentencepiece: None,
    })
}

/// The shared tables of `name`, loaded on first use.
fn tables(name: &str) -> Result<(&'static str, &'static Tables), TokenError> {
    static LOADED: [OnceLock<Result<Tables, TokenError>>; ENCODINGS.len()] =
        [const { OnceLock::new() }; ENCODINGS.len()];
    let Some(index) = ENCODINGS.iter().position(|(n, _)| *n == name) else {
        return Err(TokenError::UnknownEncoding {
            name: name.to_owned(),
            known: encoding_names().collect::<Vec<_>>().join(", "),
        });
    };
    let static_name = ENCODINGS[index].0;
    // An alias shares the tables of the encoding it names.
    let source = models::rank_source(static_name);
    let source_index = ENCODINGS
        .iter()
        .position(|(n, _)| *n == source)
        .unwrap_or(index);
    match LOADED[source_index].get_or_init(|| load_tables(ENCODINGS[source_index].0)) {
        Ok(tables) => Ok((static_name, tables)),
        Err(e) => Err(e.clone()),
    }
}

impl Encoding {
    /// The encoding called `name` (see [`encoding_names`]).
    ///
    /// The first call for a name builds its rank table (a few milliseconds); later
    /// calls share it. The tables of the long-piece encoder are built once a quarter
    /// megabyte of long pieces (a run of spaces, a base64 blob) has been counted.
    pub fn new(name: &str) -> Result<Encoding, TokenError> {
        let (name, tables) = tables(name)?;
        Ok(Encoding {
            name,
            tables,
            estimate_scale_bp: None,
            chunk_bytes: chunk::CHUNK_BYTES,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            cache: Some(Arc::new(CountCache::new(DEFAULT_CACHE_CAPACITY))),
        })
    }

    /// The tokenizer in the file at `path`: a HuggingFace `tokenizer.json` (byte-level
    /// BPE: Llama 3, Qwen 2/3, DeepSeek, Phi-4 and the like), a Mistral `tekken*.json`
    /// or a SentencePiece model (`tokenizer.model`: Llama 2, Gemma, Mistral v1–v3).
    /// Counts equal the original's (`encode(text, add_special_tokens=False)`: added
    /// and special tokens in the text count as one token each; `sentencepiece`'s
    /// `encode(text)` for its models). Nothing is downloaded; a file is read once per process and its
    /// tables are kept for the life of the process.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Encoding, TokenError> {
        Ok(Encoding::from_tables(files::load_file(path.as_ref())?))
    }

    /// The tokenizer of a model directory as published: its SentencePiece
    /// `tokenizer.model` (or `tokenizer.model.v3`), else its `tokenizer.json` or
    /// `tekken.json`, with the chat template of its `tokenizer_config.json`,
    /// `chat_template.jinja` or `chat_template.json` (see [`Encoding::chat_template`]).
    pub fn from_dir(dir: impl AsRef<std::path::Path>) -> Result<Encoding, TokenError> {
        Ok(Encoding::from_tables(files::load_dir(dir.as_ref())?))
    }

    /// The tokenizer of `model` found under `root`, a directory of model directories
    /// the host keeps (plain `Llama-3.1-8B-Instruct/` directories or a HuggingFace
    /// cache): `ollama/llama3.1:8b`, `hosted_vllm/Qwen/Qwen2.5-7B-Instruct` and the like
    /// find theirs by name. See [`Encoding::from_dir`].
    pub fn for_model_in(
        root: impl AsRef<std::path::Path>,
        model: &str,
    ) -> Result<Encoding, TokenError> {
        Ok(Encoding::from_tables(files::load_model(
            root.as_ref(),
            model,
        )?))
    }

    fn from_tables((name, tables): (&'static str, &'static Tables)) -> Encoding {
        Encoding {
            name,
            tables,
            estimate_scale_bp: None,
            chunk_bytes: chunk::CHUNK_BYTES,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            cache: Some(Arc::new(CountCache::new(DEFAULT_CACHE_CAPACITY))),
        }
    }

    /// The chat template that came with a tokenizer read by [`Encoding::from_dir`].
    pub fn chat_template(&self) -> Option<&'static template::ChatTemplate> {
        self.tables.template.as_ref()
    }

    /// The encoding that counts tokens for `model`: its real tokenizer when tiktoken
    /// knows it, or a stated estimate (see [`models::ESTIMATES`]) for families whose
    /// tokenizer is not public, whose counts then report `exact == false`.
    pub fn for_model(model: &str) -> Result<Encoding, TokenError> {
        let found = model_encoding(model).ok_or_else(|| TokenError::UnknownModel {
            model: model.to_owned(),
        })?;
        let mut enc = Encoding::new(found.encoding)?;
        enc.estimate_scale_bp = found.estimate_scale_bp;
        Ok(enc)
    }

    /// The same encoding with a cache of about `capacity` counts (0 disables caching).
    /// The new cache is not shared with `self`.
    pub fn with_cache_capacity(mut self, capacity: usize) -> Encoding {
        self.cache_capacity = capacity;
        self.cache = (capacity > 0).then(|| Arc::new(CountCache::new(capacity)));
        self
    }

    /// The same encoding cutting text into chunks of about `bytes` (at least 64), at
    /// exact pre-token boundaries only: a chunk runs on past the bound when the text
    /// offers no such boundary (a run of spaces, one enormous word). By default text is
    /// not chunked at all. Counts never depend on the chunk size; this exists for tests
    /// and experiments. The result gets a cache of its own.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Encoding {
        self.chunk_bytes = bytes.max(64);
        let capacity = self.cache_capacity;
        self.with_cache_capacity(capacity)
    }

    /// Name of the encoding, e.g. `"o200k_base"`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The estimate factor in basis points, if counts are estimates for another model.
    pub fn estimate_scale_bp(&self) -> Option<u32> {
        self.estimate_scale_bp
    }

    /// Number of tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        self.count_detail(text).tokens
    }

    /// Number of tokens in `text`, and whether that number is exact (it is, unless the
    /// encoding estimates another model's tokenizer).
    pub fn count_detail(&self, text: &str) -> TokenCount {
        let cache = self
            .cache
            .as_ref()
            .filter(|_| text.len() >= CACHE_MIN_BYTES);
        let key = cache.map(|_| CountCache::key(text));
        if let (Some(cache), Some(key)) = (cache, key) {
            if let Some(hit) = cache.get(key) {
                return self.scaled(hit);
            }
        }
        let raw = self.count_uncached(text);
        if let (Some(cache), Some(key)) = (cache, key) {
            cache.insert(key, raw);
        }
        self.scaled(raw)
    }

    /// Counts of many texts, spread over all cores: one task per text, and a text of a
    /// megabyte or more cut at exact pre-token boundaries into parts counted in
    /// parallel (their counts add up to the text's). A batch of less than 32 KiB in all
    /// is counted on the calling thread, where handing it to the pool would cost more
    /// than counting it.
    pub fn count_many<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<usize> {
        let total: usize = texts.iter().map(|t| t.as_ref().len()).sum();
        if total < PARALLEL_MIN_BYTES {
            return texts.iter().map(|t| self.count(t.as_ref())).collect();
        }
        texts
            .par_iter()
            .map(|t| self.count_split(t.as_ref()))
            .collect()
    }

    /// [`Encoding::count`], with a long text (of tiktoken's encodings or a
    /// `tokenizer.json` without added tokens or normalizers) cut into parts at exact
    /// boundaries that the pool counts in parallel.
    fn count_split(&self, text: &str) -> usize {
        let plain = self.tables.rules.is_none() && self.tables.sentencepiece.is_none();
        if text.len() < SPLIT_MIN_BYTES || !plain {
            return self.count(text);
        }
        let key = self.cache.as_ref().map(|_| CountCache::key(text));
        if let (Some(cache), Some(key)) = (&self.cache, key) {
            if let Some(hit) = cache.get(key) {
                return self.scaled(hit).tokens;
            }
        }
        let bytes = text.as_bytes();
        let mut cuts = vec![0];
        let mut start = 0;
        while start < bytes.len() {
            start = chunk::next_cut(self.tables.family, bytes, start, SPLIT_PART_BYTES);
            cuts.push(start);
        }
        let tokens = cuts
            .par_windows(2)
            .map(|w| {
                // Cuts fall on ASCII bytes (see chunk.rs), so each part is a `str`.
                let mut scratch = Scratch::lend_piece_cache();
                let mut segments = SegmentCache::take();
                let n = self.count_text(&text[w[0]..w[1]], &mut scratch, &mut segments);
                segments.give_back();
                scratch.return_piece_cache();
                n
            })
            .sum();
        let raw = TokenCount {
            tokens,
            exact: true,
        };
        if let (Some(cache), Some(key)) = (&self.cache, key) {
            cache.insert(key, raw);
        }
        self.scaled(raw).tokens
    }

    /// Tokens of a JSON document: the tokens of its string contents plus one per byte
    /// of everything else (punctuation, numbers, escapes), and never less than the
    /// count of the JSON text itself.
    ///
    /// Counts of documents of 64 bytes and more are cached (tool schemas are counted
    /// again for every request that advertises them).
    pub fn count_json(&self, json_text: &str) -> Result<usize, TokenError> {
        // The same lookup as count_detail's, written out: a shared generic helper made
        // count_detail's cache hit measurably slower (65-69 vs 72-75 ns per 1 KiB hit).
        let cache = self
            .cache
            .as_ref()
            .filter(|_| json_text.len() >= CACHE_MIN_BYTES);
        let key = cache.map(|_| CountCache::json_key(json_text));
        if let (Some(cache), Some(key)) = (cache, key) {
            if let Some(hit) = cache.get(key) {
                return Ok(hit.tokens);
            }
        }
        let tokens = self.count_json_uncached(json_text)?;
        if let (Some(cache), Some(key)) = (cache, key) {
            // The count as returned (already scaled): this cache belongs to this
            // encoding and its clones, which scale alike.
            cache.insert(
                key,
                TokenCount {
                    tokens,
                    exact: self.estimate_scale_bp.is_none(),
                },
            );
        }
        Ok(tokens)
    }

    fn count_json_uncached(&self, json_text: &str) -> Result<usize, TokenError> {
        let strings = json::string_contents(json_text)?;
        let raw_bytes: usize = strings.iter().map(|s| s.len()).sum();
        let content: usize = strings.iter().map(|s| self.count(s)).sum();
        let allowance = json_text.len().saturating_sub(raw_bytes);
        Ok((content + allowance).max(self.count(json_text)))
    }

    /// Number of counts held in the cache.
    pub fn cache_len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len())
    }

    /// Empties the cache (shared with clones).
    pub fn clear_cache(&self) {
        if let Some(cache) = &self.cache {
            cache.clear();
        }
    }

    fn scaled(&self, raw: TokenCount) -> TokenCount {
        match self.estimate_scale_bp {
            None => raw,
            Some(bp) => TokenCount {
                tokens: (raw.tokens * bp as usize).div_ceil(10_000),
                exact: false,
            },
        }
    }

    fn count_uncached(&self, text: &str) -> TokenCount {
        if let Some(model) = &self.tables.sentencepiece {
            return TokenCount {
                tokens: model.count(text),
                exact: true,
            };
        }
        let mut scratch = Scratch::lend_piece_cache();
        let mut segments = SegmentCache::take();
        let tokens = match &self.tables.rules {
            Some(rules) => rules.count(text, &mut |s| {
                self.count_text(s, &mut scratch, &mut segments)
            }),
            None => self.count_text(text, &mut scratch, &mut segments),
        };
        segments.give_back();
        scratch.return_piece_cache();
        TokenCount {
            tokens,
            exact: true,
        }
    }

    /// Tokens of text that holds no added token and is normalized.
    fn count_text(&self, text: &str, scratch: &mut Scratch, segments: &mut SegmentCache) -> usize {
        let bytes = text.as_bytes();
        let family = self.tables.family;
        let mut tokens = 0;
        let mut start = 0;
        while start < bytes.len() {
            // Cuts fall on ASCII bytes (see chunk.rs), so each chunk is a `str`.
            let end = chunk::next_cut(family, bytes, start, self.chunk_bytes);
            tokens += self.count_segments(&text[start..end], scratch, segments);
            start = end;
        }
        tokens
    }

    /// Tokens of a chunk, segment by segment through the per-thread segment cache
    /// (see [`segments`]): segments end at exact pre-token boundaries, so their counts
    /// add up to the chunk's. The split regexes of a [`Family::Regex`] have no such
    /// boundaries: those chunks are counted whole.
    fn count_segments(
        &self,
        chunk: &str,
        scratch: &mut Scratch,
        segments: &mut SegmentCache,
    ) -> usize {
        let family = self.tables.family;
        if matches!(family, Family::Regex(_)) {
            return self.count_chunk(chunk, scratch);
        }
        let table = self.tables.ranks.id();
        let bytes = chunk.as_bytes();
        let mut tokens = 0;
        let mut start = 0;
        while start < bytes.len() {
            // Exact boundaries fall on ASCII bytes, so each segment is a `str`.
            let end = chunk::segment_end(family, bytes, start);
            let segment = &chunk[start..end];
            tokens += segments.count(table, segment.as_bytes(), || {
                self.count_chunk(segment, scratch)
            });
            start = end;
        }
        tokens
    }

    /// Tokens of a chunk, piece by piece, with the token lookup inlined into the loop
    /// (a call for it cost a tenth of a cold count's instructions).
    fn count_chunk(&self, chunk: &str, scratch: &mut Scratch) -> usize {
        let ranks = &self.tables.ranks;
        let family = self.tables.family;
        let mut tokens = 0;
        if let Family::Regex(splits) = family {
            splits.for_each_piece(chunk, &mut |piece| {
                tokens += ranks.count_piece(piece, scratch);
            });
            return tokens;
        }
        let chunk = chunk.as_bytes();
        let mut i = 0;
        while i < chunk.len() {
            let end = pretokenize::piece_end(family, chunk, i);
            tokens += ranks.count_piece(&chunk[i..end], scratch);
            i = end;
        }
        tokens
    }
}

/// Counts `text` with the encoding called `name`.
pub fn count(name: &str, text: &str) -> Result<usize, TokenError> {
    Ok(Encoding::new(name)?.count(text))
}

/// [`Encoding::count_detail`] with the encoding called `name`.
pub fn count_detail(name: &str, text: &str) -> Result<TokenCount, TokenError> {
    Ok(Encoding::new(name)?.count_detail(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(name: &str) -> Encoding {
        Encoding::new(name).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn known_counts() {
        let o200k = enc("o200k_base");
        assert_eq!(o200k.count(""), 0);
        assert_eq!(o200k.count("Hello, world!"), 4);
        let cl100k = enc("cl100k_base");
        assert_eq!(cl100k.count("hello world"), 2);
        assert_eq!(cl100k.count("<|endoftext|>"), 7);
    }

    #[test]
    fn unknown_names_are_errors() {
        assert!(matches!(
            Encoding::new("nope"),
            Err(TokenError::UnknownEncoding { .. })
        ));
        assert!(matches!(
            Encoding::for_model("llama-9"),
            Err(TokenError::UnknownModel { .. })
        ));
    }

    #[test]
    fn estimates_scale_up_and_are_inexact() {
        let claude = Encoding::for_model("claude-opus-4").unwrap_or_else(|e| panic!("{e}"));
        let base = enc("cl100k_base");
        let text = "The quick brown fox jumps over the lazy dog.";
        let detail = claude.count_detail(text);
        assert!(!detail.exact);
        assert_eq!(detail.tokens, (base.count(text) * 13_000).div_ceil(10_000));
    }

    #[test]
    fn long_runs_are_exact_at_any_chunk_size() {
        let e = enc("o200k_base").with_cache_capacity(0);
        for text in ["a".repeat(5_000), " ".repeat(5_000), "中".repeat(2_000)] {
            let whole = e.clone().with_chunk_bytes(1 << 20).count_detail(&text);
            let small = e.clone().with_chunk_bytes(1_000).count_detail(&text);
            assert!(whole.exact && small.exact);
            assert_eq!(whole, small);
        }
        // The truth from tiktoken, for the figure the issue reported as 8,312.
        assert_eq!(e.count(&" ".repeat(1 << 20)), 8_192);
    }

    #[test]
    fn exact_cuts_change_nothing() {
        let e = enc("cl100k_base").with_cache_capacity(0);
        let text = "Some words, and more words.\n  Indented line\n".repeat(200);
        let whole = e.clone().with_chunk_bytes(1 << 20).count_detail(&text);
        let chunked = e.with_chunk_bytes(100).count_detail(&text);
        assert_eq!(whole, chunked);
        assert!(chunked.exact);
    }

    #[test]
    fn count_many_equals_count_for_small_batches_and_split_long_texts() {
        let e = enc("o200k_base");
        let line = "    value = compute(item, 'key') + 42  # a comment\n";
        let long = format!(
            "{}{}",
            line.repeat((3 << 20) / line.len()),
            " ".repeat(70_000)
        );
        let texts = vec![
            "short".to_owned(),
            long.clone(),
            "中".repeat(500_000),
            String::new(),
        ];
        let plain = enc("o200k_base").with_cache_capacity(0);
        let expected: Vec<usize> = texts.iter().map(|t| plain.count(t)).collect();
        assert_eq!(e.count_many(&texts), expected);
        // Again, now from the whole-text cache.
        assert_eq!(e.count_many(&texts), expected);
        assert_eq!(e.count_many(&texts[..1]), expected[..1]);
        let estimate = Encoding::for_model("claude-opus-4").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            estimate.count_many(&[long.as_str()]),
            vec![estimate.count(&long)]
        );
    }

    #[test]
    fn cache_hits_return_the_same_count() {
        let e = enc("o200k_base");
        let text = "cached ".repeat(50);
        let first = e.count_detail(&text);
        assert_eq!(e.cache_len(), 1);
        assert_eq!(e.count_detail(&text), first);
        e.clear_cache();
        assert_eq!(e.cache_len(), 0);
    }

    #[test]
    fn count_json_never_undercounts_the_text() {
        let e = enc("o200k_base");
        let doc = r#"{"name": "tool", "args": {"path": "/tmp/a b", "n": [1, 2, 3]}}"#;
        let n = e.count_json(doc).unwrap_or_else(|err| panic!("{err}"));
        assert!(n >= e.count(doc));
        assert!(matches!(
            e.count_json("{not json"),
            Err(TokenError::InvalidJson { line: 1, .. })
        ));
    }

    #[test]
    fn cached_json_counts_equal_uncached_ones_and_stay_apart_from_plain_counts() {
        let cached = enc("o200k_base");
        let uncached = enc("o200k_base").with_cache_capacity(0);
        let doc = r#"{"name":"read_file","description":"Reads a file of the repository","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}"#;
        let expected = uncached
            .count_json(doc)
            .unwrap_or_else(|err| panic!("{err}"));
        // The plain count of the same text is cached first: it must not be taken for
        // the JSON count (they differ for this document).
        assert_ne!(cached.count(doc), expected);
        for _ in 0..3 {
            assert_eq!(cached.count_json(doc).ok(), Some(expected));
        }
        // Its plain count and its JSON count (its strings are too short to be cached).
        assert_eq!(cached.cache_len(), 2);
        let estimate = Encoding::for_model("claude-3-5-sonnet").unwrap_or_else(|e| panic!("{e}"));
        let once = estimate.count_json(doc).ok();
        assert_eq!(estimate.count_json(doc).ok(), once);
        assert!(once > Some(expected));
    }
}
