"""What every study shares, one copy each (benchmarks/README.md has how to use them):

    models     random-weight snapshots written with transformers (what `spinfc serve DIR` loads), tokenizer folders
    stacks     random-weight stacks built in memory, every family (what a kernel study, or a shape too large to
               write, runs)
    jobs       the seed-shaped job as text: /v1/score bodies in every request pattern
    launches   the seed-shaped job as token ids, lowered to fixed-shape launches by spinfc's own passes
    serving    `spinfc serve` in a child process, waited for until /readyz answers 200 (serve_app.py: the same with
               a study's loader making the model); any other `spinfc` command
    clients    HTTP senders: a pattern of concurrent requests, a file's rows in batches, /metrics
    timing     one timer: variants in alternating rounds, best and spread; a device-synchronized per-call time
    report     markdown tables and JSON results (also under $OUT when it is set)
    smoke      a `--smoke` run re-executed under Triton's interpreter
"""
