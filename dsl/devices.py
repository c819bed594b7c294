"""``deploy.devices``: where the compute fragments run, named by side of the loop.

A spec names devices by *side*, not by rank or role, so that it survives ``--policy``
changes (and ``auto``): the same ``{learner: gpu, actors: cpu}`` means something under every
policy.

* ``learner``: every compute fragment that learns. Under ``single`` and ``multi-learner``
  the one compute fragment both acts and learns: it is placed where ``learner`` says.
* ``actors``: compute fragments that only act (the actors of ``actors-learner`` and
  ``async-actors``); policies without such fragments have nothing on this side.

Host fragments (env workers, numpy buffers, replay) always run on the CPU; so do the
evaluator and the exported policy.

Values: ``cpu``; ``gpu`` (the rank's own GPU, chosen by its local rank on its host);
``gpu:N`` (GPU ``N`` of the host); ``auto`` (a GPU if the rank sees one when it starts,
else the CPU). ``devices: gpu`` (a string) means every side.
"""

from __future__ import annotations

import re
from typing import Any

#: The sides ``deploy.devices`` names, in report order.
SIDES = ("learner", "actors")
#: The role side (rlgen.codegen.policies.base.Role.side) → the devices side of its compute fragment.
SIDE_OF_ROLE = {"learning": "learner", "both": "learner", "acting": "actors"}
#: A device value: ``cpu``, ``gpu``, ``gpu:N`` or ``auto``.
DEVICE = re.compile(r"(cpu|gpu|gpu:(0|[1-9][0-9]{0,2})|auto)\Z")
CPU = "cpu"


def is_device(value: Any) -> bool:
    return isinstance(value, str) and DEVICE.match(value) is not None


def wants_gpu(value: str | None) -> bool:
    """An explicit GPU request (``gpu`` or ``gpu:N``; ``auto`` falls back, ``cpu`` never asks)."""
    return value is not None and value.startswith("gpu")


def by_side(devices: str | tuple[tuple[str, str], ...] | dict[str, str] | None) -> dict[str, str] | None:
    """``deploy.devices`` as side → value for every side (unnamed sides: ``cpu``); None when
    the spec names no devices (every fragment on the CPU, builds as before)."""
    if devices is None:
        return None
    if isinstance(devices, str):
        return dict.fromkeys(SIDES, devices)
    given = dict(devices)
    return {side: given.get(side, CPU) for side in SIDES}


def merge(file_value: Any, flag_value: str | dict[str, str]) -> Any:
    """The file's ``deploy.devices`` with a ``--devices`` override written in: a string
    replaces it; a mapping replaces the sides it names (a string in the file stands for every
    side)."""
    if isinstance(flag_value, str):
        return flag_value
    if isinstance(file_value, str):
        base: dict[str, Any] = dict.fromkeys(SIDES, file_value)
    elif isinstance(file_value, dict):
        base = dict(file_value)
    else:
        base = {}
    return {**base, **flag_value}


def parse_flag(text: str) -> str | dict[str, str]:
    """``--devices gpu`` or ``--devices learner=gpu,actors=cpu`` → the value to write into
    ``deploy.devices`` (checked afterwards like a value in the file). Raises ``ValueError``
    for text that is neither."""
    text = text.strip()
    if "=" not in text:
        if not text:
            raise ValueError("give a device (cpu, gpu, gpu:N, auto) or SIDE=DEVICE pairs")
        return text
    out: dict[str, str] = {}
    for part in text.split(","):
        side, eq, value = part.partition("=")
        if not eq or not side.strip() or not value.strip():
            raise ValueError(f"'{part}' is not SIDE=DEVICE (e.g. learner=gpu,actors=cpu)")
        out[side.strip()] = value.strip()
    return out


def flag_text(value: str | dict[str, str]) -> str:
    """A ``--devices`` value as written on a command line."""
    return value if isinstance(value, str) else ",".join(f"{k}={v}" for k, v in value.items())


# --- placements: what --policy auto compares and what the remembered speeds are kept by ---
def placement(devices: Any, gpu: bool) -> str:
    """Where a run's compute fragments go, as ``--policy auto`` and the remembered speeds name
    it: the sides not on the CPU as ``SIDE=DEVICE`` text, '' when every side is on the CPU
    (or the spec names no devices); ``auto`` is read as ``gpu`` where this machine can serve
    one (``gpu``: :func:`rlgen.machine.gpu_visible`), else as ``cpu``."""
    sides = by_side(devices) or {}
    resolved = {side: ("gpu" if gpu else CPU) if value == "auto" else value for side, value in sides.items()}
    return flag_text({side: value for side, value in resolved.items() if value != CPU})


def auto_placements(devices: Any, gpu: bool) -> list[str]:
    """The placements ``--policy auto`` compares, the one its profile runs under first: the
    spec's own alone, unless a side is ``auto`` and this machine can serve a GPU; then the
    ``auto`` sides on the CPU, and on the GPU."""
    sides = by_side(devices) or {}
    if not gpu or "auto" not in sides.values():
        return [placement(devices, gpu)]
    on_cpu = {side: CPU if value == "auto" else value for side, value in sides.items()}
    return [placement(on_cpu, gpu), placement(sides, gpu)]


def pinned(place: str) -> dict[str, str]:
    """A :func:`placement` as the ``--devices`` value that names every side."""
    return {**dict.fromkeys(SIDES, CPU), **(parse_flag(place) if place else {})}
