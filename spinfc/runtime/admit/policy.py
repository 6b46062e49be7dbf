"""What one call may ask of the engine, and every check of a scoring request against it: the one place a request
is refused for its limits or features. Every refusal is a `RequestError` (a `LimitExceeded` for a limit), which
the server answers 400 with its code and `param`; nothing here knows HTTP.

    Policy            the call's limits and features (the server's, or a trusted caller's own for this call:
                      server/context.py builds it) and the served model's longest token (characters)
    check_request     the decoded request, before anything is parsed: sizes and counts (prechecks.py)
    check_asked       the frontend's program with the packs' queries, before it is compiled: features
                      (extraction_disabled, generation_disabled), extractions (beams, slot tokens, decode tokens) and
                      questions (max_prompts_per_input, counted before any grid is built)
    check_compiled    the compiled program: every limit on what was tokenized (limits.py `check_limits`)

The three run in this order on every scoring request (runtime/admit/scoring.py: `score`, and `plan` for /v1/plan), each
at the first moment what it counts is known: a hostile body costs microseconds, not a compile.

A prompt the model continues (/v1/completions, chat's generated answer) is checked by the same limits as a content:
`check_prompt_texts` before it is tokenized, `check_prompt_tokens` (and `check_prompts_processed`) after.

A /v1/decisions request (runtime/decisions/rounds.py) is checked by the same limits, counted where its templates
are the server's: `check_questions` and the prechecks before anything is tokenized, `check_round` on each compiled
round, `check_processed` over every round together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from spinfc.config import Limits
from spinfc.errors import RequestError
from spinfc.frontend.request_schema import ScoreRequest
from spinfc.ir.nodes import GenerateSlot, OptionSlot, Program
from spinfc.runtime.admit.limits import check_extractions, check_limits, check_prompts, processed_tokens
from spinfc.runtime.admit.prechecks import Prechecks


@attrs.frozen
class Policy:
    limits: Limits = attrs.field(factory=Limits)
    features: Mapping[str, bool] = attrs.field(factory=dict)  # name -> on (spinfc.config.FeatureSettings); absent: on
    longest_token: int | None = None  # characters one token of the model covers at most; None: no character bound

    @property
    def prechecks(self) -> Prechecks:
        return Prechecks(self.limits, self.longest_token)

    def check_request(self, request: ScoreRequest) -> None:
        """Sizes and counts of the request as decoded, before any parsing (prechecks.py)."""
        self.prechecks.score_request(request)

    def check_asked(self, program: Program, where: Mapping[str, str] | None = None) -> None:
        """The frontend's program (the request's queries and its packs'), before it is compiled: features first,
        then extractions, then questions. `where` maps a query id to its JSON path (default `scoring.queries[i]`)."""
        check_features(program, self.features, where)
        check_extractions(program, self.limits, where)
        check_prompts(program, self.limits)

    def check_compiled(self, program: Program, many_inputs: bool, where: Mapping[str, str] | None = None) -> None:
        """The compiled program against every limit (limits.py); `many_inputs`: the request sent `inputs`."""
        check_limits(program, self.limits, many_inputs, where=where)

    # ---- /v1/decisions: questions whose templates the server writes (runtime/decisions/rounds.py) ----------------

    def check_questions(self, count: int) -> None:
        """`max_prompts_per_input` on a decision request's questions (one question each), before any is built."""
        self.limits.check("max_prompts_per_input", count, "questions")

    def check_round(self, program: Program, where: Mapping[str, str], content_field: str,
                    pieces: Iterable[tuple[str, int]]) -> None:
        """One compiled decision round: every limit but `max_query_tokens` and `max_prompts_per_input` (the template
        of a choice lists every option, so it counts instead each `pieces` (JSON path, tokens) the client wrote; the
        questions are counted by `check_questions`), options counted at `criteria`."""
        check_limits(program, self.limits, many_inputs=False, where=where, options_field="criteria",
                     skip=("max_query_tokens", "max_prompts_per_input"), content_field=content_field)
        limit = self.limits.max_query_tokens
        for param, tokens in pieces:
            if tokens > limit:
                raise RequestError(
                    f"{param}: {tokens:,} tokens in one piece of a question, over the server's limit of {limit:,} "
                    "(max_query_tokens)", code="max_query_tokens_exceeded", param=param,
                    hint="shorten it, or start the server with a higher --max-query-tokens "
                    "(SPINFC_MAX_QUERY_TOKENS, [limits] max_query_tokens)")

    def check_processed(self, programs: Sequence[Program]) -> None:
        """`max_processed_tokens` over every round of a decision request together."""
        self.limits.check("max_processed_tokens", sum(processed_tokens(program) for program in programs))

    # ---- generation: the prompts a model continues ------------------------------------------------------------

    def check_prompt_texts(self, texts: Sequence[tuple[str, int]], draws: int) -> None:
        """Before anything is tokenized: each prompt's characters, (param, count), against max_content_tokens (as a
        content is bounded), all of them against max_processed_tokens (at `prompt`), and the tokens the request
        asks to draw (prompts x max_tokens) against max_decode_tokens (at `max_tokens`; 0: none drawn)."""
        for param, chars in texts:
            self.prechecks.text("max_content_tokens", chars, param)
        self.prechecks.text("max_processed_tokens", sum(chars for _, chars in texts), "prompt")
        if draws:
            self.limits.check("max_decode_tokens", draws, "max_tokens")

    def check_prompt_tokens(self, param: str, tokens: int) -> None:
        """One tokenized prompt against max_content_tokens (as a content is bounded)."""
        self.limits.check("max_content_tokens", tokens, param)

    def check_prompts_processed(self, tokens: int) -> None:
        """A request's tokenized prompts together against max_processed_tokens (at `prompt`)."""
        self.limits.check("max_processed_tokens", tokens, "prompt")

    def check_generates(self) -> None:
        """400 generation_disabled for a chat request that asks for an answer where generation is off."""
        if not self.features.get("generation", True):
            raise RequestError("this server was started with --no-generation: it scores but does not generate; "
                               "send a `scoring` block (with the openai SDK: extra_body={\"scoring\": ...}), or ask "
                               "the operator to turn generation on", code="generation_disabled")


def check_features(program: Program, features: Mapping[str, bool], where: Mapping[str, str] | None = None) -> None:
    """The one place a query is refused for a feature that is off, on the server (--no-extraction,
    --no-generation) or for this call (a trusted caller's `features`): extraction_disabled for a searched slot
    (<*> <n> <$>), generation_disabled for generated text (<gen>, or <*> with generate = true). `where` maps a
    query id to its JSON path (default `scoring.queries[i]`); a pack's queries point at the pack."""
    where = where or {query.id: f"scoring.queries[{k}]" for k, query in enumerate(program.queries)}
    for query in program.queries:
        if isinstance(query.slot, OptionSlot):
            continue
        generated = isinstance(query.slot, GenerateSlot)
        feature = "generation" if generated else "extraction"
        if features.get(feature, True):
            continue
        at = where[query.id]
        param = at if at.startswith("packs[") else f"{at}.template"
        if generated:
            raise RequestError(f"query {query.id!r} generates free text (<gen>), and generation is turned off on "
                               "this server (--no-generation) or for this call: ask with a searched slot <*> or an "
                               "option slot <?>, or ask the operator to turn generation on",
                               code="generation_disabled", param=param)
        raise RequestError(f"query {query.id!r} uses an extraction slot (<*> <n> <$>), and extraction is turned off "
                           "on this server (--no-extraction) or for this call: ask with an option slot <?> and a list "
                           "of options, or ask the operator to turn extraction on",
                           code="extraction_disabled", param=param)
