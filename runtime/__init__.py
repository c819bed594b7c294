"""What generated fragment modules call: networks, distributions, learners, buffers, envs, comm."""
