#!/usr/bin/env bash
# Installs everything (scripts/setup.sh) and runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[test.sh] installing into .venv first (scripts/setup.sh), then running pytest $*" >&2
bash scripts/setup.sh
. .venv/bin/activate
echo "[test.sh] running pytest $* (the whole suite, slow tests included: tens of minutes on 2 cores; -m 'not slow' leaves out the packaged models and runs in workers)" >&2
exec python -m pytest "$@"
