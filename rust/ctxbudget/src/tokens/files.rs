//! Tokenizers read from the host's disk: which file a path or model directory holds,
//! and the tables kept for each file read.
//!
//! A file's tables are built once per process and kept for its life (every
//! [`super::Encoding`] of that file shares them, as the shipped encodings share
//! theirs): a file is known by its canonical path, length and modification time, so a
//! replaced file is read again. Nothing is ever downloaded.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use super::bpe::Ranks;
use super::hf::{self, Loaded};
use super::sentencepiece;
use super::template::ChatTemplate;
use super::vocab::Vocab;
use super::{unicode, Tables, TokenError};

/// What identifies a file read: where it is, how long it is, when it last changed.
type FileKey = (PathBuf, u64, Option<SystemTime>);

/// The tables of every file read so far, by file (and template file, for a directory).
type LoadedFiles = HashMap<(FileKey, Option<FileKey>), Shared>;

/// Every tokenizer read from a file in this process.
static LOADED: Mutex<Option<LoadedFiles>> = Mutex::new(None);

/// A name and the tables of one tokenizer, kept for the life of the process.
type Shared = (&'static str, &'static Tables);

fn fail(path: &Path, reason: impl Into<String>) -> TokenError {
    TokenError::TokenizerFile {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

fn key(path: &Path) -> Result<FileKey, TokenError> {
    let canonical = path
        .canonicalize()
        .map_err(|e| fail(path, format!("{e}")))?;
    let meta = std::fs::metadata(&canonical).map_err(|e| fail(path, format!("{e}")))?;
    if !meta.is_file() {
        return Err(fail(path, "not a file"));
    }
    Ok((canonical, meta.len(), meta.modified().ok()))
}

fn read(path: &Path) -> Result<String, TokenError> {
    std::fs::read_to_string(path).map_err(|e| fail(path, format!("{e}")))
}

/// What a tokenizer file holds.
enum Parsed {
    /// Byte-pair tables for the shared engine (`tokenizer.json`, tekken).
    Bpe(Box<Loaded>),
    /// A SentencePiece model, which counts on its own.
    SentencePiece(Box<sentencepiece::Model>),
}

/// Reads a tokenizer file: a SentencePiece model, or a `tokenizer.json` or a
/// `tekken*.json`, whichever it is. A `tokenizer.json` is read a window at a time, never
/// whole (see [`hf::load_tokenizer_json_file`]); the others are read whole.
fn parse_file(path: &Path) -> Result<Parsed, TokenError> {
    let mut head = Vec::with_capacity(HEAD);
    let len = std::fs::File::open(path)
        .and_then(|file| {
            let len = file.metadata()?.len();
            file.take(HEAD as u64).read_to_end(&mut head)?;
            Ok(len)
        })
        .map_err(|e| fail(path, format!("{e}")))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let json_start = head.iter().find(|b| !b.is_ascii_whitespace());
    let streamed = !sentencepiece::looks_like_model(&head)
        && json_start == Some(&b'{')
        && !name.contains("tekken");
    if streamed {
        match hf::load_tokenizer_json_file(path, len) {
            Ok(loaded) => return Ok(Parsed::Bpe(Box::new(loaded))),
            Err(reason) => {
                // A file named otherwise is a tekken file if it spells tokens as
                // `token_bytes`: read whole and searched for only when it does not read
                // as a `tokenizer.json`.
                let data = std::fs::read(path).map_err(|e| fail(path, format!("{e}")))?;
                if memchr::memmem::find(&data, b"\"token_bytes\"").is_none() {
                    return Err(fail(path, reason));
                }
                return parse(path, &data).map(|loaded| Parsed::Bpe(Box::new(loaded)));
            }
        }
    }
    let data = std::fs::read(path).map_err(|e| fail(path, format!("{e}")))?;
    if sentencepiece::looks_like_model(&data) {
        return sentencepiece::Model::parse(&data)
            .map(|model| Parsed::SentencePiece(Box::new(model)))
            .map_err(|reason| fail(path, reason));
    }
    if data.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(fail(
            path,
            "neither a JSON object nor a SentencePiece model: not a tokenizer file",
        ));
    }
    parse(path, &data).map(|loaded| Parsed::Bpe(Box::new(loaded)))
}

/// Bytes of a file read first, to tell what it holds.
const HEAD: usize = 64;

/// Reads a `tokenizer.json` or a `tekken*.json`, whichever `data` is. A
/// `tokenizer.json` is scanned as bytes (its strings are checked as they are decoded:
/// a pass over all of it first would cost a tenth of the load).
fn parse(path: &Path, data: &[u8]) -> Result<Loaded, TokenError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let tekken = || {
        std::str::from_utf8(data)
            .map_err(|_| "not UTF-8: not a tekken.json file".to_owned())
            .and_then(hf::load_tekken)
    };
    // A file named otherwise is a tekken file if it spells tokens as `token_bytes`:
    // searched for only when it does not read as a `tokenizer.json` (a search of every
    // `tokenizer.json` cost a millisecond).
    let tekken_like = || memchr::memmem::find(data, b"\"token_bytes\"").is_some();
    let loaded = if name.contains("tekken") {
        tekken()
    } else {
        match hf::load_tokenizer_json(data) {
            Err(_) if tekken_like() => tekken(),
            loaded => loaded,
        }
    };
    loaded.map_err(|reason| fail(path, reason))
}

