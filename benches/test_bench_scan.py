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
from pathlib import Path
from typing import Any

import pytest
from registry import Benchmark, Result, duration, markdown, ratio

from ctxbudget import History, SessionHistoryTool

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
    growth = len(json.dumps(text)) / len(text)
    return text[: int(len(ROW_TEXT) / growth)]


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
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[History, Path]]:
    return {page: _history(tmp_path_factory.mktemp("scan"), page) for page in PAGES}


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


IMPLS = ["ctxbudget", "naive python", "grep -c -i -F"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("page", list(PAGES))
def test_no_match_search(
    benchmark: Any, histories: dict[str, tuple[History, Path]], page: str, impl: str
) -> None:
    h, path = histories[page]
    benchmark.extra_info.update(page=page, impl=impl)
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


def table(results: list[Result]) -> str:
    cells: dict[str, dict[str, Result]] = {}
    for r in results:
        cells.setdefault(r.info["page"], {})[r.info["impl"]] = r
    plain = cells.get("plain", {}).get("ctxbudget")
    rows = []
    for page, impls in cells.items():
        ours = impls.get("ctxbudget")
        row = [page, *(duration(impls[i].median) if i in impls else "-" for i in IMPLS)]
        for other in IMPLS[1:]:
            theirs = impls.get(other)
            row.append(ratio(theirs.median / ours.median) if ours and theirs else "-")
        row.append(ratio(ours.median / plain.median) if ours and plain else "-")
        rows.append(row)
    return markdown(
        [
            "rows (500 of ~4 KiB)",
            *(f"{i} median" for i in IMPLS),
            *(f"{i} ÷ ctxbudget" for i in IMPLS[1:]),
            "ctxbudget ÷ ctxbudget on plain rows",
        ],
        rows,
    )


BENCHMARK = Benchmark(
    topic="session_history",
    title="No-match search beside a naive scan and grep",
    about=(
        "One call's whole scan budget (500 rows of ~4 KiB, 2 MiB) searched for a string "
        "that is not there, beside a naive Python scan (`json.loads` per line, lowercase "
        "`in`) and `grep -c -i -F` on the file (a subprocess: its start-up included). "
        "Besides plain prose, the rows carry what tool output puts into transcripts: "
        "ANSI colour codes, NUL bytes, quotes and backslashes, all as JSON escapes."
    ),
    table=table,
)
