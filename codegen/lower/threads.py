"""Which roles run an update heavy enough to use more than one CPU thread.

A rank runs TensorFlow with one inter-op and one intra-op thread
(:func:`rlgen.runtime.tfutil.configure_threads`): for the small networks and
minibatches of on-policy control, handing an op to a pool costs more than it saves. A
learner whose minibatch meets a wide layer is another matter: SAC's default update (256
rows through 256x256 layers, 16.8M multiply-adds per matmul) takes 20 ms a gradient step on
one core of this machine and 15 ms on two. So a role gets ``threaded`` when one of its
fragments updates a learner whose largest matmul reaches :data:`HEAVY_MACS`
multiply-adds, and each of its ranks then takes the cores of its host that no other rank
there needs (:meth:`rlgen.runtime.session.RunConfig.intra_op_threads`).

The estimate reads only the plan: the learner's minibatch rows (its config's ``minibatch``,
or the ``batch_size`` of the fragment's replay) times the largest ``in x out`` of the MLPs
the fragment builds (the critics a learner builds itself included). A custom network's
size is unknown and counts as small.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.plan import FragmentPlan
from rlgen.dsl.images import cnn_sizes, conv_out, image_layout

#: Multiply-adds of one matmul from which a second thread pays: half of SAC's default
#: (256 x 256 x 256), twice PPO's Zoo MuJoCo setting (64 x 256 x 256).
HEAVY_MACS = 1 << 23


def widest_layer(sizes: Sequence[int]) -> int:
    """The largest ``in x out`` of consecutive layer sizes."""
    return max((a * b for a, b in zip(sizes, sizes[1:], strict=False)), default=0)


def _mlp(config: dict[str, Any], inputs: int, outputs: int, obs_shape: Sequence[int] = ()) -> int:
    """The widest dense layer of an MLP, or of an image network's layers after its torso (a
    lower bound of its convolutions' work); 0 for a custom network."""
    kind = config.get("kind", "mlp")
    if kind == "mlp":
        return widest_layer([inputs, *config.get("hidden", ()), outputs])
    layout = image_layout(obs_shape) if kind in ("cnn", "impala") else None
    if layout is None:
        return 0
    (h, w, _), flat = layout[1], 0
    if kind == "cnn":
        layers = [(d["filters"], d["kernel"], d["stride"]) for d in config["layers"]]
        oh, ow = cnn_sizes((h, w), layers)[-1]
        flat = oh * ow * layers[-1][0]
    else:
        for _ in config["channels"]:
            h, w = conv_out(h, 3, 2, "SAME"), conv_out(w, 3, 2, "SAME")
        flat = h * w * config["channels"][-1]
    return widest_layer([flat, *config.get("hidden", ()), outputs])


def _outputs(size: int | Sequence[int]) -> int:
    return size if isinstance(size, int) else sum(size)


def update_macs(fragment: FragmentPlan) -> int:
    """The multiply-adds of the largest matmul in one gradient step of the fragment's
    learner (0 without a learner or a known minibatch)."""
    learners = [c for c in fragment.components if c.kind in ALGORITHMS]
    if not learners:
        return 0
    replay = [c.options.get("batch_size") for c in fragment.components if c.kind == "replay"]
    inputs = math.prod(fragment.obs_shape)
    widths = [_mlp(n.config, inputs, _outputs(n.output_size), fragment.obs_shape) for n in fragment.networks]
    heaviest = 0
    for learner in learners:
        rows = learner.options.get("config", {}).get("minibatch") or next((b for b in replay if b), 0)
        critic = learner.options.get("critic")
        own = [_mlp(critic["config"], int(critic["input_size"]), 1)] if isinstance(critic, dict) else []
        heaviest = max(heaviest, int(rows) * max([*widths, *own], default=0))
    return heaviest


def threaded_roles(fragments: Iterable[FragmentPlan]) -> tuple[str, ...]:
    """The roles (sorted) with a fragment whose update reaches :data:`HEAVY_MACS`."""
    return tuple(sorted({f.role for f in fragments if update_macs(f) >= HEAVY_MACS}))


__all__ = ["HEAVY_MACS", "threaded_roles", "update_macs", "widest_layer"]
