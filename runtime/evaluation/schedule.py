"""When rank 0 evaluates the policy, and where: in its evaluator process (:mod:`.process`) or in
the loop (:mod:`.episodes`); which evaluation was the best (``policy-best/``); what evaluation
cost the loop (``eval_s``).

:func:`wanted` is the one place that decides whether rank 0 evaluates in a process of its own:
the rank entry asks it before TensorFlow runs anything (to fork the process then) and the
session when the run starts.

An evaluation is due every ``train.eval.every`` env steps. In the process, its result lands in
the metrics row ``lead`` iterations after it was asked for (halfway to the next one), or earlier
in an iteration that writes a checkpoint (so that a resumed run has nothing in flight) or ends
this process's run; in the loop it lands at once.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Export = Callable[[Path], None]
Note = Callable[[str], None]


def wanted(config: Any, rank: int, calibrate: bool) -> bool:
    """Rank ``rank`` of a run of ``config`` evaluates in a process of its own: rank 0 of a run
    that evaluates deterministically (the exported policy acts deterministically), not a
    measurement (``--calibrate``), unless ``RLGEN_EVAL_PROCESS=0`` asks for the loop."""
    return (
        rank == 0
        and not calibrate
        and bool(config.eval_every)
        and config.eval_deterministic
        and os.environ.get("RLGEN_EVAL_PROCESS") != "0"
    )


class Evaluation:
    """Rank 0's evaluations (see the module docstring). ``export(dir)`` exports the policy as it
    is now; ``note`` tells the user something (the progress display)."""

    def __init__(self, config: Any, run_dir: Any, export: Export, note: Note) -> None:
        self.config, self.run_dir = config, run_dir
        self._export, self._note = export, note
        self.policy: Any = None
        self.last_steps = 0  # env steps of the last evaluation asked for
        self.best: tuple[float, int] | None = None  # (mean return, env steps) of the best evaluation
        self.last: tuple[float, float, int] | None = None  # (mean, std, env steps) of the last result
        self.seconds = 0.0  # what evaluation cost rank 0's loop (run.json eval_s)
        self.process: Any = None  # the evaluator process (.process.Evaluator), if any
        self._in_loop: Any = None  # the in-loop evaluation (.episodes.PolicyEvaluation), once built

    # --- the run's state, in every checkpoint ----------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "eval_s": self.seconds,
            "best_eval": list(self.best) if self.best else None,
            "last_eval_steps": self.last_steps,
        }

    def restore(self, state: dict[str, Any], env_steps: int) -> None:
        """Go on from a checkpoint's state: evaluations follow their schedule (a run split in two
        evaluates where one run would)."""
        self.seconds = float(state.get("eval_s", 0.0))
        if state.get("best_eval"):
            self.best = (float(state["best_eval"][0]), int(state["best_eval"][1]))
        self.last_steps = int(state.get("last_eval_steps", env_steps))

    # --- the run -------------------------------------------------------------------------
    def start(self, final_env_steps: float, rank: int, calibrate: bool, forked: Any = None) -> None:
        """The evaluator process of ``rank``, when it evaluates at all in this launch
        (``final_env_steps``: the env steps it ends at; inf when it runs until stopped); it
        imports TensorFlow while training starts. ``forked``: a process forked earlier, used or
        ended here."""
        from .process import Evaluator, discard

        cfg = self.config
        will = cfg.eval_every and final_env_steps - self.last_steps >= cfg.eval_every
        if not will or self.policy is None or not wanted(cfg, rank, calibrate):
            discard(forked)
            return
        lead = max(1, cfg.eval_every // (2 * cfg.steps_per_iteration))  # halfway to the next evaluation
        self.process = Evaluator(
            self.run_dir.path, dict(cfg.env), cfg.eval_episodes, cfg.seed, lead, self._export, forked
        )

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Count the time inside as evaluation's (``eval_s``: what evaluating cost this rank's
        loop, in the loop or waiting on and feeding the evaluator process)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - started

    def asks(self, env_steps: int) -> bool:
        """An evaluation is due at ``env_steps`` (:meth:`due` asks for it)."""
        return bool(self.config.eval_every) and env_steps - self.last_steps >= self.config.eval_every

    def due(self, iteration: int, env_steps: int, last: bool) -> dict[str, float]:
        """This iteration's evaluation fields: a result that is due lands, and an evaluation that
        is due is asked for. ``last``: nothing may stay in flight past this iteration."""
        out: dict[str, float] = {}
        process = self.process
        if process is not None and process.pending and (iteration >= process.pending["due"] or last):
            out.update(self._landed(process.collect()))
        if self.asks(env_steps):
            self.last_steps = env_steps
            if self.process is not None:
                self.process.request(self.policy, env_steps, iteration + self.process.lead)
                if last:
                    out.update(self._landed(self.process.collect()))
            else:
                out.update(self._here(env_steps))
        return out

    def final(self, iteration: int, env_steps: int, closing: bool) -> tuple[dict[str, float] | None, bool]:
        """The run's end: a result still in flight lands; with ``closing``, the policy as it
        ends is evaluated (if it trained since the last evaluation; when the last periodic
        evaluation was of this very policy, that one is the closing one). Returns the closing
        evaluation's fields (or None) and whether the evaluator process exported the final
        policy meanwhile (``policy/``)."""
        if self.process is not None and self.process.pending:  # asked for after its row (a switch)
            self._landed(self.process.collect())
        if not closing or not self.config.eval_every or self.policy is None:
            return None, False
        if env_steps <= self.last_steps:
            mean, std, steps = self.last or (math.nan, math.nan, -1)
            same = {"eval_mean_return": mean, "eval_std_return": std} if steps == env_steps else None
            return same, False
        # the closing evaluation is not a periodic one: the schedule (in the checkpoint) stays,
        # so a run split with --iterations evaluates where one run would
        if self.process is None:
            with self.timed():
                return self._here(env_steps), False
        with self.timed():
            self.process.request(self.policy, env_steps, iteration)
        self._export(self.run_dir.policy())  # the final policy, exported while it is evaluated
        with self.timed():
            return self._landed(self.process.collect()), True

    def close(self) -> None:
        """Let the process finish what it was asked (its exports) and end; its snapshots go."""
        if self.process is not None:
            self.process.close()
            self.process.discard()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    # --- results -----------------------------------------------------------------------
    def _landed(self, result: tuple[int, float, float, dict[str, float]] | None) -> dict[str, float]:
        """Record a result of the evaluator process (None: it failed; evaluate here from now on)."""
        if result is None:
            self._note(f"the evaluation process failed (see {self.run_dir.eval_log}); evaluating in the loop")
            self.process.kill()
            self.process = None
            return {}
        steps, mean, std, groups = result
        return self._record(mean, std, steps, self.process.export, groups)

    def _here(self, env_steps: int) -> dict[str, float]:
        if self.policy is None:
            return {}
        if self._in_loop is None:  # built on first use (the act function traced once)
            from .episodes import PolicyEvaluation, act_function

            cfg = self.config
            act = act_function(self.policy, cfg.eval_deterministic)
            self._in_loop = PolicyEvaluation(act, cfg.env, cfg.eval_episodes, cfg.seed)
        returns = self._in_loop()
        groups = {g: float(r.mean()) for g, r in self._in_loop.groups.items()}
        return self._record(float(returns.mean()), float(returns.std()), env_steps, self._export, groups)

    def _record(
        self, mean: float, std: float, steps: int, export: Export, groups: dict[str, float] | None = None
    ) -> dict[str, float]:
        """An evaluation's result (of the policy at ``steps`` env steps), its row's fields; a new
        best is exported to ``policy-best/`` by ``export`` (here, or by the evaluator process).
        A multi-agent env's return is the mean over agents of each agent's return (training's
        ``mean_return``); with several agent groups, ``<group>/eval_return`` is each group's mean
        agent return (training's ``<group>/return``)."""
        self.last = (mean, std, steps)
        if self.best is None or mean > self.best[0]:
            # off-policy learners in particular can get worse again: keep the best evaluated policy
            self.best = (mean, steps)
            export(self.run_dir.policy(best=True))
        fields = {"eval_mean_return": mean, "eval_std_return": std, "eval_env_steps": steps}
        return {**fields, **{f"{g}/eval_return": value for g, value in (groups or {}).items()}}
