"""Multi-agent particle environments (MPE): simple_spread in TensorFlow graphs (tf_spread) and
as the reference MAPPO defines it on mpe2 (reference)."""
