"""Source specs, and git sources cloned at a tag, a commit or a branch from a repository made in the test."""

import base64
import shutil

import pytest
from .helpers import git, make_repo

from spinfc.frontend import load_pack
from spinfc.packsrc import PackSourceError, SourceSpec, fetch_source, parse_source
from spinfc.packsrc.sources import git_command


@pytest.mark.parametrize("text,location,ref,subpath", [
    ("git+https://example.com/acme/packs.git@v1.2#packs", "https://example.com/acme/packs.git", "v1.2", "packs"),
    ("git+ssh://git@example.com/acme/packs.git@v1#a/b/", "ssh://git@example.com/acme/packs.git", "v1", "a/b"),
    ("git+https://example.com/acme/packs.git", "https://example.com/acme/packs.git", None, ""),
    ("git+https://example.com/p.git@release/1.0", "https://example.com/p.git", "release/1.0", ""),
    ("git+file:///srv/packs@0123abc#.", "file:///srv/packs", "0123abc", ""),
    ("github:acme/prompt-packs@v1.2#packs", "https://github.com/acme/prompt-packs.git", "v1.2", "packs"),
    ("github:acme/prompt-packs", "https://github.com/acme/prompt-packs.git", None, ""),
])
def test_git_specs(text, location, ref, subpath):
    assert parse_source(text) == SourceSpec(text, "git", location, ref, subpath)


def test_folder_spec_and_bad_specs():
    assert parse_source("./my-packs") == SourceSpec("./my-packs", "folder", "./my-packs")
    with pytest.raises(PackSourceError, match="git\\+URL"):
        parse_source("git+packs.git@v1")
    with pytest.raises(PackSourceError, match="github:OWNER/REPO"):
        parse_source("github:acme@v1")
    with pytest.raises(PackSourceError, match="must stay inside the repository"):
        parse_source("git+https://example.com/p.git@v1#../../etc")


def test_missing_folder_is_refused(tmp_path):
    with pytest.raises(PackSourceError, match="does not exist"):
        fetch_source(parse_source(str(tmp_path / "nope")), tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(PackSourceError, match="neither a folder nor a .toml"):
        fetch_source(parse_source(str(tmp_path / "notes.txt")), tmp_path)


def test_clone_at_a_tag_is_that_tag_and_is_reused(tmp_path):
    repo = make_repo(tmp_path)
    cache = tmp_path / "cache"
    v1 = fetch_source(parse_source(f"git+file://{repo}@v1#packs"), cache)
    assert load_pack(v1.folder / "spam.toml").description == "Is this message spam?"
    assert v1.revision == git(repo, "rev-parse", "v1")
    v2 = fetch_source(parse_source(f"git+file://{repo}@v2#packs"), cache)
    assert load_pack(v2.folder / "spam.toml").description == "Is this message an advert?"
    assert str(v1.folder).startswith(str(cache / "packs" / "git"))
    shutil.rmtree(repo)  # a pinned tag is read from the cache from now on
    again = fetch_source(parse_source(f"git+file://{repo}@v1#packs"), cache)
    assert again.folder == v1.folder and again.revision == v1.revision


def test_clone_at_a_commit(tmp_path):
    repo = make_repo(tmp_path)
    commit = git(repo, "rev-parse", "v1")
    fetched = fetch_source(parse_source(f"git+file://{repo}@{commit[:10]}#packs"), tmp_path / "cache")
    assert fetched.revision == commit
    assert load_pack(fetched.folder / "spam.toml").description == "Is this message spam?"


def test_a_branch_is_cloned_afresh_each_time(tmp_path):
    repo = make_repo(tmp_path)
    cache = tmp_path / "cache"
    first = fetch_source(parse_source(f"git+file://{repo}@main#packs"), cache)
    assert first.revision == git(repo, "rev-parse", "main")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "later")
    second = fetch_source(parse_source(f"git+file://{repo}@main#packs"), cache)
    assert second.revision == git(repo, "rev-parse", "main") != first.revision
    no_ref = fetch_source(parse_source(f"git+file://{repo}#packs"), cache)
    assert no_ref.revision == second.revision


def test_unknown_tag_missing_path_or_unreachable_repository_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    cache = tmp_path / "cache"
    with pytest.raises(PackSourceError, match="'v9' is not a tag, branch or commit"):
        fetch_source(parse_source(f"git+file://{repo}@v9#packs"), cache)
    with pytest.raises(PackSourceError, match="has no 'nothing' at v1"):
        fetch_source(parse_source(f"git+file://{repo}@v1#nothing"), cache)
    with pytest.raises(PackSourceError, match="git clone failed"):
        fetch_source(parse_source(f"git+file://{tmp_path}/missing.git"), cache)
    assert not [p for p in (cache / "packs" / "git").rglob("*") if p.name.startswith("v9.")]  # no half clones


def test_github_token_goes_in_a_header_not_the_url():
    assert git_command(["clone", "u"], environ={}) == ["git", "-c", "advice.detachedHead=false", "-c",
                                                       "protocol.ext.allow=never", "clone", "u"]
    command = git_command(["clone", "u"], environ={"GITHUB_TOKEN": "tok"})
    header = base64.b64encode(b"x-access-token:tok").decode()
    assert f"http.https://github.com/.extraheader=AUTHORIZATION: basic {header}" in command
    assert command[-2:] == ["clone", "u"]
