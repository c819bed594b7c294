"""What generated fragment modules call: networks, distributions, learners, buffers, envs, comm."""

from .tfimport import install as _skip_keras_at_tensorflow_import

_skip_keras_at_tensorflow_import()
