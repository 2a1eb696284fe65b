#!/bin/sh
# MPI tests of `refit run` (one process per rank).
#   test_real.sh MODE REFIT TEST_REAL [MPIRUN]
#   mpi-spec   random DTensor specs, 8 ranks, every strategy, small staging and groups
#   mpi-model  tiny models (TP2xPP2 -> TP4 and others), every strategy; quantized targets
#   mpi-layouts  tiny-next, a shrink (--lost) run, SGLang and Megatron-generation layouts
#   mpi-lanes  1, 2 and 4 staging lanes: overlap against the serial time
#   mpi-lane-comms  --lane-comms (a communicator per lane): every element arrives
#   emulated-lane-comms  the emulated network with and without lane communicators: the same
#              schedule ops, a shorter refit with them (test_real --mpi-lane-comms)
#   errors     bad world size, a rank that stops responding, a lost chunk, a rank SIGKILLed in
#              each stage kind: clear errors, non-zero
#   advise     refit advise spread over 2 and 3 ranks: one answer, the single-process winner
#   cuda       single-GPU mode, an NCCL self-send, an 8-rank NCCL run with 8 GPUs; exit 77
#              (skip) without a GPU
set -u
mode=$1
refit=$2
gen=$3
mpirun=${4:-mpirun}
[ -n "$mpirun" ] || mpirun=mpirun
mpi="$mpirun --allow-run-as-root --oversubscribe"
# Open MPI leaks by design (plugins unloaded before exit): leak checks of our own code are the
# single-process test_real runs; under ASan, MPI runs check everything but leaks.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# One rank that is both source and destination: every transfer is a send to itself.
cat >"$tmp/self.json" <<'EOF'
{"tensors":[
 {"name":"w","shape":[10,7],"dtype":"bf16","src":{"mesh":[1],"ranks":[0],"placements":["R"]},
  "dst":{"mesh":[1],"ranks":[0],"placements":["R"]}},
 {"name":"v","shape":[33],"dtype":"fp32","src":{"mesh":[1],"ranks":[0],"placements":["S0"]},
  "dst":{"mesh":[1],"ranks":[0],"placements":["R"]}}]}
EOF

fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# run NAME NP ARGS...: expect exit 0 and '# wrong elements: 0'.
run_ok() {
  name=$1
  np=$2
  shift 2
  if $mpi -np "$np" "$refit" run -q "$@" >"$tmp/out" 2>"$tmp/err"; then
    if grep -q '^# wrong elements: 0$' "$tmp/out" && grep -q '^# OK$' "$tmp/out"; then
      echo "ok: $name ($(grep -c '^   total' "$tmp/out") strategies)"
      return
    fi
  fi
  cat "$tmp/out" "$tmp/err"
  fail "$name"
}

case $mode in
mpi-spec)
  run_ok "self-send (1 rank)" 1 --spec "$tmp/self.json"
  for seed in 1 2 3 4 5 6; do
    "$gen" --gen "$seed" 8 "$tmp/spec$seed.json" || fail "generate spec $seed"
    case $seed in
    1 | 4) extra="--staging-mib 0.0002 --max-ops 2" ;; # 192 B of staging, 2 ops per group
    *) extra="" ;;
    esac
    run_ok "spec seed $seed $extra" 8 --spec "$tmp/spec$seed.json" --domain-size $((seed % 3 + 1)) \
      --warmup 1 --iters 2 $extra
  done
  ;;
mpi-model)
  run_ok "tiny-moe TP2xPP2 -> TP4" 8 --model tiny-moe --train TP2xPP2 --infer TP4 --domain-size 2
  run_ok "tiny-mla TP2xPP2xEP2 -> TP2xDP2xEP4" 8 --model tiny-mla --train TP2xPP2xEP2 \
    --infer TP2xDP2xEP4 --domain-size 4 --staging-mib 0.01 --max-ops 3
  run_ok "tiny-hybrid TP2xEP2 -> TP2xDP2" 6 --model tiny-hybrid --train TP2xEP2 --infer TP2xDP2 \
    --domain-size 2
  # Quantized inference targets (docs/quant.md): e4m3 bytes and scales checked against the
  # reference quantizer, one run per format and place.
  fp8="$(dirname "$0")/data/tiny-fp8.json"
  for q in fp8-block mxfp8; do
    for at in sender receiver; do
      run_ok "tiny-fp8 $q at the $at" 8 --model "$fp8" --train TP2xPP2 --infer TP2xDP2 \
        --domain-size 4 --infer-quant $q --quant-at $at --iters 1
    done
  done
  ;;
