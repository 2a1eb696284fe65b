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
  HBM at peak    also efficiency.hbm = 1 (pack and unpack at the HBM's peak rate: what the copies
                 cost on the critical path, pipeline fill and drain among it)
  NVLink at line also efficiency.nvlink = 1

What remains in the last row is the schedule's own: its groups (round synchronisation: a group
starts when both ends have finished their groups before it; a forwarded piece waits for the
group that brought it) and the placement's imbalance; `refit plan --schedule`'s lockstep time
(each group as long as its busiest rank at line rate) is printed beside it. The lane count is
the last column pair: the calibrated model with 1 and 4 lanes against its 2.

usage: /usr/bin/python3 experiments/executor_parts.py [--build DIR | --refit PATH] [--out DIR]
       [--extra ARGS]   (ARGS: more refit sim options for every run, e.g. "--slots 4")
writes OUT/executor_parts.{csv,txt}; progress on stderr (2613 s on the shared 2-core machine at
load 5-9; the recorded run: refit before the staging choice, i.e. --extra "--staging-mib 32").
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
    head = ("| platform | model | bound (s) | " + " | ".join(n for n, _ in STEPS) +
            " | lockstep | 1 lane | 4 lanes |")
    t.line("m2n, refit's executor model (%s): predicted s (x the bound), costs switched off "
           "left to right, each column keeping the ones before it off" %
           (" ".join(["refit sim --software refit --software-variant executor"] + extra)))
    t.line(head)
    t.line("|" + "---|" * (head.count("|") - 1))
    rows = []
    t0 = time.time()
    exe = ["--software", "refit", "--software-variant", "executor"]
    with tempfile.TemporaryDirectory() as tmp:
        for r in read_table(TABLE):
            sys.stderr.write("executor_parts: %s %s (%.0f s)\n" % (r["platform"], r["model"],
                                                                  time.time() - t0))
            args = (refit, r["model"], r["train_layout"], r["infer_layout"], r["platform"], ["m2n"])
            row = {"platform": r["platform"], "model": r["model"]}
            changes = {}
            for name, ch in STEPS:
                changes.update(ch)
                cal = calibration_copy(r["platform"], changes, tmp)
                x = sim(*args, extra=exe + extra + ["-c", cal])[0]["m2n"]
                row["bound_s"] = x["lower_bound_s"]
                row[name] = x["predicted_s"]
            plans, _ = refit_rows(refit, "plan", r["model"], r["train_layout"], r["infer_layout"],
                                  r["platform"], ["m2n"], ["--schedule"] + extra)
            row["lockstep"] = plans["m2n"]["schedule_lockstep_s"]
            for lanes in (1, 4):
                x = sim(*args, extra=exe + extra + ["--slots", str(lanes)])[0]["m2n"]
                row["%d lane%s" % (lanes, "" if lanes == 1 else "s")] = x["predicted_s"]
            rows.append(row)
            b = row["bound_s"]
            cells = [row[n] for n, _ in STEPS] + [row["lockstep"], row["1 lane"], row["4 lanes"]]
            t.line("| %s | %s | %.3f | %s |" % (r["platform"], r["model"], b, " | ".join(
                "%.3f (%.3fx)" % (v, v / b) for v in cells)))
    write_csv(os.path.join(a.out, a.name + ".csv"), rows)
    t.line("(x: ratio to the bound; wall %.0f s)" % (time.time() - t0))
    t.save()


if __name__ == "__main__":
    main()
