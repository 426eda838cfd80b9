//! Memory files (`/memories/…`) of a PostgreSQL conversation.
//!
//! The same paths, limits and refusals as the `memory` tool's files on disk, with no
//! file-system path anywhere: a file is a row `(conversation, path, content)`; a directory
//! exists while some file lies under it. Writes take the conversation's row lock, so a
//! write, a rename or a delete is atomic and never interleaves with another host's.

use super::error::{PgError, Result};
use super::pool::Conn;
use super::PgConversation;

/// Largest file in `/memories/session/` (a checkpoint), in bytes.
pub const MEMORY_CHECKPOINT_MAX: usize = 8 * 1024;
/// Largest file elsewhere under `/memories/`, in bytes.
pub const MEMORY_FILE_MAX: usize = 256 * 1024;
/// Longest path component, in bytes.
pub const MEMORY_NAME_MAX: usize = 255;
/// Longest path, in bytes.
pub const MEMORY_PATH_MAX: usize = 1024;

const ROOT: &str = "/memories";
const SESSION: &str = "session";

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEntry {
    /// Its path, e.g. `/memories/notes.md` or `/memories/session` (a directory).
    pub path: String,
    /// True for a directory.
    pub is_dir: bool,
    /// Bytes of a file; for a directory, of every file under it.
    pub size: u64,
}

/// A validated memory path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemPath {
    parts: Vec<String>,
}

impl MemPath {
    pub(crate) fn parse(virtual_path: &str) -> Result<MemPath> {
        let bad = |m: String| PgError::memory("invalid_path", m);
        if virtual_path.contains('\0') {
            return Err(bad("path contains a NUL character".into()));
        }
        if virtual_path.len() > MEMORY_PATH_MAX {
            return Err(bad(format!("path is longer than {MEMORY_PATH_MAX} bytes")));
        }
        if virtual_path.contains('\\') {
            return Err(bad("use / in paths, not backslashes".into()));
        }
        let rest = if virtual_path == ROOT {
            ""
        } else if let Some(rest) = virtual_path.strip_prefix("/memories/") {
            rest
        } else {
            return Err(bad(
                "paths must be under /memories/, e.g. /memories/a.md".into()
            ));
        };
        let mut parts = Vec::new();
        for part in rest.split('/').filter(|p| !p.is_empty()) {
            if part == "." || part == ".." {
                return Err(bad("'.' and '..' are not allowed in memory paths".into()));
            }
            if part.len() > MEMORY_NAME_MAX {
                return Err(bad(format!(
                    "a path component is longer than {MEMORY_NAME_MAX} bytes"
                )));
            }
            parts.push(part.to_string());
        }
        Ok(MemPath { parts })
    }

    fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    fn in_session(&self) -> bool {
        self.parts.first().is_some_and(|p| p == SESSION)
    }

    fn limit(&self) -> usize {
        if self.in_session() {
            MEMORY_CHECKPOINT_MAX
        } else {
            MEMORY_FILE_MAX
        }
    }

    /// `/memories/a/b`.
    fn shown(&self) -> String {
        let mut s = ROOT.to_string();
        for p in &self.parts {
            s.push('/');
            s.push_str(p);
        }
        s
    }

    /// `/memories/a/b/` — the prefix of everything under it.
    fn dir_prefix(&self) -> String {
        let mut s = self.shown();
        s.push('/');
        s
    }

    fn ancestors(&self) -> Vec<String> {
        (1..self.parts.len())
            .map(|n| {
                MemPath {
                    parts: self.parts[..n].to_vec(),
                }
                .shown()
            })
            .collect()
    }

    fn too_large(&self, size: usize) -> PgError {
        let (limit, place) = if self.in_session() {
            (
                MEMORY_CHECKPOINT_MAX,
                "a checkpoint file in /memories/session/",
            )
        } else {
            (MEMORY_FILE_MAX, "a memory file")
        };
        PgError::memory(
            "too_large",
            format!(
                "{place} holds at most {limit} bytes; this would be {size}. Keep the \
                 checkpoint short: goal, decisions, progress, next steps, IDs."
            ),
        )
    }
}

/// `LIKE` pattern matching everything under `prefix` (which ends with `/`).
fn like_prefix(prefix: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('%');
    s
}

const LOCK: &str = "SELECT 1 FROM ctxbudget_conversations WHERE conversation = $1 FOR UPDATE";
const READ: &str =
    "SELECT content FROM ctxbudget_memory_files WHERE conversation = $1 AND path = $2";
const UNDER: &str = "SELECT path, octet_length(content) FROM ctxbudget_memory_files \
                     WHERE conversation = $1 AND path LIKE $2 ORDER BY path";
const FILES_AT: &str = "SELECT path FROM ctxbudget_memory_files \
                        WHERE conversation = $1 AND path = ANY($2)";
