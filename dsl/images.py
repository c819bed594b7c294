"""Image observations as the convolutional networks read them: layout and feature-map sizes.

TensorFlow-free, so ``validate`` checks an image network against the env's observation
before launch with the same arithmetic the runtime's networks use (rlgen.runtime.convnets).
"""

from __future__ import annotations

from collections.abc import Sequence


def image_layout(shape: Sequence[int]) -> tuple[bool, tuple[int, int, int]] | None:
    """``(channels_first, (height, width, channels))`` of an image observation, or None if
    ``shape`` is not an image. A rank-3 shape whose first axis is shorter than its last is
    channels-first (``[4, 84, 84]`` from a frame stack or envpool); otherwise it is
    channels-last (``[84, 84, 4]``, ``[210, 160, 3]``); a rank-2 shape is one grey channel."""
    shape = tuple(int(d) for d in shape)
    if len(shape) == 2:
        return False, (shape[0], shape[1], 1)
    if len(shape) != 3:
        return None
    if shape[0] < shape[-1]:
        return True, (shape[1], shape[2], shape[0])
    return False, (shape[0], shape[1], shape[2])


def conv_out(size: int, kernel: int, stride: int, padding: str) -> int:
    """One side of a convolution's or pooling's output (``"VALID"`` or ``"SAME"`` padding)."""
    return -(-size // stride) if padding == "SAME" else (size - kernel) // stride + 1


def cnn_sizes(hw: tuple[int, int], layers: Sequence[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """``(height, width)`` after each VALID convolution ``(filters, kernel, stride)``."""
    h, w = hw
    out = []
    for _, kernel, stride in layers:
        h, w = conv_out(h, kernel, stride, "VALID"), conv_out(w, kernel, stride, "VALID")
        out.append((h, w))
    return out
