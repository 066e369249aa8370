"""``python -m fairnb``: see :mod:`fairnb.cli`."""
from fairnb.cli import main

if __name__ == "__main__":  # not when Dask's spawned workers re-import the main module
    raise SystemExit(main())
