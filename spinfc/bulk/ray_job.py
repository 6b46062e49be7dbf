"""`spinfc score ... --ray [ADDRESS]`: the same job on Ray Data, one engine per actor.

    ray.data.read_parquet / read_json / read_csv (INPUT, the id and text columns)
      .map_batches(BatchScorer, compute=ActorPoolStrategy(size=actors), num_gpus=1 per actor with GPUs)
      .write_parquet(OUTPUT)

`BatchScorer` holds one engine (engine_transport.py, the in-process path) and scores each batch as one request,
with the same error rows as the in-process run; so the rows and numbers are the in-process run's. Media columns
(--image-column ...) are read in the actor by the in-process path's reader (bulk/media.py), under the same roots,
hosts and limits: a path must name a file on the actor's machine (a local Ray, or storage every node mounts at that
path). Differences:
OUTPUT must be new (no --resume: Ray Data writes its own part files), the `row` column is null (Ray does not
number rows across blocks), duplicate ids are not detected, and --errors is written from OUTPUT at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path

import pyarrow as pa

from spinfc.bulk.columns import Layout
from spinfc.bulk.engine_transport import EngineTransport
from spinfc.bulk.errors import BulkError
from spinfc.bulk.media import media_columns
from spinfc.bulk.progress import Summary
from spinfc.bulk.questions import load_questions
from spinfc.bulk.readers import check_row, input_format, open_input
from spinfc.bulk.runner import score_rows
from spinfc.bulk.writers import metadata


class BatchScorer:
    """A Ray Data callable class: one engine per actor, started once; each call scores one batch (a pyarrow
    table with the id, text and media columns) and returns the output rows as a table of the job's schema.
    `media`: the job's `MediaColumns` (bulk/media.py), or None without media columns."""

    def __init__(self, questions, text_column: str, id_column: str, device: str | None, dtype: str,
                 token_budget: int | None, media=None):
        self.text_column, self.id_column, self.media = text_column, id_column, media
        self.layout = Layout(questions)
        self.transport = EngineTransport(questions, device=device, dtype=dtype, token_budget=token_budget,
                                         media_policy=None if media is None else media.policy)
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self.transport.start())
        self.schema = self.layout.schema(metadata(self.transport))

    def __call__(self, batch: pa.Table) -> pa.Table:
        ids, texts = batch.column(self.id_column).to_pylist(), batch.column(self.text_column).to_pylist()
        media = [batch.column(name).to_pylist() for _, name in self.media.columns] if self.media else []
        rows = [check_row(k, ids[k], texts[k], tuple(m[k] for m in media)) for k in range(len(ids))]
        if self.media is not None:  # reads the files and fetches the URLs: a media problem is the row's error
            rows = self.media.resolve(rows)
        out = self.loop.run_until_complete(score_rows(self.transport, self.layout, rows))
        for row in out:
            row["row"] = None
        return pa.Table.from_pylist(out, schema=self.schema)


def run_ray(args: argparse.Namespace) -> Summary:
    import ray

    if args.resume:
        raise BulkError("--resume is not available with --ray: Ray Data writes its own part files; run without --ray "
                        "to resume, or write to a new OUTPUT")
    media = media_columns(args)
    if Path(args.input).exists():  # a local INPUT is checked here; a remote one (s3://...) by Ray when it reads
        open_input(args.input, args.text_column, args.id_column, media.flags)
    output = args.output  # a path or a URI (s3://...): pyarrow and Ray read both as given
    if Path(output).exists() and any(Path(output).iterdir() if Path(output).is_dir() else [output]):
        raise BulkError(f"{output} already exists: --ray writes a new Parquet dataset folder; give a new OUTPUT")
    questions = load_questions(args.pack, args.queries, args.model)
    started = time.perf_counter()
    if not ray.is_initialized():  # quiet: Ray's own start-up and per-task logs are not the job's progress
        ray.init(address=None if args.ray == "local" else args.ray, log_to_driver=False, include_dashboard=False,
                 logging_level=logging.ERROR, configure_logging=True)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = not args.quiet and sys.stderr.isatty()  # a bar on a terminal, nothing in a log
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its warnings are about the cluster, not the job
    gpus = int(ray.cluster_resources().get("GPU", 0))
    actors = args.actors or max(1, gpus)
    columns = [args.id_column, args.text_column, *(name for _, name in media.columns)]
    kind = input_format(args.input)
    if kind == "parquet":
        dataset = ray.data.read_parquet(args.input).select_columns(columns)
    elif kind == "csv":
        dataset = ray.data.read_csv(args.input).select_columns(columns)
    else:
        dataset = ray.data.read_json(args.input, lines=True).select_columns(columns)
    scored = dataset.map_batches(
        BatchScorer, batch_format="pyarrow", batch_size=args.batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors),  # `concurrency=` is deprecated for a callable class
        num_gpus=1 if gpus else 0, num_cpus=0 if gpus else 1,
        fn_constructor_kwargs={"questions": questions, "text_column": args.text_column, "id_column": args.id_column,
                               "device": args.device, "dtype": args.dtype, "token_budget": args.token_budget,
                               "media": media if media.columns else None})
    scored.write_parquet(output)
    summary = _summary(output, args.errors, questions, time.perf_counter() - started)
    if not args.quiet:
        print(summary.line() + f" ({actors} actor{'s' if actors != 1 else ''}, {gpus} GPUs)")
    return summary


def _summary(output: str, errors_path: str | None, questions, seconds: float) -> Summary:
    import pyarrow.dataset as ds

    table = ds.dataset(output, format="parquet").to_table(columns=["id", "error_code", "error"])
    codes = table.column("error_code").to_pylist()
    failed = [k for k, code in enumerate(codes) if code is not None]
    if errors_path:
        ids, messages = table.column("id").to_pylist(), table.column("error").to_pylist()
        with open(errors_path, "a", encoding="utf-8") as file:
            for k in failed:
                file.write(json.dumps({"row": None, "id": ids[k], "code": codes[k], "reason": messages[k]}) + "\n")
    good = table.num_rows - len(failed)
    return Summary(rows=table.num_rows, errors=len(failed), questions=good * Layout(questions).questions,
                   seconds=seconds)
