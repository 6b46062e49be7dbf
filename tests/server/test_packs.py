"""Packs in requests end to end (gemma3-270m, CPU): the server preloads the bundled packs and a --packs folder,
GET /v1/packs says what is enabled and from where, and a /v1/score request that names packs gets each pack's
questions, categories and decision from the same read as its own queries. Pack sources that cannot be read refuse
the start; a git source is loaded at its tag (a local repository)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from litestar.testing import TestClient
from packaged import load_shared

from spinfc.config import EngineSettings, FeatureSettings, Settings
from spinfc.frontend import load_pack
from spinfc.packsrc import PackSourceError
from spinfc.runtime.deliver.pack_scores import score_pack
from spinfc.server.app import create_app

from .live import wait_ready

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # loads a packaged model

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

TRIAGE = '''id = "acme/triage"
version = "2.1.0"
description = "Late parcels and refunds."
models = ["gemma3-270m"]
presentation = "Message:\\n{content}"

[[questions]]
id = "q"
template = "\\n\\nIs this message spam?\\nAnswer:<?>"
options = [" yes", " no"]

[[questions]]
id = "about"
template = "\\n\\nIs the message about {topic}?\\nAnswer:<?>"
options = [" yes", " no"]
placeholders = { topic = ["a late parcel", "a refund"] }

[[categories]]
id = "delivery"
combine = "max"
members = [{ question = "about", option = " yes", values = { topic = "a late parcel" } }]

[[categories]]
id = "money"
combine = "noisy_or"
baseline = "floor"
members = [
    { question = "about", option = " yes", values = { topic = "a refund" } },
    { question = "q", option = " no", weight = 0.5 },
]

[decision]
default = "ignore"

[[decision.rules]]
label = "handle"
any = ["delivery >= 0.0001"]
'''
TEXT = "My parcel is two weeks late and I want my money back."
OWN_Q = {"id": "q", "template": "\n\nIs this message spam?\nAnswer:<?>", "options": [" yes", " no"]}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("packs")
    write_pack(folder, "triage.toml", TRIAGE)
    write_pack(folder, "llama.toml", TRIAGE.replace("acme/triage", "acme/llama-only").replace(
        'models = ["gemma3-270m"]', 'models = ["meta/llama-3-8b"]'))
    return folder


@pytest.fixture(scope="module")
def client(folder):
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=2048, warmup="none"),
                        features=FeatureSettings(packs=(str(folder),)))
    with TestClient(create_app(settings, load_model=load_shared), timeout=600) as client:
        wait_ready(client)
        yield client


def post(client, body: dict, status: int = 200) -> dict:
    response = client.post("/v1/score", json=body)
    assert response.status_code == status, response.text
    return response.json()


def options(results: list[dict]) -> dict:
    """(query id, values, option text) -> (logprob, p, floor_p)."""
    return {(r["id"], tuple(c["values"].items()), o["text"]): (o["logprob"], o["p"], o["floor_p"])
            for r in results for c in r["combinations"] for o in c["options"]}


def recomputed(pack_file, results: list[dict]):
    """score_pack on the response's own numbers: what the server's categories and decision must be."""
    p = {(r["id"], tuple(c["values"].items())): {o["text"]: o["p"] for o in c["options"]}
         for r in results for c in r["combinations"]}
    floor = {(r["id"], tuple(c["values"].items())): {o["text"]: o["floor_p"] for o in c["options"]}
             for r in results for c in r["combinations"]}
    return score_pack(load_pack(pack_file), p, floor)


def test_v1_packs_lists_what_is_enabled_where_it_came_from_and_what_was_skipped(client, folder) -> None:
    listed = client.get("/v1/packs").json()
    assert listed["object"] == "list" and listed["model"] == "gemma3-270m"
    by_id = {p["id"]: p for p in listed["data"]}
    bundled = {f"spinfc/{path.stem}" for path in (ROOT / "packs").glob("*.toml")}  # every bundled pack, and acme's
    assert bundled | {"acme/triage"} == set(by_id) and "spinfc/moderation" in bundled
    assert by_id["spinfc/moderation"]["source"] == "bundled" and by_id["spinfc/moderation"]["file"] == "moderation.toml"
    triage = by_id["acme/triage"]
    assert triage == {"id": "acme/triage", "object": "pack", "version": "2.1.0",
                      "description": "Late parcels and refunds.", "models": ["gemma3-270m"], "questions": 2, "categories": ["delivery", "money"],
                      "decision": ["handle", "ignore"], "source": str(folder), "file": "triage.toml", "revision": None}
    (skipped,) = listed["skipped"]
    assert skipped["id"] == "acme/llama-only" and skipped["reason"] == "written for meta/llama-3-8b, not gemma3-270m"


def test_a_pack_alone_is_read_with_its_presentation(client, folder) -> None:
    body = post(client, {"messages": [{"role": "user", "content": TEXT}], "packs": [{"id": "acme/triage"}]})
    assert body["results"] == [] and body["usage"]["questions"] == 3 and body["usage"]["output_tokens"] == 0
    (pack,) = body["packs"]
    assert (pack["id"], pack["version"], pack["presentation"]) == ("acme/triage", "2.1.0", "applied")
    assert [r["id"] for r in pack["results"]] == ["q", "about"]
    expected = recomputed(folder / "triage.toml", pack["results"])
    assert list(pack["categories"]) == ["delivery", "money"]
    assert pack["categories"] == pytest.approx(dict(expected.categories))
    assert (pack["decision"], pack["rule"], pack["reason"]) == (expected.label, expected.rule, expected.reason)
    # the same as asking the pack's questions about the presented text yourself
    mine = post(client, {"messages": [{"role": "user", "content": "Message:\n" + TEXT}],
                         "scoring": {"queries": [OWN_Q, {"id": "about", "template": "\n\nIs the message about "
                                                         "{topic}?\nAnswer:<?>", "options": [" yes", " no"],
                                                         "placeholders": {"topic": ["a late parcel", "a refund"]}}]}})
    ours, theirs = options(mine["results"]), options(pack["results"])
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key][0] == pytest.approx(theirs[key][0], abs=1e-5), key


def test_a_pack_beside_the_requests_own_queries_shares_one_read_per_input(client, folder) -> None:
    body = post(client, {"inputs": [{"messages": [{"role": "user", "content": TEXT}]},
                                    {"messages": [{"role": "user", "content": "Buy cheap watches now!!!"}]}],
                         "scoring": {"queries": [OWN_Q]}, "packs": [{"id": "acme/triage"}]})
    assert body["usage"]["questions"] == 2 * 4
    for item in body["inputs"]:
        (own,) = item["results"]
        (pack,) = item["packs"]
        assert own["id"] == "q" and pack["presentation"] == "ignored"
        # the request's "q" and the pack's "q" are the same question on the same read: one branch, one answer
        assert options([own]) == options([pack["results"][0]])
        expected = recomputed(folder / "triage.toml", pack["results"])
        assert pack["categories"] == pytest.approx(dict(expected.categories)) and pack["decision"] == expected.label
    spam = [item["results"][0]["combinations"][0]["options"][0]["p"] for item in body["inputs"]]
    assert spam[0] != pytest.approx(spam[1], abs=1e-3)


def test_the_bundled_moderation_pack_by_name(client) -> None:
    body = post(client, {"messages": [{"role": "user", "content": "I know where you live and I will hurt you."}],
                         "packs": [{"id": "spinfc/moderation"}]})
    (pack,) = body["packs"]
    listed = next(p for p in client.get("/v1/packs").json()["data"] if p["id"] == "spinfc/moderation")
    assert pack["presentation"] == "applied" and len(pack["results"]) == listed["questions"]
    assert list(pack["categories"]) == listed["categories"] and pack["decision"] in listed["decision"]
    assert all(0 <= score <= 1 for score in pack["categories"].values())


def test_pack_errors(client) -> None:
    base = {"messages": [{"role": "user", "content": TEXT}]}
    err = post(client, {**base, "packs": [{"id": "acme/nope"}]}, 400)["error"]
    assert err["code"] == "pack_not_enabled" and err["param"] == "packs[0].id" and "acme/triage" in err["message"]
    err = post(client, {**base, "packs": [{"id": "acme/triage"}, {"id": "acme/llama-only"}]}, 400)["error"]
    assert err["param"] == "packs[1].id" and "written for meta/llama-3-8b" in err["message"]
    err = post(client, {**base, "packs": [{"id": "acme/triage"}, {"id": "acme/triage"}]}, 400)["error"]
    assert err["code"] == "duplicate_pack" and err["param"] == "packs[1].id"
    assert post(client, {**base, "packs": [{"name": "acme/triage"}]}, 400)["error"]["param"] == "packs[0].name"
    assert post(client, {**base, "packs": "acme/triage"}, 400)["error"]["code"] == "wrong_type"
    assert post(client, base, 400)["error"]["code"] == "no_queries"


def test_a_git_source_at_a_tag_is_listed_with_its_commit(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPINFC_CACHE", str(tmp_path / "cache"))
    repo = make_repo(tmp_path)
    source = f"git+file://{repo}@v1#packs"
    settings = Settings(engine=EngineSettings(model="gemma3-270m"), features=FeatureSettings(
        packs=(source,), no_official_packs=True))
    with TestClient(create_app(settings, load_model=_never)) as client:
        listed = client.get("/v1/packs").json()
    (spam,) = listed["data"]
    assert (spam["id"], spam["source"], spam["revision"]) == ("acme/spam", source, git(repo, "rev-parse", "v1"))
    assert spam["description"] == "Is this message spam?"
    assert [s["id"] for s in listed["skipped"]] == ["acme/llama-only"]


def test_a_pack_source_that_cannot_be_read_refuses_the_start(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPINFC_CACHE", str(tmp_path / "cache"))
    with pytest.raises(PackSourceError, match="does not exist"):
        create_app(Settings(features=FeatureSettings(packs=(str(tmp_path / "missing"),))), load_model=_never)
    broken = TRIAGE.replace('combine = "max"', 'combine = "most"')
    write_pack(tmp_path / "broken", "triage.toml", broken)
    with pytest.raises(PackSourceError, match="triage.toml"):
        create_app(Settings(features=FeatureSettings(packs=(str(tmp_path / "broken"),))), load_model=_never)
    with pytest.raises(PackSourceError, match="v9"):
        create_app(Settings(features=FeatureSettings(packs=(f"git+file://{make_repo(tmp_path)}@v9",))),
                   load_model=_never)


def write_pack(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(root: Path) -> Path:
    """A git repository with packs/spam.toml (acme/spam) and packs/llama.toml (another model's) at tag v1."""
    repo = root / "origin"
    write_pack(repo / "packs", "spam.toml", TRIAGE.replace("acme/triage", "acme/spam").replace(
        "Late parcels and refunds.", "Is this message spam?"))
    write_pack(repo / "packs", "llama.toml", TRIAGE.replace("acme/triage", "acme/llama-only").replace(
        'models = ["gemma3-270m"]', 'models = ["meta/llama-3-8b"]'))
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "v1")
    git(repo, "tag", "v1")
    return repo


def _never(name, dtype, device):
    raise RuntimeError("these tests never load a model")
