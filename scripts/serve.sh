#!/usr/bin/env bash
# Installs everything (scripts/setup.sh) and starts `spinfc serve` on the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec spinfc serve "$@"
