#!/usr/bin/env python3
"""Random-argument driver for the refit CLI (issue 10): runs N invocations built from the
commands' real flags with valid, invalid and hostile values, under a fixed seed, and fails on a
crash (signal), a sanitizer report, a GLib critical/warning, an exit status outside the
documented scheme (0 ok, 1 runtime, 2 bad input, 3 verification), or a failure with no message.

usage: cli_random.py REFIT_BINARY [--count N] [--seed S] [--timeout S]"""
import argparse
import os
import random
import subprocess
import sys

MODELS = ["tiny-moe", "tiny-mla", "tiny-hybrid", "tiny-kimi", "tiny-next", "qwen3-30b-a3b",
          "nope", "", "/dev/zero", "/nonexistent.json", "tests/data/small-spec.json"]
LAYOUTS = ["TP1", "TP2", "TP4", "TP2xPP2", "TP2xEP4", "PP2xEP2", "TP4xDP2", "TP2xDP2xEP4",
           "TP64", "TP0", "TP-1", "TP+2", "TP 2", "TP02", "TPx", "TP2xTP2", "EP3", "DP2",
           "TP1048576xCP1048576xEP1048576xETP1048576", "TP65536xDP65536xEP1", "",
           "TP2\u00e9", "tp2", "TP2xPP2xCP2xETP2"]
TOPOS = ["dgx-h100", "gb200-nvl72", "gb200-nvl72-800g", "nope", "/dev/null",
         "tests/data/sim/bad-nic.topo", "tests/data/sim/golden.topo"]
STRATS = ["all", "m2n", "p2p", "gather-broadcast", "hybrid", "m2n,p2p", "m2n,m2n", "x", ""]
NUMS = ["0", "1", "2", "8", "-1", "abc", "nan", "inf", "1e400", "2147483647",
        "99999999999999999999", "0x10", "\u00e9"]
GARBAGE = ["--", "-", "--nope", "-z", "\u00e9\u00e9", "x" * 300, "--model", "%s%n"]

COMMON = [("--model", MODELS), ("--train", LAYOUTS), ("--infer", LAYOUTS),
          ("--topology", TOPOS), ("--strategy", STRATS), ("--domain-size", NUMS),
          ("--json", None), ("--quiet", None)]
PLAN = COMMON + [("--verify", None), ("--bcast-channels", NUMS),
                 ("--spec", ["tests/data/small-spec.json", "/dev/zero", "nope.json", "README.md"])]
SIM = PLAN + [("--timeline", ["", "/tmp", "/nonexistent/x.png"])]
RUN = [(f, v if f != "--model" else MODELS[:5] + MODELS[6:]) for f, v in COMMON] + [("--local", None), ("--iters", NUMS), ("--warmup", NUMS),
                ("--staging-mib", NUMS), ("--max-ops", NUMS), ("--timeout", NUMS),
                ("--memory", None), ("--csv", None), ("--test-drop", NUMS)]
COMMANDS = {"model": None, "plan": PLAN, "sim": SIM, "run": RUN,
            "calibrate": [("--measurements", ["tests/data/sim/measured-tiny.csv", "/dev/zero",
                                              "README.md", "nope.csv"]),
                          ("--param", ["refit.fixed_s", "nope", ""]),
                          ("--iterations", NUMS)]}
BAD_MARKERS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "GLib-CRITICAL",
               "GLib-WARNING", "GLib-GObject-CRITICAL", "Json-CRITICAL", "Segmentation fault")


def argv_for(rng):
    cmd = rng.choice(list(COMMANDS))
    if cmd == "model":
        sub = rng.choice(["list", "show", "show", "nope", ""])
        args = ["model", sub] + ([rng.choice(MODELS)] if sub == "show" else [])
        if rng.random() < 0.3:
            args.append("--json")
        return args
    args = [cmd]
    flags = COMMANDS[cmd]
    # mostly a plausible run: model + layouts, then a few random flags
    if cmd in ("plan", "sim", "run") and rng.random() < 0.7:
        # `run` moves real bytes: tiny models only, so an invocation takes seconds
        models = MODELS[:5] if cmd == "run" else MODELS[:6]
        args += ["--model", rng.choice(models), "--train", rng.choice(LAYOUTS[:8]),
                 "--infer", rng.choice(LAYOUTS[:8])]
        if cmd == "run":
            args.append("--local")
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.1:
            args.append(rng.choice(GARBAGE))
            continue
        flag, values = rng.choice(flags)
        args.append(flag)
        if values is not None:
            args.append(rng.choice(values if rng.random() < 0.9 else GARBAGE))
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("refit")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", OMPI_MCA_plm="isolated",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    bad = 0
    seen = set()
    for i in range(a.count):
        argv = argv_for(rng)
        try:
            p = subprocess.run([a.refit] + argv, capture_output=True, timeout=a.timeout, env=env,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            print(f"cli_random: #{i} timed out after {a.timeout:.0f} s: refit {' '.join(argv)}")
            bad += 1
            continue
        err = p.stderr.decode("utf-8", "replace")
        why = None
        if p.returncode < 0:
            why = f"killed by signal {-p.returncode}"
        elif p.returncode not in (0, 1, 2, 3):
            why = f"exit status {p.returncode} outside the documented scheme"
        elif any(m in err for m in BAD_MARKERS):
            why = "sanitizer or GLib report"
        elif p.returncode != 0 and not err.strip():
            why = "failed without a message"
        if why:
            bad += 1
            print(f"cli_random: #{i} {why}: refit {' '.join(argv)}")
            print("  " + "\n  ".join(err.strip().splitlines()[-8:]))
        seen.add(p.returncode)
        if (i + 1) % 50 == 0:
            print(f"cli_random: {i + 1}/{a.count} invocations, {bad} bad", flush=True)
    print(f"cli_random: {a.count} invocations (seed {a.seed}), exit statuses seen "
          f"{sorted(seen)}: {a.count - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
