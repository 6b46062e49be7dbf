"""Hostile pack sources: links, FIFOs, devices, huge or deeply nested files, escaping symlinks in git, option-like
refs, lookalike namespaces. Each is a located error (exit 2 from `spinfc packs validate`, a refused start from
`spinfc serve --packs`), found without reading what it points at and without hanging."""

import os
import threading
import time
from pathlib import Path

import pytest

from spinfc.cli import main
from spinfc.frontend import validate_packs
from spinfc.frontend import pack_files
from spinfc.packsrc import PackSourceError, fetch_source, load_pack_registry, parse_source
from spinfc.packsrc.registry import reserved_namespace

from .helpers import git, pack_toml, write_pack


def refused(tmp_path, source: str) -> str:
    """The message of the PackSourceError that loading `source` raises, within 10 s (a FIFO must not block)."""
    outcome: list = []

    def load():
        try:
            load_pack_registry([source], "gemma3-270m", official=False, cache=tmp_path / "cache")
            outcome.append(None)
        except PackSourceError as error:
            outcome.append(str(error))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert outcome, "loading the source hung"
    assert outcome[0] is not None, "the source was accepted"
    return outcome[0]


def codes(folder: Path) -> list[str]:
    return [error.code for error in validate_packs(folder)]


def test_a_link_to_dev_zero_is_refused_without_reading_it(tmp_path):
    folder = tmp_path / "packs"
    write_pack(folder, "good.toml", pack_toml("acme/good"))
    (folder / "zero.toml").symlink_to("/dev/zero")
    (folder / "random.toml").symlink_to("/dev/urandom")
    (folder / "elsewhere.toml").symlink_to(write_pack(tmp_path / "outside", "x.toml", pack_toml("acme/x")))
    started = time.monotonic()
    message = refused(tmp_path, str(folder))
    assert time.monotonic() - started < 5
    assert f"{folder / 'zero.toml'}:1:1: error: the pack file is a symbolic link" in message
    assert "random.toml" in message and "elsewhere.toml" in message
    assert codes(folder) == ["not_a_regular_file"] * 3  # good.toml is read and fine
    assert "symbolic link" in refused(tmp_path, str(folder / "zero.toml"))  # given as the one pack file


def test_a_fifo_or_a_folder_named_toml_is_refused_without_blocking(tmp_path):
    folder = tmp_path / "packs"
    folder.mkdir()
    os.mkfifo(folder / "x.toml")
    (folder / "dir.toml").mkdir()
    message = refused(tmp_path, str(folder))
    assert "x.toml:1:1: error: the pack file is a FIFO, not a regular file" in message
    assert "dir.toml:1:1: error: the pack file is a folder" in message
    assert "FIFO" in refused(tmp_path, str(folder / "x.toml"))  # the one pack file: opened without blocking


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_refused(tmp_path):
    folder = tmp_path / "packs"
    folder.mkdir()
    os.mknod(folder / "zero.toml", 0o600 | 0o020000, os.makedev(1, 5))  # a character device: /dev/zero's numbers
    assert "the pack file is a device" in refused(tmp_path, str(folder))


