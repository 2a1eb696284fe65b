#!/usr/bin/env python3
"""Predicted against executed, without a GPU: `refit run` on the host backend with an emulated
network (`--emulate-network`: every rank's sends and receives paced at the topology's NIC and
NVLink rates, docs/real.md) beside `refit sim --software refit --software-variant executor`, the
simulator's model of the same schedule on the same topology and its calibration
(sim/calibration/<topology>.cal).

  /usr/bin/python3 experiments/emulated.py [--build DIR] [--case "MODEL TRAIN INFER"]...
      [--strategy S,...] [--topology emulated-2x4] [--iters 5] [--check 0.15]
  /usr/bin/python3 experiments/emulated.py --copy-rate     # the topology's hbm_GBps

Prints one row per (case, strategy): measured s (median over the timed iterations), predicted s,
their ratio; writes experiments/results/emulated.csv (--out). --check TOL: exit 1 when a ratio
lies outside [1 - TOL, 1 + TOL] (the CTest case `real_emulated` runs one case so). Every run
verifies every byte; a wrong element is a failure whatever the times.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, Table, add_refit_args, refit_path, write_csv  # noqa: E402

# Two or three small models, each on 8 or 6 ranks of two emulated NVLink domains of 4.
CASES = ["tiny-moe TP2xPP2 TP4", "tiny-mla TP2xPP2xEP2 TP2xDP2xEP4", "tiny-hybrid TP2xEP2 TP2xDP2"]
STRATEGIES = "gather-broadcast,p2p,m2n,hybrid"
LAUNCHER = "mpirun --allow-run-as-root --oversubscribe -np {n}"


def refit_json(cmd, env, what):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit("%s failed (exit %d): %s\n%s%s" % (what, out.returncode, " ".join(cmd),
                                                     out.stdout[-2000:], out.stderr[-2000:]))
    return {r["strategy"]: r for r in json.loads(out.stdout)["strategies"]}


def ranks_of(refit, model, train, infer, topology, env):
    """The plan's world size (training + inference ranks), from the header of `refit plan`."""
    cmd = [refit, "plan", "-m", model, "-t", train, "-i", infer, "-T", topology, "-s", "p2p"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"\(megatron, (\d+) ranks\) -> .*\(vllm, (\d+) ranks\)", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit("refit plan failed: %s\n%s" % (" ".join(cmd), out.stderr.strip()))
    return int(m.group(1)) + int(m.group(2))


def copy_rate():
    """The host's memory copy rate (pack and unpack run memcpy), best of 5 passes of 256 MiB per
    block size: Python's bytearray slice assignment is one memcpy per block. Bytes copied per
    second, each counted once; the emulated topology's [gpu] hbm_GBps is twice it (memory traffic,
    read + write, as the simulator reads hbm_GBps: rf_topology_copy_Bps)."""
    import time
    for size in (1 << 16, 1 << 20, 1 << 24):
        a, b = bytearray(b"\x01") * size, bytearray(size)
        n, best = max(1, (1 << 28) // size), float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                b[:] = a
            best = min(best, time.perf_counter() - t0)
        r = size * n / best / 1e9
        print("memcpy %8d B blocks: %.1f GB/s copied (hbm_GBps %.1f)" % (size, r, 2 * r))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_refit_args(ap)
    ap.add_argument("--case", action="append",
                    help='"MODEL TRAIN INFER" (repeatable; default: %s)' % "; ".join(CASES))
    ap.add_argument("--strategy", default=STRATEGIES, help="strategies (default all four)")
    ap.add_argument("--topology", default="emulated-2x4",
                    help="the emulated network (topologies/NAME.topo; default emulated-2x4)")
    ap.add_argument("--iters", type=int, default=5, help="timed refits per run (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed refits first (default 1)")
    ap.add_argument("--launcher", default=os.environ.get("REFIT_LAUNCHER", LAUNCHER),
                    help="MPI launcher, {n} = ranks (default: %s)" % LAUNCHER)
    ap.add_argument("--schedule", default="",
                    help='schedule options given to both run and sim, e.g. "--staging-mib 0.02 '
                    '--max-ops 4" (default: refit run\'s defaults)')
    ap.add_argument("--check", type=float, metavar="TOL",
                    help="exit 1 when a measured / predicted ratio is outside 1 +- TOL")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"),
                    help="directory for emulated.csv and emulated.txt")
    ap.add_argument("--name", default="emulated", help="file name stem in --out (default emulated)")
    ap.add_argument("--copy-rate", action="store_true",
                    help="only measure the host's memcpy rate (the topology's hbm_GBps) and exit")
    a = ap.parse_args()
    if a.copy_rate:
        return copy_rate()
    refit = refit_path(a)
    env = dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT))
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    os.makedirs(a.out, exist_ok=True)
    t = Table(os.path.join(a.out, a.name + ".txt"))
    t.line("# refit run --emulate-network (host backend, measured: median of %d timed refits after "
           "%d warm-up) against refit sim --software refit --software-variant executor "
           "(predicted), topology %s" % (a.iters, a.warmup, a.topology))
    t.line("# command: /usr/bin/python3 experiments/emulated.py %s" % " ".join(
        shlex.quote(x) for x in sys.argv[1:]))
    t.line("%-34s %-17s %6s %11s %11s %11s %7s %7s" % (
        "case", "strategy", "ranks", "measured", "predicted", "bound", "ratio", "#wrong"))
    t.line("%-34s %-17s %6s %11s %11s %11s %7s %7s" % ("", "", "", "(s)", "(s)", "(s)", "", ""))
    rows, bad = [], []
    for case in a.case or CASES:
        model, train, infer = case.split()
        base = ["-m", model, "-t", train, "-i", infer, "-T", a.topology, "-s", a.strategy]
        base += shlex.split(a.schedule)
        n = ranks_of(refit, model, train, infer, a.topology, env)
        launch = shlex.split(a.launcher.format(n=n))
        run = refit_json(launch + [refit, "run", "-q", "--json", "--emulate-network",
                                   "--iters", str(a.iters), "--warmup", str(a.warmup)] + base,
                         env, "refit run")
        sim = refit_json([refit, "sim", "-q", "--json", "--software", "refit",
                          "--software-variant", "executor"] + base, env, "refit sim")
        for s in a.strategy.split(","):
            r, p = run[s], sim[s]
            if "error" in r or "error" in p:
                sys.exit("%s %s: %s" % (case, s, r.get("error") or p.get("error")))
            ratio = r["measured_s"] / p["predicted_s"]
            wrong = r["wrong_elements"] + r["wrong_previous_elements"]
            t.line("%-34s %-17s %6d %11.4f %11.4f %11.4f %7.3f %7d" % (
                case, s, n, r["measured_s"], p["predicted_s"], p["lower_bound_s"], ratio, wrong))
            rows.append({"model": model, "train": train, "infer": infer, "strategy": s,
                         "ranks": n, "topology": a.topology, "iterations": r["iterations"],
                         "measured_s": r["measured_s"], "min_s": r["min_s"], "max_s": r["max_s"],
                         "predicted_s": p["predicted_s"], "ratio": round(ratio, 4),
                         "lower_bound_s": p["lower_bound_s"], "groups": r["groups"],
                         "payload_bytes": r["payload_bytes"], "wrong_elements": wrong})
            if wrong:
                bad.append("%s %s: %d wrong elements" % (case, s, wrong))
            elif a.check is not None and abs(ratio - 1) > a.check:
                bad.append("%s %s: measured / predicted %.3f, outside 1 +- %g" % (
                    case, s, ratio, a.check))
    ratios = [r["ratio"] for r in rows]
    t.line("# %d rows: measured / predicted %.3f .. %.3f, mean |ratio - 1| %.1f%%, %d within 15%%" % (
        len(rows), min(ratios), max(ratios),
        100 * sum(abs(x - 1) for x in ratios) / len(ratios),
        sum(abs(x - 1) <= 0.15 for x in ratios)))
    for b in bad:
        t.line("# FAILED: " + b)
    t.line("# " + ("OK" if not bad else "FAILED"))
    write_csv(os.path.join(a.out, a.name + ".csv"), rows)
    t.save()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
