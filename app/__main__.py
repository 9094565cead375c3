"""`python -m app` runs the `drax` command."""

import sys

from app.cli import main

sys.exit(main())
