"""`spinfc packs list` text: enabled packs with their sources, skipped ones with reasons."""

import pytest

from spinfc.packsrc import PackSourceError, list_packs

from .helpers import git, make_repo


def test_list_names_enabled_and_skipped_packs_with_sources(tmp_path):
    repo = make_repo(tmp_path)
    source = f"git+file://{repo}@v1#packs"
    text = list_packs([source], "gemma3-270m", cache=tmp_path / "cache")
    lines = text.splitlines()
    assert lines[0] == "enabled for gemma3-270m: 8 packs"
    spam = next(line for line in lines if "acme/spam" in line)
    assert "1.0.0" in spam and "1 question " in spam
    assert f"{source} @ {git(repo, 'rev-parse', 'v1')[:12]} (spam.toml)" in spam
    assert any("spinfc/moderation" in line and "bundled (moderation.toml)" in line for line in lines)
    assert "skipped: 1" in lines
    assert lines[-1].strip().startswith("acme/llama-only") and lines[-1].endswith(
        "written for meta/llama-3-8b, not gemma3-270m")


def test_list_for_a_model_no_pack_was_written_for(tmp_path):
    text = list_packs([], "some/model", cache=tmp_path)
    assert text.startswith("enabled for some/model: 0 packs\n  (none)\nskipped: 7\n")
    assert text.count("not some/model") == 7
    assert list_packs([], "some/model", official=False, cache=tmp_path) == \
        "enabled for some/model: 0 packs\n  (none)\n"


def test_list_refuses_an_unreadable_source(tmp_path):
    with pytest.raises(PackSourceError, match="does not exist"):
        list_packs([str(tmp_path / "missing")], "gemma3-270m", cache=tmp_path)
