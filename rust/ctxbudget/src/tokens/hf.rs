//! Tokenizer files of open-weight models, read into the same tables as tiktoken's.
//!
//! - HuggingFace `tokenizer.json` with a byte-level BPE model (Llama 3, Qwen 2/3,
//!   DeepSeek, Phi-4, GPT-2 style files): its vocabulary, its merge list (followed
//!   pair by pair, see [`super::merges`]), its added tokens and normalizers
//!   ([`super::added`]) and its pre-tokenizer — a known split pattern is scanned by hand
//!   ([`super::pretokenize`]), any other sequence of splits runs on the regex engine
//!   ([`super::split`]).
//! - Mistral's `tekken.json`: a tiktoken table (ranks in base64) and its split pattern.
//!
//! Anything else these formats can say (a SentencePiece-style `Metaspace` model, a
//! WordPiece or Unigram model, a `Replace` normalizer) is refused with the part named,
//! never counted by a guess.

use std::fs::File;
use std::path::Path;

use rustc_hash::FxHashSet;
use serde::de;
use serde::Deserialize;
use serde_json::Value;

use super::added::{AddedToken, Form, TextRules};
use super::bpe::Ranks;
use super::hf_bpe::{MergeResolver, MergesText, VocabText};
use super::json_scan::Scan;
use super::pretokenize::Family;
use super::split::RegexSplits;
use super::vocab::{decode_base64, Vocab};

/// GPT-2's split regex, which a `ByteLevel` pre-tokenizer with `use_regex` runs.
const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Split patterns scanned by hand, exactly as the files spell them.
const KNOWN_PATTERNS: &[(&str, Family)] = &[
    (GPT2_PATTERN, Family::Gpt2),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        Family::Llama3,
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        Family::Qwen2,
    ),
    (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        Family::O200k,
    ),
    (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        Family::Tekken,
    ),
];

/// A tokenizer read from a file: its split, its merge table and its text rules.
pub(crate) struct Loaded {
    /// How text is split into pieces.
    pub(crate) family: Family,
    /// The byte-pair tables.
    pub(crate) ranks: Ranks,
    /// Added tokens and normalizers, when the file has any.
    pub(crate) rules: Option<TextRules>,
}

/// The family of a sequence of split patterns: a hand-written scanner when there is
/// exactly one and it is known, otherwise the regex engine.
pub(crate) fn family_of(patterns: &[String]) -> Result<Family, String> {
    if let [only] = patterns {
        if let Some(&(_, family)) = KNOWN_PATTERNS.iter().find(|(p, _)| p == only) {
            return Ok(family);
        }
    }
    if patterns.iter().eq(super::deepseek::PATTERNS.iter()) {
        return Ok(Family::DeepSeek);
    }
    let splits = RegexSplits::new(patterns)?;
    // Kept for the life of the process, like the tables that use it.
    Ok(Family::Regex(Box::leak(Box::new(splits))))
}

/// A tokenizer.json's fields other than the BPE tables, parsed by `serde_json`.
#[derive(Deserialize, Default)]
struct ModelOptions {
    /// `BPE`, `WordPiece`, `Unigram`…
    #[serde(rename = "type", default)]
    kind: Option<String>,
    /// A piece that is a token is that token, merged or not.
    #[serde(default)]
    ignore_merges: bool,
    /// WordPiece-style prefix of non-initial subwords (not byte-level BPE).
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    /// Suffix of word-final subwords (not byte-level BPE).
    #[serde(default)]
    end_of_word_suffix: Option<String>,
    /// Probability of skipping a merge (random counts).
    #[serde(default)]
    dropout: Option<f64>,
}

/// One entry of `added_tokens`: matched in the text as one token (see [`TextRules`]).
#[derive(Deserialize)]
struct FileAddedToken {
    /// Its id, left out of the merged vocabulary.
    id: u32,
    /// Its text.
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    normalized: bool,
}

/// The parts of a `tokenizer.json` document: the big `vocab` and `merges` values
/// decoded in place, the small ones parsed.
#[derive(Default)]
struct Document {
    /// The model's options.
    model: Option<ModelOptions>,
    /// The model's `vocab`, decoded (until the merges are resolved against it).
    vocab: Option<VocabText>,
    /// The model's `merges`, decoded, when they were not resolved as they were read.
    merges: Option<MergesText>,
    /// The vocabulary's table and the merges resolved against it as they were read,
    /// or why the vocabulary is refused.
    resolved: Option<Result<(Ranks, MergeResolver), String>>,
    /// The `normalizer` value.
    normalizer: Option<Value>,
    /// The `pre_tokenizer` value.
    pre_tokenizer: Option<Value>,
    /// The `added_tokens`.
    added_tokens: Vec<FileAddedToken>,
}

