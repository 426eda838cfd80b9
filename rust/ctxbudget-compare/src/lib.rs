//! What the benchmarks comparing ctxbudget with other tokenizers share: the real-text
//! corpus — the Python standard library's `.py` sources (tests and site-packages left
//! out), found at run time through `python3`'s `sysconfig`, or the directory named by
//! `CTXBUDGET_CORPUS` — and the three implementations compared on it.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

fn stdlib_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("CTXBUDGET_CORPUS") {
        return Some(PathBuf::from(dir));
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    Some(PathBuf::from(dir.trim()))
}

fn collect(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "site-packages" | "test" | "tests") {
                collect(&path, out);
            }
        } else if name.ends_with(".py") {
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push(text);
            }
        }
    }
}

/// Every file's text, in path order (empty, with a message, if none is found).
pub fn files() -> Vec<String> {
    let mut files = Vec::new();
    if let Some(dir) = stdlib_dir() {
        collect(&dir, &mut files);
    }
    if files.is_empty() {
        eprintln!("no Python standard library found: set CTXBUDGET_CORPUS to a directory");
    }
    files
}

/// ctxbudget with its cache off: a shipped encoding by name, or a tokenizer file (a
/// `tokenizer.json`, `tekken.json`, ...) by its path.
pub fn ours(name: &str) -> ctxbudget::Encoding {
    let enc = if Path::new(name).is_file() {
        ctxbudget::Encoding::from_file(name)
    } else {
        ctxbudget::Encoding::new(name)
    };
    match enc {
        Ok(enc) => enc.with_cache_capacity(0),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// ctxbudget with its cache off, freshly loaded: for a tokenizer file, from a copy of
/// it under a new name, so that nothing an earlier load learnt while counting (which
/// tokens of a merge list merge back to themselves, its map of pairs by ids) carries
/// over — the process keeps the tables of every file it read. A shipped encoding
/// learns nothing of the kind and is opened as [`ours`] opens it.
pub fn ours_fresh(name: &str) -> ctxbudget::Encoding {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COPIES: AtomicUsize = AtomicUsize::new(0);
    let path = Path::new(name);
    let Some(file_name) = path.file_name().filter(|_| path.is_file()) else {
        return ours(name);
    };
    let dir = std::env::temp_dir().join(format!(
        "ctxbudget-compare-{}-{}",
        std::process::id(),
        COPIES.fetch_add(1, Ordering::Relaxed)
    ));
    let copy = dir.join(file_name);
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::copy(path, &copy)) {
        panic!("{}: {e}", copy.display());
    }
    let enc = ours(&copy.to_string_lossy());
    let _ = std::fs::remove_dir_all(&dir);
    enc
}

/// CPU seconds of `f` run on a fresh thread, whose per-thread caches (ctxbudget's piece
/// and segment caches) start empty: a cold pass.
pub fn cpu_seconds_on_fresh_thread(f: impl FnOnce() -> usize + Send) -> f64 {
    std::thread::scope(|s| {
        s.spawn(|| {
            let start = thread_cpu_seconds();
            std::hint::black_box(f());
            thread_cpu_seconds() - start
        })
        .join()
        .unwrap_or(f64::NAN)
    })
}

/// ctxbudget, bpe-openai and tiktoken-rs for `name` (o200k or cl100k), after checking
/// that all three count every text alike: otherwise the comparison means nothing.
pub fn three(
    name: &str,
    texts: &[String],
) -> (
    ctxbudget::Encoding,
    &'static bpe_openai::Tokenizer,
    tiktoken_rs::CoreBPE,
) {
    let enc = ours(name);
    let (second, third) = match name {
        "o200k_base" => (bpe_openai::o200k_base(), tiktoken_rs::o200k_base()),
        _ => (bpe_openai::cl100k_base(), tiktoken_rs::cl100k_base()),
    };
    let Ok(third) = third else {
        panic!("tiktoken-rs {name} failed to load");
    };
    for t in texts {
        let n = enc.count(t);
        assert_eq!(n, second.count(t.as_str()), "{name}");
        assert_eq!(n, third.encode_ordinary(t).len(), "{name}");
    }
    (enc, second, third)
}

/// CPU time of `clock` so far, in seconds (`NaN` if it cannot be read).
fn cpu_clock_seconds(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// CPU time of this thread so far, in seconds (`CLOCK_THREAD_CPUTIME_ID`, which is
/// exact, unlike the tick-granular counters of `/proc`, and which other load on the
/// machine does not inflate).
pub fn thread_cpu_seconds() -> f64 {
    cpu_clock_seconds(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of this process so far (all its threads), in seconds.
pub fn process_cpu_seconds() -> f64 {
    cpu_clock_seconds(libc::CLOCK_PROCESS_CPUTIME_ID)
}
