"""Transcript-store append latency, side by side in one run with the two alternatives a
user would otherwise pick: (a) the reference design's whole-file rewrite through a
temporary file and rename, (b) SQLite in WAL mode, one transaction per batch
(`synchronous=FULL` for fsync, `OFF` for none), as the OpenAI Agents SDK's SQLiteSession
would store items; plus the floor: a bare `write` + `fdatasync` of the same lines,
encoded beforehand, to a file of the same size — what the filesystem alone charges any
append-only log. Rows are about 2 KiB; every implementation gets the same JSON rows.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from registry import Benchmark, Result, markdown, ratio

from ctxbudget import History

from conftest import SHORT

MIB = 1 << 20
SIZES = [1, 16] if SHORT else [1, 16, 128]
BATCHES = [1, 20]
DURABILITY = ["fsync", "none"]
IMPLS = ["ctxbudget", "rewrite", "sqlite", "bare"]

_TEXT = (
    "The agent read src/handlers/export.py, found that retries resend invoices, and "
    "proposed an idempotency key per invoice plus a persisted cursor. "
) * 14


def _row(i: int) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": "assistant" if i % 2 else "user",
        "parts": [{"type": "text", "text": f"[{i}] {_TEXT}"[:2000]}],
        "meta": {"n": i},
    }


def _rows_for(mib: int) -> int:
    return mib * MIB // 2_200


@pytest.fixture(scope="session")
def masters() -> Iterator[dict[tuple[str, int], Path]]:
    """One prefilled store per (implementation, size), copied for each benchmark."""
    root = Path(tempfile.mkdtemp(prefix="ctxb-bench-"))
    made: dict[tuple[str, int], Path] = {}
    for mib in SIZES:
        n = _rows_for(mib)
        ws = root / f"ctxbudget-{mib}"
        h = History.open(ws, durability="none")
        for start in range(0, n, 200):
            h.append([_row(i) for i in range(start, min(n, start + 200))])
        made[("ctxbudget", mib)] = ws
        flat = root / f"rewrite-{mib}.jsonl"
        with flat.open("w") as f:
            for i in range(n):
                f.write(json.dumps(_row(i)) + "\n")
        made[("rewrite", mib)] = flat
        db = root / f"sqlite-{mib}.db"
        con = sqlite3.connect(db)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE items (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        with con:
            con.executemany(
                "INSERT INTO items (body) VALUES (?)", ((json.dumps(_row(i)),) for i in range(n))
            )
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        made[("sqlite", mib)] = db
    yield made
    shutil.rmtree(root, ignore_errors=True)


def _rewrite_appender(path: Path, durable: bool) -> Callable[[list[dict[str, Any]]], None]:
    """The reference writer: whole file through a temporary file and rename."""
    directory = os.open(path.parent, os.O_RDONLY)

    def append(rows: list[dict[str, Any]]) -> None:
        data = path.read_bytes() + b"".join(json.dumps(r).encode() + b"\n" for r in rows)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if durable:
            os.fsync(directory)

    return append


def _bare_appender(path: Path, durable: bool) -> Callable[[bytes], None]:
    """The floor under any append-only log on this file: one write of lines encoded
    beforehand (outside the timing) and one fdatasync — no serialization, validation,
    lock, framing, checksum or receipt."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def append(lines: bytes) -> None:
        os.write(fd, lines)
        if durable:
            os.fdatasync(fd)

    return append


def _sqlite_appender(path: Path, durable: bool) -> Callable[[list[dict[str, Any]]], None]:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")

    def append(rows: list[dict[str, Any]]) -> None:
        con.execute("BEGIN")
        con.executemany("INSERT INTO items (body) VALUES (?)", ((json.dumps(r),) for r in rows))
        con.execute("COMMIT")

    return append


def _percentile(data: list[float], q: float) -> float:
    ordered = sorted(data)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rounds(impl: str, mib: int, batch: int) -> int:
    if impl == "rewrite":
        return {1: 30, 16: 10, 128: 4}[mib] if not SHORT else {1: 10, 16: 4}[mib]
    return (60 if batch == 20 else 200) if not SHORT else 30


def _appender(
    impl: str, masters: dict[tuple[str, int], Path], mib: int, durability: str, into: Path
) -> Callable[[Any], Any]:
    """A fresh copy of the prefilled store of `impl`, synced, and its append function."""
    durable = durability == "fsync"
    # The bare appender writes to a copy of the same flat transcript the rewrite uses.
    master = masters[("rewrite" if impl == "bare" else impl, mib)]
    target = into / f"{impl}-{master.name}"
    if master.is_dir():
        shutil.copytree(master, target)
    else:
        shutil.copy(master, target)
    # Flush the copy now, so its writeback does not land inside the measured appends.
    os.sync()
    if impl == "ctxbudget":
        return History.open(target, durability=durability).append
    if impl == "rewrite":
        return _rewrite_appender(target, durable)
    if impl == "bare":
        return _bare_appender(target, durable)
    return _sqlite_appender(target, durable)


