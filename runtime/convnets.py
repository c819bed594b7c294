"""Convolutional networks for image observations: the Nature CNN and the IMPALA ResNet.

Both are ``tf.Module``s over plain ``tf.Variable``s like :class:`~rlgen.runtime.networks.MLP`,
with the same head protocol (several heads on one torso, fused into one :class:`Dense`,
``features``/``feature_size``/``head_slices``), so a policy and a value share a torso
exactly as an MLP is shared (SB3's ``CnnPolicy`` shares its ``NatureCNN`` the same way).

Images arrive as the env gives them, usually ``uint8`` (rollouts, replay and channel
messages carry them so); the first thing the graph does is cast them to the compute dtype
(float32 unless ``precision`` says otherwise) and scale by 1/255.

With ``precision="bfloat16"`` the torso and its dense layers compute in bfloat16 (inputs,
activations and a bfloat16 copy of each weight, cast in the graph) while the variables, their
gradients, the optimizer and the heads stay float32: mixed precision, as on accelerators. On a
CPU with AVX512_BF16 (or AMX) oneDNN runs a Nature-CNN PPO update in about two thirds of
float32's time (docs/benchmarks.md); without it bfloat16 is emulated and slower.

Layout: a rank-3 observation whose first axis is shorter than its last is read as
channels-first (``[4, 84, 84]`` from ``FrameStackObservation`` or envpool) and transposed to
NHWC, TensorFlow's CPU convolution layout; ``[84, 84, 4]`` or ``[210, 160, 3]`` is
channels-last already; a rank-2 observation is one grey channel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from rlgen.dsl.images import conv_out, image_layout

from .layers import (
    ACTIVATIONS,
    Dense,
    OutputGain,
    OutputSize,
    check_activation_init,
    draw_heads,
    draw_hidden,
    draw_layer,
    head_slices,
    hidden_gain,
    output_heads,
)

#: The Nature CNN's convolutions (Mnih et al. 2015): ``(filters, kernel, stride)``, VALID padding.
NATURE_LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
#: The IMPALA ResNet's stacks (Espeholt et al. 2018): channels of each conv + pool + 2 residual blocks.
IMPALA_CHANNELS = (16, 32, 32)


def _layout(shape: Sequence[int]) -> tuple[bool, tuple[int, int, int]]:
    layout = image_layout(shape)
    if layout is None:
        raise ValueError(f"a convolutional network needs an image ([H, W], [H, W, C] or [C, H, W]), not {shape}")
    return layout


#: What a network's ``precision`` may be: the dtype its torso computes in.
PRECISIONS = {"float32": tf.float32, "bfloat16": tf.bfloat16}


def to_nhwc(x: tf.Tensor, input_shape: Sequence[int], dtype: tf.DType = tf.float32) -> tf.Tensor:
    """``[B, *input_shape]`` images as ``dtype`` NHWC, in ``[0, 1]`` when they came as uint8."""
    first, (h, w, c) = _layout(input_shape)
    scale = x.dtype == tf.uint8
    x = tf.cast(x, dtype)
    if scale:
        x = x * (1.0 / 255.0)
    if first:
        return tf.transpose(x, [0, 2, 3, 1])
    return tf.reshape(x, [-1, h, w, c])


class Conv2D(tf.Module):
    """A 2-D convolution from an initial ``kernel [kernel, kernel, c_in, filters]`` and ``bias [filters]``."""

    def __init__(
        self, kernel: np.ndarray, bias: np.ndarray, stride: int, padding: str, name: str | None = None
    ) -> None:
        super().__init__(name=name)
        self.w = tf.Variable(kernel, name="w")
        self.b = tf.Variable(bias, name="b")
        self.stride, self.padding = int(stride), padding

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        """In ``x``'s dtype (the weights cast to it: no op when it is theirs)."""
        return tf.nn.conv2d(x, tf.cast(self.w, x.dtype), self.stride, self.padding) + tf.cast(self.b, x.dtype)


def _conv(c_in: int, filters: int, kernel: int, stride: int, padding: str, init: str, rng, name: str) -> Conv2D:
    """A hidden conv layer whose kernel is drawn as a ``[kernel*kernel*c_in, filters]`` matrix
    (as ``torch.nn.init`` flattens a conv weight) and reshaped."""
    flat, bias = draw_layer(init, kernel * kernel * c_in, filters, hidden_gain(init), rng)
    return Conv2D(flat.reshape(kernel, kernel, c_in, filters), bias, stride, padding, name=name)


class _ImageNet(tf.Module):
    """What both image networks share: dense layers after the torso, and the fused heads."""

    def _start(self, input_shape: Sequence[int], activation: str, init: str, seed: int, precision: str):
        """Set the input shape, activation and compute dtype; the input's (height, width,
        channels) and the seeded generator every layer draws from."""
        check_activation_init(activation, init)
        self.input_shape = tuple(int(d) for d in input_shape)
        self._dtype = PRECISIONS[precision]
        _, hwc = _layout(self.input_shape)
        self._activation = ACTIVATIONS[activation]
        return hwc, np.random.default_rng(seed)

    def _finish(self, flat: int, dense: Sequence[int], heads, init: str, rng) -> None:
        sizes = [flat, *(int(d) for d in dense)]
        self.dense = [Dense(w, b, name=f"dense_{i}") for i, (w, b) in enumerate(draw_hidden(sizes, init, rng))]
        self.head_sizes = tuple(n for n, _ in heads)
        self.head_gains = tuple(g for _, g in heads)
        self.head_slices = head_slices(self.head_sizes)
        self.output_size = sum(self.head_sizes)
        self.feature_size = sizes[-1]
        self.head = Dense(*draw_heads(sizes[-1], heads, init, rng), name="head")

    def torso(self, x: tf.Tensor) -> tf.Tensor:  # pragma: no cover - overridden
        raise NotImplementedError

    def features(self, x: tf.Tensor) -> tf.Tensor:
        """The last dense layer's activations ``[B, feature_size]`` as float32, which the heads read."""
        h = self.torso(to_nhwc(x, self.input_shape, self._dtype))
        h = tf.reshape(h, [-1, self.flat_size])
        for layer in self.dense:
            h = self._activation(layer(h))
        return tf.cast(h, tf.float32)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return self.head(self.features(x))


