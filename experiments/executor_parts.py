#!/usr/bin/env python3
"""Where refit's executor loses against the physical bound: m2n's executor model (`refit sim
--software refit --software-variant executor`, the schedule `refit run` executes) on the four
reported configurations, with its costs switched off one after another through calibration
files (each row keeps the ones before it off):

  calibrated     the topology's calibration (sim/calibration/TOPOLOGY.cal) as refit sim runs it
  NIC at line    efficiency.nic = 1 (the calibrated NIC efficiency: the flows' own loss)
  no op costs    also latency.message_s and [executor] kernel_launch_s, event_record_s,
                 stream_wait_s, group_host_s, stream_wait_gpu_s = 0 (the per-group and per-copy
                 costs)
  HBM at peak    also efficiency.hbm = 1 (pack and unpack at half the HBM's peak rate, a copy
                 reading and writing each byte: what the copies' efficiency costs on the critical
                 path, pipeline fill and drain among it)
  NVLink at line also efficiency.nvlink = 1

What remains in the last row is the schedule's own: its groups (round synchronisation: a group
starts when both ends have finished their groups before it; a forwarded piece waits for the
group that brought it) and the placement's imbalance; `refit plan --schedule`'s lockstep time
(each group as long as its busiest rank at line rate) is printed beside it, where refit plan's
choice (refit run's default) is the one the runs here made ("-" elsewhere, and with --extra). Every column runs
the staging bound, lanes and operation bound the calibrated run chose (refit sim's JSON
`staging_bound_bytes`, `lanes`, `max_ops`, passed as --staging-mib, --slots, --max-ops): refit
run chooses them from the per-group costs, so switching the costs off would otherwise change the
schedule too. The last columns are the calibrated model at 1, 2, 4 and 8 lanes, the staging bound
and operation bound held (the chosen count's column is the calibrated run).

usage: /usr/bin/python3 experiments/executor_parts.py [--build DIR | --refit PATH] [--out DIR]
       [--extra=ARGS]   (ARGS: more refit sim options for every run, e.g. --extra=--one-comm;
                         with --staging-mib, --slots or --max-ops in ARGS nothing is pinned)
writes OUT/executor_parts.{csv,txt} (--name: another name); progress on stderr (136-146 s on the
2-core machine of 2026-12-05; 27 s with --extra=--one-comm, whose 32 MiB groups are fewer).
"""
import argparse
import os
import shlex
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (ROOT, Table, add_refit_args, calibration_copy, refit_path,  # noqa: E402
                    refit_rows, sim, write_csv)
from reproduce import TABLE, read_table  # noqa: E402

STEPS = [
    ("calibrated", {}),
    ("NIC at line", {("efficiency", "nic"): "1"}),
    ("no op costs", {("latency", "message_s"): "0", ("executor", "kernel_launch_s"): "0",
                     ("executor", "event_record_s"): "0", ("executor", "stream_wait_s"): "0",
                     ("executor", "group_host_s"): "0", ("executor", "stream_wait_gpu_s"): "0"}),
    ("HBM at peak", {("efficiency", "hbm"): "1"}),
    ("NVLink at line", {("efficiency", "nvlink"): "1"}),
]
LANES = (1, 2, 4, 8)  # staging lanes (refit run --slots; 8 is RF_SCHEDULE_MAX_SLOTS)


def lanes_name(n):
    return "%d lane%s" % (n, "" if n == 1 else "s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    ap.add_argument("--extra", default="", help="more refit sim options for every run")
    ap.add_argument("--name", default="executor_parts", help="output file name (no extension)")
    a = ap.parse_args()
    refit = refit_path(a)
    extra = shlex.split(a.extra)
    os.makedirs(a.out, exist_ok=True)
    t = Table(os.path.join(a.out, a.name + ".txt"))
    head = ("| platform | model | staging, lanes, max ops (calibrated choice) | bound (s) | " +
            " | ".join(n for n, _ in STEPS) + " | lockstep | " +
            " | ".join(lanes_name(n) for n in LANES) + " |")
    t.line("m2n, refit's executor model (%s): predicted s (x the bound), costs switched off "
           "left to right, each column keeping the ones before it off" %
           (" ".join(["refit sim --software refit --software-variant executor"] + extra)))
    t.line(head)
    t.line("|" + "---|" * (head.count("|") - 1))
    rows = []
    t0 = time.time()
    exe = ["--software", "refit", "--software-variant", "executor"]
    pinned = not any(x.split("=")[0] in ("--staging-mib", "--slots", "--max-ops") for x in extra)
    with tempfile.TemporaryDirectory() as tmp:
        for r in read_table(TABLE):
            sys.stderr.write("executor_parts: %s %s (%.0f s)\n" % (r["platform"], r["model"],
                                                                  time.time() - t0))
            args = (refit, r["model"], r["train_layout"], r["infer_layout"], r["platform"], ["m2n"])
            row = {"platform": r["platform"], "model": r["model"], "staging_mib": None,
                   "lanes": None, "max_ops": None, "bound_s": None}
            changes, pins = {}, []
            for name, ch in STEPS:
                changes.update(ch)
                cal = calibration_copy(r["platform"], changes, tmp)
                lanes = ["--slots", str(row["lanes"])] if pins else []
                x = sim(*args, extra=exe + extra + pins + lanes + ["-c", cal])[0]["m2n"]
                row["bound_s"] = x["lower_bound_s"]
                row[name] = x["predicted_s"]
                if name == "calibrated":
                    row["staging_mib"] = x["staging_bound_bytes"] / 1048576
                    row["lanes"], row["max_ops"] = x["lanes"], x["max_ops"]
                    if pinned:
                        pins = ["--staging-mib", "%.6g" % row["staging_mib"], "--max-ops",
                                str(row["max_ops"])]
            plans, _ = refit_rows(refit, "plan", r["model"], r["train_layout"], r["infer_layout"],
                                  r["platform"], ["m2n"], ["--schedule"])
            q = plans["m2n"]  # refit run's default choice: "-" where the runs above differ
            same = (not extra and q["schedule_staging_bytes"] == row["staging_mib"] * 1048576 and
                    q["schedule_lanes"] == row["lanes"] and q["schedule_max_ops"] == row["max_ops"])
            row["lockstep"] = q["schedule_lockstep_s"] if same else None
            for n in LANES:  # the chosen count's is the calibrated run
                row[lanes_name(n)] = row["calibrated"] if n == row["lanes"] else sim(
                    *args, extra=exe + extra + pins + ["--slots", str(n)])[0]["m2n"]["predicted_s"]
            rows.append(row)
            b = row["bound_s"]
            cells = ([row[n] for n, _ in STEPS] + [row["lockstep"]] +
                     [row[lanes_name(n)] for n in LANES])
            t.line("| %s | %s | %.6g MiB x %d, %d ops | %.3f | %s |" % (
                r["platform"], r["model"], row["staging_mib"], row["lanes"], row["max_ops"], b,
                " | ".join("-" if v is None else "%.3f (%.3fx)" % (v, v / b) for v in cells)))
    write_csv(os.path.join(a.out, a.name + ".csv"), rows)
    t.line("(x: ratio to the bound; wall %.0f s)" % (time.time() - t0))
    t.save()


if __name__ == "__main__":
    main()
