#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of the store's row/frame parser and the
# session_history cursor decoder, with the toolchain the project builds with: the
# SanitizerCoverage passes are stable codegen options, so no nightly (and no cargo-fuzz)
# is needed.
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 s, every target
#
# Inputs that found new coverage are written to fuzz/corpus/<target>.new/ (not checked
# in); copy the interesting ones into fuzz/corpus/<target>/. A crash leaves its input
# in fuzz/artifacts/<target>/ and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(scan cursor rules)
fi
host="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export CARGO_TARGET_DIR="$PWD/target"
cargo build --release --quiet --target "$host" --bins
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "corpus/$t.new" "artifacts/$t"
  echo "== fuzz $t for ${seconds}s (corpus: $(ls "corpus/$t" | wc -l) inputs) =="
  "target/$host/release/$t" "corpus/$t.new" "corpus/$t" \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="artifacts/$t/" -print_final_stats=1 2>&1 | tail -n 12
done
