"""Pixels: PPO Breakout env steps/s under ``single`` and ``actors-learner`` side by side, and
the memory of DQN's Atari replay (the RL Zoo's 100k transitions) in one run.

Speed: ``rlgen run examples/ppo-breakout.rl.yaml`` with the example's (the Zoo's) settings,
8 envs x 128 steps, 4 epochs of minibatch 256, for ``--iterations`` iterations under each
policy; steps/s is env steps over the iterations after the first (which compiles), from the
run's metrics.jsonl, with the time per part (update, env, inference, comm) of those iterations.
Evaluation and checkpoints are off (``train.eval.every`` and ``train.checkpoint.every`` past
the run).

Memory (``--memory`` runs only this): a fresh process fills a FrameReplayBuffer of 100k
transitions (obs ``[4, 84, 84]`` uint8) from one ``ALE/Pong-v5`` env under the atari preset with
uniformly random actions, once with the frames plain and once zlib-compressed (``compress``),
and prints the frames' bytes, its peak RSS from ``resource.getrusage`` before and after, the
time a stored transition takes and the time of ``sample(32)`` (the mean of 200).

Backends: rlgen's ``VectorEnv`` of 8 ``ALE/Breakout-v5`` envs under the atari preset on
``backend: gymnasium`` and ``backend: envpool`` (when installed), stepped with uniformly random
actions in the same process, in alternating rounds of ``--backend-steps`` vector steps each
(after 50 unmeasured ones); env steps/s is transitions (``valid``) per second, the median of
the rounds. ``--backends`` runs only this.

Whole process (``--dqn-steps N``): ``rlgen run examples/dqn-pong.rl.yaml`` (the Zoo's settings:
replay of 100k transitions, learning from step 100k) for N env steps, evaluation and periodic
checkpoints off, with the replay plain and compressed one after the other (``--dqn-replay``),
each in its own child process tree; its peak RSS is ``ru_maxrss`` of that tree's largest process
(the rank holding TensorFlow, the Q-network, the env and the replay), with steps/s and the
update and env seconds from the run's metrics. N = 110,000 fills the replay and runs 2,500
updates past learning starts (with ``--dqn-envs 1``, the Zoo's; more envs fill the replay
sooner, with the same replay and network). ``--dqn-steps`` runs only this.

    .venv/bin/python benchmarks/pixels.py [--iterations 4] [--workers 3] [--transitions 100000]
    .venv/bin/python benchmarks/pixels.py --dqn-steps 110000
    .venv/bin/python benchmarks/pixels.py --sb3-python /path/to/sb3/bin/python [--rounds 2] [--envpool] [--bfloat16]

Against SB3 (``--sb3-python``): rlgen's PPO Breakout under ``single`` (as above) and SB3's PPO
with the same env and settings (``benchmarks/sb3_atari.py``, run by that interpreter), one after
the other in ``--rounds`` rounds, each over ``--iterations`` iterations, the first left out.
    .venv/bin/python benchmarks/pixels.py --backends [--rounds 3] [--backend-steps 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ppo-breakout.rl.yaml"
PARTS = ("time_update", "time_env", "time_inference", "time_comm")


def speed(
    policy: str, workers: int, iterations: int, scratch: Path, backend: str = "gymnasium", precision: str = "float32"
) -> dict:
    run_dir = scratch / f"ppo-breakout-{policy}-{backend}-{precision}"
    cmd = [sys.executable, "-m", "rlgen", "run", str(EXAMPLE), "--policy", policy, "--iterations", str(iterations)]
    cmd += ["--workers", str(workers)] if policy != "single" else []
    cmd += ["--set", "train.eval.every=100000000", "--set", "train.checkpoint.every=100000000"]
    cmd += ["--set", f"env.backend={backend}"] if backend != "gymnasium" else []
    cmd += ["--set", f"networks.torso.precision={precision}"] if precision != "float32" else []
    cmd += ["--run-dir", str(run_dir), "--quiet"]
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"{policy} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [x for x in rows if "env_steps" in x and "time" in x]
    first, last = rows[0], rows[-1]
    steps, seconds = last["env_steps"] - first["env_steps"], last["time"] - first["time"]
    parts = {p: sum(x.get(p, 0.0) for x in rows[1:]) for p in PARTS}
    return {"steps_per_s": steps / seconds, "steps": steps, "seconds": seconds, "wall": wall, **parts}


MEMORY = r"""
import resource, sys, time
import numpy as np
from rlgen.runtime.envs import VectorEnv
from rlgen.runtime.framereplay import FrameReplayBuffer
n, compress = int(sys.argv[1]), sys.argv[2] == "1"
env = VectorEnv("ALE/Pong-v5", 1, seed=0, preset="atari")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
buf = FrameReplayBuffer(n, (4, 84, 84), (), np.int32, num_envs=1, seed=0, compress=compress)
rng = np.random.default_rng(0)
obs, inserting = env.reset(), 0.0
while buf.inserted < n:
    action = rng.integers(0, env.action_space.n, 1).astype(np.int32)
    nxt, reward, terminated, truncated = env.step(action)
    start = time.perf_counter()
    buf.record(obs, action, reward, nxt, terminated, truncated)
    inserting += time.perf_counter() - start
    obs = nxt
