"""python -m benchmarks.acceptance [--smoke] [--out FILE]: see the package's docstring."""

from benchmarks.acceptance.run import main

main()
