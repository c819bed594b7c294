"""Pixels: PPO Breakout env steps/s under ``single`` and ``actors-learner`` side by side, and
the memory of DQN's Atari replay (the RL Zoo's 100k transitions) in one run.

Speed: ``rlgen run examples/ppo-breakout.rl.yaml`` with the example's (the Zoo's) settings,
8 envs x 128 steps, 4 epochs of minibatch 256, for ``--iterations`` iterations under each
policy; steps/s is env steps over the iterations after the first (which compiles), from the
run's metrics.jsonl, with the time per part (update, env, inference, comm) of those iterations.
Evaluation and checkpoints are off (``train.eval.every`` and ``train.checkpoint.every`` past
the run).

Memory: a fresh process (NumPy and the buffer only, no TensorFlow) fills a FrameReplayBuffer
of 100k transitions (obs ``[4, 84, 84]`` uint8) from one env whose stacks roll one random
84x84 frame per step, with an episode end every 1,000 steps, and prints its peak RSS from
``resource.getrusage`` before and after, and the frames' bytes.

Backends: rlgen's ``VectorEnv`` of 8 ``ALE/Breakout-v5`` envs under the atari preset on
``backend: gymnasium`` and ``backend: envpool`` (when installed), stepped with uniformly random
actions in the same process, in alternating rounds of ``--backend-steps`` vector steps each
(after 50 unmeasured ones); env steps/s is transitions (``valid``) per second, the median of
the rounds. ``--backends`` runs only this.

Whole process (``--dqn-steps N``): ``rlgen run examples/dqn-pong.rl.yaml`` (the Zoo's settings:
replay of 100k transitions, learning from step 100k) for N env steps, evaluation and periodic
checkpoints off, in a child process tree; its peak RSS is ``resource.getrusage(RUSAGE_CHILDREN)``'s
``ru_maxrss`` after it ends (the largest process of the tree: the rank holding TensorFlow, the
Q-network, the env and the replay), with the replay's fill read from the run. N = 110,000 fills
the replay and runs 2,500 updates past learning starts (with ``--dqn-envs 1``, the Zoo's; more
envs fill the replay sooner, with the same replay and network). ``--dqn-steps`` runs only this.

    .venv/bin/python benchmarks/pixels.py [--iterations 4] [--workers 3] [--transitions 100000]
    .venv/bin/python benchmarks/pixels.py --dqn-steps 110000
    .venv/bin/python benchmarks/pixels.py --sb3-python /path/to/sb3-venv/bin/python [--rounds 2] [--envpool]

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


def speed(policy: str, workers: int, iterations: int, scratch: Path, backend: str = "gymnasium") -> dict:
    run_dir = scratch / f"ppo-breakout-{policy}-{backend}"
    cmd = [sys.executable, "-m", "rlgen", "run", str(EXAMPLE), "--policy", policy, "--iterations", str(iterations)]
    cmd += ["--workers", str(workers)] if policy != "single" else []
    cmd += ["--set", "train.eval.every=100000000", "--set", "train.checkpoint.every=100000000"]
    cmd += ["--set", f"env.backend={backend}"] if backend != "gymnasium" else []
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
import resource, sys
import numpy as np
from rlgen.runtime.framereplay import FrameReplayBuffer
n = int(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
buf = FrameReplayBuffer(n, (4, 84, 84), (), np.int32, num_envs=1, seed=0)
rng = np.random.default_rng(0)
obs = rng.integers(0, 256, (1, 4, 84, 84), dtype=np.uint8)
for t in range(n):
    if t % 1000 == 999:  # an episode ends: the next stack starts afresh
        nxt = np.repeat(rng.integers(0, 256, (1, 1, 84, 84), dtype=np.uint8), 4, axis=1)
    else:
        nxt = np.concatenate([obs[:, 1:], rng.integers(0, 256, (1, 1, 84, 84), dtype=np.uint8)], axis=1)
    buf.insert(obs, np.zeros(1, np.int32), np.zeros(1, np.float32), nxt, np.zeros(1, np.float32))
    obs = nxt
batch = buf.sample(32)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(before, after, buf.frames.nbytes, buf.size, batch.obs.shape, batch.obs.dtype)
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


def memory(transitions: int) -> dict:
    r = subprocess.run([sys.executable, "-c", MEMORY, str(transitions)], capture_output=True, text=True, check=True)
    before, after, frames, size, *_ = r.stdout.split()
    return {"before_kb": int(before), "peak_kb": int(after), "frames_bytes": int(frames), "size": int(size)}


def dqn_process(steps: int, envs: int) -> None:
    """Train DQN Pong for ``steps`` env steps on ``envs`` envs in a child process tree; print its peak RSS."""
    import resource

    example = ROOT / "examples" / "dqn-pong.rl.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "dqn-pong"
        cmd = [sys.executable, "-m", "rlgen", "run", str(example), "--set", f"train.total_steps={steps}"]
        cmd += ["--set", f"env.num_envs={envs}"]
        cmd += ["--set", "train.eval.every=1000000000", "--set", "train.checkpoint.every=1000000000"]
        cmd += ["--run-dir", str(run_dir), "--quiet"]
        start = time.perf_counter()
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
        wall = time.perf_counter() - start
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if r.returncode != 0:
            print(f"DQN Pong whole process: FAILED (exit {r.returncode}): {(r.stderr or r.stdout)[-500:]}")
            return
        info = json.loads((run_dir / "run.json").read_text())
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        learned = [row for row in rows if row.get("loss") is not None]
    print(
        f"DQN Pong whole process (examples/dqn-pong.rl.yaml, {envs} env(s), replay 100k, learning starts 100k): "
        f"{info['env_steps']:,} env steps in {wall:.0f} s ({len(learned)} metric rows with updates); "
        f"peak RSS of the largest process {peak_kb / 2**10:.0f} MiB ({peak_kb / 2**20:.2f} GiB)"
    )


def against_sb3(python: str, iterations: int, rounds: int, envpool: bool = False) -> None:
    """rlgen's and SB3's PPO Breakout, alternating, env steps/s and where the time goes; with
    ``envpool`` also rlgen on ``backend: envpool`` (SB3 has no envpool backend of its own)."""
    sb3 = [python, str(ROOT / "benchmarks" / "sb3_atari.py"), "--iterations", str(iterations)]
    rows: dict[str, list[dict]] = {"rlgen single": [], "SB3 PPO": []}
    if envpool:
        rows["rlgen envpool"] = []
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
                    x = speed("single", 1, iterations, scratch, "envpool" if name == "rlgen envpool" else "gymnasium")
                    rest = x["time_env"] + x["time_inference"]
                    rows[name].append({"steps_per_s": x["steps_per_s"], "update": x["time_update"], "rest": rest})
                print(f"  round {r + 1} {name}: {rows[name][-1]['steps_per_s']:.1f} env steps/s", flush=True)
    print(f"  {'':<14} {'steps/s (each round)':<24} {'update s':>9} {'acting+env s':>13}")
    for name, xs in rows.items():
        rates = " ".join(f"{x['steps_per_s']:.1f}" for x in xs)
        upd = sum(x["update"] for x in xs) / max(1, len(xs))
        rest = sum(x["rest"] for x in xs) / max(1, len(xs))
        print(f"  {name:<14} {rates:<24} {upd:>9.1f} {rest:>13.1f}")
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
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend-steps", type=int, default=500)
    ap.add_argument("--dqn-steps", type=int, default=0, help="only DQN Pong's whole process, for this many steps")
    ap.add_argument("--sb3-python", default=None, help="an interpreter with stable-baselines3: only rlgen vs SB3")
    ap.add_argument("--dqn-envs", type=int, default=1, help="its envs (the Zoo's: 1; more fill the replay sooner)")
    ap.add_argument("--envpool", action="store_true", help="with --sb3-python: also rlgen on backend: envpool")
    args = ap.parse_args()
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    if args.sb3_python:
        print(f"PPO Breakout, rlgen single against SB3, {args.iterations} iterations of 8 envs x 128 steps:")
        against_sb3(args.sb3_python, args.iterations, args.rounds, args.envpool)
        return
    if args.dqn_steps:
        dqn_process(args.dqn_steps, args.dqn_envs)
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
    m = memory(args.transitions)
    print(
        f"DQN Atari replay, FrameReplayBuffer of {m['size']:,} transitions of [4, 84, 84] uint8: "
        f"frames {m['frames_bytes'] / 2**20:.0f} MiB; process peak RSS {m['peak_kb'] / 2**10:.0f} MiB "
        f"({m['before_kb'] / 2**10:.0f} MiB before filling; NumPy only, no TensorFlow)"
    )


if __name__ == "__main__":
    main()
