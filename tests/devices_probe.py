"""Run in a fresh process by tests/test_devices.py (logical devices must be set before
TensorFlow initialises): place a built fragment and report where its variables and outputs are.

    python tests/devices_probe.py BUILD_DIR PACKAGE REQUEST   # prints one JSON line
"""

from __future__ import annotations

import importlib
import json
import sys

import numpy as np


def main(build: str, package: str, request: str) -> None:
    from rlgen.runtime import devices
    from rlgen.runtime.tfutil import flat_caller

    placed = devices.setup(None if request == "none" else request, rank=0, local_rank=0)
    import tensorflow as tf

    sys.path.insert(0, build)
    agent = importlib.import_module(f"{package}.agent")
    frag = agent.AgentFragment(0, 0)
    steps = {
        name: getattr(frag, name) for name in type(frag).__dict__ if hasattr(getattr(frag, name), "input_signature")
    }
    outputs = {}
    for name, step in steps.items():
        args = [tf.zeros(s.shape, s.dtype) for s in step.input_signature]
        if name == "init_env_reset":
            continue
        outputs[name] = sorted({t.device for t in flat_caller(step.function, step.device)(*args)})
        if name == "iteration":
            # and once through the numpy path the session uses
            step(*[np.zeros(s.shape, s.dtype.as_numpy_dtype) for s in step.input_signature])
    concrete = next(iter(steps.values())).get_concrete_function()
    print(
        json.dumps(
            {
                "placed": placed.record(),
                "logical_gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
                "logical_cpus": [d.name for d in tf.config.list_logical_devices("CPU")],
                "variables": {v.name: v.device for v in frag.variables},
                "int32": sorted(v.name for v in frag.variables if v.dtype == tf.int32),
                "step_devices": {name: s.device for name, s in steps.items()},
                "outputs": outputs,
                "captured": sorted({t.device for t in concrete.captured_inputs if hasattr(t, "device")}),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
