"""session_history scanning, side by side with the obvious alternatives on the same
bytes: a naive Python scan (json.loads per line, lowercase find) and grep.

The no-match search runs on four pages of the same 500 rows: plain prose, and the same
prose carrying what tool output puts into transcripts and JSON escapes — ANSI colour
codes (`\u001b[31m`), NUL bytes (`\u0000`), and quotes and backslashes (`\"`, `\\`).
Escapes that cannot decode to a byte of the query must not slow the prefilter down."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import History, SessionHistoryTool

from conftest import SHORT

QUERY = "zebra-quartz-nomatch"
ROW_TEXT = (
    "The agent inspected the deployment logs, compared two configs, and noted why "
    "the retry policy re-sent invoices after a 503 from the upstream API. "
) * 26


PAGES = {
    "plain": lambda i, text: f"[{i}] {text}",
    # A test runner's coloured output: an escape every ~20 bytes.
    "ANSI colours": lambda i, text: "".join(
        f"\x1b[3{k % 8}m{word}\x1b[0m " for k, word in enumerate(f"[{i}] {text}".split(" "))
    ),
    # Binary-ish tool output with NULs between words.
    "escaped NULs": lambda i, text: f"[{i}] " + text.replace(" ", "\x00 "),
    # JSON-in-JSON: every word quoted, Windows paths with backslashes.
    'escaped " and \\': lambda i, text: (
        f"[{i}] " + " ".join(f'"C:\\users\\{w}"' for w in text.split(" "))
    ),
}


def _row_text(page: str, i: int) -> str:
    """The row's text, cut so that its JSON is the same ~4 KiB on every page."""
    text = PAGES[page](i, ROW_TEXT)
    ratio = len(json.dumps(text)) / len(text)
    return text[: int(len(ROW_TEXT) / ratio)]


def _history(ws: Path, page: str) -> tuple[History, Path]:
    """500 rows of ~4 KiB: one call's full 2 MiB / 500-row scan budget."""
    h = History.open(ws, durability="none")
    for start in range(0, 500, 100):
        h.append(
            [
                {
                    "kind": "message",
                    "role": "user" if i % 2 else "assistant",
                    "parts": [{"type": "text", "text": _row_text(page, i)}],
                }
                for i in range(start, start + 100)
            ]
        )
    return h, ws / "history" / "chat.jsonl"


@pytest.fixture(scope="module")
def budget_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[History, Path]:
    return _history(tmp_path_factory.mktemp("scan"), "plain")


@pytest.fixture(scope="module")
def escaped_histories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[History, Path]]:
    return {
        page: _history(tmp_path_factory.mktemp("scan-escaped"), page)
        for page in PAGES
        if page != "plain"
    }


def _naive_search(path: Path, query: str) -> int:
    q = query.lower()
    hits = 0
    with path.open("rb") as f:
        for line in f:
            row = json.loads(line)
            if "seq" not in row:
                continue
            text = "\n".join(p.get("text", "") for p in row.get("parts", []))
            if q in text.lower():
                hits += 1
    return hits


def _tag(benchmark: Any, impl: str, nbytes: int, page: str = "plain") -> None:
    benchmark.extra_info.update(
        measure=f"no-match search, full 2 MiB / 500-row budget, {page} rows",
        impl=impl,
        bytes=nbytes,
        group="scan",
    )


@pytest.mark.parametrize("impl", ["ctxbudget", "naive python", "grep -c -i -F"])
def test_no_match_search(benchmark: Any, budget_history: tuple[History, Path], impl: str) -> None:
    h, path = budget_history
    nbytes = path.stat().st_size
    _tag(benchmark, impl, nbytes)
    if impl == "ctxbudget":
        tool = SessionHistoryTool(h)
        result = benchmark(tool.call, {"action": "search", "query": QUERY, "limit": 25})
        assert result["ok"] and result["items"] == []
    elif impl == "naive python":
        assert benchmark(_naive_search, path, QUERY) == 0
    else:
        grep = shutil.which("grep")
        assert grep

        def run() -> None:
            subprocess.run([grep, "-c", "-i", "-F", QUERY, str(path)], capture_output=True)

        benchmark(run)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def test_list_windows_500_rows(benchmark: Any, tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    for w in range(25):
        rows = [
            {"kind": "message", "role": "user", "parts": [{"type": "text", "text": f"w{w} m{i}"}]}
            for i in range(19)
        ]
        h.append(rows)
        h.rollover(rollover_id=f"r{w}", reason="usable_limit", lead_in="lead-in")
    tool = SessionHistoryTool(h)
    benchmark.pedantic(
        tool.call, args=({"action": "list_windows", "limit": 50},), rounds=50 if SHORT else 300
    )
    p50, p99 = _percentiles(benchmark.stats.stats.data)
    benchmark.extra_info.update(
        measure="list_windows over a 500-row budget",
        impl="ctxbudget",
        group="latency",
        p50=p50,
        p99=p99,
        bytes=0,
    )


def test_read_item_1_mib_row_page_by_page(benchmark: Any, tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    text = ("0123456789abcdef" * 65_000)[:1_000_000]
    h.append([{"kind": "message", "role": "tool", "parts": [{"type": "text", "text": text}]}])
    tool = SessionHistoryTool(h)
    samples: list[float] = []

    def read_all() -> None:
        offset = 0
        while True:
            start = time.perf_counter()
            r = tool.call(
                {
                    "action": "read_item",
                    "item_id": "1",
                    "offset_chars": offset,
                    "limit_chars": 16_000,
                }
            )
            samples.append(time.perf_counter() - start)
            item = r["items"][0]
            if "next_char" not in item:
                break
            offset = item["next_char"]

    benchmark.pedantic(read_all, rounds=1 if SHORT else 3)
    p50, p99 = _percentiles(samples)
    benchmark.extra_info.update(
        measure=f"read_item of a 1 MiB row, {len(samples) // (1 if SHORT else 3)} pages",
        impl="ctxbudget",
        group="latency",
        p50=p50,
        p99=p99,
        bytes=1_000_000,
    )


@pytest.mark.parametrize("page", [p for p in PAGES if p != "plain"])
@pytest.mark.parametrize("impl", ["ctxbudget", "naive python"])
def test_no_match_search_escaped_rows(
    benchmark: Any, escaped_histories: dict[str, tuple[History, Path]], page: str, impl: str
) -> None:
    """Rows full of escapes; run.py lists them as `ctxbudget, <page>` beside the
    plain-page rows, so the ratio column compares each with plain ctxbudget."""
    h, path = escaped_histories[page]
    nbytes = path.stat().st_size
    _tag(benchmark, f"{impl}, {page}", nbytes, page)
    if impl == "ctxbudget":
        tool = SessionHistoryTool(h)
        result = benchmark(tool.call, {"action": "search", "query": QUERY, "limit": 25})
        assert result["ok"] and result["items"] == []
    else:
        assert benchmark(_naive_search, path, QUERY) == 0
