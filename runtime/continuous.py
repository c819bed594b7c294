"""Continuous-control components shared by SAC and TD3: actors and twin Q critics.

Every component wraps networks built by :func:`rlgen.runtime.networks.build_network`
(the caller builds them, so a spec can name them) and is a plain ``tf.Module`` over
``tf.Variable``s: checkpointable, exportable in a SavedModel, no Keras.

Action units. The networks and the learners work in *scaled* units, each action
dimension mapped linearly from the space's ``[low, high]`` onto ``[-1, 1]``
(Stable-Baselines3's convention for off-policy algorithms); the actors' :meth:`act`
and :meth:`random` return *env* units, which is what the env steps with and what the
replay buffer stores. :func:`scale_action` / :func:`unscale_action` convert. An
action space without bounds is taken as ``[-1, 1]``.

* :class:`SquashedGaussianActor` (SAC): a diagonal Gaussian over pre-squash actions,
  squashed by ``tanh``; the log-probability includes the change of variables. Its gSDE
  variant is :class:`rlgen.runtime.gsde.GSDEActor`.
* :class:`DeterministicActor` (TD3): ``tanh`` of the network's outputs, plus Gaussian
  exploration noise when acting stochastically.
* :class:`QCritic`: ``n`` Q heads over ``concat(obs, scaled_action)``.
* :class:`CompiledActor`: the per-step acting calls of an actor, compiled, NumPy in
  and out (as :class:`rlgen.runtime.qvalue.QActor`).
* Learner helpers: :func:`polyak` (target averaging), :func:`check_target`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from .policies import ActionSpec
from .tfutil import numpy_caller

LOG_2 = math.log(2.0)
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def action_bounds(action_spec: ActionSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` float32 arrays of a continuous action spec (``[-1, 1]`` where unbounded)."""
    if action_spec.discrete:
        raise ValueError(f"a continuous actor needs a Box action space, got {action_spec}")
    dim = action_spec.num_outputs
    low = np.full(dim, -1.0, np.float32) if action_spec.low is None else np.asarray(action_spec.low, np.float32)
    high = np.full(dim, 1.0, np.float32) if action_spec.high is None else np.asarray(action_spec.high, np.float32)
    if low.shape != (dim,) or high.shape != (dim,):
        raise ValueError(f"bounds of shape {low.shape}, {high.shape} for {dim} action dimensions")
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        raise ValueError(f"action bounds must be finite with high > low, got low={low}, high={high}")
    return low, high


def scale_action(action: tf.Tensor, low: np.ndarray, high: np.ndarray) -> tf.Tensor:
    """Env units ``[low, high]`` -> ``[-1, 1]``."""
    low, high = tf.constant(low, tf.float32), tf.constant(high, tf.float32)
    return 2.0 * (tf.cast(action, tf.float32) - low) / (high - low) - 1.0


def unscale_action(scaled: tf.Tensor, low: np.ndarray, high: np.ndarray) -> tf.Tensor:
    """``[-1, 1]`` -> env units ``[low, high]``."""
    low, high = tf.constant(low, tf.float32), tf.constant(high, tf.float32)
    return low + 0.5 * (tf.cast(scaled, tf.float32) + 1.0) * (high - low)


def tanh_log_det(u: tf.Tensor) -> tf.Tensor:
    """``log(1 - tanh(u)^2)`` elementwise, in the stable form ``2 (log 2 - u - softplus(-2u))``."""
    return 2.0 * (LOG_2 - u - tf.nn.softplus(-2.0 * u))


def squashed_log_prob(u: tf.Tensor, z: tf.Tensor, log_std: tf.Tensor) -> tf.Tensor:
    """Log-density ``[B]`` of ``tanh(u)`` where ``u = mean + exp(log_std) * z`` is a diagonal
    Gaussian (``z``: the standardised offset), with ``tanh``'s change of variables."""
    return tf.reduce_sum(-0.5 * tf.square(z) - log_std - HALF_LOG_2PI - tanh_log_det(u), axis=-1)


