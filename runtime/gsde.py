"""Generalized state-dependent exploration (gSDE; Raffin, Kober and Stulp, 2022), as
Stable-Baselines3's ``use_sde=True`` with its defaults (full ``std``, features not learned
through the noise, no ``expln``): for SAC's squashed Gaussian actor (:class:`GSDEActor`, the
mean clipped to ``[-2, 2]``) and for PPO's and A2C's Gaussian policy (:class:`GSDEPolicy`,
no squashing, no clipping).

The (pre-squash) action is ``u = mean(s) + z(s) @ (std * E)``:

* ``z(s)``: the actor network's last hidden features (``MLP.features``), gradient-stopped;
* ``std = exp(log_std)``: a learned ``[features, dim]`` matrix (``log_std_init``, -3 in SB3);
* ``E``: a standard-normal ``[features, dim]`` matrix that is *held*, so that an env's noise
  changes smoothly with its state instead of jumping at every step.

Given ``s`` and ``std``, ``u`` is Gaussian with variance ``z(s)^2 @ std^2`` (plus ``1e-6``),
which gives the log-probability (with ``tanh``'s change of variables for SAC, as the plain
actor) and, for PPO and A2C, the entropy.

When ``E`` is drawn:

* **acting** (:meth:`GSDEActor.act`): one ``E`` per env, drawn at the first step of every
  collect phase of ``period`` steps (SB3 resets the noise when ``collect_rollouts`` starts)
  and every ``sample_freq`` steps within a phase (SB3's ``sde_sample_freq``; -1: only at the
  phase's start). The step count lives outside checkpoints and exports: a run resumes at an
  iteration's start, where a phase starts and draws a fresh ``E`` anyway;
* **learning** (SAC, :meth:`GSDEActor.step_noise`): one ``E`` per gradient step, shared by
  the whole minibatch and by the actions at ``s`` and ``s'`` (SB3 resets the noise before
  each gradient step). PPO and A2C learn from the stored actions' log-probabilities under
  ``N(mean(s), variance)``, which ``E`` does not enter.
"""

from __future__ import annotations

import tensorflow as tf

from .continuous import SquashedGaussianActor, _ContinuousActor, squashed_log_prob
from .distributions import DiagGaussian
from .policies import ActionSpec, Policy

#: Added to the variance, as SB3's ``StateDependentNoiseDistribution`` does.
VARIANCE_EPS = 1e-6


class _ActingNoise:
    """The acting side's held matrices and step count. A plain object, so that ``tf.Module``
    tracks neither: they are not weights, and stay out of checkpoints and SavedModels."""

    def __init__(self, envs: int, features: int, dim: int, period: int, sample_freq: int) -> None:
        if sample_freq == 0 or sample_freq < -1 or period < 1 or envs < 1:
            raise ValueError(f"sample_freq must be -1 or >= 1 (got {sample_freq}), period and envs >= 1")
        self.matrices = tf.Variable(tf.zeros([envs, features, dim]), trainable=False, name="gsde_noise")
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="gsde_steps")
        self.period = int(period)
        self.every = int(sample_freq) if sample_freq > 0 else int(period)

    def offset(self, generator: tf.random.Generator, z: tf.Tensor, log_std: tf.Tensor) -> tf.Tensor:
        """This acting step's noise ``z @ (exp(log_std) * E)`` ``[B, dim]``, each env with its matrix."""
        return tf.einsum("bf,bfd->bd", z, tf.exp(log_std)[None] * self.next(generator, z))

    def next(self, generator: tf.random.Generator, z: tf.Tensor) -> tf.Tensor:
        """Each env's matrix ``[envs, features, dim]`` for this acting step, for the features
        ``z`` of a batch of the envs': drawn anew at a phase's first step and every
        ``sample_freq`` steps within it, else the held one. A batch of another size (a
        stochastic evaluation's envs) gets fresh matrices and leaves the held ones alone."""
        batch, envs = z.shape[0], self.matrices.shape[0]
        if batch is None:  # known only when the call runs
            same = tf.equal(tf.shape(z)[0], envs)
            return tf.cond(same, lambda: self._held(generator), lambda: self._fresh(generator, z))
        return self._held(generator) if batch == envs else self._fresh(generator, z)

    def _held(self, generator: tf.random.Generator) -> tf.Tensor:
        phase = self.steps % self.period
        fresh = generator.normal(tf.shape(self.matrices))
        matrices = tf.where(tf.equal(phase % self.every, 0), fresh, self.matrices.read_value())
        self.matrices.assign(matrices)
        self.steps.assign_add(1)
        return matrices

    def _fresh(self, generator: tf.random.Generator, z: tf.Tensor) -> tf.Tensor:
        return generator.normal(tf.concat([tf.shape(z)[:1], tf.shape(self.matrices)[1:]], 0))


def _sigma(z: tf.Tensor, log_std: tf.Tensor) -> tf.Tensor:
    """Standard deviation ``[B, dim]`` of the (pre-squash) action given the features ``z``."""
    return tf.sqrt(tf.matmul(tf.square(z), tf.exp(2.0 * log_std)) + VARIANCE_EPS)


def _features(network: tf.Module) -> int:
    if not (callable(getattr(network, "features", None)) and callable(getattr(network, "head", None))):
        raise ValueError("gSDE reads the network's last hidden features: use a kind: mlp network")
    return int(network.feature_size)


