"""The one redaction every message, hint and ``repr`` that may name a connection goes
through: passwords and other secrets are replaced by ``***`` wherever they stand in a
text — a URL's userinfo (``postgresql://user:***@host``), a URL query parameter
(``?password=***``, ``&sslpassword=***``) or a libpq ``key=value`` pair
(``password='***'``).

It works on whole messages, not only on a URL given alone, so that a URL quoted inside
an error is covered too, and errs on the side of hiding: a value whose end is ambiguous
is hidden up to the next space. The Rust core's ``redact_secrets`` follows the same
rules; both are checked against the cases in ``rust/ctxbudget/src/pg/config/testdata/
redact.json``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["MASK", "redact"]

MASK = "***"
"""What replaces a secret."""

_SECRET_WORDS = ("pass", "pwd", "secret", "token", "credential")

# scheme://user:PASSWORD@ — the password runs from the userinfo's first ':' to the last
# '@' before the next space, so one with an unescaped '@' or '/' is hidden whole,
# whichever '@' a parser would split at.
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*:)(\S*)@")

# KEY=VALUE, spaces around '=' allowed (libpq); the value is decided by _value_len.
_PAIR = re.compile(r"([A-Za-z0-9_%-]+)[ \t]*=[ \t]*")
_NEXT_PARAMETER = re.compile(r"&[A-Za-z0-9_%-]+=")


def _is_secret_key(key: str) -> bool:
    """``password``, ``sslpassword``, ``passfile``, ``*token*``, ``*secret*``,
    ``cursor_key``…: compared lowercased after percent-decoding (``%70assword``)."""
    key = unquote(key, errors="replace").lower()
    return any(word in key for word in _SECRET_WORDS) or key.endswith("key")


def _value_len(text: str) -> int:
    """Length of the value at the start of ``text``: a quoted one to its closing quote
    (``\\'`` escapes one; unterminated: the rest), else up to a space or the next
    ``&name=`` query parameter."""
    if text.startswith("'"):
        escaped = False
        for at, c in enumerate(text[1:], 1):
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == "'":
                return at + 1
        return len(text)
    end = 0
    for at, c in enumerate(text):
        if c.isspace() or (c == "&" and _NEXT_PARAMETER.match(text, at)):
            break
        end = at + 1
    return end


def _mask_pairs(text: str) -> str:
    out: list[str] = []
    i = 0
    for m in _PAIR.finditer(text):
        if m.start() < i:
            continue  # inside a value already masked
        # Keys are whole words: the run of key characters must start where the match does.
        key = m.group(1)
        out.append(text[i : m.end()])
        i = m.end()
        if not _is_secret_key(key):
            continue
        if text.startswith(MASK, i):  # masked already: redacting twice changes nothing
            out.append(MASK)
            i += len(MASK)
            continue
        out.append(f"'{MASK}'" if text.startswith("'", i) else MASK)
        i += _value_len(text[i:])
    out.append(text[i:])
    return "".join(out)


def redact(text: str) -> str:
    """``text`` with every password and secret-bearing parameter replaced by ``***``."""
    return _mask_pairs(_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text))
