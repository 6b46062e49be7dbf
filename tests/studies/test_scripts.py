"""Every study under benchmarks/ imports and parses its command line, so none rots between the device sessions
that run them: each module is imported in this process (a name that no longer exists in spinfc fails here), and
each study's `main(["--help"])` prints its usage and exits 0 (no model is built: a few seconds for all of them).
The studies' own `--smoke` modes are what checks their work on the CPU; the acceptance run's is tests/acceptance."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import benchmarks

ROOT = Path(benchmarks.__file__).parent
MODULES = sorted(info.name for info in pkgutil.walk_packages(benchmarks.__path__, "benchmarks.")
                 if not info.name.endswith("__main__"))


def _source(name: str) -> str:
    """A study is a module with a main(argv); the helpers beside them (gpu_checks, quant_parts, ...) have none."""
    path = ROOT.joinpath(*name.split(".")[1:])
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


STUDIES = [name for name in MODULES if "\ndef main(" in _source(name)]


@pytest.mark.parametrize("name", MODULES)
def test_imports(name):
    importlib.import_module(name)


@pytest.mark.parametrize("name", STUDIES)
def test_help(name, capsys):
    assert '__name__ == "__main__"' in _source(name), f"`python -m {name}` would run nothing: call main() there"
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(name).main(["--help"])
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_no_sys_path_edits():
    edits = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if "sys.path" in p.read_text()]
    assert not edits, f"run studies as `python -m benchmarks.NAME` instead of editing sys.path: {edits}"