def test_nesting_past_the_limit_is_a_located_error_not_a_recursion_error(tmp_path, capsys):
    folder = tmp_path / "packs"
    write_pack(folder, "deep.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    write_pack(folder, "dotted.toml", pack_toml("acme/a") + "a" + ".a" * 40 + " = 1\n")
    write_pack(folder, "tables.toml", pack_toml("acme/b") + "y = " + "{ a = " * 50 + "1" + " }" * 50 + "\n")
    errors = validate_packs(folder)
    assert [(e.code, e.loc.file.rsplit("/", 1)[1], e.loc.line, e.loc.column) for e in errors] == [
        ("toml_too_deep", "deep.toml", 1, 37), ("toml_too_deep", "dotted.toml", 11, 66),
        ("toml_too_deep", "tables.toml", 11, 197)]  # the 33rd dot, the 33rd {
    assert main(["packs", "validate", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{folder / 'deep.toml'}:1:37: error: the TOML nests more than 32 levels deep" in err
    assert "Traceback" not in err
    assert "deep.toml:1:37" in refused(tmp_path, str(folder))


def test_brackets_in_strings_and_comments_do_not_count(tmp_path):
    text = pack_toml("acme/brackets").replace('options = [" yes", " no"]',
                                                'options = [" [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", " no"]')
    text += "# " + "[" * 100 + "\n" + 'description_note = """ ' + "{" * 100 + '\\""" """' + "\n"
    folder = tmp_path / "packs"
    write_pack(folder, "a.toml", text)
    assert codes(folder) == ["unknown_field"]  # read to the end: only the made-up key is wrong


def test_sizes_are_capped_before_reading(tmp_path, monkeypatch):
    folder = tmp_path / "packs"
    write_pack(folder, "huge.toml", 'x = "' + "a" * 10_000_000 + '"\n')
    started = time.monotonic()
    assert [(e.code, e.loc.line) for e in validate_packs(folder)] == [("pack_file_too_large", 1)]
    assert time.monotonic() - started < 1
    (folder / "huge.toml").unlink()
    for i in range(3):
        write_pack(folder, f"p{i}.toml", pack_toml(f"acme/p{i}"))
    monkeypatch.setattr(pack_files, "MAX_SOURCE_BYTES", 600)  # three ~270-byte packs: too much together
    assert codes(folder) == ["source_too_large"]
    assert "bytes together, over the limit of 600 for one source" in refused(tmp_path, str(folder))


def test_a_template_too_long_is_refused_before_it_is_parsed(tmp_path):
    folder = tmp_path / "packs"
    text = pack_toml("acme/long").replace("\\n\\nIs this message spam?", "word " * 20_000)
    write_pack(folder, "long.toml", text)
    (error,) = validate_packs(folder)
    assert (error.code, str(error.loc).rsplit("/", 1)[1], error.param) == (
        "string_too_long", "long.toml:9:12", "questions[0].template")
    assert error.message == ("questions[0].template is 100,011 characters long, over the limit of 50,000 for one "
                             "string of a pack")


def test_a_git_path_that_is_a_committed_symlink_out_of_the_repository_is_refused(tmp_path):
    outside = tmp_path / "outside"
    write_pack(outside, "stolen.toml", pack_toml("acme/stolen"))
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "packs").symlink_to(outside)
    write_pack(repo / "inside", "zero.toml", "").unlink()
    (repo / "inside" / "zero.toml").symlink_to("/dev/zero")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "links")
    git(repo, "tag", "v1")
    with pytest.raises(PackSourceError, match="symbolic link that leads outside it"):
        fetch_source(parse_source(f"git+file://{repo}@v1#packs"), tmp_path / "cache")
    assert "zero.toml:1:1: error: the pack file is a symbolic link" in refused(tmp_path, f"git+file://{repo}@v1#inside")


@pytest.mark.parametrize("ref", ["--upload-pack=touch {marker}", "-b", "a..b", "x@{1}", "v1.lock", "a b", "/v1",
                                 "v1/", ".hidden", "release//1"])
def test_refs_that_could_be_options_or_are_not_ref_names_are_refused(tmp_path, ref):
    marker = tmp_path / "ran"
    ref = ref.replace("{marker}", str(marker))
    with pytest.raises(PackSourceError, match="is not a tag, branch or commit name"):
        parse_source(f"git+file://{tmp_path}/repo.git@{ref}#packs")
    with pytest.raises(PackSourceError, match="is not a tag, branch or commit name"):
        parse_source(f"github:acme/packs@{ref}")
    assert not marker.exists()


def test_only_plain_git_transports(tmp_path):
    for text in ("git+ext::sh -c touch% /tmp/x", "git+fd::3", "git+ssh://-oProxyCommand=x/repo.git@v1"):
        with pytest.raises(PackSourceError, match="cloned over https, http, ssh, git, file only"):
            parse_source(text)


def test_a_commit_ref_is_checked_out_by_its_full_id(tmp_path):
    from .helpers import make_repo

    repo = make_repo(tmp_path)
    commit = git(repo, "rev-parse", "v1")
    fetched = fetch_source(parse_source(f"git+file://{repo}@{commit[:8]}#packs"), tmp_path / "cache")
    assert fetched.revision == commit


@pytest.mark.parametrize("namespace,reserved", [
    ("spinfc", "spinfc"), ("spinfc-official", "spinfc"), ("spinfc.", "spinfc"), ("spinfc_labs", "spinfc"),
    ("spin-fc", "spinfc"), ("SpinFC", "spinfc"), ("SPINFC.official", "spinfc"), ("acme", None), ("spin", None),
    ("myspinfc", None),
])
def test_reserved_namespaces_by_prefix(namespace, reserved):
    assert reserved_namespace(namespace) == reserved


def test_lookalike_namespaces_are_skipped_unless_allowed_by_name(tmp_path):
    folder = tmp_path / "packs"
    for name, pack_id in (("a", "spinfc-official/moderation"), ("b", "spinfc./x"), ("c", "spin_fc/y"),
                          ("d", "acme/z")):
        write_pack(folder, f"{name}.toml", pack_toml(pack_id))
    registry = load_pack_registry([str(folder)], "gemma3-270m", cache=tmp_path)
    assert "acme/z" in registry.enabled
    assert not {"spinfc-official/moderation", "spinfc./x", "spin_fc/y"} & set(registry.enabled)
    reasons = {s.id: s.reason for s in registry.skipped}
    assert "the namespace spinfc-official/ looks like spinfc/, which is reserved" in reasons[
        "spinfc-official/moderation"]
    assert "--packs-allow-namespace spinfc-official" in reasons["spinfc-official/moderation"]
    allowed = load_pack_registry([str(folder)], "gemma3-270m", allow_namespaces=["spinfc-official"], cache=tmp_path)
    assert "spinfc-official/moderation" in allowed.enabled and "spinfc./x" not in allowed.enabled


def test_serve_refuses_to_start_on_a_hostile_source(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPINFC_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "packs"
    folder.mkdir()
    os.mkfifo(folder / "x.toml")
    assert main(["serve", "--packs", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spinfc serve: pack source '{folder}' cannot be loaded (1 error)")
    assert f"{folder / 'x.toml'}:1:1: error: the pack file is a FIFO" in err
    assert main(["packs", "list", "--packs", f"git+file://{tmp_path}@--upload-pack=x"]) == 2
    assert "is not a tag, branch or commit name" in capsys.readouterr().err
