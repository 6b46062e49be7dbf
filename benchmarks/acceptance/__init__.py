"""The acceptance run: every family served at defaults, every kind of request, in one command.

    python -m benchmarks.acceptance --out results.json            # on an H200: `spinfc serve DIR --device cuda:0`
    python -m benchmarks.acceptance --smoke                       # the same code on the CPU (CI runs this)

For each family (families.py) a small random-weight snapshot is written with transformers (real architectures and
head widths; a byte-level tokenizer holding the family's special tokens), its transformers reference logprobs are
computed in float32 (reference.py, in a child process that cannot import fla), the snapshot is served by `spinfc
serve DIR` at default settings (benchmarks/harness/serving.py; extraction, generation and, on CUDA, graphs on), and
every kind of request is sent over HTTP (kinds.py). A kind passes when it answers 200, its numbers hold (option
logprobs and token logprobs within the stated tolerance of transformers; a content's scores bit-identical alone and
packed on CUDA), and the server's log holds no traceback. One family is also quantized (`spinfc quantize --scheme
fp8-static`) and served the same way. The table (report.py) says which family x kind passed; `--out` writes it all
as JSON. Exits 1 when anything failed.
"""
