"""Policy and value components, and the fused per-step inference call.

A training loop with a host environment calls the network once per env step, and
per call overhead dominates at small batch; :func:`make_act_and_value` therefore
fuses acting and value estimation into one compiled call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from .distributions import Categorical, DiagGaussian, Distribution
from .recurrent import Resume, is_recurrent
from .tfutil import numpy_caller


@dataclass(frozen=True)
class ActionSpec:
    """An action space as the networks see it: ``n`` actions, or a real vector.

    Discrete: ``n`` set, actions are int32 scalars per env. Continuous: ``shape``
    (one axis) with optional ``low``/``high`` bounds, actions are float32 vectors.
    """

    n: int | None = None
    shape: tuple[int, ...] = ()
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None

    @property
    def discrete(self) -> bool:
        return self.n is not None

    @property
    def dtype(self) -> tf.DType:
        return tf.int32 if self.discrete else tf.float32

    @property
    def np_dtype(self) -> type[np.generic]:
        return np.int32 if self.discrete else np.float32

    @property
    def num_outputs(self) -> int:
        """Network outputs needed: logits for discrete, means for continuous."""
        return int(self.n) if self.n is not None else int(np.prod(self.shape))

    @classmethod
    def from_space(cls, space: Any) -> ActionSpec:
        """From a gymnasium ``Discrete`` or one-axis ``Box`` space."""
        if hasattr(space, "n") and not hasattr(space, "nvec"):
            return cls(n=int(space.n))
        if getattr(space, "shape", None) is not None and hasattr(space, "low"):
            if len(space.shape) != 1:
                raise ValueError(f"only one-axis Box action spaces are supported, got {space}")
            return cls(
                shape=tuple(space.shape),
                low=tuple(float(x) for x in np.asarray(space.low).ravel()),
                high=tuple(float(x) for x in np.asarray(space.high).ravel()),
            )
        raise ValueError(f"unsupported action space {space!r}")


def _network_outputs(network: tf.Module) -> int | None:
    """The network's number of outputs, when it says (``output_size``, as :class:`MLP`)."""
    size = getattr(network, "output_size", None)
    return int(size) if isinstance(size, int | np.integer) else None


