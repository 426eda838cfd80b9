"""The budget policy's per-step cost: Budget.evaluate and Claims.from_rows."""

from __future__ import annotations

from typing import Any

from registry import Benchmark, latency_table, percentiles

from ctxbudget import Budget, Claims, Row


def _tag(benchmark: Any, call: str) -> None:
    p50, p99 = percentiles(benchmark.stats.stats.data)
    benchmark.extra_info.update(call=call, p50=p50, p99=p99)


def test_evaluate(benchmark: Any) -> None:
    b = Budget(128_000, 0.7)
    claims = Claims(warning=True)
    benchmark(b.evaluate, 95_000, claims, True)
    _tag(benchmark, "Budget.evaluate")


def _window(n: int) -> list[Row]:
    rows = []
    for i in range(n):
        kind = "advisory" if i in (200, 350) else "message"
        meta = {"stage": "warning" if i == 200 else "handoff"} if kind == "advisory" else {}
        rows.append(
            Row(
                i + 1,
                str(i + 1),
                kind,
                "user",
                "w:0",
                [{"type": "text", "text": f"m{i}"}],
                meta,
                None,
            )
        )
    return rows


def test_claims_from_rows_500(benchmark: Any) -> None:
    rows = _window(500)
    result = benchmark(Claims.from_rows, rows)
    assert result == Claims(warning=True, handoff=True)
    _tag(benchmark, "Claims.from_rows, 500-row window")


BENCHMARK = Benchmark(
    topic="session",
    title="Budget policy per step",
    about=(
        "Per-call latency of `Budget.evaluate` (128k window, a warning already claimed) and "
        "of `Claims.from_rows` over a 500-row window with two advisories. Absolute figures: "
        "nothing runs beside them."
    ),
    table=latency_table,
)
