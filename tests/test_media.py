"""Images by the providers' documented rules (SPEC §1, Request counting): sizes read from
headers (Pillow, which decodes the image, is the oracle), the token rules (checked
against the documented examples and an independent transcription of each rule), and
what a request counts for its images."""

from __future__ import annotations

import base64
import io
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import ctxbudget
from ctxbudget import Encoding, ImageSize, MediaError, count_messages, image_size, image_tokens

FORMATS = ["PNG", "JPEG", "GIF", "WEBP"]


def encode(width: int, height: int, fmt: str, **options: object) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 90)).save(buf, format=fmt, **options)
    return buf.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


# ----- the documented rules, transcribed independently ----------------------------------


def openai_reference(width: int, height: int, detail: str) -> int:
    """OpenAI's vision guide: low = 85; high: fit into 2048², then shortest side at most
    768 (only ever shrunk), 85 + 170 per 512-px tile."""
    if detail == "low":
        return 85
    w, h = width, height
    if max(w, h) > 2048:
        w, h = max(w * 2048 // max(width, height), 1), max(h * 2048 // max(width, height), 1)
    short = min(w, h)
    if short > 768:
        w, h = max(w * 768 // short, 1), max(h * 768 // short, 1)
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_bounds(width: int, height: int) -> tuple[int, int]:
    """Anthropic's vision guide: ceil(w × h / 750) after shrinking to a long edge of at
    most 1,568 and at most ~1,600 tokens: the shrink's rounding is ours, so the count
    lies between the area rule on the shrunk size and the cap."""
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1600 * 750 / (width * height)))
    area = max(width * scale, 1) * max(height * scale, 1)  # never below one pixel
    return max(1, math.floor(area / 750) - 5), min(1600, math.ceil(area / 750) + 1)


# ----- sizes from headers ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("size", [(1, 1), (640, 480), (1000, 4000), (4097, 33), (3, 2900)])
def test_header_sizes_equal_pillows(fmt: str, size: tuple[int, int]) -> None:
    data = encode(*size, fmt)
    got = image_size(data)
    assert (got.width, got.height) == Image.open(io.BytesIO(data)).size == size
    assert got.format == fmt.lower()
    assert image_size(data_url(data)) == got  # the same from a data URL


@pytest.mark.parametrize(
    "options",
    [
        {"progressive": True},
        {"exif": Image.Exif()},
        {"quality": 5, "optimize": True},
        {"icc_profile": b"\0" * 70_000},  # a long APPn chain before the frame
    ],
)
def test_jpeg_variants(options: dict[str, object]) -> None:
    data = encode(1234, 567, "JPEG", **options)
    assert image_size(data) == ImageSize("jpeg", 1234, 567)
    assert image_size(data_url(data, "image/jpeg")) == ImageSize("jpeg", 1234, 567)


def test_webp_lossless_and_lossy() -> None:
    for options in ({"lossless": True}, {"quality": 40}):
        data = encode(801, 333, "WEBP", **options)
        assert image_size(data) == ImageSize("webp", 801, 333)


def test_a_header_alone_is_enough() -> None:
    data = encode(2000, 1000, "PNG")
    assert image_size(data[:24]) == ImageSize("png", 2000, 1000)
    # In a data URL, the bytes after the header are never decoded: garbage there is fine.
    url = data_url(data[:24])
    assert image_size(url + "!!!!" * 1000).width == 2000


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"hello world",
        b"\x89PNG\r\n\x1a\n",  # cut before IHDR
        b"\xff\xd8\xff\xe0\x00",  # cut inside the first segment
        b"GIF89a\x01",
        b"RIFF\0\0\0\0WEBPVP8Z" + b"\0" * 30,
        "https://example.com/a.png",
        "data:image/png,notbase64",
        "data:image/png;base64,%%%%",
    ],
)
def test_unreadable_images_are_media_errors(bad: bytes | str) -> None:
    with pytest.raises(MediaError) as info:
        image_size(bad)
    assert isinstance(info.value, ctxbudget.CtxBudgetError)
    assert isinstance(info.value, ValueError)