def _network_outputs(network: tf.Module) -> int | None:
    size = getattr(network, "output_size", None)
    return int(size) if isinstance(size, int | np.integer) else None


def _flat(x: tf.Tensor) -> tf.Tensor:
    """``[B, ...]`` -> ``[B, prod(...)]`` float32 (static width when the shape says it)."""
    x = tf.cast(x, tf.float32)
    inner = x.shape[1:]
    if inner.is_fully_defined():
        return tf.reshape(x, [-1, int(np.prod(inner.as_list(), dtype=np.int64))])
    return tf.reshape(x, [tf.shape(x)[0], -1])


class _ContinuousActor(tf.Module):
    """What both actors share: the action spec, its bounds, a seeded generator, :meth:`random`."""

    def __init__(self, network: tf.Module, action_spec: ActionSpec, outputs: int, seed: int, name: str | None):
        super().__init__(name=name)
        self.low, self.high = action_bounds(action_spec)
        total = _network_outputs(network)
        if total is not None and total != outputs:
            raise ValueError(f"the network has {total} outputs; this actor over {action_spec} needs {outputs}")
        self.network = network
        self.action_spec = action_spec
        self.action_dim = action_spec.num_outputs
        self.generator = tf.random.Generator.from_seed(seed)

    def scale(self, action: tf.Tensor) -> tf.Tensor:
        """Env units -> ``[-1, 1]``."""
        return scale_action(action, self.low, self.high)

    def unscale(self, scaled: tf.Tensor) -> tf.Tensor:
        """``[-1, 1]`` -> env units."""
        return unscale_action(scaled, self.low, self.high)

    def _or_random(self, action: tf.Tensor, random: tf.Tensor | None) -> tf.Tensor:
        """``action``, or uniform random actions of its shape where ``random`` holds."""
        if random is None:
            return action
        return tf.where(tf.cast(random, tf.bool), self.random(tf.shape(action)[0]), action)

    def random(self, batch: int | tf.Tensor) -> tf.Tensor:
        """``[batch, dim]`` actions uniform over the action box, env units (warm-up before learning)."""
        u = self.generator.uniform(tf.stack([tf.cast(batch, tf.int32), self.action_dim]), -1.0, 1.0)
        return self.unscale(u)


