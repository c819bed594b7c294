"""A training run as one rank sees it: its directory, clock, episodes, metrics, checkpoints, stop.

Generated rank entries (``main.py`` of a build) create one :class:`Session` per
rank and call it at a few fixed points; the algorithm's own dataflow stays in the
generated code::

    session.attach(agent, policy=agent.actor)     # rank owning the learner: checkpoints, eval
    for iteration in session.iterations():        # from the resume point until stop
        ...fragment steps..., clock.lap("inference")
        session.end_iteration(metrics=..., episodes=env.drain_episodes())
    session.finish()

At the end of every iteration the other ranks report the episodes they finished to
rank 0, which decides whether to stop (:mod:`rlgen.runtime.control`: every iteration
in lockstep, or one way for ranks that run at their own pace). Rank 0 owns logs,
TensorBoard, checkpoints (``tf.train.CheckpointManager``, each with its run state) and
the exported policy.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .control import LocalControl
from .export import export_policy
from .metricslog import MetricsLog, drop_rows_after, finite, iterations_per_row
from .progress import Progress

# loop: a whole iteration compiled into one call (single policy, in-graph env); other: logs, checkpoints, eval
CATEGORIES = ("inference", "env", "buffer", "update", "comm", "loop", "other")


@dataclass(frozen=True)
class RunConfig:
    """What a run needs to know from the spec (rendered as a literal into ``main.py``)."""

    name: str
    total_steps: int
    steps_per_iteration: int
    seed: int = 0
    env: Mapping[str, Any] = field(default_factory=dict)
    stop_mean_return: float | None = None
    window: int = 100
    eval_every: int = 0
    eval_episodes: int = 10
    eval_deterministic: bool = True
    checkpoint_every: int = 0
    checkpoint_keep: int = 3
    log_every: int = 1
    tensorboard: bool = True
    metric_names: tuple[str, ...] = ()
    episode_capacity: int = 1024  # most episodes one rank can finish in one iteration
    run_root: str = "runs"  # where runs go without --run-dir (train.run_dir)
    threaded_roles: tuple[str, ...] = ()  # roles whose ranks take their host's spare cores

    @property
    def iterations(self) -> int:
        return max(1, self.total_steps // self.steps_per_iteration)


class Clock:
    """Charges wall time to categories: ``lap(c)`` adds the time since the previous lap to ``c``."""

    def __init__(self) -> None:
        self.totals = dict.fromkeys(CATEGORIES, 0.0)
        self._last = time.perf_counter()

    def lap(self, category: str) -> None:
        now = time.perf_counter()
        self.totals[category] += now - self._last
        self._last = now

    def collect(self) -> dict[str, float]:
        """The totals so far, and start new ones (the running lap goes on)."""
        out, self.totals = self.totals, dict.fromkeys(CATEGORIES, 0.0)
        return out

    def reset(self) -> dict[str, float]:
        """Like :meth:`collect`, and the next lap starts now."""
        self._last = time.perf_counter()
        return self.collect()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


#: Iterations of a launch a trial (``--policy auto``) leaves out before it measures: the first
#: traces and compiles, and in the second the other ranks may still be tracing theirs.
TRIAL_WARMUP = 2


class Session:
    """One rank's view of a run (see the module docstring)."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: str | os.PathLike[str],
        rank: int = 0,
        size: int = 1,
        resume: bool = False,
        max_iterations: int | None = None,
        progress: Any = None,
        lifeline: Any = None,
        control: Any = None,
        profile: tuple[int, Callable[[list[dict[str, Any]], bool], bool | None]] | None = None,
        calibrate: bool = False,
        threads: Mapping[str, int] | None = None,
        trial: tuple[float, int, float] | None = None,
    ) -> None:
        if calibrate:  # a measurement: no evaluation, checkpoints, export or TensorBoard
            config = replace(config, eval_every=0, checkpoint_every=0, tensorboard=False)
        self.config, self.rank, self.size = config, rank, size
        self.calibrate = calibrate
        # (K, hook): from K iterations on, rank 0 hands the records so far to hook(records,
        # last) after each iteration until it answers: True ends the run here with a checkpoint,
        # for another policy to resume (``--policy auto``), False goes on, None asks for more
        self._profile = profile if rank == 0 else None
        self._profiled: list[dict[str, Any]] = []
        # (floor, K, seconds): ``--policy auto`` tries this policy; rank 0 measures its speed over
        # at least K iterations and the given seconds after this launch's first two (tracing,
        # warm-up) and, below ``floor`` steps/s, stops every rank with a checkpoint ("switch")
        # for the run to go on under single
        self._trial = trial if rank == 0 else None
        self._trial_seen = 0  # iterations of this launch, while a trial measures
        self._trial_mark = (0, 0.0)  # env steps and elapsed time where its measurement starts
        self.trial_speed: float | None = None
        self.run_dir = Path(run_dir)
        self.resume = resume
        self.clock = Clock()
        self.iteration = 0
        self.start_iteration = 0
        self.max_iterations = max_iterations
        self.returns: deque[float] = deque(maxlen=config.window)
        self.lengths: deque[int] = deque(maxlen=config.window)
        self.episodes = 0
        self.dropped = 0  # experience dropped as too stale, over the run (asynchronous actors)
        self.stop_reason = ""
        self._interrupted = False
        self._module = None
        self._policy = None
        self._manager = None
        self._iteration_var = None
        self._writer = None
        self._summary_writers: dict[tuple[str, ...], Any] = {}  # compiled writers, per set of keys
        self._metrics: MetricsLog | None = None  # rank 0's metrics.jsonl
        self._rows_since_tensorboard = 0
        self._elapsed_before = 0.0
        self._started = self._iter_started = time.perf_counter()
        self._last_checkpoint_steps = 0
        self._last_eval_steps = 0
        self._evaluator = None  # rank 0's evaluator process (rlgen.runtime.evalworker), if any
        self.eval_seconds = 0.0  # what evaluation cost rank 0's loop (run.json eval_s)
        self._eval = None  # the in-loop evaluation (rlgen.runtime.evaluate.PolicyEvaluation), once built
        self._final_iteration = math.inf
        self.last_eval: tuple[float, float] | None = None
        self.best_eval: tuple[float, int] | None = None  # (mean return, env steps) of the best evaluation
        # rank 0 shows progress (a Progress here, or one drawn by the launcher); the others none
        self.progress = (
            progress
            if progress is not None and rank == 0
            else Progress(config.total_steps, enabled=False, final_line=False)
        )
        self.lifeline = lifeline
        self.control = control if control is not None else LocalControl()
        (self.run_dir / "ranks").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "ranks" / f"{rank}.pid").write_text(f"{os.getpid()}\n")
        if rank == 0:  # with the TensorFlow thread pools this rank runs with
            self._write_status("running", {"threads": dict(threads)} if threads else None)
        self._previous_sigint = signal.signal(signal.SIGINT, self._on_sigint)

    # --- set-up -----------------------------------------------------------------
    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self._interrupted:  # a second Ctrl-C: stop now
            signal.signal(signal.SIGINT, self._previous_sigint)
            raise KeyboardInterrupt
        self.request_stop("interrupted")

    def request_stop(self, reason: str = "interrupted") -> None:
        """Stop cleanly at the end of this iteration (Ctrl-C, or the launcher asked or is gone):
        every rank agrees on the iteration, rank 0 writes a final checkpoint. Thread-safe."""
        if self._interrupted:
            return
        self._interrupted = True
        if self.rank == 0 and reason == "interrupted":
            self.progress.note("interrupted: finishing this iteration and writing a checkpoint (Ctrl-C again to abort)")

    @property
    def elapsed(self) -> float:
        """Seconds of training in this run, earlier sessions of a resumed run included."""
        return self._elapsed_before + time.perf_counter() - self._started

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def env_steps(self) -> int:
        return self.iteration * self.config.steps_per_iteration

    def passes(self, every_steps: int) -> bool:
        """This iteration's env steps pass a multiple of ``every_steps`` (a block's ``every_steps``):
        counted from the steps the run has taken, so a resumed run fires where it would have."""
        before = self.env_steps
        return (before + self.config.steps_per_iteration) // every_steps > before // every_steps

    @property
    def progress_fraction(self) -> float:
        """Training progress in [0, 1] (schedules follow it)."""
        return min(1.0, self.iteration / self.config.iterations)

    def attach(self, module: Any, policy: Any = None, sync: Sequence[Any] = ()) -> None:
        """Register the module that holds the learner (checkpointed on rank 0) and the policy
        to evaluate and export. On resume, rank 0 restores it; ``sync`` variables (learner
        state that must be equal on every rank holding it) are then broadcast from rank 0."""
        import tensorflow as tf

        self._module, self._policy = module, policy
        if self.rank == 0:
            self._iteration_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="iteration")
            ckpt = tf.train.Checkpoint(module=module, iteration=self._iteration_var)
            self._manager = tf.train.CheckpointManager(
                ckpt, str(self.run_dir / "checkpoints"), max_to_keep=self.config.checkpoint_keep
            )
            if self.resume:
                self._restore(ckpt)
        if self.distributed and sync:
            from . import comm

            comm.broadcast_variables(list(sync), root_rank=0)

    def _restore(self, ckpt: Any) -> None:
        """Restore the newest intact checkpoint with its run state; older ones stand in for a
        deleted or corrupt newest one (that is what ``checkpoint.keep`` keeps them for)."""
        import tensorflow as tf

        directory = self.run_dir / "checkpoints"
        tried = []
        for path in reversed(self._manager.checkpoints):
            state = _read_state(Path(path))
            if state is None:
                tried.append(f"{Path(path).name} (no run state)")
                continue
            try:
                ckpt.restore(path).assert_existing_objects_matched()
            except (tf.errors.OpError, ValueError, AssertionError) as exc:
                tried.append(f"{Path(path).name} ({type(exc).__name__})")
                continue
            self._resume_from(path, state, tried)
            return
        detail = f": {', '.join(tried)} unusable" if tried else ""
        raise RuntimeError(f"--resume: no intact checkpoint in {directory}{detail}")

    def _resume_from(self, path: str, state: dict[str, Any], skipped: list[str]) -> None:
        self.start_iteration = int(state["iteration"])
        self._iteration_var.assign(self.start_iteration)
        self.returns.extend(state.get("returns", []))
        self.lengths.extend(state.get("lengths", []))
        self.episodes = int(state.get("episodes", 0))
        self._elapsed_before = float(state.get("elapsed", 0.0))
        self.eval_seconds = float(state.get("eval_s", 0.0))
        if state.get("best_eval"):
            self.best_eval = (float(state["best_eval"][0]), int(state["best_eval"][1]))
        self._last_checkpoint_steps = self.start_iteration * self.config.steps_per_iteration
        # evaluations go on on their schedule (a run split in two evaluates where one run would)
        self._last_eval_steps = int(state.get("last_eval_steps", self._last_checkpoint_steps))
        drop_rows_after(self.run_dir / "metrics.jsonl", self.start_iteration, _write_atomic)
        # a rank killed between registering a checkpoint and copying its state leaves the copy behind
        _write_atomic(self.run_dir / "state.json", json.dumps(state))
        if skipped:
            self.progress.note(f"skipped unusable checkpoint(s): {', '.join(skipped)}")
        self.progress.note(f"resumed from {path} at {self._last_checkpoint_steps} env steps")

    def begin(self) -> None:
        """Agree on the first iteration (rank 0's, after a resume) and open the logs."""
        self.start_iteration = self.control.begin(self.start_iteration)
        self.iteration = self.start_iteration
        if self.rank == 0:
            every = 1 if self.calibrate else iterations_per_row(self.config.steps_per_iteration)
            self._metrics = MetricsLog(self.run_dir / "metrics.jsonl", every, self.config.steps_per_iteration)
            if self.config.tensorboard:
                import tensorflow as tf

                self._writer = tf.summary.create_file_writer(str(self.run_dir / "tensorboard"))
        self._started = self._iter_started = time.perf_counter()
        self.clock.reset()

    # --- the loop ---------------------------------------------------------------
    def iterations(self, until_stopped: bool = False) -> Iterator[int]:
        """Iteration numbers from the resume point until the budget or a stop condition
        (``until_stopped``: until rank 0 stops the run, as asynchronous actors do)."""
        self.begin()
        last = self.config.iterations
        if self.max_iterations is not None:
            last = min(last, self.start_iteration + self.max_iterations)
        if until_stopped:
            last = math.inf
        self._final_iteration = last
        with self._evaluating():
            self._start_evaluator()
        while self.iteration < last and not self.stop_reason:
            yield self.iteration
        if not self.stop_reason:
            self.stop_reason = "budget" if self.iteration >= self.config.iterations else "iterations"

    def end_iteration(
        self,
        metrics: Any = None,
        episodes: Sequence[tuple[float, int]] = (),
        policy_lag: int | None = None,
        dropped: int | None = None,
    ) -> None:
        """Close an iteration: report episodes, agree on stopping (rank 0 decides), log,
        checkpoint, evaluate. ``policy_lag``: how many updates old the weights were that the
        learned-from experience was collected with (overlapped policies); ``dropped``: how
        much experience was dropped as too stale (asynchronous actors)."""
        self.clock.lap("comm" if self.distributed else "buffer")  # time since the last lap
        mine = [] if self.rank == 0 else list(self.clock.collect().values())  # rank 0 logs its own
        report = self.control.report(self.iteration, list(episodes), self._interrupted, mine)
        for ret, length in report.episodes:
            self.returns.append(ret)
            self.lengths.append(length)
        self.episodes += len(report.episodes)
        self.iteration += 1
        reason = ""
        if self.rank == 0:
            reason = "interrupted" if report.interrupted else "mean return reached" if self._return_target_met() else ""
            reason = reason or self._trial_verdict()
        self.stop_reason = self.control.verdict(reason)
        if self.distributed:
            self.clock.lap("comm")
        if self.rank == 0:
            self._rank0_end(metrics, policy_lag, dropped, report.rest_parts())
        self.clock.lap("other")

    def _trial_verdict(self) -> str:
        """``switch`` when a tried policy measured slower than its floor (see ``trial``)."""
        if self._trial is None:
            return ""
        floor, iterations, seconds = self._trial
        self._trial_seen += 1
        if self._trial_seen == TRIAL_WARMUP:  # measured from the end of this launch's second iteration
            self._trial_mark = (self.env_steps, self.elapsed)
        steps, since = self._trial_mark
        span = self.elapsed - since
        if self._trial_seen < TRIAL_WARMUP + max(iterations, 1) or span < seconds:
            return ""
        self._trial = None
        self.trial_speed = (self.env_steps - steps) / span
        return "switch" if self.trial_speed < floor else ""

    def _rank0_end(
        self, metrics: Any, policy_lag: int | None = None, dropped: int | None = None, rest: Any = None
    ) -> None:
        now = time.perf_counter()
        elapsed = self.elapsed
        times = self.clock.collect()
        iter_time = now - self._iter_started
        self._iter_started = now
        record: dict[str, Any] = {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "time": round(elapsed, 4),
            "steps_per_s": round(self.config.steps_per_iteration / iter_time, 1) if iter_time > 0 else None,
            "episodes": self.episodes,
            "mean_return": float(np.mean(self.returns)) if self.returns else None,
            "mean_length": float(np.mean(self.lengths)) if self.lengths else None,
        }
        learned = self._metric_values(metrics)
        record.update(learned)
        if policy_lag is not None:
            record["policy_lag"] = int(policy_lag)
        if dropped is not None:
            self.dropped += int(dropped)
            record["dropped"] = self.dropped
        record.update({f"time_{k}": round(v, 5) for k, v in times.items()})
        if rest is not None:  # the other ranks' time per part (mean per rank), as reported this iteration
            record.update({f"rest_time_{k}": round(float(v), 5) for k, v in zip(CATEGORIES, rest, strict=True)})
        checkpoint_due = self._checkpoint_due()
        with self._evaluating():
            evaluated = self._evaluations()
        record.update(evaluated)
        # a row ends where a reader must see its iteration: an evaluation, a checkpoint, the end
        end_row = bool(evaluated) or checkpoint_due or bool(self.stop_reason) or self.iteration >= self._final_iteration
        row = self._metrics.add(record, iter_time, learned, end_row)
        if row is not None:  # TensorBoard gets every log_every-th row (a row: an iteration, or a few short ones)
            self._rows_since_tensorboard += 1
            if self._writer is not None and (self._rows_since_tensorboard >= self.config.log_every or self.stop_reason):
                self._rows_since_tensorboard = 0
                self._tensorboard(row)
        if self._profile is not None and not self.stop_reason:
            self._profiled.append(record)
            if len(self._profiled) >= self._profile[0]:
                verdict = self._profile[1](self._profiled, self.iteration >= self._final_iteration)
                if verdict is not None:  # None: profile on
                    if verdict and not self._interrupted:
                        self.stop_reason = "switch"
                    self._profile = None
        if checkpoint_due:
            self.checkpoint()
        self.progress.update(record, final=False)

    def _checkpoint_due(self) -> bool:
        every = self.config.checkpoint_every
        return bool(every) and self.env_steps - self._last_checkpoint_steps >= every

    def _return_target_met(self) -> bool:
        target = self.config.stop_mean_return
        return target is not None and bool(self.returns) and float(np.mean(self.returns)) >= target

    def _metric_values(self, metrics: Any) -> dict[str, float]:
        if metrics is None:
            return {}
        if isinstance(metrics, Mapping):
            return {k: float(v) for k, v in metrics.items()}
        values = np.asarray(metrics, np.float64).ravel().tolist()
        names = self.config.metric_names or tuple(f"metric_{i}" for i in range(len(values)))
        return dict(zip(names, values, strict=False))

    def _tensorboard(self, record: Mapping[str, Any]) -> None:
        """One compiled call writes every scalar (one eager ``tf.summary.scalar`` per key cost
        about 30 ms per write, a tenth of a small PPO iteration's time when done every 10)."""
        import tensorflow as tf

        keys = tuple(
            k
            for k, v in record.items()
            if k not in ("iteration", "iterations", "env_steps") and isinstance(v, int | float) and math.isfinite(v)
        )
        if keys not in self._summary_writers:

            def write(step: tf.Tensor, values: tf.Tensor) -> None:
                with self._writer.as_default(step=step):
                    for i, key in enumerate(keys):
                        tf.summary.scalar(key, values[i])

            self._summary_writers[keys] = tf.function(write, autograph=False)
        values = tf.constant([float(record[k]) for k in keys], tf.float32)
        self._summary_writers[keys](tf.constant(record["env_steps"], tf.int64), values)

    def _start_evaluator(self) -> None:
        """Rank 0's evaluator process (:mod:`rlgen.runtime.evalworker`) when this run will
        evaluate deterministically; it imports TensorFlow while training starts."""
        cfg = self.config
        planned = self._final_iteration * cfg.steps_per_iteration  # env steps at the end (inf: until stopped)
        will = cfg.eval_every and planned - self._last_eval_steps >= cfg.eval_every
        if (
            self.rank != 0
            or self.calibrate
            or self._policy is None
            or not cfg.eval_deterministic
            or not will
            or os.environ.get("RLGEN_EVAL_PROCESS") == "0"
        ):
            from .evalworker import discard_spare

            discard_spare()
            return
        from .evalworker import Evaluator

        lead = max(1, cfg.eval_every // (2 * cfg.steps_per_iteration))  # halfway to the next evaluation
        self._evaluator = Evaluator(self.run_dir, dict(cfg.env), cfg.eval_episodes, cfg.seed, lead, self._export_to)

    @contextlib.contextmanager
    def _evaluating(self) -> Iterator[None]:
        """Count the time inside as evaluation's (``eval_s`` in run.json: what evaluating cost
        this rank's loop, in the loop or waiting on and feeding the evaluator process)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.eval_seconds += time.perf_counter() - started

    def _export_to(self, target: Path) -> None:
        self._export_policy(target=target)

    def _evaluations(self) -> dict[str, float]:
        """This iteration's evaluation fields: a result that is due lands, and an evaluation that is
        due is asked for (in the evaluator process, else here and now). An evaluation in flight
        lands ``lead`` iterations after it was asked for, or earlier in an iteration that writes a
        checkpoint (so that a resumed run has nothing in flight) or ends this process's run."""
        out: dict[str, float] = {}
        last = bool(self.stop_reason) or self.iteration >= self._final_iteration or self._checkpoint_due()
        evaluator = self._evaluator
        if evaluator is not None and evaluator.pending and (self.iteration >= evaluator.pending["due"] or last):
            out.update(self._landed(evaluator.collect()))
        if self.config.eval_every and self.env_steps - self._last_eval_steps >= self.config.eval_every:
            self._last_eval_steps = self.env_steps
            if self._evaluator is not None:
                self._evaluator.request(self._policy, self.env_steps, self.iteration + self._evaluator.lead)
                if last:
                    out.update(self._landed(self._evaluator.collect()))
            else:
                out.update(self._evaluate())
        return out

    def _landed(self, result: tuple[int, float, float] | None) -> dict[str, float]:
        """Record a result of the evaluator process (None: it failed; evaluate here from now on)."""
        if result is None:
            self.progress.note(
                f"the evaluation process failed (see {self.run_dir / 'ranks' / 'eval.log'}); evaluating in the loop"
            )
            self._evaluator.kill()
            self._evaluator = None
            return {}
        steps, mean, std = result
        return self._record_eval(mean, std, steps, self._evaluator.export)

    def _evaluate(self) -> dict[str, float]:
        if self._policy is None:
            return {}
        returns = self._evaluation()()
        return self._record_eval(float(returns.mean()), float(returns.std()), self.env_steps, self._export_to)

    def _record_eval(self, mean: float, std: float, steps: int, export: Callable[[Path], None]) -> dict[str, float]:
        """An evaluation's result (of the policy at ``steps`` env steps), its row's fields; a new best
        is exported to ``policy-best/`` by ``export`` (here, or by the evaluator process)."""
        self.last_eval = (mean, std)
        if self.best_eval is None or mean > self.best_eval[0]:
            # off-policy learners in particular can get worse again: keep the best evaluated policy
            self.best_eval = (mean, steps)
            export(self.run_dir / "policy-best")
        return {"eval_mean_return": mean, "eval_std_return": std, "eval_env_steps": steps}

    def _evaluation(self):
        """The in-loop evaluation of the policy, built on first use (the act function traced once)."""
        if self._eval is None:
            from .evaluate import PolicyEvaluation, act_function

            cfg = self.config
            act = act_function(self._policy, cfg.eval_deterministic)
            self._eval = PolicyEvaluation(act, cfg.env, cfg.eval_episodes, cfg.seed)
        return self._eval

    # --- checkpoints and the end --------------------------------------------------
    def checkpoint(self) -> None:
        """Save the learner and the run state (rank 0); the previous checkpoint stays until this one is whole.

        The run state goes next to the checkpoint (``checkpoints/ckpt-<steps>.state.json``) before
        the checkpoint is registered, so the two always match; ``state.json`` is a copy for people.
        """
        if self.rank != 0 or self._manager is None:
            return
        self._iteration_var.assign(self.iteration)
        state = {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "returns": list(self.returns),
            "lengths": list(self.lengths),
            "elapsed": self.elapsed,
            "eval_s": self.eval_seconds,
            "checkpoint": f"ckpt-{self.env_steps}",
            "best_eval": list(self.best_eval) if self.best_eval else None,
            "last_eval_steps": self._last_eval_steps,
        }
        text = json.dumps(state)
        directory = self.run_dir / "checkpoints"
        directory.mkdir(parents=True, exist_ok=True)
        _write_atomic(directory / f"ckpt-{self.env_steps}.state.json", text)
        self._manager.save(checkpoint_number=self.env_steps)
        _write_atomic(self.run_dir / "state.json", text)
        kept = {Path(p).name for p in self._manager.checkpoints}
        for old in directory.glob("ckpt-*.state.json"):
            if old.name.removesuffix(".state.json") not in kept:
                old.unlink(missing_ok=True)
        self._last_checkpoint_steps = self.env_steps

    def finish(self) -> None:
        """Final checkpoint, exported policy and status (rank 0)."""
        signal.signal(signal.SIGINT, self._previous_sigint)
        done = {"stop_reason": self.stop_reason, "iteration": self.iteration}
        if self._module is not None and hasattr(self._module, "weights"):
            # every trainable variable, a learner's own networks included (e.g. SAC's critics, which
            # are not exchanged: replicas start them equal from the run's seed)
            done["weights_sha256"] = weights_digest(self._module.trainable_variables)
        if getattr(self._module, "normalizer", None) is not None:  # must be equal on every rank
            done["normalizer_sha256"] = weights_digest(self._module.normalizer.statistics())
        (self.run_dir / "ranks" / f"{self.rank}.done").write_text(json.dumps(done) + "\n")
        if self.rank != 0:
            if self.lifeline is not None:
                self.lifeline.send("done", **done)
            return
        final_eval = None
        if not self.calibrate:
            evaluator = self._evaluator
            if evaluator is not None and evaluator.pending:  # stopped after its row (a policy switch)
                self._landed(evaluator.collect())
            exported = False
            if self._final_eval_due():  # so that policy-best/ is truly the best evaluated
                if self._evaluator is not None:  # the final policy is exported while it is evaluated
                    with self._evaluating():
                        self._evaluator.request(self._policy, self.env_steps, self.iteration)
                    self._export_policy()
                    exported = True
                    with self._evaluating():
                        final_eval = self._landed(self._evaluator.collect())
                else:
                    with self._evaluating():
                        final_eval = self._evaluate()
            self.checkpoint()
            if self._policy is not None and self.stop_reason != "switch" and not exported:
                self._export_policy()
            if self._evaluator is not None:  # its last export (policy-best/) done; nothing left to resume
                self._evaluator.close()
                self._evaluator.discard()
        summary = self.summary()
        if self._evaluator is not None:
            summary["eval_process"] = self._evaluator.started
        if self.trial_speed is not None:
            summary["trial_steps_per_s"] = round(self.trial_speed, 1)
        if final_eval:
            summary["final_eval"] = {
                "mean_return": final_eval["eval_mean_return"],
                "std": final_eval["eval_std_return"],
            }
        status = {"interrupted": "interrupted", "switch": "switching"}.get(self.stop_reason, "finished")
        status = "calibrated" if self.calibrate else status
        self._write_status(status, summary)
        if self._metrics is not None:
            self._metrics.close()
        if self._writer is not None:
            self._writer.close()
        if status != "switching":  # the policy it switches to goes on with the progress display
            self.progress.finish(summary)
        if self.lifeline is not None:
            self.lifeline.send("done", **done, status=status)

    def _final_eval_due(self) -> bool:
        """Periodic evaluation is on and the policy trained on since the last one (a run that
        was interrupted or switches policy goes on elsewhere, or stops at the user's word)."""
        return (
            bool(self.config.eval_every)
            and self._policy is not None
            and self.stop_reason not in ("interrupted", "switch")
            and self.env_steps > self._last_eval_steps
        )

    def summary(self) -> dict[str, Any]:
        elapsed = self.elapsed
        return {
            "stop_reason": self.stop_reason,
            "iterations": self.iteration,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "mean_return": float(np.mean(self.returns)) if self.returns else None,
            "best_eval": {"mean_return": self.best_eval[0], "env_steps": self.best_eval[1]} if self.best_eval else None,
            "elapsed": round(elapsed, 3),
            **({"eval_s": round(self.eval_seconds, 3)} if self.config.eval_every else {}),
            "run_dir": str(self.run_dir),
        }

    def fail(self, error: BaseException) -> None:
        """Record a failure of this rank: a one-line reason, then the traceback, in ``ranks/<rank>.error``.

        The last good checkpoint and the metrics written so far stay as they are.
        """
        import traceback

        first = next((ln.strip() for ln in str(error).splitlines() if ln.strip() and "execution error" not in ln), "")
        horovod_down = "Horovod has been shut down" in str(error)
        if horovod_down:
            first = "stopped because another rank failed (Horovod shut down)"
        reason = f"{type(error).__name__}: {first}" if first else type(error).__name__
        if isinstance(error, KeyboardInterrupt):
            reason = "aborted by a second Ctrl-C"
        details = "".join(traceback.format_exception(error))
        if self.lifeline is not None:
            # a lost peer or a Horovod shutdown is another rank's failure seen from here
            from .channels import PeerLost

            secondary = horovod_down or isinstance(error, PeerLost)
            self.lifeline.send("error", reason=reason, secondary=secondary)
        with contextlib.suppress(OSError):  # e.g. a read-only run directory: the reason went over the lifeline
            _write_atomic(self.run_dir / "ranks" / f"{self.rank}.error", reason + "\n\n" + details)
        if self.rank == 0:
            if self._evaluator is not None:
                self._evaluator.kill()
            if self._metrics is not None:
                self._metrics.close()
            with contextlib.suppress(OSError):
                self._write_status("failed", {"error": reason, "rank": self.rank})

    def _export_policy(self, name: str = "policy", target: Path | None = None) -> None:
        """Write the policy as a SavedModel with ``act(obs)`` to ``run_dir/name`` (or ``target``), atomically."""
        export_policy(self._policy, self.config.env.get("obs_shape", []), target or self.run_dir / name)

    def _write_status(self, status: str, extra: Mapping[str, Any] | None = None) -> None:
        path = self.run_dir / "run.json"
        doc = json.loads(path.read_text()) if path.exists() else {}
        doc.update({"name": self.config.name, "status": status, "workers": self.size, **(extra or {})})
        doc.setdefault("config", asdict(self.config))
        _write_atomic(path, json.dumps(finite(doc), indent=2, default=str) + "\n")


def _read_state(checkpoint: Path) -> dict[str, Any] | None:
    """The run state saved with a checkpoint, or None if it is missing or incomplete."""
    try:
        state = json.loads(checkpoint.with_name(checkpoint.name + ".state.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("iteration"), int):
        return None
    return state


def intra_op_threads(run: RunConfig, role: str, cores: int, local_ranks: int) -> int:
    """Intra-op threads for a rank of ``role``: one, unless codegen found the role's update
    heavy (:mod:`rlgen.codegen.lower.threads`); then the host's cores shared among the ranks
    it runs, at least one."""
    if role not in run.threaded_roles:
        return 1
    return max(1, cores // max(1, local_ranks))


def configure_tensorflow(intra_op: int = 1) -> dict[str, int]:
    """One inter-op thread and ``intra_op`` intra-op threads per rank unless
    TF_NUM_INTEROP_THREADS / TF_NUM_INTRAOP_THREADS say otherwise: for small networks a
    thread hand-off costs more than it saves (a fused 64x64 actor-critic call: 0.30 ms with
    the default pools, 0.10 ms with one thread each, on this 2-core machine); a heavy
    update is given more (:func:`intra_op_threads`). Call before any TF op runs. Returns
    the pools' sizes as set (``run.json`` records rank 0's)."""
    import tensorflow as tf

    wanted = {
        "inter_op": int(os.environ.get("TF_NUM_INTEROP_THREADS") or 1),
        "intra_op": int(os.environ.get("TF_NUM_INTRAOP_THREADS") or intra_op),
    }
    try:
        if "TF_NUM_INTEROP_THREADS" not in os.environ:
            tf.config.threading.set_inter_op_parallelism_threads(1)
        if "TF_NUM_INTRAOP_THREADS" not in os.environ:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    except RuntimeError:  # TensorFlow already initialised its pools: keep them
        wanted = {
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
        }
    return wanted


def weights_digest(variables: Sequence[Any]) -> str:
    """sha256 of variables' values in order: equal digests on two ranks mean equal weights."""
    import hashlib

    h = hashlib.sha256()
    for v in variables:
        h.update(np.ascontiguousarray(v.numpy()).tobytes())
    return h.hexdigest()


def default_run_dir(name: str, root: str | os.PathLike[str] = "runs") -> Path:
    """``runs/<name>-<YYYYmmdd-HHMMSS>`` (a suffix is added if it exists)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(root) / f"{name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = Path(root) / f"{name}-{stamp}-{n}"
    return path