def test_wrong_types_are_type_errors() -> None:
    with pytest.raises(TypeError):
        image_size(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        image_tokens(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        image_tokens((0, 10))
    with pytest.raises(ValueError):
        image_tokens((10, 10), detail="ultra")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        image_tokens((10, 10), provider="gemini")  # type: ignore[arg-type]


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_hostile_bytes_never_escape_as_anything_but_media_errors(data: bytes) -> None:
    for prefix in (b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF89a", b"RIFF\0\0\0\0WEBP"):
        blob = prefix + data
        try:
            got = image_size(blob)
        except MediaError:
            continue
        assert got.width >= 1 and got.height >= 1
        assert image_size(data_url(blob)) == got


# ----- the rules ---------------------------------------------------------------------------


def test_openai_documented_examples() -> None:
    assert image_tokens((1024, 1024), detail="high") == 765
    assert image_tokens((2048, 4096), detail="high") == 1105
    assert image_tokens((4096, 8192), detail="low") == 85
    assert image_tokens(None, detail="high") == image_tokens(None) == 85 + 8 * 170
    assert image_tokens("https://example.com/a.png", detail="low") == 85


def test_anthropic_documented_examples() -> None:
    # Anthropic's table of sizes that are not resized: about 1,600 tokens each.
    for size in [(1092, 1092), (951, 1268), (896, 1344), (819, 1456)]:
        assert 1_550 <= image_tokens(size, provider="anthropic") <= 1_600
    assert image_tokens((200, 200), provider="anthropic") == 54
    assert image_tokens(None, provider="anthropic") == 1_600


@settings(max_examples=2_000, deadline=None)
@given(
    st.integers(1, 20_000),
    st.integers(1, 20_000),
    st.sampled_from(["low", "high", "auto"]),
)
def test_openai_rule_equals_its_transcription(width: int, height: int, detail: str) -> None:
    assert image_tokens((width, height), detail=detail) == openai_reference(  # type: ignore[arg-type]
        width, height, detail
    )


@settings(max_examples=2_000, deadline=None)
@given(st.integers(1, 20_000), st.integers(1, 20_000))
def test_anthropic_rule_within_its_transcription(width: int, height: int) -> None:
    low, high = anthropic_bounds(width, height)
    assert low <= image_tokens((width, height), provider="anthropic") <= high


# ----- what a request counts ----------------------------------------------------------------


def test_requests_count_images_by_their_size_and_detail() -> None:
    enc = Encoding("o200k_base")
    tall = data_url(encode(1000, 4000, "PNG"))
    base = 3 + 3 + enc.count("user") + enc.count("look")

    def chat(image_part: dict[str, object]) -> list[dict[str, object]]:
        return [{"role": "user", "content": [{"type": "text", "text": "look"}, image_part]}]

    high = {"type": "image_url", "image_url": {"url": tall, "detail": "high"}}
    low = {"type": "image_url", "image_url": {"url": tall, "detail": "low"}}
    responses = {"type": "input_image", "image_url": tall, "detail": "high"}
    assert count_messages(chat(high), model="gpt-4o") == base + 85 + 4 * 170
    assert count_messages(chat(low), model="gpt-4o") == base + 85
    assert count_messages(chat(responses), model="gpt-4o") == base + 85 + 4 * 170
    # Anthropic's block shape counts by Anthropic's rule, whatever the encoding.
    raw = base64.b64encode(encode(400, 300, "PNG")).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": raw}}
    assert count_messages(chat(block), encoding="o200k_base") == base + 160
    # ctxbudget's own media part, for a Claude model: Anthropic's rule.
    claude = Encoding.for_model("claude-sonnet-4-5")
    media = {"type": "media", "media_type": "image/png", "data": raw}
    assert count_messages(chat(media), model="claude-sonnet-4-5") == (
        3 + 3 + claude.count("user") + claude.count("look") + 160
    )


def test_a_session_counts_a_users_image_by_its_size(tmp_path: object) -> None:
    import pathlib

    assert isinstance(tmp_path, pathlib.Path)
    raw = base64.b64encode(encode(1024, 1024, "JPEG")).decode()
    image = {"type": "media", "media_type": "image/jpeg", "data": raw, "detail": "high"}
    counted = []
    for parts in (
        [{"type": "text", "text": "what is this?"}],
        [{"type": "text", "text": "what is this?"}, image],
    ):
        s = ctxbudget.Session.open(tmp_path / str(len(parts)), model="gpt-4o")
        s.add_user(parts)
        counted.append(s.prepare().decision.projected)
    assert counted[1] - counted[0] == 765


def test_an_agents_sdk_image_counts_by_its_size_and_is_stored_once() -> None:
    from ctxbudget.integrations.agents.items import rows_for

    url = data_url(encode(1024, 1024, "PNG"))
    item = {
        "role": "user",
        "content": [{"type": "input_image", "image_url": url, "detail": "high"}],
    }
    (row,) = rows_for([item], {})
    (part,) = row["parts"]
    assert part == {
        "type": "media",
        "media_type": "image",
        "source": "input_image",
        "detail": "high",
        "width": 1024,
        "height": 1024,
    }
    message = {"role": "user", "content": "", "media": [part]}
    assert (
        count_messages([message], model="gpt-4o")
        - count_messages([{"role": "user", "content": ""}], model="gpt-4o")
        == 765
    )
