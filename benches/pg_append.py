"""Append latency on one local PostgreSQL server: ctxbudget's PostgreSQL store (Rust,
``ctxbudget::pg``) beside the OpenAI Agents SDK's ``SQLAlchemySession`` over asyncpg, and
ctxbudget's file store (Rust, ``fsync`` durability) on the local disk for reference.

    python benches/pg_append.py [--rounds N] [--per-round K]

Both append the same JSON message (about 300 bytes) to one conversation each, over TCP
with TLS (``sslmode=require`` / ``ssl=require``), as batches of 1 and of 20 items (one
``append`` / one ``add_items`` call, one transaction each). The two run in alternating
rounds of K calls in one run, so machine noise hits all alike; the first round of each is
a warm-up and not counted. Prints p50 and p99 per side and the ratio ctxbudget ÷ baseline
(below 1.0 = ctxbudget is faster). Timing only: it never fails on a figure.

Needs ``CTXBUDGET_PG_URL`` (``eval "$(scripts/pg-cluster start)"`` starts a throwaway
server and prints it) and ``pip install -r benches/requirements-pg.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEXT = (
    "Please summarise the quarterly report and list the three largest cost "
    "increases with their causes; keep it under two hundred words and cite the page "
    "numbers so that the finance team can check them."
)
ITEM: dict[str, Any] = {"role": "user", "content": TEXT}
SIZES = (1, 20)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rust_driver(url: str) -> subprocess.Popen[str]:
    subprocess.run(
        [
            "cargo",
            "build",
            "--quiet",
            "--profile",
            "quick",
            "-p",
            "ctxbudget",
            "--features",
            "postgres",
            "--example",
            "pg_append",
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


def rust_round(proc: subprocess.Popen[str], store: str, rows: int, count: int) -> list[float]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{store} {rows} {count}\n")
    proc.stdin.flush()
    return [int(w) / 1000.0 for w in proc.stdout.readline().split()]


def asyncpg_url(url: str) -> str:
    base, _, query = url.partition("?")
    params = [p for p in query.split("&") if p and not p.startswith("sslmode=")]
    if "sslmode=require" in query:
        params.append("ssl=require")
    base = base.replace("postgresql://", "postgresql+asyncpg://", 1)
    return base + ("?" + "&".join(params) if params else "")


async def sdk_round(session: Any, rows: int, count: int) -> list[float]:
    times = []
    for _ in range(count):
        items = [dict(ITEM) for _ in range(rows)]
        start = time.perf_counter()
        await session.add_items(items)
        times.append((time.perf_counter() - start) * 1000.0)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=100)
    args = parser.parse_args()
    url = os.environ.get("CTXBUDGET_PG_URL")
    if not url:
        raise SystemExit('CTXBUDGET_PG_URL is not set: eval "$(scripts/pg-cluster start)"')
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

    session = SQLAlchemySession.from_url(
        f"bench-{os.getpid()}", url=asyncpg_url(url), create_tables=True
    )
    await session.add_items([dict(ITEM)])  # creates the tables and the session row
    proc = rust_driver(url)
    ours: dict[int, list[float]] = {n: [] for n in SIZES}
    theirs: dict[int, list[float]] = {n: [] for n in SIZES}
    files: dict[int, list[float]] = {n: [] for n in SIZES}
    for r in range(args.rounds + 1):
        for n in SIZES:
            a = rust_round(proc, "pg", n, args.per_round)
            b = await sdk_round(session, n, args.per_round)
            c = rust_round(proc, "file", n, args.per_round)
            if r > 0:
                ours[n] += a
                theirs[n] += b
                files[n] += c
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait()
    await session.clear_session()
    print(f"append latency, ms ({args.rounds} rounds x {args.per_round} calls per side)")
    print(
        "| items per call | ctxbudget pg p50 | p99 | SQLAlchemySession p50 | p99 | "
        "pg / SQLAlchemySession p50 | p99 | file store p50 | p99 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in SIZES:
        o50, o99 = statistics.median(ours[n]), percentile(ours[n], 0.99)
        t50, t99 = statistics.median(theirs[n]), percentile(theirs[n], 0.99)
        f50, f99 = statistics.median(files[n]), percentile(files[n], 0.99)
        print(
            f"| {n} | {o50:.3f} | {o99:.3f} | {t50:.3f} | {t99:.3f} | "
            f"**{o50 / t50:.2f}×** | {o99 / t99:.2f}× | {f50:.3f} | {f99:.3f} |"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
