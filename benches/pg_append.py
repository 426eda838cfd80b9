"""Append latency on one local PostgreSQL server, side by side in one run:

- ctxbudget's PostgreSQL store through the Python package, the path an application
  takes: ``History.open("postgresql://…", conversation=…).append(rows)``;
- the OpenAI Agents SDK's ``SQLAlchemySession.add_items`` over asyncpg and over psycopg;
- ctxbudget's file store through the same Python ``History`` (``fsync`` durability, a
  workspace on the local disk), for reference;
- with ``--rust``, also the core's PostgreSQL and file stores called from Rust
  (``rust/ctxbudget/examples/pg_append.rs``; builds it with cargo first).

    python benches/pg_append.py [--rounds N] [--per-round K] [--rust]

Every side appends the same ~300-byte message to one conversation of its own, over TCP
with TLS (``sslmode=require``), as batches of 1 and of 20 items (one ``append`` /
``add_items`` call, one transaction each). The sides run in alternating rounds of K
calls, so machine noise hits all alike; the first round is a warm-up and not counted.
Prints p50 and p99 per side and the ratio ctxbudget ÷ SQLAlchemySession (below 1.0:
ctxbudget is faster). Timing only: it never fails on a figure.

Needs ``CTXBUDGET_PG_URL`` (see ``benches/pg_common.py``) and
``pip install -r benches/requirements-pg.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pg_common import (
    NO_BASELINE,
    NO_SERVER,
    TEXT,
    message,
    missing_baseline,
    p50,
    percentile,
    server_url,
    sqlalchemy_url,
)

REPO = Path(__file__).resolve().parents[1]
ITEM: dict[str, Any] = {"role": "user", "content": TEXT}
SIZES = (1, 20)
PG = "ctxbudget PostgreSQL (Python History)"
ASYNCPG = "SQLAlchemySession, asyncpg"
PSYCOPG = "SQLAlchemySession, psycopg"
FILE = "ctxbudget file store (Python History, fsync)"
RUST_PG = "ctxbudget PostgreSQL (Rust core)"
RUST_FILE = "ctxbudget file store (Rust core, fsync)"

Round = Callable[[int, int], Awaitable[list[float]]]


def _rust_driver(url: str) -> subprocess.Popen[str]:
    subprocess.run(
        [
            *("cargo", "build", "--quiet", "--profile", "quick", "-p", "ctxbudget"),
            *("--features", "postgres", "--example", "pg_append"),
        ],
        cwd=REPO,
        check=True,
    )
    exe = REPO / "target" / "quick" / "examples" / "pg_append"
    env = dict(os.environ, CTXBUDGET_BENCH_TEXT=TEXT)
    proc = subprocess.Popen(
        [str(exe), url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("the Rust driver did not connect")
    return proc


def _rust_round(proc: subprocess.Popen[str], store: str) -> Round:
    async def run(rows: int, count: int) -> list[float]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{store} {rows} {count}\n")
        proc.stdin.flush()
        return [int(w) / 1e6 for w in proc.stdout.readline().split()]

    return run


def _history_round(history: Any) -> Round:
    async def run(rows: int, count: int) -> list[float]:
        times = []
        for _ in range(count):
            batch = [message("user", TEXT) for _ in range(rows)]
            start = time.perf_counter()
            history.append(batch)
            times.append(time.perf_counter() - start)
        return times

    return run


def _sdk_round(session: Any) -> Round:
    async def run(rows: int, count: int) -> list[float]:
        times = []
        for _ in range(count):
            items = [dict(ITEM) for _ in range(rows)]
            start = time.perf_counter()
            await session.add_items(items)
            times.append(time.perf_counter() - start)
        return times

    return run


async def _measure(url: str, rounds: int, per_round: int, rust: bool) -> dict[str, Any]:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    from ctxbudget import History

    tag = f"{os.getpid()}-{time.time_ns()}"
    sdk = {
        name: SQLAlchemySession.from_url(
            f"bench-{tag}", url=sqlalchemy_url(url, driver), create_tables=True
        )
        for name, driver in ((ASYNCPG, "asyncpg"), (PSYCOPG, "psycopg"))
    }
    sides: dict[str, Round] = {}
    sides[PG] = _history_round(History.open(url, conversation=f"bench-append-{tag}"))
    for name, session in sdk.items():
        await session.add_items([dict(ITEM)])  # creates the tables and the session row
        sides[name] = _sdk_round(session)
    workspace = tempfile.TemporaryDirectory(prefix="ctxb-pg-append-")
    sides[FILE] = _history_round(History.open(workspace.name, durability="fsync"))
    proc = _rust_driver(url) if rust else None
    if proc is not None:
        sides[RUST_PG] = _rust_round(proc, "pg")
        sides[RUST_FILE] = _rust_round(proc, "file")
    times: dict[str, dict[int, list[float]]] = {s: {n: [] for n in SIZES} for s in sides}
    try:
        for r in range(rounds + 1):
            for n in SIZES:
                for side, run in sides.items():
                    got = await run(n, per_round)
                    if r > 0:
                        times[side][n] += got
    finally:
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
            proc.wait()
        for session in sdk.values():
            await session.clear_session()
            await session._engine.dispose()
        workspace.cleanup()
    return {"rounds": rounds, "per_round": per_round, "times": times}


def measure(url: str, rounds: int, per_round: int, rust: bool = False) -> dict[str, Any]:
    """Every side, alternating rounds; ``{"times": {side: {rows: [seconds]}}}``."""
    return asyncio.run(_measure(url, rounds, per_round, rust))


def table(result: dict[str, Any]) -> str:
    times: dict[str, dict[int, list[float]]] = result["times"]
    lines = [
        f"append latency, ms ({result['rounds']} rounds × {result['per_round']} calls "
        "per side and size, alternating)",
        "",
        "| items per call | store | p50 | p99 | p50 ÷ SQLAlchemySession asyncpg | "
        "p50 ÷ SQLAlchemySession psycopg | p99 ÷ asyncpg | p99 ÷ psycopg |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in SIZES:
        base = {b: (p50(times[b][n]), percentile(times[b][n], 0.99)) for b in (ASYNCPG, PSYCOPG)}
        for side, by_size in times.items():
            t50, t99 = p50(by_size[n]), percentile(by_size[n], 0.99)
            ratios = [f"{t50 / base[b][0]:.2f}×" for b in (ASYNCPG, PSYCOPG)]
            ratios += [f"{t99 / base[b][1]:.2f}×" for b in (ASYNCPG, PSYCOPG)]
            if side == PG:
                ratios[:2] = [f"**{r}**" for r in ratios[:2]]
            lines.append(
                f"| {n} | {side} | {t50 * 1e3:.3f} | {t99 * 1e3:.3f} | " + " | ".join(ratios) + " |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--rust", action="store_true", help="also the Rust core's stores")
    args = parser.parse_args()
    url = server_url()
    if url is None:
        print(NO_SERVER)
        return 0
    if missing := missing_baseline():
        print(f"missing {', '.join(missing)}: {NO_BASELINE}")
        return 0
    print(table(measure(url, args.rounds, args.per_round, args.rust)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
