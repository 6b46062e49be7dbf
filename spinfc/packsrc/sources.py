"""Where packs come from: a pack source spec -> a local folder of pack files.

    ./my-packs                          a local folder of *.toml pack files (or one pack file)
    git+URL[@REF][#PATH]                a git repository (any URL git clones: https, ssh, file), at a tag or
                                        commit, the packs in PATH inside it (default: its root)
    github:OWNER/REPO[@REF][#PATH]      the same for https://github.com/OWNER/REPO.git (GITHUB_TOKEN for a
                                        private one)

A git source is cloned with the git CLI into the spinfc cache (`$SPINFC_CACHE/packs/git/...`). A tag or a commit
is reproducible, so its clone is kept and reused by later starts; a branch (or no REF: the default branch) is
cloned afresh at each start. Anything that cannot be read raises `PackSourceError`, which refuses the start.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import attrs

GIT_TIMEOUT_S = 300
GIT_SCHEMES = ("https", "http", "ssh", "git", "file")  # not ext:: (a command) or other remote helpers
REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/-]{0,199}")  # no leading '-': a ref is never read as an option
KEEP_MARK = ".spinfc-pinned"  # written into a clone at a tag or commit: later starts reuse it


class PackSourceError(Exception):
    """A pack source that cannot be read: the message names the source, what went wrong and what to do."""


@attrs.frozen
class SourceSpec:
    text: str  # as the operator wrote it
    kind: str  # "folder", "git" or "bundled"
    location: str  # the folder, or the URL git clones
    ref: str | None = None  # git: a tag, commit or branch; None: the default branch
    subpath: str = ""  # git: the folder inside the repository


@attrs.frozen
class FetchedSource:
    spec: SourceSpec
    folder: Path  # the local folder (or single pack file) the packs are read from
    revision: str | None = None  # git: the commit checked out


def parse_source(text: str) -> SourceSpec:
    """The spec of one `--packs` value; raises `PackSourceError` for a git source without a URL scheme."""
    if text.startswith("github:"):
        rest, _, subpath = text.removeprefix("github:").partition("#")
        repo, _, ref = rest.partition("@")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
            raise PackSourceError(f"pack source {text!r}: expected github:OWNER/REPO[@TAG][#PATH]")
        return SourceSpec(text, "git", f"https://github.com/{repo.removesuffix('.git')}.git", _check_ref(text, ref),
                          _clean_subpath(text, subpath))
    if text.startswith("git+"):
        url, _, subpath = text.removeprefix("git+").partition("#")
        parts = urlsplit(url)
        if not parts.scheme or not (parts.netloc or parts.path):
            raise PackSourceError(f"pack source {text!r}: expected git+URL[@TAG][#PATH] with a URL git can clone, "
                                  "e.g. git+https://example.com/acme/packs.git@v1.2#packs or git+file:///srv/packs.git@v1")
        if parts.scheme not in GIT_SCHEMES or parts.netloc.startswith("-"):
            raise PackSourceError(f"pack source {text!r}: git sources are cloned over "
                                  f"{', '.join(GIT_SCHEMES)} only, from a host that does not start with '-': "
                                  "e.g. git+https://example.com/acme/packs.git@v1.2#packs")
        path, ref = parts.path, ""
        if "@" in path:
            path, ref = path.rsplit("@", 1)
        location = parts._replace(path=path, fragment="").geturl()
        return SourceSpec(text, "git", location, _check_ref(text, ref), _clean_subpath(text, subpath))
    return SourceSpec(text, "folder", text)


def _check_ref(text: str, ref: str) -> str | None:
    """The tag, branch or commit after @ (None when there is none); refused unless it is a plain ref name, so it
    can never reach git as an option (`@--upload-pack=...`)."""
    if not ref:
        return None
    parts = ref.split("/")
    if not REF.fullmatch(ref) or any(not p or p.startswith(".") or p.endswith(".lock") for p in parts) \
            or ".." in ref or ref.endswith("."):
        raise PackSourceError(f"pack source {text!r}: {ref!r} is not a tag, branch or commit name: use letters, "
                              "digits and . _ - + / (not first), e.g. @v1.2 or @release/1.0 or @0123abcd")
    return ref


def _clean_subpath(text: str, subpath: str) -> str:
    path = PurePosixPath(subpath.strip("/"))
    if path.is_absolute() or ".." in path.parts:
        raise PackSourceError(f"pack source {text!r}: the path after # must stay inside the repository")
    return "" if str(path) == "." else str(path)


def fetch_source(spec: SourceSpec, cache: Path) -> FetchedSource:
    """The local folder holding `spec`'s packs, cloning a git source into `cache` when needed."""
    if spec.kind in ("folder", "bundled"):
        folder = Path(spec.location).expanduser()
        if not folder.exists():
            raise PackSourceError(f"pack source {spec.text!r}: {folder.resolve()} does not exist: give a folder "
                                  "of pack files (*.toml)")
        if not folder.is_dir() and folder.suffix != ".toml":
            raise PackSourceError(f"pack source {spec.text!r}: {folder} is neither a folder nor a .toml pack file")
        return FetchedSource(spec, folder)
    checkout = _clone(spec, cache)
    folder = checkout / spec.subpath if spec.subpath else checkout
    if not folder.resolve().is_relative_to(checkout.resolve()):  # a committed symlink must not lead outside
        raise PackSourceError(f"pack source {spec.text!r}: {spec.subpath!r} in the repository is a symbolic link "
                              "that leads outside it: point the path after # at a real folder of the repository")
    if not folder.exists():
        raise PackSourceError(f"pack source {spec.text!r}: the repository has no {spec.subpath!r} at "
                              f"{spec.ref or 'its default branch'}: fix the path after #")
    return FetchedSource(spec, folder, _git(["rev-parse", "HEAD"], spec, cwd=checkout).strip())


