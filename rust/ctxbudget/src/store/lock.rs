//! The history lock: an in-process mutex plus an exclusive `flock` on `<ws>/history/lock`.
//!
//! `flock` serializes processes (and interoperates with Python's `filelock` on the same
//! path); the mutex serializes threads of this process, which would otherwise each open
//! the file and contend through the kernel. The lock file is never truncated or
//! unlinked. After acquiring, we check that the file we locked is still the one at the
//! path: if someone replaced it, our lock protects nothing and we start over.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::error::{Result, StoreError};

/// Default bound on waiting for the lock.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The lock file kept open between acquisitions, with the identity it had when opened.
struct OpenLock {
    file: File,
    dev: u64,
    ino: u64,
}

/// Per-path state shared by the threads of this process.
#[derive(Default)]
struct TokenState {
    /// Some thread of this process holds the lock.
    held: bool,
    /// Threads of this process waiting for it: releases wake one only if there is one
    /// (an unconditional wake is a system call on every release).
    waiting: usize,
    /// The open lock file, reused so that an acquisition is one `flock` and one `stat`.
    file: Option<OpenLock>,
}

/// The per-path state and the condition variable its waiters sleep on.
type Shared = (Mutex<TokenState>, std::sync::Condvar);
type Token = Arc<Shared>;

/// The per-path state, shared by every [`LockToken`] of this process for that path. The
/// registry holds it weakly: when the last `History` of a workspace is dropped, its
/// lock file is closed and the entry goes, so a process serving many workspaces keeps
/// one descriptor per workspace in use, not one per workspace ever opened.
fn token(path: &Path) -> Token {
    static TOKENS: OnceLock<Mutex<HashMap<PathBuf, Weak<Shared>>>> = OnceLock::new();
    let mut map = TOKENS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(live) = map.get(path).and_then(Weak::upgrade) {
        return live;
    }
    // Forget entries whose workspaces are all closed (amortized: only when adding).
    map.retain(|_, w| w.strong_count() > 0);
    let fresh: Token = Arc::default();
    map.insert(path.to_path_buf(), Arc::downgrade(&fresh));
    fresh
}

/// A workspace's share of the process-wide lock state; the `History` holds one for its
/// lifetime, and the lock file stays open only while some `History` of it is alive.
#[derive(Clone)]
pub(crate) struct LockToken(Token);

impl LockToken {
    /// The token of the lock file at `path`.
    pub(crate) fn new(path: &Path) -> LockToken {
        LockToken(token(path))
    }
}

/// Held lock; released on drop.
pub(crate) struct HistoryLock {
    token: Token,
    file: Option<OpenLock>,
}

impl Drop for HistoryLock {
    fn drop(&mut self) {
        // Unlock explicitly (the descriptor stays open for the next acquisition), hand
        // the file back, then wake one waiting thread.
        let file = self.file.take().filter(|f| f.file.unlock().is_ok());
        let (state, cv) = &*self.token;
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        state.held = false;
        state.file = file;
        if state.waiting > 0 {
            cv.notify_one();
        }
    }
}

fn open_lock(path: &Path) -> std::io::Result<OpenLock> {
    let file = super::fsutil::open_nofollow(
        path,
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )?;
    let meta = file.metadata()?;
    Ok(OpenLock {
        file,
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

impl HistoryLock {
    /// Acquires the lock at `path`, waiting at most `timeout`.
    pub(crate) fn acquire(
        shared: &LockToken,
        path: &Path,
        timeout: Duration,
    ) -> Result<HistoryLock> {
        let start = Instant::now();
        let timed_out = || StoreError::LockTimeout {
            path: path.to_path_buf(),
            waited: start.elapsed(),
        };
        let token = shared.0.clone();
        let mut cached = {
            let (state, cv) = &*token;
            let mut guard = state.lock().unwrap_or_else(|e| e.into_inner());
            while guard.held {
                let left = timeout.checked_sub(start.elapsed()).ok_or_else(timed_out)?;
                guard.waiting += 1;
                guard = cv
                    .wait_timeout(guard, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                guard.waiting -= 1;
            }
            guard.held = true;
            guard.file.take()
        };
        // From here on the token is ours; give it back on every early return.
        let release = |err: StoreError| {
            let (state, cv) = &*token;
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            state.held = false;
            if state.waiting > 0 {
                cv.notify_one();
            }
            err
        };
        let mut pause = Duration::from_micros(200);
        loop {
            let lock = match cached.take() {
                Some(l) => l,
                None => open_lock(path)
                    .map_err(|e| release(StoreError::io("open lock file", path, e)))?,
            };
            match lock.file.try_lock() {
                Ok(()) => {
                    // The file we locked must still be the one at the path; if it was
                    // replaced, our lock protects nothing: open the new one.
                    let same = std::fs::metadata(path)
                        .is_ok_and(|m| (m.dev(), m.ino()) == (lock.dev, lock.ino));
                    if same {
                        return Ok(HistoryLock {
                            token: token.clone(),
                            file: Some(lock),
                        });
                    }
                    continue;
                }
                Err(TryLockError::WouldBlock) => cached = Some(lock),
                Err(TryLockError::Error(e)) => {
                    return Err(release(StoreError::io("flock", path, e)));
                }
            }
            if start.elapsed() >= timeout {
                return Err(release(timed_out()));
            }
            thread::sleep(pause.min(timeout.saturating_sub(start.elapsed())));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_times_out_then_succeeds_after_release() {
        let dir = std::env::temp_dir().join(format!("ctxb-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("lock");
        let shared = LockToken::new(&path);
        let held = HistoryLock::acquire(&shared, &path, Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("{e}"));
        let p2 = path.clone();
        let waiter = thread::spawn(move || {
            let other = LockToken::new(&p2);
            HistoryLock::acquire(&other, &p2, Duration::from_millis(50)).is_err()
        });
        assert!(waiter.join().unwrap_or(false));
        drop(held);
        assert!(HistoryLock::acquire(&shared, &path, Duration::from_millis(200)).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
