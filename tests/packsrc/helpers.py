"""Pack files and git repositories made in a test's tmp folder."""

import os
import subprocess
from pathlib import Path

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def pack_toml(pack_id: str, models=("gemma3-270m",), question: str = "Is this message spam?") -> str:
    models_list = ", ".join(f'"{m}"' for m in models)
    return (f'id = "{pack_id}"\nversion = "1.0.0"\ndescription = "{question}"\nmodels = [{models_list}]\n'
            f'presentation = "Message:\\n{{content}}"\n\n[[questions]]\nid = "q"\n'
            f'template = "\\n\\n{question}\\nAnswer:<?>"\noptions = [" yes", " no"]\n')


def write_pack(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(root: Path) -> Path:
    """A repository with packs/ at tag v1 (acme/spam asks "Is this message spam?"), then at tag v2 and on the
    branch main (it asks "Is this message an advert?"). Returns the repository folder."""
    repo = root / "origin"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    write_pack(repo / "packs", "spam.toml", pack_toml("acme/spam"))
    write_pack(repo / "packs", "other-model.toml", pack_toml("acme/llama-only", models=("meta/llama-3-8b",)))
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "v1")
    git(repo, "tag", "v1")
    write_pack(repo / "packs", "spam.toml", pack_toml("acme/spam", question="Is this message an advert?"))
    git(repo, "commit", "--quiet", "-am", "v2")
    git(repo, "tag", "v2")
    return repo