def _clone(spec: SourceSpec, cache: Path) -> Path:
    key = hashlib.sha256(spec.location.encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", spec.ref or "HEAD")
    target = cache / "packs" / "git" / key / name
    if (target / KEEP_MARK).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=target.parent))
    try:
        _checkout(spec, work)
        if spec.ref and _is_pinned(spec, work):
            (work / KEEP_MARK).write_text(f"{spec.location}@{spec.ref}\n")
        if target.exists():
            shutil.rmtree(target)
        try:
            work.rename(target)
        except OSError:  # another process put its clone there first: use it
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target


def _checkout(spec: SourceSpec, work: Path) -> None:
    """Clone `spec` into the empty folder `work`: shallow at a tag or branch; a commit needs the full history."""
    shallow = ["clone", "--quiet", "--depth", "1"] + (["--branch", spec.ref] if spec.ref else [])
    try:
        _git(shallow + ["--", spec.location, str(work)], spec)
        return
    except PackSourceError:
        if not spec.ref:
            raise
    shutil.rmtree(work, ignore_errors=True)
    _git(["clone", "--quiet", "--no-checkout", "--", spec.location, str(work)], spec)
    what = f"{spec.ref!r} is not a tag, branch or commit of {spec.location}"
    commit = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{spec.ref}^{{commit}}"], spec,
                  cwd=work, what=what).strip()
    _git(["checkout", "--quiet", "--detach", commit], spec, cwd=work, what=what)  # a full hex id: never an option


def _is_pinned(spec: SourceSpec, work: Path) -> bool:
    """Whether `spec.ref` names something that never moves: a tag, or the commit itself (not a branch)."""
    head = _git(["rev-parse", "HEAD"], spec, cwd=work).strip()
    if re.fullmatch(r"[0-9a-f]{7,40}", spec.ref) and head.startswith(spec.ref):
        return True
    tags = _git(["tag", "--points-at", "HEAD"], spec, cwd=work).split()
    return spec.ref in tags


def git_command(args: list[str], environ=os.environ) -> list[str]:
    """The git command line for `args`; with GITHUB_TOKEN set, it authenticates to github.com by a header (the
    token never lands in the clone's config)."""
    command = ["git", "-c", "advice.detachedHead=false", "-c", "protocol.ext.allow=never"]
    token = environ.get("GITHUB_TOKEN")
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        command += ["-c", f"http.https://github.com/.extraheader=AUTHORIZATION: basic {basic}"]
    return command + args


def _git(args: list[str], spec: SourceSpec, cwd: Path | None = None, what: str | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # never wait for a password on the console
    try:
        done = subprocess.run(git_command(args), cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S)
    except FileNotFoundError:
        raise PackSourceError(f"pack source {spec.text!r} needs the git command, which is not installed: "
                              "install git, or give a local folder instead") from None
    except subprocess.TimeoutExpired:
        raise PackSourceError(f"pack source {spec.text!r}: git {args[0]} took over {GIT_TIMEOUT_S} s: check the "
                              "network, or clone it yourself and give the folder") from None
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
        raise PackSourceError(f"pack source {spec.text!r}: {what or 'git ' + args[0] + ' failed'} ({detail}): "
                              "check the URL and the tag, and that this machine can reach the repository")
    return done.stdout
