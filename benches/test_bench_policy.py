"""The budget policy's per-step cost: Budget.evaluate and Claims.from_rows."""

from __future__ import annotations

from typing import Any

from ctxbudget import Budget, Claims, Row


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _tag(benchmark: Any, measure: str) -> None:
    p50, p99 = _percentiles(benchmark.stats.stats.data)
    benchmark.extra_info.update(
        measure=measure, impl="ctxbudget", group="latency", p50=p50, p99=p99, bytes=0
    )


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
