"""What a benchmark registers, and the helpers its table is built with.

A benchmark is one module, ``benches/test_bench_<name>.py``: pytest-benchmark tests that
measure ctxbudget and what it is compared with side by side in one run, recording their
figures in ``benchmark.extra_info``, plus one registration at the end of the module::

    BENCHMARK = Benchmark(
        topic="counting",
        title="Count throughput beside tiktoken",
        about="What is compared, on what input (one or two sentences).",
        table=table,  # list[Result] -> Markdown: this module's results as one table
    )

``benches/run.py`` finds the modules, runs them, hands each its own results and writes
the tables (``--write``: benches/README.md). ``<name>`` is how to run just that one:
``python benches/run.py <name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Topic = Literal["counting", "store", "session_history", "session", "async", "postgresql"]

TOPICS: dict[Topic, str] = {
    "counting": "Counting tokens",
    "store": "Transcript store",
    "session_history": "session_history",
    "session": "Budget policy and Session",
    "async": "Event loops",
    "postgresql": "PostgreSQL store",
}
"""README headings, in README order; a benchmark names the one it belongs under."""


@dataclass(frozen=True)
class Result:
    """One pytest-benchmark test's outcome: its name, timing statistics (seconds) and
    what the test recorded in ``benchmark.extra_info``."""

    name: str
    stats: dict[str, float]
    info: dict[str, Any]

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> Result:
        return cls(entry["name"], entry["stats"], entry["extra_info"])

    @property
    def median(self) -> float:
        return self.stats["median"]


@dataclass(frozen=True)
class Benchmark:
    """A module's registration: where it goes in the README, what it compares, and how
    its results become its one table."""

    topic: Topic
    title: str
    about: str
    table: Callable[[list[Result]], str]


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """µs below a millisecond, ms below a second, s above."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds:.3f} s"


def ratio(value: float, bold: bool = True) -> str:
    text = f"{value:.2f}×" if value < 100 else f"{value:,.0f}×"
    return f"**{text}**" if bold else text


def percentiles(samples: Sequence[float]) -> tuple[float, float]:
    """(p50, p99) of per-call times, for ``extra_info`` and ``latency_table``."""
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def latency_table(results: list[Result]) -> str:
    """One row per test that recorded ``call``, ``p50`` and ``p99`` in ``extra_info``."""
    rows = [[r.info["call"], duration(r.info["p50"]), duration(r.info["p99"])] for r in results]
    return markdown(["call", "p50", "p99"], rows)


def own_table(results: list[Result]) -> str:
    """For benchmarks that build their table themselves (``extra_info["table"]``)."""
    return "\n\n".join(r.info["table"] for r in results if "table" in r.info)
