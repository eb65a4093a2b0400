"""``python -m episodic.cli`` is the ``episodic`` command."""

import sys

from . import main

sys.exit(main())
