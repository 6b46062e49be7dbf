"""The seam of issue 26: a scoring request is decoded once, checked against its policy in one place
(runtime/admit/policy.py) and scored through one entry (runtime/admit/scoring.py) by every caller: `score` for the /v1/score
route, chat's scoring mode and the bulk job's in-process transport; `plan` for /v1/plan; `score_compiled` for the
decision rounds and `spinfc parity`. Read from the source, so a caller that orchestrates compile + submit + results
itself again, or a new place raising a feature's code or checking a limit, fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest

from spinfc.config import Limits
from spinfc.errors import RequestError
from spinfc.frontend import program_from_request
from spinfc.frontend.request_schema import ScoreRequest
from spinfc.runtime.admit.policy import Policy
from spinfc.server.errors import to_api_error

PACKAGE = Path(__file__).resolve().parents[2] / "spinfc"
ENTRY_CALLERS = {"server/scoring.py": "score", "server/routes/score.py": "score_request",
                 "server/routes/chat.py": "score_request", "bulk/engine_transport.py": "score",
                 "server/routes/playground.py": "plan", "server/routes/decisions.py": "score_compiled",
                 "server/decision_inputs.py": "score_compiled"}
ORCHESTRATION = {"compile_and_score", "compile_program_async", "compile_async", "compile", "submit",
                 "split_results", "resolve_packs", "check_limits", "check_prompts", "check_extractions",
                 "check_features", "Prechecks"}
# what runs compiled work in the engine's passes, by the files that call it: the scoring entry; the engine itself
# (its warm-up); the server's extraction warm-up, before it reports ready
RUNS = {"submit", "compile_and_score"}
RUN_CALLERS = {"runtime/admit/scoring.py", "runtime/engine.py", "server/service.py"}
# the checks against a request's limits, by the files that call them: the policy alone
CHECK_CALLERS = {"runtime/admit/policy.py"}
# a limit checked by name (`limits.check("max_...")`): the checks themselves (limits.py, prechecks.py) and the
# policy (a generation's prompt too: /v1/completions' and chat's generated answer's)
LIMIT_CALLERS = {"runtime/admit/limits.py", "runtime/admit/prechecks.py", "runtime/admit/policy.py"}
FEATURE_CODES = {"extraction_disabled": {"runtime/admit/policy.py"},
                 # /v1/completions refuses generation for a model that cannot generate too, in its own words
                 "generation_disabled": {"runtime/admit/policy.py", "server/routes/completions.py"}}


def called(path: Path) -> set[str]:
    """The names of what `path` calls: `f(...)` and `x.f(...)` alike."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def sources() -> dict[str, Path]:
    return {str(p.relative_to(PACKAGE)): p for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("name", sorted(ENTRY_CALLERS))
def test_every_scoring_caller_goes_through_the_one_entry(name: str) -> None:
    names = called(PACKAGE / name)
    assert ENTRY_CALLERS[name] in names
    assert not names & ORCHESTRATION, f"{name} orchestrates scoring itself: {sorted(names & ORCHESTRATION)}"


def imported(path: Path, module: str) -> set[str]:
    """The names `path` imports from `module`."""
    return {alias.name for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module == module for alias in node.names}


def test_the_limit_checks_are_called_from_the_policy_alone() -> None:
    checks = {"check_limits", "check_prompts", "check_extractions"}
    callers = {name for name, path in sources().items()
               if imported(path, "spinfc.runtime.admit.limits") & checks and called(path) & checks}
    assert callers == CHECK_CALLERS
    assert {name for name, path in sources().items() if "check_features" in called(path)} == {"runtime/admit/policy.py"}
    # nor is a request's limit checked by name (`limits.check("max_...")`) or its sizes prechecked anywhere else
    checked_by_name = {name for name, path in sources().items()
                       if any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                              and node.func.attr == "check" and limits_of(node.func.value)
                              for node in ast.walk(ast.parse(path.read_text())))}
    assert checked_by_name == LIMIT_CALLERS
    prechecking = {name for name, path in sources().items() if "Prechecks" in called(path)}
    assert prechecking == {"runtime/admit/policy.py"}


def limits_of(node: ast.AST) -> bool:
    """Whether `node` reads `limits` or `<...>.limits`."""
    return (node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")) == "limits"


def engine_scores(path: Path) -> bool:
    """Whether `path` calls `<...>engine.score(...)`: runs a compiled request itself."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "score":
            owner = node.func.value
            if (owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")) == "engine":
                return True
    return False


def test_compiled_work_is_run_by_the_scoring_entry_alone() -> None:
    runners = {name for name, path in sources().items() if called(path) & RUNS or engine_scores(path)}
    assert runners == RUN_CALLERS


@pytest.mark.parametrize("code", sorted(FEATURE_CODES))
def test_each_feature_code_has_one_source(code: str) -> None:
    raising = {name for name, path in sources().items() if f'"{code}"' in path.read_text()}
    assert raising == FEATURE_CODES[code]


BODY = {"inputs": [{"messages": [{"role": "user", "content": "My parcel is late."}]},
                   {"messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]}],
        "scoring": {"queries": [{"id": "late", "template": "\n\nIs it late?\nAnswer:<?>", "options": [" yes", " no"]},
                                {"id": "when", "template": "\n\nWhen?\nAnswer:<*>", "max_tokens": 4}]}}


def test_the_decoded_request_is_read_as_the_body_it_came_from() -> None:
    typed = msgspec.json.decode(msgspec.json.encode(BODY), type=ScoreRequest)
    assert program_from_request(typed, model="m") == program_from_request(BODY, model="m")


def test_a_feature_that_is_off_is_refused_by_the_policy_with_the_servers_answer() -> None:
    program = program_from_request(BODY, model="m")
    Policy().check_asked(program)  # every feature on by default
    with pytest.raises(RequestError) as raised:
        Policy(Limits(), {"extraction": False}).check_asked(program)
    api = to_api_error(raised.value)
    assert (api.status, api.code, api.param) == (400, "extraction_disabled", "scoring.queries[1].template")
    assert api.message.startswith("query 'when' uses an extraction slot (<*> <n> <$>), and extraction is turned off")
    with pytest.raises(RequestError) as raised:
        Policy(Limits(), {"generation": False}).check_generates()
    assert (to_api_error(raised.value).code, to_api_error(raised.value).param) == ("generation_disabled", None)
