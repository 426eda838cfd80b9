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
//! freshly built fastokens tokenizer, so neither side has seen a piece yet; *steady state* is a
//! further pass on a thread that has counted the corpus before. Every count is checked
//! equal between the two first: otherwise the comparison would mean nothing.
//!
//! `cargo bench -p ctxbudget --bench fastokens [corpus|runs|batch]`
//! (`CTXBUDGET_CORPUS=<dir>` counts another corpus than Python's standard library.)

#[path = "support/corpus.rs"]
mod corpus;

use corpus::ours;

const MIB: usize = 1 << 20;

/// Interleaved rounds of each corpus measure.
const ROUNDS: usize = 5;

/// CPU time of this thread so far, in seconds.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// fastokens for `name`, from the same tiktoken file ctxbudget embeds.
fn theirs(name: &str) -> fastokens::Tokenizer {
    let (data, config) = match name {
        "o200k_base" => (
            include_str!("../src/tokens/data/o200k_base.tiktoken"),
            fastokens::tiktoken::TiktokenConfig::o200k_base(),
        ),
        _ => (
            include_str!("../src/tokens/data/cl100k_base.tiktoken"),
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

/// CPU seconds of `f` run on a fresh thread (whose caches are cold).
fn on_fresh_thread(f: impl FnOnce() -> usize + Send) -> f64 {
    std::thread::scope(|s| {
        s.spawn(|| {
            let start = cpu_seconds();
            std::hint::black_box(f());
            cpu_seconds() - start
        })
        .join()
        .unwrap_or(f64::NAN)
    })
}

fn ratio_cell(ours: f64, theirs: f64) -> String {
    format!("**{:.2}×**", theirs / ours)
}

fn corpus_rows(texts: &[String]) {
    let bytes: usize = texts.iter().map(String::len).sum();
    for name in ["o200k_base", "cl100k_base"] {
        let enc = ours(name);
        let mut fast = theirs(name);
        for t in texts {
            assert_eq!(enc.count(t), their_count(&fast, t), "{name}: counts differ");
        }
        let (mut cold, mut steady) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        for _ in 0..ROUNDS {
            let pass = |e: &ctxbudget::Encoding| texts.iter().map(|t| e.count(t)).sum::<usize>();
            cold[0].push(on_fresh_thread(|| pass(&enc)));
            fast = theirs(name);
            cold[1].push(on_fresh_thread(|| {
                texts.iter().map(|t| their_count(&fast, t)).sum()
            }));
            // Steady state: a second pass on the thread that made the first.
            let twice = |f: &(dyn Fn() -> usize + Sync)| {
                std::thread::scope(|s| {
                    s.spawn(|| {
                        f();
                        let start = cpu_seconds();
                        std::hint::black_box(f());
                        cpu_seconds() - start
                    })
                    .join()
                    .unwrap_or(f64::NAN)
                })
            };
            steady[0].push(twice(&|| pass(&enc)));
            steady[1].push(twice(&|| texts.iter().map(|t| their_count(&fast, t)).sum()));
        }
        for (label, pair) in [("cold first pass", cold), ("steady state", steady)] {
            let (a, b) = (median(pair[0].clone()), median(pair[1].clone()));
            println!(
                "| {name}, stdlib corpus, {label}, 1 thread | {:.1} MiB | {a:.3} | {b:.3} | {} | yes |",
                bytes as f64 / MIB as f64,
                ratio_cell(a, b)
            );
        }
    }
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
            a.push(on_fresh_thread(|| enc.count(&text)));
            b.push(on_fresh_thread(|| their_count(&fast, &text)));
        }
        let (a, b) = (median(a), median(b));
        println!(
            "| o200k_base, 1 MiB run of {label} | 1 MiB | {a:.4} | {b:.4} | {} | {} |",
            ratio_cell(a, b),
            if equal { "yes" } else { "NO" }
        );
    }
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |t: &str| filter.is_empty() || filter.iter().any(|f| t.contains(f.as_str()));
    println!("| measure | input | ctxbudget CPU s | fastokens CPU s | fastokens ÷ ctxbudget (> 1: ctxbudget faster) | equal counts |");
    println!("|---|---|---|---|---|---|");
    let texts = corpus::files();
    if wants("corpus") && !texts.is_empty() {
        corpus_rows(&texts);
    }
    if wants("batch") && !texts.is_empty() {
        batch_rows(&texts);
    }
    if wants("runs") {
        run_rows();
    }
}
