"""The ``memory`` tool now in :mod:`ctxbudget.tools.memory`; this
path stays importable and *is* that module (patching one patches the other)."""

from __future__ import annotations

import sys

from .tools import memory as _module
from .tools.memory import CHECKPOINT_MAX, MemoryTool

__all__ = ["CHECKPOINT_MAX", "MemoryTool"]

sys.modules[__name__] = _module