/// A small value of the document, parsed.
fn parse_small<T: serde::de::DeserializeOwned>(raw: &str, what: &str) -> Result<T, String> {
    serde_json::from_str(raw).map_err(|e| format!("its {what} is not valid: {e}"))
}

/// The ids of the added tokens, which the merged vocabulary leaves out.
fn added_ids(added: &[FileAddedToken]) -> FxHashSet<u32> {
    added.iter().map(|t| t.id).collect()
}

impl Document {
    /// Scans `text` once: the vocabulary and merges are decoded from it in place.
    ///
    /// When the vocabulary and the added tokens come before the merges, as in every
    /// file HuggingFace writes, the merges are resolved against the vocabulary as they
    /// are read, a chunk at a time, and never held whole. A file in any other order
    /// keeps them whole until the end; one that names a part again after the merges
    /// were resolved (a second `model`, `vocab`, `merges` or `added_tokens`) is scanned
    /// again that way, so that the last of each counts as it always has.
    fn scan<'t>(mut open: impl FnMut() -> Result<Scan<'t>, String>) -> Result<Document, String> {
        let mut rescan = false;
        let doc = Document::scan_once(open()?, true, &mut rescan)?;
        if rescan {
            return Document::scan_once(open()?, false, &mut rescan);
        }
        Ok(doc)
    }

    /// One scan of a document, resolving the merges as they are read if `resolve`
    /// allows; sets `rescan` when a part named again makes that resolution stale.
    fn scan_once(mut scan: Scan<'_>, resolve: bool, rescan: &mut bool) -> Result<Document, String> {
        let mut doc = Document::default();
        let mut added_read = false;
        scan.object(|scan, key| {
            let again = doc.resolved.is_some();
            if key.is("model") {
                *rescan |= again;
                let mut options = serde_json::Map::new();
                let mut vocab_here = false;
                scan.object(|scan, field| {
                    if field.is("vocab") {
                        *rescan |= doc.resolved.is_some();
                        doc.vocab = Some(VocabText::read(scan)?);
                        vocab_here = true;
                    } else if field.is("merges") {
                        *rescan |= doc.resolved.is_some();
                        match doc.vocab.take() {
                            Some(vocab) if resolve && vocab_here && added_read => {
                                doc.resolved =
                                    Some(match vocab.into_vocab(&added_ids(&doc.added_tokens)) {
                                        Ok(vocab) => {
                                            let ranks = Ranks::new(vocab);
                                            let merges = MergesText::read_resolving(scan, &ranks)?;
                                            Ok((ranks, merges))
                                        }
                                        Err(e) => {
                                            // Refused when the load gets to it: the
                                            // merges are still read, for their errors.
                                            MergesText::read(scan)?;
                                            Err(e)
                                        }
                                    });
                            }
                            vocab => {
                                doc.vocab = vocab;
                                doc.merges = Some(MergesText::read(scan)?);
                            }
                        }
                    } else {
                        options.insert(field.decoded()?, parse_small(scan.skip()?, "model")?);
                    }
                    Ok(())
                })?;
                doc.model = Some(
                    serde_json::from_value(Value::Object(options))
                        .map_err(|e| format!("its model is not valid: {e}"))?,
                );
            } else if key.is("normalizer") {
                doc.normalizer = parse_small(scan.skip()?, "normalizer")?;
            } else if key.is("pre_tokenizer") {
                doc.pre_tokenizer = parse_small(scan.skip()?, "pre_tokenizer")?;
            } else if key.is("added_tokens") {
                *rescan |= again;
                doc.added_tokens = parse_small(scan.skip()?, "added_tokens")?;
                added_read = true;
            } else {
                parse_small::<de::IgnoredAny>(scan.skip()?, "document")?;
            }
            Ok(())
        })?;
        scan.end()?;
        Ok(doc)
    }
}

/// Reads a `tokenizer.json` document.
pub(crate) fn load_tokenizer_json(text: &[u8]) -> Result<Loaded, String> {
    load_scanned(|| Ok(Scan::new(text)))
}

/// Reads the `tokenizer.json` file at `path` a window at a time (see [`Scan`]): never
/// whole in memory. Its length and modification time were read just before, so the
/// length is only a hint: a file that changes as it is read is read as it is found, or
/// refused if that is not a tokenizer any more.
pub(crate) fn load_tokenizer_json_file(path: &Path, len: u64) -> Result<Loaded, String> {
    load_scanned(|| {
        let file = File::open(path).map_err(|e| format!("{e}"))?;
        Ok(Scan::reading(
            file,
            usize::try_from(len).unwrap_or(usize::MAX),
        ))
    })
}

