"""A training run as one rank sees it: the loop, its stop, its end.

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
in lockstep, or one way for ranks that run at their own pace). Rank 0 owns the run's
files, through parts of their own: the run directory and ``run.json``
(:mod:`~rlgen.runtime.rundir`), the rows (:mod:`~rlgen.runtime.metricslog`), the checkpoints
(:mod:`~rlgen.runtime.checkpoints`), the evaluations (:mod:`~rlgen.runtime.evaluation`) and
``--policy auto``'s profile or trial (:mod:`~rlgen.runtime.trial`); the time per part is the
:class:`~rlgen.runtime.clock.Clock`'s.

Ctrl-C (SIGINT) and SIGTERM (what Slurm, Kubernetes and ``docker stop`` send) both stop the
run cleanly at the end of the iteration, with a final checkpoint; a second one aborts.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .checkpoints import Checkpoints, digests
from .clock import Clock, part_fields
from .control import LocalControl
from .episodes import Episodes
from .evaluation.remote import PolicyExchange
from .evaluation.schedule import Evaluation
from .export import export_policy
from .failures import report_failure
from .metricslog import Rows, drop_rows_after, iterations_per_row, named_metrics
from .progress import Progress
from .rundir import RunDir, write_atomic
from .stopping import StopRequests
from .trial import Profile, Trial


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
    group_checkpoints: tuple[str, ...] | None = None  # agent-groups: the roles checkpointing their own

    @property
    def iterations(self) -> int:
        return max(1, self.total_steps // self.steps_per_iteration)

    def intra_op_threads(self, role: str, cores: int, local_ranks: int) -> int:
        """Intra-op threads for a rank of ``role``: one, unless codegen found the role's update
        heavy (:mod:`rlgen.codegen.lower.threads`); then the host's cores shared among the ranks
        it runs, at least one."""
        from rlgen.machine import cores_per_rank

        return cores_per_rank(cores, local_ranks) if role in self.threaded_roles else 1


def _record(session: Session, iter_time: float, learned: dict, policy_lag: Any, dropped: bool) -> dict[str, Any]:
    """Rank 0's row of the iteration just ended, but its time per part."""
    speed = round(session.config.steps_per_iteration / iter_time, 1) if iter_time > 0 else None
    record = {"iteration": session.iteration, "env_steps": session.env_steps, "time": round(session.elapsed, 4)}
    record["steps_per_s"] = speed
    record.update(session.episodes.record())
    record.update(learned)
    if policy_lag is not None:
        record["policy_lag"] = int(policy_lag)
    if dropped:
        record["dropped"] = session.dropped
    return record


