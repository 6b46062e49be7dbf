"""tokenize: token ids for every content, question prompt and option, with the model's own tokenizer."""

from __future__ import annotations

import attrs

from spinfc.errors import CompileError
from spinfc.ir.nodes import Content, OptionSlot, Program, Question
from spinfc.passes.code_reads import code_slot
from spinfc.passes.context import MEMO_ENTRIES, PassContext, recalled, remember


def encode_text(tokenizer, text: str, *, bos: bool = False) -> tuple[int, ...]:
    """`text` encoded as plain text: a special token's spelling in it (`<|im_end|>`, `<end_of_turn>`, `<bos>`) is
    split into ordinary tokens like any other text, so text from a request or a pack can never become a control
    token (forge the end of a turn). `bos` adds the tokenizer's own special tokens around it (Gemma's BOS), which
    stay special."""
    return tuple(tokenizer(text, add_special_tokens=bos, split_special_tokens=True)["input_ids"])


def tokenize(program: Program, ctx: PassContext) -> Program:
    """Tokenize with the context's tokenizer (the model's own); see `tokenize_with`."""
    if ctx.tokenizer is None:
        raise ValueError("tokenize needs a tokenizer in the pass context (PassContext(tokenizer=...))")
    if len(ctx.memo) > MEMO_ENTRIES:  # the texts' encodings go; the question sets' LRU stays
        sets = ctx.memo.get("sets")
        ctx.memo.clear()
        if sets is not None:
            ctx.memo["sets"] = sets
    return tokenize_with(program, ctx.tokenizer, ctx.memo, ctx.codes)


def tokenize_with(program: Program, tokenizer, memo: dict | None = None, codes: tuple[str, ...] = ()) -> Program:
    """Tokenize piecewise with a transformers tokenizer.

    Guarantees: each content's `tokens` are `present_before + text + present_after` encoded with the tokenizer's
    default special tokens (a BOS where the model uses one; none for SmolLM2, whose floor may then hold 0 tokens);
    each question's `tokens` are its prompt, and each option's `tokens` its text, encoded without special tokens,
    so a question continues its content token for token as the model will see it. Every text is encoded as plain
    text (`encode_text`): `<|im_end|>` written in a content, a template or an option is text, never the token.
    Against a decision model (`codes`: its head's labels) a question's slot is an option slot of codes, each code's
    one token its row of the head (`code_reads.code_slot`, which refuses every other slot).
    `program.pad` is the tokenizer's pad id (0 when it has none). Stats: contents, content_tokens, questions,
    prompt_tokens, option_tokens. Raises `CompileError` for a prompt or an option that encodes to no tokens.
    """
    memo = {} if memo is None else memo  # prompts and options come back request after request (contents do not)

    def encode(text: str, special: bool) -> tuple[int, ...]:
        key = (text, special)
        if key not in memo:
            memo[key] = encode_text(tokenizer, text, bos=special)
        return memo[key]

    texts = [program.present_before + c.text + program.present_after for c in program.contents if not c.media]
    encoded = iter(tokenizer(texts, add_special_tokens=True, split_special_tokens=True)["input_ids"] if texts else [])
    contents = tuple(  # the text-only contents encoded in one batch
        _with_media_tokens(c, program, tokenizer) if c.media else attrs.evolve(c, tokens=tuple(next(encoded)))
        for c in program.contents)
    questions = _tokenize_questions(program, encode, memo, codes)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = attrs.evolve(program, contents=contents, questions=questions, pad=pad)
    options = [o for q in questions if isinstance(q.slot, OptionSlot) for o in q.slot.options]
    for name, value in (
        ("contents", len(contents)),
        ("content_tokens", sum(len(c.tokens) for c in contents)),
        ("questions", len(questions)),
        ("prompt_tokens", sum(len(q.tokens) for q in questions)),
        ("option_tokens", sum(len(o.tokens) for o in options)),
    ):
        out = out.with_stat(name, value)
    return out


def _with_media_tokens(content: Content, program: Program, tokenizer) -> Content:
    """A content with media: its text encoded piece by piece around each piece's placeholder tokens (its
    `read.tokens`, from the tower), the tokenizer's special tokens (Gemma's BOS) before the first piece; each
    piece's `start` is the row of its first placeholder."""
    text = program.present_before + content.text + program.present_after
    shift, tokens, media, cut = len(program.present_before), [], [], 0
    for piece in content.media:
        at = piece.at + shift
        tokens.extend(encode_text(tokenizer, text[cut:at], bos=not media))
        media.append(attrs.evolve(piece, start=len(tokens)))
        tokens.extend(piece.read.tokens)
        cut = at
    tokens.extend(encode_text(tokenizer, text[cut:], bos=False))
    return attrs.evolve(content, tokens=tuple(tokens), media=tuple(media))


def _tokenize_questions(program: Program, encode, memo: dict, codes: tuple[str, ...]) -> tuple[Question, ...]:
    """The program's questions tokenized: a function of the questions alone (frozen values, compared by value), so
    kept in `memo` for the next request asking the same set (a burst of one-content requests asks one set 24 times,
    and building 56 questions and their options again was most of a one-content compile)."""
    key = ("questions", program.questions)
    tokenized = recalled(memo, key)
    if tokenized is None:
        queries = {query.id: query for query in program.queries}
        tokenized = tuple(_tokenize_question(q, encode, queries.get(q.query_id), codes) for q in program.questions)
        remember(memo, key, tokenized)
    return tokenized


def _tokenize_question(question: Question, encode, query, codes: tuple[str, ...]) -> Question:
    loc = query.template.loc if query is not None else None
    tokens = encode(question.prompt, False)
    if not tokens:
        raise CompileError(
            f"question {_name(question)} has no text before its slot, so nothing predicts the answer", loc,
            code="empty_prompt", hint="write the question before the slot, e.g. `Is this spam? Answer:<?>`",
        )
    slot = code_slot(question.slot, codes, _name(question), loc)
    if isinstance(slot, OptionSlot) and not slot.codes:
        options = []
        for option in slot.options:
            option_tokens = encode(option.text, False)
            if not option_tokens:
                raise CompileError(
                    f"option {option.text!r} of question {_name(question)} encodes to no tokens", loc,
                    code="empty_option", hint="give every option some text, e.g. ' yes'",
                )
            options.append(attrs.evolve(option, tokens=option_tokens))
        slot = attrs.evolve(slot, options=tuple(options))
    return attrs.evolve(question, tokens=tokens, slot=slot)


def _name(question: Question) -> str:
    values = ", ".join(f"{k}={v}" for k, v in question.values)
    return f"{question.query_id!r}" + (f" ({values})" if values else "")
