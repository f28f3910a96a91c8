"""``python -m veridic``: the same command line as the ``veridic`` console script."""

from veridic.checks.cli import main

if __name__ == "__main__":  # guarded so that doctest collection can import this module
    raise SystemExit(main())
