"""The sizes of a spec's networks and the weights that cross a cut, derived from the spec and
the env's spaces (the passes put them into transfers, the lowering into fragments)."""

from __future__ import annotations

import math

from rlgen.codegen.context import Context
from rlgen.codegen.ir import Tensor
from rlgen.dsl.dataflow import analyze
from rlgen.dsl.images import conv_out, image_layout


def _dense(sizes: list[int]) -> int:
    return sum(i * o + o for i, o in zip(sizes[:-1], sizes[1:], strict=True))


def image_network_size(net, obs_shape, output_size: int) -> int | None:
    """Number of parameters of a ``cnn`` or ``impala`` network on ``obs_shape`` images."""
    layout = image_layout(obs_shape)
    if layout is None:
        return None
    h, w, c = layout[1]
    total = 0
    if net.kind == "cnn":
        for d in net.layers:
            total += d["kernel"] ** 2 * c * d["filters"] + d["filters"]
            k, s = d["kernel"], d["stride"]
            h, w, c = conv_out(h, k, s, "VALID"), conv_out(w, k, s, "VALID"), d["filters"]
    else:
        for ch in net.channels:  # a conv, then two residual blocks of two convs
            total += 9 * c * ch + ch + 4 * (9 * ch * ch + ch)
            h, w, c = conv_out(h, 3, 2, "SAME"), conv_out(w, 3, 2, "SAME"), ch
    return total + _dense([h * w * c, *net.hidden, output_size])


def network_size(ctx: Context, network: str, output_size: int) -> int | None:
    """Number of parameters of an MLP or image network (None for a custom one: known only at run time)."""
    net = ctx.spec.networks[network]
    if net.image:
        return image_network_size(net, ctx.spaces.observation.shape, output_size)
    if net.kind != "mlp":
        return None
    inputs = ctx.spaces.state if network in state_networks(ctx) else ctx.spaces.observation.shape
    sizes = [math.prod(inputs), *net.hidden, output_size]
    norms = 2 * sum(sizes[:-1]) if net.layer_norm else 0  # a scale and a shift per normalised feature
    size = sum(i * o + o for i, o in zip(sizes[:-1], sizes[1:], strict=True)) + norms
    if net.recurrent:  # a GRU (3 gates, input and recurrent weights and biases) before the heads
        h, before = int(net.recurrent["size"]), sizes[-2]
        size += 3 * (before * h + h * h + 2 * h) + (2 * h if net.recurrent.get("layer_norm", True) else 0)
        size += (h - before) * output_size  # the heads read the GRU's h units
    env = ctx.spec.env
    return size * ctx.spaces.rows if env.multi_agent and not env.share else size  # one network per agent


def state_networks(ctx: Context) -> frozenset[str]:
    """Networks of value components called on the env's global state (a centralised critic):
    a value of type ``state`` (an output of ``env.reset()`` / ``env.step()``, or carried from one)."""
    if not ctx.spec.env.state:
        return frozenset()
    flow = analyze(ctx.spec)
    states = {name for name, v in flow.values.items() if v.type == "state"}
    calls = [lc.call for block in ctx.spec.loop.all_blocks() for lc in block.calls]
    return frozenset(
        ctx.spec.components[c.component].get("network")
        for c in calls
        if c.component in ctx.spec.components
        and ctx.spec.components[c.component].kind == "value"
        and c.args
        and c.args[0].text in states
    )


#: Output-layer init gain of each head kind (Stable-Baselines3: 0.01 policy, 1.0 value and Q heads).
HEAD_GAIN = {"policy": 0.01, "value": 1.0, "qvalue": 1.0}


def network_heads(ctx: Context, network: str) -> list[tuple[str, int, float]]:
    """``(component, outputs, init gain)`` of each component reading ``network``, in spec
    order: a network shared by a policy and a value has two heads on one torso."""
    act = ctx.spaces.action
    heads = []
    for name in ctx.spec.readers(network):
        comp = ctx.spec.components[name]
        size = 1 if comp.kind == "value" else (act.n if act.kind == "discrete" else math.prod(act.shape))
        if comp.get("distribution") == "squashed_gaussian" and comp.get("gsde") is None:
            size *= 2  # means, then state-dependent log standard deviations (gSDE: means only)
        heads.append((name, size, HEAD_GAIN[comp.kind]))
    return heads


def component_weights(ctx: Context, component: str) -> tuple[Tensor, ...]:
    """The variables of a policy / value / qvalue component, one flat tensor per network."""
    comp = ctx.spec.components[component]
    act = ctx.spaces.action
    out_size = sum(size for _, size, _ in network_heads(ctx, comp.get("network")))
    parts = [Tensor(comp.get("network"), "float32", (network_size(ctx, comp.get("network"), out_size),))]
    if comp.kind == "policy" and act.kind == "box" and comp.get("distribution") in ("auto", "gaussian"):
        parts.append(Tensor(f"{component}_log_std", "float32", (math.prod(act.shape),)))
    elif comp.kind == "policy" and comp.get("gsde") is not None:  # a [features, actions] matrix
        net = ctx.spec.networks[comp.get("network")]
        features = net.hidden[-1] if net.hidden else math.prod(ctx.spaces.observation.shape)
        parts.append(Tensor(f"{component}_log_std", "float32", (features * math.prod(act.shape),)))
    return tuple(parts)


def weights_of(ctx: Context, components) -> tuple[Tensor, ...]:
    seen: dict[str, Tensor] = {}
    for name in components:
        comp = ctx.spec.components[name]
        if comp.kind in ("policy", "value", "qvalue"):
            for t in component_weights(ctx, name):
                seen.setdefault(t.name, t)
    return tuple(seen.values())
