"""Where a rank's compute fragments run: set up once per rank, before TensorFlow initialises.

A build names, per role, what its compute fragment asks for (``deploy.devices``, see
:mod:`rlgen.dsl.devices`): ``cpu``, ``gpu``, ``gpu:N`` or ``auto``; a role asking for nothing
runs on the CPU. :func:`setup` runs in :func:`rlgen.runtime.rank.run_rank` before the first op:

* a rank not placed on a GPU hides every GPU (``tf.config.set_visible_devices([], "GPU")``),
  so a GPU machine behaves as a CPU one unless the spec asks otherwise (safe by default:
  TensorFlow would otherwise map nearly all of every GPU's memory in every rank);
* a rank placed on a GPU sees only its own: ``gpu`` is the host's GPU number *local rank*
  (modulo the GPUs there), ``gpu:N`` GPU ``N``; memory grows as needed, so ranks may share
  one; the fragment then runs on ``/device:GPU:0``;
* ``auto`` is a GPU where the rank sees one, else the CPU; an explicit ``gpu`` that sees
  none is refused at start (:class:`DeviceRefused`), never silently run on the CPU.

``RLGEN_FAKE_GPU=1`` is for checking placement on a machine without a GPU: the CPU is split
into two logical devices and a GPU request means the second (``/device:CPU:1``); ``run.json``
says so. Generated fragments ask :func:`device_of` for their device, build their variables
under one ``tf.device`` scope and bind it into each compiled step (rlgen.runtime.steps); the
evaluator and the exported policy stay on the CPU (:func:`cpu_only`, :func:`host_scope`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rlgen import machine

FAKE_ENV = machine.FAKE_GPU_ENV
CPU0 = "/device:CPU:0"
STAND_IN = "/device:CPU:1"  # what a GPU request means under RLGEN_FAKE_GPU=1


class DeviceRefused(RuntimeError):
    """A rank asked for a GPU that it cannot see (one line: rank, host, what TensorFlow sees, fixes)."""


@dataclass(frozen=True)
class Placement:
    """Where this rank's compute runs: ``request`` as the build says it (None: nothing asked),
    ``name`` the TensorFlow device, ``note`` what ``run.json`` adds (the GPU, or the stand-in)."""

    request: str | None
    name: str
    note: str = ""
    refusal: str | None = None

    @property
    def on_cpu0(self) -> bool:
        return self.name == CPU0

    def record(self) -> dict[str, str]:
        """This rank's entry of ``run.json``'s ``devices``."""
        out = {"device": self.name, "requested": self.request or "cpu"}
        return {**out, "note": self.note} if self.note else out


_PLACED: Placement | None = None
_CPU_ONLY = False


def fake() -> bool:
    return os.environ.get(FAKE_ENV) == "1"


def wants_gpu(request: str | None) -> bool:
    return request is not None and request != "cpu"


def setup(request: str | None, rank: int = 0, local_rank: int = 0, tf: Any = None) -> Placement:
    """Place this rank (before TensorFlow's first op); a refusal is kept in the placement
    and raised by :func:`check` once the rank can report it. ``tf``: TensorFlow (a stand-in
    in tests)."""
    if tf is None:
        import tensorflow as tf

    global _PLACED
    gpus = tf.config.list_physical_devices("GPU")
    if not wants_gpu(request):
        _hide(tf, gpus)
        _PLACED = Placement(request, CPU0)
    elif fake():
        _hide(tf, gpus)
        _split_cpu(tf)
        _PLACED = Placement(request, STAND_IN, f"{FAKE_ENV}=1: a second logical CPU device stands in for the GPU")
    else:
        _PLACED = _place_gpu(tf, request, gpus, rank, local_rank)
    return _PLACED


def _place_gpu(tf: Any, request: str, gpus: list, rank: int, local_rank: int) -> Placement:
    index = int(request.split(":", 1)[1]) if request.startswith("gpu:") else (local_rank % len(gpus) if gpus else 0)
    if not gpus or index >= len(gpus):
        if request == "auto":
            return Placement(request, CPU0, "auto: no GPU visible to this rank")
        return Placement(request, CPU0, refusal=refusal(rank, request, gpus))
    chosen = gpus[index]
    tf.config.experimental.set_memory_growth(chosen, True)  # ranks sharing a GPU each take what they use
    tf.config.set_visible_devices([chosen], "GPU")
    return Placement(request, "/device:GPU:0", f"{chosen.name} of {len(gpus)} on {socket.gethostname()}")


def refusal(rank: int, request: str, gpus: list) -> str:
    """The one line a rank that cannot serve its GPU request fails with."""
    seen = ", ".join(g.name for g in gpus) if gpus else "no GPU"
    why = "; ".join(machine.gpu_obstacles())
    return (
        f"rank {rank} on {socket.gethostname()} was placed on {request} but TensorFlow sees {seen}"
        f"{f' ({why})' if why else ''}; fix: install the GPU build and check `nvidia-smi` (docs/devices.md), "
        f"or place it elsewhere: --devices learner=cpu, or --devices auto (a GPU only where one is visible)"
    )


def check(placement: Placement) -> None:
    """Raise the placement's refusal, if any."""
    if placement.refusal:
        raise DeviceRefused(placement.refusal)


def _hide(tf: Any, gpus: list) -> None:
    if gpus:
        tf.config.set_visible_devices([], "GPU")


def _split_cpu(tf: Any) -> None:
    (cpu,) = tf.config.list_physical_devices("CPU")[:1]
    config = tf.config.get_logical_device_configuration(cpu) or []
    if len(config) < 2:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
        )


def device_of(request: str) -> str:
    """The TensorFlow device a fragment asking for ``request`` runs on in this process: the
    rank's placement (:func:`setup`), the CPU in the evaluator (:func:`cpu_only`); outside a
    rank (tests, tools) the stand-in under ``RLGEN_FAKE_GPU=1``, else GPU:0 if visible."""
    if _CPU_ONLY or not wants_gpu(request):
        return CPU0
    if _PLACED is not None and _PLACED.request == request:
        return _PLACED.name
    import tensorflow as tf

    if fake():
        return STAND_IN if len(tf.config.list_logical_devices("CPU")) > 1 else CPU0
    return "/device:GPU:0" if tf.config.list_logical_devices("GPU") else CPU0


def placed() -> Placement | None:
    return _PLACED


def cpu_only() -> None:
    """This process (the evaluator) runs every fragment on the CPU and sees no GPU."""
    global _CPU_ONLY
    _CPU_ONLY = True
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"


@contextlib.contextmanager
def host_scope() -> Iterator[None]:
    """Ops run on CPU:0 (the export), where this rank's fragments are placed elsewhere."""
    if _PLACED is None or _PLACED.on_cpu0:
        yield
        return
    import tensorflow as tf

    with tf.device(CPU0):
        yield


def reset() -> None:
    """Forget this process's placement (tests)."""
    global _PLACED, _CPU_ONLY
    _PLACED, _CPU_ONLY = None, False
