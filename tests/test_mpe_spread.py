"""The in-graph simple_spread (runtime/mpe/tf_spread.py) against mpe2's own ``simple_spread_v3``.

Trajectories are compared step for step: the TF env is given mpe2's world after each of
mpe2's resets (its reset draws are its own), then both are stepped with the same random
actions across truncations and NEXT_STEP resets.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
mpe2_spread = pytest.importorskip("mpe2.simple_spread_v3")

from rlgen.runtime.mpe.tf_spread import TFSpread  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402

configure_threads(1, 1)


def world_state(par) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    world = par.unwrapped.world
    pos = np.stack([a.state.p_pos for a in world.agents])
    vel = np.stack([a.state.p_vel for a in world.agents])
    landmarks = np.stack([lm.state.p_pos for lm in world.landmarks])
    return pos, vel, landmarks


def crowd(par, rng: np.random.Generator) -> None:
    """Move mpe2's agents close together (collisions and contact forces from the first step)."""
    for agent in par.unwrapped.world.agents:
        agent.state.p_pos = rng.uniform(-0.25, 0.25, 2)


def mpe2_obs(par, obs: dict) -> np.ndarray:
    return np.stack([obs[a] for a in par.possible_agents])


@pytest.mark.parametrize(("n_agents", "local_ratio"), [(3, 0.5), (4, 0.25)])
def test_matches_mpe2(n_agents: int, local_ratio: float) -> None:
    """Lockstep with B mpe2 parallel envs over 3 episodes (25-step truncations, 2 reset steps)."""
    b, cycles, steps = 6, 25, 3 * 26 - 1
    kwargs = {"N": n_agents, "local_ratio": local_ratio, "max_cycles": cycles}
    refs = [mpe2_spread.parallel_env(**kwargs) for _ in range(b)]
    env = TFSpread(b, seed=3, **kwargs)
    assert env.obs_size == refs[0].observation_space("agent_0").shape[0]
    rng = np.random.default_rng(7)

    def reset_refs(episode: int) -> np.ndarray:
        obs = []
        for k, par in enumerate(refs):
            o, _ = par.reset(seed=100 * episode + k)
            if k % 2 == 0:  # half the copies start crowded
                crowd(par, rng)
                o = {a: par.unwrapped.observe(a) for a in par.possible_agents}
            obs.append(mpe2_obs(par, o))
        return np.concatenate(obs)

    def sync() -> None:
        env.set_state(env.pack_state(*(np.stack(x) for x in zip(*map(world_state, refs), strict=True))))

    def check_state_and_obs(g_obs: np.ndarray) -> None:
        np.testing.assert_allclose(env.observe().numpy(), g_obs, rtol=1e-5, atol=1e-5)
        g_state = np.stack([np.tile(par.state(), (n_agents, 1)) for par in refs]).reshape(b * n_agents, -1)
        np.testing.assert_allclose(env.global_state().numpy(), g_state, rtol=1e-5, atol=1e-5)

    env.reset()
    episode = 0
    g_obs = reset_refs(episode)
    sync()
    check_state_and_obs(g_obs)
    step = tf.function(env.step, jit_compile=True)
    prev_done = False
    returns, episodes, worst, collided = np.zeros(b * n_agents), [], 0.0, 0
    for _ in range(steps):
        action = rng.integers(0, 5, b * n_agents)
        obs, rew, term, trunc = (t.numpy() for t in step(tf.constant(action, tf.int32)))
        assert obs.shape == (b * n_agents, env.obs_size) and obs.dtype == np.float32
        assert rew.shape == term.shape == trunc.shape == (b * n_agents,) and rew.dtype == np.float32
        assert term.dtype == trunc.dtype == bool
        if prev_done:  # NEXT_STEP: the TF env reset itself; mpe2 is reset by hand, its world copied
            assert not (rew.any() or term.any() or trunc.any())
            assert not env.valid_rows().numpy().any()
            episode += 1
            g_obs = reset_refs(episode)
            sync()
            check_state_and_obs(g_obs)
            prev_done = False
            continue
        assert env.valid_rows().numpy().all()
        g_obs, g_rew, g_term, g_trunc = [], [], [], []
        for k, par in enumerate(refs):
            acts = {a: int(action[k * n_agents + i]) for i, a in enumerate(par.possible_agents)}
            o, r, te, tr, _ = par.step(acts)
            g_obs.append(mpe2_obs(par, o))
            g_rew += [r[a] for a in par.possible_agents]
            g_term += [te[a] for a in par.possible_agents]
            g_trunc += [tr[a] for a in par.possible_agents]
            pos = world_state(par)[0]
            dist = np.linalg.norm(pos[:, None] - pos[None], axis=-1) + np.eye(n_agents)
            collided += int((dist < 0.3).any())
        g_obs = np.concatenate(g_obs)
        np.testing.assert_array_equal(term, g_term)
        np.testing.assert_array_equal(trunc, g_trunc)
        np.testing.assert_allclose(rew, g_rew, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(obs, g_obs, rtol=1e-5, atol=1e-5)
        check_state_and_obs(g_obs)
        worst = max(worst, float(np.abs(obs - g_obs).max()))
        returns += np.asarray(g_rew)
        if trunc.all():
            episodes += [(float(r.mean()), cycles) for r in returns.reshape(b, n_agents)]
            returns[:] = 0.0
            prev_done = True
    print(f"N={n_agents}: worst obs difference {worst:.2e}, steps with a collision {collided}")
    assert collided > 20  # contact forces and collision penalties were exercised
    assert episode == 2 and len(episodes) == 3 * b
    got = env.drain_episodes()
    assert [length for _, length in got] == [length for _, length in episodes]
    np.testing.assert_allclose([r for r, _ in got], [r for r, _ in episodes], rtol=1e-5)
    assert int(env.env_steps.numpy()) == 3 * b * cycles


def hand_case(reward: str) -> tuple[np.ndarray, ...]:
    """One no-op step from agents at (0,0), (0.1,0), (1,1), landmarks at (0,0), (1,1), (-1,0), at rest.

    Positions move with the old (zero) velocities, so the rewards are those of the start:
    global = -(0 + 0 + 1) = -1; agents 0 and 1 collide once each, agent 2 not. The contact
    force on agent 0 is 1e2 * (-1, 0) * softplus(200) * 1e-3 = (-20, 0): velocity (-2, 0).
    """
    env = TFSpread(1, reward=reward)
    env.reset()
    env.set_state(env.pack_state([[[0, 0], [0.1, 0], [1, 1]]], np.zeros([1, 3, 2]), [[[0, 0], [1, 1], [-1, 0]]]))
    _, rew, _, _ = env.step(tf.zeros([3], tf.int32))
    return rew.numpy(), *(x.numpy()[0] for x in env.unpack_state(env.get_state()))


def test_reward_options_by_hand() -> None:
    rew, pos, vel, _ = hand_case("mpe2")
    np.testing.assert_allclose(rew, [-1.0, -1.0, -0.5], rtol=1e-6)  # local * 0.5 + global * 0.5
    np.testing.assert_allclose(pos, [[0, 0], [0.1, 0], [1, 1]], atol=1e-12)
    np.testing.assert_allclose(vel, [[-2, 0], [2, 0], [0, 0]], atol=1e-9)
    rew, *_ = hand_case("reference")
    # reference: r_i = global + local_i - 1 (self-collision): -3, -3, -2; all receive the sum
    np.testing.assert_allclose(rew, [-8.0] * 3, rtol=1e-6)
    env = TFSpread(2, local_ratio=1.0)
    env.reset()
    env.set_state(
        env.pack_state([[[0, 0], [0.1, 0], [1, 1]]] * 2, np.zeros([2, 3, 2]), [[[0, 0], [1, 1], [-1, 0]]] * 2)
    )
    np.testing.assert_allclose(env.step(tf.zeros([6], tf.int32))[1].numpy(), [-1, -1, 0] * 2)
    with pytest.raises(ValueError, match="reward"):
        TFSpread(2, reward="team")
    with pytest.raises(ValueError, match="local_ratio"):
        TFSpread(2, local_ratio=1.5)


def test_reset_distributions() -> None:
    for reward, bound in (("mpe2", 1.0), ("reference", 0.8)):
        env = TFSpread(4096, reward=reward, seed=1)
        env.reset()
        pos, vel, landmarks = (x.numpy() for x in env.unpack_state(env.get_state()))
        assert not vel.any()
        for x, high in ((pos, 1.0), (landmarks, bound)):
            assert np.abs(x).max() < high and np.abs(x).max() > 0.99 * high
            assert abs(x.mean()) < 0.02


def test_spaces_autoreset_and_episodes() -> None:
    """Shapes, spaces, actions ignored on the reset step, team returns, a jit-compiled rollout loop."""
    b, n, cycles = 5, 3, 4
    envs = [TFSpread(b, N=n, max_cycles=cycles, seed=2) for _ in range(2)]
    ref = mpe2_spread.parallel_env(N=n)
    env = envs[0]
    assert env.single_observation_space == ref.observation_space("agent_0")
    assert env.single_action_space == ref.action_space("agent_0")
    assert env.single_state_space.shape == ref.state_space.shape == (env.state_width,)
    assert env.possible_agents == ref.possible_agents and env.num_rows == b * n
    for e in envs:
        obs = e.reset()
        assert obs.shape == (b * n, 18) and obs.dtype == tf.float32
        assert e.global_state().shape == (b * n, 54)
    traced = tf.function(env.step).get_concrete_function(tf.TensorSpec([b * n], tf.int32))
    shapes = [tuple(x.shape) for x in traced.structured_outputs]
    assert shapes == [(b * n, 18), (b * n,), (b * n,), (b * n,)]  # static shapes: while_loop carries
    rng = np.random.default_rng(0)
    total = np.zeros(b * n)
    for t in range(2 * cycles + 1):
        action = rng.integers(0, 5, b * n)
        other = action if t != cycles else (action + 1) % 5  # t == cycles: the reset step
        outs = [[x.numpy() for x in e.step(tf.constant(a))] for e, a in zip(envs, (action, other), strict=True)]
        for x, y in zip(*outs, strict=True):
            np.testing.assert_array_equal(x, y)
        obs, rew, term, trunc = outs[0]
        assert trunc.all() == (t in (cycles - 1, 2 * cycles)) and not term.any()
        state = env.global_state(tf.constant(obs)).numpy().reshape(b, n, -1)
        np.testing.assert_array_equal(state, np.broadcast_to(obs.reshape(b, 1, -1), state.shape))
        if t < cycles:
            total += rew
    team = env.drain_team_episodes()  # two episodes of every copy, the first of them summed here
    assert [length for _, length in team] == [cycles] * 2 * b
    np.testing.assert_allclose([r for r, _ in team[:b]], total.reshape(b, n).sum(1), rtol=1e-5)

    rollout_env = TFSpread(8, seed=4)
    rollout_env.reset()

    @tf.function(jit_compile=True)
    def rollout(steps: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, total: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            u = tf.random.stateless_uniform([rollout_env.num_rows], tf.stack([i, 7]), alg="threefry")
            _, reward, _, _ = rollout_env.step(tf.cast(u * 5, tf.int32))
            return i + 1, total + tf.reduce_sum(reward)

        return tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), tf.constant(0.0)))[1]

    assert np.isfinite(rollout(tf.constant(52)).numpy())
    assert len(rollout_env.drain_episodes()) == 2 * 8


def test_the_original_mpe_physics_moves_by_the_new_velocity() -> None:
    """physics="mpe" (the original MPE, kept by the reference MAPPO): v' = 0.75 v + 0.1 F, then
    p' = p + 0.1 v'; mpe2's moves by the old velocity. Agent 0 pushes +x (mpe2's action 2: force
    5), from rest at the origin, far from the others."""
    moved = {}
    for physics in ("mpe2", "mpe"):
        env = TFSpread(1, physics=physics)
        env.reset()
        start = [[[0.0, 0.0], [0.5, 0.5], [-0.5, -0.5]]]
        env.set_state(env.pack_state(start, np.zeros([1, 3, 2]), [[[0, 1], [1, 0], [-1, 0]]]))
        env.step(tf.constant([2, 0, 0], tf.int32))
        pos, vel, _ = (x.numpy() for x in env.unpack_state(env.get_state()))
        moved[physics] = (pos[0, 0, 0], vel[0, 0, 0])
    assert moved["mpe2"] == pytest.approx((0.0, 0.5))  # position from the old velocity (0)
    assert moved["mpe"] == pytest.approx((0.05, 0.5))  # position from the new velocity (0.5)
    with pytest.raises(ValueError, match="physics"):
        TFSpread(1, physics="euler")
