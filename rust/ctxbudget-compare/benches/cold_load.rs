//! Cold start, measured as whole processes: a fresh process loads a tokenizer and counts
//! one short text. The shipped encodings for ctxbudget, bpe-openai and tiktoken-rs side
//! by side; each `tokenizer.json` named on the command line for ctxbudget and fastokens.
//! Prints the median wall time of 5 fresh processes each, the CPU time of the child (all
//! its threads, from its start: what other load on the machine does not inflate), the
//! load and first count timed inside the child (medians), and the peak resident set
//! (`VmHWM`) the child reports.
//!
//! `cargo bench -p ctxbudget-compare --bench cold_load [-- NAME=PATH ...]`
use std::process::Command;
use std::time::Instant;

const CHILD: &str = "--cold-load-child";
const TEXT: &str = "Hello, world! The agent read the file and counted its tokens.";

/// Processes per row.
const RUNS: usize = 5;

/// Loads `name` (a shipped encoding, or a tokenizer file's path) with `implementation`
/// and counts [`TEXT`].
fn load_and_count(implementation: &str, name: &str) -> (usize, f64) {
    let start = Instant::now();
    let (n, loaded) = match implementation {
        "ctxbudget" => {
            let enc = if name.ends_with(".json") {
                ctxbudget::Encoding::from_file(name)
            } else {
                ctxbudget::Encoding::new(name)
            };
            match enc {
                Ok(enc) => {
                    let loaded = start.elapsed().as_secs_f64();
                    (enc.count(TEXT), loaded)
                }
                Err(e) => panic!("{e}"),
            }
        }
        "fastokens" => match fastokens::Tokenizer::from_file(std::path::Path::new(name)) {
            Ok(tok) => {
                let loaded = start.elapsed().as_secs_f64();
                match tok.encode(TEXT) {
                    Ok(ids) => (ids.len(), loaded),
                    Err(e) => panic!("{e}"),
                }
            }
            Err(e) => panic!("{e}"),
        },
        "bpe-openai" => {
            let bpe = match name {
                "o200k_base" => bpe_openai::o200k_base(),
                _ => bpe_openai::cl100k_base(),
            };
            let loaded = start.elapsed().as_secs_f64();
            (bpe.count(TEXT), loaded)
        }
        _ => {
            let bpe = match name {
                "o200k_base" => tiktoken_rs::o200k_base(),
                _ => tiktoken_rs::cl100k_base(),
            };
            match bpe {
                Ok(bpe) => {
                    let loaded = start.elapsed().as_secs_f64();
                    (bpe.encode_ordinary(TEXT).len(), loaded)
                }
                Err(e) => panic!("{e}"),
            }
        }
    };
    (n, loaded)
}

fn child(implementation: &str, name: &str) {
    let start = Instant::now();
    let (n, loaded) = load_and_count(implementation, name);
    let seconds = start.elapsed().as_secs_f64();
    let cpu = ctxbudget_compare::process_cpu_seconds();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map_or("?".to_owned(), |v| v.trim().to_owned());
    println!("{n} {seconds} {loaded} {cpu} {hwm}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One table row: `RUNS` fresh processes of `implementation` on `target`.
fn row(exe: &std::path::Path, label: &str, implementation: &str, target: &str) {
    let mut walls = Vec::new();
    let mut inner = Vec::new();
    let mut loads = Vec::new();
    let mut cpus = Vec::new();
    let mut hwm = String::new();
    let mut counts = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = Command::new(exe)
            .args([CHILD, implementation, target])
            .output();
        let wall = start.elapsed().as_secs_f64();
        let Ok(out) = out else {
            panic!("could not run a child process");
        };
        if !out.status.success() {
            panic!(
                "{implementation} on {label} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        let fields: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| {
            fields
                .get(i)
                .and_then(|s| s.parse().ok())
                .unwrap_or(f64::NAN)
        };
        counts.push(fields.first().map(|s| (*s).to_owned()).unwrap_or_default());
        walls.push(wall);
        inner.push(number(1));
        loads.push(number(2));
        cpus.push(number(3));
        hwm = fields.get(4..).map(|f| f.join(" ")).unwrap_or_default();
    }
    let inner = median(inner);
    let load = median(loads);
    println!(
        "| {label} | {implementation} | {:.3} s | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} ms | {hwm} |",
        median(walls),
        median(cpus) * 1e3,
        inner * 1e3,
        load * 1e3,
        (inner - load) * 1e3,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == CHILD) {
        child(&args[i + 1], &args[i + 2]);
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        panic!("cannot find the benchmark executable");
    };
    // `NAME=PATH` arguments: tokenizer.json files (cargo passes `--bench` too).
    let files: Vec<(&str, &str)> = args
        .iter()
        .skip(1)
        .filter_map(|a| a.split_once('='))
        .collect();
    println!("| tokenizer | implementation | process wall, load + first count (median of {RUNS}) | process CPU, all threads (median) | in-process load + first count | of which load | of which first count | peak RSS |");
    println!("|---|---|---|---|---|---|---|---|");
    for name in ["o200k_base", "cl100k_base"] {
        for implementation in ["ctxbudget", "bpe-openai", "tiktoken-rs"] {
            row(&exe, name, implementation, name);
        }
    }
    for (label, path) in files {
        for implementation in ["ctxbudget", "fastokens"] {
            row(&exe, label, implementation, path);
        }
    }
}
