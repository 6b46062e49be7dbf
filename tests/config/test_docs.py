"""docs/configuration.md names every flag, variable and key with its default, and every limit's error code."""

from pathlib import Path

from spinfc.config import env_names, flag_name, options
from spinfc.config.limits import ERROR_CODES
from spinfc.config.values import describe_default

DOC = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()


def _row(key: str) -> str:
    return next(line for line in DOC.splitlines() if line.startswith("|") and f"| `{key}` |" in line)


def test_every_setting_has_a_row_with_flag_variables_and_default():
    for group, f in options():
        row = _row(f.name)
        if f.name != "model":
            assert f"`{flag_name(f.name, f)}" in row, f.name
        for env in env_names(f.name, f):
            assert f"`{env}`" in row, (f.name, env)
        default = describe_default(f)
        assert f"| {default} |" in row or f"| `{default}` |" in row or f"| {int(f.default):,} |" in row, f.name


def test_every_limit_error_code_is_documented():
    for code in ERROR_CODES.values():
        assert f"`{code}`" in DOC