def _sent(session: Session, metrics: Any) -> dict[str, float] | None:
    """What a rank other than 0 has rank 0 log: its agent groups' metrics (``<group>/<metric>``,
    agent-groups' group ranks); a learner replica's metrics are rank 0's own too."""
    if session.rank == 0:
        return None
    return {k: v for k, v in named_metrics(metrics, session.config.metric_names).items() if "/" in k} or None


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
        profile: Profile | None = None,
        calibrate: bool = False,
        threads: Mapping[str, int] | None = None,
        trial: tuple[float, int, float] | None = None,
        evaluator: Any = None,
    ) -> None:
        """``profile``/``trial``: ``--policy auto``'s (:mod:`rlgen.runtime.trial`, rank 0 only);
        ``evaluator``: rank 0's evaluator process, forked before TensorFlow ran anything."""
        if calibrate:  # a measurement: no evaluation, checkpoints, export or TensorBoard
            config = replace(config, eval_every=0, checkpoint_every=0, tensorboard=False)
        self.config, self.rank, self.size = config, rank, size
        self.calibrate, self.resume, self.max_iterations = calibrate, resume, max_iterations
        self.run_dir = RunDir(run_dir)
        self.clock = Clock()
        self.iteration = self.start_iteration = 0
        self.episodes = Episodes(config.window)
        self.dropped = 0  # experience dropped as too stale, over the run (asynchronous actors)
        self.stop_reason = ""
        self._module: Any = None
        self._policy: Any = None
        self._exchange = PolicyExchange(rank, None, None, False)  # agent-groups' policies to rank 0
        self._checkpoints: Checkpoints | None = None
        self._rows: Rows | None = None
        self._elapsed_before = 0.0
        self._started = self._iter_started = time.perf_counter()
        self._last_checkpoint_steps = 0
        self._final_iteration = math.inf
        self._forked = evaluator
        self.trial = Trial(profile if rank == 0 else None, trial if rank == 0 else None)
        # rank 0 shows progress (a Progress here, or one drawn by the launcher); the others none
        self.progress = (
            progress
            if progress is not None and rank == 0
            else Progress(config.total_steps, enabled=False, final_line=False)
        )
        self.evaluation = Evaluation(config, self.run_dir, self._export_to, self.progress.note)
        self.lifeline = lifeline
        self.control = control if control is not None else LocalControl()
        self.run_dir.ranks.mkdir(parents=True, exist_ok=True)
        self.run_dir.rank_file(rank, "pid").write_text(f"{os.getpid()}\n")
        if rank == 0:  # with the TensorFlow thread pools this rank runs with
            self._write_status("running", {"threads": dict(threads)} if threads else None)
        self.stops = StopRequests(self.progress.note if rank == 0 else None)

    def request_stop(self, reason: str = "interrupted") -> None:
        """Stop cleanly at the end of this iteration (Ctrl-C, SIGTERM, or the launcher asked or is
        gone): every rank agrees on the iteration, rank 0 writes a final checkpoint. Thread-safe."""
        self.stops.ask(reason)

    # --- where the run is ---------------------------------------------------------------
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
        return (self.env_steps + self.config.steps_per_iteration) // every_steps > self.env_steps // every_steps

    @property
    def progress_fraction(self) -> float:
        """Training progress in [0, 1] (schedules follow it)."""
        return min(1.0, self.iteration / self.config.iterations)

    # --- set-up -----------------------------------------------------------------------
    def attach(
        self,
        module: Any,
        policy: Any = None,
        sync: Sequence[Any] = (),
        checkpoints: str | None = None,
        policy_ranks: Mapping[str, int] | None = None,
    ) -> None:
        """Register the learner's module (checkpointed, restored on resume by rank 0) and the policy
        to evaluate and export; ``sync`` variables are then broadcast from rank 0. ``agent-groups``:
        ``checkpoints`` names this rank's group, whose learner it checkpoints (restored in :meth:`begin`)
        and whose policy it sends to rank 0; ``policy_ranks``: rank 0's copies (:mod:`.evaluation.remote`)."""
        self._module, self._policy = module, policy
        self.evaluation.policy = policy
        self._exchange = PolicyExchange(self.rank, policy, policy_ranks, bool(self.config.group_checkpoints))
        if self.rank == 0:
            self._open_checkpoints(module)
        elif checkpoints is not None:
            self._checkpoints = Checkpoints(self.run_dir, module, self.config.checkpoint_keep, group=checkpoints)
        if self.distributed and sync:
            from . import comm

            comm.broadcast_variables(list(sync), root_rank=0)

    def _open_checkpoints(self, module: Any) -> None:
        """Rank 0's checkpoints (of ``module``; only the run state where the groups hold the
        learners), restored on resume."""
        groups = self.config.group_checkpoints or ()
        self._checkpoints = Checkpoints(self.run_dir, module, self.config.checkpoint_keep, groups=groups)
        if self.resume:
            path, state = self._checkpoints.restore(self.progress.note)
            self._resume_from(path, state)

    def _resume_from(self, path: str, state: dict[str, Any]) -> None:
        self.start_iteration = int(state["iteration"])
        self.episodes.restore(state)
        self._elapsed_before = float(state.get("elapsed", 0.0))
        self._last_checkpoint_steps = self.start_iteration * self.config.steps_per_iteration
        self.evaluation.restore(state, self._last_checkpoint_steps)
        drop_rows_after(self.run_dir.metrics, self.start_iteration, write_atomic)
        # a rank killed between registering a checkpoint and copying its state leaves the copy behind
        write_atomic(self.run_dir.state, json.dumps(state))
        self.progress.note(f"resumed from {path} at {self._last_checkpoint_steps} env steps")

    def begin(self) -> None:
        """Agree on the first iteration (rank 0's, after a resume) and open the rows."""
        if self.rank == 0 and self._checkpoints is None and self.config.group_checkpoints:
            self._open_checkpoints(None)  # agent-groups: rank 0 steps the env, the groups learn
        self.start_iteration = self.control.begin(self.start_iteration)
        self.iteration = self.start_iteration
        if self.rank != 0 and self._checkpoints is not None:  # a group's own learner
            self._last_checkpoint_steps = self.env_steps
            if self.resume:
                self._checkpoints.restore_at(self.iteration, self.env_steps)
        if self.rank == 0:
            cfg = self.config
            every = 1 if self.calibrate else iterations_per_row(cfg.steps_per_iteration)
            board = self.run_dir.tensorboard if cfg.tensorboard else None
            self._rows = Rows(self.run_dir.metrics, board, every, cfg.steps_per_iteration, cfg.log_every)
        self._started = self._iter_started = time.perf_counter()
        self.clock.reset()

    # --- the loop ---------------------------------------------------------------------
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
        with self.evaluation.timed():
            self.evaluation.start(last * self.config.steps_per_iteration, self.rank, self.calibrate, self._forked)
        self._forked = None
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
        report = self.control.report(self.iteration, list(episodes), bool(self.stops), mine, _sent(self, metrics))
        self.episodes.add(report.episodes)
        self.iteration += 1
        reason = ""
        if self.rank == 0:
            if report.interrupted:
                reason = "terminated" if self.stops.reason == "terminated" else "interrupted"
            elif self.episodes.reached(self.config.stop_mean_return):
                reason = "mean return reached"
            reason = reason or self.trial.verdict(self.env_steps, self.elapsed)
        fetch = self._exchange.copies is not None and self.evaluation.asks(self.env_steps)  # the groups' weights
        self.stop_reason = self.control.verdict(reason, fetch)
        self._exchange(self.control, fetch or self.control.fetch)
        if self.distributed:
            self.clock.lap("comm")
        if self.rank == 0:
            self._rank0_end(metrics, policy_lag, dropped, report.rest_parts(), report.metrics)
        elif self._checkpoints is not None and self._checkpoint_due():
            self.checkpoint()  # a group's rank, at the steps rank 0 saves the run state
        self.clock.lap("other")

    def _rank0_end(self, metrics: Any, policy_lag: Any, dropped: Any, rest: Any, others: dict) -> None:
        now = time.perf_counter()
        iter_time, self._iter_started = now - self._iter_started, now
        learned = {**others, **named_metrics(metrics, self.config.metric_names)}
        if dropped is not None:
            self.dropped += int(dropped)
        record = _record(self, iter_time, learned, policy_lag, dropped is not None)
        record.update(part_fields(self.clock.collect(), rest))
        checkpoint_due = self._checkpoint_due()
        ends = bool(self.stop_reason) or self.iteration >= self._final_iteration
        with self.evaluation.timed():
            evaluated = self.evaluation.due(self.iteration, self.env_steps, ends or checkpoint_due)
        record.update(evaluated)
        # a row ends where a reader must see its iteration: an evaluation, a checkpoint, the end
        self._rows.add(record, iter_time, learned, bool(evaluated) or checkpoint_due or ends, bool(self.stop_reason))
        switch = not self.stop_reason and self.trial.profiled(record, self.iteration >= self._final_iteration)
        if switch and not self.stops:
            self.stop_reason = "switch"
        if checkpoint_due:
            self.checkpoint()
        self.progress.update(record, final=False)

    def _checkpoint_due(self) -> bool:
        every = self.config.checkpoint_every
        return bool(every) and self.env_steps - self._last_checkpoint_steps >= every

    # --- checkpoints and the end ----------------------------------------------------------
    def checkpoint(self) -> None:
        """Save the learner and the run state (rank 0; :mod:`rlgen.runtime.checkpoints`)."""
        if self._checkpoints is None:
            return
        state: dict[str, Any] = {"iteration": self.iteration, "env_steps": self.env_steps}
        if self.rank == 0:
            state.update(
                **self.episodes.state(),
                elapsed=self.elapsed,
                checkpoint=f"ckpt-{self.env_steps}",
                **self.evaluation.state(),
            )
        self._checkpoints.save(self.iteration, self.env_steps, state)
        self._last_checkpoint_steps = self.env_steps

    def finish(self) -> None:
        """Final checkpoint, exported policy and status (rank 0)."""
        self.stops.close()
        done = {"stop_reason": self.stop_reason, "iteration": self.iteration, **digests(self._module)}
        self.run_dir.rank_file(self.rank, "done").write_text(json.dumps(done) + "\n")
        if self.rank != 0:
            if self._checkpoints is not None and not self.calibrate:
                self.checkpoint()  # a group's rank: its learner, where rank 0 saves the run state
                self._exchange(self.control, True)  # and its final weights, for rank 0's closing evaluation and export
            if self.lifeline is not None:
                self.lifeline.send("done", **done)
            return
        final_eval = None
        if not self.calibrate:
            self._exchange(self.control, True)  # agent-groups: the groups' final weights
            closing = self.stop_reason not in ("interrupted", "terminated", "switch")
            final_eval, exported = self.evaluation.final(self.iteration, self.env_steps, closing)
            self.checkpoint()
            if self._policy is not None and self.stop_reason != "switch" and not exported:
                self._export_to(self.run_dir.policy())
            self.evaluation.close()
        self.trial.end(self.env_steps, self.elapsed)
        summary = run_summary(self, final_eval)
        status = {"interrupted": "interrupted", "terminated": "terminated", "switch": "switching"}
        status = "calibrated" if self.calibrate else status.get(self.stop_reason, "finished")
        doc = self._write_status(status, summary)
        if self._rows is not None:
            self._rows.close()
        if status != "switching":  # the policy it switches to goes on with the progress display
            self.progress.finish({**summary, "build_dir": doc.get("build_dir")})
        if self.lifeline is not None:
            self.lifeline.send("done", **done, status=status)

    def fail(self, error: BaseException) -> None:
        """Record a failure of this rank (:func:`rlgen.runtime.failures.report_failure`); rank 0
        also writes the iterations so far and marks ``run.json``. The last good checkpoint and the
        metrics written so far stay as they are."""
        import contextlib

        reason = report_failure(error, self.rank, self.run_dir, self.lifeline)
        if self.rank == 0:
            self.evaluation.kill()
            if self._rows is not None:
                with contextlib.suppress(OSError):  # the iterations so far, if the disk takes them
                    self._rows.close()
            with contextlib.suppress(OSError):
                self._write_status("failed", {"error": reason, "rank": self.rank})

    def _export_to(self, target: Path) -> None:
        """Write the policy as a SavedModel with ``act(obs)`` to ``target``, atomically."""
        export_policy(self._policy, self.config.env, target)

    def _write_status(self, status: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        fields = {"name": self.config.name, "status": status, "workers": self.size, **(extra or {})}
        return self.run_dir.update(fields, defaults={"config": asdict(self.config)})


def run_summary(session: Session, final_eval: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The run as ``run.json`` and the closing line say it (``final_eval``: the closing evaluation's fields)."""
    best, process, trial = session.evaluation.best, session.evaluation.process, session.trial
    out = {
        "stop_reason": session.stop_reason,
        "iterations": session.iteration,
        "env_steps": session.env_steps,
        "episodes": session.episodes.count,
        "mean_return": session.episodes.mean_return,
        "best_eval": {"mean_return": best[0], "env_steps": best[1]} if best else None,
        "elapsed": round(session.elapsed, 3),
        **({"eval_s": round(session.evaluation.seconds, 3)} if session.config.eval_every else {}),
        "run_dir": str(session.run_dir.path),
        **({"eval_process": process.started} if process is not None else {}),
    }
    if trial.speed is not None:
        out.update(trial_steps_per_s=round(trial.speed, 1), trial_measured_over=trial.measured_over)
    if final_eval:
        out["final_eval"] = {"mean_return": final_eval["eval_mean_return"], "std": final_eval["eval_std_return"]}
    return out
