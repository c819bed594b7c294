"""The compiled loop of in-graph evaluation episodes, shared by single- and multi-agent envs:
``n`` env copies step until each has ended its first episode, in one ``tf.while_loop``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def episode_returns(
    reset: Callable[[], Any], step: Callable[[Any], tuple[Any, Any, Any]], rng: Any, seed: int, n: int, limit: int
) -> Callable[[], Any]:
    """A compiled function: reseed ``rng`` with ``seed`` (the same first states every call),
    ``reset()``, then ``step(obs) -> (obs, reward [n], done [n])`` until every copy's first
    episode has ended (``limit`` steps at most); returns each copy's return (float64)."""
    import tensorflow as tf

    def body(obs, running, returns, finished):  # noqa: ANN001, ANN202
        obs, reward, done = step(obs)
        running += tf.where(finished, tf.zeros([n], tf.float64), tf.cast(reward, tf.float64))
        ended = tf.logical_and(done, tf.logical_not(finished))
        return obs, running, tf.where(ended, running, returns), tf.logical_or(finished, ended)

    @tf.function(autograph=False, jit_compile=True)
    def run() -> tf.Tensor:
        rng.reset_from_seed(seed)
        zeros = tf.zeros([n], tf.float64)
        start = (reset(), zeros, zeros, tf.zeros([n], tf.bool))
        unfinished = lambda *state: tf.logical_not(tf.reduce_all(state[3]))  # noqa: E731
        return tf.while_loop(unfinished, body, start, maximum_iterations=limit)[2]

    return run
