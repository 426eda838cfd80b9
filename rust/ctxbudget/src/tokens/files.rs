//! Tokenizers read from the host's disk: which file a path or model directory holds,
//! and the tables kept for each file read.
//!
//! A file's tables are built once per process and kept for its life (every
//! [`super::Encoding`] of that file shares them, as the shipped encodings share
//! theirs): a file is known by its canonical path, length and modification time, so a
//! replaced file is read again. Nothing is ever downloaded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use super::hf::{self, Loaded};
use super::template::ChatTemplate;
use super::{unicode, Tables, TokenError};

/// What identifies a file read: where it is, how long it is, when it last changed.
type FileKey = (PathBuf, u64, Option<SystemTime>);

/// The tables of every file read so far, by file (and template file, for a directory).
static LOADED: Mutex<Option<HashMap<(FileKey, Option<FileKey>), Shared>>> = Mutex::new(None);

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

/// Reads a `tokenizer.json` or a `tekken*.json`, whichever `text` is.
fn parse(path: &Path, text: &str) -> Result<Loaded, TokenError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let tekken_like = name.contains("tekken") || text.contains("\"token_bytes\"");
    let loaded = if tekken_like {
        hf::load_tekken(text)
    } else {
        hf::load_tokenizer_json(text)
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

fn leak(name: &'static str, loaded: Loaded, template: Option<ChatTemplate>) -> Shared {
    unicode::warm_up();
    let tables = Tables {
        family: loaded.family,
        ranks: loaded.ranks,
        rules: loaded.rules,
        template,
    };
    (name, Box::leak(Box::new(tables)))
}

/// The tokenizer in one file.
pub(crate) fn load_file(path: &Path) -> Result<Shared, TokenError> {
    shared(path, None, || {
        let loaded = parse(path, &read(path)?)?;
        Ok(leak(display_name(path, false), loaded, None))
    })
}

/// The files of a model directory that hold a tokenizer, in the order they are tried.
const TOKENIZER_FILES: &[&str] = &["tokenizer.json", "tekken.json"];

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
        .find(|p| p.is_file())
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
        let loaded = parse(&file, &read(&file)?)?;
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
        Ok(leak(display_name(dir, true), loaded, template))
    })
}
