#!/usr/bin/env python3
"""What NCCL Xfer v0.1 DIRECT and RING post per call in the nccl-extensions bench rows.

Re-does, for the two models of the nccl-extensions README "Reference Performance"
(NVIDIA/nccl-extensions@4532497, rows c31 v29 v30 v32 of experiments/*.csv), the bench's
placement rules and the library's planning, source side, call by call:
- reshard_model_bench.cu: experts stacked per projection, ETP=1 train meshes (non-expert
  [DP, CP, TP], expert [EDP, EP]), generation [DP, TP], column / row / vocab rules by name
  suffix, PP stage by layer (getPPStage), one 2-D mesh [replicas, shards] per call;
- reshard_user_window.cu: the cross-dim transpose (shouldTransposeForCrossDim,
  reshard_transpose.cc) and its placement rewrite; computeTransferPlan (reshard_mesh.cc);
- DIRECT (prepareDirectReshardParams, UNIFORM load balance): one target per (overlapping
  destination shard, destination replica of the source's range); lane 0 of warp 0 of each of
  the 8 CTAs posts, target after target, one put per CTA of a contiguous target or one per row
  of a strided one (directReshardKernelUserWindow);
- RING: one target per overlapping destination shard (its leader); warp t of each CTA posts the
  puts of targets t, t + 8, ... (MAX_SRC_WARPS), a strided target in 256 KiB chunks, one put
  per row piece of a chunk (reshard_user_window.cu l.132-176).
For each call it takes the busiest source rank (most bytes), and prints per parameter pattern
and per pipeline stage: targets, puts of the busiest posting thread, bytes put. RING here is
the busiest sender's own puts (its ring forwarding and NVLink fan-out are not counted).
Nothing here runs refit: the counts are what docs/measurements.md cites.

usage: /usr/bin/python3 experiments/m2n-direct-count.py [--out DIR]
writes DIR/m2n-direct-count.txt (default experiments/results)
"""
import argparse
import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, Table  # noqa: E402

NCTA = 8                       # DEFAULT_NUM_CTAS (reshard_limits.h l.41)
SRC_WARPS = 8                  # MAX_SRC_WARPS (l.25)
CHUNK = 256 * 1024             # CHUNK_SIZE_BYTES (l.33)
XPOSE = 256 * 1024             # CROSS_DIM_TRANSPOSE_THRESHOLD (l.49)
COL = ["q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight", "up_proj.weight",
       "q_a_proj.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight", "kv_b_proj.weight"]
ROW = ["o_proj.weight", "down_proj.weight"]
VOCAB = ["embed_tokens.weight", "lm_head.weight"]
ESIZE = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}


def is_expert(n):
    return ".experts." in n


def tp_dim(n):
    """getTPShardDim: -1 replicated."""
    if is_expert(n) or n.endswith("mlp.gate.weight") or "e_score_correction_bias" in n:
        return -1
    for s in COL:
        if n.endswith(s):
            return 0
    for s in ROW:
        if n.endswith(s):
            return 1
    return 0 if any(s in n for s in VOCAB) else -1


def expert_tp_dim(n):
    for s in COL:
        if n.endswith(s):
            return 0
    return 1 if any(n.endswith(s) for s in ROW) else -1


def dim_map(tp, cp, ep, dp):
    """buildDimMap: active axes, outermost first."""
    act = [(k, v) for k, v in (("tp", tp), ("cp", cp), ("ep", ep), ("dp", dp)) if v > 1][::-1]
    return {k: i for i, (k, _) in enumerate(act)}, [v for _, v in act]


def placement(n, dm, ndim):
    axes, shape = dm
    pl = [-1] * max(len(shape), 1)
    if ndim < 2:
        return pl
    if is_expert(n):
        if "ep" in axes:
            pl[axes["ep"]] = 0
        elif expert_tp_dim(n) >= 0 and "tp" in axes:
            pl[axes["tp"]] = expert_tp_dim(n) + 1
    elif tp_dim(n) >= 0 and "tp" in axes:
        pl[axes["tp"]] = tp_dim(n)
    return pl


