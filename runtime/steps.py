"""``@compiled``: how a generated fragment declares a compute step.

A step is a ``tf.function`` with a fixed input signature, one per fragment
instance. Host code (the generated rank loop) calls it with NumPy arrays and gets
NumPy arrays back through the fast path of :func:`rlgen.runtime.tfutil.numpy_caller`
(about 0.1 ms per call for a small fused actor-critic with XLA, against about 1 ms
for calling a ``tf.function`` with NumPy arguments): per-call overhead, not
arithmetic, bounds small-batch RL on a CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from .tfutil import numpy_caller


class BoundStep:
    """A compiled step of one fragment instance: ``step(*arrays)`` runs it."""

    def __init__(self, function: Any, single_output: bool, device: str | None = None) -> None:
        self.function = function  # the tf.function (traceable, as tests and exports need)
        self.input_signature = function.input_signature
        self.device = device  # bound into every call (None: the caller's, the CPU)
        self._call = None
        self._single = single_output

    def get_concrete_function(self, *args: Any) -> Any:
        return self.function.get_concrete_function(*args)

    def __call__(self, *arrays: Any) -> Any:
        if self._call is None:
            self._call = numpy_caller(self.function, self.device)
        out = self._call(*arrays)
        return out[0] if self._single else out


class compiled:  # noqa: N801  (used as a decorator)
    """Decorator: ``@compiled(input_signature=[...], jit_compile=True, outputs=2)``.

    ``outputs`` is how many values the step returns (1 returns the array itself).
    """

    def __init__(self, input_signature: Sequence[tf.TensorSpec], jit_compile: bool = False, outputs: int = 1) -> None:
        self.input_signature = list(input_signature)
        self.jit_compile = jit_compile
        self.outputs = outputs

    def __call__(self, method: Callable[..., Any]) -> _StepDescriptor:
        return _StepDescriptor(method, self)


class _StepDescriptor:
    def __init__(self, method: Callable[..., Any], options: compiled) -> None:
        self.method, self.options = method, options
        functools.update_wrapper(self, method)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        cache = instance.__dict__.setdefault("_compiled_steps", {})
        if self.name not in cache:
            fn = tf.function(
                functools.partial(self.method, instance),
                input_signature=self.options.input_signature,
                jit_compile=self.options.jit_compile,
                autograph=False,  # generated steps are straight-line code: faster tracing
            )
            # a placed fragment (``self.placed_on``, rlgen.runtime.devices) runs every step on
            # its device: the device is bound into the call, not a scope around each call
            cache[self.name] = BoundStep(fn, self.options.outputs == 1, instance.__dict__.get("placed_on"))
        return cache[self.name]


__all__ = ["BoundStep", "compiled"]
