#!/usr/bin/env python3
"""How finely refit's executor model resolves a prediction at scale.

On the four reported configurations, `refit sim`'s default prediction of m2n (refit's executor on
the events engine, a communicator per lane) at the calibrated NIC efficiency and at that
efficiency changed by one part in a billion either way (copies of the calibration file, passed
with `-c`). The efficiency scales only the simulated NIC links: the plan, the schedule and the
staging choice read the topology's rates (the staging's bandwidth-delay rule rounds to a power of
two), and each run's groups, messages, flows, bytes and memory are checked equal. (A copy of the
topology with its NIC rate changed is not such a test: the schedule's NVLink share per round,
900 / 50 / 2 = 9 on GB200, is truncated, and at 1 + 1e-9 it becomes 8.) What the change moves is
the order of events at equal times, and so which group a rank posts next. The spread of the
three predictions is how many digits of a prediction carry meaning. With `--simgrid` each row is
also run on SimGrid's exact model (`--engine simgrid --group 1`, 1-8 min each on lane
communicators), whose difference from the events engine is then read against that spread
(docs/sim.md, "The events engine").

With `--scale` two rows at 2,048 ranks follow: Kimi K3 and Qwen3.8 2.4T, TP8xPP16xEP64 ->
TP32xDP32 on 1,024 + 1,024 GB200 (experiments/executor_scale.py's configurations), without
SimGrid (an hour a row there).

usage: /usr/bin/python3 experiments/resolution.py [--build DIR | --refit PATH] [--simgrid]
       [--scale] [--strategy m2n] [--out DIR]
writes DIR/resolution.{csv,txt} (default experiments/results); the committed files are of
`--simgrid --scale`
"""
import argparse
import math
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (ROOT, Table, add_refit_args, calibration_copy,  # noqa: E402
                    calibration_value, refit_path, sim, write_csv)

CONFIGS = [
    ("dgx-h100", "qwen3-235b-a22b", "TP4xPP8xEP16", "TP8xDP16"),
    ("dgx-h100", "deepseek-v3", "PP16xEP16", "TP32xDP8"),
    ("gb200-nvl72", "deepseek-v3", "PP16xEP16", "TP32xDP8"),
    ("gb200-nvl72", "nemotron-3-ultra", "TP8xEP32xPP2", "TP8xDP8"),
]
SCALE = [
    ("gb200-nvl72", "kimi-k3", "TP8xPP16xEP64", "TP32xDP32"),
    ("gb200-nvl72", "qwen3.8-2.4t-a95b", "TP8xPP16xEP64", "TP32xDP32"),
]
REL = 1e-9  # the change of the NIC efficiency
# what must not move: the schedule's groups, its messages and flows, the bytes, the memory
SAME = ("reshard_calls", "messages", "sim_flows", "network_bytes", "refit_extra_bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--simgrid", action="store_true",
                    help="also run SimGrid's exact model on each row (1-8 min a row)")
    ap.add_argument("--scale", action="store_true",
                    help="also Kimi K3 and Qwen3.8 2.4T on 1,024 + 1,024 GB200 (no SimGrid)")
    ap.add_argument("--strategy", default="m2n", help="the strategy predicted (default m2n)")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    a = ap.parse_args()
    refit = refit_path(a)
    os.makedirs(a.out, exist_ok=True)
    t = Table(os.path.join(a.out, "resolution.txt"))
    t.line("## refit's executor model (the default: events engine, a communicator per lane), "
           "%s, with the calibrated NIC efficiency changed by %g" % (a.strategy, REL))
    t.line("")
    head = "| platform | model | train | infer | predicted (s) | NIC eff. x (1 + %g) | x (1 - %g) " \
           "| spread |" % (REL, REL)
    if a.simgrid:
        head += " SimGrid exact (s) | events - SimGrid |"
    t.line(head)
    t.line("|" + "---|" * (head.count("|") - 1))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=2) as ex:
        for platform, model, train, infer in CONFIGS + (SCALE if a.scale else []):
            scale = (platform, model, train, infer) in SCALE
            got, first = {}, None
            nic = calibration_value(platform, "efficiency", "nic")
            runs = (("base", 1.0), ("up", 1 + REL), ("down", 1 - REL))
            extras = [[] if factor == 1.0 else ["-c", calibration_copy(
                platform, {("efficiency", "nic"): "%.12g" % (nic * factor)}, tmp)]
                for _, factor in runs]
            outs = ex.map(lambda e: sim(refit, model, train, infer, platform, [a.strategy], e)[0],
                          extras)
            for (name, _), res in zip(runs, outs):
                r = res[a.strategy]
                got[name] = r["predicted_s"]
                same = tuple(r.get(k) for k in SAME)
                if first is None:
                    first = same
                elif same != first:
                    sys.exit("resolution.py: %s %s: the change moved the schedule or memory too "
                             "(%s: %s against %s)" % (platform, model, ", ".join(SAME), same,
                                                      first))
            base = got["base"]
            spread = max(abs(got["up"] - base), abs(got["down"] - base)) / base
            r = {"platform": platform, "model": model, "train": train, "infer": infer,
                 "strategy": a.strategy, "predicted_s": base, "nic_up_s": got["up"],
                 "nic_down_s": got["down"], "spread": spread, "simgrid_s": "",
                 "events_vs_simgrid": ""}
            line = "| %s | %s | %s | %s | %.7f | %.7f | %.7f | %.1e |" % (
                platform, model, train, infer, base, got["up"], got["down"], spread)
            if a.simgrid and scale:
                line += " - | - |"
            elif a.simgrid:
                res, _ = sim(refit, model, train, infer, platform, [a.strategy],
                             ["--engine", "simgrid", "--group", "1"])
                sg = res[a.strategy]["predicted_s"]
                r["simgrid_s"], r["events_vs_simgrid"] = sg, (base - sg) / sg
                line += " %.7f | %+.1e |" % (sg, (base - sg) / sg)
            t.line(line)
            rows.append(r)
    t.line("")
    worst = max(r["spread"] for r in rows)
    t.line("largest spread %.1e: digits of a prediction past about %d significant carry no "
           "meaning" % (worst, max(1, round(-math.log10(max(worst, 1e-12))))))
    if a.simgrid:
        t.line("largest |events - SimGrid| %.1e" % max(abs(r["events_vs_simgrid"]) for r in rows
                                                         if r["simgrid_s"] != ""))
        if a.scale:
            t.line("(SimGrid's exact model not run at 2,048 ranks: about an hour a row)")
    t.save()
    write_csv(os.path.join(a.out, "resolution.csv"), rows)


if __name__ == "__main__":
    main()
