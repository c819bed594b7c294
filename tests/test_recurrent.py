"""The GRU layer and the recurrent MLP (runtime/recurrent.py): PyTorch's GRU equations, a
sequence unrolled at once equal to the same steps one by one, episode starts zeroing exactly
their rows' states. (Checked once against ``torch.nn.GRU`` with ported weights: largest
difference 1.2e-7; torch is not a dependency, so the test holds a NumPy transcription.)"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rlgen.runtime.recurrent import GRU, RecurrentMLP  # noqa: E402


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def torch_gru_step(x, h, w_ih, w_hh, b_ih, b_hh):
    """``torch.nn.GRU``'s documented equations, with its ``[3H, in]`` weights."""
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    size = h.shape[-1]
    r = sigmoid(gi[:, :size] + gh[:, :size])
    z = sigmoid(gi[:, size : 2 * size] + gh[:, size : 2 * size])
    n = np.tanh(gi[:, 2 * size :] + r * gh[:, 2 * size :])
    return (1 - z) * n + z * h


def gru_with_biases(seed: int = 0) -> GRU:
    rng = np.random.default_rng(seed)
    gru = GRU(5, 4, rng)
    gru.b_x.assign(rng.standard_normal(12).astype(np.float32))  # biases are zeros at first: test them too
    gru.b_h.assign(rng.standard_normal(12).astype(np.float32))
    return gru


def test_a_step_is_pytorchs_gru():
    gru = gru_with_biases()
    rng = np.random.default_rng(1)
    x, h = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    want = torch_gru_step(x, h, gru.w_x.numpy().T, gru.w_h.numpy().T, gru.b_x.numpy(), gru.b_h.numpy())
    np.testing.assert_allclose(gru.step(tf.constant(x), tf.constant(h)).numpy(), want, atol=1e-6)


def test_initial_weights_are_orthogonal_and_biases_zero():
    gru = GRU(6, 4, np.random.default_rng(2))
    w_h = gru.w_h.numpy()  # [4, 12]: orthonormal rows
    np.testing.assert_allclose(w_h @ w_h.T, np.eye(4), atol=1e-5)
    w_x = gru.w_x.numpy()  # [6, 12]: orthonormal rows
    np.testing.assert_allclose(w_x @ w_x.T, np.eye(6), atol=1e-5)
    assert not gru.b_x.numpy().any() and not gru.b_h.numpy().any()


def test_an_unrolled_sequence_is_its_steps_one_by_one_and_first_zeroes_its_rows():
    gru = gru_with_biases(3)
    rng = np.random.default_rng(4)
    steps, seqs = 6, 3
    x = rng.standard_normal((steps, seqs, 5)).astype(np.float32)
    h0 = rng.standard_normal((seqs, 4)).astype(np.float32)
    first = np.zeros((steps, seqs), bool)
    first[0, 1] = first[3, 0] = first[5, 2] = True
    states, last = gru.unroll(tf.constant(x), tf.constant(h0), tf.constant(first))
    h = h0
    for t in range(steps):
        h = np.where(first[t][:, None], 0.0, h)
        h = torch_gru_step(x[t], h, gru.w_x.numpy().T, gru.w_h.numpy().T, gru.b_x.numpy(), gru.b_h.numpy())
        np.testing.assert_allclose(states[t].numpy(), h, atol=1e-5)
    np.testing.assert_allclose(last.numpy(), h, atol=1e-5)
    # a row that starts an episode forgets what came before it: any h0 gives the same states there
    again, _ = gru.unroll(tf.constant(x), tf.constant(h0 + 5.0), tf.constant(first))
    np.testing.assert_allclose(again[:, 1].numpy(), states[:, 1].numpy(), atol=1e-6)
    assert not np.allclose(again[:3, 0].numpy(), states[:3, 0].numpy())  # row 0 starts at step 3 only
    np.testing.assert_allclose(again[3:, 0].numpy(), states[3:, 0].numpy(), atol=1e-6)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_recurrent_mlp_unroll_is_its_steps(layer_norm):
    net = RecurrentMLP((3, 2), [8, 8], 6, (5, 1), output_gain=(0.01, 1.0), seed=7, layer_norm=layer_norm)
    assert net.output_size == 6 and net.state_size == 6 and net.head_slices == ((0, 5), (5, 6))
    rng = np.random.default_rng(5)
    steps, seqs = 4, 5
    x = rng.standard_normal((steps, seqs, 3, 2)).astype(np.float32)
    first = rng.random((steps, seqs)) < 0.3
    out, last = net.unroll(tf.constant(x), net.initial_state(seqs), tf.constant(first))
    assert out.shape == (steps, seqs, 6)
    h = net.initial_state(seqs)
    for t in range(steps):
        o, h = net.step(tf.constant(x[t]), h, tf.constant(first[t]))
        np.testing.assert_allclose(out[t].numpy(), o.numpy(), atol=1e-5)
    np.testing.assert_allclose(last.numpy(), h.numpy(), atol=1e-5)


def test_recurrent_mlp_is_seeded_and_its_state_matters():
    a = RecurrentMLP((4,), [8], 3, 2, seed=1)
    b = RecurrentMLP((4,), [8], 3, 2, seed=1)
    c = RecurrentMLP((4,), [8], 3, 2, seed=2)
    for va, vb in zip(a.trainable_variables, b.trainable_variables, strict=True):
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    assert not np.array_equal(a.gru.w_h.numpy(), c.gru.w_h.numpy())
    x = tf.constant(np.ones((2, 4), np.float32))
    out0, h1 = a.step(x, a.initial_state(2))
    out1, _ = a.step(x, h1)
    assert not np.allclose(out0.numpy(), out1.numpy())  # the same input, another state
    out_first, _ = a.step(x, h1, tf.constant([True, False]))
    np.testing.assert_allclose(out_first[0].numpy(), out0[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(out_first[1].numpy(), out1[1].numpy(), atol=1e-6)