class GSDEActor(SquashedGaussianActor):
    """SAC's actor with gSDE. ``network`` maps observations to ``dim`` means and exposes the
    features its head reads (``features(obs)``, ``feature_size``: a ``kind: mlp`` network).

    ``envs`` is the batch :meth:`act` steps (one held matrix per env); ``period`` the acting
    steps of one collect phase; ``sample_freq`` as SB3's ``sde_sample_freq``.
    """

    def __init__(
        self,
        network: tf.Module,
        action_spec: ActionSpec,
        seed: int = 0,
        name: str | None = "actor",
        log_std_init: float = -3.0,
        sample_freq: int = -1,
        period: int = 1,
        envs: int = 1,
        clip_mean: float = 2.0,
    ) -> None:
        _ContinuousActor.__init__(self, network, action_spec, action_spec.num_outputs, seed, name)
        self.feature_size = _features(network)
        self.log_std = tf.Variable(tf.fill([self.feature_size, self.action_dim], float(log_std_init)), name="log_std")
        self.clip_mean = float(clip_mean)
        self._acting = _ActingNoise(envs, self.feature_size, self.action_dim, period, sample_freq)

    def _features_mean(self, obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(z [B, features], mean [B, dim])``: the features gradient-stopped, the mean clipped."""
        features = self.network.features(obs)
        mean = self.network.head(features)
        if self.clip_mean > 0.0:
            mean = tf.clip_by_value(mean, -self.clip_mean, self.clip_mean)
        return tf.stop_gradient(features), mean

    def gaussian(self, obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(mean, log_std)`` of the pre-squash Gaussian at ``obs``, each ``[B, dim]``."""
        z, mean = self._features_mean(obs)
        return mean, tf.math.log(_sigma(z, self.log_std))

    def step_noise(self) -> tf.Tensor:
        """A fresh ``E`` ``[features, dim]`` for one gradient step's every :meth:`sample`."""
        return self.generator.normal([self.feature_size, self.action_dim])

    def sample(self, obs: tf.Tensor, noise: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        """``(scaled action [B, dim], log_prob [B])`` with the exploration matrix ``noise``
        (:meth:`step_noise`; a fresh one when omitted), differentiable in the mean and ``log_std``."""
        if noise is None:
            noise = self.step_noise()
        z, mean = self._features_mean(obs)
        offset = tf.matmul(z, tf.exp(self.log_std) * noise)
        return self._squashed(mean, offset, _sigma(z, self.log_std))

    def act(self, obs: tf.Tensor, deterministic: bool = False, random: tf.Tensor | None = None) -> tuple[tf.Tensor]:
        """``(actions [B, dim],)`` in env units: ``tanh(mean)`` when ``deterministic``, else with
        each env's held matrix (drawn anew on the schedule above); uniform where ``random`` holds."""
        z, mean = self._features_mean(obs)
        if deterministic:
            return (self.unscale(tf.tanh(mean)),)
        offset = self._acting.offset(self.generator, z, self.log_std)
        scaled, _ = self._squashed(mean, offset, _sigma(z, self.log_std))
        return (self._or_random(self.unscale(scaled), random),)

    @staticmethod
    def _squashed(mean: tf.Tensor, offset: tf.Tensor, sigma: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        u = mean + offset
        return tf.tanh(u), squashed_log_prob(u, offset / sigma, tf.math.log(sigma))


class GSDEPolicy(Policy):
    """PPO's and A2C's Gaussian policy with gSDE (SB3's ``use_sde=True`` on an on-policy
    algorithm: no squashing, the mean unclipped). ``network`` is the policy's own ``kind: mlp``
    network; ``log_std_init`` (SB3's, default 0 for PPO and A2C) fills the ``[features, dim]``
    matrix. ``envs``, ``period`` and ``sample_freq`` as :class:`GSDEActor`'s; the collect phase
    is a rollout, whose start draws each env's matrix anew, as SB3's ``collect_rollouts``."""

    def __init__(
        self,
        network: tf.Module,
        action_spec: ActionSpec,
        seed: int = 0,
        name: str | None = "policy",
        log_std_init: float = 0.0,
        sample_freq: int = -1,
        period: int = 1,
        envs: int = 1,
    ) -> None:
        if action_spec.discrete:
            raise ValueError(f"gSDE needs continuous actions, not {action_spec}")
        self.feature_size = _features(network)
        super().__init__(network, action_spec, "gaussian", log_std_init, seed, name)
        self._acting = _ActingNoise(envs, self.feature_size, action_spec.num_outputs, period, sample_freq)

    def _log_std_variable(self, log_std_init: float) -> tf.Variable:
        shape = [self.feature_size, self.action_spec.num_outputs]
        return tf.Variable(tf.fill(shape, float(log_std_init)), name="log_std")

    def _features_dist(self, obs: tf.Tensor) -> tuple[tf.Tensor, DiagGaussian]:
        """``(z, N(mean(s), z(s)^2 @ std^2))``: the features (gradient-stopped) and the Gaussian
        the stored actions' log-probabilities and the entropy are taken under."""
        features = self.network.features(obs)
        z = tf.stop_gradient(features)
        return z, DiagGaussian(self.network.head(features), tf.math.log(_sigma(z, self.log_std)))

    def distribution(self, obs: tf.Tensor) -> DiagGaussian:
        return self._features_dist(obs)[1]

    def act(self, obs: tf.Tensor, deterministic: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
        """``(action, log_prob)``: the mean when ``deterministic``, else with each env's held matrix."""
        z, dist = self._features_dist(obs)
        action = dist.mode() if deterministic else dist.mean + self._acting.offset(self.generator, z, self.log_std)
        return action, dist.log_prob(action)
