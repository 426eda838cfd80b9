//! Criterion benchmarks of counting, single thread, cache off, side by side in one run
//! with GitHub's `bpe-openai` and `tiktoken-rs` on the same inputs.
//!
//! - `corpus/*`: the Python standard library's `.py` sources (found at run time through
//!   `python3`'s `sysconfig`, or the directory in `CTXBUDGET_CORPUS`), counted file by
//!   file, as an agent backend counts messages.
//! - `runs/*`: 1 and 16 MiB of one repeated unit (space, `a`, newline, `中`, `😀`,
//!   digits, base64 text), o200k; tiktoken-rs is left out, its merge is quadratic on
//!   these.
//!
//! `CTXBUDGET_BENCH_RUNS_ONLY=1` / `CTXBUDGET_BENCH_CORPUS_ONLY=1` run one group.
use ctxbudget_compare as corpus;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use corpus::ours;

const MIB: usize = 1 << 20;

fn bench_corpus(c: &mut Criterion) {
    if std::env::var_os("CTXBUDGET_BENCH_RUNS_ONLY").is_some() {
        return;
    }
    let texts = corpus::files();
    if texts.is_empty() {
        return;
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    eprintln!(
        "corpus: {} files, {:.1} MiB",
        texts.len(),
        bytes as f64 / MIB as f64
    );
    let mut group = c.benchmark_group("corpus");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));
    for name in ["o200k_base", "cl100k_base"] {
        let (enc, second, oracle) = corpus::three(name, &texts);
        group.bench_function(BenchmarkId::new("ctxbudget", name), |b| {
            b.iter(|| texts.iter().map(|t| enc.count(t)).sum::<usize>())
        });
        group.bench_function(BenchmarkId::new("bpe-openai", name), |b| {
            b.iter(|| {
                texts
                    .iter()
                    .map(|t| second.count(t.as_str()))
                    .sum::<usize>()
            })
        });
        group.bench_function(BenchmarkId::new("tiktoken-rs", name), |b| {
            b.iter(|| {
                texts
                    .iter()
                    .map(|t| oracle.encode_ordinary(t).len())
                    .sum::<usize>()
            })
        });
    }
    group.finish();
}

/// The repeated units of the `runs` group.
const UNITS: [(&str, &str); 7] = [
    ("space", " "),
    ("a", "a"),
    ("newline", "\n"),
    ("cjk", "中"),
    ("emoji", "😀"),
    ("digits", "0123456789"),
    (
        "base64",
        "TWFuIGlzIGRpc3Rpbmd1aXNoZWQsIG5vdCBvbmx5IGJ5IGhpcyByZWFzb24sIGJ1dCBieSB0aGlz+/Zx",
    ),
];

fn bench_runs(c: &mut Criterion) {
    if std::env::var_os("CTXBUDGET_BENCH_CORPUS_ONLY").is_some() {
        return;
    }
    let enc = ours("o200k_base");
    let second = bpe_openai::o200k_base();
    let mut group = c.benchmark_group("runs");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for (label, unit) in UNITS {
        for mib in [1usize, 16] {
            let text = unit.repeat(mib * MIB / unit.len());
            let detail = enc.count_detail(&text);
            assert!(detail.exact);
            assert_eq!(detail.tokens, second.count(text.as_str()), "{label} {mib}");
            group.throughput(Throughput::Bytes(text.len() as u64));
            let id = format!("{label}/{mib}MiB");
            group.bench_with_input(BenchmarkId::new("ctxbudget", &id), &text, |b, t| {
                b.iter(|| enc.count(t))
            });
            group.bench_with_input(BenchmarkId::new("bpe-openai", &id), &text, |b, t| {
                b.iter(|| second.count(t.as_str()))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_corpus, bench_runs);
criterion_main!(benches);
