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

from collections.abc import Sequence

import attrs

from spinfc.errors import RequestError

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
    transcript when the tokenizer has none."""
    if getattr(tokenizer, "chat_template", None):
        try:
            ids = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True,
                                                return_dict=False)
        except Exception as error:  # jinja's TemplateError, or a template's raise_exception(...)
            raise RequestError(f"the model's chat template refused these messages: {error}", code="chat_template_error",
                               param="messages", hint="check the roles and their order (some templates want "
                               "user and assistant turns to alternate)") from error
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # some versions return a BatchEncoding
            ids = ids["input_ids"]
        return ChatPrompt(tokens=tuple(int(i) for i in ids), end_tokens=end_tokens(tokenizer))
    ids = tokenizer(plain_transcript(messages), add_special_tokens=True)["input_ids"]
    return ChatPrompt(tokens=tuple(ids), end_tokens=end_tokens(tokenizer), stop=PLAIN_STOPS, template="plain",
                      strip=True)
