"""python -m benchmarks.acceptance [--smoke] [--out FILE]: see the package's docstring."""

import sys

from benchmarks.acceptance.run import main

sys.exit(main())