/// Reads a `tokenizer.json` document that `open` scans (from its start, each time it
/// is called).
fn load_scanned<'t>(open: impl FnMut() -> Result<Scan<'t>, String>) -> Result<Loaded, String> {
    let doc = Document::scan(open).map_err(|e| format!("not a tokenizer.json file: {e}"))?;
    let Some(model) = doc
        .model
        .filter(|_| doc.vocab.is_some() || doc.resolved.is_some())
    else {
        return Err("not a tokenizer.json file: it has no model with a vocab".to_owned());
    };
    if model.kind.as_deref().is_some_and(|k| k != "BPE") {
        return Err(format!(
            "its model is {}, not BPE: only byte-level BPE tokenizer.json files are read",
            model.kind.as_deref().unwrap_or_default()
        ));
    }
    if model
        .continuing_subword_prefix
        .as_deref()
        .is_some_and(|s| !s.is_empty())
        || model
            .end_of_word_suffix
            .as_deref()
            .is_some_and(|s| !s.is_empty())
    {
        return Err("subword prefixes and suffixes are not byte-level BPE".to_owned());
    }
    if model.dropout.is_some_and(|d| d > 0.0) {
        return Err("BPE dropout makes counts random".to_owned());
    }
    let patterns = pre_tokenizer(doc.pre_tokenizer.as_ref())?;
    let forms = normalizer(doc.normalizer.as_ref())?;

    let (ranks, merges) = match (doc.resolved, doc.vocab) {
        (Some(resolved), _) => {
            let (ranks, merges) = resolved?;
            let merges = merges.finish(model.ignore_merges)?;
            (ranks, merges)
        }
        (None, Some(vocab)) => {
            let ranks = Ranks::new(vocab.into_vocab(&added_ids(&doc.added_tokens))?);
            let merges = doc
                .merges
                .unwrap_or_default()
                .resolve(&ranks, model.ignore_merges)?;
            (ranks, merges)
        }
        (None, None) => {
            return Err("not a tokenizer.json file: it has no model with a vocab".to_owned())
        }
    };
    let ranks = ranks.with_merges(merges);
    let added = doc
        .added_tokens
        .into_iter()
        .map(|t| {
            let how = AddedToken {
                lstrip: t.lstrip,
                rstrip: t.rstrip,
                single_word: t.single_word,
                normalized: t.normalized,
            };
            (t.content, how)
        })
        .collect();
    let rules = TextRules::new(added, forms)?;
    Ok(Loaded {
        family: family_of(&patterns)?,
        ranks,
        rules: (!rules.is_empty()).then_some(rules),
    })
}

/// The split regexes of a pre-tokenizer that ends in a byte-level mapping.
fn pre_tokenizer(value: Option<&Value>) -> Result<Vec<String>, String> {
    let mut patterns = Vec::new();
    let mut byte_level = false;
    let steps: Vec<&Value> = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(v) if v["type"] == "Sequence" => v["pretokenizers"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        Some(v) => vec![v],
    };
    let last = steps.len().saturating_sub(1);
    for (i, step) in steps.iter().enumerate() {
        match step["type"].as_str().unwrap_or_default() {
            "ByteLevel" => {
                if step["add_prefix_space"].as_bool() == Some(true) {
                    return Err(
                        "a ByteLevel pre-tokenizer with add_prefix_space is not supported"
                            .to_owned(),
                    );
                }
                if step["use_regex"].as_bool() != Some(false) {
                    patterns.push(GPT2_PATTERN.to_owned());
                }
                byte_level = i == last;
            }
            "Split" => {
                if step["behavior"] != "Isolated" || step["invert"].as_bool() == Some(true) {
                    return Err(format!(
                        "a Split pre-tokenizer with behavior {} is not supported (only Isolated)",
                        step["behavior"]
                    ));
                }
                let pattern = &step["pattern"];
                if let Some(regex) = pattern["Regex"].as_str() {
                    patterns.push(regex.to_owned());
                } else if let Some(literal) = pattern["String"].as_str() {
                    patterns.push(regex_syntax::escape(literal));
                } else {
                    return Err("a Split pre-tokenizer without a pattern".to_owned());
                }
            }
            "Digits" => patterns.push(if step["individual_digits"].as_bool() == Some(true) {
                r"\p{N}".to_owned()
            } else {
                r"\p{N}+".to_owned()
            }),
            other => {
                return Err(format!(
                    "its pre-tokenizer {other:?} is not supported (byte-level BPE only)"
                ))
            }
        }
    }
    if !byte_level {
        return Err(
            "its pre-tokenizer does not end in ByteLevel: not a byte-level BPE tokenizer"
                .to_owned(),
        );
    }
    Ok(patterns)
}

