"""Window use at the usable limit (tests/test_window_use.py's agents), as a table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from registry import Benchmark, own_table


def test_window_use_at_the_limit(benchmark: Any, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import test_window_use

    def rows() -> list[dict[str, Any]]:
        agents = ("chat", "coding", "20 tools")
        return [test_window_use.report(a, tmp_path / a.replace(" ", "-")) for a in agents]

    got = benchmark.pedantic(rows, rounds=1, iterations=1)

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v * 100:.1f}%"

    lines = [
        "| agent | steps to the forced rollover | window unused when it forced the rollover "
        "| last sent request below the limit (one step) | warning at | handoff at | final at |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {r['agent']} | {r['steps']} | {r['unused'] * 100:.2f}% "
            f"| {r['last_sent_below'] * 100:.2f}% | {pct(r['warning'])} "
            f"| {pct(r['handoff'])} | {pct(r['final'])} |"
            for r in got
        ),
    ]
    benchmark.extra_info.update(
        measure="window use at the limit, gpt-4o (the cookbook's count as the provider's)",
        impl="ctxbudget",
        group="counts",
        table="\n".join(lines),
    )
    print("\n" + "\n".join(lines))


BENCHMARK = Benchmark(
    topic="counting",
    title="Window use at the limit",
    about=(
        "A chat agent, a coding agent and a 20-tool agent on gpt-4o (threshold 0.7) driven "
        "by scripted replies to their forced rollover, measured by the cookbook's formula "
        "as the provider's count: how much of the window is left unused at the usable "
        "limit (by that count, the request that forced the rollover; the last request sent "
        "is one agent step below it), and where each advisory arrived. Counts, not times."
    ),
    table=own_table,
)
