"""The README's two commands (scripts/serve.sh, scripts/test.sh) say what they are doing from the first second:
each step of the install is named before it starts, with the seconds so far, and a failing pip still fails the
script. Run on a copy of scripts/ with stand-ins for python3, pip and the installed commands (each pip call takes
a second, as a real one takes minutes), so nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PYTHON = """#!/usr/bin/env bash
# a stand-in python: `-m venv DIR` makes DIR/bin/activate; `-m pip ...` takes a second; `-m pytest` says so
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  echo "export PATH=\\"$STUBS:\\$PATH\\"" > "$3/bin/activate"
elif [ "$1 $2" = "-m pip" ]; then
  sleep 1
  echo "Requirement already satisfied: something"
  echo "Installing collected packages: ${@: -1}"
  [ -n "${FAIL_PIP:-}" ] && [ "${@: -1}" = "$FAIL_PIP" ] && exit 3
  exit 0
else
  echo "ran python $*"
fi
"""


@pytest.fixture
def checkout(tmp_path):
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("python3", "python"):
        (stubs / name).write_text(PYTHON)
        (stubs / name).chmod(0o755)
    (stubs / "spinfc").write_text("#!/usr/bin/env bash\necho \"ran spinfc $*\"\n")
    (stubs / "spinfc").chmod(0o755)
    (stubs / "chromium").write_text("#!/usr/bin/env bash\n")  # present: the setup installs nothing from Debian here
    (stubs / "chromium").chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUBS": str(stubs)}
    return tmp_path, env


def run_timed(command: list[str], cwd: Path, env: dict) -> tuple[list[tuple[float, str]], int]:
    """Each output line with the seconds since the start at which it arrived, and the exit status."""
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.monotonic() - start, line.rstrip("\n")) for line in process.stdout]
    return lines, process.wait()


@pytest.mark.parametrize("script, args, last", [("serve.sh", ["--port", "9"], "ran spinfc serve --port 9"),
                                                ("test.sh", ["-x"], "ran python -m pytest -x")])
def test_the_readme_commands_say_what_they_do_from_the_first_second(checkout, script, args, last) -> None:
    root, env = checkout
    lines, status = run_timed(["bash", f"scripts/{script}", *args], root, env)
    assert status == 0, lines
    assert lines[0][0] < 1.0 and "installing" in lines[0][1], lines[0]
    steps = [text for _, text in lines if text.startswith("[setup ")]
    assert [s.split()[2] for s in steps] == ["1/6", "2/6", "3/6", "4/6", "5/6", "6/6", "done:"], steps
    gaps = [later[0] - earlier[0] for earlier, later in zip(lines, lines[1:])]
    assert max(gaps) < 2.5, f"a silence of {max(gaps):.1f} s: {lines}"  # each stand-in pip call takes 1 s
    texts = [text for _, text in lines]
    assert not any(t.startswith("Requirement already satisfied") for t in texts)
    assert "Installing collected packages: torch==2.13.0" in texts and texts[-1] == last


def test_a_failing_install_fails_the_script(checkout) -> None:
    root, env = checkout
    lines, status = run_timed(["bash", "scripts/setup.sh"], root, {**env, "FAIL_PIP": "torch==2.13.0"})
    assert status == 3 and not any("4/5" in text for _, text in lines), lines


def test_a_second_setup_returns_at_once_until_pyproject_changes(checkout) -> None:
    """CI runs setup.sh before every test run: once an install finished, the same pyproject.toml, setup.sh and
    checkout find it (.venv/.spinfc-installed) and skip every pip call; a changed pyproject.toml installs again."""
    root, env = checkout
    _, status = run_timed(["bash", "scripts/setup.sh"], root, env)
    assert status == 0
    lines, status = run_timed(["bash", "scripts/setup.sh"], root, env)
    assert status == 0 and len(lines) == 1 and lines[0][0] < 1.0, lines  # each stand-in pip call takes 1 s
    assert lines[0][1].startswith("[setup 0s] done: already installed"), lines
    with (root / "pyproject.toml").open("a") as pyproject:
        pyproject.write("# a new dependency\n")
    lines, status = run_timed(["bash", "scripts/setup.sh"], root, env)
    steps = [text.split()[2] for _, text in lines if text.startswith("[setup ")]
    assert status == 0 and steps == ["1/6", "2/6", "3/6", "4/6", "5/6", "6/6", "done:"], lines


def test_a_failed_setup_is_not_taken_for_an_install(checkout) -> None:
    root, env = checkout
    _, status = run_timed(["bash", "scripts/setup.sh"], root, {**env, "FAIL_PIP": "torch==2.13.0"})
    assert status == 3 and not (root / ".venv" / ".spinfc-installed").exists()
    lines, status = run_timed(["bash", "scripts/setup.sh"], root, env)
    assert status == 0 and "3/6" in "".join(text for _, text in lines), lines