class SquashedGaussianActor(_ContinuousActor):
    """SAC's actor: ``a = tanh(u)``, ``u ~ N(mean(obs), exp(log_std(obs)))``.

    ``network`` maps ``[B, *obs_shape]`` to ``2 * dim`` outputs: the means, then the
    log standard deviations, which are clipped to ``[log_std_min, log_std_max]`` (SB3's
    ``-20`` and ``2``). :meth:`sample` (the learner's) returns the scaled action in
    ``[-1, 1]`` and its log-probability ``log N(u) - sum log(1 - tanh(u)^2)``;
    :meth:`act` returns env units, ``tanh(mean)`` when deterministic.
    """

    def __init__(
        self,
        network: tf.Module,
        action_spec: ActionSpec,
        seed: int = 0,
        name: str | None = "actor",
        log_std_min: float = -20.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__(network, action_spec, 2 * action_spec.num_outputs, seed, name)
        if not log_std_min < log_std_max:
            raise ValueError(f"log_std_min {log_std_min} must be < log_std_max {log_std_max}")
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def gaussian(self, obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(mean, log_std)`` of the pre-squash Gaussian, each ``[B, dim]``."""
        out = self.network(obs)
        mean, log_std = out[..., : self.action_dim], out[..., self.action_dim :]
        return mean, tf.clip_by_value(log_std, self.log_std_min, self.log_std_max)

    def log_prob(self, obs: tf.Tensor, scaled_action: tf.Tensor, eps: float = 1e-6) -> tf.Tensor:
        """Log-density ``[B]`` of a given scaled action (``atanh`` of it, clipped ``eps`` inside ``(-1, 1)``)."""
        mean, log_std = self.gaussian(obs)
        a = tf.clip_by_value(tf.cast(scaled_action, tf.float32), -1.0 + eps, 1.0 - eps)
        u = tf.atanh(a)
        return squashed_log_prob(u, (u - mean) * tf.exp(-log_std), log_std)

    def step_noise(self) -> tf.Tensor | None:
        """The noise every :meth:`sample` of one gradient step shares: none here (each action
        draws its own); gSDE's exploration matrix (:class:`rlgen.runtime.gsde.GSDEActor`)."""
        return None

    def sample(self, obs: tf.Tensor, noise: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        """``(scaled action [B, dim] in [-1, 1], log_prob [B])``, reparameterised (differentiable);
        ``noise`` is :meth:`step_noise`'s."""
        del noise  # each action draws its own
        mean, log_std = self.gaussian(obs)
        noise = self.generator.normal(tf.shape(mean))
        u = mean + tf.exp(log_std) * noise
        return tf.tanh(u), squashed_log_prob(u, noise, log_std)

    def act(self, obs: tf.Tensor, deterministic: bool = False, random: tf.Tensor | None = None) -> tuple[tf.Tensor]:
        """``(actions [B, dim],)`` in env units, as a policy's ``act`` gives them (without a
        log-probability); ``deterministic`` (trace-time flag) takes ``tanh(mean)``; where
        ``random`` (a boolean tensor) holds, uniform random actions instead (the warm-up)."""
        if deterministic:
            return (self.unscale(tf.tanh(self.gaussian(obs)[0])),)
        return (self._or_random(self.unscale(self.sample(obs)[0]), random),)


class DeterministicActor(_ContinuousActor):
    """TD3's actor: ``mu(obs) = tanh(network(obs))`` in scaled units.

    :meth:`act` adds ``N(0, noise_std)`` exploration noise in scaled units (SB3's
    ``NormalActionNoise``; the noise is relative to the half-width of the box) and
    clips to ``[-1, 1]`` unless ``deterministic``; it returns env units.
    """

    def __init__(
        self,
        network: tf.Module,
        action_spec: ActionSpec,
        seed: int = 0,
        name: str | None = "actor",
        noise_std: float = 0.1,
    ) -> None:
        super().__init__(network, action_spec, action_spec.num_outputs, seed, name)
        if noise_std < 0.0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std}")
        self.noise_std = float(noise_std)

    def mu(self, obs: tf.Tensor) -> tf.Tensor:
        """The deterministic action ``[B, dim]`` in scaled units."""
        return tf.tanh(self.network(obs))

    def act(self, obs: tf.Tensor, deterministic: bool = False, random: tf.Tensor | None = None) -> tuple[tf.Tensor]:
        """``(actions [B, dim],)`` in env units; noisy unless ``deterministic`` (trace-time flag);
        uniform random where ``random`` (a boolean tensor) holds (the warm-up)."""
        a = self.mu(obs)
        if deterministic:
            return (self.unscale(a),)
        if self.noise_std > 0.0:
            a = tf.clip_by_value(a + self.noise_std * self.generator.normal(tf.shape(a)), -1.0, 1.0)
        return (self._or_random(self.unscale(a), random),)


class QCritic(tf.Module):
    """``n`` Q heads (``n = 2``: twin critics), head ``i`` = ``networks[i](concat(obs, scaled_action))``.

    Each network maps ``[B, obs_size + action_dim]`` to one output.
    """

    def __init__(self, networks: Sequence[tf.Module], name: str | None = "critic") -> None:
        super().__init__(name=name)
        networks = list(networks)
        if not networks:
            raise ValueError("a critic needs at least one Q network")
        for i, net in enumerate(networks):
            total = _network_outputs(net)
            if total is not None and total != 1:
                raise ValueError(f"Q network {i} has {total} outputs; a Q head needs 1")
        if len({id(v) for n in networks for v in n.trainable_variables}) != sum(
            len(n.trainable_variables) for n in networks
        ):
            raise ValueError("the Q networks share variables; build one network per head")
        self.networks = networks

    @property
    def num_heads(self) -> int:
        return len(self.networks)

    def values(self, obs: tf.Tensor, scaled_action: tf.Tensor) -> tf.Tensor:
        """``Q_i(obs, a)`` for every head, ``[n, B]``."""
        x = tf.concat([_flat(obs), _flat(scaled_action)], axis=-1)
        return tf.stack([tf.reshape(net(x), [-1]) for net in self.networks], axis=0)

    def __call__(self, obs: tf.Tensor, scaled_action: tf.Tensor) -> tf.Tensor:
        return self.values(obs, scaled_action)


# --- learner helpers ---------------------------------------------------------------


def polyak(targets: Sequence[tf.Variable], online: Sequence[tf.Variable], tau: tf.Tensor | float) -> None:
    """``target <- tau * online + (1 - tau) * target`` for each pair (in place)."""
    for t, o in zip(targets, online, strict=True):
        t.assign(t + tau * (o - t))


def check_target(targets: Sequence[tf.Variable], online: Sequence[tf.Variable], what: str) -> None:
    """A target copy must match its online module's variables one to one and share none."""
    if len(targets) != len(online) or any(a.shape != b.shape for a, b in zip(targets, online, strict=True)):
        raise ValueError(f"target {what} does not match the online {what}'s variables")
    if any(a is b for a, b in zip(targets, online, strict=True)):
        raise ValueError(f"target {what} shares variables with the online {what}")


Actor = SquashedGaussianActor | DeterministicActor


class CompiledActor:
    """Compiled acting of a continuous actor: NumPy ``obs[B, *obs_shape]`` -> NumPy ``action[B, dim]``
    (env units, float32), one fast-path call per env step.

    ``actor(obs)`` acts stochastically (SAC's sample, TD3's noisy action),
    :meth:`deterministic` is the evaluation policy, :meth:`random` the warm-up's
    uniform actions (from the actor's generator).
    """

    def __init__(self, actor: Actor, obs_shape: Sequence[int], jit_compile: bool = True) -> None:
        obs_spec = tf.TensorSpec([None, *obs_shape], tf.float32, name="obs")

        @tf.function(input_signature=[obs_spec], jit_compile=jit_compile, autograph=False)
        def act(obs: tf.Tensor) -> tf.Tensor:
            return actor.act(obs)[0]

        @tf.function(input_signature=[obs_spec], jit_compile=jit_compile, autograph=False)
        def deterministic(obs: tf.Tensor) -> tf.Tensor:
            return actor.act(obs, deterministic=True)[0]

        @tf.function(input_signature=[tf.TensorSpec([], tf.int32, name="batch")], autograph=False)
        def random(batch: tf.Tensor) -> tf.Tensor:
            return actor.random(batch)

        self.act_function, self.deterministic_function, self.random_function = act, deterministic, random
        self._act, self._det, self._random = numpy_caller(act), numpy_caller(deterministic), numpy_caller(random)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self._act(obs)[0]

    def deterministic(self, obs: np.ndarray) -> np.ndarray:
        return self._det(obs)[0]

    def random(self, batch: int) -> np.ndarray:
        return self._random(np.int32(batch))[0]

    def deterministic_fn(self) -> Callable[[np.ndarray], np.ndarray]:
        """:meth:`deterministic` as a plain function (e.g. for :func:`rlgen.runtime.evaluation.episodes.evaluate`)."""
        return self.deterministic


def make_compiled_actor(actor: Actor, obs_shape: Sequence[int], jit_compile: bool = True) -> CompiledActor:
    """Build the compiled acting calls of ``actor`` (see :class:`CompiledActor`)."""
    return CompiledActor(actor, tuple(int(d) for d in obs_shape), jit_compile)
