"""The `spinfc` command: exit codes, errors as file:line:col without tracebacks, the plan's stated saving."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from spinfc.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
MODERATION = "packs/moderation.toml"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_moderation_plan_processes_fewer_tokens_than_one_sequence_per_question(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out, _ = run(capsys, "compile", MODERATION, "--emit", "plan", "--content", "You are an idiot.")
    assert code == 0
    processed = int(re.search(r"^tokens processed: (\d+)", out, re.M).group(1))
    baseline = int(re.search(r"^one sequence per question: (\d+)", out, re.M).group(1))
    ratio = float(re.search(r"^saving: ([\d.]+)x fewer tokens", out, re.M).group(1))
    assert processed < baseline and ratio == pytest.approx(baseline / processed, abs=0.005)
    # 106 questions with the floor content fill a little more than one CPU pass
    assert re.search(r"^plan \(2 passes of 2048 rows, block 128, \d+ rows used of 4096: [\d.]+% full\)", out, re.M)
    _, on_cuda, _ = run(capsys, "compile", MODERATION, "--emit", "plan", "--device", "cuda", "--content", "Hi.")
    assert re.search(r"^plan \(1 pass of 16384 rows, block 128", on_cuda, re.M)  # the server's CUDA budget


def test_a_content_longer_than_the_budget_runs_alone_on_the_cpu(capsys, monkeypatch):
    """On the CPU a content (here the floor with 75 questions) longer than the budget takes a pass of its own."""
    monkeypatch.chdir(REPO)
    code, out, _ = run(capsys, "compile", MODERATION, "--emit", "plan", "--token-budget", "256")
    assert code == 0
    assert re.search(r"^plan \(1 pass of 256 rows, block 128, (\d+) rows used of (\d+): 9\d\.\d% full\)", out, re.M)
    assert re.search(r"pass 0: 1 content, \d+ rows \(9\d\.\d%\), alone in a pass of \d+ rows \(longer than the "
                     r"budget\)", out)


def test_a_content_longer_than_the_largest_pass_names_the_flag(capsys, monkeypatch):
    """On CUDA (fixed launch shapes) the budget is the largest pass: a content longer is refused, naming the flag."""
    monkeypatch.chdir(REPO)
    code, out, err = run(capsys, "compile", MODERATION, "--emit", "plan", "--token-budget", "256", "--device", "cuda")
    assert code == 2 and out == ""
    assert "error: content 'floor' needs" in err and "more than one pass holds (256 rows per pass" in err
    assert "--token-budget" in err
    assert "Traceback" not in err


def test_a_broken_pack_prints_file_line_column_and_exits_2(capsys, tmp_path):
    broken = tmp_path / "broken.toml"
    text = (REPO / MODERATION).read_text()
    broken.write_text(text.replace("Answer:<?>", "Answer:<foo>", 1))
    code, out, err = run(capsys, "compile", str(broken), "--emit", "parse")
    assert code == 2 and out == ""
    assert re.match(rf"{re.escape(str(broken))}:\d+:\d+: error: ", err) and "hint:" in err
    assert "Traceback" not in err


def test_packs_validate_lists_every_error_and_exits_2(capsys, tmp_path):
    for name in ("a.toml", "b.toml"):
        text = (REPO / MODERATION).read_text().replace("Answer:<?>", "Answer:<foo>", 1)
        (tmp_path / name).write_text(text)
    code, _, err = run(capsys, "packs", "validate", str(tmp_path))
    assert code == 2
    for name in ("a.toml", "b.toml"):
        assert re.search(rf"{re.escape(str(tmp_path / name))}:\d+:\d+: error: ", err)


def test_packs_validate_passes_the_bundled_packs(capsys, tmp_path):
    for pack in (REPO / "packs").glob("*.toml"):
        shutil.copy(pack, tmp_path)
    code, out, err = run(capsys, "packs", "validate", str(tmp_path))
    assert (code, err) == (0, "") and "valid" in out


def test_a_request_that_is_not_json_points_at_the_place(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "messages": [,]\n}\n')
    code, _, err = run(capsys, "compile", str(bad), "--emit", "parse")
    assert code == 2 and err.startswith(f"{bad}:2:16: error: the body is not valid JSON")


def test_a_missing_source_is_an_error(capsys, tmp_path):
    code, _, err = run(capsys, "compile", str(tmp_path / "nope.toml"), "--emit", "parse")
    assert code == 2 and "no such file" in err


def test_launches_show_the_fixed_shapes(capsys, monkeypatch):
    """On CUDA a pass launches at the smallest launch size that holds it: the floor alone takes a quarter of the
    budget; with --pass-sizes 1 every pass is the full budget."""
    monkeypatch.chdir(REPO)
    reviews = "packs/review-sentiment.toml"
    code, out, _ = run(capsys, "compile", reviews, "--emit", "launches", "--token-budget", "1024", "--device", "cuda")
    assert code == 0
    assert "launches (1): tokens/positions/ends [512], rows [64], read_row/read_token [512]" in out
    assert re.search(r"launch 0: tokens \(512,\) torch.int64, .* rows \(64,\) \(\d+ answer rows", out)
    code, out, _ = run(capsys, "compile", reviews, "--emit", "launches", "--token-budget", "1024", "--device", "cuda",
                       "--pass-sizes", "1")
    assert code == 0
    assert "launches (1): tokens/positions/ends [1024], rows [128], read_row/read_token [1024]" in out


def test_a_block_the_cuda_kernels_cannot_run_is_refused_with_the_flag(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out, err = run(capsys, "compile", MODERATION, "--emit", "plan", "--device", "cuda", "--block", "96")
    assert code == 2 and out == "" and "--block 96 is not a multiple of 64" in err


def test_serve_is_a_subcommand_with_the_servers_flags():
    args = build_parser().parse_args(["serve", "--port", "8123"])
    assert args.command == "serve" and args.port == 8123


def test_an_unknown_model_is_an_error_not_a_traceback(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out, err = run(capsys, "compile", MODERATION, "--model", "no-such-model", "--emit", "tokens")
    assert code == 2 and out == "" and err.startswith("error: unknown model 'no-such-model'")