class ConvNet(_ImageNet):
    """Convolutions (VALID padding), flatten, dense layers, heads: the Nature CNN by default.

    With ``init="orthogonal"`` every hidden layer (convolutions and dense) has gain ``sqrt(2)``
    and the heads the components' gains (0.01 policy, 1.0 value), as SB3's ``CnnPolicy``.
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        output_size: OutputSize,
        layers: Sequence[tuple[int, int, int]] = NATURE_LAYERS,
        dense: Sequence[int] = (512,),
        activation: str = "relu",
        init: str = "orthogonal",
        output_gain: OutputGain = 1.0,
        seed: int = 0,
        name: str | None = None,
        precision: str = "float32",
    ) -> None:
        super().__init__(name=name)
        (h, w, c), rng = self._start(input_shape, activation, init, seed, precision)
        self.convs = []
        for i, (filters, kernel, stride) in enumerate(layers):
            self.convs.append(_conv(c, filters, kernel, stride, "VALID", init, rng, f"conv_{i}"))
            h, w, c = conv_out(h, kernel, stride, "VALID"), conv_out(w, kernel, stride, "VALID"), filters
            if h < 1 or w < 1:
                raise ValueError(f"conv layer {i} ({filters}x{kernel}/{stride}) leaves no pixels of {input_shape}")
        self.flat_size = h * w * c
        self._finish(self.flat_size, dense, output_heads(output_size, output_gain), init, rng)

    def torso(self, x: tf.Tensor) -> tf.Tensor:
        for conv in self.convs:
            x = self._activation(conv(x))
        return x


class ImpalaNet(_ImageNet):
    """The IMPALA ResNet: per stack a 3x3 conv, a 3x3/2 max-pool and two residual blocks
    (relu, conv, relu, conv, add), all SAME padding; then relu, flatten, dense layers, heads."""

    def __init__(
        self,
        input_shape: Sequence[int],
        output_size: OutputSize,
        channels: Sequence[int] = IMPALA_CHANNELS,
        dense: Sequence[int] = (256,),
        activation: str = "relu",
        init: str = "orthogonal",
        output_gain: OutputGain = 1.0,
        seed: int = 0,
        name: str | None = None,
        precision: str = "float32",
    ) -> None:
        super().__init__(name=name)
        (h, w, c), rng = self._start(input_shape, activation, init, seed, precision)
        self.stacks = []
        for i, ch in enumerate(channels):
            convs = [_conv(c, ch, 3, 1, "SAME", init, rng, f"stack_{i}_conv")]
            convs += [_conv(ch, ch, 3, 1, "SAME", init, rng, f"stack_{i}_res_{j}") for j in range(4)]
            self.stacks.append(convs)
            h, w, c = conv_out(h, 3, 2, "SAME"), conv_out(w, 3, 2, "SAME"), ch
        self.flat_size = h * w * c
        self._finish(self.flat_size, dense, output_heads(output_size, output_gain), init, rng)

    def torso(self, x: tf.Tensor) -> tf.Tensor:
        act = self._activation
        for first, *res in self.stacks:
            x = tf.nn.max_pool2d(first(x), 3, 2, "SAME")
            for a, b in (res[0:2], res[2:4]):
                x = x + b(act(a(act(x))))
        return act(x)


def has_convolutions(module: tf.Module) -> bool:
    """Does ``module`` hold an image network? Learners then compile their update without XLA
    by default: XLA's CPU convolutions compiled a Nature-CNN PPO update in minutes and ran it
    slower than TensorFlow's own kernels (oneDNN), which take seconds."""
    return any(isinstance(m, _ImageNet) for m in (module, *module.submodules))


def build_image_network(
    config: Mapping[str, Any],
    input_shape: Sequence[int],
    output_size: OutputSize,
    output_gain: OutputGain,
    seed: int,
    name: str | None,
) -> tf.Module:
    """A ``kind: cnn`` or ``kind: impala`` network from its spec entry (see docs/language.md)."""
    common = dict(
        activation=config.get("activation", "relu"),
        init=config.get("init", "orthogonal"),
        precision=config.get("precision", "float32"),
    )
    if config["kind"] == "cnn":
        layers = tuple((int(d["filters"]), int(d["kernel"]), int(d["stride"])) for d in config.get("layers", ()))
        layers = layers or NATURE_LAYERS
        dense = config.get("hidden", (512,))
        return ConvNet(input_shape, output_size, layers, dense, output_gain=output_gain, seed=seed, name=name, **common)
    channels = tuple(config.get("channels", IMPALA_CHANNELS))
    dense = config.get("hidden", (256,))
    return ImpalaNet(input_shape, output_size, channels, dense, output_gain=output_gain, seed=seed, name=name, **common)
