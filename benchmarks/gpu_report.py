"""Rates, the bf16 floor, and the closing table of `benchmarks/gpu.py`."""

from __future__ import annotations


def report(results: dict) -> None:
    """Add questions/s, job tokens/s and the fraction of the floor to every path that ran.

    The floor is 2 x non-embedding parameters x the job's tokens (each content once, each question once) over
    the best matmul rate measured in the same run."""
    job, rates = results.get("job"), results.get("matmul_tflops")
    if not job:
        return
    floor = None
    if rates and max(rates.values()) > 0:
        rate = max(rates.values()) * 1e12
        floor = 2 * job["non_embedding_params"] * job["tokens"] / rate
        results["floor"] = {"seconds": floor, "questions_per_s": job["questions"] / floor,
                            "tflops_used": max(rates.values())}
    for path in results.get("paths", {}).values():
        seconds = path["seconds"]
        path["questions_per_s"] = job["questions"] / seconds
        path["tokens_per_s"] = job["tokens"] / seconds
        if floor:
            path["of_floor"] = floor / seconds


def table(results: dict) -> str:
    lines = ["", "| path | seconds | questions/s | job tokens/s | of bf16 floor |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, path in results.get("paths", {}).items():
        if "questions_per_s" not in path:
            continue
        note = " (extrapolated)" if "extrapolated_from_contents" in path else ""
        of_floor = f"{path['of_floor']:.1%}" if "of_floor" in path else "-"
        lines.append(f"| {name}{note} | {path['seconds']:.3f} | {path['questions_per_s']:,.0f} | "
                     f"{path['tokens_per_s']:,.0f} | {of_floor} |")
    if "floor" in results:
        f = results["floor"]
        lines.append(f"| bf16 floor at {f['tflops_used']:.0f} TFLOP/s | {f['seconds']:.3f} | "
                     f"{f['questions_per_s']:,.0f} | | 100% |")
    attention = results.get("attention")
    if attention:
        lines.append(f"\nattention per layer and pass: Triton {attention['triton_ms_per_layer']} ms, FlexAttention "
                     f"{attention['flex_ms_per_layer']} ms (+ {attention['flex_block_mask_ms_per_pass']} ms block mask "
                     f"per pass); over the job: {attention['triton_job_seconds']} s vs "
                     f"{attention['flex_job_seconds']} s")
    job = results.get("job")
    if job:
        lines.append(f"job: {job['questions']} questions, {job['tokens']:,} tokens, {job['passes']} passes of "
                     f"{job['shape'][0]:,} rows (block {job['block']}), fill {job['fill']:.1%}")
    checks = [("kernel parity", results.get("kernel_parity", {}).get("ok")),
              ("model parity (<= 2e-2)", results.get("model_parity", {}).get("ok")),
              ("batch invariance", results.get("invariance", {}).get("ok")),
              ("invariance at 8B shape", _all_true(results.get("invariance_at_shape")))]
    lines.append("checks: " + ", ".join(f"{name} {'OK' if ok else 'FAILED' if ok is False else 'NOT RUN'}"
                                        for name, ok in checks))
    if results.get("errors"):
        lines.append("failed sections: " + "; ".join(f"{k}: {v}" for k, v in results["errors"].items()))
    lines.append(f"total {results.get('total_seconds', '?')} s")
    return "\n".join(lines)


def _all_true(section: dict | None) -> bool | None:
    if not section:
        return None
    return all(v for k, v in section.items() if isinstance(v, bool))
