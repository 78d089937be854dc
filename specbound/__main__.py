"""``python -m specbound``: the ``specbound`` command line (:mod:`specbound.cli`)."""

import sys

from specbound.cli import main

if __name__ == "__main__":
    sys.exit(main())
