"""Periodic evaluation in a process of its own, so that training does not stop for it.

Evaluating the CartPole example's policy (10 episodes of up to 500 steps every 10,000 env
steps) steps half as many env steps as training does: done in the training loop it cost a
quarter of the run. Here rank 0 only writes the policy's weights (``tf.train.Checkpoint``,
about 10 ms) and goes on; an evaluator process started with the run (its TensorFlow import
overlaps training) restores them into the exported policy, evaluates on fresh envs exactly as
:class:`rlgen.runtime.evaluation.episodes.PolicyEvaluation` does in-loop, and exports ``policy-best/`` itself when
the result is the best so far. On a machine with a core to spare that is all off the training
path.

Results stay exactly reproducible: the weights are a snapshot, the evaluation envs are seeded
as before, and a result lands in the metrics row of a fixed later iteration, waiting for it
there if need be: ``lead`` iterations on, or earlier in an iteration that writes a checkpoint
(a resumed run has nothing in flight) or is the last of the process's run (a run split with
``--iterations`` lands it there); the row says which snapshot it evaluated (``eval_env_steps``).

The process is forked from rank 0 right after TensorFlow's import and before its first op
(:func:`prefork`): it shares the imported modules instead of importing TensorFlow again,
which cost about as much CPU as a short run's evaluations (3 s). A forked process builds its
own copy of the policy by running rank 0's role up to ``session.attach`` (:func:`policy_of`:
the generated set-up only constructs fragments before it), beside training. Where rank 0
cannot fork so (TensorFlow already running), the process is started afresh and restores the
snapshots into a SavedModel template of the policy that rank 0 exports (0.2-0.7 s on the
training path, which the forked process saves).

The process runs at a lower scheduling priority than training (``nice`` +``EVAL_NICE``, or
``RLGEN_EVAL_NICE``): it takes the cycles training leaves idle (while it waits on an env, a
rollout's single thread, a collective) instead of slowing training's threads down, and when
rank 0 waits for a result that is due, the process has the CPU to itself. A niceness changes
when a result arrives, never what it is.

Only for deterministic evaluation (the exported policy acts deterministically);
``RLGEN_EVAL_PROCESS=0`` evaluates in the loop as before; ``RLGEN_EVAL_PROCESS=spawn`` starts
the process afresh instead of forking it. If the process fails, the run goes
on and evaluates in the loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rlgen.runtime import devices
from rlgen.runtime.tfimport import fast_exit, own_temporary_directory

#: Weight snapshots kept (older ones go; the directory goes when the run finishes).
KEEP_WEIGHTS = 2
EVAL_NICE = 10  # the process's niceness above rank 0's (RLGEN_EVAL_NICE)


class _Forked:
    """A forked evaluator process, driven as a ``subprocess.Popen`` with pipes is."""

    def __init__(self, pid: int, stdin: IO[str], stdout: IO[str], builds: bool) -> None:
        self.builds = builds  # it builds its own copy of the policy (else: a template is exported for it)
        self.pid, self.stdin, self.stdout = pid, stdin, stdout

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"evaluator {self.pid}", timeout)
            time.sleep(0.02)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


class _Attached(Exception):  # noqa: N818 - not an error: how policy_of's stand-in session ends the set-up
    def __init__(self, policy: Any) -> None:
        super().__init__("attached")
        self.policy = policy


class _SetUpOnly:
    """A stand-in session: a role runs until it attaches its policy, which ends it."""

    def attach(self, module: Any, policy: Any = None, **_: Any) -> None:
        raise _Attached(policy)


def policy_of(role: Callable[[Any, int], None], rank: int = 0) -> Any:
    """The policy ``role`` attaches on ``rank``, built by the role's own set-up (a generated role
    only constructs its fragments before ``session.attach``); the role's loop never runs."""
    try:
        role(_SetUpOnly(), rank)
    except _Attached as attached:
        if attached.policy is None:
            raise RuntimeError("the role attached no policy to evaluate") from None
        return attached.policy
    raise RuntimeError("the role ended without attaching a policy")


