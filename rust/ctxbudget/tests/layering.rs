//! The crate's layers stack one way (issue 28): the transcript layer builds on the byte
//! store, so nothing in `store/` may use `transcript`; and the `session_history` scanner
//! reads the neutral store seam, so nothing in `scan/` may name a backend (the file
//! store's types, PostgreSQL). This test reads the sources (comments and string literals
//! removed) and fails when either arrow comes back.
//!
//! `KNOWN_*` list the files that still break a rule while the layering is being
//! straightened out; the test fails both when another file starts breaking it and when a
//! listed file stops (so that the list only ever shrinks).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// `store/` files that still use the transcript layer.
const KNOWN_STORE_USES_TRANSCRIPT: &[&str] = &[];

/// `scan/` files that still name a backend.
const KNOWN_SCAN_NAMES_BACKEND: &[&str] = &[];

/// Words that name a backend or its internals: the file store (`History`, its index
/// snapshot, frames and files) and PostgreSQL (`pg`, `Pg…`).
fn names_backend(word: &str) -> bool {
    matches!(
        word,
        "pg" | "History"
            | "Snapshot"
            | "frame"
            | "Paths"
            | "commit_crc_before"
            | "open_read"
            | "with_snapshot"
    ) || word.starts_with("Pg")
        || word.starts_with("pg_")
        || word.ends_with("_pg")
        || word.contains("_pg_")
}

#[test]
fn store_does_not_use_the_transcript_layer() {
    let found = violators("store", |word| word == "transcript");
    assert_eq!(
        found,
        set(KNOWN_STORE_USES_TRANSCRIPT),
        "files of src/store/ that use `transcript` (the byte store must not know what rows \
         mean; move the code into src/transcript/ or update KNOWN_STORE_USES_TRANSCRIPT \
         when a file is fixed)"
    );
}

#[test]
fn scan_names_no_backend() {
    let found = violators("scan", names_backend);
    assert_eq!(
        found,
        set(KNOWN_SCAN_NAMES_BACKEND),
        "files of src/scan/ that name a backend (the scanner reads only the store seam; \
         update KNOWN_SCAN_NAMES_BACKEND when a file is fixed)"
    );
}

#[test]
fn the_checker_sees_grouped_uses_and_ignores_comments_and_strings() {
    let code =
        strip("use crate::{store::X, transcript::Y}; // transcript\nlet s = \"transcript\";");
    assert_eq!(
        words(&code).filter(|w| *w == "transcript").count(),
        1,
        "{code}"
    );
    let code = strip("/* pg */ let c = 'p'; let r = r#\"pg\"#; crate::pg::PgHistory");
    assert_eq!(
        words(&code)
            .filter(|w| names_backend(w))
            .collect::<Vec<_>>(),
        ["pg", "PgHistory"]
    );
}

fn set(files: &[&str]) -> BTreeSet<String> {
    files.iter().map(|f| (*f).to_owned()).collect()
}

/// Files under `src/<dir>/` (relative to `src/`) whose code has a word `bad` accepts.
fn violators(dir: &str, bad: impl Fn(&str) -> bool) -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeSet::new();
    for file in rust_files(&src.join(dir)) {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if words(&strip(&text)).any(&bad) {
            let rel = file.strip_prefix(&src).unwrap_or(&file);
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Identifier-like words of `code`.
fn words(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// `text` with comments, string literals and char literals blanked out.
fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && matches!(next, Some('#') | Some('"')) && !ident_before(&b, i) {
            // r"…" or r#"…"#: skip to the quote followed by as many hashes.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < b.len() {
                if b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && is_char_literal(&b, i) {
            i += 1;
            while i < b.len() && b[i] != '\'' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// A quote that opens a char literal rather than a lifetime (`'a`, `'_`).
fn is_char_literal(b: &[char], i: usize) -> bool {
    matches!(
        (b.get(i + 1), b.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}
