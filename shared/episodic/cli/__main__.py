"""``python -m episodic.cli`` is the ``episodic`` command."""

import sys

from episodic.cli import main

sys.exit(main())
