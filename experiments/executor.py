#!/usr/bin/env python3
"""refit's own strategies on the four reported configurations: the flow model of `refit sim`
(`--software refit`, what the strategy could do) beside the schedule `refit run` executes
(`--software-variant executor`: every rank's program of pack / post / wait / unpack, groups in
flight on staging lanes, stages pipelined; and `--staged`, m2n's stages one after another),
against the physical network bound (the plan's lower bound) and the schedule's lockstep time
(`refit plan --schedule`: the sum over groups of the slowest rank's bytes at line rate, what the
schedule would take with no loss but its groups'), NVIDIA's reported reshard time and
the published-software model's prediction of it (the hybrid row of
experiments/results/reproduce.csv, written by `sh experiments/main.sh`), with the speedup of the
default executor (lanes on communicators of their own, refit run's default since 2026-12-04;
the staging and lanes chosen) over that prediction. The `--slots` columns and the staged one run
on one communicator (`--one-comm`, the default before).

usage: /usr/bin/python3 experiments/executor.py [--build DIR | --refit PATH] [--slots 1,2,4]
       [--out experiments/results]
writes OUT/executor.{csv,txt}; progress on stderr (about 5 minutes on 2 cores, the events engine).
"""
import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, Table, add_refit_args, refit_path, refit_rows, sim, write_csv  # noqa: E402
from reproduce import TABLE, read_table  # noqa: E402


def lockstep(refit, model, train, infer, topology, strategies):
    """{strategy: lockstep time of refit run's schedule} from `refit plan --schedule`."""
    plans, _ = refit_rows(refit, "plan", model, train, infer, topology, strategies, ["--schedule"])
    return {st: x["schedule_lockstep_s"] for st, x in plans.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--slots", default="1,2", help="staging lanes to simulate (comma list)")
    ap.add_argument("--strategies", default="m2n,p2p")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    a = ap.parse_args()
    refit = refit_path(a)
    slots = [int(s) for s in a.slots.split(",")]
    strategies = a.strategies.split(",")
    os.makedirs(a.out, exist_ok=True)
    t = Table(os.path.join(a.out, "executor.txt"))
    head = "| platform | model | strategy | bound (s) | schedule lockstep (s) | flow model (s) | " + \
        " | ".join(
        "executor, one comm, %d lane%s (s)" % (s, "" if s == 1 else "s") for s in slots) + \
        " | executor staged, one comm, 2 lanes (s) | **executor, default** (lane communicators," \
        " chosen) (s) | reported reshard (s) | published-software prediction (s) | speedup" \
        " over it |"
    t.line(head)
    t.line("|" + "---|" * (head.count("|") - 1))
    published = {}  # (platform, model) -> the published-software prediction of the reshard row
    rp = os.path.join(ROOT, "experiments", "results", "reproduce.csv")
    if os.path.exists(rp):
        with open(rp) as f:
            for x in csv.DictReader(f):
                if x["strategy"] == "hybrid" and x["predicted_s"]:
                    published[(x["platform"], x["model"])] = float(x["predicted_s"])
    rows = []
    t0 = time.time()
    for r in read_table(TABLE):
        sys.stderr.write("executor: %s %s (%.0f s)\n" % (r["platform"], r["model"], time.time() - t0))
        args = (refit, r["model"], r["train_layout"], r["infer_layout"], r["platform"], strategies)
        flows, _ = sim(*args, extra=["--software-variant", "flows"])
        lock = lockstep(*args)
        ex = {s: sim(*args, extra=["--software", "refit", "--software-variant", "executor",
                                   "--one-comm", "--slots", str(s)])[0] for s in slots}
        staged = sim(refit, r["model"], r["train_layout"], r["infer_layout"], r["platform"],
                     ["m2n"], extra=["--software", "refit", "--software-variant", "executor",
                                     "--one-comm", "--slots", "2", "--staged"])[0]
        dflt = sim(*args, extra=["--software", "refit", "--software-variant", "executor"])[0]
        for st in strategies:
            bound = flows[st]["lower_bound_s"]
            row = {"platform": r["platform"], "model": r["model"], "strategy": st,
                   "bound_s": bound, "flows_s": flows[st]["predicted_s"]}
            for s in slots:
                row["executor_%d_s" % s] = ex[s][st]["predicted_s"]
            row["executor_staged_2_s"] = staged["m2n"]["predicted_s"] if st == "m2n" else ""
            row["executor_default_s"] = dflt[st]["predicted_s"]
            row["executor_default_model"] = dflt[st].get("predicted_by", "")
            row["reported_reshard_s"] = float(r["reshard_s"])
            pub = published.get((r["platform"], r["model"]))
            row["published_software_s"] = pub if pub is not None else ""
            row["speedup_over_published"] = (pub / row["executor_default_s"]
                                             if pub is not None else "")
            row["lockstep_s"] = lock[st]
            rows.append(row)
            cells = ["%.2f (%.2fx)" % (row["executor_%d_s" % s], row["executor_%d_s" % s] / bound)
                     for s in slots]
            stg = ("%.2f (%.2fx)" % (row["executor_staged_2_s"], row["executor_staged_2_s"] / bound)
                   if st == "m2n" else "(= pipelined)")
            pub_cells = ("%.2f | %.1fx" % (row["published_software_s"],
                                           row["speedup_over_published"])
                         if row["speedup_over_published"] != "" else "- | -")
            t.line("| %s | %s | %s | %.2f | %.2f (%.2fx) | %.2f (%.2fx) | %s | %s | **%.3f (%.3fx)**"
                   " | %.1f | %s |" % (
                       r["platform"], r["model"], st, bound, lock[st], lock[st] / bound,
                       row["flows_s"], row["flows_s"] / bound, " | ".join(cells), stg,
                       row["executor_default_s"], row["executor_default_s"] / bound,
                       row["reported_reshard_s"], pub_cells))
    write_csv(os.path.join(a.out, "executor.csv"), rows)
    t.line("(x: ratio to the bound; wall %.0f s)" % (time.time() - t0))
    t.save()


if __name__ == "__main__":
    main()
