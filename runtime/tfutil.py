"""TensorFlow process settings (the one place a process's thread pools are set) and a
low-overhead way to call a compiled function.

Calling a ``tf.function`` from Python costs far more than the arithmetic of a small
network (about 0.5 ms with a tensor argument and 1 ms with a numpy one for a 64x64 MLP on a
2-core machine, docs/benchmarks.md): the polymorphic
dispatcher binds arguments and looks up the trace, the concrete function binds again,
and only then does the runtime run the graph. :func:`flat_caller` skips the two
Python binding layers for functions with a fixed ``input_signature``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework.ops import EagerTensor as _EagerTensor

FlatCall = Callable[..., Sequence[tf.Tensor]]


def configure_threads(inter_op: int = 1, intra_op: int = 1) -> dict[str, int]:
    """Set TensorFlow's thread pools, unless ``TF_NUM_INTEROP_THREADS`` /
    ``TF_NUM_INTRAOP_THREADS`` say otherwise; must run before TensorFlow executes any op.
    Returns the pools' sizes as set (``run.json`` records rank 0's); if the runtime is already
    initialised, it keeps its pools and their sizes are returned.

    For small networks a thread hand-off costs more than it saves (a fused 64x64 actor-critic
    call: 0.30 ms with the default pools, 0.10 ms with one thread each, on a 2-core machine;
    ``benchmarks/ppo_core.py``); a heavy update is given more
    (:meth:`rlgen.runtime.session.RunConfig.intra_op_threads`).
    """
    wanted = {
        "inter_op": int(os.environ.get("TF_NUM_INTEROP_THREADS") or inter_op),
        "intra_op": int(os.environ.get("TF_NUM_INTRAOP_THREADS") or intra_op),
    }
    try:
        if "TF_NUM_INTEROP_THREADS" not in os.environ:
            tf.config.threading.set_inter_op_parallelism_threads(inter_op)
        if "TF_NUM_INTRAOP_THREADS" not in os.environ:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    except RuntimeError:  # TensorFlow already initialised its pools: keep them
        wanted = {
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
        }
    return wanted


def flat_caller(fn: Any, device: str | None = None) -> FlatCall:
    """Return ``call(*tensors) -> list of output tensors`` for a ``tf.function``.

    ``fn`` must have an ``input_signature`` of plain tensors (so it has exactly one
    concrete function) and must not be called under a ``GradientTape``. Outputs come
    back flat, in ``tf.nest.flatten`` order of the function's return value. Input
    shapes and dtypes are not checked (:func:`numpy_caller` checks shapes).

    The fast path hands the inputs and the function's captured variables straight
    to the eager runtime (what ``ConcreteFunction.__call__`` ends up doing after its
    argument binding), which roughly halves the per-call cost on this machine. It
    uses TensorFlow internals; if they are missing, the public call is used.

    ``device`` (e.g. ``/device:GPU:0``) is bound into every call, as a ``tf.device`` scope
    around the call would place it but without the scope's cost per call (an XLA-compiled
    step runs on its call's device and must find its variables there); None: the caller's.
    """
    return concrete_caller(fn.get_concrete_function(), device)


def concrete_caller(concrete: Any, device: str | None = None) -> FlatCall:
    """:func:`flat_caller` for one concrete function (e.g. a restored SavedModel's, or one
    traced for a given input signature): the same fast path, the same outputs."""
    try:
        return _direct_caller(concrete) if device is None else _bound_caller(concrete, device)
    except (AttributeError, ImportError, TypeError):
        pass

    def call_public(*args: tf.Tensor) -> Sequence[tf.Tensor]:
        if device is None:
            return tf.nest.flatten(concrete(*args))
        with tf.device(device):
            return tf.nest.flatten(concrete(*args))

    return call_public


def _call_parts(concrete: Any) -> tuple[Any, str, int, tuple, list]:
    """What executing a concrete function's graph takes: the eager context, the function's
    name, its number of outputs, its call attributes and its captured inputs."""
    atomic = concrete._inference_function
    ctx = context.context()
    name = atomic.name
    name = name.decode() if isinstance(name, bytes) else str(name)
    num_outputs = len(atomic.function_type.flat_outputs)
    attrs = tuple(itertools.chain(*ctx.function_call_options.as_attrs().items()))
    return ctx, name, num_outputs, attrs, list(concrete.captured_inputs)


def _bound_caller(concrete: Any, device: str) -> FlatCall:
    """:func:`_direct_caller` with ``device`` bound: the runtime's execute with the device
    string given once (``quick_execute`` reads the context's device on every call)."""
    from tensorflow.python import pywrap_tfe
    from tensorflow.python.eager import core

    ctx, name, num_outputs, attrs, captures = _call_parts(concrete)
    execute = pywrap_tfe.TFE_Py_Execute

    def call_bound(*args: tf.Tensor) -> Sequence[tf.Tensor]:
        ctx.ensure_initialized()
        try:
            return execute(ctx._handle, device, name, [*args, *captures], attrs, num_outputs)
        except core._NotOkStatusException as e:
            raise core._status_to_exception(e) from None

    call_bound.concrete = concrete
    return call_bound


def _direct_caller(concrete: Any) -> FlatCall:
    from tensorflow.python.eager import execute

    ctx, name, num_outputs, attrs, captures = _call_parts(concrete)
    quick_execute = execute.quick_execute

    def call_direct(*args: tf.Tensor) -> Sequence[tf.Tensor]:
        return quick_execute(name, num_outputs, [*args, *captures], attrs, ctx)

    call_direct.concrete = concrete  # held: the runtime forgets the function once it is collected
    return call_direct


def numpy_caller(fn: Any, device: str | None = None) -> Callable[..., tuple[np.ndarray, ...]]:
    """``call(*arrays) -> tuple of NumPy arrays`` for a ``tf.function`` with an input signature.

    Converts each argument to its signature's dtype with :func:`to_tensor`, calls through
    :func:`flat_caller` and returns the flat outputs as NumPy arrays: the cheapest way
    to run a compiled step from host code once per env step (about 0.1 ms for a
    fused 64x64 actor-critic with ``jit_compile=True`` on this machine, against about
    0.4 ms for ``fn(numpy_obs)``). Works for methods decorated in a class body, too.
    ``device``: as :func:`flat_caller`'s.
    """
    specs = tf.nest.flatten(fn.get_concrete_function().structured_input_signature)
    dtypes = [spec.dtype for spec in specs]
    shapes = [tuple(spec.shape.as_list()) for spec in specs]
    call = flat_caller(fn, device)

    def call_numpy(*arrays: Any) -> tuple[np.ndarray, ...]:
        for array, want in zip(arrays, shapes, strict=True):
            if not _fits(np.shape(array), want):  # the fast path would not check
                raise ValueError(f"argument of shape {np.shape(array)} does not fit {want}")
        outputs = call(*(to_tensor(a, d) for a, d in zip(arrays, dtypes, strict=True)))
        return tuple(t.numpy() for t in outputs)

    return call_numpy


def assigner(variables: Sequence[tf.Variable]) -> Callable[[Sequence[np.ndarray]], None]:
    """``load(arrays)``: assign ``arrays`` to ``variables``, in order, in one compiled call.

    An eager ``assign`` costs about 0.1 ms per variable on this machine, so an actor
    that takes a dozen variables' new values every iteration spent about 2 ms on it;
    one call of a graph holding every assignment costs a fraction of that.
    """
    variables = list(variables)
    dtypes = [v.dtype for v in variables]

    @tf.function(input_signature=[tf.TensorSpec(v.shape, v.dtype) for v in variables], autograph=False)
    def assign_all(*values: tf.Tensor) -> None:
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)

    call = flat_caller(assign_all)

    def load(arrays: Sequence[np.ndarray]) -> None:
        call(*(to_tensor(a, d) for a, d in zip(arrays, dtypes, strict=True)))

    load.function = assign_all  # the runtime forgets the graph once the function is collected
    return load


def _fits(shape: tuple[int, ...], want: tuple[int | None, ...]) -> bool:
    return len(shape) == len(want) and all(w is None or w == d for d, w in zip(shape, want, strict=True))


def to_tensor(array: np.ndarray, dtype: tf.DType = tf.float32) -> tf.Tensor:
    """NumPy array to eager tensor: ``tf.constant`` without its Python-side checks."""
    try:
        return _EagerTensor(array, context.context().device_name, dtype.as_datatype_enum)
    except Exception:  # e.g. eager context not initialised yet: the public path does it
        return tf.constant(array, dtype)
