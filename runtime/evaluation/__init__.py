"""Evaluating the policy: whole episodes on fresh envs (:mod:`.episodes`), rank 0's evaluator
process (:mod:`.process`), and when and where the run evaluates (:mod:`.schedule`)."""
