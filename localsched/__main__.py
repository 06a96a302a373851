"""``python -m localsched``: the ``localsched`` command (see ``localsched.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