/// A name for a tokenizer: its directory's name, or its file's stem.
fn display_name(path: &Path, dir: bool) -> &'static str {
    let name = if dir {
        path.file_name()
    } else {
        path.file_stem()
    };
    let name = name.and_then(|n| n.to_str()).unwrap_or("tokenizer");
    Box::leak(name.to_owned().into_boxed_str())
}

/// Looks up the tables kept for `file` (and `template_file`), or builds them with
/// `build` and keeps them.
fn shared(
    file: &Path,
    template_file: Option<&Path>,
    build: impl FnOnce() -> Result<Shared, TokenError>,
) -> Result<Shared, TokenError> {
    let k = (key(file)?, template_file.map(key).transpose()?);
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    let map = loaded.get_or_insert_with(HashMap::new);
    if let Some(found) = map.get(&k) {
        return Ok(*found);
    }
    let built = build()?;
    map.insert(k, built);
    Ok(built)
}

fn leak(
    name: &'static str,
    parsed: Parsed,
    template: Option<ChatTemplate>,
) -> Result<Shared, TokenError> {
    unicode::warm_up();
    let tables = match parsed {
        Parsed::Bpe(loaded) => {
            let loaded = *loaded;
            Tables {
                family: loaded.family,
                ranks: loaded.ranks,
                rules: loaded.rules,
                template,
                sentencepiece: None,
            }
        }
        Parsed::SentencePiece(model) => Tables {
            // Unused: the model counts on its own.
            family: super::pretokenize::Family::Gpt2,
            ranks: Ranks::new(Vocab::from_tokens(std::iter::empty()).map_err(|reason| {
                TokenError::TokenizerFile {
                    path: name.to_owned(),
                    reason,
                }
            })?),
            rules: None,
            template,
            sentencepiece: Some(*model),
        },
    };
    Ok((name, Box::leak(Box::new(tables))))
}

/// The tokenizer in one file.
pub(crate) fn load_file(path: &Path) -> Result<Shared, TokenError> {
    shared(path, None, || {
        let parsed = parse_file(path)?;
        leak(display_name(path, false), parsed, None)
    })
}

/// The files of a model directory that hold a tokenizer, in the order they are tried:
/// a SentencePiece model first, being the original of the `tokenizer.json` that
/// HuggingFace converts from it (whose `Metaspace` form is not read).
const TOKENIZER_FILES: &[&str] = &[
    "tokenizer.model",
    "tokenizer.model.v3",
    "tokenizer.json",
    "tekken.json",
];

/// The files that may hold the chat template, in the order they are tried.
const TEMPLATE_FILES: &[&str] = &[
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer_config.json",
];

/// The tokenizer (and chat template) of a model directory.
pub(crate) fn load_dir(dir: &Path) -> Result<Shared, TokenError> {
    let Some(file) = TOKENIZER_FILES
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file() && (!is_model_file(p) || holds_sentencepiece(p)))
    else {
        return Err(fail(
            dir,
            format!("it holds none of {}", TOKENIZER_FILES.join(", ")),
        ));
    };
    let config = dir.join("tokenizer_config.json");
    let template_file = TEMPLATE_FILES
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file());
    shared(&file, template_file.as_deref(), || {
        let parsed = parse_file(&file)?;
        let config = if config.is_file() {
            Some(read(&config)?)
        } else {
            None
        };
        let template = match &template_file {
            Some(path) => {
                let text = read(path)?;
                ChatTemplate::from_files(path, &text, config.as_deref())
                    .map_err(|reason| fail(path, reason))?
            }
            None => None,
        };
        leak(display_name(dir, true), parsed, template)
    })
}