def prefork(build: Callable[[], Any] | None = None) -> _Forked | None:
    """Fork the evaluator process now, if TensorFlow is imported but runs nothing yet
    (a process that has run TensorFlow cannot fork a working copy of it), and return it
    (None: not now, or ``RLGEN_EVAL_PROCESS`` says otherwise). Rank 0 calls this before its
    first op, with ``build`` making a copy of the policy it will evaluate (for
    :func:`policy_of`), and hands the process to its session: :class:`Evaluator` takes it, or
    :func:`discard` ends it where the run will not evaluate."""
    if os.environ.get("RLGEN_EVAL_PROCESS") in ("0", "spawn") or not _tensorflow_idle():
        return None
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the evaluator: its pipes as stdin and stdout, no other inherited descriptor
        try:
            os.dup2(down_r, 0)
            os.dup2(up_w, 1)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            sys.stdin = os.fdopen(0, "r")
            main(build)
        finally:
            fast_exit(0)
    os.close(down_r)
    os.close(up_w)
    return _Forked(pid, os.fdopen(down_w, "w", buffering=1), os.fdopen(up_r, "r"), builds=build is not None)


def discard(forked: _Forked | None) -> None:
    """End a pre-forked process this run will not use (it ends with its stdin)."""
    if forked is not None:
        with contextlib.suppress(OSError):
            forked.stdin.close()
        forked.wait()


def _tensorflow_idle() -> bool:
    """Is TensorFlow imported and its runtime not started (no op has run)?"""
    if "tensorflow" not in sys.modules:
        return False
    try:
        from tensorflow.python.eager import context
    except ImportError:
        return False
    return getattr(context.context(), "_context_handle", True) is None


def _start(forked: _Forked | None) -> _Forked | subprocess.Popen:
    """The pre-forked evaluator process, or a fresh one."""
    if forked is not None:
        return forked
    env_vars = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "rlgen.runtime.evaluation.process"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the process writes to the run's eval.log (its first message)
        env=env_vars,
        text=True,
        bufsize=1,
    )


class Evaluator:
    """Rank 0's side: one evaluator process, at most one evaluation in flight."""

    def __init__(
        self,
        run_dir: Path,
        env: dict[str, Any],
        episodes: int,
        seed: int,
        lead: int,
        export: Callable[[Path], None],
        forked: _Forked | None = None,
    ) -> None:
        """``export(dir)`` exports the policy, for a process that does not build its own copy:
        done here once, as the template that process restores each snapshot into. Either way the
        process prepares its evaluation (in-graph: traces and compiles it) while the first
        iterations run, not while one waits for it. ``forked``: the process :func:`prefork` made,
        else one is started afresh."""
        self.dir = run_dir / ".eval"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lead = lead
        self.pending: dict[str, Any] | None = None  # {"steps", "due", "weights"}
        nice = niceness()
        self.proc = _start(forked)
        self.started = "forked" if isinstance(self.proc, _Forked) else "spawned"  # run.json: eval_process
        log = str(run_dir / "ranks" / "eval.log")
        self._send({"env": env, "episodes": episodes, "seed": seed, "log": log, "nice": nice})
        if getattr(self.proc, "builds", False):
            self._send({"build": True})
        else:
            export(self.dir / "template")
            self._send({"template": str(self.dir / "template")})

    def request(self, policy: Any, steps: int, due: int) -> None:
        """Evaluate the policy's weights as they are now (``steps`` env steps); due at iteration ``due``."""
        import tensorflow as tf

        weights = tf.train.Checkpoint(policy=policy).write(str(self.dir / f"weights-{steps}"))
        self.pending = {"steps": steps, "due": due, "weights": weights}
        self._send({"evaluate": weights, "steps": steps})
        self._forget_old_weights()

    def collect(self) -> tuple[int, float, float, dict[str, float]] | None:
        """Wait for the evaluation in flight: (env steps, mean, std, each agent group's mean), or
        None if the process failed."""
        assert self.pending is not None
        steps, self.pending = self.pending["steps"], None
        while True:
            reply = self._receive()
            if reply is None or "error" in reply:
                return None
            if reply.get("steps") == steps:
                return steps, float(reply["mean"]), float(reply["std"]), reply.get("groups", {})

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


