"""Function approximators as ``tf.Module``s over plain ``tf.Variable``s.

No Keras: Horovod's ``broadcast_variables`` fails on Keras 3 variables, and plain
variables are checkpointable with ``tf.train.Checkpoint`` all the same. Initial
weights are drawn with NumPy from an explicit seed, so a network is reproducible
without touching TensorFlow's global random state.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .convnets import build_image_network
from .layers import (  # noqa: F401 - re-exported: generated code and tests import them from here
    ACTIVATIONS,
    HIDDEN_GAIN,
    INITIALIZERS,
    Activation,
    Dense,
    Drawn,
    LayerNorm,
    OutputGain,
    OutputSize,
    check_activation_init,
    draw_heads,
    draw_hidden,
    glorot_uniform,
    he_normal,
    head_slices,
    orthogonal,
    output_heads,
)
from .recurrent import RecurrentMLP


class EnsembleDense(tf.Module):
    """``N`` independent :class:`Dense` layers stacked: ``w [N, in, out]``, ``b [N, out]``.
    Applied to ``x [G, N, in]`` (``G`` groups of one row per member) with one einsum:
    ``y[g, i] = x[g, i] @ w[i] + b[i]``."""

    def __init__(self, weights: np.ndarray, bias: np.ndarray, name: str | None = None) -> None:
        super().__init__(name=name)
        self.w = tf.Variable(weights, name="w")
        self.b = tf.Variable(bias, name="b")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.einsum("gni,nio->gno", x, self.w) + self.b


class EnsembleLayerNorm(LayerNorm):
    """``N`` independent :class:`LayerNorm` s stacked: ``gamma`` and ``beta`` are ``[N, size]``,
    applied to ``x [G, N, size]`` (member ``i`` normalises ``x[:, i]`` with its own scale and shift)."""

    def __init__(self, members: int, size: int, eps: float = 1e-5, name: str | None = None) -> None:
        tf.Module.__init__(self, name=name)
        self.eps = float(eps)
        self.gamma = tf.Variable(tf.ones([members, size]), name="gamma")
        self.beta = tf.Variable(tf.zeros([members, size]), name="beta")


def agent_seed(seed: int, agent: int) -> tuple[int, int]:
    """The seed of agent ``agent``'s network in an ensemble built with ``seed``: the NumPy
    entropy ``(seed, agent)``. Agent 0's is ``seed``'s own stream (NumPy's seed sequence pads
    entropy with zeros), so its weights are those of the one shared network; the others are
    independent streams, distinct from every integer seed below ``2**32``."""
    return (int(seed), int(agent))


class MLP(tf.Module):
    """Multi-layer perceptron: ``[B, *input_shape] -> [B, output_size]``.

    With ``init="orthogonal"`` (the default, as Stable-Baselines3): hidden layers get
    gain ``sqrt(2)``, the output layer ``output_gain`` (0.01 for a policy head, 1.0
    for a value head). Other initialisers ignore the gains except ``output_gain``.

    Several heads on one torso (a policy and a value sharing the network, as SB3's
    shared ``net_arch``): ``output_size`` and ``output_gain`` may be sequences, one
    entry per head. The heads' outputs are concatenated in that order (``head_slices``
    gives each head's ``(start, stop)``); ``self.output_size`` is their total. The
    heads are stored as one fused :class:`Dense` ``head`` whose column blocks are
    initialised separately, each with its own gain: the same parameters, gradients
    and optimiser updates as separate linear layers, in one matmul. A single head
    draws exactly the weights it always did.

    ``layer_norm=True`` adds a :class:`LayerNorm` on the (flattened) input and after each
    hidden layer's activation, as the reference MAPPO's ``MLPBase`` with
    ``use_feature_normalization`` (marlbenchmark/on-policy); the dense layers' weights are
    the ones drawn without it. Without it the network has no normalisation variables.

    ``agents=N``: one network per agent, as an ensemble of ``N`` members evaluated in one
    batched call. Every layer's variables are stacked on a leading agent axis (weights
    ``[N, in, out]``, biases and LayerNorm scales ``[N, out]``); the input's rows must be
    a multiple of ``N`` in env-major order (row ``b*N + i`` is agent ``i`` of env copy
    ``b``), are viewed as ``[R/N, N, in]`` and go through one einsum per layer, and the
    outputs come back as ``[R, output_size]`` rows in the same order. Member ``i``'s
    initial weights are exactly those of a single :class:`MLP` seeded with
    ``agent_seed(seed, i)`` (member 0's are the shared network's with ``seed``).
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        hidden: Sequence[int],
        output_size: OutputSize,
        activation: str = "tanh",
        init: str = "orthogonal",
        output_gain: OutputGain = 1.0,
        seed: int | Sequence[int] = 0,
        name: str | None = None,
        layer_norm: bool = False,
        agents: int | None = None,
    ) -> None:
        super().__init__(name=name)
        check_activation_init(activation, init)
        self.input_shape = tuple(int(d) for d in input_shape)
        self.input_size = int(np.prod(self.input_shape, dtype=np.int64))
        heads = output_heads(output_size, output_gain)
        self.head_sizes = tuple(n for n, _ in heads)
        self.head_gains = tuple(g for _, g in heads)
        self.head_slices = head_slices(self.head_sizes)
        self.output_size = sum(self.head_sizes)
        self._activation = ACTIVATIONS[activation]
        if agents is not None and (isinstance(agents, bool) or int(agents) < 1):
            raise ValueError(f"agents must be a positive number of ensemble members, got {agents!r}")
        self.agents = None if agents is None else int(agents)
        sizes = [self.input_size, *(int(h) for h in hidden)]
        if self.agents is None:
            drawn = _draw(sizes, heads, init, np.random.default_rng(seed))
            dense: Callable[..., tf.Module] = Dense
        else:  # one draw per member, as a single network with the member's seed, stacked
            members = [_draw(sizes, heads, init, np.random.default_rng(agent_seed(seed, i))) for i in range(agents)]
            drawn = [tuple(np.stack(part) for part in zip(*layer, strict=True)) for layer in zip(*members, strict=True)]
            dense = EnsembleDense
        self.hidden = [dense(*wb, name=f"hidden_{i}") for i, wb in enumerate(drawn[:-1])]
        self.head = dense(*drawn[-1], name="head")
        self.layer_norm = bool(layer_norm)
        if self.layer_norm:  # constants: the weights above are drawn as without them
            if self.agents is None:
                self.input_norm = LayerNorm(self.input_size, name="input_norm")
                self.norms = [LayerNorm(n, name=f"norm_{i}") for i, n in enumerate(sizes[1:])]
            else:
                self.input_norm = EnsembleLayerNorm(self.agents, self.input_size, name="input_norm")
                self.norms = [EnsembleLayerNorm(self.agents, n, name=f"norm_{i}") for i, n in enumerate(sizes[1:])]

    @property
    def feature_size(self) -> int:
        """Width of :meth:`features`: the last hidden layer's (the input's without hidden layers)."""
        return int(self.hidden[-1].w.shape[-1]) if self.hidden else self.input_size

    def _torso(self, h: tf.Tensor) -> tf.Tensor:
        if self.layer_norm:
            h = self.input_norm(h)
            for layer, norm in zip(self.hidden, self.norms, strict=True):
                h = norm(self._activation(layer(h)))
            return h
        for layer in self.hidden:
            h = self._activation(layer(h))
        return h

    def _members(self, x: tf.Tensor) -> tf.Tensor:
        """The input as ``[B, input_size]`` rows, or for an ensemble ``[B/N, N, input_size]``."""
        shape = [-1, self.input_size] if self.agents is None else [-1, self.agents, self.input_size]
        return tf.reshape(tf.cast(x, tf.float32), shape)

    def features(self, x: tf.Tensor) -> tf.Tensor:
        """The last hidden layer's activations ``[B, feature_size]``, which the head reads."""
        h = self._torso(self._members(x))
        return h if self.agents is None else tf.reshape(h, [-1, self.feature_size])

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        if self.agents is None:
            return self.head(self.features(x))
        return tf.reshape(self.head(self._torso(self._members(x))), [-1, self.output_size])