def _batch(impl: str, start: int, batch: int) -> Any:
    rows = [_row(start + i) for i in range(batch)]
    if impl == "bare":
        return b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    return rows


WARM_ROWS = 2_000


def _measure_appends(  # type: ignore[no-untyped-def]
    benchmark,
    append: Callable[[Any], Any],
    *,
    impl: str,
    mib: int,
    batch: int,
    durability: str,
    first_batch: int = 0,
    warm: bool = False,
) -> None:
    """Times `append` on fresh batches and records p50/p99 for the table."""
    counter = iter(range(first_batch, 10**9))

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        return (_batch(impl, next(counter) * batch, batch),), {}

    benchmark.pedantic(append, setup=setup, rounds=_rounds(impl, mib, batch), warmup_rounds=1)
    data = benchmark.stats.stats.data
    benchmark.extra_info.update(
        impl=impl,
        warm=warm,
        mib=mib,
        batch=batch,
        durability=durability,
        p50=_percentile(data, 0.50),
        p99=_percentile(data, 0.99),
    )


@pytest.mark.parametrize("durability", DURABILITY)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("mib", SIZES)
@pytest.mark.parametrize("impl", IMPLS)
def test_append_latency(  # type: ignore[no-untyped-def]
    benchmark, masters, tmp_path: Path, impl: str, mib: int, batch: int, durability: str
) -> None:
    append = _appender(impl, masters, mib, durability, tmp_path)
    _measure_appends(benchmark, append, impl=impl, mib=mib, batch=batch, durability=durability)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("mib", SIZES)
@pytest.mark.parametrize("impl", ["ctxbudget", "sqlite", "bare"])
def test_append_latency_warm(  # type: ignore[no-untyped-def]
    benchmark, masters, tmp_path: Path, impl: str, mib: int, batch: int
) -> None:
    """The same appends with fsync after 2,000 rows were appended first. SQLite's WAL
    has then checkpointed and restarted, so its commits overwrite WAL space that already
    exists — the steady state of a long-running agent — while an append-only file keeps
    growing, and every growth is a metadata change the filesystem journals on fsync."""
    append = _appender(impl, masters, mib, "fsync", tmp_path)
    for start in range(0, WARM_ROWS, batch):
        append(_batch(impl, start, batch))
    os.sync()
    _measure_appends(
        benchmark,
        append,
        impl=impl,
        mib=mib,
        batch=batch,
        durability="fsync",
        first_batch=WARM_ROWS // batch,
        warm=True,
    )


def table(results: list[Result]) -> str:
    cells: dict[tuple[bool, int, int, str], dict[str, dict[str, Any]]] = {}
    for r in results:
        info = r.info
        key = (info["warm"], info["mib"], info["batch"], info["durability"])
        cells.setdefault(key, {})[info["impl"]] = info

    def ms(info: dict[str, Any] | None) -> str:
        return f"{info['p50'] * 1e3:.3f} / {info['p99'] * 1e3:.3f}" if info else "-"

    rows = []
    for (warm, mib, batch, durability), impls in sorted(cells.items()):
        ours, rewrite, sqlite, bare = (impls.get(i) for i in IMPLS)
        after = f", after {WARM_ROWS:,} rows" if warm else ""
        rows.append(
            [
                f"{mib} MiB{after}",
                str(batch),
                durability,
                ms(ours),
                ms(rewrite),
                ms(sqlite),
                ms(bare),
                ratio(rewrite["p50"] / ours["p50"]) if ours and rewrite else "-",
                ratio(ours["p50"] / sqlite["p50"]) if ours and sqlite else "-",
                f"{(ours['p50'] - bare['p50']) * 1e6:.0f} µs" if ours and bare else "-",
            ]
        )
    return markdown(
        [
            "transcript",
            "rows per append",
            "durability",
            "ctxbudget p50 / p99 ms",
            "whole-file rewrite p50 / p99 ms",
            "SQLite WAL p50 / p99 ms",
            "bare write p50 / p99 ms",
            "rewrite ÷ ctxbudget",
            "ctxbudget ÷ SQLite",
            "ctxbudget − bare write (p50)",
        ],
        rows,
    )


BENCHMARK = Benchmark(
    topic="store",
    title="Append latency beside a whole-file rewrite, SQLite and a bare write",
    about=(
        "Rows of about 2 KiB appended from Python to fresh copies of a prefilled 1, 16 and "
        "128 MiB transcript (1 and 16 MiB in short mode), side by side with the reference "
        "design's whole-file rewrite (temporary file and rename), SQLite in WAL mode storing "
        "the rows as JSON text as the Agents SDK's `SQLiteSession` does (one transaction per "
        "append, `synchronous=FULL` or `OFF`), and the floor: a bare `write` (+ `fdatasync`) "
        "of the same lines, encoded beforehand. The rows *after 2,000 rows* append with "
        "fsync once 2,000 rows went in first: SQLite's WAL has then checkpointed and "
        "overwrites its own pages (a long-running agent's steady state), while an "
        "append-only file keeps growing and the filesystem journals each growth."
    ),
    table=table,
)