start = time.perf_counter()
for _ in range(200):
    batch = buf.sample(32)
sampling = (time.perf_counter() - start) / 200
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(before, after, buf.frame_bytes, buf.size, inserting / n, sampling, batch.obs.shape, batch.obs.dtype)
"""


def backend_rates(rounds: int, steps: int, num_envs: int = 8) -> dict[str, float]:
    """Median env steps/s of each backend, stepped in alternating rounds with random actions."""
    import importlib.util

    import numpy as np

    from rlgen.runtime.envs import VectorEnv

    names = ["gymnasium"] + (["envpool"] if importlib.util.find_spec("envpool") else [])
    envs = {b: VectorEnv("ALE/Breakout-v5", num_envs, seed=0, preset="atari", backend=b) for b in names}
    rng = np.random.default_rng(0)
    rates: dict[str, list[float]] = {b: [] for b in names}
    try:
        for env in envs.values():
            env.reset()
            for _ in range(50):
                env.step(rng.integers(0, env.action_space.n, num_envs))
        for _ in range(rounds):
            for b, env in envs.items():
                done, start = 0, time.perf_counter()
                for _ in range(steps):
                    env.step(rng.integers(0, env.action_space.n, num_envs))
                    done += int(env.valid.sum())
                rates[b].append(done / (time.perf_counter() - start))
    finally:
        for env in envs.values():
            env.close()
    return {b: float(np.median(r)) for b, r in rates.items()}


def print_backends(rounds: int, steps: int) -> None:
    rates = backend_rates(rounds, steps)
    line = ", ".join(f"{b} {r:,.0f}" for b, r in rates.items())
    ratio = f"; envpool / gymnasium {rates['envpool'] / rates['gymnasium']:.2f}" if "envpool" in rates else ""
    print(f"Atari backends, 8 envs of ALE/Breakout-v5 (atari preset), random actions, env steps/s: {line}{ratio}")


def memory(transitions: int, compress: bool) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", MEMORY, str(transitions), "1" if compress else "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    before, after, frames, _size, insert_s, sample_s, *_ = r.stdout.split()
    return {
        "before_kb": int(before),
        "peak_kb": int(after),
        "frames_bytes": int(frames),
        "insert_us": float(insert_s) * 1e6,
        "sample_ms": float(sample_s) * 1e3,
    }


def print_memory(transitions: int) -> None:
    """The replay alone, filled from ALE/Pong-v5 (random actions), plain and compressed."""
    print(
        f"DQN Atari replay alone (FrameReplayBuffer, {transitions:,} transitions of [4, 84, 84] uint8 from "
        "ALE/Pong-v5 under the atari preset, random actions; 'before' is the process before filling, with ALE "
        "and the TensorFlow libraries rlgen's env module loads):"
    )
    print(f"  {'replay':<11} {'frames':>9} {'peak RSS':>9} {'before':>7} {'insert us':>10} {'sample(32) ms':>14}")
    for name, flag in (("plain", False), ("compressed", True)):
        m = memory(transitions, flag)
        print(
            f"  {name:<11} {m['frames_bytes'] / 2**20:>5.0f} MiB {m['peak_kb'] / 2**10:>5.0f} MiB "
            f"{m['before_kb'] / 2**10:>3.0f} MiB {m['insert_us']:>10.1f} {m['sample_ms']:>14.2f}"
        )


#: Runs a command and writes its process tree's peak RSS (the largest process's, KiB) to argv[1].
PEAK = r"""
import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:]).returncode
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc)
"""


def dqn_process(steps: int, envs: int, compress: bool) -> dict | None:
    """Train DQN Pong for ``steps`` env steps on ``envs`` envs in a child process tree, with the
    replay's frames compressed or not; its peak RSS, speed and time per part (None if it failed)."""
    example = ROOT / "examples" / "dqn-pong.rl.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, peak = Path(tmp) / "dqn-pong", Path(tmp) / "peak"
        cmd = [sys.executable, "-m", "rlgen", "run", str(example), "--set", f"train.total_steps={steps}"]
        cmd += ["--set", f"env.num_envs={envs}", "--set", f"components.replay.compress={str(compress).lower()}"]
        cmd += ["--set", "train.eval.every=1000000000", "--set", "train.checkpoint.every=1000000000"]
        cmd += ["--run-dir", str(run_dir), "--quiet"]
        r = subprocess.run(
            [sys.executable, "-c", PEAK, str(peak), *cmd],
            cwd=tmp,
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        if r.returncode != 0:
            print(f"DQN Pong whole process: FAILED (exit {r.returncode}): {(r.stderr or r.stdout)[-500:]}")
            return None
        info = json.loads((run_dir / "run.json").read_text())
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        learned = [row for row in rows if row.get("loss") is not None]
        timed = [row for row in rows if "env_steps" in row and "time" in row]
        return {
            "steps": info["env_steps"],
            "train_s": timed[-1]["time"] if timed else float("nan"),
            "updates_rows": len(learned),
            "peak_kb": int(peak.read_text()),
            **{p: sum(row.get(p, 0.0) for row in rows) for p in PARTS},
        }


def print_dqn(steps: int, envs: int, compress: str) -> None:
    """DQN Pong's whole process with the replay plain and/or compressed, one after the other."""
    runs = {"plain": False, "compressed": True}
    runs = {k: v for k, v in runs.items() if compress == "both" or k == compress}
    print(
        f"DQN Pong whole process (examples/dqn-pong.rl.yaml, {envs} env(s), replay 100k, learning starts 100k), "
        f"{steps:,} env steps:"
    )
    print(f"  {'replay':<11} {'peak RSS':>12} {'steps/s':>8} {'train s':>8} {'update s':>9} {'env s':>6} {'rows':>5}")
    done = {}
    for name, flag in runs.items():
        x = dqn_process(steps, envs, flag)
        if x is None:
            continue
        done[name] = x
        print(
            f"  {name:<11} {x['peak_kb'] / 2**10:>8.0f} MiB {x['steps'] / x['train_s']:>8.1f} {x['train_s']:>8.0f} "
            f"{x['time_update']:>9.1f} {x['time_env']:>6.1f} {x['updates_rows']:>5}"
        )
    if len(done) == 2:
        a, b = done["plain"], done["compressed"]
        print(
            f"  compressed / plain: peak RSS {b['peak_kb'] / a['peak_kb']:.2f}, "
            f"steps/s {(b['steps'] / b['train_s']) / (a['steps'] / a['train_s']):.2f}"
        )


def against_sb3(python: str, iterations: int, rounds: int, envpool: bool = False, bfloat16: bool = False) -> None:
    """rlgen's and SB3's PPO Breakout, alternating, env steps/s and where the time goes; with
    ``envpool`` also rlgen on ``backend: envpool`` (SB3 has no envpool backend of its own), with
    ``bfloat16`` also rlgen with the torso's ``precision: bfloat16`` (on each backend)."""
    sb3 = [python, str(ROOT / "benchmarks" / "sb3_atari.py"), "--iterations", str(iterations)]
    backends = ("gymnasium", "envpool") if envpool else ("gymnasium",)
    precisions = ("float32", "bfloat16") if bfloat16 else ("float32",)
    #: each rlgen row's (backend, precision)
    setups = {
        " ".join(["rlgen", "single" if b == "gymnasium" else b] + (["bf16"] if p == "bfloat16" else [])): (b, p)
        for b in backends
        for p in precisions
    }
    rows: dict[str, list[dict]] = {"rlgen single": [], "SB3 PPO": [], **{name: [] for name in setups}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for name in list(rows) if r % 2 == 0 else list(rows)[::-1]:
                if name == "SB3 PPO":
                    out = subprocess.run(sb3, capture_output=True, text=True, cwd=tmp)
                    if out.returncode != 0:
                        print(f"  SB3 failed: {out.stderr[-500:]}")
                        continue
                    x = json.loads(out.stdout.strip().splitlines()[-1])
                    rows[name].append(
                        {"steps_per_s": x["steps_per_s"], "update": x["update_s"], "rest": x["rollout_s"]}
                    )
                else:
                    scratch = Path(tmp) / f"round-{r}"
                    scratch.mkdir(exist_ok=True)
                    x = speed("single", 1, iterations, scratch, *setups[name])
                    rest = x["time_env"] + x["time_inference"]
                    rows[name].append({"steps_per_s": x["steps_per_s"], "update": x["time_update"], "rest": rest})
                print(f"  round {r + 1} {name}: {rows[name][-1]['steps_per_s']:.1f} env steps/s", flush=True)
    print(f"  {'':<18} {'steps/s (each round)':<24} {'update s':>9} {'acting+env s':>13}")
    for name, xs in rows.items():
        rates = " ".join(f"{x['steps_per_s']:.1f}" for x in xs)
        upd = sum(x["update"] for x in xs) / max(1, len(xs))
        rest = sum(x["rest"] for x in xs) / max(1, len(xs))
        print(f"  {name:<18} {rates:<24} {upd:>9.1f} {rest:>13.1f}")
    if rows["SB3 PPO"]:
        b = statistics.median(x["steps_per_s"] for x in rows["SB3 PPO"])
        for name in (n for n in rows if n != "SB3 PPO" and rows[n]):
            a = statistics.median(x["steps_per_s"] for x in rows[name])
            print(f"  ratio {name} / SB3 (medians over rounds): {a / b:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--transitions", type=int, default=100_000)
    ap.add_argument("--backends", action="store_true", help="only the backends' env steps/s")
    ap.add_argument("--memory", action="store_true", help="only the replay's memory, plain and compressed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend-steps", type=int, default=500)
    ap.add_argument("--dqn-steps", type=int, default=0, help="only DQN Pong's whole process, for this many steps")
    ap.add_argument("--sb3-python", default=None, help="an interpreter with stable-baselines3: only rlgen vs SB3")
    ap.add_argument("--dqn-envs", type=int, default=1, help="its envs (the Zoo's: 1; more fill the replay sooner)")
    ap.add_argument("--dqn-replay", choices=("plain", "compressed", "both"), default="both", help="its replay")
    ap.add_argument("--envpool", action="store_true", help="with --sb3-python: also rlgen on backend: envpool")
    ap.add_argument("--bfloat16", action="store_true", help="with --sb3-python: also rlgen with precision: bfloat16")
    args = ap.parse_args()
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    if args.sb3_python:
        print(f"PPO Breakout, rlgen single against SB3, {args.iterations} iterations of 8 envs x 128 steps:")
        against_sb3(args.sb3_python, args.iterations, args.rounds, args.envpool, args.bfloat16)
        return
    if args.dqn_steps:
        print_dqn(args.dqn_steps, args.dqn_envs, args.dqn_replay)
        return
    if args.memory:
        print_memory(args.transitions)
        return
    print_backends(args.rounds, args.backend_steps)
    if args.backends:
        return
    print(
        f"PPO Breakout (ALE/Breakout-v5, atari preset; 8 envs x 128 steps, 4 epochs, minibatch 256), "
        f"{args.iterations} iterations, steps/s over iterations 2..{args.iterations}:"
    )
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            "single": speed("single", 1, args.iterations, Path(tmp)),
            f"actors-learner x{args.workers}": speed("actors-learner", args.workers, args.iterations, Path(tmp)),
        }
    cols = ("steps/s", 8), ("steps", 6), ("s", 6), ("update s", 9), ("env s", 6), ("infer s", 8), ("comm s", 7)
    print(f"  {'policy':<20} " + " ".join(f"{c:>{w}}" for c, w in cols))
    for name, x in results.items():
        print(
            f"  {name:<20} {x['steps_per_s']:>8.1f} {x['steps']:>6} {x['seconds']:>6.1f} {x['time_update']:>9.1f} "
            f"{x['time_env']:>6.1f} {x['time_inference']:>8.1f} {x['time_comm']:>7.1f}"
        )
    single, dist = results.values()
    print(f"  ratio actors-learner / single: {dist['steps_per_s'] / single['steps_per_s']:.2f}")
    print_memory(args.transitions)


if __name__ == "__main__":
    main()
