"""``python -m localsched``: the ``localsched`` command (see ``localsched.command.cli``)."""

import sys

from .command.cli import main

if __name__ == "__main__":
    sys.exit(main())
