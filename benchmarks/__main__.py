"""``python -m benchmarks run|report`` (from a source checkout)."""

import sys

from benchmarks.command import main

sys.exit(main())
