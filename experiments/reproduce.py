#!/usr/bin/env python3
"""Reproduce the reported refit table (experiments/reported-refit.csv) with `refit sim`.

Each row is predicted with the model of the published software that produced it
(`--software nemo-rl`, docs/sim.md): the baseline is NeMo RL's gather + broadcast, the reshard
row NeMo RL's nccl_reshard hybrid with the code path (variant) the evidence points to; the other
variants' predictions, refit's own hybrid (its executor, refit sim's default) and the network
lower bound stand beside it. Nothing here is fitted to the table: the calibration files are
fitted on experiments/calibration-set.csv.

usage: /usr/bin/python3 experiments/reproduce.py [--build DIR | --refit PATH] [--out experiments/results] [--json]
  (the build directory defaults to $REFIT_BUILD, else build/)
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (ROOT, Table, add_refit_args, pyplot, refit_path, write_csv,  # noqa: E402
                    write_error_summary)

TABLE = os.path.join(ROOT, "experiments", "reported-refit.csv")
VARIANTS = ["python-fallback", "m2n-pack"]

# Which code produced each reported reshard row, and on what evidence (sources: NVIDIA-NeMo/RL
# PR #2971 and docs/design-docs/nccl-reshard-refit.md; NVIDIA/nccl-extensions
# nccl_m2n/src/reshard_limits.h).
ATTRIBUTION = {
    ("dgx-h100", "deepseek-v3"): (
        "python-fallback",
        "design-doc H100 DSV3 2.39-2.83 s (midpoint 2.61) sits in the table merged by PR #2971, "
        "whose H100 table is headed 'xferdtensor_python_impl (fallback path)'"),
    ("gb200-nvl72", "nemotron-3-ultra"): (
        "python-fallback",
        "EP32 puts 32 source shards on one destination shard, above M2N MAX_SOURCES 16: the "
        "PACK / RING call fails, so only the Python fallback can have run it"),
    ("gb200-nvl72", "deepseek-v3"): (
        "python-fallback",
        "open: the design doc does not name the path on GB200; taken from the same table as the "
        "H100 row (python fallback); m2n-pack beside it"),
    ("dgx-h100", "qwen3-235b-a22b"): (
        "python-fallback",
        "open: no public run of this layout at 1.9 s; most likely the same H100 fallback table "
        "(the PR #2413 golden run of this layout took 4.56-4.85 s)"),
}


def read_table(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rows.append(line.strip())
    return list(csv.DictReader(rows))


def run(refit, row, strategy, extra):
    cmd = [refit, "sim", "-q", "--json", "-m", row["model"], "-t", row["train_layout"], "-i",
           row["infer_layout"], "-T", row["platform"], "-s", strategy] + extra
    env = dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT))
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - t0
    if out.returncode == 2 and "cannot run" in out.stderr:
        return {"cannot": out.stderr.strip().split(": ", 1)[-1]}, wall
    if out.returncode != 0:
        sys.exit("refit sim failed: %s\n%s" % (" ".join(cmd), out.stderr.strip()))
    return json.loads(out.stdout), wall


def fmt(r):
    return "cannot run" if "cannot" in r else "%.2f" % r["predicted_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    ap.add_argument("--table", default=TABLE)
    ap.add_argument("--calibration", help="calibration file for every row (default: per topology)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON on stdout")
    a = ap.parse_args()
    a.refit = refit_path(a)
    os.makedirs(a.out, exist_ok=True)
    extra = ["--calibration", a.calibration] if a.calibration else []
    table = read_table(a.table)
    t0 = time.time()
    jobs = []
    for row in table:
        jobs.append((row, "gather-broadcast", ["--software", "nemo-rl"]))
        for v in VARIANTS:
            jobs.append((row, "hybrid", ["--software", "nemo-rl", "--software-variant", v]))
        jobs.append((row, "hybrid", []))  # refit's own, by refit sim's default: its executor
    # refit's own hybrid rows first: the executor on the events engine takes most of the time
    # (DeepSeek-V3 H100 about 45 s of the ~70), the published-software rows 1-2 s each fill in
    # beside it; results keep the jobs' order
    with ThreadPoolExecutor(max_workers=2) as ex:
        futs = {}
        for i in sorted(range(len(jobs)), key=lambda i: bool(jobs[i][2])):
            futs[i] = ex.submit(run, a.refit, jobs[i][0], jobs[i][1], jobs[i][2] + extra)
        res = [futs[i].result() for i in range(len(jobs))]
    wall = time.time() - t0
    out_rows, errors = [], []
    report = Table(os.path.join(a.out, "reproduce.txt"))
    report.line("# refit sim --software nemo-rl vs the reported table (calibration: "
                "sim/calibration/<platform>.cal, fitted on experiments/calibration-set.csv only)")
    report.line("# %-12s %-17s %-14s %-10s %-17s %8s %9s %7s  %-15s %8s %8s %8s %8s" % (
        "platform", "model", "train", "infer", "strategy", "reported", "predicted", "err(%)",
        "variant", "pyfb", "m2n-pack", "refit", "bound"))
    k = 0
    for row in table:
        gb, _ = res[k]
        var = {v: res[k + 1 + i][0] for i, v in enumerate(VARIANTS)}
        own, _ = res[k + 1 + len(VARIANTS)]
        k += 2 + len(VARIANTS)
        chosen, why = ATTRIBUTION.get((row["platform"], row["model"]),
                                      ("python-fallback", "no evidence: the NeMo RL default"))
        for strat, col in (("gather-broadcast", "baseline_s"), ("hybrid", "reshard_s")):
            r = gb if strat == "gather-broadcast" else var[chosen]
            rep = float(row[col])
            pred = r["predicted_s"]
            err = 100.0 * (pred - rep) / rep
            errors.append(abs(err))
            rec = {
                "platform": row["platform"], "model": row["model"], "train": row["train_layout"],
                "infer": row["infer_layout"], "strategy": strat, "software": "nemo-rl",
                "variant": chosen if strat == "hybrid" else "",
                "why": why if strat == "hybrid" else "NeMo RL gather + packed broadcast",
                "reported_s": rep, "predicted_s": round(pred, 4), "error_pct": round(err, 1),
                "python_fallback_s": fmt(var["python-fallback"]) if strat == "hybrid" else "",
                "m2n_pack_s": fmt(var["m2n-pack"]) if strat == "hybrid" else "",
                "refit_hybrid_s": round(own["predicted_s"], 4) if strat == "hybrid" else "",
                "refit_hybrid_model": own["predicted_by"] if strat == "hybrid" else "",
                "lower_bound_s": round(r["lower_bound_s"], 4),
                "software_s": round(r.get("software_s", 0), 3),
            }
            out_rows.append(rec)
            report.line("  %-12s %-17s %-14s %-10s %-17s %8.2f %9.2f %7.1f  %-15s %8s %8s %8s %8.2f"
                        % (rec["platform"], rec["model"], rec["train"], rec["infer"], strat, rep,
                           pred, err, rec["variant"] or "-", rec["python_fallback_s"] or "-",
                           rec["m2n_pack_s"] or "-", rec["refit_hybrid_s"] or "-",
                           rec["lower_bound_s"]))
    report.line("# refit: refit's own hybrid by refit sim's default model (%s)" % ", ".join(
        sorted({r["refit_hybrid_model"] for r in out_rows if r["refit_hybrid_model"]})))
    report.line("# mean |error| %.1f %%, max |error| %.1f %%; within 15%%: %d of %d; within 10%%: %d "
                "of %d; %.1f s wall" % (sum(errors) / len(errors), max(errors),
                                       sum(e <= 15 for e in errors), len(errors),
                                       sum(e <= 10 for e in errors), len(errors), wall))
    for row in table:
        c, why = ATTRIBUTION.get((row["platform"], row["model"]), ("", ""))
        report.line("# variant %s / %s: %s: %s" % (row["platform"], row["model"], c, why))
    csv_path = os.path.join(a.out, "reproduce.csv")
    write_csv(csv_path, out_rows)
    if not a.calibration and os.path.abspath(a.table) == os.path.abspath(TABLE):
        write_model_summary(os.path.join(a.out, "reproduce-models.csv"), out_rows)
    png = os.path.join(a.out, "reproduce.png")
    if not plot(out_rows, png):
        png = "(no PNG)"
    report.save()
    if a.json:
        print(json.dumps({"rows": out_rows}, indent=1))
    print("# wrote %s, %s and %s" % (csv_path, png, report.path), file=sys.stderr)


def write_model_summary(path, rows):
    """Mean and max |error| on the reported table per (software, path): the variant for the
    hybrid rows, "gather-broadcast" for NeMo RL's collective path (no variant applies to it).
    What refit sim, advise and step print beside a prediction of that model, after
    validate-public's figures (cli/predict.c reads it). Written only for the default table and
    calibrations: nothing here is fitted to the table."""
    by = {}
    for r in rows:
        key = (r["software"], r["variant"] or r["strategy"])
        by.setdefault(key, []).append(abs(r["error_pct"]))
    write_error_summary(path, by)


def plot(rows, png):
    plt = pyplot(png)
    if plt is None:
        return False
    labels = ["%s\n%s\n%s" % (r["platform"], r["model"], r["strategy"]) for r in rows]
    x = range(len(rows))
    w = 0.38
    fig, ax = plt.subplots(figsize=(12, 4.8))
    ax.bar([i - w / 2 for i in x], [r["reported_s"] for r in rows], w, label="reported",
           color="#999999")
    ax.bar([i + w / 2 for i in x], [r["predicted_s"] for r in rows], w,
           label="predicted (refit sim --software nemo-rl)", color="#4c72b0")
    for i, r in enumerate(rows):
        ax.text(i + w / 2, r["predicted_s"], "%+.0f%%" % r["error_pct"], ha="center",
                va="bottom", fontsize=8)
        if r["strategy"] == "hybrid":
            try:
                ax.plot([i + w / 2], [float(r["m2n_pack_s"])], "v", color="#c44e52", ms=5)
            except ValueError:
                pass
    ax.plot([], [], "v", color="#c44e52", label="m2n-pack variant")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("refit time (s)")
    ax.set_title("Reported refit times vs the published-software model (not fitted to this table)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    return True


if __name__ == "__main__":
    main()
