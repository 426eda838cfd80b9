"""``session_history`` over 2 MiB of history in PostgreSQL beside the file store: the
same 500 rows of ~4 KiB (one call's full 2 MiB / 500-row scan budget) in a PostgreSQL
conversation and in a workspace on the local disk, the same calls on both, alternating
call by call. p50 per call and the ratio PostgreSQL ÷ file store.

    python benches/pg_search.py [--rounds N]

Calls: a search whose hits are all in the first rows (the page fills early), one whose
only hit is the last row, one with no hit, the second page of the first through its
cursor, ``list_items`` walked page by page (25 items) with cursors to the end, and
``list_windows``, which reads no row bodies (what a call costs besides them).
Timing only: it never fails on a figure (it does check that both stores answer alike).

Needs ``CTXBUDGET_PG_URL`` (see ``benches/pg_common.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pg_common import NO_SERVER, message, p50, server_url

ROWS = 500
TEXT_CHARS = 4_020  # 500 rows of ~4.2 KiB: just under the 2 MiB a call may scan
FILLER = (
    "The agent inspected the deployment logs, compared two configs, and noted why "
    "the retry policy re-sent invoices after a 503 from the upstream API. "
) * 28
EARLY = "kestrel-early-marker"  # in the first 30 rows
LATE = "osprey-late-marker"  # in the last row only
NONE = "zebra-quartz-nomatch"
PAGE = 25

Call = dict[str, Any]


def _text(i: int) -> str:
    marks = (f" {EARLY}" if i < 30 else "") + (f" {LATE}" if i == ROWS - 1 else "")
    return f"[{i}]{marks} {FILLER}"[:TEXT_CHARS]


def _rows() -> list[dict[str, Any]]:
    return [message("user" if i % 2 else "assistant", _text(i)) for i in range(ROWS)]


def _fill(history: Any) -> None:
    rows = _rows()
    for start in range(0, ROWS, 100):
        history.append(rows[start : start + 100])


def _walk(tool: Any, args: Call) -> list[float]:
    """Every page of ``args`` through the cursors; the time of each call."""
    times = []
    cursor = None
    while True:
        call = dict(args, cursor=cursor) if cursor else args
        start = time.perf_counter()
        result = tool.call(call)
        times.append(time.perf_counter() - start)
        if not result["ok"]:
            raise SystemExit(f"session_history failed: {result}")
        if not result["has_more"]:
            return times
        cursor = result["cursor"]


def _second_page(tool: Any, args: Call) -> float:
    first = tool.call(args)
    assert first["ok"] and first["has_more"], first
    start = time.perf_counter()
    result = tool.call(dict(args, cursor=first["cursor"]))
    elapsed = time.perf_counter() - start
    assert result["ok"], result
    return elapsed


def _once(tool: Any, args: Call) -> float:
    start = time.perf_counter()
    result = tool.call(args)
    elapsed = time.perf_counter() - start
    assert result["ok"], result
    return elapsed


SEARCH_EARLY: Call = {"action": "search", "query": EARLY, "limit": 10}
CASES: dict[str, Callable[[Any], list[float]]] = {
    f"search, hits in the first 30 rows (page of 10 fills early): {EARLY!r}": lambda t: [
        _once(t, SEARCH_EARLY)
    ],
    "search, second page of the same through its cursor": lambda t: [_second_page(t, SEARCH_EARLY)],
    f"search, only hit in the last row: {LATE!r}": lambda t: [
        _once(t, {"action": "search", "query": LATE, "limit": 10})
    ],
    f"search, no hit: {NONE!r}": lambda t: [
        _once(t, {"action": "search", "query": NONE, "limit": 10})
    ],
    "list_windows (no row bodies read: the snapshot's round trips alone)": lambda t: [
        _once(t, {"action": "list_windows"})
    ],
    f"list_items, {PAGE} per page, all {ROWS // PAGE} pages through cursors (per call)": (
        lambda t: _walk(t, {"action": "list_items", "limit": PAGE, "max_chars_per_item": 200})
    ),
}


def _same_answers(pg: Any, file: Any) -> None:
    """Both stores hold the same rows: the searches find the same items."""
    for query in (EARLY, LATE, NONE):
        args = {"action": "search", "query": query, "limit": 10}
        a, b = pg.call(args), file.call(args)
        texts = [[i["text"] for i in r["items"]] for r in (a, b)]
        if texts[0] != texts[1] or a["has_more"] != b["has_more"]:
            raise SystemExit(f"the stores answer {query!r} differently:\n{json.dumps([a, b])}")
        if query != EARLY and (a["has_more"] or len(texts[0]) != (query == LATE)):
            raise SystemExit(f"{query!r} did not scan the whole history: {json.dumps(a)[:500]}")


def measure(url: str, rounds: int) -> dict[str, Any]:
    """``{"times": {case: {"pg": [s], "file": [s]}}, "bytes": …}``."""
    from ctxbudget import History, SessionHistoryTool

    pg = History.open(url, conversation=f"bench-search-{time.time_ns()}")
    _fill(pg)
    with tempfile.TemporaryDirectory(prefix="ctxb-pg-search-") as ws:
        file = History.open(ws, durability="none")
        _fill(file)
        directory = file.directory
        assert directory is not None
        nbytes = (directory / "chat.jsonl").stat().st_size
        tools = {"pg": SessionHistoryTool(pg), "file": SessionHistoryTool(file)}
        _same_answers(tools["pg"], tools["file"])
        times: dict[str, dict[str, list[float]]] = {c: {"pg": [], "file": []} for c in CASES}
        for r in range(rounds + 1):
            for case, run in CASES.items():
                for side, tool in tools.items():
                    got = run(tool)
                    if r > 0:
                        times[case][side] += got
    return {"rounds": rounds, "bytes": nbytes, "times": times}


def table(result: dict[str, Any]) -> str:
    lines = [
        f"session_history over {result['bytes'] / 2**20:.2f} MiB ({ROWS} rows) in each store, "
        f"{result['rounds']} alternating rounds",
        "",
        "| call | PostgreSQL p50 | file store p50 | PostgreSQL ÷ file |",
        "|---|---|---|---|",
    ]
    for case, sides in result["times"].items():
        pg, file = p50(sides["pg"]), p50(sides["file"])
        lines.append(f"| {case} | {pg * 1e3:.3f} ms | {file * 1e3:.3f} ms | **{pg / file:.1f}×** |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    url = server_url()
    if url is None:
        print(NO_SERVER)
        return 0
    print(table(measure(url, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
