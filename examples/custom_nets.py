"""A custom network for ``custom-network.rl.yaml``: a residual MLP.

It follows the network protocol of docs/language.md ("Custom parts"):
``factory(input_shape, output_size, **args)`` returns a ``tf.Module`` that
creates its ``tf.Variable``s in its constructor and maps a ``[B, *input_shape]``
tensor to ``[B, output_size]``. It takes ``seed``, so rlgen passes it the network's
seed (from the run's) and a run with the same seed starts from the same weights.
Only plain ``tf.Variable``s are used (no Keras layers), so Horovod can broadcast them.

TensorFlow is imported inside the factory, so importing this module is cheap.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

ACTIVATIONS = ("tanh", "relu", "elu", "gelu", "silu", "sigmoid")


def ResidualMLP(
    input_shape: tuple[int, ...],
    output_size: int,
    *,
    width: int = 64,
    blocks: int = 2,
    activation: str = "tanh",
    head_gain: float = 1.0,
    seed: int = 0,
) -> Any:
    """Build the network (named like a class because it stands for one in specs).

    An input layer to ``width`` units, ``blocks`` residual blocks, and a linear head.

    Each block computes ``h + act(W2 @ act(W1 @ h))``. Hidden weights are
    orthogonal with gain sqrt(2); the head's gain is ``head_gain`` (use a small
    one, e.g. 0.01, for a policy's logits).
    """
    if width < 1 or blocks < 0 or output_size < 1:
        raise ValueError(f"need width >= 1, blocks >= 0, output_size >= 1; got {width}, {blocks}, {output_size}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got {activation!r}")
    module_class = _module_class()
    return module_class(tuple(input_shape), output_size, width, blocks, activation, head_gain, seed)


@functools.cache
def _module_class() -> type:
    import tensorflow as tf

    def orthogonal(shape: tuple[int, int], gain: float, rng: np.random.Generator) -> np.ndarray:
        rows, cols = shape
        q, r = np.linalg.qr(rng.standard_normal((max(rows, cols), min(rows, cols))))
        q = q * np.sign(np.diag(r))  # make the decomposition unique
        return (gain * (q if rows >= cols else q.T)).astype(np.float32)

    class _ResidualMLP(tf.Module):
        def __init__(self, input_shape, output_size, width, blocks, activation, head_gain, seed):
            super().__init__(name="residual_mlp")
            self.act = getattr(tf.nn, activation)
            in_size = math.prod(input_shape)
            hidden_gain = math.sqrt(2.0)
            rng = np.random.default_rng(seed)  # every weight drawn from the seed, in order

            def dense(name: str, n_in: int, n_out: int, gain: float) -> tuple[tf.Variable, ...]:
                w = tf.Variable(orthogonal((n_in, n_out), gain, rng), name=f"{name}/kernel")
                b = tf.Variable(tf.zeros((n_out,)), name=f"{name}/bias")
                return w, b

            self.inp = dense("input", in_size, width, hidden_gain)
            self.blocks = [
                (
                    dense(f"block{i}/a", width, width, hidden_gain),
                    dense(f"block{i}/b", width, width, hidden_gain),
                )
                for i in range(blocks)
            ]
            self.head = dense("head", width, output_size, head_gain)

        def __call__(self, x: tf.Tensor) -> tf.Tensor:
            x = tf.reshape(tf.cast(x, tf.float32), (tf.shape(x)[0], -1))
            h = self.act(x @ self.inp[0] + self.inp[1])
            for (w1, b1), (w2, b2) in self.blocks:
                h = h + self.act(self.act(h @ w1 + b1) @ w2 + b2)
            return h @ self.head[0] + self.head[1]

    return _ResidualMLP