def mesh(pl, dm, shape):
    """(replicas, shards, shard dim, local shape); fixFullyReplicated: shard dim 0, count 1."""
    reps = shards = 1
    sd = -1
    f = [1] * len(shape)
    for a, size in enumerate(dm[1]):
        if pl[a] >= 0:
            shards *= size
            sd = pl[a]
            f[sd] *= size
        else:
            reps *= size
    if any(shape[d] % f[d] for d in range(len(shape))):
        return None
    return reps, shards, max(sd, 0), [shape[d] // f[d] for d in range(len(shape))]


def transfer_plan(sdims, ssd, sidx, ddims, dsd, didx, nd):
    """computeTransferPlan (reshard_mesh.cc): (row bytes, rows) of the overlap, or None."""
    ov = []
    for d in range(nd):
        s0 = sidx * sdims[d] if d == ssd else 0
        t0 = didx * ddims[d] if d == dsd else 0
        lo, hi = max(s0, t0), min(s0 + sdims[d], t0 + ddims[d])
        if lo >= hi:
            return None
        ov.append(hi - lo)
    inner, start = 1, nd - 1
    for d in range(nd - 1, -1, -1):
        inner *= ov[d]
        start = d
        if d == ssd or d == dsd or ov[d] != sdims[d] or ov[d] != ddims[d]:
            break
    rows = 1
    for d in range(start):
        rows *= ov[d]
    return inner, rows


def transpose(sb, db, nd, ssd, dsd, ssc, dsc):
    """shouldTransposeForCrossDim (reshard_transpose.cc): the two dims swapped, or None."""
    if nd == 2 and dsd == 1 and ssd != 1:
        return (0, 1) if db[1] < XPOSE else None
    if nd != 3 or ssd == dsd:
        return None
    inner = sb[2] * (ssc if ssd == 2 else 1) * (dsc if dsd == 2 else 1)
    inner //= dsc if dsd == 2 else (ssc if ssd == 2 else 1)
    if inner >= XPOSE or dsd != 2 or ssd == 1:
        return None
    return (1, 2)


def uniform_range(r, ns, nd):
    """getTargetRepRange, UNIFORM (reshard_loadbalance.cc l.82-118)."""
    if ns > nd:
        per, extra = divmod(ns, nd)
        th = extra * (per + 1)
        d, sender = (r // (per + 1), r % (per + 1) == 0) if r < th else \
            (extra + (r - th) // per, (r - th) % per == 0)
        return (d, d + 1) if sender and d < nd else (0, 0)
    if ns == nd:
        return r, r + 1
    per, extra = divmod(nd, ns)
    s = r * (per + 1) if r < extra else extra * (per + 1) + (r - extra) * per
    return s, s + per + (1 if r < extra else 0)


def cta_rows(rows):
    per = (rows + NCTA - 1) // NCTA
    return [max(0, min(per, rows - k * per)) for k in range(NCTA)]


def ring_puts(inner, rows, k):
    """RING puts of CTA k on one target: a contiguous target one, else per 256 KiB chunk of the
    CTA's rows, one per row piece in the chunk."""
    if rows == 1:
        return 1 if k * ((inner + NCTA - 1) // NCTA) < inner else 0
    n = cta_rows(rows)[k] * inner
    puts, b = 0, 0
    while b < n:
        e = min(b + CHUNK, n)
        puts += (e - 1) // inner - b // inner + 1
        b = e
    return puts


def call_counts(c):
    """Busiest source rank of one call: DIRECT (targets, puts of lane 0 of the busiest CTA,
    bytes), RING (targets, puts of the busiest warp, bytes)."""
    nd, sb, db = c["nd"], list(c["sl"]), list(c["dl"])
    sb[-1] *= c["es"]
    db[-1] *= c["es"]
    ssd, dsd = c["ssd"], c["dsd"]
    sw = transpose(sb, db, nd, ssd, dsd, c["ss"], c["ds"])
    if sw:
        a, b = sw
        sb[a], sb[b] = sb[b], sb[a]
        db[a], db[b] = db[b], db[a]
        ssd = {a: b, b: a}.get(ssd, ssd)
        dsd = {a: b, b: a}.get(dsd, dsd)
    plans = [p for p in (transfer_plan(sb, ssd, 0, db, dsd, t, nd) for t in range(c["ds"])) if p]
    lo, hi = max((uniform_range(r, c["sr"], c["dr"]) for r in range(c["sr"])),
                 key=lambda x: x[1] - x[0])
    direct = [0] * NCTA
    for inner, rows in plans:
        for k in range(NCTA):
            direct[k] += (hi - lo) * (ring_puts(inner, 1, k) if rows == 1 else cta_rows(rows)[k])
    ring = [0] * SRC_WARPS
    for t, (inner, rows) in enumerate(plans):
        ring[t % SRC_WARPS] += max(ring_puts(inner, rows, k) for k in range(NCTA))
    nbytes = sum(i * r for i, r in plans)
    return {"direct_targets": len(plans) * (hi - lo), "direct_puts": max(direct),
            "direct_bytes": nbytes * (hi - lo), "ring_targets": len(plans),
            "ring_puts": max(ring), "ring_bytes": nbytes, "transpose": sw}


def bench_calls(listing, train, gen):
    """The bench's transfers (reshard_model_bench.cu main): one per stacked parameter."""
    tp, cp, ep, dp, pp, ngpus = train
    gtp, gdp = gen
    grouped, experts = {}, defaultdict(list)
    for n, i in listing.items():
        m = re.match(r"(.+\.experts)\.\d+\.(.+)", n) if is_expert(n) else None
        if m:
            experts[m.group(1) + "." + m.group(2)].append(i)
        else:
            grouped[n] = i
    for k, v in experts.items():
        grouped[k] = {"shape": [len(v)] + list(v[0]["shape"]), "dtype": v[0]["dtype"]}
    per = ngpus // pp
    non_expert, expert = dim_map(tp, cp, 1, per // (tp * cp)), dim_map(1, 1, ep, per // ep)
    gdm = dim_map(gtp, 1, 1, gdp)
    nlayers = 1 + max(int(m.group(1)) for m in (re.search(r"layers\.(\d+)", n) for n in grouped)
                      if m)
    out = []
    for n, info in sorted(grouped.items()):
        shape, nd = info["shape"], len(info["shape"])
        tdm = expert if is_expert(n) else non_expert
        s = mesh(placement(n, tdm, nd), tdm, shape)
        d = mesh(placement(n, gdm, nd), gdm, shape)
        if nd > 3 or s is None or d is None:
            continue
        m = re.search(r"layers\.(\d+)", n)
        stage = int(m.group(1)) * pp // nlayers if m else (0 if "embed_tokens" in n else pp - 1)
        out.append({"name": n, "stage": stage, "nd": nd, "es": ESIZE[info["dtype"]],
                    "sr": s[0], "ss": s[1], "ssd": s[2], "sl": s[3],
                    "dr": d[0], "ds": d[1], "dsd": d[2], "dl": d[3]})
    return out


def qwen3_listing():
    """Qwen3-235B-A22B's HF tensors from model/configs/qwen3-235b-a22b.json."""
    cfg = json.load(open(os.path.join(ROOT, "model", "configs", "qwen3-235b-a22b.json")))
    h, q = cfg["hidden_size"], cfg["num_attention_heads"] * cfg["head_dim"]
    kv, f, v = cfg["num_key_value_heads"] * cfg["head_dim"], cfg["moe_intermediate_size"], \
        cfg["vocab_size"]
    t = {"model.embed_tokens.weight": [v, h], "lm_head.weight": [v, h], "model.norm.weight": [h]}
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        t.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                  p + "self_attn.q_proj.weight": [q, h], p + "self_attn.k_proj.weight": [kv, h],
                  p + "self_attn.v_proj.weight": [kv, h], p + "self_attn.o_proj.weight": [h, q],
                  p + "self_attn.q_norm.weight": [cfg["head_dim"]],
                  p + "self_attn.k_norm.weight": [cfg["head_dim"]],
                  p + "mlp.gate.weight": [cfg["num_experts"], h]})
        for e in range(cfg["num_experts"]):
            x = p + "mlp.experts.%d." % e
            t.update({x + "gate_proj.weight": [f, h], x + "up_proj.weight": [f, h],
                      x + "down_proj.weight": [h, f]})
    return {n: {"shape": s, "dtype": "BF16"} for n, s in t.items()}


ROWS = [  # README layouts: train (TP, CP, EP, DP, PP, GPUs), generation (TP, DP)
    ("Qwen3-235B (c31 ring, v32 direct)", qwen3_listing, (2, 2, 16, 1, 4, 64), (8, 8)),
    ("DeepSeek-V3 FP8 (v29 ring, v30 direct)",
     lambda: json.load(open(os.path.join(ROOT, "experiments", "models", "deepseek-v3-fp8.json"))),
     (1, 1, 16, 2, 4, 128), (8, 16)),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t = Table(os.path.join(a.out, "m2n-direct-count.txt"))
    t.line("# NCCL Xfer v0.1 (nccl-extensions 4532497) per call, busiest source rank: targets, "
           "puts of the busiest posting thread (DIRECT: lane 0 of a CTA; RING: a warp), MB put")
    for title, listing, train, gen in ROWS:
        calls = bench_calls(listing(), train, gen)
        t.line("## %s: %d calls" % (title, len(calls)))
        t.line("%-52s %5s %9s %9s %9s %9s %9s %9s  %s" % (
            "pattern", "calls", "D.tgts", "D.puts", "D.MB", "R.tgts", "R.puts", "R.MB",
            "transpose"))
        pats, stages = {}, defaultdict(lambda: defaultdict(float))
        for c in calls:
            k = call_counts(c)
            pat = re.sub(r"layers\.\d+", "layers.X", c["name"])
            pats.setdefault(pat, (k, []))[1].append(c)
            st = stages[c["stage"]]
            st["calls"] += 1
            for f in ("direct_puts", "direct_bytes", "ring_puts", "ring_bytes"):
                st[f] += k[f]
        for pat, (k, cs) in sorted(pats.items(), key=lambda x: -x[1][0]["direct_bytes"]):
            t.line("%-52s %5d %9d %9d %9.1f %9d %9d %9.1f  %s" % (
                pat, len(cs), k["direct_targets"], k["direct_puts"], k["direct_bytes"] / 1e6,
                k["ring_targets"], k["ring_puts"], k["ring_bytes"] / 1e6,
                "dims %d<->%d" % k["transpose"] if k["transpose"] else "-"))
        for s in sorted(stages):
            st = stages[s]
            t.line("# stage %d: %d calls; DIRECT %d puts by one thread, %.1f GB put; RING %d puts "
                   "by one warp, %.1f GB put" % (s, st["calls"], st["direct_puts"],
                                                 st["direct_bytes"] / 1e9, st["ring_puts"],
                                                 st["ring_bytes"] / 1e9))
    t.save()


if __name__ == "__main__":
    main()
