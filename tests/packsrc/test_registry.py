"""Which packs a model gets, which are skipped and why, where each came from; unreadable sources refuse."""

import logging

import pytest

from spinfc.config import Settings, FeatureSettings, EngineSettings
from spinfc.errors import RequestError
from spinfc.packsrc import PackSourceError, bundled_folder, load_pack_registry, registry_from_settings

from .helpers import git, make_repo, pack_toml, write_pack

BUNDLED_IDS = {"spinfc/moderation", "spinfc/review-sentiment", "spinfc/support-triage"}


def test_bundled_packs_are_enabled_for_the_default_model(tmp_path):
    registry = load_pack_registry([], "gemma3-270m", cache=tmp_path)
    assert bundled_folder() is not None
    assert BUNDLED_IDS <= set(registry.enabled)
    assert all(e.source == "bundled" and e.revision is None for e in registry.enabled.values())
    assert registry.enabled["spinfc/moderation"].path == bundled_folder() / "moderation.toml"
    assert load_pack_registry([], "smollm2", cache=tmp_path).enabled.keys() == registry.enabled.keys()  # alias
    assert load_pack_registry([], "gemma3-270m", official=False, cache=tmp_path).enabled == {}


def test_a_folder_source_and_a_pack_for_another_model_skipped_with_a_log_line(tmp_path, caplog):
    folder = tmp_path / "mine"
    write_pack(folder, "a.toml", pack_toml("acme/spam"))
    write_pack(folder, "b.toml", pack_toml("acme/llama-only", models=("meta/llama-3-8b",)))
    with caplog.at_level(logging.INFO, logger="spinfc.packs"):
        registry = load_pack_registry([str(folder)], "gemma3-270m", official=False, cache=tmp_path)
    assert list(registry.enabled) == ["acme/spam"]
    assert registry.enabled["acme/spam"].source == str(folder)
    (skipped,) = registry.skipped
    assert (skipped.id, skipped.source, skipped.path.name) == ("acme/llama-only", str(folder), "b.toml")
    assert skipped.reason == "written for meta/llama-3-8b, not gemma3-270m"
    assert "pack acme/llama-only from" in caplog.text and "written for meta/llama-3-8b" in caplog.text


def test_git_source_at_a_tag(tmp_path):
    repo = make_repo(tmp_path)
    registry = load_pack_registry([f"git+file://{repo}@v1#packs"], "gemma3-270m", official=False,
                                  cache=tmp_path / "cache")
    entry = registry.enabled["acme/spam"]
    assert entry.pack.description == "Is this message spam?"
    assert entry.source == f"git+file://{repo}@v1#packs" and entry.revision == git(repo, "rev-parse", "v1")
    assert [s.id for s in registry.skipped] == ["acme/llama-only"]


def test_a_later_source_replaces_an_earlier_pack_with_the_same_id(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    write_pack(first, "spam.toml", pack_toml("acme/spam", question="Is this message spam?"))
    write_pack(second, "spam.toml", pack_toml("acme/spam", question="Is this message an advert?"))
    registry = load_pack_registry([str(first), str(second)], "gemma3-270m", official=False, cache=tmp_path)
    assert registry.enabled["acme/spam"].pack.description == "Is this message an advert?"
    (skipped,) = registry.skipped
    assert skipped.source == str(first) and skipped.reason == f"replaced by the copy from {second}"


def test_the_reserved_namespace_needs_allowing(tmp_path):
    folder = tmp_path / "edited"
    write_pack(folder, "moderation.toml", pack_toml("spinfc/moderation", question="Is this message rude?"))
    registry = load_pack_registry([str(folder)], "gemma3-270m", cache=tmp_path)
    assert registry.enabled["spinfc/moderation"].source == "bundled"
    assert "--packs-allow-namespace spinfc" in registry.skipped[-1].reason
    allowed = load_pack_registry([str(folder)], "gemma3-270m", allow_namespaces=["spinfc"], cache=tmp_path)
    assert allowed.enabled["spinfc/moderation"].pack.description == "Is this message rude?"
    assert any(s.source == "bundled" and s.id == "spinfc/moderation" for s in allowed.skipped)


def test_unreadable_sources_refuse_the_start(tmp_path):
    with pytest.raises(PackSourceError, match="does not exist"):
        load_pack_registry([str(tmp_path / "missing")], "gemma3-270m", cache=tmp_path)
    broken = tmp_path / "broken"
    write_pack(broken, "good.toml", pack_toml("acme/good"))
    write_pack(broken, "bad.toml", pack_toml("acme/bad").replace("Answer:<?>", "Answer:<foo>"))
    with pytest.raises(PackSourceError) as caught:
        load_pack_registry([str(broken)], "gemma3-270m", cache=tmp_path)
    assert f"{broken / 'bad.toml'}:9:" in str(caught.value) and "unknown slot" in str(caught.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PackSourceError, match="no pack files"):
        load_pack_registry([str(empty)], "gemma3-270m", cache=tmp_path)
    with pytest.raises(PackSourceError, match="git clone failed"):
        load_pack_registry([f"git+file://{tmp_path}/nothing.git@v1"], "gemma3-270m", cache=tmp_path)


def test_require_and_json(tmp_path):
    folder = tmp_path / "mine"
    write_pack(folder, "a.toml", pack_toml("acme/spam"))
    write_pack(folder, "b.toml", pack_toml("acme/llama-only", models=("meta/llama-3-8b",)))
    registry = load_pack_registry([str(folder)], "gemma3-270m", cache=tmp_path)
    assert registry.require("acme/spam").id == "acme/spam" and registry.get("acme/nope") is None
    with pytest.raises(RequestError) as caught:
        registry.require("acme/llama-only", param="packs[1].id")
    error = caught.value
    assert (error.code, error.param) == ("pack_not_enabled", "packs[1].id")
    assert "written for meta/llama-3-8b" in error.message and "acme/spam" in error.hint
    body = registry.as_json()
    assert body["object"] == "list" and body["model"] == "gemma3-270m"
    spam = next(p for p in body["data"] if p["id"] == "acme/spam")
    assert spam == {"id": "acme/spam", "object": "pack", "version": "1.0.0", "description": "Is this message spam?",
                    "models": ["gemma3-270m"], "questions": 1, "categories": [], "decision": None,
                    "source": str(folder), "file": "a.toml", "revision": None}
    moderation = next(p for p in body["data"] if p["id"] == "spinfc/moderation")
    assert moderation["source"] == "bundled" and moderation["categories"] and moderation["decision"]
    assert body["skipped"] == [{"id": "acme/llama-only", "version": "1.0.0", "models": ["meta/llama-3-8b"],
                                "source": str(folder), "file": "b.toml",
                                "reason": "written for meta/llama-3-8b, not gemma3-270m"}]


def test_registry_from_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("SPINFC_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "mine"
    write_pack(folder, "a.toml", pack_toml("acme/spam", models=("smollm2-135m",)))
    settings = Settings(engine=EngineSettings(model="smollm2-135m"),
                        features=FeatureSettings(packs=(str(folder),), no_official_packs=True))
    assert list(registry_from_settings(settings).enabled) == ["acme/spam"]
