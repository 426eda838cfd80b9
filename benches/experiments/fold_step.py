"""One agent-loop step of reading the transcript, on a 16 MiB transcript: append one row,
then bring the reader up to date. Compares the core's window fold
(``_ctxbudget.WindowFold.advance()``: new rows only, parsed once in Rust, windows, claims,
open calls and retractions maintained in Rust) with reading the new rows through
``History.rows(since_seq=...)``. Run with the interpreter of the build to measure:

    python benches/experiments/fold_step.py [STEPS]

Prints the median per step of each. Timing only: it never fails.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

from ctxbudget import History, _ctxbudget


def row(i: int, size: int = 2000) -> dict[str, object]:
    text = f"row {i} " + "lorem ipsum " * (size // 12)
    return {"kind": "message", "role": "user", "parts": [{"type": "text", "text": text}]}


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as ws:
        h = History.open(ws, durability="none")
        batch = [row(i) for i in range(400)]
        h.append(batch)
        while (h.directory / "chat.jsonl").stat().st_size < 16 << 20:
            h.append(batch)
        # Builds before the fold existed measure History.rows(since_seq=...) only.
        fold = _ctxbudget.WindowFold(h._core) if hasattr(_ctxbudget, "WindowFold") else None
        last = h.append([row(0)]).last_seq
        if fold is not None:
            fold.advance()
        fold_times, rows_times = [], []
        for i in range(steps):
            if fold is not None:
                h.append([row(i)])
                t = time.perf_counter()
                fold.advance()
                fold_times.append(time.perf_counter() - t)
            h.append([row(i)])
            t = time.perf_counter()
            new = list(h.rows(since_seq=last + 1))
            rows_times.append(time.perf_counter() - t)
            last = new[-1].seq
            if fold is not None:
                fold.advance()
    print("| per step, 16 MiB transcript | p50 µs |")
    print("|---|---|")
    if fold_times:
        print(f"| WindowFold.advance() (1 new row) | {statistics.median(fold_times) * 1e6:.1f} |")
    print(f"| History.rows(since_seq=…) (1 new row) | {statistics.median(rows_times) * 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
