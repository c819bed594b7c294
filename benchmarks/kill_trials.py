"""Kill a rank at a random moment, then resume as the README says; count what held.

    .venv/bin/python benchmarks/kill_trials.py --trials 20

Each trial trains PPO CartPole (the example, evaluation off, a checkpoint every 1,024
steps) under one of the distributed policies in turn, SIGKILLs a random rank at a random
moment after the first checkpoint, and times how long the launcher takes to end with an
error naming that rank. Then ``rlgen run --resume RUN`` must continue from the newest
intact checkpoint and finish. Prints one line per trial and the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlgen.app.bench import speed_only

ROOT = Path(__file__).resolve().parent.parent
POLICIES = [("actors-learner", 3), ("async-actors", 3), ("central-inference", 2), ("multi-learner", 2)]
ITERATIONS = 60
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def spec(tmp: Path) -> Path:
    return speed_only(ROOT / "examples" / "ppo-cartpole.rl.yaml", tmp, checkpoint_every=1024)


def trial(i: int, path: Path, tmp: Path, rng: random.Random) -> dict:
    policy, workers = POLICIES[i % len(POLICIES)]
    run_dir = tmp / f"trial{i}"
    cmd = [sys.executable, "-m", "rlgen", "run", str(path), "--policy", policy, "--workers", str(workers)]
    cmd += ["--run-dir", str(run_dir), "--build-dir", str(tmp / f"build-{policy}"), "--quiet"]
    proc = subprocess.Popen([*cmd, "--iterations", str(ITERATIONS)], stderr=subprocess.PIPE, text=True, env=ENV)
    out = {"trial": i, "policy": f"{policy} ({workers})"}
    ckpts = run_dir / "checkpoints"
    while proc.poll() is None and not any(ckpts.glob("ckpt-*.index")):
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 3.0))  # a random moment of training after the first checkpoint
    victim = rng.randrange(workers)
    pid_file = run_dir / "ranks" / f"{victim}.pid"
    if proc.poll() is not None or not pid_file.is_file():
        proc.wait()
        return {**out, "missed": True}
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    killed = time.perf_counter()
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    out.update(
        rank=victim,
        ended_s=round(time.perf_counter() - killed, 1),
        exit=proc.returncode,
        named=f"rank {victim}" in err,
        message=err.strip().splitlines()[-1][:160] if err.strip() else "",
    )
    resumed = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", "--resume", str(run_dir), "--quiet", "--iterations", "8"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    doc = json.loads((run_dir / "run.json").read_text())
    out.update(resume_exit=resumed.returncode, resumed=resumed.returncode == 0 and doc.get("status") == "finished")
    if not out["resumed"]:
        out["resume_error"] = (resumed.stderr or resumed.stdout).strip()[-200:]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="rlgen-kill-") as name:
        tmp = Path(name)
        path = spec(tmp)
        i = 0
        while len([r for r in results if not r.get("missed")]) < args.trials:
            r = trial(i, path, tmp, rng)
            i += 1
            results.append(r)
            print(json.dumps(r), flush=True)
    done = [r for r in results if not r.get("missed")]
    fast = sum(r["ended_s"] <= 30 and r["exit"] != 0 and r["named"] for r in done)
    resumed = sum(r["resumed"] for r in done)
    print(
        f"{len(done)} kills ({len(results) - len(done)} missed: the run ended first): {fast} ended within 30 s "
        f"naming the rank (slowest {max(r['ended_s'] for r in done):.1f} s); {resumed} resumed and finished"
    )
    return 0 if fast == resumed == len(done) else 1


if __name__ == "__main__":
    sys.exit(main())
