"""Multi-agent particle environments (MPE) as the reference MAPPO defines them."""
