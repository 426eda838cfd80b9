//! Cold start, measured as whole processes: a fresh process loads an encoding and
//! counts one short text, for ctxbudget, bpe-openai and tiktoken-rs side by side.
//! Prints the median wall time of 5 fresh processes each and the peak resident set
//! (`VmHWM`) the child reports.
//!
//! `cargo bench -p ctxbudget --bench cold_load`
use std::process::Command;
use std::time::Instant;

const CHILD: &str = "--cold-load-child";
const TEXT: &str = "Hello, world! The agent read the file and counted its tokens.";

fn child(implementation: &str, name: &str) {
    let start = Instant::now();
    let n = match implementation {
        "ctxbudget" => match ctxbudget::Encoding::new(name) {
            Ok(enc) => enc.count(TEXT),
            Err(e) => panic!("{e}"),
        },
        "bpe-openai" => match name {
            "o200k_base" => bpe_openai::o200k_base().count(TEXT),
            _ => bpe_openai::cl100k_base().count(TEXT),
        },
        _ => {
            let bpe = match name {
                "o200k_base" => tiktoken_rs::o200k_base(),
                _ => tiktoken_rs::cl100k_base(),
            };
            match bpe {
                Ok(bpe) => bpe.encode_ordinary(TEXT).len(),
                Err(e) => panic!("{e}"),
            }
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map_or("?".to_owned(), |v| v.trim().to_owned());
    println!("{n} {seconds} {hwm}");
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
    println!("| encoding | implementation | process wall, load + first count (median of 5) | in-process load + count | peak RSS |");
    println!("|---|---|---|---|---|");
    for name in ["o200k_base", "cl100k_base"] {
        for implementation in ["ctxbudget", "bpe-openai", "tiktoken-rs"] {
            let mut walls = Vec::new();
            let mut inner = Vec::new();
            let mut hwm = String::new();
            for _ in 0..5 {
                let start = Instant::now();
                let out = Command::new(&exe)
                    .args([CHILD, implementation, name])
                    .output();
                let wall = start.elapsed().as_secs_f64();
                let Ok(out) = out else {
                    panic!("could not run a child process");
                };
                let line = String::from_utf8_lossy(&out.stdout).into_owned();
                let fields: Vec<&str> = line.split_whitespace().collect();
                walls.push(wall);
                inner.push(
                    fields
                        .get(1)
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(f64::NAN),
                );
                hwm = fields.get(2..).map(|f| f.join(" ")).unwrap_or_default();
            }
            walls.sort_by(f64::total_cmp);
            inner.sort_by(f64::total_cmp);
            println!(
                "| {name} | {implementation} | {:.3} s | {:.3} s | {hwm} |",
                walls[2], inner[2]
            );
        }
    }
}
