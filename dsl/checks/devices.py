"""``deploy.devices``: known sides, valid values, and whether this machine can serve a GPU."""

from __future__ import annotations

from collections.abc import Iterator

from rlgen import machine
from rlgen.dsl.checks.registry import Context, check
from rlgen.dsl.devices import SIDES, by_side, is_device, wants_gpu
from rlgen.dsl.diagnostics import did_you_mean
from rlgen.dsl.findings import Finding, error, warning

_PATH = ("deploy", "devices")
_VALUES = "cpu, gpu, gpu:N (a GPU of the host by index) or auto"


@check
def check_devices(ctx: Context) -> Iterator[Finding]:
    """Sides and values of ``deploy.devices``.

    ```yaml
    deploy: {policy: actors-learner, workers: 3, devices: {learners: gpu}}   # E611: unknown side
    deploy: {devices: tpu}                                                   # E609: not a device
    ```
    """
    devices = ctx.spec.deploy.devices
    if devices is None:
        return
    if isinstance(devices, str):
        if not is_device(devices):
            yield error("E609", _PATH, f"'{devices}' is not a device", f"write {_VALUES}")
        return
    for side, value in devices:
        if side not in SIDES:
            yield error(
                "E611",
                (*_PATH, side),
                f"unknown side '{side}'{did_you_mean(side, SIDES)}",
                "name sides, not roles, so the spec survives --policy: learner (every compute "
                "fragment that learns; under single and multi-learner the whole loop), actors "
                "(compute fragments that only act)",
                key=True,
            )
        elif not is_device(value):
            yield error("E609", (*_PATH, side), f"'{value}' is not a device for side '{side}'", f"write {_VALUES}")


@check
def check_gpu_here(ctx: Context) -> Iterator[Finding]:
    """A GPU asked for on a machine that plainly has none (a warning: the ranks may run
    elsewhere; the probes never import TensorFlow).

    ```yaml
    deploy: {devices: gpu}      # W610 with tensorflow-cpu installed, or no /dev/nvidia0
    ```
    """
    sides = by_side(ctx.spec.deploy.devices) or {}
    asked = [s for s, v in sides.items() if is_device(v) and wants_gpu(v)]
    if not asked:
        return
    obstacles = machine.gpu_obstacles()
    if obstacles:
        yield warning(
            "W610",
            _PATH,
            f"a GPU is asked for ({', '.join(asked)}), but on this machine {'; '.join(obstacles)}: a rank "
            "placed here would refuse to start",
            "install the GPU build (docs/devices.md), run on a GPU host, or place with "
            "--devices learner=cpu (or auto: a GPU where one is visible)",
        )