class Policy(tf.Module):
    """A stochastic policy: network outputs -> categorical logits or Gaussian means.

    ``distribution`` is ``"auto"`` (from the action spec), ``"categorical"`` or
    ``"gaussian"``; the Gaussian has a state-independent ``log_std`` variable.
    Samples come from the policy's own seeded ``tf.random.Generator``.

    ``outputs=(start, stop)`` reads only those network outputs (its head on a
    network shared with a :class:`Value`, see
    :func:`rlgen.runtime.networks.build_network`); the default reads all of them.
    """

    def __init__(
        self,
        network: tf.Module,
        action_spec: ActionSpec,
        distribution: str = "auto",
        log_std_init: float = 0.0,
        seed: int = 0,
        name: str | None = "policy",
        outputs: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(name=name)
        if distribution == "auto":
            distribution = "categorical" if action_spec.discrete else "gaussian"
        if distribution not in ("categorical", "gaussian"):
            raise ValueError(f"unknown distribution {distribution!r}")
        if (distribution == "categorical") != action_spec.discrete:
            raise ValueError(f"{distribution} distribution does not fit {action_spec}")
        total = _network_outputs(network)
        if outputs is not None:
            start, stop = (int(i) for i in outputs)
            if not 0 <= start < stop or (total is not None and stop > total):
                raise ValueError(f"outputs {outputs} is not a slice of the network's {total or '?'} outputs")
            if stop - start != action_spec.num_outputs:
                raise ValueError(
                    f"outputs {outputs} hold {stop - start} values; {action_spec} needs {action_spec.num_outputs}"
                )
            outputs = (start, stop)
        elif total is not None and total != action_spec.num_outputs:
            raise ValueError(
                f"the network has {total} outputs; {action_spec} needs {action_spec.num_outputs} "
                "(pass outputs=(start, stop) to read the policy's head of a shared network)"
            )
        self.network = network
        self.outputs = outputs
        self.action_spec = action_spec
        self.kind = distribution
        self.generator = tf.random.Generator.from_seed(seed)
        if distribution == "gaussian":
            self.log_std = self._log_std_variable(log_std_init)

    def _log_std_variable(self, log_std_init: float) -> tf.Variable:
        """The Gaussian's learned log standard deviation (a state-independent ``[dim]`` here)."""
        return tf.Variable(tf.fill([self.action_spec.num_outputs], float(log_std_init)), name="log_std")

    def distribution(self, obs: tf.Tensor) -> Distribution:
        return self.distribution_from(self.network(obs))

    def distribution_from(self, out: tf.Tensor) -> Distribution:
        """The distribution given the network's outputs at the observations (all its heads)."""
        if self.outputs is not None:
            out = out[..., self.outputs[0] : self.outputs[1]]
        if self.kind == "categorical":
            return Categorical(out)
        return DiagGaussian(out, self.log_std)

    def act(self, obs: tf.Tensor, deterministic: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
        """Return ``(action, log_prob)``; ``deterministic`` takes the mode (trace-time flag)."""
        return self._act(self.distribution(obs), deterministic)

    def _act(self, dist: Distribution, deterministic: bool) -> tuple[tf.Tensor, tf.Tensor]:
        action = dist.mode() if deterministic else dist.sample(self.generator)
        return action, dist.log_prob(action)

    # A policy over a recurrent network (runtime/recurrent.py) carries a state per row.

    @property
    def recurrent(self) -> bool:
        return is_recurrent(self.network)

    def initial_state(self, rows: int | tf.Tensor) -> tf.Tensor:
        """Zeros ``[rows, state_size]``: the state before the first step."""
        return self.network.initial_state(rows)

    def act_recurrent(
        self, obs: tf.Tensor, state: tf.Tensor, first: tf.Tensor, deterministic: bool = False
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """``(action, log_prob, next_state)``: one step from ``state``, zeros where ``first``
        (the row's observation begins an episode)."""
        out, state = self.network.step(obs, state, first)
        return (*self._act(self.distribution_from(out), deterministic), state)

    def distribution_seq(
        self, obs: tf.Tensor, state: tf.Tensor, first: tf.Tensor, resume: Resume | None = None
    ) -> Distribution:
        """The distribution at every step of ``S`` sequences of ``L`` steps (``obs [L, S, ...]``
        from the states ``[S, size]`` before their first step; ``resume``: the steps that take
        a stored state instead, see :meth:`rlgen.runtime.recurrent.GRU.unroll`), flattened to
        ``L*S`` rows."""
        out, _ = self.network.unroll(obs, state, first, resume)
        return self.distribution_from(tf.reshape(out, [-1, out.shape[-1]]))


class GroupPolicies(tf.Module):
    """The policies of several agent groups (``env.groups``) acting as one: ``act`` takes one
    batch of observations per group, group by group as the env returns them, and returns one
    batch of actions per group (what ``env.step`` takes). What rank 0 evaluates and exports
    where it holds every group's policy."""

    def __init__(self, policies: dict[str, Any]) -> None:
        super().__init__(name="group_policies")
        self.groups = tuple(policies)
        self.policies = list(policies.values())  # env.groups order; a checkpoint holds every group's weights

    def act(self, obs: Any, deterministic: bool = False) -> tuple[tuple[tf.Tensor, ...], tuple[tf.Tensor, ...]]:
        """``(actions, log_probs)``, one of each per group, of ``obs`` (one batch per group)."""
        if len(obs) != len(self.policies):
            raise ValueError(f"act takes one batch of observations per group ({len(self.policies)}), got {len(obs)}")
        acted = [p.act(o, deterministic=deterministic) for p, o in zip(self.policies, obs, strict=True)]
        return tuple(a for a, _ in acted), tuple(logp for _, logp in acted)


class Value(tf.Module):
    """A state-value function ``V(obs) -> [B]`` over a network with one output.

    ``output=index`` reads that one output of a network with several (its head on
    a network shared with a :class:`Policy`); the default squeezes the only one.
    """

    def __init__(self, network: tf.Module, name: str | None = "value", output: int | None = None) -> None:
        super().__init__(name=name)
        total = _network_outputs(network)
        if output is not None:
            output = int(output)
            if output < 0 or (total is not None and output >= total):
                raise ValueError(f"output {output} is not one of the network's {total or '?'} outputs")
        elif total is not None and total != 1:
            raise ValueError(
                f"the network has {total} outputs; pass output=index to read the value's head of a shared network"
            )
        self.network = network
        self.output = output

    def value(self, obs: tf.Tensor) -> tf.Tensor:
        return self.value_from(self.network(obs))

    def value_from(self, out: tf.Tensor) -> tf.Tensor:
        """The values given the network's outputs at the observations (all its heads)."""
        if self.output is not None:
            return out[..., self.output]
        return tf.squeeze(out, axis=-1)

    def __call__(self, obs: tf.Tensor) -> tf.Tensor:
        return self.value(obs)

    # A value over a recurrent network carries a state per row, as :class:`Policy`'s.

    @property
    def recurrent(self) -> bool:
        return is_recurrent(self.network)

    def initial_state(self, rows: int | tf.Tensor) -> tf.Tensor:
        return self.network.initial_state(rows)

    def value_recurrent(self, obs: tf.Tensor, state: tf.Tensor, first: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """``(value, next_state)`` of one step (see :meth:`Policy.act_recurrent`)."""
        out, state = self.network.step(obs, state, first)
        return self.value_from(out), state

    def value_seq(self, obs: tf.Tensor, state: tf.Tensor, first: tf.Tensor, resume: Resume | None = None) -> tf.Tensor:
        """The values ``[L*S]`` of ``S`` sequences of ``L`` steps (see :meth:`Policy.distribution_seq`)."""
        out, _ = self.network.unroll(obs, state, first, resume)
        return self.value_from(tf.reshape(out, [-1, out.shape[-1]]))


def distribution_and_value(policy: Policy, value: Value, obs: tf.Tensor) -> tuple[Distribution, tf.Tensor]:
    """``(policy.distribution(obs), value.value(obs))``, running a network the two share once.

    TensorFlow's graph optimiser does not merge two calls of one network on one input (only
    XLA does, and image updates run without it), so a shared torso called twice costs twice:
    a Nature CNN's PPO minibatch step took 1.9x as long. The outputs are the same; gradients
    through the torso are the two heads' summed in one pass. Policies and values that compute
    their own way (gSDE's) are called as they are.
    """
    plain = type(policy).distribution is Policy.distribution and type(value).value is Value.value
    if plain and policy.network is value.network:
        out = policy.network(obs)
        return policy.distribution_from(out), value.value_from(out)
    return policy.distribution(obs), value.value(obs)


class ActAndValue:
    """Compiled inference: NumPy ``obs[B, *obs_shape]`` -> NumPy outputs, one call per step.

    Returns ``(action, logp, value)``, or ``(action, logp)`` when built without a
    value component. ``self.function`` is the underlying ``tf.function``.
    """

    def __init__(
        self,
        policy: Policy,
        value: Value | None,
        obs_shape: tuple[int, ...],
        deterministic: bool = False,
        jit_compile: bool = True,
    ) -> None:
        spec = tf.TensorSpec([None, *obs_shape], tf.float32, name="obs")

        @tf.function(input_signature=[spec], jit_compile=jit_compile, autograph=False)
        def act_and_value(obs: tf.Tensor) -> tuple[tf.Tensor, ...]:
            action, logp = policy.act(obs, deterministic)
            if value is None:
                return action, logp
            return action, logp, value.value(obs)

        self.function = act_and_value
        self._call = numpy_caller(act_and_value)

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, ...]:
        return self._call(obs)


def make_act_and_value(
    policy: Policy,
    value: Value | None,
    obs_shape: tuple[int, ...],
    deterministic: bool = False,
    jit_compile: bool = True,
) -> ActAndValue:
    """Build the fused per-step inference call (see :class:`ActAndValue`)."""
    return ActAndValue(policy, value, tuple(obs_shape), deterministic, jit_compile)