/// Whether `path` is named like a SentencePiece model file.
fn is_model_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("tokenizer.model"))
}

/// Whether the file at `path` starts like a SentencePiece model (a `tokenizer.model`
/// may also be a tiktoken table, as Llama 3's original files are).
fn holds_sentencepiece(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| sentencepiece::looks_like_model(&head))
}

/// Lower-case letters and digits of `name`: `Llama-3.1-8B` and `llama3.1:8b` agree.
fn squeeze(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Whether `dir` holds a tokenizer this module reads.
fn holds_tokenizer(dir: &Path) -> bool {
    TOKENIZER_FILES.iter().any(|f| dir.join(f).is_file())
}

/// The model directories under `root`, with the name each is known by: a plain
/// directory by its own name, a HuggingFace cache entry (`models--org--name`) by its
/// model name, read from its newest snapshot.
fn model_dirs(root: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if let Some(cached) = name.strip_prefix("models--") {
            let model = cached.rsplit("--").next().unwrap_or(cached).to_owned();
            let snapshots = std::fs::read_dir(path.join("snapshots"))
                .into_iter()
                .flatten()
                .flatten()
                .filter(|s| holds_tokenizer(&s.path()))
                .max_by_key(|s| s.metadata().and_then(|m| m.modified()).ok());
            if let Some(snapshot) = snapshots {
                found.push((model, snapshot.path()));
            }
        } else if holds_tokenizer(&path) {
            found.push((name, path));
        }
    }
    found
}

/// The directory under `root` that holds `model`'s tokenizer, found by name: each form
/// of the name (as given, then without `provider/` prefixes; an Ollama `:tag` is part
/// of the name) is compared, letters and digits only, with the directories' names —
/// equal first, else the shortest that starts with it (`ollama/llama3.1:8b` finds
/// `Llama-3.1-8B-Instruct`).
pub(crate) fn model_dir(root: &Path, model: &str) -> Option<PathBuf> {
    let dirs: Vec<(String, PathBuf)> = model_dirs(root)
        .into_iter()
        .map(|(name, path)| (squeeze(&name), path))
        .collect();
    super::windows::name_forms(model)
        .into_iter()
        .find_map(|form| {
            let key = squeeze(form);
            if key.is_empty() {
                return None;
            }
            dirs.iter()
                .filter(|(name, _)| name.starts_with(&key))
                .min_by_key(|(name, _)| name.len())
                .map(|(_, path)| path.clone())
        })
}

/// The tokenizer of `model` from the model directories under `root`.
pub(crate) fn load_model(root: &Path, model: &str) -> Result<Shared, TokenError> {
    match model_dir(root, model) {
        Some(dir) => load_dir(&dir),
        None => Err(fail(
            root,
            format!(
                "no model directory there matches {model:?} (a directory holding \
                 tokenizer.json or tekken.json, named like the model)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_find_their_directories() {
        let root = std::env::temp_dir().join(format!("ctxbudget-models-{}", std::process::id()));
        let make = |rel: &str| {
            let dir = root.join(rel);
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(dir.join("tokenizer.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
            dir
        };
        let llama8 = make("Llama-3.1-8B-Instruct");
        let llama70 = make("Llama-3.1-70B-Instruct");
        let qwen = make("models--Qwen--Qwen2.5-7B-Instruct/snapshots/abc");
        std::fs::create_dir_all(root.join("no-tokenizer-here")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(model_dir(&root, "ollama/llama3.1:8b"), Some(llama8.clone()));
        assert_eq!(model_dir(&root, "llama3.1:70b"), Some(llama70));
        assert_eq!(
            model_dir(&root, "meta-llama/Llama-3.1-8B-Instruct"),
            Some(llama8)
        );
        assert_eq!(
            model_dir(&root, "hosted_vllm/Qwen/Qwen2.5-7B-Instruct"),
            Some(qwen)
        );
        assert_eq!(model_dir(&root, "mistral-large"), None);
        assert_eq!(model_dir(&root, "no-tokenizer-here"), None);
        let _ = std::fs::remove_dir_all(&root);
    }
}
