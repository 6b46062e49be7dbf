"""What every study shares, one copy each:

    models    random-weight models: snapshots written with transformers (what `spinfc serve DIR` loads) and
              in-memory stacks of a `ModelConfig` (what a kernel study runs)
    jobs      the seed-shaped job as text (/v1/score bodies) and as token ids lowered to fixed-shape launches
    serving   `spinfc serve DIR` in a child process, waited for until /readyz answers 200
    clients   HTTP senders: one body, a burst of concurrent requests, the server's pass counter
    timing    one timer: variants run in alternating rounds, the best and the spread kept
    report    markdown tables and JSON results (also under $OUT when it is set)
"""
