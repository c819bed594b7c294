"""Image networks (kind: cnn, impala): shapes, the uint8 -> [0, 1] scaling inside the graph, shared
torsos, and the parameter counts the build writes into the plan."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rlgen.dsl.images import image_layout  # noqa: E402
from rlgen.dsl.spec import IMAGE_NETWORKS, Network  # noqa: E402
from rlgen.runtime.networks import build_network  # noqa: E402


def _net(kind, shape, heads=(6, 1), gains=(0.01, 1.0), **config):
    return build_network({"kind": kind, **config}, shape, heads, gains, seed=3)


@pytest.mark.parametrize("shape", [(4, 84, 84), (84, 84, 4), (84, 84)])
def test_nature_cnn_shapes_and_size(shape):
    net = _net("cnn", shape)
    assert net.flat_size == 7 * 7 * 64  # 84 -> 20 -> 9 -> 7
    channels = image_layout(shape)[1][2]
    assert [tuple(c.w.shape) for c in net.convs] == [(8, 8, channels, 32), (4, 4, 32, 64), (3, 3, 64, 64)]
    out = net(np.zeros((5, *shape), np.uint8))
    assert out.shape == (5, 7) and net.head_slices == ((0, 6), (6, 7))


def test_impala_shapes():
    net = _net("impala", (4, 84, 84))
    assert net.flat_size == 11 * 11 * 32  # 84 -> 42 -> 21 -> 11
    assert net(np.zeros((2, 4, 84, 84), np.uint8)).shape == (2, 7)
    assert len(net.stacks) == 3 and all(len(s) == 5 for s in net.stacks)


@pytest.mark.parametrize("kind", ["cnn", "impala"])
def test_uint8_inputs_are_scaled_inside_the_graph(kind):
    net = _net(kind, (4, 84, 84))
    frames = np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    f = tf.function(net)
    got = f(tf.constant(frames)).numpy()
    np.testing.assert_allclose(got, net(frames.astype(np.float32) / 255.0).numpy(), rtol=1e-4, atol=1e-4)
    assert f.get_concrete_function(tf.TensorSpec([None, 4, 84, 84], tf.uint8)).inputs[0].dtype == tf.uint8


def test_channels_first_equals_channels_last():
    first, last = _net("cnn", (4, 84, 84)), _net("cnn", (84, 84, 4))
    frames = np.random.default_rng(1).integers(0, 256, (2, 4, 84, 84), dtype=np.uint8)
    np.testing.assert_allclose(first(frames).numpy(), last(frames.transpose(0, 2, 3, 1)).numpy(), atol=1e-5)


def test_layers_settable_and_heads_fused_like_an_mlp():
    layers = [{"filters": 8, "kernel": 4, "stride": 2}, {"filters": 16, "kernel": 3, "stride": 2}]
    net = _net("cnn", (1, 36, 36), heads=(3, 1), layers=layers, hidden=[32])
    assert net.flat_size == 8 * 8 * 16 and net.feature_size == 32 and tuple(net.head.w.shape) == (32, 4)
    np.testing.assert_allclose(np.linalg.norm(net.head.w.numpy()[:, :3], axis=0), 0.01, rtol=1e-4)


@pytest.mark.parametrize("kind", ["cnn", "impala"])
def test_plan_parameter_count_matches_the_network(kind):
    from rlgen.codegen.weights import image_network_size

    spec_net = Network(name="pi", kind=kind, **IMAGE_NETWORKS[kind])
    net = _net(kind, (4, 84, 84))
    built = sum(int(np.prod(v.shape)) for v in net.trainable_variables)
    assert image_network_size(spec_net, (4, 84, 84), 7) == built
