"""Host environments: a batch of gymnasium envs with seeding and episode bookkeeping.

Step convention (gymnasium 1.x ``AutoresetMode.NEXT_STEP``, used for every backend):
when env ``i`` ends an episode at step ``t`` (``terminated[i] or truncated[i]``),
``obs[i]`` returned by that step is the episode's *final* observation. The next
``step`` resets env ``i``: its action is ignored and it returns the first
observation of the new episode with ``reward 0`` and both flags false. Such a
*reset step* is not a transition; :attr:`VectorEnv.valid` marks it ``False`` and
the rollout buffer and episode statistics skip it. Keeping this convention (rather
than ``SAME_STEP``) lets us use gymnasium's NumPy-vectorised envs, which only
support it, and hands the final observation of a truncated episode to the actor,
which values it on the reset step: the bootstrap value comes for free.
"""

from __future__ import annotations

import functools
import inspect
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlgen.dsl import atari, atari_envpool
from rlgen.dsl.envinfo import quiet_mujoco
from rlgen.dsl.wrappers import from_data, wrapper_class

from .networks import import_callable


def env_seed(seed: int, *indices: int) -> int:
    """A 31-bit seed derived from ``(seed, *indices)``, e.g. ``(seed, rank, env_index)``."""
    state = np.random.SeedSequence([int(seed), *(int(i) for i in indices)]).generate_state(1)
    return int(state[0] & 0x7FFFFFFF)


#: Index that keeps a replica's sampling streams apart from its envs' seeds (env indices are small).
_REPLICA_STREAM = 1 << 21


def replica_seed(seed: int, rank: int) -> int:
    """The base seed of one replica's random streams (action sampling, exploration, minibatch
    order): derived from the run seed and the rank, so two actors never draw the same stream
    and a rerun draws the same ones (Brax folds the process id into its key the same way)."""
    return env_seed(seed, rank, _REPLICA_STREAM)


def make_wrappers(entries: Sequence[Mapping[str, Any]]) -> list[Callable[[gym.Env], gym.Env]]:
    """Callables applying the spec's ``env.wrappers`` (``{"name", "kwargs"}`` entries, as in
    ``plan.json``) to one env: ``gymnasium.wrappers.<name>(env, **kwargs)``, or a custom
    ``"pkg.module:callable"``, imported here."""
    out = []
    for w in from_data(entries):
        make = import_callable(w.name) if w.custom else wrapper_class(w)
        out.append(functools.partial(make, **w.kwargs))
    return out


