"""Opening the largest transcript of the append benchmark with a torn batch at its tail:
the open checks every line and moves the torn bytes to ``recovered/``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from registry import Benchmark, Result, markdown
from test_bench_history import SIZES, _row, _rows_for

from ctxbudget import History

TORN = b'{"batch":{"epoch":1,"first":999999,"last":999999}}\n{"seq":999999,"ki'


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    ws = tmp_path_factory.mktemp("open") / "master"
    h = History.open(ws, durability="none")
    n = _rows_for(max(SIZES))
    for start in range(0, n, 200):
        h.append([_row(i) for i in range(start, min(n, start + 200))])
    yield ws
    shutil.rmtree(ws, ignore_errors=True)


def test_open_and_recover_torn_tail(benchmark: Any, master: Path, tmp_path: Path) -> None:
    target = tmp_path / "ws"

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(master, target)
        with (target / "history" / "chat.jsonl").open("ab") as f:
            f.write(TORN)
        return (), {}

    def open_and_recover() -> None:
        History.open(target, durability="fsync")

    benchmark.pedantic(open_and_recover, setup=setup, rounds=3)
    assert any((target / "history" / "recovered").iterdir())
    benchmark.extra_info["mib"] = max(SIZES)


def table(results: list[Result]) -> str:
    return markdown(
        ["open + recover", "median", "max"],
        [
            [
                f"{r.info['mib']} MiB transcript with a torn tail",
                f"{r.median:.3f} s",
                f"{r.stats['max']:.3f} s",
            ]
            for r in results
        ],
    )


BENCHMARK = Benchmark(
    topic="store",
    title="Open and recover a torn tail",
    about=(
        "A copy of a prefilled 128 MiB transcript (16 MiB in short mode) of ~2 KiB rows "
        "with half a batch written at its end, opened with `History.open`: every line is "
        "parsed the way every reader parses it, in one pass with the index, and the torn "
        "bytes are moved aside. Three rounds; absolute figures, nothing runs beside them."
    ),
    table=table,
)
