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

from dataclasses import dataclass
from typing import Literal, cast

from . import _ctxbudget
from .errors import MediaError

__all__ = [
    "PDF_MAX_PAGES",
    "PDF_PAGE_TEXT_TOKENS",
    "Detail",
    "ImageFormat",
    "ImageProvider",
    "ImageSize",
    "image_size",
    "image_tokens",
    "pdf_page_count",
    "pdf_tokens",
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


def pdf_page_count(data: bytes | bytearray | str) -> int:
    """Pages of a PDF given as its bytes, or as base64 text or a base64 ``data:`` URL,
    read without a PDF library: its page objects (``/Type /Page``), else its page
    tree's ``/Count`` or a linearized file's ``/N``. Raises
    :class:`~ctxbudget.MediaError` when they cannot be read (not a PDF; pages only
    inside compressed object streams; bad base64)."""
    got = _ctxbudget.pdf_page_count(data)
    if isinstance(got, str):
        raise MediaError(got)
    return got


def pdf_tokens(pages: int, *, profile: str = "openai_chat") -> int:
    """Tokens of a PDF of ``pages`` pages (at most :data:`PDF_MAX_PAGES` count) by the
    rule of the request profile ``profile`` (see :mod:`ctxbudget.tokens`):

    - OpenAI puts "the extracted text and an image of each page" into the context:
      :data:`PDF_PAGE_TEXT_TOKENS` for the text plus the page image at its high-detail
      maximum (1,445), 4,445 a page;
    - Anthropic: "1,500-3,000 tokens per page" of text (the upper bound) plus the page
      as an image (at most 1,600), 4,600 a page;
    - Gemini: "each document page is equivalent to 258 tokens".
    """
    if type(pages) is not int or pages < 0:
        raise ValueError(f"pages must be a non-negative int, got {pages!r}")
    if profile not in _ctxbudget.PROFILES:
        known = ", ".join(_ctxbudget.PROFILES)
        raise ValueError(f"profile must be one of {known}; got {profile!r}")
    return _ctxbudget.pdf_tokens(pages, profile)


PDF_MAX_PAGES: int = _ctxbudget.PDF_MAX_PAGES
"""Pages of one document that count at most (Anthropic's limit per request)."""

PDF_PAGE_TEXT_TOKENS: int = _ctxbudget.PDF_PAGE_TEXT_TOKENS
"""Text tokens of one PDF page, upper bound (Anthropic documents 1,500-3,000)."""
