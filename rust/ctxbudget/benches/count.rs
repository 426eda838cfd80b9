//! Criterion benchmarks of the core counting path (single thread, cache off).
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use ctxbudget::Encoding;

fn corpus() -> String {
    let mut text = String::new();
    for i in 0..2_000 {
        text.push_str(&format!(
            "Line {i}: The agent read `src/main.rs`, found {} TODOs, and wrote a 漢字 note 🙂.\n",
            i % 17
        ));
        text.push_str(
            "    fn handle(&mut self, req: Request) -> Result<Response, Error> { todo!() }\n",
        );
    }
    text
}

fn bench_count(c: &mut Criterion) {
    let text = corpus();
    let mut group = c.benchmark_group("count");
    group.throughput(Throughput::Bytes(text.len() as u64));
    for name in ["o200k_base", "cl100k_base"] {
        let Ok(enc) = Encoding::new(name) else {
            panic!("encoding {name} failed to load");
        };
        let enc = enc.with_cache_capacity(0);
        group.bench_with_input(BenchmarkId::new("ctxbudget", name), &text, |b, t| {
            b.iter(|| enc.count(t))
        });
        let oracle = match name {
            "o200k_base" => tiktoken_rs::o200k_base(),
            _ => tiktoken_rs::cl100k_base(),
        };
        let Ok(oracle) = oracle else {
            panic!("tiktoken-rs {name} failed to load");
        };
        group.bench_with_input(BenchmarkId::new("tiktoken-rs", name), &text, |b, t| {
            b.iter(|| oracle.encode_ordinary(t).len())
        });
    }
    group.finish();
}

fn bench_pathological(c: &mut Criterion) {
    let Ok(enc) = Encoding::new("o200k_base") else {
        panic!("o200k_base failed to load");
    };
    let enc = enc.with_cache_capacity(0);
    let mut group = c.benchmark_group("pathological");
    group.sample_size(10);
    for mib in [1usize, 4] {
        let text = " ".repeat(mib << 20);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::new("spaces", mib), &text, |b, t| {
            b.iter(|| enc.count(t))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_count, bench_pathological);
criterion_main!(benches);
