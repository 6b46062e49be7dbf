"""Build one family's snapshot and its transformers reference, in a process of its own:

    python -m benchmarks.acceptance.reference FAMILY DIR [--gpu-widths]

writes the snapshot into DIR and DIR/acceptance-reference.json: transformers' float32 logprobs (on the CPU) of the
option request's options (kinds.OPTIONS: content, question, option as one text) and of kinds.PROMPT_IDS, the token
ids /v1/completions is sent. fla cannot be imported here: where it is installed (the GPU machine) transformers would
run its Qwen3.5 layers on fla's kernels, which take no CPU tensors; the reference is transformers' own PyTorch."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from benchmarks.acceptance import kinds
from benchmarks.acceptance.families import BY_NAME

FILE = "acceptance-reference.json"


def logprobs_of(model, ids: list[int]) -> list[float]:
    """transformers' log p(ids[i] | ids[:i]) for i >= 1, float32."""
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    table = torch.log_softmax(logits, dim=-1)
    return table[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].tolist()


def reference(model, tokenizer) -> dict:
    options = {}
    for option in kinds.OPTIONS["options"]:
        ids = tokenizer(kinds.CONTENT + kinds.OPTIONS["question"] + option)["input_ids"]
        count = len(tokenizer(option, add_special_tokens=False)["input_ids"])
        options[option] = sum(logprobs_of(model, ids)[-count:])
    return {"options": options, "token_logprobs": logprobs_of(model, kinds.PROMPT_IDS)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=sorted(BY_NAME))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--gpu-widths", action="store_true")
    args = parser.parse_args(argv)
    sys.modules.setdefault("fla", None)  # before transformers is imported: its Qwen3.5 code falls back to PyTorch
    from transformers import AutoTokenizer

    torch.set_num_threads(2)
    model = BY_NAME[args.family].build(args.directory, args.gpu_widths).float().eval()
    tokenizer = AutoTokenizer.from_pretrained(str(args.directory))
    (args.directory / FILE).write_text(json.dumps(reference(model, tokenizer)))


if __name__ == "__main__":
    main()
