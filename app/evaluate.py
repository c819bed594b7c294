"""``rlgen eval RUN_DIR``: the returns of a run's exported policy over whole episodes, and videos
of them on request."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgen.runtime.rundir import RunDir

from .errors import Failed, UsageError


@dataclass(frozen=True)
class EvalRequest:
    run_dir: Path
    episodes: int = 10
    seed: int = 12345
    best: bool = False  # policy-best/, the best periodic evaluation's, not the last
    video: Path | None = None


@dataclass
class EvalOutcome:
    run_dir: Path
    policy: str  # "policy" or "policy-best"
    episodes: int
    mean_return: float
    std_return: float
    min: float
    max: float
    videos: list[str] = field(default_factory=list)
    #: with --best: the env steps of the best policy, and whether it is the run's last one
    best_at: int | None = None
    best_is_final: bool = False
    #: A multi-agent env: its agents per env copy (the returns above are the mean over agents of
    #: each agent's return, as training logs them; the team return is their sum), and with
    #: several groups each group's (mean, std) over episodes of its mean agent return.
    agents: int = 0
    groups: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def team_mean_return(self) -> float:
        """The mean team return (sum over agents of each agent's return) of a multi-agent env."""
        return self.mean_return * self.agents

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "episodes": self.episodes,
            "mean_return": self.mean_return,
            "std_return": self.std_return,
            "min": self.min,
            "max": self.max,
        }
        if self.agents:
            out.update(
                agents=self.agents,
                team_mean_return=self.team_mean_return,
                team_std_return=self.std_return * self.agents,
            )
        if self.groups:
            out["groups"] = {g: {"mean_return": m, "std_return": sd} for g, (m, sd) in self.groups.items()}
        if self.best_at is not None:
            out.update(policy=self.policy, best_env_steps=self.best_at, best_is_final=self.best_is_final)
        if self.videos:
            out["videos"] = self.videos
        return out


def evaluate(request: EvalRequest) -> EvalOutcome:
    run = RunDir(request.run_dir)
    try:
        doc = run.read()
        config = doc["config"]
    except (OSError, ValueError, KeyError) as exc:
        why = "no run.json" if isinstance(exc, FileNotFoundError) or not run.is_run() else str(exc)
        raise UsageError(f"{request.run_dir} is not a run directory ({why})") from None
    policy = run.policy(best=request.best)
    if not (policy / "saved_model.pb").is_file():
        why = "no periodic evaluation ran (train.eval.every)" if request.best else "the run did not finish"
        raise Failed(f"{request.run_dir} has no {policy.name}/ ({why})")
    if request.video is not None:
        _need_video_writer()
    from rlgen.runtime.evaluation.video import VideoError, video_paths
    from rlgen.runtime.tfimport import native_stderr_aside

    # TensorFlow's native log lines (the XLA cache's notices, say) stay off the terminal
    try:
        with native_stderr_aside(None, replay_on_error=False):
            returns, evaluation = _returns(policy, config["env"], request)
    except (ImportError, VideoError) as exc:  # a custom env factory not importable from here; no frames to record
        raise UsageError(str(exc)) from None
    out = EvalOutcome(
        request.run_dir,
        policy.name,
        len(returns),
        float(returns.mean()),
        float(returns.std()),
        float(returns.min()),
        float(returns.max()),
        agents=evaluation.agents,
        groups={g: (float(r.mean()), float(r.std())) for g, r in evaluation.groups.items()},
    )
    if request.best:
        best = doc.get("best_eval") or {}
        out.best_at = best.get("env_steps")
        out.best_is_final = out.best_at is not None and out.best_at == doc.get("env_steps")
    if request.video is not None:
        out.videos = [str(p) for p in video_paths(request.video, policy.name, len(returns)) if p.is_file()]
    return out


def _returns(policy_dir: Path, env: dict, request: EvalRequest):  # noqa: ANN202 - numpy array, PolicyEvaluation
    """The episodes' returns, and the evaluation that ran them (a multi-agent env's agents and groups)."""
    import tensorflow as tf

    from rlgen.runtime.evaluation.episodes import PolicyEvaluation, RecurrentAct

    policy = tf.saved_model.load(str(policy_dir))  # alive while its act runs
    evaluation = PolicyEvaluation(RecurrentAct.of(policy), env, request.episodes, request.seed)
    return evaluation(request.video, policy_dir.name), evaluation


def _need_video_writer() -> None:
    """``--video``: gymnasium's RecordVideo writes its mp4s with moviepy, the ``video`` extra."""
    try:
        import moviepy  # noqa: F401
    except ImportError:
        raise UsageError(
            "--video needs moviepy: install the video extra (pip install 'rlgen[video]'; scripts/setup.sh does)"
        ) from None
