//! Side-by-side CPU time of counting (single thread, cold: cache off, each round on a
//! fresh thread) for ctxbudget,
//! GitHub's `bpe-openai` and `tiktoken-rs`, printed as the Markdown tables of
//! benches/README.md.
//!
//! CPU time of the counting thread (`CLOCK_THREAD_CPUTIME_ID`), not wall time,
//! so that other load on a shared machine does not count; each figure is the minimum
//! over a few rounds, the implementations interleaved round by round.
//!
//! `cargo bench -p ctxbudget-compare --bench compare [runs|corpus]`
//! (`CTXBUDGET_BENCH_UNIT=space` to time one kind of run only.)
//! (`CTXBUDGET_CORPUS=<dir>` to count another corpus than Python's standard library.)

use ctxbudget_compare as corpus;

use corpus::ours;

const MIB: usize = 1 << 20;

/// Minimum CPU seconds of `f` over `rounds` runs, for each of the closures, interleaved.
/// Each run is made on a fresh thread, whose CPU time it is: ctxbudget's per-thread
/// piece and segment caches then start empty (a cold pass, as the others' always are),
/// instead of answering a text counted in the round before.
fn time_min(rounds: usize, fs: &mut [&mut (dyn FnMut() -> usize + Send)]) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; fs.len()];
    for _ in 0..rounds {
        for (k, f) in fs.iter_mut().enumerate() {
            best[k] = best[k].min(corpus::cpu_seconds_on_fresh_thread(f));
        }
    }
    best
}

/// The repeated units of the runs table.
const UNITS: [(&str, &str); 7] = [
    ("space", " "),
    ("`a`", "a"),
    ("`\\n`", "\n"),
    ("`中`", "中"),
    ("`😀`", "😀"),
    ("digits", "0123456789"),
    (
        "base64",
        "TWFuIGlzIGRpc3Rpbmd1aXNoZWQsIG5vdCBvbmx5IGJ5IGhpcyByZWFzb24sIGJ1dCBieSB0aGlz+/Zx",
    ),
];

fn runs() {
    let enc = ours("o200k_base");
    let second = bpe_openai::o200k_base();
    println!("| run (o200k_base) | MiB | ctxbudget CPU s/MiB | bpe-openai CPU s/MiB | ctxbudget ÷ bpe-openai | exact, equal |");
    println!("|---|---|---|---|---|---|");
    let only = std::env::var("CTXBUDGET_BENCH_UNIT").ok();
    for (label, unit) in UNITS {
        if only.as_deref().is_some_and(|o| !label.contains(o)) {
            continue;
        }
        let mut per_mib = Vec::new();
        for mib in [1usize, 16] {
            let text = unit.repeat(mib * MIB / unit.len());
            let detail = enc.count_detail(&text);
            let equal = detail.exact && detail.tokens == second.count(text.as_str());
            let rounds = if mib == 1 { 9 } else { 3 };
            let t = time_min(
                rounds,
                &mut [&mut || enc.count(&text), &mut || {
                    second.count(text.as_str())
                }],
            );
            let (a, b) = (t[0] / mib as f64, t[1] / mib as f64);
            per_mib.push(a);
            println!(
                "| {label} | {mib} | {a:.4} | {b:.4} | **{:.2}×** | {} |",
                a / b,
                if equal { "yes" } else { "NO" }
            );
        }
        println!(
            "| {label}: ctxbudget s/MiB at 16 MiB ÷ at 1 MiB | | **{:.2}×** | | | |",
            per_mib[1] / per_mib[0]
        );
    }
}

fn real_text() {
    let texts = corpus::files();
    if texts.is_empty() {
        return;
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    println!();
    println!(
        "| corpus: {} files, {:.1} MiB, file by file | ctxbudget CPU s | bpe-openai CPU s | tiktoken-rs CPU s | bpe-openai ÷ ctxbudget | tiktoken-rs ÷ ctxbudget |",
        texts.len(),
        bytes as f64 / MIB as f64
    );
    println!("|---|---|---|---|---|---|");
    for name in ["o200k_base", "cl100k_base"] {
        let (enc, second, third) = corpus::three(name, &texts);
        let t = time_min(
            3,
            &mut [
                &mut || texts.iter().map(|t| enc.count(t)).sum(),
                &mut || texts.iter().map(|t| second.count(t.as_str())).sum(),
                &mut || texts.iter().map(|t| third.encode_ordinary(t).len()).sum(),
            ],
        );
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | **{:.2}×** | **{:.2}×** |",
            t[0],
            t[1],
            t[2],
            t[1] / t[0],
            t[2] / t[0]
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument picks one table.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |t: &str| filter.is_empty() || filter.iter().any(|f| t.contains(f.as_str()));
    if wants("runs") {
        runs();
    }
    if wants("corpus") {
        real_text();
    }
}