def _takes(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` accepts the keyword argument ``name`` (by name or through ``**kwargs``)."""
    params = inspect.signature(fn).parameters.values()
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


class VectorEnv:
    """``num_envs`` copies of one environment, stepped together in this process.

    ``vectorization``: ``"auto"`` uses gymnasium's NumPy-vectorised implementation
    when the env has one (``CartPole-v1``: one object steps all envs at once, seeded
    by ``(seed, rank)``) and otherwise ``SyncVectorEnv`` (env ``i`` seeded by
    ``(seed, rank, i)``); ``"vector_entry_point"`` or ``"sync"`` force one.
    ``factory`` (``"pkg.module:callable"``) replaces ``env_id`` for custom envs.
    ``backend="envpool"`` (with ``preset="atari"``) steps one envpool pool instead, seeded
    by ``(seed, rank)``, under the same step convention.
    ``render_mode`` goes to ``gymnasium.make`` (or to a factory that takes it);
    ``spec_wrappers`` are the spec's ``env.wrappers`` as plan data (:func:`make_wrappers`);
    they and then ``wrappers`` (callables) wrap each env in turn, after the time limit,
    and make ``"auto"`` pick ``SyncVectorEnv``.

    Completed episodes' returns and lengths are kept in :attr:`episode_returns` /
    :attr:`episode_lengths` (the last ``window``) and in :attr:`completed` (all since
    the last :meth:`drain_episodes`).
    """

    def __init__(
        self,
        env_id: str | None = None,
        num_envs: int = 1,
        seed: int = 0,
        rank: int = 0,
        factory: str | Callable[..., gym.Env] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        max_episode_steps: int | None = None,
        vectorization: str = "auto",
        window: int = 100,
        render_mode: str | None = None,
        wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
        spec_wrappers: Sequence[Mapping[str, Any]] = (),
        preset: str | None = None,
        training: bool = True,
        backend: str = "gymnasium",
    ) -> None:
        if (env_id is None) == (factory is None):
            raise ValueError("give exactly one of env_id and factory")
        self.num_envs, self.seed, self.rank = int(num_envs), int(seed), int(rank)
        kwargs = dict(kwargs or {})
        if render_mode is not None:
            kwargs["render_mode"] = render_mode
        wrap = [*make_wrappers(spec_wrappers), *wrappers]
        #: ``atari``: the preset's env (rlgen.dsl.atari); episodes are reported as whole games,
        #: unclipped, from the ``game_score`` its wrapper puts in ``info``
        self.preset = preset
        if backend == "envpool":  # the atari preset on one envpool pool (rlgen.dsl.atari_envpool)
            assert env_id is not None and preset == "atari" and not wrap, "validate refuses other envpool envs"
            rank_seed = env_seed(self.seed, self.rank)
            self.env = atari_envpool.make(env_id, self.num_envs, rank_seed, kwargs, training, max_episode_steps)
            self.vectorization = "envpool"
        else:
            if preset == "atari":
                atari.register()
                kwargs.update(atari.ATARI_MAKE)
                wrap.insert(0, functools.partial(atari.atari, training=training))
            self.env = self._make(env_id, factory, kwargs, max_episode_steps, vectorization, wrap)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        box = isinstance(self.action_space, gym.spaces.Box)
        self._clip = (self.action_space.low, self.action_space.high) if box else None
        self.episode_returns: deque[float] = deque(maxlen=window)
        self.episode_lengths: deque[int] = deque(maxlen=window)
        self.completed: list[tuple[float, int]] = []
        self.env_steps = 0
        self._ep_return = np.zeros(self.num_envs, np.float64)
        self._ep_length = np.zeros(self.num_envs, np.int64)
        self._done = np.zeros(self.num_envs, bool)
        self.valid = np.ones(self.num_envs, bool)
        self._seeded = False

    def _make(
        self,
        env_id: str | None,
        factory: str | Callable[..., gym.Env] | None,
        kwargs: dict[str, Any],
        max_episode_steps: int | None,
        vectorization: str,
        wrappers: list[Callable[[gym.Env], gym.Env]],
    ) -> gym.vector.VectorEnv:
        next_step = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        if factory is not None:
            make_one = import_callable(factory) if isinstance(factory, str) else factory
            if "render_mode" in kwargs and not _takes(make_one, "render_mode"):
                del kwargs["render_mode"]  # its envs have a render mode of their own (wrappers can check it)

            def thunk() -> gym.Env:
                env = make_one(**kwargs)
                if max_episode_steps is not None:
                    env = gym.wrappers.TimeLimit(env, max_episode_steps)
                for wrap in wrappers:
                    env = wrap(env)
                return env

            self.vectorization = "sync"
            return gym.vector.SyncVectorEnv([thunk] * self.num_envs, **next_step)
        assert env_id is not None
        quiet_mujoco(env_id)
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        has_vector = gym.spec(env_id).vector_entry_point is not None and not wrappers
        if vectorization == "vector_entry_point" or (vectorization == "auto" and has_vector):
            env = gym.make_vec(env_id, self.num_envs, "vector_entry_point", **kwargs)
            if env.metadata.get("autoreset_mode") == AutoresetMode.NEXT_STEP:
                self.vectorization = "vector_entry_point"
                return env
            env.close()
            if vectorization == "vector_entry_point":
                raise ValueError(f"{env_id}'s vector env does not use NEXT_STEP autoreset")
        elif vectorization not in ("auto", "sync"):
            raise ValueError(f"unknown vectorization {vectorization!r}")
        self.vectorization = "sync"
        return gym.make_vec(env_id, self.num_envs, "sync", vector_kwargs=next_step, wrappers=wrappers, **kwargs)

    def reset(self) -> np.ndarray:
        """Start new episodes in every env (the first call seeds them); returns ``obs``."""
        seed: int | list[int] | None = None
        if not self._seeded:
            if self.vectorization == "sync":
                seed = [env_seed(self.seed, self.rank, i) for i in range(self.num_envs)]
            else:
                seed = env_seed(self.seed, self.rank)
            self.action_space.seed(env_seed(self.seed, self.rank, 1 << 20))  # own stream
            self._seeded = True
        obs, _ = self.env.reset(seed=seed)
        self._ep_return[:] = 0.0
        self._ep_length[:] = 0
        self._done[:] = False
        self.valid[:] = True
        return obs

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step every env; returns ``obs, reward (float32), terminated, truncated``.

        Box actions are clipped to the space's bounds here (the learner keeps the
        unclipped sample). See the module docstring for reset steps.
        """
        if self._clip is not None:
            action = np.clip(action, *self._clip)
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward = np.asarray(reward, np.float32)
        valid = ~self._done
        self.valid = valid
        self._ep_return += reward
        self._ep_length += valid
        self.env_steps += int(valid.sum())
        done = np.logical_or(terminated, truncated)
        if self.preset is not None:  # episodes are games: unclipped scores, across lives
            self._games(info)
        elif done.any():
            for i in np.flatnonzero(done):
                episode = (float(self._ep_return[i]), int(self._ep_length[i]))
                self.completed.append(episode)
                self.episode_returns.append(episode[0])
                self.episode_lengths.append(episode[1])
            self._ep_return[done] = 0.0
            self._ep_length[done] = 0
        self._done = done
        return obs, reward, terminated, truncated

    def _games(self, info: Mapping[str, Any]) -> None:
        ended = info.get("_game_score")
        for i in np.flatnonzero(ended) if ended is not None else ():
            episode = (float(info["game_score"][i]), int(info["game_length"][i]))
            self.completed.append(episode)
            self.episode_returns.append(episode[0])
            self.episode_lengths.append(episode[1])

    def mean_return(self) -> float:
        """Mean return of the last ``window`` completed episodes (NaN if none yet)."""
        return float(np.mean(self.episode_returns)) if self.episode_returns else float("nan")

    def drain_episodes(self) -> list[tuple[float, int]]:
        """Episodes ``(return, length)`` completed since the previous call."""
        done, self.completed = self.completed, []
        return done

    def close(self) -> None:
        self.env.close()


class EnvGroups:
    """A rank's envs in groups, reset and stepped one group at a time (pipelined inference:
    a group steps while the learner acts for another). Each group is an env object of its
    own (``VectorEnv`` or ``HostTFEnv``); episodes are reported from all of them."""

    def __init__(self, groups: Sequence[Any]) -> None:
        self.groups = list(groups)
        self.observation_space = self.groups[0].observation_space
        self.action_space = self.groups[0].action_space

    def reset(self, group: int) -> np.ndarray:
        return self.groups[group].reset()

    def step(self, group: int, *actions: np.ndarray) -> tuple[np.ndarray, ...]:
        """Step env group ``group`` with its actions (one array per agent group of a
        multi-agent env with several)."""
        return self.groups[group].step(*actions)

    def drain_episodes(self) -> list[tuple[float, int]]:
        return [episode for g in self.groups for episode in g.drain_episodes()]

    def drain_group_returns(self) -> dict[str, list[float]]:
        """Per agent group, its mean agent return in each episode finished in any env group."""
        out: dict[str, list[float]] = {}
        for g in self.groups:
            for name, returns in g.drain_group_returns().items():
                out.setdefault(name, []).extend(returns)
        return out

    def close(self) -> None:
        for g in self.groups:
            if hasattr(g, "close"):
                g.close()
