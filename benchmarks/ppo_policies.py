"""PPO on CartPole-v1 under every distribution policy, with Stable-Baselines3 as the reference column.

    .venv/bin/python benchmarks/ppo_policies.py                      # all policies, 2 ranks, + SB3
    .venv/bin/python benchmarks/ppo_policies.py --policies single --seeds 0,1,2
    .venv/bin/python benchmarks/ppo_policies.py --spec examples/ppo-pendulum.rl.yaml --target -250 --no-sb3

Every row trains the example spec (RL Zoo hyper-parameters, 100k env steps, stopping at
the target) through `rlgen run` in a fresh process. "time to target" is the wall time
until the mean return of the last 100 training episodes reaches the target, measured the
same way for SB3 (its ep_info_buffer), from the start of training (after imports and
set-up). SB3 is an optional extra (`pip install -e .[bench]`); it never runs inside rlgen.
Ratios are only meaningful within one run of this script: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rlgen.app.bench import PolicyResult, format_table, run_policy

ROOT = Path(__file__).resolve().parent.parent

SB3_SCRIPT = r"""
import json, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

seed, target, total = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])

def linear(start):
    return lambda progress_remaining: progress_remaining * start

class Stop(BaseCallback):
    def _on_training_start(self):
        self.t0, self.hit = time.perf_counter(), None
    def _on_rollout_end(self):
        buf = self.model.ep_info_buffer
        if self.hit is None and buf and np.mean([e["r"] for e in buf]) >= target:
            self.hit = (time.perf_counter() - self.t0, self.num_timesteps)
    def _on_step(self):
        return self.hit is None

env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
            learning_rate=linear(1e-3), clip_range=linear(0.2), seed=seed, device="cpu", verbose=0)
cb = Stop()
model.learn(total_timesteps=total, callback=cb)
wall = time.perf_counter() - cb.t0
buf = model.ep_info_buffer
print(json.dumps({"env_steps": model.num_timesteps, "wall": wall, "steps_per_s": model.num_timesteps / wall,
                  "time_to_target": cb.hit[0] if cb.hit else None, "steps_to_target": cb.hit[1] if cb.hit else None,
                  "final_return": float(np.mean([e["r"] for e in buf])) if buf else None}))
"""


def run_sb3(seed: int, target: float, total: int) -> PolicyResult:
    proc = subprocess.run(
        [sys.executable, "-c", SB3_SCRIPT, str(seed), str(target), str(total)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode != 0:
        return PolicyResult("SB3 2.9.2", 1, False, (proc.stderr.strip().splitlines() or ["failed"])[-1])
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return PolicyResult("SB3 2.9.2", 1, True, iterations=0, **doc)


def median_result(results: list[PolicyResult]) -> PolicyResult:
    """Per-field median over seeds (time to target: median over the runs that reached it)."""
    ok = [r for r in results if r.ok]
    if not ok:
        return results[0]
    hits = [r.time_to_target for r in ok if r.time_to_target is not None]
    steps = [r.steps_to_target for r in ok if r.steps_to_target is not None]
    finals = [r.final_return for r in ok if r.final_return is not None]
    parts = {p: statistics.median(r.ms_per_iteration.get(p, 0.0) for r in ok) for p in ok[0].ms_per_iteration}
    return PolicyResult(
        ok[0].policy,
        ok[0].workers,
        True,
        env_steps=int(statistics.median(r.env_steps for r in ok)),
        wall=statistics.median(r.wall for r in ok),
        steps_per_s=statistics.median(r.steps_per_s for r in ok),
        time_to_target=statistics.median(hits) if len(hits) * 2 > len(ok) else None,
        steps_to_target=int(statistics.median(steps)) if len(steps) * 2 > len(ok) else None,
        final_return=statistics.median(finals) if finals else None,
        ms_per_iteration=parts,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "examples" / "ppo-cartpole.rl.yaml"))
    parser.add_argument("--policies", default="single,actors-learner,central-inference,multi-learner")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", default="0", help="comma-separated seeds; medians are reported")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--no-sb3", action="store_true", help="skip the Stable-Baselines3 reference")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    spec_text = Path(args.spec).read_text()
    columns: list[PolicyResult] = []
    with tempfile.TemporaryDirectory(prefix="rlgen-ppo-bench-") as tmp:
        for policy in args.policies.split(","):
            runs = []
            for seed in seeds:
                spec = Path(tmp) / f"seed{seed}.rl.yaml"
                # Time to target measures training, as for SB3: no periodic evaluation in the copy.
                text = re.sub(
                    r"eval: \{every: \d+", "eval: {every: 0", spec_text.replace("  seed: 0", f"  seed: {seed}")
                )
                spec.write_text(text)
                workers = 1 if policy == "single" else args.workers
                result = run_policy(spec, policy, workers, None, Path(tmp) / f"{policy}-{seed}", args.target)
                print(
                    f"{policy} seed {seed}: {result.time_to_target} s to target, {result.steps_per_s:,.0f} steps/s",
                    file=sys.stderr,
                )
                runs.append(result)
            columns.append(median_result(runs))
    if not args.no_sb3 and "CartPole" in spec_text:
        try:
            import stable_baselines3  # noqa: F401
        except ImportError:
            print(
                "(stable-baselines3 not installed: pip install -e .[bench] for the reference column)", file=sys.stderr
            )
        else:
            runs = [run_sb3(seed, args.target, 100_000) for seed in seeds]
            columns.append(median_result(runs))
    print(f"PPO {Path(args.spec).name}, seeds {seeds} (medians), target mean return {args.target:g}")
    print(format_table(columns, args.target))
    sb3 = next((c for c in columns if c.policy.startswith("SB3")), None)
    single = next((c for c in columns if c.policy == "single"), None)
    if sb3 and single and sb3.time_to_target and single.time_to_target:
        print(f"single / SB3 time to {args.target:g}: {single.time_to_target / sb3.time_to_target:.2f}")


if __name__ == "__main__":
    main()