mpi-layouts)
  run_ok "tiny-next TP2xPP2 -> TP2xDP2" 8 --model tiny-next --train TP2xPP2 --infer TP2xDP2 \
    --domain-size 2 --staging-mib 0.005
  # Elastic recovery, shrink: GPU 1 (training) and GPU 9 (inference) are excluded before the
  # step; the plan over the survivors runs with 0 wrong elements. Then the other frameworks.
  run_ok "shrink: tiny-moe TP2xPP2xDP2 -> TP2xDP2, GPUs 1,9 lost" 12 --model tiny-moe \
    --train TP2xPP2xDP2 --infer TP2xDP2 --lost 1,9
  # The lost ranks' processes idle: left out of the data communicator (said once, by the first
  # survivor), and the engine refuses a plan that gives a lost rank a message.
  n=$(grep -c 'elastic recovery: 2 lost rank(s) excluded: MPI_Comm_split of the world over 10 survivors' "$tmp/err")
  [ "$n" = 1 ] && echo "ok: shrink: 2 ranks out of the data communicator" ||
    { cat "$tmp/err"; fail "shrink: recovery line seen $n times"; }
  run_ok "sglang: tiny-moe TP2xEP2xETP2 -> TP4xADP2xEP2" 8 --model tiny-moe --train TP2xEP2xETP2 \
    --infer TP4xADP2xEP2 --infer-framework sglang --domain-size 4
  run_ok "megatron generation: tiny-mla TP2xPP2xEP4 -> TP2xEP2" 10 --model tiny-mla \
    --train TP2xPP2xEP4 --infer TP2xEP2 --infer-framework megatron --domain-size 4
  ;;
mpi-lanes)
  # Overlap: every pack, unpack and group lasts at least 4 ms (--test-delay-ms). With one staging
  # lane a rank's operations run in series; with two, the next round's pack and the last one's
  # unpack overlap the groups in flight, so the refit takes well below the serial sum (the
  # one-lane time). Both verify every element; 4 lanes on a forwarding (m2n) plan too.
  for s in m2n p2p; do
    for l in 1 2; do
      $mpi -np 8 "$refit" run -q --csv --model tiny-moe --train TP2xPP2 --infer TP4 --strategy $s \
        --domain-size 2 --staging-mib 0.01 --slots $l --test-delay-ms 4 -n 2 >"$tmp/lane$l" \
        2>"$tmp/err" && grep -q '^# wrong elements: 0$' "$tmp/err" ||
        { cat "$tmp/lane$l" "$tmp/err"; fail "overlap: $s, $l lane(s)"; }
    done
    t1=$(awk -F, '$2 == "total" {print $4}' "$tmp/lane1")
    t2=$(awk -F, '$2 == "total" {print $4}' "$tmp/lane2")
    if awk -v a="$t1" -v b="$t2" 'BEGIN {exit !(a > 0 && b > 0 && b < 0.8 * a)}'; then
      echo "ok: overlap ($s): 2 lanes $t2 s < 0.8 x serial $t1 s"
    else
      fail "overlap ($s): 2 lanes $t2 s, 1 lane $t1 s"
    fi
  done
  run_ok "4 lanes: tiny-mla m2n, small staging" 8 --model tiny-mla --train TP2xPP2xEP2 \
    --infer TP2xDP2xEP4 --domain-size 4 --staging-mib 0.01 --max-ops 3 --slots 4
  ;;
