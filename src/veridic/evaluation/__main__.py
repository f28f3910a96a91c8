"""``python -m veridic.evaluation``: see :mod:`veridic.evaluation.cli`."""

from __future__ import annotations

import sys

from veridic.evaluation.cli import main

if __name__ == "__main__":
    sys.exit(main())
