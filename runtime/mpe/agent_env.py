"""In-graph PettingZoo envs as the generated code calls them (``pettingzoo: ..., backend: tensorflow``).

:func:`make_tf_agent_env` builds the TF version of a PettingZoo env (:data:`TF_AGENT_ENVS`) from
the spec's ``kwargs`` and wraps it in a :class:`TFAgentEnv`, whose ``reset()`` and ``step()``
return the loop's values in the folded layout (row ``b*N + i`` is agent ``i`` of env copy ``b``)::

    env = make_tf_agent_env("mpe2.simple_spread_v3", num_envs=16, kwargs={"N": 3}, state="concat")
    obs, state = env.reset()                                         # [B*N, O], [B*N, S]
    obs, reward, terminated, truncated, state = env.step(action)     # action int [B*N]

Without a spec ``state`` they return ``obs`` and the four step values, as a single-agent
:class:`~rlgen.runtime.tfenvs.base.TFEnv`. For simple_spread both ``state: env`` (mpe2's
``state()``) and ``state: concat`` are the N observations concatenated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from .tf_spread import TFSpread

#: PettingZoo env (``$.env.pettingzoo``) -> its in-graph class; keep in step with ``rlgen.dsl.catalog.TF_AGENT_ENVS``.
TF_AGENT_ENVS: dict[str, type[TFSpread]] = {"mpe2.simple_spread_v3": TFSpread}

STATES = ("env", "concat")


class TFAgentEnv(tf.Module):
    """A multi-agent TF env whose ``reset``/``step`` also return the global state when ``state`` is
    set, and, last, ``first`` when ``first`` is set: ``[B*N]`` bool, true on the rows whose
    observation begins an episode (every row after ``reset``; after ``step``, the rows whose step
    was a reset step). Recurrent networks start their state from zeros on those rows."""

    def __init__(self, env: TFSpread, state: str | None = None, first: bool = False) -> None:
        super().__init__(name="agent_env")
        if state is not None and state not in STATES:
            raise ValueError(f"state must be one of {', '.join(STATES)} or None, got {state!r}")
        self.env = env
        self.state_kind = state
        self.first = bool(first)

    @property
    def num_envs(self) -> int:
        return self.env.num_envs

    @property
    def num_agents(self) -> int:
        return self.env.num_agents

    @property
    def num_rows(self) -> int:
        return self.env.num_rows

    def reset(self) -> tf.Tensor | tuple[tf.Tensor, ...]:
        obs = self.env.reset()
        out = (obs, self.env.global_state(obs)) if self.state_kind else (obs,)
        if self.first:
            out += (tf.ones([self.num_rows], tf.bool),)
        return out if len(out) > 1 else obs

    def step(self, action: Any) -> tuple[tf.Tensor, ...]:
        obs, reward, terminated, truncated = self.env.step(action)
        out = (obs, reward, terminated, truncated)
        if self.state_kind:
            out += (self.env.global_state(obs),)
        if self.first:  # the row after a reset step holds the new episode's first observation
            out += (tf.logical_not(self.env.valid_rows()),)
        return out

    def valid_rows(self) -> tf.Tensor:
        return self.env.valid_rows()

    def drain_episodes(self) -> list[tuple[float, int]]:
        """(Eager only.) Finished episodes ``(mean over agents of their returns, length)``."""
        return self.env.drain_episodes()

    def drain_team_episodes(self) -> list[tuple[float, int]]:
        """(Eager only.) As :meth:`drain_episodes`, with the team return (sum over agents)."""
        return self.env.drain_team_episodes()

    @property
    def single_observation_space(self) -> Any:
        return self.env.single_observation_space

    @property
    def single_state_space(self) -> Any:
        return self.env.single_state_space

    @property
    def single_action_space(self) -> Any:
        return self.env.single_action_space


def tf_agent_env_kwargs(ref: str, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The spec's ``kwargs`` as the TF env's constructor takes them (``continuous_actions`` is
    validated false and dropped)."""
    if ref not in TF_AGENT_ENVS:
        raise ValueError(f"no in-graph TensorFlow version of {ref!r}; available: {', '.join(sorted(TF_AGENT_ENVS))}")
    out = dict(kwargs or {})
    if out.pop("continuous_actions", False):
        raise ValueError(f"the in-graph {ref} has discrete actions only (continuous_actions: false)")
    return out


def make_tf_agent_env(
    ref: str,
    num_envs: int,
    seed: int = 0,
    kwargs: Mapping[str, Any] | None = None,
    state: str | None = None,
    episode_capacity: int | None = None,
    first: bool = False,
) -> TFAgentEnv:
    """``num_envs`` copies of the in-graph version of PettingZoo env ``ref``, built from the spec's
    ``kwargs`` (for simple_spread: ``N``, ``local_ratio``, ``max_cycles``, ``continuous_actions``
    false, and rlgen's ``reward``: ``mpe2`` or ``reference``); ``first``: see :class:`TFAgentEnv`."""
    cls = TF_AGENT_ENVS.get(ref)
    args = tf_agent_env_kwargs(ref, kwargs)
    env = cls(num_envs, seed=seed, episode_capacity=episode_capacity, **args)
    return TFAgentEnv(env, state, first)
