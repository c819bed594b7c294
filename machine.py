"""This machine, as what rlgen keeps across runs is keyed by: the cache directory, the CPU, and
installed versions. Light on purpose (no numpy, no TensorFlow): a rank reads it before
TensorFlow's import (:mod:`rlgen.runtime.tfimport`)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def local_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cores_per_rank(cores: int, ranks: int) -> int:
    """The intra-op threads a rank whose update is heavy takes: its host's ``cores`` shared
    among the ``ranks`` it runs, at least one (the other ranks run one thread each)."""
    return max(1, cores // max(1, ranks))


def cache_dir() -> Path:
    """``$RLGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/rlgen``, else ``~/.cache/rlgen``."""
    if os.environ.get("RLGEN_CACHE_DIR"):
        return Path(os.environ["RLGEN_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlgen"


def version(dist: str) -> str:
    """The installed version of distribution ``dist`` ('' when it is not installed)."""
    from importlib import metadata  # 30 ms to import: only where a version is asked for

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def tensorflow_version() -> str:
    return version("tensorflow") or version("tensorflow-cpu")


def cpu() -> tuple[str, str]:
    """The CPU's model name and its feature flags, from ``/proc/cpuinfo`` ('' where unknown)."""
    model = flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = value.strip()
    return model, flags


def gpu_obstacles() -> list[str]:
    """Why this machine plainly cannot serve a GPU to TensorFlow ([] when nothing says so),
    read without importing TensorFlow: the CPU-only distribution installed, no NVIDIA device
    node, ``CUDA_VISIBLE_DEVICES`` hiding every GPU. ``rlgen validate`` warns with these; a
    cluster's hosts may differ from the machine that validates."""
    out = []
    if version("tensorflow-cpu") and not version("tensorflow"):
        out.append(f"the installed TensorFlow is the CPU-only build (tensorflow-cpu {version('tensorflow-cpu')})")
    if not nvidia_devices():
        out.append("this machine has no NVIDIA device (no /dev/nvidia0)")
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1"):
        out.append(f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU")
    return out


#: ``RLGEN_FAKE_GPU=1``: a second logical CPU device stands in for a GPU (rlgen.runtime.devices).
FAKE_GPU_ENV = "RLGEN_FAKE_GPU"


def gpu_visible() -> bool:
    """Whether a rank started here that asks for ``auto`` would get a GPU, read without
    importing TensorFlow: an NVIDIA device with no obstacle (:func:`gpu_obstacles`), or
    ``RLGEN_FAKE_GPU=1``, whose stand-in counts as a GPU."""
    return os.environ.get(FAKE_GPU_ENV) == "1" or (bool(nvidia_devices()) and not gpu_obstacles())


def nvidia_devices() -> list[str]:
    """The NVIDIA GPU device nodes (``/dev/nvidia0``, …) of this machine."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia[0-9]*"))


def gpu_models() -> list[str]:
    """The NVIDIA GPUs' model names, from the driver's ``/proc`` files ([] without one): what
    the XLA cache and the remembered speeds are keyed by besides the CPU."""
    models = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        with contextlib.suppress(OSError):
            for line in info.read_text().splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "Model":
                    models.append(value.strip())
    return models