mpi-lane-comms)
  # Each lane's groups on a communicator of their own (--lane-comms): MPI keeps the lanes apart
  # by tag, every element still arrives (3 lanes, many groups, a forwarding plan and a direct
  # one), and the header says it.
  run_ok "lane communicators: tiny-moe m2n + p2p, 3 lanes" 8 --model tiny-moe --train TP2xPP2 \
    --infer TP4 --domain-size 2 --strategy m2n,p2p --staging-mib 0.01 --slots 3 --lane-comms -n 2
  grep -q "^# staging .*, each lane's groups on a communicator and stream of its own" "$tmp/out" ||
    fail "lane communicators: header line"
  ;;
emulated-lane-comms)
  # On an emulated network whose latency outweighs a group's bytes: the same schedule ops with
  # and without lane communicators, every element, and a shorter refit with them.
  $mpi -np 8 "$gen" --mpi-lane-comms >"$tmp/out" 2>"$tmp/err" && grep -q '^ok: lane communicators' "$tmp/out" &&
    cat "$tmp/out" || { cat "$tmp/out" "$tmp/err"; fail "emulated lane communicators"; }
  ;;
errors)
  # A world that does not match the plan: one line from rank 0, non-zero.
  if $mpi -np 6 "$refit" run -q --model tiny-moe --train TP2xPP2 --infer TP4 >"$tmp/out" 2>"$tmp/err"; then
    fail "world of 6 for an 8-rank plan exited 0"
  fi
  n=$(grep -c 'MPI world has 6 ranks, the plan needs 8' "$tmp/err")
  [ "$n" = 1 ] && echo "ok: bad world size ($(grep 'MPI world' "$tmp/err"))" ||
    { cat "$tmp/err"; fail "bad world size message (seen $n times)"; }

  # Shards that cannot fit host memory (12 TiB): refused up front, one line per rank, no crash.
  cat >"$tmp/huge.json" <<'EOF2'
{"tensors":[{"name":"w","shape":[1099511627776],"dtype":"fp32",
 "src":{"mesh":[1],"ranks":[0],"placements":["R"]},"dst":{"mesh":[1],"ranks":[1],"placements":["R"]}}]}
