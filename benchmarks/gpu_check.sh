#!/usr/bin/env bash
# GPU check: install rlgen with TensorFlow's GPU build and print, side by side, CPU and GPU
# placements of the same runs. NOT RUN BY THE rlgen AUTHORS: written on a machine without a
# GPU (see docs/devices.md, "What was verified where"). Needs an NVIDIA GPU with its driver,
# Python 3.11 and package-index access; about 10 minutes (the first Horovod build included).
#
#   bash benchmarks/gpu_check.sh            # results under ./gpu-check-<time>/
#
# Rows:
#   1. PPO CartPole under single (gymnasium envs on the host), learner on CPU, then on GPU
#   2. the in-graph whole loop (ppo-cartpole-ingraph) with 4,096 envs, on CPU, then on GPU
#   3. multi-learner, 2 ranks sharing one GPU (gradients allreduced in host memory by Gloo)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$PWD/gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
log() { printf '[gpu_check] %s\n' "$*" >&2; }

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || { log "no nvidia-smi: this machine shows no NVIDIA GPU"; exit 2; }

# A venv of its own with the GPU build; a Horovod wheel of its own (the CPU one's cache is keyed
# by Horovod's version only and would be reused against the wrong TensorFlow).
export RLGEN_VENV="${RLGEN_GPU_VENV:-$ROOT/.venv-gpu}"
export RLGEN_TF_PACKAGE="${RLGEN_TF_PACKAGE:-tensorflow[and-cuda]==2.21.0}"
export RLGEN_WHEEL_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/rlgen/wheels-gpu"
log "installing into $RLGEN_VENV with $RLGEN_TF_PACKAGE"
bash "$ROOT/scripts/setup.sh"
PY="$RLGEN_VENV/bin/python"
export RLGEN_XLA_CACHE=0  # compile on the device in use, not from a cache filled on another
"$PY" -c 'import tensorflow as tf; g = tf.config.list_physical_devices("GPU"); print("TensorFlow sees", g); assert g' \
  || { log "TensorFlow sees no GPU: check the driver and CUDA_VISIBLE_DEVICES"; exit 2; }

run() {  # NAME SECONDS SPEC ARGS...: one `rlgen run`, its own run directory, never over SECONDS
  local name="$1" limit="$2" spec="$3"
  shift 3
  log "run $name"
  timeout --signal=INT "$limit" "$PY" -m rlgen run "$ROOT/examples/$spec" --run-dir "$OUT/$name" --quiet \
    --set train.eval.every=0 --set train.checkpoint.every=0 "$@" >"$OUT/$name.log" 2>&1 \
    || log "$name ended with status $? (see $OUT/$name.log)"
}

BIG=(--set env.num_envs=4096 --set components.learner.minibatch=16384 --set components.learner.epochs=4
  --set train.total_steps=13107200)
run single-cpu 120 ppo-cartpole.rl.yaml --iterations 100 --devices learner=cpu
run single-gpu 120 ppo-cartpole.rl.yaml --iterations 100 --devices learner=gpu
run ingraph-4096-cpu 150 ppo-cartpole-ingraph.rl.yaml --iterations 15 "${BIG[@]}" --devices cpu
run ingraph-4096-gpu 150 ppo-cartpole-ingraph.rl.yaml --iterations 15 "${BIG[@]}" --devices gpu
run multi-learner-cpu 120 ppo-cartpole.rl.yaml --iterations 60 --policy multi-learner --workers 2 --devices cpu
run multi-learner-1gpu 120 ppo-cartpole.rl.yaml --iterations 60 --policy multi-learner --workers 2 --devices gpu

"$PY" - "$OUT" <<'PY'
import json, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
print(f"\n{'run':<22}{'devices (run.json)':<44}{'steps/s':>10}{'ms/iteration':>14}{'mean return':>13}")
for name in ["single-cpu", "single-gpu", "ingraph-4096-cpu", "ingraph-4096-gpu", "multi-learner-cpu", "multi-learner-1gpu"]:
    run = out / name
    try:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        used = json.loads((run / "run.json").read_text()).get("devices", {})
    except (OSError, ValueError):
        print(f"{name:<22}(no result: see {name}.log)")
        continue
    steady = rows[3:] or rows  # the first iterations compile
    rate = statistics.median(r["steps_per_s"] for r in steady)
    per_it = statistics.median(
        (b["time"] - a["time"]) * 1000 / max(1, b["iteration"] - a["iteration"]) for a, b in zip(steady, steady[1:])
    ) if len(steady) > 1 else float("nan")
    where = ", ".join(f"{rank}:{d['device'].split('device:')[-1]}" for rank, d in sorted(used.items()))
    ret = rows[-1].get("mean_return", float("nan"))
    print(f"{name:<22}{where:<44}{rate:>10.0f}{per_it:>14.1f}{ret:>13.1f}")
print("\nSend this table and nvidia-smi -L to the rlgen authors: docs/devices.md lists what is unverified.")
PY
