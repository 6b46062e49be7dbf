"""`spinfc calibrate INPUT --pack PACK`: score a labelled file, choose each threshold, write the calibrated pack
and a report (docs/calibration.md).

    INPUT (text, id, one label column per category or question)
      -> spinfc score's job (in process or --server; progress; --resume)    REPORT/scores/ (Parquet part files)
      -> per label column: the precision-recall curve, the threshold for --target
      -> the pack with its [calibration] block (-o, default REPORT/<pack>.toml), REPORT/index.html and figures

Exit status 0, or 2 for a mistake (a label column naming nothing scored, a bad label value, a bad target).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import sys
from pathlib import Path

from spinfc.bulk import command as score_command
from spinfc.bulk import options as score_options
from spinfc.bulk.errors import BulkError
from spinfc.bulk.questions import load_questions
from spinfc.calibrate import labels as labelled
from spinfc.calibrate.report import Entry, write_report
from spinfc.calibrate.thresholds import check_target, choose, pr_curve, reliability
from spinfc.frontend.pack_calibration import Calibration, Threshold, calibration_toml, with_calibration
from spinfc.frontend.pack_reader import read_pack


def main(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        print("spinfc calibrate: error: pyarrow and matplotlib are needed: pip install 'spinfc[bulk]'", file=sys.stderr)
        return 2
    try:
        calibrate(args)
    except BulkError as error:
        print(f"spinfc calibrate: error: {error}", file=sys.stderr)
        return 2
    return 0


def calibrate(args: argparse.Namespace, make=None) -> Path:
    """Run the whole command; returns the report page. `make` replaces the transport's maker (tests)."""
    check_target(args.target)  # before any work
    if bool(args.pack) == bool(args.queries):
        raise BulkError("give the pack to calibrate (--pack ID_OR_FILE) or the questions (--queries FILE), one of them")
    questions = load_questions([args.pack] if args.pack else [], args.queries, args.model)
    pack = questions.packs[0] if questions.packs else None
    stem = pack.id.split("/")[-1] if pack else Path(args.queries).stem
    report = Path(args.report or f"calibration-{stem}")
    table = labelled.read_table(args.input)
    for column in (args.text_column, args.id_column):
        if column not in table.column_names:
            raise BulkError(f"{args.input} has no column {column!r}; its columns are {', '.join(table.column_names)}")
    scores = _score(args, report / "scores", make)
    column_map = json.loads(scores.schema.metadata[b"spinfc.columns"])
    meta = {k.decode(): v.decode() for k, v in scores.schema.metadata.items()}
    wanted = args.labels.split(",") if args.labels else labelled.default_labels(table, column_map,
                                                                         {args.text_column, args.id_column})
    if not wanted:
        raise BulkError(f"{args.input}: no label column names a category or question of "
                        f"{pack.id if pack else args.queries}; name each label column after one, or give --labels")
    for column in wanted:
        if column not in table.column_names:
            raise BulkError(f"{args.input} has no label column {column!r}")
    found = labelled.targets(column_map, wanted, args.input)
    by_id = {row_id: k for k, (row_id, error) in enumerate(zip(scores.column("id").to_pylist(),
                                                               scores.column("error_code").to_pylist())) if not error}
    ids = [str(v) for v in table.column(args.id_column).to_pylist()]
    keep = [k for k, row_id in enumerate(ids) if row_id in by_id]
    scored = scores.take([by_id[ids[k]] for k in keep])
    entries = []
    for target in found:
        every = labelled.label_values(table, target.id, args.input)
        labels = [every[k] for k in keep]
        values = labelled.target_scores(scored, target, args.correct)
        rows = [k for k, y in enumerate(labels) if y is not None]
        y, s = [labels[k] for k in rows], values[rows]
        if not any(y) or all(y):
            raise BulkError(f"{args.input}: label column {target.id!r} has {'no' if not any(y) else 'only'} positive "
                            "rows; a threshold needs both positive and negative examples")
        curve = pr_curve(s, y)
        entries.append(Entry(target.kind, target.id, curve, choose(curve, args.target), reliability(s, y)))
    calibration = Calibration(
        model=meta.get("spinfc.model", questions.model), system_fingerprint=meta.get("spinfc.system_fingerprint", ""),
        data=str(args.input), data_sha256=_sha256(Path(args.input)), rows=len(keep),
        date=datetime.datetime.now(datetime.UTC).date().isoformat(), target=args.target, correction=args.correct,
        categories=tuple((e.id, _threshold(e, Threshold)) for e in entries if e.kind == "category"),
        questions=tuple((e.id, _threshold(e, Threshold)) for e in entries if e.kind == "question"))
    written = _write_pack(args, pack, calibration, report, stem)
    page = write_report(report, entries, {"pack": pack.id if pack else args.queries, "written": str(written),
                                          **{k: getattr(calibration, k) for k in
                                             ("model", "system_fingerprint", "data", "data_sha256", "rows", "date",
                                              "target", "correction")},
                                          "rows not scored": len(ids) - len(keep)})
    _print_table(entries, written, page)
    return page


def _score(args, folder: Path, make):
    """The scores of every row of INPUT (spinfc score's job into `folder`), as one table in row order."""
    import pyarrow.parquet as pq

    parser = argparse.ArgumentParser()
    score_options.configure_parser(parser)
    job = parser.parse_args([args.input, "-o", str(folder)])
    for key in ("text_column", "id_column", "model", "device", "dtype", "token_budget", "server", "token", "resume",
                "batch_size", "quiet"):
        setattr(job, key, getattr(args, key))
    job.pack = [args.pack] if args.pack else []
    job.queries = args.queries
    if folder.is_dir() and any(folder.glob("part-*.parquet")) and not args.resume:
        raise BulkError(f"{folder} already holds scores: add --resume to continue (or reuse) them, or remove it")
    asyncio.run(score_command.run(job, make))
    table = pq.read_table(folder)
    schema = pq.read_schema(sorted(folder.glob("part-*.parquet"))[0])
    return table.sort_by("row").replace_schema_metadata(schema.metadata)


def _threshold(entry, Threshold):
    c = entry.choice
    return Threshold(c.threshold, c.precision, c.recall, c.support)


def _write_pack(args, pack, calibration, report: Path, stem: str) -> Path:
    report.mkdir(parents=True, exist_ok=True)
    if pack is None:
        out = Path(args.output or report / "calibration.toml")
        out.write_text(calibration_toml(calibration))
        return out
    out = Path(args.output or report / f"{stem}.toml")
    out.write_text(with_calibration(pack.path.read_text(encoding="utf-8"), calibration), encoding="utf-8")
    _, errors = read_pack(out)
    if errors:  # never leave a pack that does not load
        raise BulkError(f"the calibrated pack {out} does not load: {errors[0]}")
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
        if file.is_file():
            digest.update(file.read_bytes())
    return digest.hexdigest()


def _print_table(entries, written: Path, page: Path) -> None:
    print(f"{'kind':9} {'id':28} {'threshold':>9} {'precision':>9} {'recall':>7} {'support':>7} {'rows':>5}")
    for e in entries:
        c = e.choice
        note = "" if c.met else "  (target not met)"
        print(f"{e.kind:9} {e.id:28} {c.threshold:9.4f} {c.precision:9.3f} {c.recall:7.3f} {c.support:7d} "
              f"{c.rows:5d}{note}")
    print(f"wrote {written} and the report {page}")
