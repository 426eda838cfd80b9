//! Counts the benchmark corpus once, cache off, for instruction-count profiling
//! (`valgrind --tool=callgrind`): `count_profile [encoding or tokenizer file] [max_bytes]`.

use ctxbudget_compare as corpus;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "o200k_base".to_owned());
    let max: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let mut taken = 0;
    let files: Vec<String> = corpus::files()
        .into_iter()
        .take_while(|t| {
            taken += t.len();
            taken <= max
        })
        .collect();
    let enc = corpus::ours(&name);
    let tokens: usize = files.iter().map(|t| enc.count(t)).sum();
    let bytes: usize = files.iter().map(String::len).sum();
    println!(
        "{name}: {} files, {bytes} bytes, {tokens} tokens",
        files.len()
    );
}
