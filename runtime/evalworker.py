"""Periodic evaluation in a process of its own, so that training does not stop for it.

Evaluating the CartPole example's policy (10 episodes of up to 500 steps every 10,000 env
steps) steps half as many env steps as training does: done in the training loop it cost a
quarter of the run. Here rank 0 only writes the policy's weights (``tf.train.Checkpoint``,
about 10 ms) and goes on; an evaluator process started with the run (its TensorFlow import
overlaps training) restores them into the exported policy, evaluates on fresh envs exactly as
:func:`rlgen.runtime.evaluate.evaluate` does in-loop, and exports ``policy-best/`` itself when
the result is the best so far. On a machine with a core to spare that is all off the training
path.

Results stay exactly reproducible: the weights are a snapshot, the evaluation envs are seeded
as before, and a result lands in the metrics row of a fixed later iteration, waiting for it
there if need be: ``lead`` iterations on, or earlier in an iteration that writes a checkpoint
(a resumed run has nothing in flight) or is the last of the process's run (a run split with
``--iterations`` lands it there); the row says which snapshot it evaluated (``eval_env_steps``).

Only for deterministic evaluation (the exported policy acts deterministically);
``RLGEN_EVAL_PROCESS=0`` evaluates in the loop as before. If the process fails, the run goes
on and evaluates in the loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Weight snapshots kept (older ones go; the directory goes when the run finishes).
KEEP_WEIGHTS = 2


class Evaluator:
    """Rank 0's side: one evaluator process, at most one evaluation in flight."""

    def __init__(self, run_dir: Path, env: dict[str, Any], episodes: int, seed: int, lead: int) -> None:
        self.dir = run_dir / ".eval"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lead = lead
        self.pending: dict[str, Any] | None = None  # {"steps", "due", "weights"}
        self.template = False
        log = open(run_dir / "ranks" / "eval.log", "ab")  # noqa: SIM115 - the process's lifetime
        env_vars = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlgen.runtime.evalworker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env_vars,
            text=True,
            bufsize=1,
        )
        log.close()
        self._send({"env": env, "episodes": episodes, "seed": seed})

    def request(self, policy: Any, steps: int, due: int, export_template: Any) -> None:
        """Evaluate the policy's weights as they are now (``steps`` env steps); due at iteration ``due``."""
        import tensorflow as tf

        if not self.template:  # the exported policy the process restores each snapshot into
            export_template(self.dir / "template")
            self._send({"template": str(self.dir / "template")})
            self.template = True
        weights = tf.train.Checkpoint(policy=policy).write(str(self.dir / f"weights-{steps}"))
        self.pending = {"steps": steps, "due": due, "weights": weights}
        self._send({"evaluate": weights, "steps": steps})
        self._forget_old_weights()

    def collect(self) -> tuple[int, float, float] | None:
        """Wait for the evaluation in flight: (env steps, mean, std), or None if the process failed."""
        assert self.pending is not None
        steps, self.pending = self.pending["steps"], None
        while True:
            reply = self._receive()
            if reply is None or "error" in reply:
                return None
            if reply.get("steps") == steps:
                return steps, float(reply["mean"]), float(reply["std"])

    def export(self, target: Path) -> None:
        """Export the policy of the last evaluation to ``target`` (the process does it, in order)."""
        self._send({"export": str(target)})

    def close(self, timeout: float = 120.0) -> None:
        """Let the process finish what it was asked (exports) and end."""
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def discard(self) -> None:
        """Remove the snapshots and the template (a finished run has nothing in flight)."""
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):  # the process is gone: collect() says so
            pass

    def _receive(self) -> dict[str, Any] | None:
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def _forget_old_weights(self) -> None:
        snapshots = sorted(self.dir.glob("weights-*.index"), key=lambda p: int(p.stem.split("-")[1]))
        for old in snapshots[:-KEEP_WEIGHTS]:
            for part in self.dir.glob(f"{old.stem}.*"):
                part.unlink(missing_ok=True)


def main() -> None:
    """The evaluator process: JSON lines in on stdin, one reply line per evaluation or export out."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to the log, not into the replies
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from rlgen.runtime.session import configure_tensorflow, replace_dir

    configure_tensorflow()
    import tensorflow as tf

    from rlgen.runtime.evaluate import evaluate

    config = json.loads(sys.stdin.readline())
    loaded = restore = None

    def act(obs):  # noqa: ANN001, ANN202
        return loaded.act(tf.constant(obs)).numpy()

    for line in sys.stdin:
        message = json.loads(line)
        try:
            if "template" in message:
                loaded = tf.saved_model.load(message["template"])
                restore = tf.train.Checkpoint(policy=loaded.policy)
            elif "evaluate" in message:
                restore.read(message["evaluate"]).assert_existing_objects_matched()
                returns = evaluate(act, config["env"], config["episodes"], config["seed"])
                reply = {"steps": message["steps"], "mean": float(returns.mean()), "std": float(returns.std())}
                replies.write(json.dumps(reply) + "\n")
            elif "export" in message:
                target = Path(message["export"])
                tmp = target.with_name(f".{target.name}.tmp")
                tf.saved_model.save(loaded, str(tmp))
                replace_dir(tmp, target)
        except Exception as exc:  # noqa: BLE001 - reported to the run, which evaluates in the loop from then on
            replies.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
            print(f"evaluator: {type(exc).__name__}: {exc}", file=sys.stderr)
    replies.flush()
    sys.stderr.flush()
    os._exit(0)  # everything is written: skip TensorFlow's teardown (0.6 s the run would wait for)


if __name__ == "__main__":
    main()
