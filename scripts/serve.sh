#!/usr/bin/env bash
# Installs everything (scripts/setup.sh) and starts `spinfc serve` on the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[serve.sh] installing into .venv first (scripts/setup.sh), then starting spinfc serve $*" >&2
bash scripts/setup.sh
. .venv/bin/activate
echo "[serve.sh] starting spinfc serve $*: it logs each step of loading and warming up; /readyz answers 200 once ready" >&2
exec spinfc serve "$@"