/// The normalization forms of a normalizer.
fn normalizer(value: Option<&Value>) -> Result<Vec<Form>, String> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let one = |kind: &str| -> Result<Form, String> {
        Ok(match kind {
            "NFC" => Form::Nfc,
            "NFD" => Form::Nfd,
            "NFKC" => Form::Nfkc,
            "NFKD" => Form::Nfkd,
            other => return Err(format!("its normalizer {other:?} is not supported")),
        })
    };
    match value["type"].as_str().unwrap_or_default() {
        "Sequence" => value["normalizers"]
            .as_array()
            .map(|steps| {
                steps
                    .iter()
                    .map(|s| one(s["type"].as_str().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or(Ok(Vec::new())),
        kind => Ok(vec![one(kind)?]),
    }
}

#[derive(Deserialize)]
struct Tekken {
    config: TekkenConfig,
    vocab: Vec<TekkenToken>,
}

#[derive(Deserialize)]
struct TekkenConfig {
    pattern: String,
    default_vocab_size: usize,
    default_num_special_tokens: usize,
}

#[derive(Deserialize)]
struct TekkenToken {
    rank: usize,
    token_bytes: String,
}

/// Reads a Mistral `tekken.json`: the first `default_vocab_size -
/// default_num_special_tokens` ranks are the mergeable ones (the special tokens take
/// the ids below them and are never read from text).
pub(crate) fn load_tekken(text: &str) -> Result<Loaded, String> {
    let file: Tekken =
        serde_json::from_str(text).map_err(|e| format!("not a tekken.json file: {e}"))?;
    let inner = file
        .config
        .default_vocab_size
        .checked_sub(file.config.default_num_special_tokens)
        .ok_or("default_num_special_tokens exceeds default_vocab_size")?;
    if file.vocab.len() < inner {
        return Err(format!(
            "{} tokens, fewer than the {inner} its config asks for",
            file.vocab.len()
        ));
    }
    let mut bytes: Vec<Vec<u8>> = Vec::with_capacity(inner);
    for (index, token) in file.vocab.iter().take(inner).enumerate() {
        if token.rank != index {
            return Err(format!("token {index} has rank {}", token.rank));
        }
        let mut out = Vec::new();
        decode_base64(token.token_bytes.as_bytes(), &mut out)
            .ok_or_else(|| format!("token {index}: bad base64"))?;
        bytes.push(out);
    }
    let vocab = Vocab::from_tokens(bytes.iter().map(Vec::as_slice))?;
    Ok(Loaded {
        family: family_of(&[file.config.pattern])?,
        ranks: Ranks::new(vocab),
        rules: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::json_scan::tests::Trickle;
    use super::*;

    /// A tiny byte-level tokenizer.json: every byte, "ab", "abc" (from "ab" + "c").
    fn tiny(merges: &str, extra: &str) -> String {
        let map = super::super::hf_bpe::BYTE_OF_CHAR;
        let mut chars: Vec<(u8, char)> = (0..super::super::hf_bpe::BYTE_CHARS)
            .filter(|&c| map[c] > 0)
            .filter_map(|c| Some(((map[c] - 1) as u8, char::from_u32(c as u32)?)))
            .collect();
        chars.sort_unstable();
        let mut vocab: Vec<String> = chars
            .iter()
            .map(|(b, c)| format!("{}: {b}", serde_json::json!(c.to_string())))
            .collect();
        vocab.push("\"ab\": 256".to_owned());
        vocab.push("\"abc\": 257".to_owned());
        vocab.push("\"bc\": 258".to_owned());
        format!(
            r#"{{"model": {{"type": "BPE", "vocab": {{{}}}, "merges": {merges}}},
               "pre_tokenizer": {{"type": "ByteLevel", "add_prefix_space": false}},
               "normalizer": null, "added_tokens": [{extra}]}}"#,
            vocab.join(", ")
        )
    }

    fn count(loaded: &'static Loaded, text: &str) -> usize {
        let mut scratch = super::super::bpe::Scratch::default();
        let mut piece_count = |s: &str| {
            let bytes = s.as_bytes();
            let mut i = 0;
            let mut n = 0;
            while i < bytes.len() {
                let end = super::super::pretokenize::piece_end(loaded.family, bytes, i);
                n += loaded.ranks.count_piece(&bytes[i..end], &mut scratch);
                i = end;
            }
            n
        };
        match &loaded.rules {
            Some(rules) => rules.count(text, &mut piece_count),
            None => piece_count(text),
        }
    }

    fn load(text: &str) -> &'static Loaded {
        Box::leak(Box::new(
            load_tokenizer_json(text.as_bytes()).unwrap_or_else(|e| panic!("{e}")),
        ))
    }

    #[test]
    fn only_listed_merges_apply() {
        // "bc" is a token but no merge makes it: "abc" is a b c -> ab c -> abc.
        let t = load(&tiny(r#"["a b", "ab c"]"#, ""));
        assert_eq!(count(t, "abc"), 1);
        assert_eq!(
            count(t, "bc"),
            2,
            "bc is in the vocabulary but never merged"
        );
        // Listed the other way round, "abc" cannot form from "a" + "bc" alone.
        let t = load(&tiny(r#"[["b", "c"], ["a", "bc"]]"#, ""));
        assert_eq!(count(t, "abc"), 1);
        assert_eq!(count(t, "ab"), 2);
    }

    #[test]
    fn long_pieces_merge_on_ids_as_short_ones_on_bytes() {
        let t = load(&tiny(r#"[["b", "c"], ["a", "bc"], ["a", "b"]]"#, ""));
        let mut scratch = super::super::bpe::Scratch::default();
        let texts = [
            "abc".repeat(40),
            "ab".repeat(50) + "c",
            "cab".repeat(30),
            "a".repeat(100),
            "bcab".repeat(20) + "cabcb",
        ];
        // Long pieces merge on their bytes until they add up, then on ids.
        for on_ids in [false, true] {
            for text in &texts {
                let piece = text.as_bytes();
                let quadratic = t.ranks.merge_quadratic(piece, &mut Vec::new());
                assert_eq!(
                    t.ranks.count_piece(piece, &mut scratch),
                    quadratic,
                    "{text}, on ids: {on_ids}"
                );
            }
            let merges = t.ranks.merges().unwrap_or_else(|| panic!("a merge list"));
            assert_eq!(merges.has_pair_map(), on_ids);
            // Enough long text to build the map of pairs by ids (not one unit
            // repeated, which is counted a unit at a time).
            let mut state = 7u32;
            let run: String = (0..=super::super::bpe::PAIR_MAP_AFTER_BYTES)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    ['a', 'b', 'c'][(state >> 16) as usize % 3]
                })
                .collect();
            let by_bytes = t.ranks.merge_heap(run.as_bytes(), &mut scratch);
            assert_eq!(t.ranks.count_piece(run.as_bytes(), &mut scratch), by_bytes);
            assert!(merges.has_pair_map());
        }
    }

    /// A byte-level file of a few thousand merges (more than one chunk of the reader)
    /// over the letters and digits: every two of them, then every pair with a third.
    /// `order` lays out its top-level keys; `twist` edits the merge list.
    fn many(order: &[&str], twist: impl Fn(&mut Vec<String>)) -> String {
        let map = super::super::hf_bpe::BYTE_OF_CHAR;
        let mut chars: Vec<(u8, char)> = (0..super::super::hf_bpe::BYTE_CHARS)
            .filter(|&c| map[c] > 0)
            .filter_map(|c| Some(((map[c] - 1) as u8, char::from_u32(c as u32)?)))
            .collect();
        chars.sort_unstable();
        let mut vocab: Vec<String> = chars.iter().map(|(_, c)| c.to_string()).collect();
        let alnum: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
        let mut merges = Vec::new();
        for &x in &alnum {
            for &y in &alnum {
                merges.push(format!("{x} {y}"));
                vocab.push(format!("{x}{y}"));
            }
        }
        for (k, &z) in alnum.iter().cycle().take(1200).enumerate() {
            let (x, y) = (alnum[k % 62], alnum[(k / 62) % 62]);
            merges.push(format!("{x}{y} {z}"));
            vocab.push(format!("{x}{y}{z}"));
            // The same token under its other split, next to it (as Llama 3 lists them).
            if k % 7 == 0 {
                merges.push(format!("{x} {y}{z}"));
            }
        }
        let mut seen = std::collections::HashSet::new();
        vocab.retain(|t| seen.insert(t.clone()));
        twist(&mut merges);
        let vocab: Vec<String> = vocab
            .iter()
            .enumerate()
            .map(|(id, t)| format!("{}: {id}", serde_json::json!(t)))
            .collect();
        let part = |key: &str| match key {
            "added_tokens" => format!(
                r#""added_tokens": [{{"id": {}, "content": "<s>", "special": true,
                    "lstrip": false, "rstrip": false, "single_word": false,
                    "normalized": false}}]"#,
                vocab.len()
            ),
            "model" => format!(
                r#""model": {{"type": "BPE", "vocab": {{{}}}, "merges": {}}}"#,
                vocab.join(",\n    "),
                serde_json::json!(merges)
            ),
            "pre_tokenizer" => {
                r#""pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}"#.to_owned()
            }
            _ => r#""normalizer": null"#.to_owned(),
        };
        let parts: Vec<String> = order.iter().map(|k| part(k)).collect();
        format!("{{{}}}", parts.join(",\n"))
    }

    /// The layout HuggingFace writes (added tokens before the model: the merges are
    /// resolved a chunk at a time as they are read) and others (kept whole, then
    /// resolved) give the same tokenizer, the same refusals, the same messages.
    #[test]
    fn merges_resolved_as_read_equal_merges_kept_whole() {
        const STREAMED: &[&str] = &["added_tokens", "normalizer", "pre_tokenizer", "model"];
        const WHOLE: &[&str] = &["model", "normalizer", "pre_tokenizer", "added_tokens"];
        let texts = [
            "ab abc xyz Qz9 09a <s>a1b2c3<s> zzzz aZ0aZ0 9876543210",
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            "a b c  aa bb cc aaa bbb ccc é 中 <s><s>",
        ];
        let twists: [fn(&mut Vec<String>); 3] = [
            |_| {},
            // Out of id order from the middle on.
            |m| m[2000..].reverse(),
            // A split listed twice (its first index counts).
            |m| {
                let again = m[100].clone();
                m.insert(3000, again);
            },
        ];
        for twist in twists {
            let (a, b) = (load(&many(STREAMED, twist)), load(&many(WHOLE, twist)));
            for text in texts {
                assert_eq!(count(a, text), count(b, text), "{text:?}");
            }
        }
        let plain = load(&many(STREAMED, |_| {}));
        assert_eq!((count(plain, "aaa"), count(plain, "abc")), (1, 2));
        // Refusals past the first chunk: a missing part, a missing joined token.
        let refusals: [fn(&mut Vec<String>); 3] = [
            |m| m[4500] = "xyzw a".to_owned(),
            |m| m[4600] = "Z9 aQ".to_owned(),
            |m| {
                m[4400] = "ab cd".to_owned();
                m[4700] = "qqqqq r".to_owned();
            },
        ];
        for twist in refusals {
            let streamed = load_tokenizer_json(many(STREAMED, twist).as_bytes()).err();
            let whole = load_tokenizer_json(many(WHOLE, twist).as_bytes()).err();
            assert!(streamed.is_some());
            assert_eq!(streamed, whole);
        }
    }

    /// Documents read a few bytes at a time into windows of every size down to one
    /// byte read as they read in memory: the same tokenizer, the same refusals.
    #[test]
    fn files_read_in_windows_read_as_in_memory() {
        const STREAMED: &[&str] = &["added_tokens", "normalizer", "pre_tokenizer", "model"];
        const WHOLE: &[&str] = &["model", "normalizer", "pre_tokenizer", "added_tokens"];
        let added = r#"{"id": 259, "content": "<s>", "special": true, "lstrip": false,
                         "rstrip": false, "single_word": false, "normalized": false}"#;
        let plain = tiny(r#"["a b", "ab c"]"#, added);
        let docs = [
            plain.clone(),
            tiny(r#"[["a", "b"], ["ab", "c"]]"#, ""),
            tiny(r#"[["\u0061", "b"], "ab c"]"#, ""),
            // A model named twice: read again, the last one counting.
            plain.replacen(
                '{',
                r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}, "#,
                1,
            ),
            many(STREAMED, |_| {}),
            many(WHOLE, |m| m[2000..].reverse()),
            many(STREAMED, |m| m[4500] = "xyzw a".to_owned()),
            many(WHOLE, |m| m[4600] = "Z9 aQ".to_owned()),
            tiny(r#"["a b", "ab x"]"#, ""),
            plain[..plain.len() - 3].to_owned(),
            plain.replace("\"ab\": 256", "\"ab\": 2x56"),
            format!("{plain} x"),
        ];
        let texts = ["ab abc xyz <s>a1b2c3<s> zzzz aZ0aZ0 é 中", "abcabc bc"];
        for doc in &docs {
            let memory = load_tokenizer_json(doc.as_bytes()).map(|l| &*Box::leak(Box::new(l)));
            for window in [1, 2, 7, 64, 1000, 1 << 16] {
                for step in [1, 3, 4096] {
                    let streamed = load_scanned(|| {
                        let text = Trickle {
                            text: doc.as_bytes(),
                            step,
                        };
                        Ok(Scan::reading_by(text, doc.len(), window))
                    })
                    .map(|l| &*Box::leak(Box::new(l)));
                    match (&memory, &streamed) {
                        (Ok(a), Ok(b)) => {
                            for text in texts {
                                assert_eq!(count(a, text), count(b, text), "{text:?}");
                            }
                        }
                        (Err(a), Err(b)) => {
                            // Offsets of a file read in windows stand for the lines.
                            let cut = |e: &str| e.split(" (").next().unwrap_or_default().to_owned();
                            assert_eq!(cut(a), cut(b));
                        }
                        (a, b) => panic!("{:?} vs {:?}", a.is_ok(), b.as_ref().err()),
                    }
                }
            }
        }
    }

    /// A vocabulary entry longer than what the fast reader asks to have at hand, its id
    /// cut by the end of a window at every position: read as in memory (a cut id was
    /// once taken for its first digits and the file refused).
    #[test]
    fn an_id_cut_by_the_end_of_a_window_reads_whole() {
        let long = "a".repeat(5000);
        let doc = tiny(r#"["a b", "ab c"]"#, "")
            .replace("\"ab\": 256", &format!("\"{long}\": 123456, \"ab\": 256"));
        let memory = load(&doc);
        let window = 8192;
        for pad in 0..window {
            let padded = format!("{}{doc}", " ".repeat(pad));
            let streamed =
                load_scanned(|| Ok(Scan::reading_by(padded.as_bytes(), padded.len(), window)));
            let streamed = match streamed {
                Ok(loaded) => &*Box::leak(Box::new(loaded)),
                Err(e) => panic!("padded by {pad}: {e}"),
            };
            for text in ["abc", &long, &format!("{long}bc")] {
                assert_eq!(
                    count(memory, text),
                    count(streamed, text),
                    "padded by {pad}"
                );
            }
        }
    }

    /// Ids that stop being consecutive (a gap, then ids out of order) read as the
    /// consecutive ones: the table of ids is written only from where they stop.
    #[test]
    fn vocabularies_with_gaps_in_their_ids_read_as_consecutive_ones() {
        let plain = tiny(r#"["a b", "ab c"]"#, "");
        let gap = plain.replace("\"abc\": 257", "\"abc\": 300");
        let gap = gap.replace("\"bc\": 258", "\"bc\": 301");
        let unordered = plain
            .replace("\"abc\": 257", "\"abc\": 258")
            .replace("\"bc\": 258", "\"bc\": 257");
        let (a, b, c) = (load(&plain), load(&gap), load(&unordered));
        for text in ["abc", "ab", "bc", "cab abc", "\u{0}\u{ff} é"] {
            assert_eq!(count(a, text), count(b, text), "{text:?}");
            assert_eq!(count(a, text), count(c, text), "{text:?}");
        }
        assert_eq!(count(b, "abc"), 1);
    }

    #[test]
    fn added_tokens_are_one_token_each() {
        let added = r#"{"id": 259, "content": "<s>", "special": true, "lstrip": false,
                         "rstrip": false, "single_word": false, "normalized": false}"#;
        let t = load(&tiny(r#"["a b"]"#, added));
        assert_eq!(count(t, "<s>ab<s>"), 3);
    }

    /// Every key written with `\u` escapes, the vocabulary reversed, the merges as pairs:
    /// the same tokenizer as the plain file, whichever path of the reader it takes.
    #[test]
    fn escaped_and_reordered_files_read_as_the_plain_one() {
        let plain = tiny(r#"["a b", "ab c"]"#, "");
        let start = plain.find("\"vocab\": {").unwrap_or_default() + 10;
        let last = "\"bc\": 258";
        let end = plain.find(last).unwrap_or_default() + last.len();
        let mut entries: Vec<String> = plain[start..end]
            .split(", ")
            .map(|entry| {
                let (key, id) = entry.rsplit_once(": ").unwrap_or_default();
                let key: String = serde_json::from_str(key).unwrap_or_default();
                let escaped: String = key
                    .chars()
                    .map(|c| format!("\\u{:04x}", c as u32))
                    .collect();
                format!("\"{escaped}\": {id}")
            })
            .collect();
        entries.reverse();
        let twisted = format!("{}{}{}", &plain[..start], entries.join(", "), &plain[end..])
            .replace(r#"["a b", "ab c"]"#, r#"[["\u0061", "b"], ["ab", "c"]]"#);
        let (a, b) = (load(&plain), load(&twisted));
        for text in ["abc", "ab", "bc", "cab abc", "\u{0}\u{ff} é"] {
            assert_eq!(count(a, text), count(b, text), "{text:?}");
        }
        assert_eq!(count(b, "abc"), 1);
    }

    #[test]
    fn added_tokens_listed_in_the_vocabulary_are_left_out_of_it() {
        // "bc" (id 258) is an added token: one token in the text, never a merge result.
        let added = r#"{"id": 258, "content": "bc", "special": false, "lstrip": false,
                         "rstrip": false, "single_word": false, "normalized": false}"#;
        let t = load(&tiny(r#"["a b", "ab c"]"#, added));
        assert_eq!(
            count(t, "abc"),
            2,
            "a + bc: the added token is cut out first"
        );
        assert_eq!(count(t, "ab"), 1);
    }

    #[test]
    fn unsupported_files_say_what() {
        let err = |s: &str| load_tokenizer_json(s.as_bytes()).err().unwrap_or_default();
        assert!(err("{}").contains("tokenizer.json"));
        let wordpiece = r#"{"model": {"type": "WordPiece", "vocab": {}}}"#;
        assert!(err(wordpiece).contains("WordPiece"));
        let metaspace = tiny("[]", "").replace("ByteLevel", "Metaspace");
        assert!(err(&metaspace).contains("Metaspace"));
        let bad_merge = tiny(r#"["a zz"]"#, "");
        assert!(err(&bad_merge).contains("zz"));
        let unknown_part = tiny(r#"["a b", "ca b"]"#, "");
        assert!(
            err(&unknown_part).contains(r#"merge 1 names "ca""#),
            "{}",
            err(&unknown_part)
        );
        // The first merge with a missing part is named, whatever the parts' lengths
        // (two bytes are looked up in the table of pairs, others by hash).
        let short_part = tiny(r#"["a b", "ab c", "abc a", "xyz a"]"#, "");
        assert!(
            err(&short_part).contains(r#"merge 3 names "xyz""#),
            "{}",
            err(&short_part)
        );
        let short_first = tiny(r#"["a b", "xyz a", "a bcdefghij", "a zz"]"#, "");
        assert!(
            err(&short_first).contains(r#"merge 1 names "xyz""#),
            "{}",
            err(&short_first)
        );
        let long_first = tiny(r#"["a b", "a bcdefghij", "xyz a"]"#, "");
        assert!(
            err(&long_first).contains(r#"merge 1 names "bcdefghij""#),
            "{}",
            err(&long_first)
        );
        let short_after_made = tiny(r#"["a b", "ab ab", "xyz a"]"#, "");
        assert!(
            err(&short_after_made).contains(r#"merge 2 names "xyz""#),
            "{}",
            err(&short_after_made)
        );
        let not_made = tiny(r#"["c a"]"#, "");
        assert!(err(&not_made).contains("ca"), "{}", err(&not_made));
        let empty_part = tiny(r#"["ab "]"#, "");
        assert!(err(&empty_part).contains("not in the vocabulary"));
        let no_pair = tiny(r#"[["a", "b", "c"]]"#, "");
        assert!(err(&no_pair).contains("not a pair"));
        let broken = tiny(r#"["a b",]"#, "");
        assert!(err(&broken).contains("not valid JSON"));
        let latin1 = b"{\"model\": {\"vocab\": {\"a\xff\": 1}}}";
        let latin1 = load_tokenizer_json(latin1).err().unwrap_or_default();
        assert!(latin1.contains("not UTF-8"), "{latin1}");
    }

    /// Pieces of `text` by the hand-written scanner of `family`.
    fn scanned(family: Family, text: &str) -> Vec<String> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let end = super::super::pretokenize::piece_end(family, bytes, i);
            out.push(text[i..end].to_owned());
            i = end;
        }
        out
    }

    /// Pieces of `text` by the regex engine running `pattern`.
    fn matched(pattern: &str, text: &str) -> Vec<String> {
        let splits = RegexSplits::new(&[pattern.to_owned()]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        splits.for_each_piece(text, &mut |p| {
            out.push(String::from_utf8_lossy(p).into_owned())
        });
        out
    }

    proptest::proptest! {
        /// Every hand-scanned pattern splits exactly as the regex it stands for.
        #[test]
        fn hand_written_scanners_equal_their_regexes(
            chars in proptest::collection::vec(proptest::sample::select(vec![
                'a', 'Z', 'é', 'Σ', 'ǅ', 'ʰ', '中', '\u{301}', '1', '٣', 'Ⅻ', ' ', ' ', '\t',
                '\n', '\r', '\u{a0}', '\u{3000}', '\'', 's', 'S', 't', 'l', 'v', 'e', 'r',
                'ſ', '!', '/', '.', '_', '😀', '\u{200d}',
            ]), 0..40)
        ) {
            let text: String = chars.into_iter().collect();
            for (pattern, family) in KNOWN_PATTERNS {
                proptest::prop_assert_eq!(
                    scanned(*family, &text),
                    matched(pattern, &text),
                    "{:?} on {:?}", family, text
                );
            }
        }
    }

    #[test]
    fn llama3_ends_a_final_whitespace_run_at_its_last_newline() {
        assert_eq!(scanned(Family::Llama3, "a\n  "), ["a", "\n", "  "]);
        assert_eq!(scanned(Family::Cl100k, "a\n  "), ["a", "\n  "]);
        assert_eq!(scanned(Family::Qwen2, "x123"), ["x", "1", "2", "3"]);
        assert_eq!(
            scanned(Family::Tekken, "it's 42"),
            ["it", "'s", " ", "4", "2"]
        );
    }

    #[test]
    fn known_patterns_compile_and_unknown_ones_run_on_the_engine() {
        for (pattern, _) in KNOWN_PATTERNS {
            assert!(
                RegexSplits::new(&[(*pattern).to_owned()]).is_ok(),
                "{pattern}"
            );
        }
        assert!(matches!(
            family_of(&[r"\p{N}{1,3}".to_owned()]),
            Ok(Family::Regex(_))
        ));
        assert_eq!(family_of(&[GPT2_PATTERN.to_owned()]), Ok(Family::Gpt2));
    }
}
