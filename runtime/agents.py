"""Host multi-agent environments: B copies of a PettingZoo ``ParallelEnv`` as one batch of rows.

Layout (docs/language.md, "Many agents"): every per-agent value is a batch of ``B*N`` rows, env-major
and agent-minor, so row ``b*N + i`` is agent ``i`` (in ``env.possible_agents`` order) of env
copy ``b``. Buffers, learners and policies see an ordinary batch.

Step convention: exactly :mod:`rlgen.runtime.envs`' (gymnasium ``NEXT_STEP`` autoreset). When
copy ``b``'s episode ends (every agent terminated, truncated or gone, or ``env.agents`` empty),
the step returns the final observations with a done flag on each of its ``N`` rows; the next
step resets copy ``b``, ignores its actions and returns the new episode's first observations
with reward 0 and flags false (:attr:`ParallelVectorEnv.valid` is ``False`` on those rows).

Agents that leave an episode early: the step in which agent ``i`` terminates returns its final
observation and reward with ``terminated`` set (a real transition, ``active`` True). From the
next step until its copy's episode ends, its row is padding: observation zeros, reward 0,
``terminated`` True, ``active`` False, and its action is not passed to the env.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlgen.dsl.agents import pettingzoo_env

from .envs import env_seed

STATE_MODES = ("env", "concat")


def _space(env: Any, kind: str, agent: str) -> Any:
    """``env.observation_space(agent)`` (or ``action_space``), or the older ``*_spaces`` dict."""
    space = getattr(env, f"{kind}_space", None)
    return space(agent) if callable(space) else getattr(env, f"{kind}_spaces")[agent]


def _group_spaces(env: Any, members: list[str], ref: str) -> tuple[tuple[int, ...], int, int, Any, Any]:
    """One group's observation shape, action count and start, and its first agent's spaces:
    every agent of the group with one Box observation shape and one ``Discrete`` action space."""
    obs_spaces = [_space(env, "observation", a) for a in members]
    act_spaces = [_space(env, "action", a) for a in members]
    shape = getattr(obs_spaces[0], "shape", None)
    if not shape or any(getattr(s, "shape", None) != shape for s in obs_spaces):
        shapes = {a: getattr(s, "shape", type(s).__name__) for a, s in zip(members, obs_spaces, strict=True)}
        raise ValueError(f"{ref!r}: every agent of a group needs a Box observation of one shape, got {shapes}")
    if any(type(s).__name__ != "Discrete" for s in act_spaces):
        kinds = sorted({type(s).__name__ for s in act_spaces})
        raise ValueError(f"{ref!r}: only Discrete action spaces are supported for now, got {kinds}")
    if len({(int(s.n), int(s.start)) for s in act_spaces}) != 1:
        raise ValueError(f"{ref!r}: agents' Discrete action spaces differ: {[int(s.n) for s in act_spaces]}")
    n, start = int(act_spaces[0].n), int(act_spaces[0].start)
    return tuple(int(d) for d in shape), n, start, obs_spaces[0], act_spaces[0]


def _grouped(*per_group: list[np.ndarray]) -> Any:
    """What reset/step return: one group's arrays as without groups (a lone obs, or a tuple);
    several groups' group by group."""
    if len(per_group[0]) == 1:
        values = [v[0] for v in per_group]
        return values[0] if len(values) == 1 else tuple(values)
    return tuple(v[gi] for gi in range(len(per_group[0])) for v in per_group)