def _draw(sizes: Sequence[int], heads: Sequence[tuple[int, float]], init: str, rng: np.random.Generator) -> list[Drawn]:
    """One network's initial ``(weights, bias)`` per layer from ``rng``, in draw order: the
    hidden layers' (``[in, out]``), then the heads' column blocks fused into one ``[in, outputs]``."""
    return [*draw_hidden(sizes, init, rng), draw_heads(sizes[-1], heads, init, rng)]


def mlp(
    input_shape: Sequence[int],
    output_size: OutputSize,
    hidden: Sequence[int] = (64, 64),
    activation: str = "tanh",
    init: str = "orthogonal",
    output_gain: OutputGain = 1.0,
    seed: int = 0,
    layer_norm: bool = False,
) -> MLP:
    """:class:`MLP` with the custom-network factory signature (``input_shape, output_size``)."""
    return MLP(input_shape, hidden, output_size, activation, init, output_gain, seed, layer_norm=layer_norm)


def import_callable(ref: str) -> Callable[..., Any]:
    """Import ``"pkg.module:attr"`` and return the attribute, which must be callable."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'pkg.module:callable', got {ref!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ImportError(
            f"cannot import {ref!r} ({exc}); its module must be importable where rlgen runs: "
            "run from the directory that holds it, or add that directory to PYTHONPATH"
        ) from None
    if not callable(obj):
        raise TypeError(f"{ref!r} is not callable")
    return obj


def build_network(
    config: Mapping[str, Any],
    input_shape: Sequence[int],
    output_size: OutputSize,
    output_gain: OutputGain = 1.0,
    seed: int = 0,
    name: str | None = None,
    agents: int | None = None,
) -> tf.Module:
    """Build a network from its spec entry (``networks.<name>`` in the ``.rl.yaml``).

    ``{kind: mlp, hidden, activation, init, layer_norm}`` builds an :class:`MLP`; with
    ``recurrent: {size, layer_norm}`` a :class:`~rlgen.runtime.recurrent.RecurrentMLP` (a GRU of
    ``size`` units between the hidden layers and the heads, its output normalised with
    ``layer_norm``, as the reference MAPPO's);
    ``{kind: cnn, layers, hidden}`` and ``{kind: impala, channels, hidden}`` build the
    image networks of :mod:`rlgen.runtime.convnets`;
    ``{kind: custom, impl: "pkg.mod:factory", args}`` calls
    ``factory(tuple(input_shape), output_size, **args)``, which must return a
    ``tf.Module`` mapping ``[B, *input_shape]`` to ``[B, output_size]``.

    A network shared by several components gets one output head per component:
    pass ``output_size`` and ``output_gain`` as sequences (e.g. ``(n_actions, 1)``
    and ``(0.01, 1.0)`` for a policy and a value on one torso); the outputs are the
    heads' outputs concatenated in that order (see :func:`head_slices`). Only
    ``kind: mlp``, ``cnn`` and ``impala`` support several heads: a custom factory's protocol has one output
    size and no gain, so several heads for it raise ``ValueError`` (give each
    component its own network instead). One head written as a one-entry sequence is
    the same as a plain size.

    ``agents=N`` builds one network per agent: an :class:`MLP` ensemble of ``N`` members
    applied to env-major rows in one batched call (see :class:`MLP`). A custom factory
    builds one network for all rows, so ``kind: custom`` with ``agents`` raises ``ValueError``.
    """
    kind = config.get("kind", "mlp")
    heads = output_heads(output_size, output_gain)
    if kind == "mlp":
        hidden = config.get("hidden", (64, 64))
        common: dict[str, Any] = dict(
            activation=config.get("activation", "tanh"),
            init=config.get("init", "orthogonal"),
            output_gain=output_gain,
            seed=seed,
            name=name,
            layer_norm=bool(config.get("layer_norm", False)),
        )
        recurrent = config.get("recurrent")
        if not recurrent:
            return MLP(input_shape, hidden, output_size, agents=agents, **common)
        if agents is not None:
            raise ValueError("a recurrent network is shared by every agent: build it without agents=")
        output_norm = bool(recurrent.get("layer_norm", True))
        return RecurrentMLP(input_shape, hidden, int(recurrent["size"]), output_size, output_norm=output_norm, **common)
    if kind == "custom":
        if agents is not None:
            raise ValueError(
                f"custom network {config.get('impl')!r} cannot be built once per agent (agents={agents}): "
                "a factory builds one network for every row; use kind: mlp, or share it (`agents: {share: true}`)"
            )
        if len(heads) > 1:
            raise ValueError(
                f"custom network {config.get('impl')!r} cannot have several output heads "
                f"(sizes {[n for n, _ in heads]}): a factory returns one output of one size; "
                "give each component its own network, or use kind: mlp to share one"
            )
        factory = import_callable(config["impl"])
        args = dict(config.get("args", {}))
        if _takes_seed(factory):  # its initial weights from the run's seed: runs repeat
            args.setdefault("seed", int(seed))
        net = factory(tuple(int(d) for d in input_shape), heads[0][0], **args)
        if not isinstance(net, tf.Module) or not net.trainable_variables:
            raise TypeError(
                f"{config['impl']} must return a tf.Module with trainable tf.Variables, got {type(net).__name__}"
            )
        return net
    if kind in ("cnn", "impala"):
        if agents is not None:
            raise ValueError(
                f"a {kind} network cannot be built once per agent (agents={agents}): "
                "image networks are shared; share it (`agents: {share: true}`)"
            )
        return build_image_network(config, input_shape, output_size, output_gain, seed, name)
    raise ValueError(f"unknown network kind {kind!r}")


def _takes_seed(factory: Any) -> bool:
    """Does a custom network factory take a ``seed`` keyword (then rlgen passes the network's)?"""
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or an extension without a signature
        return False
    return "seed" in params and params["seed"].kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )
