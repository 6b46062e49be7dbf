"""Bulk scoring of files: `spinfc score INPUT -o OUTPUT` (docs/bulk.md).

    readers.py           Parquet / CSV / JSONL, a batch of rows at a time; rows that cannot be scored are marked
    questions.py         --queries and --pack -> the question set, checked before any model is loaded
    media.py             --image-column, --audio-column, --video-column: each row's files read (paths inside
                         --media-root, URLs of --media-fetch-hosts), or the row's error
    columns.py           the question set -> the output's typed columns, and one content's results -> one row
    transport.py         the interface between the job and an engine: start, score(texts), close
    engine_transport.py  the engine in this process (the one place that touches spinfc.runtime.engine)
    http_transport.py    a running `spinfc serve` (POST /v1/score), 429/503 retried after Retry-After
    runner.py            read -> skip done -> score (batches in flight) -> write groups, in input order
    writers.py           Parquet dataset folders of part files renamed into place, JSONL; resume; --errors
    progress.py          the bar, the plain lines, the summary
    ray_job.py           --ray: the same per-batch scoring in Ray Data actors, one engine per actor
    options.py           the command line's flags (what `spinfc` builds at start-up)
    command.py           the command: the job of the parsed flags
"""
