"""Scheduling: what waits and what runs next. The scheduler owns the queues and every decision (`scheduler`,
`queues`); `work` names each kind of work it hands the engine, `turns` the generations taking turns with the passes,
`sizing` and `gather` what a pass holds and how long it waits for more, `stats` the counters."""