EOF2
  $mpi -np 2 "$refit" run -q --spec "$tmp/huge.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc != 0 ] && [ "$(grep -c 'GB of host memory' "$tmp/err")" = 2 ] &&
    ! grep -q 'no progress' "$tmp/err"; then
    echo "ok: host memory ($(grep 'rank 0' "$tmp/err" | head -1))"
  else
    cat "$tmp/out" "$tmp/err"
    fail "host memory (rc $rc)"
  fi

  # Rank 5 stops responding in stage 0: its peers time out, say who and where, abort.
  $mpi -np 8 "$refit" run -q --model tiny-moe --train TP2xPP2 --infer TP4 --strategy p2p \
    --test-fail 5:0 --timeout 2 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc != 0 ] && grep -q 'rank 5: stage 0 (inject): injected failure' "$tmp/err" &&
    grep -Eq 'rank [0-9]+: stage 0 \(inject\): no progress for 2.0 s, waiting on rank 5; communicator aborted' "$tmp/err"; then
    echo "ok: failing rank ($(grep 'waiting on rank 5' "$tmp/err" | head -1))"
  else
    cat "$tmp/out" "$tmp/err"
    fail "failing rank (rc $rc)"
  fi

  # Rank 6 loses a chunk in the last refit: counted, exit 3 (verification). Double bank: the
  # previous weights stay in service, intact; in place (the default): the bank is stale, not served.
  $mpi -np 8 "$refit" run -q --model tiny-moe --train TP2xPP2 --infer TP4 --strategy m2n \
    --test-drop 6 --double-bank >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc = 3 ] && grep -Eq '^# wrong elements: [1-9][0-9]*$' "$tmp/out" &&
    grep -q 'previous weights stay in place' "$tmp/out" && ! grep -q 'previous weights changed' "$tmp/out"; then
    echo "ok: lost chunk, double bank ($(grep '^# wrong elements' "$tmp/out"))"
  else
    cat "$tmp/out" "$tmp/err"
    fail "lost chunk, double bank (rc $rc)"
  fi
  $mpi -np 8 "$refit" run -q --model tiny-moe --train TP2xPP2 --infer TP4 --strategy m2n \
    --test-drop 6 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc = 3 ] && grep -Eq '^# wrong elements: [1-9][0-9]*$' "$tmp/out" &&
    grep -q 'in place, the weights are stale and not served' "$tmp/out"; then
    echo "ok: lost chunk, in place ($(grep '^# wrong elements' "$tmp/out"))"
  else
    cat "$tmp/out" "$tmp/err"
    fail "lost chunk, in place (rc $rc)"
  fi

  # A rank SIGKILLed in the middle of each stage kind of the last refit (step 1): every survivor
  # reports an error within the timeout. In place (the default): each inference survivor says its
  # weights of step 1 are stale, not served, and each training rank that its shards still hold
  # step 1 with 0 wrong elements (the refit is retried from them). Double bank: each survivor's
  # bank in service still holds step 0. Open MPI is asked to keep the survivors running
  # (recovery on, no abort at a non-zero exit).
  kill_case() { # KIND RANK [--double-bank] STRATEGY ARGS...: RANK dies mid-KIND
    kind=$1 rk=$2
    shift 2
    left='bank in service: step 0, 0 wrong elements$' db=" (double bank)"
    [ "$1" = --double-bank ] ||
      { left='(weights: in place, step 1 incomplete: marked stale, not served \(generation stays paused\)|training shards: step 1, 0 wrong elements \(the refit is retried from them\))$' db=""; }
    t0=$(date +%s)
    $mpi --mca orte_enable_recovery 1 --mca orte_abort_on_non_zero_status 0 -np 8 "$refit" run -q \
      --model tiny-moe --train TP2xPP2 -w 1 -n 1 --timeout 3 --test-fail "$rk:$kind:kill" "$@" \
      >"$tmp/out" 2>"$tmp/err"
    took=$(($(date +%s) - t0))
    died=$(grep -c "rank $rk: stage [0-9]* ([a-z+]*): injected failure, this rank is killed" "$tmp/err")
    told=$(grep -Ec "^refit run: [a-z0-9-]+: rank [0-7]: .*$left" "$tmp/err")
    ranks=$(grep -Eo '^refit run: [a-z0-9-]+: rank [0-7]:' "$tmp/err" | sort -u | wc -l)
    if [ "$died" = 1 ] && [ "$told" = 7 ] && [ "$ranks" = 7 ] && [ "$took" -le 30 ]; then
      echo "ok: rank $rk killed mid-$kind$db: 7 survivors report what they leave (${took} s)"
    else
      cat "$tmp/err"
      fail "rank killed mid-$kind (died $died, reports $told, ranks $ranks, ${took} s)"
    fi
  }
  # (the export gathers on the training ranks: rank 1 takes part in it, inference rank 5 not)
  kill_case export 1 --infer TP4 --strategy gather-broadcast
  kill_case broadcast 5 --infer TP4 --strategy gather-broadcast
  kill_case inject 5 --infer TP2xDP2 -D 2 --strategy m2n
  kill_case forward 5 --infer TP2xDP2 -D 2 --strategy m2n
  kill_case fanout 5 --infer TP4 --strategy m2n
  kill_case forward 5 --double-bank --infer TP2xDP2 -D 2 --strategy m2n
  ;;
advise)
  # one ranked answer from rank 0, the winner of the single-process search; every prediction
  # the same whichever rank made it; a pruned candidate's bound above the winner
  adv="-m qwen3-30b-a3b -t TP2xEP8 -n 8 --tp 2,4,8 -T dgx-h100 -q --json"
  "$refit" advise $adv -j 2 >"$tmp/adv1.json" 2>"$tmp/err" || { cat "$tmp/err"; fail "advise, one process"; }
  for np in 2 3; do
    if ! $mpi -np "$np" "$refit" advise $adv -j 1 >"$tmp/adv$np.json" 2>"$tmp/err"; then
      cat "$tmp/err"
      fail "advise over $np ranks exits non-zero"
      continue
    fi
    /usr/bin/python3 - "$tmp/adv1.json" "$tmp/adv$np.json" "$np" <<'PY' || fail "advise over $np ranks"
