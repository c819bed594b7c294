"""Recurrent networks: a GRU layer and an MLP with a GRU between its torso and its heads.

The GRU is PyTorch's (``torch.nn.GRU``, one layer): gates in the order reset, update, new;
the reset gate multiplies the recurrent half of the new gate including its bias::

    r  = sigmoid(x W_xr + b_xr + h W_hr + b_hr)
    z  = sigmoid(x W_xz + b_xz + h W_hz + b_hz)
    n  = tanh(x W_xn + b_xn + r * (h W_hn + b_hn))
    h' = (1 - z) * n + z * h

so that weights port from PyTorch by transposing ``weight_ih`` and ``weight_hh``. Episode
starts reach it as a ``first`` flag per row: a row whose observation begins an episode
starts from a zero state (``h <- where(first, 0, h)`` before the step), as the reference
MAPPO's masks and torchrl's ``is_init`` do.

A sequence is laid out time-major: ``x [L, S, ...]`` for ``S`` sequences of ``L`` steps,
``first [L, S]``, and one initial state per sequence ``h0 [S, size]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import tensorflow as tf

from .layers import (
    ACTIVATIONS,
    Dense,
    LayerNorm,
    OutputGain,
    OutputSize,
    check_activation_init,
    draw_heads,
    draw_hidden,
    head_slices,
    orthogonal,
    output_heads,
)

#: ``(where [L, S] bool, states [L, S, size])``: steps at which an unroll takes the given state
Resume: TypeAlias = tuple[tf.Tensor, tf.Tensor]


class GRU(tf.Module):
    """One GRU layer: ``w_x [input, 3*size]`` and ``w_h [size, 3*size]`` orthogonal (gain 1,
    each drawn as one matrix, as the reference MAPPO initialises ``nn.GRU``), zero biases."""

    def __init__(self, input_size: int, size: int, rng: np.random.Generator, name: str | None = None) -> None:
        super().__init__(name=name)
        self.input_size, self.size = int(input_size), int(size)
        self.w_x = tf.Variable(orthogonal(self.input_size, 3 * self.size, 1.0, rng), name="w_x")
        self.w_h = tf.Variable(orthogonal(self.size, 3 * self.size, 1.0, rng), name="w_h")
        self.b_x = tf.Variable(tf.zeros([3 * self.size]), name="b_x")
        self.b_h = tf.Variable(tf.zeros([3 * self.size]), name="b_h")

    def initial_state(self, rows: int | tf.Tensor) -> tf.Tensor:
        """Zeros ``[rows, size]``: the state before an episode's first step."""
        return tf.zeros(tf.stack([rows, self.size]))

    def _cell(self, gx: tf.Tensor, h: tf.Tensor) -> tf.Tensor:
        """The step given the input half ``gx = x W_x + b_x`` (precomputed for a sequence)."""
        gh = tf.matmul(h, self.w_h) + self.b_h
        xr, xz, xn = tf.split(gx, 3, axis=-1)
        hr, hz, hn = tf.split(gh, 3, axis=-1)
        r = tf.sigmoid(xr + hr)
        z = tf.sigmoid(xz + hz)
        n = tf.tanh(xn + r * hn)
        return (1.0 - z) * n + z * h

    def step(self, x: tf.Tensor, h: tf.Tensor, first: tf.Tensor | None = None) -> tf.Tensor:
        """The next state ``[B, size]`` from inputs ``x [B, input]`` and states ``h [B, size]``;
        rows where ``first`` is true start from zeros."""
        h = _reset(h, first)
        return self._cell(tf.matmul(x, self.w_x) + self.b_x, h)

    def unroll(
        self, x: tf.Tensor, h0: tf.Tensor, first: tf.Tensor | None = None, resume: Resume | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """``(states [L, S, size], last [S, size])`` of ``S`` sequences of ``L`` steps: the
        input half of every step in one matmul, then the recurrent half step by step.
        ``resume = (where [L, S], states [L, S, size])``: at those steps the state is replaced
        by the given one (a sequence that runs on into another row takes that row's stored
        state), before ``first`` zeroes it."""
        steps = tf.shape(x)[0]
        gx = tf.reshape(
            tf.matmul(tf.reshape(x, [-1, self.input_size]), self.w_x) + self.b_x, [steps, -1, 3 * self.size]
        )
        if first is None:
            first = tf.zeros(tf.shape(gx)[:2], tf.bool)
        inputs = (gx, tf.cast(first, tf.bool))
        if resume is not None:  # without it, no per-step select
            inputs += (tf.cast(resume[0], tf.bool), tf.cast(resume[1], gx.dtype))

        def body(h: tf.Tensor, inputs: tuple[tf.Tensor, ...]) -> tf.Tensor:
            g, f, *resumed = inputs
            if resumed:
                h = tf.where(resumed[0][:, None], resumed[1], h)
            return self._cell(g, _reset(h, f))

        states = tf.scan(body, inputs, initializer=h0)
        return states, states[-1]


def _reset(h: tf.Tensor, first: tf.Tensor | None) -> tf.Tensor:
    if first is None:
        return h
    return tf.where(tf.cast(first, tf.bool)[:, None], tf.zeros_like(h), h)


class RecurrentMLP(tf.Module):
    """An MLP torso, a :class:`GRU` of ``size`` units, a LayerNorm of its output (with
    ``output_norm``, as the reference MAPPO's ``RNNLayer``; the carried state is the GRU's,
    before it), and the output heads (one fused :class:`Dense`, as :class:`MLP`'s).

    ``layer_norm`` puts a LayerNorm on the input and after each hidden layer, as
    :class:`~rlgen.runtime.networks.MLP`'s. Weights are drawn in the order hidden layers,
    GRU, heads; hidden layers and heads as :class:`MLP` draws them.

    :meth:`step` maps ``(x [B, *input_shape], h [B, size], first [B])`` to ``(outputs [B,
    output_size], next h)``; :meth:`unroll` does ``L`` steps of ``S`` sequences at once.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        hidden: Sequence[int],
        size: int,
        output_size: OutputSize,
        activation: str = "tanh",
        init: str = "orthogonal",
        output_gain: OutputGain = 1.0,
        seed: int | Sequence[int] = 0,
        name: str | None = None,
        layer_norm: bool = False,
        output_norm: bool = True,
    ) -> None:
        super().__init__(name=name)
        check_activation_init(activation, init)
        if int(size) < 1:
            raise ValueError(f"a GRU needs at least one unit, got size {size!r}")
        heads = output_heads(output_size, output_gain)
        self.head_sizes = tuple(n for n, _ in heads)
        self.head_slices = head_slices(self.head_sizes)
        self.output_size = sum(self.head_sizes)
        self.input_shape = tuple(int(d) for d in input_shape)
        self.input_size = int(np.prod(self.input_shape, dtype=np.int64))
        self._activation = ACTIVATIONS[activation]
        rng = np.random.default_rng(seed)
        sizes = [self.input_size, *(int(h) for h in hidden)]
        self.hidden = [Dense(w, b, name=f"hidden_{i}") for i, (w, b) in enumerate(draw_hidden(sizes, init, rng))]
        self.gru = GRU(sizes[-1], int(size), rng, name="gru")
        self.head = Dense(*draw_heads(int(size), heads, init, rng), name="head")
        self.layer_norm = bool(layer_norm)
        if self.layer_norm:
            self.input_norm = LayerNorm(self.input_size, name="input_norm")
            self.norms = [LayerNorm(n, name=f"norm_{i}") for i, n in enumerate(sizes[1:])]
        self.output_norm = LayerNorm(int(size), name="output_norm") if output_norm else None

    @property
    def state_size(self) -> int:
        """Width of the carried state."""
        return self.gru.size

    def initial_state(self, rows: int | tf.Tensor) -> tf.Tensor:
        return self.gru.initial_state(rows)

    def _torso(self, x: tf.Tensor) -> tf.Tensor:
        h = tf.reshape(tf.cast(x, tf.float32), [-1, self.input_size])
        if self.layer_norm:
            h = self.input_norm(h)
        for i, layer in enumerate(self.hidden):
            h = self._activation(layer(h))
            if self.layer_norm:
                h = self.norms[i](h)
        return h

    def _heads(self, states: tf.Tensor) -> tf.Tensor:
        return self.head(states if self.output_norm is None else self.output_norm(states))

    def step(self, x: tf.Tensor, h: tf.Tensor, first: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        """``(outputs [B, output_size], next state [B, size])`` of one step."""
        h = self.gru.step(self._torso(x), h, first)
        return self._heads(h), h

    def unroll(
        self, x: tf.Tensor, h0: tf.Tensor, first: tf.Tensor | None = None, resume: Resume | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """``(outputs [L, S, output_size], last state [S, size])`` of ``S`` sequences of ``L``
        steps (``x [L, S, *input_shape]``, ``first [L, S]``, ``h0 [S, size]``; ``resume`` as
        :meth:`GRU.unroll`'s)."""
        steps, seqs = tf.shape(x)[0], tf.shape(x)[1]
        features = tf.reshape(self._torso(x), [steps, seqs, -1])
        states, last = self.gru.unroll(features, h0, first, resume)
        out = self._heads(tf.reshape(states, [-1, self.gru.size]))
        return tf.reshape(out, [steps, seqs, self.output_size]), last


def is_recurrent(network: tf.Module) -> bool:
    """Does the network carry a state (``step``/``unroll``/``initial_state``)?"""
    return isinstance(network, RecurrentMLP)


__all__ = ["GRU", "RecurrentMLP", "is_recurrent"]
