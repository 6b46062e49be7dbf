"""The prompt a chat is generated from: the model's own chat template, or a plain transcript for a model without one.

With a chat template (SmolLM2-135M-Instruct's GGUF carries one), the prompt is transformers'
`apply_chat_template(messages, add_generation_prompt=True)`, and generation ends at the tokenizer's end-of-sequence
token or the template's end-of-turn token.

Without one (the Gemma 3 270M base GGUF has none: it is not an instruction model), the prompt is a plain
transcript, each message on its own paragraph after its role, ending where the assistant's answer starts:

    <bos>System: Answer briefly.

    User: What is the capital of France?

    Assistant:

Generation then also stops where the model starts another turn (the stop strings "\\nUser:" and "\\nSystem:"),
and the whitespace around the answer is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from spinfc.errors import RequestError
from spinfc.passes.tokenize import encode_text

# Tokens that end a turn in the chat formats of the supported families (Gemma, ChatML, Llama 3), where present.
END_OF_TURN = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>")
PLAIN_ROLES = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant"}
PLAIN_STOPS = ("\nUser:", "\nSystem:")


@attrs.frozen
class ChatPrompt:
    tokens: tuple[int, ...]
    end_tokens: frozenset[int]  # a drawn token among these ends the answer (finish "stop"); it is not in the text
    stop: tuple[str, ...] = ()  # stop strings the format adds to the request's own
    template: str = "chat_template"  # "chat_template" (the model's) or "plain" (the transcript above)
    strip: bool = False  # drop the whitespace around the answer (the plain transcript)

    def clean(self, text: str) -> str:
        """The answer as returned to the client."""
        return text.strip() if self.strip else text


def end_tokens(tokenizer) -> frozenset[int]:
    """The end-of-sequence token and every known end-of-turn token the vocabulary has."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    vocab = tokenizer.get_vocab()
    ids.update(vocab[token] for token in END_OF_TURN if token in vocab)
    return frozenset(ids)


def plain_transcript(messages: Sequence[dict]) -> str:
    """The messages as `Role: text` paragraphs, ending with `Assistant:` (the documented fallback format)."""
    turns = [f"{PLAIN_ROLES.get(m['role'], m['role'].capitalize())}: {m['content']}" for m in messages]
    return "\n\n".join(turns + ["Assistant:"])


def chat_prompt(tokenizer, messages: Sequence[dict]) -> ChatPrompt:
    """The prompt tokens for `messages` ([{"role", "content": str}]) with the model's chat template, or the plain
    transcript when the tokenizer has none. The messages' text is encoded as plain text: `<|im_end|>` written in
    a message is text, never the end of a turn; only the template's own markers (and BOS) are special tokens."""
    if getattr(tokenizer, "chat_template", None):
        return ChatPrompt(tokens=template_tokens(tokenizer, messages), end_tokens=end_tokens(tokenizer))
    ids = encode_text(tokenizer, plain_transcript(messages), bos=True)  # every word of it came from the request
    return ChatPrompt(tokens=ids, end_tokens=end_tokens(tokenizer), stop=PLAIN_STOPS, template="plain", strip=True)


def template_tokens(tokenizer, messages: Sequence[dict]) -> tuple[int, ...]:
    """`messages` through the model's chat template. When no message holds a special token's spelling, that is
    the rendered text encoded at once. Otherwise the template is rendered with a marker in place of each content,
    the markers' places are checked against the real rendering, and each content is encoded as plain text between
    the template's pieces (encoded with their special tokens)."""
    specials = special_texts(tokenizer)
    for i, message in enumerate(messages):
        if any(special in message["role"] for special in specials):
            raise RequestError(f"messages[{i}].role holds a special token of the model's chat template",
                               code="invalid_role", param=f"messages[{i}].role",
                               hint='give a plain role: "system", "user" or "assistant"')
    rendered = _render(tokenizer, messages)
    if not any(special in message["content"] for message in messages for special in specials):
        return tuple(int(i) for i in tokenizer(rendered, add_special_tokens=False)["input_ids"])
    markers = [f"\x00spinfc-content-{i}\x00" for i in range(len(messages))]
    pieces = re.split("(" + "|".join(map(re.escape, markers)) + ")", _render(tokenizer, [
        {**message, "content": marker} for message, marker in zip(messages, markers)]))
    for transform in (lambda text: text, str.strip):  # templates that trim each message (Gemma's) are read too
        contents = {marker: transform(m["content"]) for marker, m in zip(markers, messages)}
        if "".join(contents.get(piece, piece) for piece in pieces) == rendered:
            break
    else:
        raise RequestError("a message holds a special token's spelling and the model's chat template changes the "
                           "messages' text, so it cannot be kept apart from the template's own tokens",
                           code="special_token_in_message", param="messages",
                           hint="remove the special tokens (such as " + ", ".join(sorted(specials)[:3]) + ") "
                           "from the messages")
    ids: list[int] = []
    for piece in pieces:
        if piece in contents:
            ids += encode_text(tokenizer, contents[piece])
        elif piece:
            ids += tokenizer(piece, add_special_tokens=False)["input_ids"]
    return tuple(int(i) for i in ids)


def special_texts(tokenizer) -> frozenset[str]:
    """The spellings the tokenizer reads as special tokens (`<|im_end|>`, `<bos>`, ...)."""
    return frozenset(t.content for t in tokenizer.added_tokens_decoder.values() if t.special and t.content)


def _render(tokenizer, messages: Sequence[dict]) -> str:
    try:
        return tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    except Exception as error:  # jinja's TemplateError, or a template's raise_exception(...)
        raise RequestError(f"the model's chat template refused these messages: {error}", code="chat_template_error",
                           param="messages", hint="check the roles and their order (some templates want "
                           "user and assistant turns to alternate)") from error
