"""Image networks (kind: cnn, impala): shapes, the uint8 -> [0, 1] scaling inside the graph, shared
torsos, and the parameter counts the build writes into the plan."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ROOT

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


@pytest.mark.parametrize("kind", ["cnn", "impala"])
def test_bfloat16_computes_the_torso_in_bfloat16_and_keeps_weights_gradients_and_heads_float32(kind):
    frames = np.random.default_rng(2).integers(0, 256, (4, 4, 84, 84), dtype=np.uint8)
    full, mixed = _net(kind, (4, 84, 84)), _net(kind, (4, 84, 84), precision="bfloat16")
    for a, b in zip(full.trainable_variables, mixed.trainable_variables, strict=True):
        assert b.dtype == tf.float32
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # the same initial weights
    graph = tf.function(mixed.features).get_concrete_function(tf.TensorSpec([None, 4, 84, 84], tf.uint8)).graph
    convs = [op for op in graph.get_operations() if op.type == "Conv2D"]
    assert convs and all(op.outputs[0].dtype == tf.bfloat16 for op in convs)
    with tf.GradientTape(persistent=True) as tape:
        want, got = full(frames), mixed(frames)
        loss, reference_loss = tf.reduce_sum(tf.square(got)), tf.reduce_sum(tf.square(want))
    assert got.dtype == tf.float32
    # bfloat16 keeps 8 significant bits: the features the heads read agree to about 1% of their
    # scale (0.9% for the Nature CNN, 1.2% for the deeper IMPALA ResNet, 64 frames), not exactly
    want_features, got_features = full.features(frames).numpy(), mixed.features(frames).numpy()
    assert 0 < float(np.abs(got_features - want_features).max()) < 0.03 * float(np.abs(want_features).max())
    grads = tape.gradient(loss, mixed.trainable_variables)
    assert all(g is not None and g.dtype == tf.float32 for g in grads)
    reference = tape.gradient(reference_loss, full.trainable_variables)
    cosine = [float(tf.reduce_sum(g * r) / (tf.norm(g) * tf.norm(r))) for g, r in zip(grads, reference, strict=True)]
    assert min(cosine) > 0.95, cosine  # the same direction, each layer


def test_precision_is_written_only_when_set_and_refused_on_an_mlp_with_its_line():
    from rlgen.dsl.resolved import resolved
    from rlgen.dsl.validate import validate_text

    def networks(text):
        result = validate_text(text, "spec.rl.yaml")
        assert result.ok, [d.message for d in result.diagnostics]
        return resolved(result.spec)["networks"]

    examples = ROOT / "examples"
    breakout = (examples / "ppo-breakout.rl.yaml").read_text()
    assert "precision" not in networks(breakout)["torso"]  # builds without it keep their bytes
    mixed = breakout.replace("torso: {kind: cnn}", "torso: {kind: cnn, precision: bfloat16}")
    assert networks(mixed)["torso"]["precision"] == "bfloat16"
    cartpole = (examples / "ppo-cartpole.rl.yaml").read_text()
    bad = cartpole.replace("pi: {kind: mlp,", "pi: {kind: mlp, precision: bfloat16,")
    result = validate_text(bad, "spec.rl.yaml")
    (error,) = [d for d in result.diagnostics if "precision" in d.message]
    assert not result.ok and error.line == 16
