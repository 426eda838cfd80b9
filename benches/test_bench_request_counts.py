"""The request-count comparison (benches/request_counts.py) and the cost of reading an
image's size from its header, for benches/run.py's tables."""

from __future__ import annotations

import base64
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

import ctxbudget

sys.path.insert(0, str(Path(__file__).resolve().parent))


def test_request_counts_side_by_side(benchmark: Any) -> None:
    pytest.importorskip("litellm")
    pytest.importorskip("langchain_openai")
    import request_counts

    text = benchmark.pedantic(request_counts.table, rounds=1, iterations=1)
    benchmark.extra_info.update(
        measure="request counts beside the cookbook, LiteLLM and LangChain",
        impl="ctxbudget",
        group="counts",
        table=text,
    )
    print("\n" + text)


def _png() -> bytes:
    ihdr = struct.pack(">IIBBBBB", 1920, 1080, 8, 2, 0, 0, 0)
    body = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + body + struct.pack(">I", zlib.crc32(body))


def _jpeg() -> bytes:
    # SOI, an APP0 segment of 16 bytes, then a baseline SOF0 with 1080 × 1920.
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 1080, 1920, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


HEADERS = {
    "PNG bytes": _png(),
    "JPEG bytes": _jpeg(),
    "PNG data URL": "data:image/png;base64," + base64.b64encode(_png() + bytes(4096)).decode(),
}


@pytest.mark.parametrize("kind", list(HEADERS))
def test_image_header_parse(benchmark: Any, kind: str) -> None:
    data = HEADERS[kind]
    size = benchmark(ctxbudget.image_size, data)
    assert (size.width, size.height) == (1920, 1080)
    samples = sorted(benchmark.stats.stats.data)
    benchmark.extra_info.update(
        measure=f"image header parse: {kind}",
        impl="ctxbudget",
        group="latency",
        p50=samples[len(samples) // 2],
        p99=samples[min(len(samples) - 1, len(samples) * 99 // 100)],
    )


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
        "| agent | steps to the forced rollover | window unused at the usable limit "
        "| warning at | handoff at | final at |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['agent']} | {r['steps']} | {r['unused'] * 100:.2f}% | {pct(r['warning'])} "
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
