"""Images in a request, counted by the providers' documented rules (SPEC §1, Request
counting); the rules and the header reader live in the core (``tokens::media``).

- **OpenAI** (tiles): ``low`` detail costs 85; ``high`` — and ``auto``, counted as its
  upper bound — fits the image into 2048×2048, shrinks it until its shortest side is at
  most 768, and costs 85 + 170 per 512-pixel tile.
- **Anthropic** (area): an image whose long edge exceeds 1,568 pixels, or that would cost
  more than 1,600 tokens, is first shrunk; it then costs ``width × height / 750``,
  rounded up.

The size comes from the image's header (PNG, JPEG, GIF, WebP), read without decoding
the image — from its bytes or straight from a base64 ``data:`` URL. An image known only
by URL, or whose header cannot be read, counts as the most its rule charges (OpenAI:
1,445 at high or auto detail; Anthropic: 1,600).

::

    ctxbudget.image_tokens((1024, 1024), provider="openai", detail="high")   # 765
    ctxbudget.image_tokens("https://example.com/a.png", provider="anthropic")  # 1600
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from . import _ctxbudget
from .errors import MediaError

__all__ = [
    "Detail",
    "ImageFormat",
    "ImageProvider",
    "ImageSize",
    "image_rule_for",
    "image_size",
    "image_tokens",
    "part_image_tokens",
]

ImageProvider = Literal["openai", "anthropic"]
"""Whose rule counts an image."""
Detail = Literal["low", "high", "auto"]
"""OpenAI's ``detail`` of an image part."""
ImageFormat = Literal["png", "jpeg", "gif", "webp"]
"""The formats whose header :func:`image_size` reads."""

_DETAILS = ("low", "high", "auto")


@dataclass(frozen=True, slots=True)
class ImageSize:
    """An image's format and pixel size, as its header states them."""

    format: ImageFormat
    width: int
    height: int


def image_size(data: bytes | bytearray | str) -> ImageSize:
    """The format and size of an image given as its bytes (at least its header) or as a
    base64 ``data:`` URL. Raises :class:`~ctxbudget.MediaError` when they cannot be
    read (not PNG, JPEG, GIF or WebP; damaged or cut short; not a base64 data URL)."""
    got = _ctxbudget.image_size(data)
    if isinstance(got, str):
        raise MediaError(got)
    fmt, width, height = got
    return ImageSize(cast(ImageFormat, fmt), width, height)


def image_tokens(
    image: bytes | bytearray | str | tuple[int, int] | ImageSize | None,
    *,
    provider: ImageProvider = "openai",
    detail: Detail = "auto",
) -> int:
    """Tokens of one image by ``provider``'s rule. ``image`` is its bytes, a ``data:``
    URL, any other URL or ``None`` (counted at the rule's maximum), a ``(width,
    height)`` pair or an :class:`ImageSize`. ``detail`` is OpenAI's (Anthropic has
    none). An image whose header cannot be read counts at the maximum."""
    if provider not in ("openai", "anthropic"):
        raise ValueError(f'provider must be "openai" or "anthropic", got {provider!r}')
    if detail not in _DETAILS:
        raise ValueError(f'detail must be "low", "high" or "auto", got {detail!r}')
    return _ctxbudget.image_tokens(_dims(image), provider=provider, detail=detail)


def _dims(image: object) -> tuple[int, int] | None:
    if image is None:
        return None
    if isinstance(image, ImageSize):
        return (image.width, image.height)
    if isinstance(image, tuple):
        if len(image) != 2 or not all(
            isinstance(side, int) and not isinstance(side, bool) and side >= 1 for side in image
        ):
            raise ValueError(f"an image size is (width, height), two positive ints; got {image!r}")
        return (min(image[0], 2**32 - 1), min(image[1], 2**32 - 1))
    if isinstance(image, str) and image[:5].lower() != "data:":
        return None  # known only by URL
    if not isinstance(image, (str, bytes, bytearray)):
        raise TypeError(
            "image_tokens() takes bytes, a URL, a (width, height) pair, an ImageSize or "
            f"None, got {type(image).__name__}"
        )
    got = _ctxbudget.image_size(image)
    return None if isinstance(got, str) else (got[1], got[2])


def image_rule_for(model: str) -> ImageProvider:
    """Whose image rule a model's requests follow: Anthropic's for Claude models (also
    behind a provider prefix, e.g. ``anthropic/claude-…`` or Bedrock's
    ``anthropic.claude-…``), else OpenAI's."""
    return "anthropic" if "claude" in model.lower() else "openai"


def part_image_tokens(part: Mapping[str, Any], provider: ImageProvider) -> int | None:
    """Tokens of a content part that is an image in any provider's shape — OpenAI Chat
    ``image_url``, Responses ``input_image``, Anthropic ``image``, ctxbudget's ``media``
    with an ``image/…`` type — else ``None``. Anthropic-shaped parts count by
    Anthropic's rule, the others by ``provider``'s."""
    kind = part.get("type")
    if kind == "image_url":
        ref = part.get("image_url")
        if isinstance(ref, Mapping):
            return _counted(ref.get("url"), ref.get("detail"), provider)
        return _counted(ref, None, provider)
    if kind == "input_image":
        return _counted(part.get("image_url"), part.get("detail"), provider)
    if kind == "image":
        source = part.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64":
            data = source.get("data")
            url = f"data:;base64,{data}" if isinstance(data, str) else None
            return _counted(url, None, "anthropic")
        if isinstance(source, Mapping):
            return _counted(None, None, "anthropic")
        # A ctxbudget-neutral image part ({"type": "image", "url"/"data": ...}).
        return _counted(_reference(part), part.get("detail"), provider)
    if kind == "media" and _is_image_type(part.get("media_type")):
        size = (part.get("width"), part.get("height"))
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size):
            return image_tokens(
                cast(tuple[int, int], size), provider=provider, detail=_detail(part.get("detail"))
            )
        return _counted(_reference(part), part.get("detail"), provider)
    return None


def _reference(part: Mapping[str, Any]) -> str | None:
    """A media part's image as a URL: its ``url``, or its base64 ``data``."""
    url = part.get("url")
    if isinstance(url, str):
        return url
    # ``data`` (ctxbudget's, LangChain's older blocks) or ``base64`` (LangChain's newer).
    data = part.get("data", part.get("base64"))
    if isinstance(data, str):
        return data if data[:5].lower() == "data:" else f"data:;base64,{data}"
    return None


def _is_image_type(media_type: object) -> bool:
    return isinstance(media_type, str) and (
        media_type == "image" or media_type.startswith("image/")
    )


def _detail(value: object) -> Detail:
    return cast(Detail, value) if value in _DETAILS else "auto"


def _counted(url: object, detail: object, provider: ImageProvider) -> int:
    return image_tokens(
        url if isinstance(url, str) else None, provider=provider, detail=_detail(detail)
    )
