"""Hypothesis strategies for text that exercises every split rule of the encodings."""

from __future__ import annotations

from hypothesis import strategies as st

# Characters where tiktoken's regexes decide something: whitespace of every kind, the
# apostrophe of contractions (and ſ, which case-folds to s), case changes, combining
# marks, digits of several scripts, the slash o200k keeps after newlines, CJK, emoji.
BOUNDARY_CHARS = (
    " \t\n\r\x0b\x0c\x00\u00a0\u0085\u2028\u3000'/\\\".,!?-_:;()[]{}<>@#$%^&*+=|`~"
    "abcdelmrstvABCDELMRSTVſKǅʰéÉßΩ0159٣½Ⅻ²"
    "\u0301\u0308\u094d中文のア한ก\u0e31הع😀👍\u200d\ufe0f\ufffd€→"
)

boundary_char = st.sampled_from(BOUNDARY_CHARS)
any_char = st.characters(codec="utf-8")  # every scalar value, no surrogates

tricky_text = st.lists(
    st.one_of(boundary_char, boundary_char, boundary_char, any_char), max_size=200
).map("".join)

# Runs: the same character repeated, as in the pathological inputs.
runs = st.lists(st.tuples(st.one_of(boundary_char, any_char), st.integers(1, 60)), max_size=12).map(
    lambda parts: "".join(c * n for c, n in parts)
)

text = st.one_of(tricky_text, runs, st.text(max_size=300))
