"""The ``new_context`` tool now in :mod:`ctxbudget.tools.new_context`; this
path stays importable and *is* that module (patching one patches the other)."""

from __future__ import annotations

import sys

from .tools import new_context as _module
from .tools.new_context import NewContextTool

__all__ = ["NewContextTool"]

sys.modules[__name__] = _module