import json, sys
one, many = (json.load(open(f)) for f in sys.argv[1:3])  # one JSON object: rank 0 alone printed
np = int(sys.argv[3])
assert one["mpi_ranks"] == 1 and many["mpi_ranks"] == np, (one["mpi_ranks"], many["mpi_ranks"])
w1, wn = one["ranked"][0], many["ranked"][0]
assert w1["predicted_s"] == wn["predicted_s"], (w1, wn)
key = lambda r: (r["infer_gpus"], r["infer"], r["placement"], r["strategy"])
pred = {key(r): r["predicted_s"] for r in one["ranked"] if "predicted_s" in r}
for r in many["ranked"]:
    if "predicted_s" in r and key(r) in pred:
        assert r["predicted_s"] == pred[key(r)], r
    if r["status"] == "pruned":
        assert r["lower_bound_s"] > wn["predicted_s"], r
assert many["candidates"] == one["candidates"] and many["infeasible"] == one["infeasible"]
assert many["simulated"] + many["pruned"] == one["simulated"] + one["pruned"]
print("ok: advise over %d ranks: %s %s %.6g s, %d simulated, %d pruned (one process: %d, %d)" % (
    np, wn["infer"], wn["strategy"], wn["predicted_s"], many["simulated"], many["pruned"],
    one["simulated"], one["pruned"]))
PY
  done
  # an input error: one line, from rank 0 only, before MPI starts
  $mpi -np 2 "$refit" advise -m tiny-moe -t TP2 -n 2 --ep maybe -q >"$tmp/out" 2>"$tmp/err"
  n=$(grep -c "^refit advise: --ep wants on, off or both" "$tmp/err")
  if [ "$n" = 1 ]; then echo "ok: advise input error printed once"; else cat "$tmp/err"; fail "advise input error printed $n times"; fi
  ;;
cuda)
  if ! "$refit" run --help 2>/dev/null | grep -q -- '--backend'; then
    echo "SKIP: refit has no run command"
    exit 77
  fi
  "$refit" run -q --local --backend cuda --model tiny-moe --train TP2xPP2 --infer TP4 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if grep -q 'cuda backend is not built' "$tmp/err"; then
    echo "SKIP: the cuda backend is not built (CUDA or NCCL not found at configure time)"
    exit 77
  fi
  if grep -q 'no GPU found' "$tmp/err"; then
    echo "SKIP: no GPU on this machine ($(cat "$tmp/err"))"
    exit 77
  fi
  if [ $rc = 0 ] && grep -q '^# wrong elements: 0$' "$tmp/out"; then
    echo "ok: single-GPU mode, every strategy"
  else
    cat "$tmp/out" "$tmp/err"
    fail "single-GPU mode"
  fi
  run_ok "cuda NCCL self-send (1 rank)" 1 --backend cuda --spec "$tmp/self.json"
  # 104 B of staging: up to 5 groups, two lanes in flight (the NCCL two-lane path)
  run_ok "cuda NCCL multi-group, 2 lanes (1 rank)" 1 --backend cuda --spec "$tmp/self.json" \
    --staging-mib 0.0001 --slots 2
  # the same with a communicator and stream per lane (ncclCommSplit of a 1-rank communicator)
  run_ok "cuda NCCL multi-group, 2 lane communicators (1 rank)" 1 --backend cuda \
    --spec "$tmp/self.json" --staging-mib 0.0001 --slots 2 --lane-comms
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${ngpu:-0}" -ge 8 ] && [ "${mpirun##*/}" = mpirun1 ]; then
    echo "note: $ngpu GPU(s), but $mpirun runs one rank: the 8-rank NCCL run needs mpirun, not run"
  elif [ "${ngpu:-0}" -ge 8 ]; then
    run_ok "cuda NCCL tiny-moe TP2xPP2 -> TP4" 8 --backend cuda --model tiny-moe --train TP2xPP2 --infer TP4
  else
    echo "note: $ngpu GPU(s): the 8-rank NCCL run needs 8, not run"
  fi
  ;;
*)
  echo "unknown mode $mode"
  exit 2
  ;;
esac
[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
exit 0
