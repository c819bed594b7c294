"""rlgen: define an RL algorithm once as a ``.rl.yaml`` spec, run it under any distribution policy."""

__version__ = "0.1.0"
