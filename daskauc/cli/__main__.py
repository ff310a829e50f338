"""``python -m daskauc.cli``: the ``daskauc`` command."""

import sys

from .main import main

sys.exit(main())
