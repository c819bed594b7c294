"""Evaluating a policy: run whole episodes on fresh envs and report their returns, and
record them as videos on request (gymnasium's ``RecordVideo``; moviepy writes the mp4s).

A spec's in-graph env (``backend: tensorflow``) is evaluated in the graph as it trains
(:class:`PolicyEvaluation`): every episode is stepped at once, policy and env in one XLA-compiled
``tf.while_loop``, one call per evaluation instead of one per env step (the CartPole
example's 10 episodes of up to 500 steps: 0.3 s on gymnasium's envs, 4 ms in the graph).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlgen.runtime.envs import VectorEnv, env_seed

from .video import VideoError

ActFn = Callable[[np.ndarray], np.ndarray]
#: Where evaluation envs draw their seeds: the rank index of ``env_seed``, apart from training's ranks.
EVAL_RANK = 1 << 16


def evaluate(
    act: ActFn, env: Mapping[str, Any], episodes: int, seed: int, video: Path | None = None, name: str = "policy"
) -> np.ndarray:
    """Returns of ``episodes`` complete episodes of ``act`` on envs made from ``env``.

    ``env`` holds ``id``/``factory``/``kwargs``/``max_episode_steps`` and ``wrappers`` as in
    the spec (the loop's observations are the wrapped env's).
    The envs are seeded apart from training's (rank :data:`EVAL_RANK`), and only the first
    episode of each env counts, so every episode starts from a fresh seeded reset.
    With ``video`` (a folder), the episodes run one after another on one env that
    draws ``rgb_array`` frames, episode ``k`` recorded into ``video_paths(video, name,
    episodes)[k]``: RecordVideo keeps an episode's frames in memory until it ends.
    """
    n = 1 if video is not None else max(1, min(int(episodes), 16))
    vec = VectorEnv(
        env_id=env.get("id"),
        num_envs=n,
        seed=seed,
        rank=EVAL_RANK,
        factory=env.get("factory"),
        kwargs=env.get("kwargs") or {},
        max_episode_steps=env.get("max_episode_steps"),
        spec_wrappers=env.get("wrappers") or (),
        **({"preset": env["preset"], "training": False} if env.get("preset") else {}),  # whole games, unclipped
        # envpool's pool, except for videos: only gymnasium's env draws the frames
        **({"backend": "envpool"} if env.get("backend") == "envpool" and video is None else {}),
        **({} if video is None else _recording(env, video, name)),
    )
    returns: list[float] = []
    try:
        while len(returns) < episodes:
            obs = vec.reset()
            running = np.zeros(n, np.float64)
            finished = np.zeros(n, bool)
            while not finished.all():
                obs = obs if obs.dtype == np.uint8 else np.asarray(obs, np.float32)  # images: scaled in the graph
                obs, reward, terminated, truncated = vec.step(np.asarray(act(obs)))
                running += np.where(finished, 0.0, reward)
                ended = np.logical_or(terminated, truncated) & ~finished
                returns.extend(float(r) for r in running[ended])
                finished |= ended
    finally:
        vec.close()
    return np.asarray(returns[:episodes], np.float64)


def act_function(policy: Any, deterministic: bool = True) -> Callable[[Any], Any]:
    """What evaluation acts through: ``policy.act``'s actions as one traced function (no
    autograph: straight-line code), or a :class:`RecurrentAct` for a recurrent policy. The
    loop's evaluation and the evaluator process's copy both use it, so that they compute the
    same actions."""
    import tensorflow as tf

    if getattr(policy, "recurrent", False):
        step = tf.function(
            lambda obs, state, first: policy.act_recurrent(obs, state, first, deterministic)[::2], autograph=False
        )
        return RecurrentAct(step, policy.initial_state)
    return tf.function(lambda obs: policy.act(obs, deterministic=deterministic)[0], autograph=False)


class RecurrentAct:
    """What evaluation acts through for a recurrent policy: ``step(obs, state, first) ->
    (action, state)`` and ``initial_state(rows)`` (zeros), as the exported policy has them.
    Called on observations alone, it carries the state from one call to the next, from zeros on
    the first call after :meth:`begin` (an evaluation's episodes start together, and only each
    env copy's first episode counts)."""

    def __init__(self, step: Callable[..., Any], initial_state: Callable[[Any], Any]) -> None:
        self.step, self.initial_state = step, initial_state
        self._state: Any = None

    @classmethod
    def of(cls, module: Any) -> Any:
        """A loaded exported policy's act: its ``act``, or a :class:`RecurrentAct` over it."""
        return cls(module.act, module.initial_state) if hasattr(module, "initial_state") else module.act

    def begin(self) -> None:
        self._state = None

    def __call__(self, obs: Any) -> Any:
        import tensorflow as tf

        rows = int(obs.shape[0])
        first = self._state is None
        if first:
            self._state = self.initial_state(tf.constant(rows, tf.int32))
        action, self._state = self.step(obs, self._state, tf.fill([rows], first))
        return action


class PolicyEvaluation:
    """Evaluations of one TensorFlow policy function ``act`` (a float32 batch of observations
    to actions), each on the same freshly seeded envs, so that a result depends on the
    policy's weights alone: :func:`evaluate` on gymnasium envs, or all ``episodes`` at once
    in one graph for an in-graph env (seeded from :data:`EVAL_RANK` likewise, so the two
    draw different first states). Recording video always steps gymnasium's env: only it draws frames.
    """

    def __init__(self, act: Callable[[Any], Any], env: Mapping[str, Any], episodes: int, seed: int) -> None:
        self.act, self.env, self.episodes, self.seed = act, env, int(episodes), int(seed)
        self._graph: Callable[[], Any] | None = None
        self._concrete: Callable[[Any], Any] | None = None
        #: A multi-agent env (:mod:`.agents`): the agents per env copy, and with several groups
        #: each group's returns in the last evaluation (the mean over its agents, per episode).
        self.agents = int(env.get("agents") or 1) if env.get("pettingzoo") else 0
        self.groups: dict[str, np.ndarray] = {}

    def _numpy_act(self, obs: np.ndarray) -> np.ndarray:
        """``act`` on NumPy observations, through its concrete function for a batch of any size,
        called the way compiled steps are (:func:`rlgen.runtime.tfutil.concrete_caller`): a call
        skips ``tf.function``'s argument matching and binding. For the CartPole example's
        policy that is 0.19 ms a call instead of 0.40 ms, and calls are most of an evaluation
        on gymnasium's envs."""
        import tensorflow as tf

        if self._concrete is None:
            if hasattr(self.act, "get_concrete_function"):  # a tf.function or a restored one
                from rlgen.runtime.tfutil import concrete_caller

                dtype = tf.uint8 if obs.dtype == np.uint8 else tf.float32  # images come as the env gives them
                spec = tf.TensorSpec([None, *obs.shape[1:]], dtype)
                self._concrete = concrete_caller(self.act.get_concrete_function(spec))
            else:  # any callable
                self._concrete = lambda x: [self.act(x)]
        return self._concrete(tf.constant(obs))[0].numpy()

    def __call__(self, video: Path | None = None, name: str = "policy") -> np.ndarray:
        """The returns of the episodes, one per episode (a multi-agent env's: the mean over
        agents of each agent's return, as training logs them)."""
        if self.agents and (self.env.get("backend") != "tensorflow" or video is not None):
            return self._agent_episodes(video, name)
        if self.env.get("backend") != "tensorflow" or video is not None:
            return evaluate(self._numpy_act, self.env, self.episodes, self.seed, video, name)
        if self._graph is None:
            self._graph = self._in_graph()
        return self._graph().numpy()

    def _agent_episodes(self, video: Path | None, name: str) -> np.ndarray:
        """A multi-agent env's episodes on copies of its PettingZoo env (:mod:`.agents`)."""
        import tensorflow as tf

        from .agents import evaluate_agents

        given = self.env.get("kwargs") or {}
        if video is not None and any(given.get(k, "mpe2") != "mpe2" for k in ("reward", "physics")):
            raise VideoError(
                "--video: the in-graph env draws no frames, and its `reward`/`physics` options are "
                "not those of the PettingZoo env that would draw them; evaluate without --video"
            )

        def numpy_act(obs: Any) -> Any:
            return tf.nest.map_structure(lambda a: a.numpy(), self.act(tf.nest.map_structure(tf.constant, obs)))

        if isinstance(self.act, RecurrentAct):
            numpy_act.begin = self.act.begin  # type: ignore[attr-defined]  # each evaluation from zeros

        # recording an in-graph env: its PettingZoo original with the same (mpe2) options draws the frames
        env = {**self.env, "kwargs": {k: v for k, v in given.items() if k not in ("reward", "physics")}}
        out = evaluate_agents(numpy_act, env, self.episodes, self.seed, EVAL_RANK, video, name)
        self.groups = out.groups
        return out.returns

    def prepare(self) -> None:
        """Trace and compile an in-graph evaluation now (the first call would; its result is not kept)."""
        if self.env.get("backend") == "tensorflow":
            self()

    def _in_graph(self) -> Callable[[], Any]:
        """The compiled evaluation: every env's first episode, its return once it ends."""
        import tensorflow as tf

        from rlgen.runtime.tfenvs import make_tf_env

        from .ingraph import episode_returns

        seed = env_seed(self.seed, EVAL_RANK)
        if self.agents:
            from .agents import in_graph_agents

            return in_graph_agents(self.act, self.env, self.episodes, seed)
        env = make_tf_env(
            self.env["id"], self.episodes, seed=seed, max_episode_steps=self.env.get("max_episode_steps"), name="eval"
        )
        act = self.act

        def step(obs):  # noqa: ANN001, ANN202
            obs, reward, terminated, truncated = env.step(act(obs))
            return obs, reward, tf.logical_or(terminated, truncated)

        # every episode ends by the time limit at the latest
        return episode_returns(env.reset, step, env.rng, seed, self.episodes, env.max_episode_steps)


def _recording(env: Mapping[str, Any], folder: Path, name: str) -> dict[str, Any]:
    """:class:`VectorEnv` arguments that record every episode of its env into ``folder``."""
    _draw_offscreen()
    what = env.get("factory") or env.get("id")

    def record(one: gym.Env) -> gym.Env:
        _check_frames(one, what)
        return gym.wrappers.RecordVideo(one, str(folder), episode_trigger=lambda _: True, name_prefix=name)

    return {"render_mode": "rgb_array", "wrappers": [record]}


def _draw_offscreen() -> None:
    """pygame (the classic-control envs) draws on SDL's dummy display: no window is needed,
    and SDL says nothing about a missing one. MuJoCo's OpenGL is left to MUJOCO_GL (its EGL
    under Mesa crashed in a process that had imported TensorFlow)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def _check_frames(env: gym.Env, what: str) -> None:
    """Raise :class:`VideoError` unless ``env`` draws ``rgb_array`` frames (it draws one to tell)."""
    if env.render_mode != "rgb_array":
        raise VideoError(
            f"--video: {what} makes envs with render_mode {env.render_mode!r}, not 'rgb_array' "
            "(an env factory must take render_mode and pass it to its env)"
        )
    try:
        env.reset()  # the seeded reset that starts the evaluation follows
        frame = env.render()
    except Exception as exc:  # a missing drawing package, no OpenGL context for MuJoCo, ...
        mujoco = type(exc).__module__.partition(".")[0] == "mujoco"
        hint = "; without a display MuJoCo needs MUJOCO_GL=egl or osmesa" if mujoco else ""
        raise VideoError(f"--video: {what} cannot draw frames ({type(exc).__name__}: {exc}{hint})") from None
    if not isinstance(frame, np.ndarray):
        raise VideoError(f"--video: {what} draws {type(frame).__name__}, not an rgb_array image")
