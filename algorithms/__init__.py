"""The algorithms rlgen knows, one home each (see :mod:`rlgen.algorithms.base`).

Adding an algorithm is a new home folder and one line in :data:`ALGORITHMS`
(``docs/dev/adding-an-algorithm.md``). Importing this package never imports TensorFlow.
"""

from __future__ import annotations

from rlgen.algorithms import a2c, dqn, ippo, mappo, ppo, sac, td3
from rlgen.algorithms.base import Algorithm

#: Learner kind -> its home's description, in the order the schema and the docs list them.
ALGORITHMS: dict[str, Algorithm] = {
    home.ALGORITHM.kind: home.ALGORITHM
    for home in (
        ppo,
        a2c,
        dqn,
        sac,
        td3,
        mappo,
        ippo,
    )
}
