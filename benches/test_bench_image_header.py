"""Reading an image's size from its header (PNG, JPEG, a base64 data URL) through
``ctxbudget.image_size``: what counting an image costs before its provider's rule."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

import pytest
from registry import Benchmark, latency_table, percentiles

import ctxbudget


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
    p50, p99 = percentiles(benchmark.stats.stats.data)
    benchmark.extra_info.update(call=f"image_size: {kind}", p50=p50, p99=p99)


BENCHMARK = Benchmark(
    topic="counting",
    title="Image header parse",
    about=(
        "Per-call latency of `ctxbudget.image_size` on a 1920×1080 image's header: PNG "
        "bytes, JPEG bytes, and a PNG data URL with 4 KiB of pixel data (decoded only as "
        "far as the header). Absolute figures: nothing runs beside them."
    ),
    table=latency_table,
)