class ParallelVectorEnv:
    """``num_envs`` copies of a PettingZoo ``ParallelEnv`` with ``N`` agents, stepped as
    ``num_rows = num_envs * N`` rows (see the module docstring).

    ``state``: ``None`` (no global state), ``"env"`` (``env.state()``, flattened) or
    ``"concat"`` (the ``N`` observations concatenated in ``possible_agents`` order); the state
    is replicated on each of the copy's ``N`` rows, and :meth:`reset` / :meth:`step` return it
    last. Copy ``i`` is seeded on its first reset with ``env_seed(seed, rank, i)``; later resets
    are unseeded (the env continues its own random stream), as in :class:`~.envs.VectorEnv`.

    Every agent must have the same Box observation space and the same ``Discrete`` action space,
    unless ``groups`` (``{name: [agent, ...]}``, every agent in one group) say otherwise: then
    each group's agents share their spaces, each group is its own batch (rows ``b*Ng + i``, agent
    ``i`` of the group in its listed order), :meth:`step` takes one action array per group, and
    :meth:`reset` / :meth:`step` return each of their outputs per group, group by group
    (``obs_a, state_a, obs_b, state_b``). One group returns what no groups do.

    Episode statistics: :meth:`drain_episodes` gives ``(mean over agents of the agent's return,
    length)`` per finished episode, :meth:`drain_team_episodes` ``(sum over agents, length)``;
    lengths and :attr:`env_steps` count joint env steps (one per copy and step, reset steps
    excluded).
    """

    def __init__(
        self,
        ref: str,
        num_envs: int = 1,
        seed: int = 0,
        rank: int = 0,
        kwargs: Mapping[str, Any] | None = None,
        state: str | None = None,
        window: int = 100,
        groups: Mapping[str, Sequence[str]] | None = None,
        first: bool = False,
    ) -> None:
        if state is not None and state not in STATE_MODES:
            raise ValueError(f"state must be one of {STATE_MODES} or None, got {state!r}")
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.num_envs, self.seed, self.rank, self.state, self.first = int(num_envs), int(seed), int(rank), state, first
        self.envs = [pettingzoo_env(ref, kwargs)]
        possible = [str(a) for a in self.envs[0].possible_agents]
        self.groups: dict[str, list[str]] = {str(g): list(a) for g, a in (groups or {"all": possible}).items()}
        self.agents: list[str] = [a for members in self.groups.values() for a in members]  # group by group
        self.num_agents = len(self.agents)
        self._check_groups(ref, possible)
        self._check_spaces(ref)
        self.envs += [pettingzoo_env(ref, kwargs) for _ in range(self.num_envs - 1)]
        self.num_rows = self.num_envs * self.num_agents
        self.state_shape: tuple[int, ...] | None = None
        # concat: the agents' observations in possible_agents order, as columns of the group arrays
        self._concat = [(list(self.groups).index(self._group_of[a]), self._slot[a]) for a in possible]
        self._concat_in_order = len(self.groups) == 1 and self.agents == possible
        if state == "concat":
            self.state_shape = (sum(int(np.prod(self.obs_shapes[g])) for g, _ in self._concat),)
        elif state == "env":
            space = getattr(self.envs[0], "state_space", None)
            if space is None or not hasattr(self.envs[0], "state"):
                raise ValueError(f"state: env needs {ref!r} to have state() and state_space; use state: concat")
            self.state_shape = (int(np.prod(space.shape)),)
        B, N = self.num_envs, self.num_agents
        self._index = {agent: i for i, agent in enumerate(self.agents)}
        self._zero_obs = [np.zeros(shape, np.float32) for shape in self.obs_shapes]
        self._alive = np.ones((B, N), bool)  # agents live in each copy's episode (take actions)
        self._full = np.ones(B, bool)  # every agent live: the fast path
        self._done = np.zeros(B, bool)  # episode ended by the last step: reset on the next
        self._ep_return = np.zeros((B, N), np.float64)
        self._ep_length = np.zeros(B, np.int64)
        self.valid = np.ones(self.num_rows, bool)
        self.active = np.ones(self.num_rows, bool)
        self.episode_returns: deque[float] = deque(maxlen=window)
        self.episode_lengths: deque[int] = deque(maxlen=window)
        self.completed: list[tuple[float, int]] = []
        self.team_completed: list[tuple[float, int]] = []
        self.group_completed: dict[str, list[float]] = {g: [] for g in self.groups}
        self.env_steps = 0
        self._seeded = False

    def _check_groups(self, ref: str, possible: list[str]) -> None:
        if not self.agents:
            raise ValueError(f"{ref!r} has no possible_agents")
        if sorted(self.agents) != sorted(possible) or len(set(self.agents)) != len(self.agents):
            raise ValueError(f"{ref!r}: groups {self.groups} must hold every agent of {possible} exactly once")
        self._group_of = {a: g for g, members in self.groups.items() for a in members}
        self._slot = {a: members.index(a) for members in self.groups.values() for a in members}
        self._sizes = [len(members) for members in self.groups.values()]
        self._starts = np.cumsum([0, *self._sizes]).tolist()  # each group's first column of the agents

    def _check_spaces(self, ref: str) -> None:
        spaces = [_group_spaces(self.envs[0], members, ref) for members in self.groups.values()]
        self.obs_shapes: list[tuple[int, ...]] = [sp[0] for sp in spaces]
        self.action_ns: list[int] = [sp[1] for sp in spaces]
        self._action_starts: list[int] = [sp[2] for sp in spaces]
        self.observation_space, self.action_space = spaces[0][3], spaces[0][4]
        self.obs_shape: tuple[int, ...] = self.obs_shapes[0]  # the first group's (the only one's)
        self.action_n = self.action_ns[0]
        self._action_start = self._action_starts[0]

    # -- filling rows -------------------------------------------------------------------------

    def _fill(self, b: int, obs: list[np.ndarray], obs_dict: Mapping[str, Any]) -> None:
        full = len(obs_dict) == self.num_agents
        for gi, members in enumerate(self.groups.values()):
            n = self._sizes[gi]
            lo = b * n
            if full:
                try:
                    obs[gi][lo : lo + n] = [obs_dict[a] for a in members]
                    continue
                except KeyError:
                    pass
            zero = self._zero_obs[gi]
            obs[gi][lo : lo + n] = [obs_dict.get(a, zero) for a in members]

    def _set_alive(
        self, b: int, env: Any, term: Mapping[str, Any] | None = None, trunc: Mapping[str, Any] | None = None
    ) -> None:
        """Mark copy ``b``'s live agents: in ``env.agents`` and neither terminated nor truncated."""
        term, trunc = term or {}, trunc or {}
        live = [a for a in env.agents if not (term.get(a, False) or trunc.get(a, False))]
        if len(live) == self.num_agents:
            self._alive[b] = True
            self._full[b] = True
        else:
            self._alive[b] = False
            self._alive[b, [self._index[a] for a in live]] = True
            self._full[b] = False

    def _states(self, obs: list[np.ndarray], env_states: np.ndarray | None) -> list[np.ndarray]:
        """The state of each copy, replicated on each of its rows of every group."""
        B = self.num_envs
        if self.state == "concat" and self._concat_in_order:
            per_env = obs[0].reshape(B, -1)
        elif self.state == "concat":
            cols = [obs[gi].reshape(B, self._sizes[gi], -1)[:, slot] for gi, slot in self._concat]
            per_env = np.concatenate(cols, axis=1)
        else:
            assert env_states is not None
            per_env = env_states
        return [np.repeat(per_env, n, axis=0) for n in self._sizes]

    def _split(self, values: np.ndarray) -> list[np.ndarray]:
        """Rows ``b*N + j`` (agents group by group) as one array per group (rows ``b*Ng + i``)."""
        if len(self._sizes) == 1:
            return [values]
        per_env = values.reshape(self.num_envs, self.num_agents)
        return [per_env[:, lo:hi].reshape(-1) for lo, hi in zip(self._starts[:-1], self._starts[1:], strict=True)]

    def _new_obs(self) -> list[np.ndarray]:
        return [
            np.zeros((self.num_envs * n, *s), np.float32) for n, s in zip(self._sizes, self.obs_shapes, strict=True)
        ]

    def _env_state(self, env: Any) -> np.ndarray:
        return np.asarray(env.state(), np.float32).reshape(-1)

    # -- API ----------------------------------------------------------------------------------

    def reset(self) -> Any:
        """Start new episodes in every copy (the first call seeds them); returns ``obs``
        ``[B*N, *obs_shape]``, or ``(obs, state)`` when ``state`` is set (and ``first``, all true,
        last when ``first`` is). With several groups:
        each group's ``obs`` (``[B*Ng, *its obs_shape]``) and ``state``, group by group."""
        obs = self._new_obs()
        env_states = np.zeros((self.num_envs, *self.state_shape), np.float32) if self.state == "env" else None
        for b, env in enumerate(self.envs):
            seed = env_seed(self.seed, self.rank, b) if not self._seeded else None
            obs_dict, _ = env.reset(seed=seed)
            self._fill(b, obs, obs_dict)
            self._set_alive(b, env)
            if env_states is not None:
                env_states[b] = self._env_state(env)
        self._seeded = True
        self._ep_return[:] = 0.0
        self._ep_length[:] = 0
        self._done[:] = False
        self.valid = np.ones(self.num_rows, bool)
        self.active = self._alive.reshape(-1).copy()
        for o, active in zip(obs, self._split(self.active), strict=True):
            o[~active] = 0.0
        states = [] if self.state is None else [self._states(obs, env_states)]
        return _grouped(obs, *states, *([self._split(np.ones(self.num_rows, bool))] if self.first else []))

    def step(self, *action: np.ndarray) -> tuple[np.ndarray, ...]:
        """Step every copy with ``action`` ``[B*N]`` (ints in ``[0, action_n)``); returns
        ``next_obs, reward (float32), terminated, truncated`` (``[B*N]`` each), plus ``next_state``
        when ``state`` is set and ``first`` (true on the rows of copies that reset in this step)
        last when ``first`` is. With several groups: one action per group, and those
        outputs per group, group by group. See the module docstring for reset steps and departed
        agents."""
        B, N, agents = self.num_envs, self.num_agents, self.agents
        if len(action) != len(self._sizes):
            raise ValueError(f"step takes one action array per group ({len(self._sizes)}), got {len(action)}")
        columns = []
        for a, n, size, start in zip(action, self.action_ns, self._sizes, self._action_starts, strict=True):
            a = np.asarray(a).reshape(B * size)
            if a.min() < 0 or a.max() >= n:  # (envs need not check them: see mpe.reference)
                raise ValueError(f"actions must lie in [0, {n}), got {a.min()}..{a.max()}")
            columns.append(a.astype(np.int64).reshape(B, size) + start)
        actions = (columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1)).reshape(-1).tolist()
        obs = self._new_obs()
        reward = np.zeros(self.num_rows, np.float32)
        terminated = np.zeros(self.num_rows, bool)
        truncated = np.zeros(self.num_rows, bool)
        env_states = np.zeros((B, *self.state_shape), np.float32) if self.state == "env" else None
        resetting = self._done.copy()
        alive = self._alive.copy()  # who acts in this step (after a reset: who starts the episode)
        empty = np.zeros(B, bool)
        for b, env in enumerate(self.envs):
            lo = b * N
            if resetting[b]:
                obs_dict, _ = env.reset()
                self._fill(b, obs, obs_dict)
                self._set_alive(b, env)
                alive[b] = self._alive[b]
            else:
                if self._full[b]:
                    act = dict(zip(agents, actions[lo : lo + N], strict=True))
                else:
                    act = {a: actions[lo + self._index[a]] for a in env.agents if alive[b, self._index[a]]}
                obs_dict, rew, term, trunc, _ = env.step(act)
                self._fill(b, obs, obs_dict)
                reward[lo : lo + N] = [rew.get(a, 0.0) for a in agents]
                terminated[lo : lo + N] = [term.get(a, False) for a in agents]
                truncated[lo : lo + N] = [trunc.get(a, False) for a in agents]
                empty[b] = not env.agents
                if not (self._full[b] and len(env.agents) == N and not any(term.values()) and not any(trunc.values())):
                    self._set_alive(b, env, term, trunc)
            if env_states is not None:
                env_states[b] = self._env_state(env)
        active = alive.reshape(-1)
        if not active.all():  # rows of agents that left earlier: padding
            gone = ~active
            for o, g in zip(obs, self._split(gone), strict=True):
                o[g] = 0.0
            reward[gone] = 0.0
            terminated[gone] = True
            truncated[gone] = False
        rows_reset = np.repeat(resetting, N)
        if resetting.any():  # reset steps: reward 0, flags false
            reward[rows_reset] = 0.0
            terminated[rows_reset] = False
            truncated[rows_reset] = False
        flags = (terminated | truncated).reshape(B, N)
        ended = (flags.all(axis=1) | empty) & ~resetting
        if ended.any():  # an episode that ends: a flag on each of its rows (truncated if none)
            rows_ended = np.repeat(ended, N)
            truncated |= rows_ended & ~(terminated | truncated)
        self.valid = ~rows_reset
        self.active = active.copy()
        self._account(reward, resetting, ended)
        self._done = ended
        parts = [obs, self._split(reward), self._split(terminated), self._split(truncated)]
        parts += [] if self.state is None else [self._states(obs, env_states)]
        return _grouped(*parts, *([self._split(rows_reset)] if self.first else []))  # first: after a reset step

    def _account(self, reward: np.ndarray, resetting: np.ndarray, ended: np.ndarray) -> None:
        self._ep_return += reward.reshape(self.num_envs, self.num_agents)
        stepped = ~resetting
        self._ep_length += stepped
        self.env_steps += int(stepped.sum())
        for b in np.flatnonzero(ended):
            length = int(self._ep_length[b])
            mean, team = float(self._ep_return[b].mean()), float(self._ep_return[b].sum())
            self.completed.append((mean, length))
            self.team_completed.append((team, length))
            self.episode_returns.append(mean)
            self.episode_lengths.append(length)
            for g, lo, hi in zip(self.groups, self._starts[:-1], self._starts[1:], strict=True):
                self.group_completed[g].append(float(self._ep_return[b, lo:hi].mean()))
        if ended.any():
            self._ep_return[ended] = 0.0
            self._ep_length[ended] = 0

    def mean_return(self) -> float:
        """Mean (over agents) return of the last ``window`` completed episodes (NaN if none yet)."""
        return float(np.mean(self.episode_returns)) if self.episode_returns else float("nan")

    def drain_episodes(self) -> list[tuple[float, int]]:
        """Episodes ``(mean over agents of each agent's return, length)`` completed since the
        previous call."""
        done, self.completed = self.completed, []
        return done

    def drain_group_returns(self) -> dict[str, list[float]]:
        """Per group, the mean over its agents of each agent's return, for every episode
        completed since the previous call."""
        done, self.group_completed = self.group_completed, {g: [] for g in self.groups}
        return done

    def drain_team_episodes(self) -> list[tuple[float, int]]:
        """Episodes ``(sum over agents of their returns, length)`` completed since the previous call."""
        done, self.team_completed = self.team_completed, []
        return done

    def close(self) -> None:
        for env in self.envs:
            env.close()
