"""Observation and reward normalisation (the spec's ``env.normalize``), as Stable-Baselines3's
``VecNormalize`` does it, over plain ``tf.Variable`` s so that checkpoints hold the statistics
and the exported policy applies them.

- :class:`RunningMeanStd`: count, mean and variance of everything seen, merged batch by batch
  with the parallel algorithm (Chan et al.), as SB3's ``RunningMeanStd`` (count starts at 1e-4).
- :class:`Normalizer`: observations become ``clip((obs - mean) / sqrt(var + epsilon), ±clip_obs)``;
  rewards are divided by the running standard deviation of the discounted return
  (``ret = ret * gamma + reward``, reset at the end of an episode) and clipped to ``±clip_reward``.
  Rewards are normalised for learning only: the envs count episode returns from raw rewards.

Where statistics are updated: in the compute graph for an in-graph env (the fused iteration
calls :meth:`Normalizer.observe_reset` / :meth:`Normalizer.observe_step`), or on the host by
the env fragment (:meth:`Normalizer.reset` / :meth:`Normalizer.step`, in NumPy, written into
the variables by :meth:`Normalizer.sync` at the end of every iteration). Under
``multi-learner`` (``distributed=True``) each rank adds what its own envs see to a *pending*
:class:`RunningMeanStd` and normalises with the shared statistics; once per iteration
:meth:`Normalizer.sync` sums every rank's pending count, mean and M2 with one allreduce and
merges the total into the shared statistics, so that every rank holds (and normalises with)
the same numbers at all times. Under ``actors-learner`` and ``async-actors`` the actors'
pending statistics travel to the learner with each rollout and the learner's merged ones back
with the weights (:meth:`Normalizer.take_pending`, :meth:`Normalizer.merge_received`,
:meth:`Normalizer.adopt`): an actor normalises with statistics as old as its weights. Under
central and pipelined inference the acting rank counts the envs' results as they arrive
(:meth:`Normalizer.next_rows`). An off-policy learner's envs only count; its replay keeps
raw transitions, normalised when sampled (:meth:`Normalizer.normalize_sampled`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

F64 = tf.float64


class RunningMeanStd(tf.Module):
    """Running mean and variance of batches of shape ``[B, *shape]`` (SB3's ``RunningMeanStd``)."""

    def __init__(self, shape: tuple[int, ...] = (), count: float = 1.0e-4, name: str | None = None) -> None:
        super().__init__(name=name)
        self.shape = tuple(int(d) for d in shape)
        self.count = tf.Variable(float(count), dtype=F64, trainable=False, name="count")
        self.mean = tf.Variable(tf.zeros(self.shape, F64), trainable=False, name="mean")
        self.var = tf.Variable(
            tf.ones(self.shape, F64) if count > 0 else tf.zeros(self.shape, F64), trainable=False, name="var"
        )

    def update(self, x: tf.Tensor) -> None:
        """Merge the batch ``x[B, *shape]``."""
        x = tf.cast(x, F64)
        mean, var = tf.nn.moments(x, axes=[0])
        self.merge(tf.cast(tf.shape(x)[0], F64), mean, var)

    def merge(self, count: tf.Tensor, mean: tf.Tensor, var: tf.Tensor) -> None:
        """Merge statistics of ``count`` samples with this ``mean`` and (population) ``var``."""
        delta = mean - self.mean
        total = self.count + count
        m2 = self.var * self.count + var * count + tf.square(delta) * self.count * count / total
        self.mean.assign(self.mean + delta * count / total)
        self.var.assign(m2 / total)
        self.count.assign(total)

    def variables_in_order(self) -> list[tf.Variable]:
        return [self.count, self.mean, self.var]

    def reset(self) -> None:
        """Back to nothing seen (count 0): a pending accumulator after its merge."""
        self.count.assign(0.0)
        self.mean.assign(tf.zeros(self.shape, F64))
        self.var.assign(tf.zeros(self.shape, F64))


def merge_moments(a: tuple[float, Any, Any], b: tuple[float, Any, Any]) -> tuple[float, Any, Any]:
    """NumPy reference of :meth:`RunningMeanStd.merge`: ``(count, mean, var)`` of both."""
    (na, ma, va), (nb, mb, vb) = a, b
    delta = np.asarray(mb) - ma
    total = na + nb
    m2 = va * na + vb * nb + np.square(delta) * na * nb / total
    return total, ma + delta * nb / total, m2 / total


class Normalizer(tf.Module):
    """The normaliser of one rank's ``num_envs`` envs (see the module docstring)."""

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        num_envs: int,
        obs: bool = True,
        reward: bool = True,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
        epsilon: float = 1.0e-8,
        gamma: float = 0.99,
        distributed: bool = False,
        name: str | None = "normalize",
    ) -> None:
        super().__init__(name=name)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.num_envs = int(num_envs)
        self.norm_obs, self.norm_reward = bool(obs), bool(reward)
        self.clip_obs, self.clip_reward = float(clip_obs), float(clip_reward)
        self.epsilon, self.gamma = float(epsilon), float(gamma)
        self.distributed = bool(distributed)
        self.obs_rms = RunningMeanStd(self.obs_shape, name="obs_rms")
        self.ret_rms = RunningMeanStd((), name="ret_rms")
        # the discounted return of each env's episode so far (what ret_rms sees)
        self.returns = tf.Variable(tf.zeros([self.num_envs], F64), trainable=False, name="returns")
        if self.distributed:  # what this rank saw since the last sync
            self.obs_pending = RunningMeanStd(self.obs_shape, count=0.0, name="obs_pending")
            self.ret_pending = RunningMeanStd((), count=0.0, name="ret_pending")
        self._host: _HostState | None = None  # NumPy copies while the host steps the envs
        self._cursor = 0  # the env the next arriving row is (see next_rows)

    # --- in the graph ------------------------------------------------------------
    def normalize_obs(self, obs: tf.Tensor) -> tf.Tensor:
        """``obs`` normalised with the statistics as they are (nothing is updated)."""
        if not self.norm_obs:
            return obs
        scaled = (tf.cast(obs, F64) - self.obs_rms.mean) / tf.sqrt(self.obs_rms.var + self.epsilon)
        return tf.cast(tf.clip_by_value(scaled, -self.clip_obs, self.clip_obs), obs.dtype)

    def normalize_reward(self, reward: tf.Tensor) -> tf.Tensor:
        if not self.norm_reward:
            return reward
        scaled = tf.cast(reward, F64) / tf.sqrt(self.ret_rms.var + self.epsilon)
        return tf.cast(tf.clip_by_value(scaled, -self.clip_reward, self.clip_reward), reward.dtype)

    def _observe(self, rms: RunningMeanStd, pending: RunningMeanStd | None, x: tf.Tensor) -> None:
        (pending if self.distributed else rms).update(x)

    def observe_reset(self, obs: tf.Tensor) -> tf.Tensor:
        """First observations of every env: counted, then normalised; returns start at 0."""
        self.returns.assign(tf.zeros([self.num_envs], F64))
        if self.norm_obs:
            self._observe(self.obs_rms, getattr(self, "obs_pending", None), obs)
        return self.normalize_obs(obs)

    def observe_step(
        self, obs: tf.Tensor, reward: tf.Tensor, terminated: tf.Tensor, truncated: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """One vector step: statistics updated, then ``(obs, reward)`` normalised."""
        if self.norm_obs:
            self._observe(self.obs_rms, getattr(self, "obs_pending", None), obs)
        if self.norm_reward:
            returns = self.returns * self.gamma + tf.cast(reward, F64)
            self._observe(self.ret_rms, getattr(self, "ret_pending", None), returns)
            done = tf.logical_or(tf.cast(terminated, tf.bool), tf.cast(truncated, tf.bool))
            self.returns.assign(tf.where(done, tf.zeros_like(returns), returns))
        return self.normalize_obs(obs), self.normalize_reward(reward)

    def observe_env_step(
        self, obs: tf.Tensor, reward: tf.Tensor, terminated: tf.Tensor, truncated: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """:meth:`observe_step` passing the flags through: an env step's four outputs."""
        obs, reward = self.observe_step(obs, reward, terminated, truncated)
        return obs, reward, terminated, truncated

    # --- on the host ---------------------------------------------------------------
    # A host env fragment steps in NumPy (a TensorFlow call per env step costs milliseconds on a
    # loaded CPU); the variables get the NumPy statistics at every sync(), which the rank calls at
    # the end of each iteration, before anything reads them (checkpoint, evaluation, export).
    def reset(self, obs: np.ndarray, rows: slice | None = None) -> np.ndarray:
        """First observations of every env (NumPy): counted, then normalised; returns start at 0.
        Takes the statistics from the variables (restored from a checkpoint on resume)."""
        self.count_reset(obs, rows)
        return self._normalize_obs_np(obs, self._host.stats["obs"])

    def step(
        self,
        obs: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        rows: slice | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One vector step in NumPy: statistics updated, then ``(obs, reward)`` normalised."""
        self.count_step(obs, reward, terminated, truncated, rows)
        stats = self._host.stats
        return self._normalize_obs_np(obs, stats["obs"]), self._normalize_reward_np(reward, stats["ret"])

    # An off-policy learner's envs only count (count_reset, count_step): its replay keeps what
    # the envs returned, the acting policy normalises its input (normalize_obs) and each sample
    # is normalised with the statistics as they are when it is drawn (normalize_sampled), as
    # SB3's off-policy algorithms do with a VecNormalize env.
    #
    # ``rows``: the envs these are (all of them when None). Under central and pipelined
    # inference the envs' results arrive at the acting rank from the env workers, all of them
    # or one env group at a time, always in env order: next_rows() says which envs come next.
    def next_rows(self, n: int) -> slice:
        """The envs of the next ``n`` rows to arrive: they cycle through all envs in order."""
        start = self._cursor
        self._cursor = (start + n) % self.num_envs
        return slice(start, start + n)

    def count_reset(self, obs: np.ndarray, rows: slice | None = None) -> None:
        """First observations of every env (NumPy), or of ``rows`` of them, counted; returns
        start at 0."""
        if rows is None or rows.start == 0:
            self._host = _HostState(self)
            self._host.returns[:] = 0.0
        if self.norm_obs:
            self._host.observe("obs", obs)

    def count_step(
        self,
        obs: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        rows: slice | None = None,
    ) -> None:
        """One vector step (NumPy) of every env, or of ``rows`` of them, counted: the
        observations, and the discounted returns."""
        host = self._host
        if host is None:
            raise RuntimeError("Normalizer.step before reset")
        if self.norm_obs:
            host.observe("obs", obs)
        if self.norm_reward:
            returns = host.returns[slice(None) if rows is None else rows]  # a view
            returns[:] = returns * self.gamma + np.asarray(reward, np.float32)
            host.observe("ret", returns)
            returns[np.logical_or(terminated, truncated)] = 0.0

    def normalize_sampled(self, batch: Any) -> Any:
        """A replay sample of raw transitions (``obs``, ``rewards``, ``next_obs`` fields)
        normalised with the statistics as they are now."""
        stats = self._host.stats if self._host is not None else {"obs": _read(self.obs_rms), "ret": _read(self.ret_rms)}
        return batch._replace(
            obs=self._normalize_obs_np(batch.obs, stats["obs"]),
            rewards=self._normalize_reward_np(batch.rewards, stats["ret"]),
            next_obs=self._normalize_obs_np(batch.next_obs, stats["obs"]),
        )

    def _normalize_obs_np(self, obs: np.ndarray, stats: tuple[float, np.ndarray, np.ndarray]) -> np.ndarray:
        obs = np.asarray(obs, np.float32)
        if not self.norm_obs:
            return obs
        _, mean, var = stats
        return np.clip((obs - mean) / np.sqrt(var + self.epsilon), -self.clip_obs, self.clip_obs).astype(np.float32)

    def _normalize_reward_np(self, reward: np.ndarray, stats: tuple[float, np.ndarray, np.ndarray]) -> np.ndarray:
        reward = np.asarray(reward, np.float32)
        if not self.norm_reward:
            return reward
        scaled = np.clip(reward / np.sqrt(stats[2] + self.epsilon), -self.clip_reward, self.clip_reward)
        return scaled.astype(np.float32)

    def sync(self) -> None:
        """At the end of each iteration, on every rank: under multi-learner, merge every rank's
        pending statistics into the shared ones (one allreduce of counts, sums and sums of
        squares) and clear them; then write the host's statistics into the variables."""
        host = self._host
        if self.distributed:
            from . import comm

            if host is None:  # the statistics live in the graph
                host = _HostState(self)
            host.merge_sums(comm.allreduce_sum(host.take_sums(), name="normalize"))
        if host is not None:
            host.store(self)

    # --- exchanged with a learner in another process (actors-learner, async-actors) ----------
    # An actor normalises with the learner's statistics as last pulled with the weights, and
    # sends what its envs saw since its last message (as sums, see sums_size) with every
    # rollout; the learner merges those into its statistics, which it publishes with the
    # weights, checkpoints and exports.
    @property
    def sums_size(self) -> int:
        """Length of the vector :meth:`take_pending` returns: for observations and then returns,
        a count, then a sum and a sum of squares per element."""
        return 4 + 2 * int(np.prod(self.obs_shape, dtype=np.int64))

    def take_pending(self) -> np.ndarray:
        """What this actor's envs saw since the last call, as a ``[1, sums_size]`` row of sums
        (summed over actors, they merge as one batch); the pending statistics start again."""
        host = self._host if self._host is not None else _HostState(self)
        sums = host.take_sums()
        if self._host is None:  # in-graph envs: clear the pending variables
            host.store(self)
        return sums[None, :]

    def merge_received(self, sums: np.ndarray) -> None:
        """Learner: merge the actors' rows of :meth:`take_pending` (``[senders, sums_size]``)."""
        host = _HostState(self)
        host.merge_sums(np.sum(sums, axis=0))
        host.store(self)

    def adopt(self) -> None:
        """Actor: after the variables were loaded with the learner's statistics, normalise with them."""
        if self._host is not None:
            self._host.stats = {"obs": _read(self.obs_rms), "ret": _read(self.ret_rms)}

    def statistics(self) -> list[tf.Variable]:
        """The shared statistics (count, mean, var of observations, then of returns): what every
        rank must hold equal, broadcast from rank 0 at the start."""
        return [*self.obs_rms.variables_in_order(), *self.ret_rms.variables_in_order()]

    def wrap(self, policy: tf.Module) -> NormalizedPolicy:
        """The policy as evaluation and export see it: raw observations in."""
        return NormalizedPolicy(policy, self)


class NormalizedPolicy(tf.Module):
    """A policy behind frozen observation normalisation: ``act(raw_obs)`` normalises with the
    statistics as they are (never updating them), then acts. Evaluation and the exported
    SavedModel use it, so they see what training saw."""

    def __init__(self, policy: tf.Module, normalizer: Normalizer) -> None:
        super().__init__(name="normalized_policy")
        self.policy = policy
        self.normalizer = normalizer

    def act(self, obs: tf.Tensor, deterministic: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
        return self.policy.act(self.normalizer.normalize_obs(obs), deterministic)


def _read(rms: RunningMeanStd) -> tuple[float, np.ndarray, np.ndarray]:
    return float(rms.count.numpy()), rms.mean.numpy(), rms.var.numpy()


class _HostState:
    """NumPy copies of a :class:`Normalizer`'s statistics (``(count, mean, var)`` per key:
    ``obs`` and ``ret``), its pending ones when they are merged elsewhere, and the per-env returns."""

    def __init__(self, norm: Normalizer) -> None:
        self.distributed = norm.distributed
        self.shapes = {"obs": norm.obs_shape, "ret": ()}
        self.stats = {"obs": _read(norm.obs_rms), "ret": _read(norm.ret_rms)}
        self.pending = {"obs": _read(norm.obs_pending), "ret": _read(norm.ret_pending)} if norm.distributed else {}
        self.returns = norm.returns.numpy().copy()

    def take_sums(self) -> np.ndarray:
        """The pending statistics as additive sums (count, then ``count * mean`` and
        ``count * (var + mean**2)`` per element; observations, then returns); cleared."""
        parts = []
        for key, shape in self.shapes.items():
            n, mean, var = self.pending[key]
            mean, var = np.ravel(mean), np.ravel(var)
            parts.append(np.concatenate([[n], n * mean, n * (var + np.square(mean))]))
            self.pending[key] = (0.0, np.zeros(shape), np.zeros(shape))
        return np.concatenate(parts)

    def merge_sums(self, total: np.ndarray) -> None:
        """Merge sums as :meth:`take_sums` writes them (of any number of ranks, added) as one batch."""
        offset = 0
        for key, shape in self.shapes.items():
            size = int(np.prod(shape, dtype=np.int64))
            n = float(total[offset])
            s1 = total[offset + 1 : offset + 1 + size]
            s2 = total[offset + 1 + size : offset + 1 + 2 * size]
            offset += 1 + 2 * size
            if n > 0:
                mean = s1 / n
                var = np.maximum(s2 / n - np.square(mean), 0.0)
                self.stats[key] = merge_moments(self.stats[key], (n, mean.reshape(shape), var.reshape(shape)))

    def observe(self, key: str, x: np.ndarray) -> None:
        x = np.asarray(x, np.float64)
        batch = (float(x.shape[0]), x.mean(axis=0), x.var(axis=0))
        target = self.pending if self.distributed else self.stats
        target[key] = batch if target[key][0] == 0 else merge_moments(target[key], batch)

    def store(self, norm: Normalizer) -> None:
        def write(rms: RunningMeanStd, stats: tuple[float, np.ndarray, np.ndarray]) -> None:
            rms.count.assign(stats[0])
            rms.mean.assign(np.asarray(stats[1], np.float64))
            rms.var.assign(np.asarray(stats[2], np.float64))

        write(norm.obs_rms, self.stats["obs"])
        write(norm.ret_rms, self.stats["ret"])
        if self.distributed:
            write(norm.obs_pending, self.pending["obs"])
            write(norm.ret_pending, self.pending["ret"])
        norm.returns.assign(self.returns)
