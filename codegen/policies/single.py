"""``single``: the whole loop in one process; no cut, no collectives (Anakin, WarpDrive)."""

from rlgen.codegen.policies.base import DistributionPolicy, Role

POLICY = DistributionPolicy(
    name="single",
    summary="whole loop in one process",
    cut=None,
    roles=(Role("main", "0", "both"),),
    min_workers=1,
    max_workers=1,
)
