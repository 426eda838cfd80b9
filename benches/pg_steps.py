"""Agent steps per second for many concurrent conversations driven from several
processes against one PostgreSQL server, beside the file store with one workspace per
conversation on the local disk (the same load, the same processes and threads).

    python benches/pg_steps.py [--conversations 200] [--processes 4] [--steps 20]
                               [--store pg|pg-socket|file|both] [--api store|session]

A step is what one agent step costs the transcript store. With ``--api store`` (the
default): bring the window fold up to date (``WindowFold.advance()``: the conversation's
new rows), append a user and an assistant message as one batch conditional on the last
seq the fold saw (``if_last_seq``), and every ``SEARCH_EVERY``-th step one
``session_history`` search. With ``--api session``: the same turn through
``ctxbudget.Session`` — ``add_user``, ``prepare()`` (the request, counted against the
budget), ``add_assistant``, and every ``SEARCH_EVERY``-th step
``run_tool("session_history", …)``.
Each process drives its share of the conversations, one thread per conversation (the
binding releases the GIL around store I/O); every process opens its conversations first,
then all start together.
Every conversation starts with ``PREFILL`` rows (~1 KiB each). Prints steps/s (all steps
÷ wall time from the common start to the last step), step latency p50 / p99, and the
p50 of each part of a step.
Timing only: it never fails on a figure (a conflict or an error is counted and shown).

Both sides are durable when a step's append returns: the file store ``fdatasync``s every
append (``durability="fsync"``), PostgreSQL commits every append with the server's
defaults (``fsync`` and ``synchronous_commit`` on: the commit waits for its WAL flush,
which concurrent commits share). The server is reached as a host reaches it: ``pg``
over TCP with TLS (``CTXBUDGET_PG_URL``), ``pg-socket`` (``both`` includes it when
``CTXBUDGET_PG_SOCKET_URL`` is set) through its local socket, as a host on the same
machine would; the file store is a local disk either way. See ``benches/pg_common.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pg_common import NO_SERVER, message, p50, percentile, server_url, socket_url

PG = ("pg", "pg-socket")
PREFILL = 40
SEARCH_EVERY = 5
PHASES = ("read", "append", "search")
USER = "Run the test suite again and tell me which of the flaky tests failed this time. " * 4
ASSISTANT = (
    "I ran the suite: 412 passed, 3 failed (test_retry_backoff, test_invoice_resend, "
    "test_upstream_503). All three touch the retry policy; the 503 handler re-sends. "
) * 6


def _prefill_rows(i: int) -> list[dict[str, Any]]:
    return [
        message("user" if k % 2 else "assistant", f"topic-{(i + k) % 7} " + ASSISTANT[:900])
        for k in range(PREFILL)
    ]


def _url(store: str) -> str:
    url = socket_url() if store == "pg-socket" else server_url()
    assert url is not None
    return url


def _open(store: str, target: str) -> Any:
    from ctxbudget import History

    if store in PG:
        return History.open(_url(store), conversation=target)
    return History.open(target, durability="fsync")


def _targets(store: str, n: int, root: Path) -> list[str]:
    if store in PG:
        return [f"bench-steps-{os.getpid()}-{time.time_ns()}-{i}" for i in range(n)]
    return [str(root / f"ws-{i}") for i in range(n)]


def _prefill(store: str, targets: list[str]) -> None:
    for i, target in enumerate(targets):
        _open(store, target).append(_prefill_rows(i))


# ----- one worker process ------------------------------------------------------------


def _drive(
    store: str,
    target: str,
    steps: int,
    ready: threading.Barrier,
    go: threading.Event,
    out: dict[str, Any],
) -> None:
    from ctxbudget import ConflictError, SessionHistoryTool
    from ctxbudget.window import WindowFold

    try:
        history = _open(store, target)
        fold = WindowFold(history)
        tool = SessionHistoryTool(history)
        fold.advance()
    except Exception as e:  # reported by the parent
        out["failed"] = f"{target}: {e}"
        ready.wait()
        return
    latencies: list[float] = []
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    conflicts = errors = 0
    ready.wait()
    go.wait()
    for k in range(steps):
        begin = time.perf_counter()
        try:
            fold.advance()
            read = time.perf_counter()
            history.append(
                [message("user", USER), message("assistant", ASSISTANT)],
                if_last_seq=fold.last_seq,
            )
            wrote = time.perf_counter()
            phases["read"].append(read - begin)
            phases["append"].append(wrote - read)
            if k % SEARCH_EVERY == SEARCH_EVERY - 1:
                result = tool.call({"action": "search", "query": f"topic-{k % 7}", "limit": 5})
                phases["search"].append(time.perf_counter() - wrote)
                if not result["ok"]:
                    errors += 1
        except ConflictError:
            conflicts += 1
        except Exception:  # counted and shown; the load goes on
            errors += 1
        latencies.append(time.perf_counter() - begin)
    out.update(
        latencies=latencies, phases=phases, conflicts=conflicts, errors=errors, end=time.time()
    )


def _drive_session(
    store: str,
    target: str,
    steps: int,
    ready: threading.Barrier,
    go: threading.Event,
    out: dict[str, Any],
) -> None:
    from ctxbudget import Session

    try:
        if store in PG:
            session = Session.open(_url(store), conversation=target)
        else:
            session = Session.open(target, durability="fsync")
        session.prepare()
    except Exception as e:  # reported by the parent
        out["failed"] = f"{target}: {e}"
        ready.wait()
        return
    latencies: list[float] = []
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    errors = 0
    ready.wait()
    go.wait()
    for k in range(steps):
        begin = time.perf_counter()
        try:
            session.add_user(USER)
            added = time.perf_counter()
            session.prepare()
            read = time.perf_counter()
            session.add_assistant(ASSISTANT)
            wrote = time.perf_counter()
            phases["read"].append(read - added)
            phases["append"].append((added - begin) + (wrote - read))
            if k % SEARCH_EVERY == SEARCH_EVERY - 1:
                args = {"action": "search", "query": f"topic-{k % 7}", "limit": 5}
                result = session.run_tool("session_history", args)
                phases["search"].append(time.perf_counter() - wrote)
                if not result.get("ok"):
                    errors += 1
        except Exception:  # counted and shown; the load goes on
            errors += 1
        latencies.append(time.perf_counter() - begin)
    out.update(latencies=latencies, phases=phases, conflicts=0, errors=errors, end=time.time())


def _worker(store: str, steps: int, api: str = "store") -> None:
    """Reads its conversations (one a line, then an empty line), opens them, prints
    ``ready``, waits for ``go``, runs, prints its figures as JSON."""
    targets = []
    while line := sys.stdin.readline().strip():
        targets.append(line)
    results: list[dict[str, Any]] = [{} for _ in targets]
    # One History first, so that the process's connection pool exists before the threads
    # open theirs (as a backend connects at start-up).
    _open(store, targets[0])
    ready = threading.Barrier(len(targets) + 1)
    go = threading.Event()
    drive = _drive_session if api == "session" else _drive
    threads = [
        threading.Thread(target=drive, args=(store, t, steps, ready, go, r))
        for t, r in zip(targets, results, strict=True)
    ]
    for t in threads:
        t.start()
    ready.wait()
    print("ready", flush=True)
    sys.stdin.readline()
    go.set()
    for t in threads:
        t.join()
    json.dump(
        {
            "latencies": [x for r in results for x in r.get("latencies", [])],
            "phases": {
                p: [x for r in results for x in r.get("phases", {}).get(p, [])] for p in PHASES
            },
            "conflicts": sum(r.get("conflicts", 0) for r in results),
            "errors": sum(r.get("errors", 0) for r in results),
            "failed": [r["failed"] for r in results if "failed" in r],
            "end": max((r["end"] for r in results if "end" in r), default=time.time()),
        },
        sys.stdout,
    )


# ----- the parent --------------------------------------------------------------------


def run(
    store: str, conversations: int, processes: int, steps: int, api: str = "store"
) -> dict[str, Any]:
    """One store's load: ``{"steps_per_s", "p50", "p99", …}``."""
    root = Path(tempfile.mkdtemp(prefix="ctxb-pg-steps-"))
    try:
        targets = _targets(store, conversations, root)
        _prefill(store, targets)
        shares = [targets[k::processes] for k in range(processes)]
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", store, str(steps), api],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).parent,
            )
            for _ in shares
        ]
        for p, share in zip(procs, shares, strict=True):
            assert p.stdin is not None
            p.stdin.write("\n".join(share) + "\n\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise SystemExit(f"a {store} worker did not start")
        start_at = time.time()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.close()
        outs = [p.stdout.read() if p.stdout else "" for p in procs]
        for p in procs:
            p.wait()
        if any(p.returncode for p in procs):
            raise SystemExit(f"a {store} worker failed")
        results = [json.loads(o) for o in outs]
        if failed := [f for r in results for f in r["failed"]]:
            raise SystemExit(f"{len(failed)} {store} conversations did not open: {failed[0]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    latencies = [x for r in results for x in r["latencies"]]
    wall = max(r["end"] for r in results) - start_at
    return {
        "api": api,
        "store": store,
        "conversations": conversations,
        "processes": processes,
        "steps": len(latencies),
        "steps_per_s": len(latencies) / wall,
        "p50": p50(latencies),
        "p99": percentile(latencies, 0.99),
        "phases": {
            p: p50(xs) if (xs := [x for r in results for x in r["phases"][p]]) else None
            for p in PHASES
        },
        "conflicts": sum(r["conflicts"] for r in results),
        "errors": sum(r["errors"] for r in results),
    }


LABELS = {
    "pg": "PostgreSQL (one local server, TCP + TLS)",
    "pg-socket": "PostgreSQL (the same server, local socket)",
    "file": "file store (one workspace each, local disk, fsync)",
}


API_LABELS = {
    "store": "History + WindowFold + SessionHistoryTool",
    "session": "Session (add_user, prepare, add_assistant)",
}


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| API | store | conversations × steps, processes | steps/s | step p50 | step p99 | "
        "p50 of: read new rows / append / search | conflicts / errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {API_LABELS[r['api']]} | {LABELS[r['store']]} | {r['conversations']} × "
            f"{r['steps'] // r['conversations']}, {r['processes']} | "
            f"**{r['steps_per_s']:,.0f}** | {r['p50'] * 1e3:.2f} ms | {r['p99'] * 1e3:.2f} ms | "
            + " / ".join("-" if t is None else f"{t * 1e3:.2f}" for t in r["phases"].values())
            + f" ms | {r['conflicts']} / {r['errors']} |"
        )
    return "\n".join(lines)


def measure(
    stores: tuple[str, ...],
    conversations: int,
    processes: int,
    steps: int,
    apis: tuple[str, ...] = ("store",),
) -> list[dict[str, Any]]:
    return [run(s, conversations, processes, steps, a) for a in apis for s in stores]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20, help="steps per conversation")
    parser.add_argument("--store", choices=(*PG, "file", "both"), default="both")
    parser.add_argument("--api", choices=("store", "session", "both"), default="store")
    args = parser.parse_args()
    stores: tuple[str, ...] = (args.store,)
    if args.store == "both":
        stores = ("pg", "pg-socket", "file") if socket_url() else ("pg", "file")
    if "pg" in stores and server_url() is None:
        print(NO_SERVER)
        stores = tuple(s for s in stores if s not in PG)
    apis: tuple[str, ...] = ("store", "session") if args.api == "both" else (args.api,)
    print(table(measure(stores, args.conversations, args.processes, args.steps, apis)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
