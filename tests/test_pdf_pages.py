"""PDF documents count by each provider's documented rule, their pages read from the
bytes without a PDF library; bad input is a typed error, and a request still counts."""

from __future__ import annotations

import base64

import pytest

from ctxbudget import MediaError, count_messages
from ctxbudget.media import PDF_MAX_PAGES, pdf_page_count, pdf_tokens


def _pdf(pages: int) -> bytes:
    kids = " ".join(f"{n + 3} 0 R" for n in range(pages))
    objects = [
        "1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj",
        f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {pages} >> endobj",
        *(f"{n + 3} 0 obj << /Type /Page /Parent 2 0 R >> endobj" for n in range(pages)),
    ]
    return ("%PDF-1.7\n" + "\n".join(objects) + "\ntrailer << /Root 1 0 R >>\n%%EOF\n").encode()


def test_pages_are_read_from_bytes_base64_and_data_urls() -> None:
    doc = _pdf(3)
    b64 = base64.b64encode(doc).decode()
    assert pdf_page_count(doc) == pdf_page_count(bytearray(doc)) == 3
    assert pdf_page_count(b64) == pdf_page_count(f"data:application/pdf;base64,{b64}") == 3
    compressed = b"%PDF-1.5\n1 0 obj << /Type /Pages /Count 42 >> endobj\n%%EOF"
    assert pdf_page_count(compressed) == 42


@pytest.mark.parametrize(
    "data",
    [b"", b"GIF89a", b"%PDF-1.5\n1 0 obj << /Type /ObjStm /N 9 >> endobj", "***not base64"],
)
def test_unreadable_documents_are_a_typed_error(data: bytes | str) -> None:
    with pytest.raises(MediaError):
        pdf_page_count(data)
    with pytest.raises(TypeError):
        pdf_page_count(3)  # type: ignore[arg-type]


def test_each_providers_rule() -> None:
    assert pdf_tokens(1, profile="openai_chat") == 3_000 + 1_445
    assert pdf_tokens(1, profile="anthropic_messages") == 3_000 + 1_600
    assert pdf_tokens(1, profile="gemini") == 258
    assert pdf_tokens(500, profile="gemini") == 258 * PDF_MAX_PAGES
    with pytest.raises(ValueError):
        pdf_tokens(-1)
    with pytest.raises(ValueError):
        pdf_tokens(1, profile="bard")


def test_a_request_counts_its_documents_pages_by_the_providers_rule() -> None:
    b64 = base64.b64encode(_pdf(4)).decode()
    ask = {"type": "text", "text": "Summarise."}
    openai_file = {"type": "file", "file": {"filename": "a.pdf", "file_data": b64}}
    claude_doc = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64},
    }
    bare = count_messages([{"role": "user", "content": [ask]}], model="gpt-4o")
    openai = count_messages([{"role": "user", "content": [ask, openai_file]}], model="gpt-4o")
    assert openai - bare == pdf_tokens(4, profile="openai_chat")
    claude = [{"role": "user", "content": [ask, claude_doc]}]
    claude_bare = count_messages([{"role": "user", "content": [ask]}], model="claude-sonnet-4-5")
    assert count_messages(claude, model="claude-sonnet-4-5") - claude_bare == pdf_tokens(
        4, profile="anthropic_messages"
    )
    gemini = [{"role": "user", "content": [ask, openai_file]}]
    gemini_bare = count_messages([{"role": "user", "content": [ask]}], model="gemini-2.5-pro")
    assert count_messages(gemini, model="gemini-2.5-pro") - gemini_bare == 4 * 258
    # A PDF whose pages cannot be read counts as one page, never fails the count.
    packed = base64.b64encode(b"%PDF-1.5\n1 0 obj << /Type /ObjStm >> endobj").decode()
    unread = {"type": "file", "file": {"filename": "b.pdf", "file_data": packed}}
    counted = count_messages([{"role": "user", "content": [ask, unread]}], model="gpt-4o")
    assert counted - bare == pdf_tokens(1)
