"""The tool policy now in :mod:`ctxbudget.tools.policy`; this
path stays importable and *is* that module (patching one patches the other)."""

from __future__ import annotations

import sys

from .tools import policy as _module
from .tools.policy import RuleAction, ToolPolicy, ToolRule

__all__ = ["RuleAction", "ToolPolicy", "ToolRule"]

sys.modules[__name__] = _module