def niceness() -> int:
    """How much nicer than rank 0 the process runs: ``RLGEN_EVAL_NICE``, else ``EVAL_NICE``."""
    raw = os.environ.get("RLGEN_EVAL_NICE", "").strip()
    try:
        value = int(raw) if raw else EVAL_NICE
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise ValueError(f"RLGEN_EVAL_NICE={raw!r}: give a whole number from 0 (training's priority) to 19")
    return value


def main(build: Callable[[], Any] | None = None) -> None:
    """The evaluator process: JSON lines in on stdin, one reply line per evaluation or export out
    (``build``: how a forked process makes its copy of the policy)."""
    own_temporary_directory()  # a forked evaluator's own, not rank 0's
    # Ctrl-C and a scheduler's SIGTERM reach the whole job: the run stops this process itself,
    # by closing its stdin once its last evaluation and export are done
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    first = sys.stdin.readline()
    if not first:  # ended before it was needed
        fast_exit(0)
    config = json.loads(first)
    with contextlib.suppress(OSError):
        os.nice(int(config.get("nice", 0)))
    _own_output(config.get("log"))
    devices.cpu_only()  # the evaluator and its exports run on the CPU, whatever rank 0 is placed on
    from rlgen.runtime.evaluation.episodes import PolicyEvaluation
    from rlgen.runtime.tfutil import configure_threads

    configure_threads()

    restore = evaluation = save = None
    for line in sys.stdin:
        message = json.loads(line)
        try:
            if "build" in message or "template" in message:
                env = config["env"]
                restore, act, save = _policy_copy(message, build, env)
                evaluation = PolicyEvaluation(act, config["env"], config["episodes"], config["seed"])
                evaluation.prepare()
            elif "evaluate" in message:
                restore.read(message["evaluate"]).assert_existing_objects_matched()
                returns = evaluation()
                reply = {"steps": message["steps"], "mean": float(returns.mean()), "std": float(returns.std())}
                if evaluation.groups:  # several agent groups: each one's mean agent return
                    reply["groups"] = {g: float(r.mean()) for g, r in evaluation.groups.items()}
                replies.write(json.dumps(reply) + "\n")
            elif "export" in message:
                save(Path(message["export"]))
        except Exception as exc:  # noqa: BLE001 - reported to the run, which evaluates in the loop from then on
            replies.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
            print(f"evaluator: {type(exc).__name__}: {exc}", file=sys.stderr)
    replies.flush()
    sys.stderr.flush()
    fast_exit(0)  # everything is written: skip TensorFlow's teardown (0.6 s the run would wait for)


def _own_output(log: str | None) -> None:
    """The run's ``eval.log`` takes what this process says (its errors, Python's warnings);
    TensorFlow's native lines and anything else printed go with the run's other native lines
    (``$RLGEN_TF_LOG``, else nowhere; into ``eval.log`` too under ``RLGEN_DEBUG=1``). Nothing
    printed can reach the replies, which have their own descriptor."""
    from rlgen.runtime.tfimport import TF_LOG_ENV, verbose

    if log is not None:
        mine = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stderr = os.fdopen(mine, "w", buffering=1)
    native = None if verbose() or log is None else os.environ.get(TF_LOG_ENV) or os.devnull
    fd = os.open(native, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if native else os.dup(sys.stderr.fileno())
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    os.close(fd)


def _policy_copy(
    message: dict[str, Any], build: Callable[[], Any] | None, env: dict[str, Any]
) -> tuple[Any, Callable[[Any], Any], Callable[[Path], None]]:
    """The process's copy of the policy: a checkpoint to restore snapshots through, the
    deterministic act function, and how to export it. Built here (forked: the act function is
    the run's in-loop one), or loaded from the template rank 0 exported (started afresh)."""
    import tensorflow as tf

    from rlgen.runtime.evaluation.episodes import RecurrentAct, act_function
    from rlgen.runtime.export import export_policy, save

    if "build" in message:
        policy = build()
        export = lambda target: export_policy(policy, env, target)  # noqa: E731
        return tf.train.Checkpoint(policy=policy), act_function(policy), export
    loaded = tf.saved_model.load(message["template"])
    return tf.train.Checkpoint(policy=loaded.policy), RecurrentAct.of(loaded), lambda target: save(loaded, target)


if __name__ == "__main__":
    main()
