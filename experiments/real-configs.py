#!/usr/bin/env python3
"""Load every published config.json with `refit model show --json` and compare refit's parameter
count with the published size. Prints a table and writes experiments/results/real-configs.csv.

Configs: tests/data/hf/ (copies of shared/reference/hf-configs, as published on the Hugging Face
hub). Published sizes are those of shared/reference/hf-configs/README.md; "mtp" says whether the
published figure counts the MTP block. A row is "ok" within 1% of the published figure, or,
for a figure published rounded ("~2.8 T"), within half a unit of its last digit (2.75-2.85 T):
the rounding is the figure's own precision, so a tighter check would test the rounding."""
import argparse, csv, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# file, published parameters, published figure counts MTP, source; ROUNDED: half a unit of the
# last published digit, for figures published rounded (with "~")
PUBLISHED = [
    ("DeepSeek-V3", 685e9, True, "deepseek-ai/DeepSeek-V3 (671 B + 14 B MTP)"),
    ("GLM-5", None, True, "zai-org/GLM-5 (no size at hand)"),
    ("Kimi-K3", 2.8e12, True, "moonshotai Kimi-K3 (~2.8 T)"),
    ("Meta-Llama-3.1-70B", 70.6e9, True, "meta-llama/Llama-3.1-70B"),
    ("MiniMax-M2.5", 230e9, True, "MiniMaxAI/MiniMax-M2.5 (~230 B, abridged config)"),
    ("Mixtral-8x7B-v0.1", 46.7e9, True, "mistralai/Mixtral-8x7B-v0.1"),
    ("NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", 550e9, False, "nvidia Nemotron-3-Ultra (~550 B)"),
    ("Nemotron-H-56B-Base-8K", 56e9, True, "nvidia/Nemotron-H-56B-Base-8K (~56 B)"),
    ("Qwen3-Next-80B-A3B-Thinking", 80e9, True, "Qwen/Qwen3-Next-80B-A3B-Thinking"),
    ("Qwen3.5-397B-A17B", 397e9, False, "Qwen/Qwen3.5-397B-A17B"),
    ("gpt-oss-120b", 116.8e9, True, "openai/gpt-oss-120b"),
]


ROUNDED = {"Kimi-K3": 0.05e12}  # "~2.8 T": 2.75-2.85 T


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refit", default=os.path.join(ROOT, "build", "cli", "refit"))
    ap.add_argument("--csv", default=os.path.join(ROOT, "experiments", "results", "real-configs.csv"))
    args = ap.parse_args()
    rows = []
    print(f"{'config':40s} {'published':>10s} {'refit':>10s} {'err(%)':>7s} {'ckpt(GB)':>9s}  status")
    for name, pub, with_mtp, src in PUBLISHED:
        path = os.path.join(ROOT, "tests", "data", "hf", name + ".json")
        r = subprocess.run([args.refit, "model", "show", "--json", path], capture_output=True, text=True)
        if r.returncode != 0:
            rows.append([name, pub or "", "", "", "", "refused: " + r.stderr.strip(), src])
            print(f"{name:40s} {'':>10s} {'':>10s} {'':>7s} {'':>9s}  {r.stderr.strip()}")
            continue
        d = json.loads(r.stdout)
        mtp = next((k["bytes"] // 2 for k in d["kinds"] if k["kind"] == "mtp"), 0)
        n = d["params"] - (0 if with_mtp else mtp)
        err = (n / pub - 1) * 100 if pub else None
        tol = max(0.01 * pub, ROUNDED.get(name, 0)) if pub else 0
        status = ("no published size" if pub is None
                  else "ok" if abs(n - pub) <= tol
                  else "off")
        if status == "ok" and name in ROUNDED and abs(err) > 1:
            status = f"ok (published rounded: +-{ROUNDED[name] / 1e12:.2f} T)"
        rows.append([name, pub or "", n, "" if err is None else f"{err:.2f}",
                     d["checkpoint_bytes"], status, src])
        print(f"{name:40s} {(pub or 0)/1e9:10.1f} {n/1e9:10.2f} "
              f"{'' if err is None else f'{err:7.2f}':>7s} {d['checkpoint_bytes']/1e9:9.1f}  {status}")
    os.makedirs(os.path.dirname(args.csv), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "published_params", "refit_params", "err_pct", "checkpoint_bytes",
                    "status", "source"])
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
