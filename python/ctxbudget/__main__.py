"""``python -m ctxbudget``: the same as the ``ctxbudget`` command."""

import sys

from .cli import main

sys.exit(main())
