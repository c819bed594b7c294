"""The pieces every network is built of: activations, initialisers, dense and layer-norm
layers, and the output-head bookkeeping (several heads on one torso, one fused matmul).

:mod:`rlgen.runtime.networks` (MLPs) and :mod:`rlgen.runtime.convnets` (image networks) build
on them; ``networks`` re-exports them under their old names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

Activation = Callable[[tf.Tensor], tf.Tensor]

ACTIVATIONS: dict[str, Activation] = {
    "tanh": tf.tanh,
    "relu": tf.nn.relu,
    "elu": tf.nn.elu,
    "gelu": tf.nn.gelu,
    "silu": tf.nn.silu,
    "sigmoid": tf.sigmoid,
}

HIDDEN_GAIN = math.sqrt(2.0)


def orthogonal(fan_in: int, fan_out: int, gain: float, rng: np.random.Generator) -> np.ndarray:
    """A ``[fan_in, fan_out]`` matrix with orthonormal rows or columns, times ``gain``.

    Same construction as ``torch.nn.init.orthogonal_`` on a ``[fan_out, fan_in]``
    weight (QR of a Gaussian matrix, signs fixed by the diagonal of R), transposed.
    """
    rows, cols = fan_out, fan_in
    flat = rng.standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return (gain * q).T.astype(np.float32)


def glorot_uniform(fan_in: int, fan_out: int, gain: float, rng: np.random.Generator) -> np.ndarray:
    """Glorot/Xavier uniform initialisation, scaled by ``gain``."""
    limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


def he_normal(fan_in: int, fan_out: int, gain: float, rng: np.random.Generator) -> np.ndarray:
    """He normal initialisation (std ``sqrt(2 / fan_in)``), scaled by ``gain``."""
    return (gain * math.sqrt(2.0 / fan_in) * rng.standard_normal((fan_in, fan_out))).astype(np.float32)


def torch_uniform(fan_in: int, fan_out: int, gain: float, rng: np.random.Generator) -> np.ndarray:
    """PyTorch's default weights for ``nn.Linear`` and ``nn.Conv2d`` (``kaiming_uniform_`` with
    ``a=sqrt(5)``): uniform in ``±1 / sqrt(fan_in)``, scaled by ``gain``. What Stable-Baselines3's
    DQN, SAC and TD3 networks start from (only its actor-critic policies draw orthogonal
    weights). :func:`draw_layer` draws the biases PyTorch gives these layers too."""
    limit = gain / math.sqrt(fan_in)
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


INITIALIZERS = {
    "orthogonal": orthogonal,
    "glorot_uniform": glorot_uniform,
    "he_normal": he_normal,
    "torch_uniform": torch_uniform,
}


def check_activation_init(activation: str, init: str) -> None:
    """Refuse an activation or initialiser the layers do not know."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; one of {sorted(ACTIVATIONS)}")
    if init not in INITIALIZERS:
        raise ValueError(f"unknown init {init!r}; one of {sorted(INITIALIZERS)}")


#: A layer's initial ``(weights [fan_in, fan_out], bias [fan_out])``.
Drawn = tuple[np.ndarray, np.ndarray]


def draw_layer(init: str, fan_in: int, fan_out: int, gain: float, rng: np.random.Generator) -> Drawn:
    """One layer's initial weights and bias. The bias is zero, except under ``torch_uniform``,
    which draws it right after the weights from ``±1 / sqrt(fan_in)`` (whatever the gain), as
    PyTorch's ``nn.Linear`` and ``nn.Conv2d`` do; the other initialisers draw nothing for it."""
    weights = INITIALIZERS[init](fan_in, fan_out, gain, rng)
    if init != "torch_uniform":
        return weights, np.zeros(fan_out, np.float32)
    limit = 1.0 / math.sqrt(fan_in)
    return weights, rng.uniform(-limit, limit, fan_out).astype(np.float32)


def hidden_gain(init: str) -> float:
    """A hidden layer's gain: ``sqrt(2)`` with ``orthogonal`` (as Stable-Baselines3), 1 otherwise."""
    return HIDDEN_GAIN if init == "orthogonal" else 1.0


def draw_hidden(sizes: Sequence[int], init: str, rng: np.random.Generator) -> list[Drawn]:
    """The hidden layers of ``sizes`` (input first), in order, as :func:`draw_layer` with
    :func:`hidden_gain`."""
    return [draw_layer(init, a, b, hidden_gain(init), rng) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]


def draw_heads(fan_in: int, heads: Sequence[tuple[int, float]], init: str, rng: np.random.Generator) -> Drawn:
    """The output heads fused into one ``[fan_in, outputs]`` layer, each head's column block
    (and bias block) drawn as its own layer with its own gain."""
    blocks = [draw_layer(init, fan_in, n, gain, rng) for n, gain in heads]
    return np.concatenate([w for w, _ in blocks], axis=1), np.concatenate([b for _, b in blocks])


OutputSize = int | Sequence[int]
OutputGain = float | Sequence[float]


def output_heads(output_size: OutputSize, output_gain: OutputGain = 1.0) -> tuple[tuple[int, float], ...]:
    """Normalise ``output_size``/``output_gain`` to one ``(size, gain)`` pair per output head.

    A scalar size is one head; a sequence of sizes is one head per entry. A scalar
    gain applies to every head; a sequence of gains must have one entry per head.
    """
    sizes = (output_size,) if np.ndim(output_size) == 0 else tuple(output_size)
    gains = (output_gain,) * len(sizes) if np.ndim(output_gain) == 0 else tuple(output_gain)
    if not sizes:
        raise ValueError("a network needs at least one output head")
    if len(gains) != len(sizes):
        raise ValueError(f"{len(gains)} output gains for {len(sizes)} output heads (sizes {list(sizes)})")
    heads = tuple((int(n), float(g)) for n, g in zip(sizes, gains, strict=True))
    if any(n < 1 for n, _ in heads):
        raise ValueError(f"output head sizes must be >= 1, got {[n for n, _ in heads]}")
    return heads


def head_slices(sizes: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """``(start, stop)`` of each head in the concatenated outputs, for heads of ``sizes``."""
    stops = np.cumsum([int(n) for n in sizes]).tolist()
    return tuple(zip([0, *stops[:-1]], stops, strict=True))


class Dense(tf.Module):
    """``y = x @ w + b``, from initial ``weights [in, out]`` and ``bias [out]`` (:func:`draw_layer`)."""

    def __init__(self, weights: np.ndarray, bias: np.ndarray, name: str | None = None) -> None:
        super().__init__(name=name)
        self.w = tf.Variable(weights, name="w")
        self.b = tf.Variable(bias, name="b")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        """In ``x``'s dtype (the weights cast to it: no op when it is theirs, float32)."""
        return tf.matmul(x, tf.cast(self.w, x.dtype)) + tf.cast(self.b, x.dtype)


class LayerNorm(tf.Module):
    """Layer normalisation over the last axis with a learned scale (ones) and shift (zeros),
    as ``torch.nn.LayerNorm`` (``eps`` 1e-5, biased variance). Its initial values are
    constants: building one draws nothing from a network's random stream."""

    def __init__(self, size: int, eps: float = 1e-5, name: str | None = None) -> None:
        super().__init__(name=name)
        self.eps = float(eps)
        self.gamma = tf.Variable(tf.ones([size]), name="gamma")
        self.beta = tf.Variable(tf.zeros([size]), name="beta")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + self.eps) * self.gamma + self.beta