const UPSERT: &str = "INSERT INTO ctxbudget_memory_files (conversation, path, content) \
                      VALUES ($1, $2, $3) ON CONFLICT (conversation, path) \
                      DO UPDATE SET content = EXCLUDED.content, updated_at = now()";

/// The bytes of the existing file `p` (an edit's input): `is_directory` or `not_found`
/// when there is no such file.
fn existing_file(c: &mut Conn, conversation: &str, p: &MemPath) -> Result<Vec<u8>> {
    if let Some(old) = read_file(c, conversation, p)? {
        return Ok(old);
    }
    if !under(c, conversation, p)?.is_empty() {
        return Err(PgError::memory(
            "is_directory",
            format!("{} is a directory", p.shown()),
        ));
    }
    Err(not_found(p))
}

impl PgConversation {
    /// A file's bytes.
    pub fn memory_read(&self, path: &str) -> Result<Vec<u8>> {
        let p = MemPath::parse(path)?;
        let conversation = self.id();
        self.store().run(|c| {
            if let Some(bytes) = read_file(c, conversation, &p)? {
                return Ok(bytes);
            }
            if !under(c, conversation, &p)?.is_empty() {
                return Err(PgError::memory(
                    "is_directory",
                    format!("{} is a directory; view it or name a file in it", p.shown()),
                ));
            }
            Err(not_found(&p))
        })
    }

    /// The entries directly in a directory (`/memories` always exists).
    pub fn memory_list(&self, dir: &str) -> Result<Vec<MemoryEntry>> {
        let p = MemPath::parse(dir)?;
        let conversation = self.id();
        self.store().run(|c| {
            let files = under(c, conversation, &p)?;
            if files.is_empty() {
                if !p.is_root() && read_file(c, conversation, &p)?.is_some() {
                    return Err(PgError::memory(
                        "not_a_directory",
                        format!("{} is a file, not a directory", p.shown()),
                    ));
                }
                if !p.is_root() {
                    return Err(not_found(&p));
                }
            }
            let prefix = p.dir_prefix();
            // Grouped and ordered by name here, in code point order as the workspace
            // store lists a directory: the database's ORDER BY follows its collation,
            // which may interleave `a.md.bak` with the files under `a.md/`.
            let mut by_name: std::collections::BTreeMap<(String, bool), u64> =
                std::collections::BTreeMap::new();
            for (path, size) in files {
                let rest = &path[prefix.len()..];
                let (name, is_dir) = match rest.split_once('/') {
                    Some((dir, _)) => (dir, true),
                    None => (rest, false),
                };
                *by_name.entry((name.to_owned(), is_dir)).or_default() += size;
            }
            Ok(by_name
                .into_iter()
                .map(|((name, is_dir), size)| MemoryEntry {
                    path: format!("{prefix}{name}"),
                    is_dir,
                    size,
                })
                .collect())
        })
    }

    /// Creates or replaces a whole file, atomically.
    pub fn memory_write(&self, path: &str, content: &[u8]) -> Result<()> {
        let p = MemPath::parse(path)?;
        if p.is_root() {
            return Err(PgError::memory(
                "invalid_path",
                "give a file path under /memories/",
            ));
        }
        if content.len() > p.limit() {
            return Err(p.too_large(content.len()));
        }
        self.memory_tx(|c, conversation| {
            check_writable_file(c, conversation, &p)?;
            let upsert = c.statement(UPSERT)?;
            c.client
                .execute(&upsert, &[&conversation, &p.shown(), &content])
                .map_err(PgError::db("writing a memory file"))?;
            Ok(())
        })
    }

    /// Replaces an existing file's bytes with `edit(old)`, atomically (`str_replace`,
    /// `insert`). `edit` may run more than once (after a broken connection).
    pub fn memory_update(
        &self,
        path: &str,
        mut edit: impl FnMut(&[u8]) -> Result<Vec<u8>>,
    ) -> Result<()> {
        let p = MemPath::parse(path)?;
        self.memory_tx(|c, conversation| {
            let old = existing_file(c, conversation, &p)?;
            let new = edit(&old)?;
            if new.len() > p.limit() {
                return Err(p.too_large(new.len()));
            }
            let upsert = c.statement(UPSERT)?;
            c.client
                .execute(&upsert, &[&conversation, &p.shown(), &new])
                .map_err(PgError::db("writing a memory file"))?;
            Ok(())
        })
    }

    /// Replaces an existing file's bytes with `new` only if they are still `expected`
    /// (compare and swap, under the conversation's row lock); `false`, and nothing
    /// written, when they changed. An edit computed from a read outside the lock
    /// (`str_replace`, `insert` of the memory tool) commits with it: the edit runs on the
    /// caller's thread, never while the lock is held, and no other host's change is lost.
    pub fn memory_replace(&self, path: &str, expected: &[u8], new: &[u8]) -> Result<bool> {
        let p = MemPath::parse(path)?;
        if new.len() > p.limit() {
            return Err(p.too_large(new.len()));
        }
        self.memory_tx(|c, conversation| {
            let old = existing_file(c, conversation, &p)?;
            if old != expected {
                return Ok(false);
            }
            let upsert = c.statement(UPSERT)?;
            c.client
                .execute(&upsert, &[&conversation, &p.shown(), &new])
                .map_err(PgError::db("writing a memory file"))?;
            Ok(true)
        })
    }

    /// Deletes a file or a directory with everything under it.
    pub fn memory_delete(&self, path: &str) -> Result<()> {
        let p = MemPath::parse(path)?;
        if p.is_root() {
            return Err(PgError::memory(
                "invalid_path",
                "/memories itself cannot be deleted; name a file or directory in it",
            ));
        }
        self.memory_tx(|c, conversation| {
            let n = c
                .client
                .execute(
                    "DELETE FROM ctxbudget_memory_files WHERE conversation = $1 \
                     AND (path = $2 OR path LIKE $3)",
                    &[&conversation, &p.shown(), &like_prefix(&p.dir_prefix())],
                )
                .map_err(PgError::db("deleting memory files"))?;
            if n == 0 {
                return Err(not_found(&p));
            }
            Ok(())
        })
    }

    /// Renames a file or a directory; the new path must not exist. Refusals come in the
    /// memory tool's order, the same for both of its stores: `old_path` missing
    /// (`not_found`), a file over the checkpoint limit moving into `/memories/session/`
    /// (`too_large`), a moved file's path growing past [`MEMORY_PATH_MAX`]
    /// (`invalid_path`), a file on the way to `new_path` (`not_a_directory`), `new_path`
    /// taken (`exists`).
    pub fn memory_rename(&self, old_path: &str, new_path: &str) -> Result<()> {
        let old = MemPath::parse(old_path)?;
        let new = MemPath::parse(new_path)?;
        if old.is_root() || new.is_root() {
            return Err(PgError::memory(
                "invalid_path",
                "/memories itself cannot be renamed; name a file or directory in it",
            ));
        }
        if new.parts.starts_with(&old.parts) {
            return Err(PgError::memory(
                "invalid_path",
                "new_path must not be old_path or inside it",
            ));
        }
        self.memory_tx(|c, conversation| {
            let file = read_file(c, conversation, &old)?;
            let moved: Vec<(String, u64)> = match &file {
                Some(bytes) => vec![(old.shown(), bytes.len() as u64)],
                None => under(c, conversation, &old)?,
            };
            if moved.is_empty() {
                return Err(not_found(&old));
            }
            if new.in_session() {
                if let Some((path, size)) = moved
                    .iter()
                    .find(|(_, size)| *size as usize > MEMORY_CHECKPOINT_MAX)
                {
                    return Err(PgError::memory(
                        "too_large",
                        format!(
                            "{path} is over {MEMORY_CHECKPOINT_MAX} bytes, the most a file \
                             in /memories/session/ may hold; shorten it first ({size} bytes)"
                        ),
                    ));
                }
            }
            let (from, to) = if file.is_some() {
                (old.shown(), new.shown())
            } else {
                (old.dir_prefix(), new.dir_prefix())
            };
            check_moved_paths(&moved, &from, &to)?;
            check_no_file_ancestor(c, conversation, &new)?;
            if read_file(c, conversation, &new)?.is_some()
                || !under(c, conversation, &new)?.is_empty()
            {
                return Err(PgError::memory(
                    "exists",
                    format!("{} already exists", new.shown()),
                ));
            }
            c.client
                .execute(
                    "UPDATE ctxbudget_memory_files \
                     SET path = $3 || substr(path, char_length($2) + 1), updated_at = now() \
                     WHERE conversation = $1 AND (path = $2 OR path LIKE $4)",
                    &[&conversation, &from, &to, &like_prefix(&old.dir_prefix())],
                )
                .map_err(PgError::db("renaming memory files"))?;
            Ok(())
        })
    }

    /// Runs `op` in a transaction holding the conversation's row lock.
    fn memory_tx<T>(&self, mut op: impl FnMut(&mut Conn, &str) -> Result<T>) -> Result<T> {
        let conversation = self.id();
        self.store().run(|c| {
            let lock = c.statement(LOCK)?;
            c.client
                .batch_execute("BEGIN")
                .map_err(PgError::db("BEGIN"))?;
            let result = (|| {
                let found = c
                    .client
                    .query(&lock, &[&conversation])
                    .map_err(PgError::db("locking the conversation"))?;
                if found.is_empty() {
                    return Err(PgError::NoConversation(conversation.to_string()));
                }
                op(c, conversation)
            })();
            match result {
                Ok(value) => c
                    .client
                    .batch_execute("COMMIT")
                    .map(|()| value)
                    .map_err(PgError::commit_of("a memory change")),
                Err(e) => {
                    // A broken connection is discarded by `run`; otherwise undo.
                    if !e.is_transient() {
                        c.client
                            .batch_execute("ROLLBACK")
                            .map_err(PgError::db("ROLLBACK"))?;
                    }
                    Err(e)
                }
            }
        })
    }
}

fn not_found(p: &MemPath) -> PgError {
    PgError::memory("not_found", format!("{} does not exist", p.shown()))
}

fn read_file(c: &mut Conn, conversation: &str, p: &MemPath) -> Result<Option<Vec<u8>>> {
    if p.is_root() {
        return Ok(None);
    }
    let s = c.statement(READ)?;
    let rows = c
        .client
        .query(&s, &[&conversation, &p.shown()])
        .map_err(PgError::db("reading a memory file"))?;
    Ok(rows.first().map(|r| r.get(0)))
}

/// Every file under the directory `p`, with its size.
fn under(c: &mut Conn, conversation: &str, p: &MemPath) -> Result<Vec<(String, u64)>> {
    let s = c.statement(UNDER)?;
    let rows = c
        .client
        .query(&s, &[&conversation, &like_prefix(&p.dir_prefix())])
        .map_err(PgError::db("listing memory files"))?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), u64::try_from(r.get::<_, i32>(1)).unwrap_or(0)))
        .collect())
}

/// Refuses writing the file `p` when it is a directory or lies under a file.
fn check_writable_file(c: &mut Conn, conversation: &str, p: &MemPath) -> Result<()> {
    if !under(c, conversation, p)?.is_empty() {
        return Err(PgError::memory(
            "is_directory",
            format!("{} is a directory", p.shown()),
        ));
    }
    check_no_file_ancestor(c, conversation, p)
}

/// Refuses a rename from the prefix `from` to `to` that would make a moved file's path
/// longer than [`MEMORY_PATH_MAX`] (nothing could name it afterwards).
fn check_moved_paths(moved: &[(String, u64)], from: &str, to: &str) -> Result<()> {
    let longest = moved.iter().map(|(path, _)| path.len()).max().unwrap_or(0);
    let grown = longest.saturating_sub(from.len()) + to.len();
    if grown > MEMORY_PATH_MAX {
        return Err(PgError::memory(
            "invalid_path",
            format!(
                "the move would give a file a path of {grown} bytes, over the \
                 {MEMORY_PATH_MAX}-byte limit; choose a shorter new_path"
            ),
        ));
    }
    Ok(())
}

fn check_no_file_ancestor(c: &mut Conn, conversation: &str, p: &MemPath) -> Result<()> {
    let ancestors = p.ancestors();
    if ancestors.is_empty() {
        return Ok(());
    }
    let s = c.statement(FILES_AT)?;
    let rows = c
        .client
        .query(&s, &[&conversation, &ancestors])
        .map_err(PgError::db("checking memory directories"))?;
    if let Some(row) = rows.first() {
        let file: String = row.get(0);
        return Err(PgError::memory(
            "not_a_directory",
            format!("{file} is a file, so {} cannot be created in it", p.shown()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<MemPath>) -> &'static str {
        match r {
            Err(PgError::Memory { code, .. }) => code,
            _ => "ok",
        }
    }

    #[test]
    fn paths_are_confined_like_the_memory_tool() {
        assert_eq!(code(MemPath::parse("/memories/a.md")), "ok");
        assert_eq!(code(MemPath::parse("/memories")), "ok");
        assert_eq!(
            code(MemPath::parse("/memories/../etc/passwd")),
            "invalid_path"
        );
        assert_eq!(code(MemPath::parse("/memories/./a")), "invalid_path");
        assert_eq!(code(MemPath::parse("/etc/passwd")), "invalid_path");
        assert_eq!(code(MemPath::parse("/memoriesX/a")), "invalid_path");
        assert_eq!(code(MemPath::parse("/memories/a\\b")), "invalid_path");
        assert_eq!(code(MemPath::parse("/memories/a\0b")), "invalid_path");
        let long = format!("/memories/{}", "x".repeat(MEMORY_NAME_MAX + 1));
        assert_eq!(code(MemPath::parse(&long)), "invalid_path");
        let p = MemPath::parse("/memories//session///cp.md").ok();
        assert_eq!(
            p.as_ref().map(MemPath::shown).as_deref(),
            Some("/memories/session/cp.md")
        );
        assert_eq!(p.map(|p| p.limit()), Some(MEMORY_CHECKPOINT_MAX));
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_prefix("/memories/a_b%/"), "/memories/a\\_b\\%/%");
    }
}
