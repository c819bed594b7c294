"""The names generated code uses itself, in one place, and the check that keeps spec names clear of them.

Spec names become Python names in the generated modules: values are local variables
and parameters, components and networks are attributes of the fragment objects (and
buffers received across a cut are locals of the rank entry), the spec's name is the
package. :data:`GENERATED_NAMES` lists every name that the templates bind or read
(imports, module constants, locals, parameters, methods, builtins) and the attributes a
fragment object has of its own; ``rlgen validate`` refuses spec names in it (E313), so a
spec name never shadows or is shadowed by generated code. ``tests/test_generated_names.py``
parses every golden build and fails when generated code uses a name that neither comes
from the spec nor is listed here: a template change that adds a name must add it here.
"""

from __future__ import annotations

import builtins
import keyword
import sys
from collections.abc import Iterator

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.context import fragment_name
from rlgen.codegen.graph import ROLLOUT_FIELDS
from rlgen.codegen.lower.fragments import class_name
from rlgen.codegen.policies import POLICIES
from rlgen.dsl.catalog import BUFFER_KINDS, METHODS, RESERVED_NAMES
from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.spec import Spec

#: Names the templates (templates/*.j2) write into the module and function scopes of generated code.
TEMPLATE_NAMES = frozenset(
    {
        # imports and module constants
        "annotations", "Sequence", "np", "tf", "comm", "p2p", "METRICS",
        "RunConfig", "Session", "run_rank", "replica_seed",
        "ActionSpec", "Policy", "Value", "QNetwork", "Exploration", "build_network", "compiled",
        "SquashedGaussianActor", "DeterministicActor", "GSDEActor", "GSDEPolicy", "RolloutBuffer", "GraphRolloutBuffer",
        "ReplayBuffer", "TransitionStage", "VectorEnv", "HostTFEnv", "make_tf_env", "env_seed", "Normalizer",
        "BATCH", "OBS_SHAPE", "ACTION_SHAPE", "ACTION_SPEC", "RUN", "ROLES", "RUNNERS",
        "ParallelVectorEnv", "AGENTS", "STATE_SHAPE", "FrameReplayBuffer", "group_metrics", "GroupPolicies",
        # functions, parameters and locals of the rank entry (main.py)
        "main", "argv", "rank", "session", "clock", "iteration", "_iteration", "progress",
        "group", "acted", "arrived", "join_groups", "EnvGroups", "GROUPS",
        # parameters and locals of the fragment classes' methods
        "self", "seed", "stream", "parts", "versions", "version", "at_least", "t", "_", "rows",
        # builtins the templates call or annotate with
        "super", "range", "tuple", "list", "dict", "int", "float", "str", "min", "len", "BaseException",
        # dunders read by generated code
        "__init__", "__doc__", "__name__",
    }
    # what each algorithm's part (rlgen/algorithms/<kind>/fragment.j2) imports
    | {name for algo in ALGORITHMS.values() for name in algo.names}
)  # fmt: skip

#: Attributes and methods every fragment object has besides its components, networks and
#: steps (``tf.Module``'s own included): a component or network named so would replace one.
ATTRIBUTE_NAMES = frozenset(
    {"env", "weights", "carried", "drain_episodes", "iteration", "weights_version", "behaviour_version", "dropped"}
    | {"normalizer", "drain_group_returns"}
    | {"name", "name_scope", "non_trainable_variables", "submodules", "trainable_variables", "variables"}
    | {"with_name_scope"}
)


def _role_names() -> frozenset[str]:
    """Fragment variables, modules and classes, and role functions, of every policy."""
    out = set()
    for policy in POLICIES.values():
        for role in policy.roles:
            fragments = {fragment_name(role.name, kind) for kind in ("compute", "env")}
            out |= fragments | {class_name(f) for f in fragments} | {f"run_{role.name}"}
    return frozenset(out)


#: Every name in the module and function scopes of generated code besides the spec's own:
#: a value (a local variable or parameter there) named so would clash with it.
LOCAL_NAMES = TEMPLATE_NAMES | _role_names()
#: Every name generated code binds or reads besides the spec's own.
GENERATED_NAMES = LOCAL_NAMES | ATTRIBUTE_NAMES

#: Prefixes of the methods generated for a cut: a component named so could replace one.
METHOD_PREFIXES = ("send_", "recv_", "sync_", "publish_", "pull_")

#: Top-level modules that rlgen and generated code import directly or through their
#: dependencies (rlgen's install_requires, the cpu/test extras, Horovod and theirs). A build
#: directory named like one would shadow it when a rank starts there. Fixed, so that every
#: machine gives the same answer.
DEPENDENCY_MODULES = frozenset(
    {
        "rlgen", "numpy", "tensorflow", "keras", "horovod", "gymnasium", "mujoco", "imageio",
        "yaml", "jsonschema", "jsonschema_specifications", "referencing", "rpds", "attr", "attrs",
        "jinja2", "markupsafe", "ruff", "tensorboard", "tensorboard_data_server", "absl", "google",
        "h5py", "ml_dtypes", "opt_einsum", "optree", "flatbuffers", "gast", "astunparse", "pasta",
        "grpc", "termcolor", "wrapt", "six", "namex", "rich", "markdown", "markdown_it", "mdurl",
        "pygments", "werkzeug", "requests", "urllib3", "idna", "certifi", "charset_normalizer",
        "typing_extensions", "packaging", "setuptools", "pkg_resources", "pip", "wheel", "clang",
        "cloudpickle", "psutil", "farama_notifications", "pil", "pytest", "pluggy", "iniconfig",
    }
    # what each algorithm's part (rlgen/algorithms/<kind>/fragment.j2) imports
    | {name for algo in ALGORITHMS.values() for name in algo.names}
)  # fmt: skip


def package_name(spec_name: str) -> str:
    """The Python package of a spec's build: its name with ``-`` as ``_``."""
    return spec_name.replace("-", "_")


def package_clash(package: str) -> str | None:
    """What ``package`` would shadow or break when imported, or ``None``."""
    if keyword.iskeyword(package):
        return "a Python keyword"
    if package in dir(builtins):
        return "a Python builtin"
    if package in sys.stdlib_module_names:
        return "a module of Python's standard library"
    if package in DEPENDENCY_MODULES:
        return "a module that rlgen or TensorFlow imports"
    return None


def _step_prefixes(spec: Spec) -> set[str]:
    """Starts of the generated step-method names: ``<block>_<component>_<method>``."""
    return {f"{b.name}_{lc.call.component}_{lc.call.method}" for b in spec.loop.all_blocks() for lc in b.calls}


def _parts(spec: Spec, flow: Dataflow) -> dict[str, str]:
    """Names generated code gives the parts of a buffer's contents or of a sampled batch
    (``buffer_obs``, ``batch_reward``): parameter name → what it is."""
    fields = [*ROLLOUT_FIELDS, *(p.name for p in METHODS["replay"]["insert"].inputs)]
    holders = [n for n, c in spec.components.items() if c.kind in BUFFER_KINDS]
    holders += [v.name for v in flow.values.values() if v.type == "batch"]
    return {f"{h}_{f}": f"the `{f}` part of '{h}'" for h in holders for f in fields}


def _clash(name: str, what: str) -> str:
    return f"'{name}' is the name of {what} in rlgen's generated code"


#: Module constants generated code writes once per agent group, suffixed ``_<GROUP>``.
GROUP_CONSTANTS = ("BATCH", "OBS_SHAPE", "ACTION_SHAPE", "ACTION_SPEC")


def group_constants(spec: Spec) -> frozenset[str]:
    """The per-group constants of a spec with several agent groups (``OBS_SHAPE_GOOD``, ...)."""
    if not spec.env.grouped:
        return frozenset()
    return frozenset(f"{c}_{g.upper()}" for c in GROUP_CONSTANTS for g, _ in spec.env.groups)


_HINT = "rename it (e.g. '{0}_'); docs/language.md lists the names generated code keeps for itself"


def check_names(spec: Spec, flow: Dataflow) -> Iterator[Finding]:
    """No spec name clashes with generated code, and the package does not shadow a module.

    Values (and buffers, whose contents cross cuts as values) are local variables of generated
    code: they may not be in :data:`LOCAL_NAMES`, nor be the name generated code gives a part
    of a buffer's contents or of a sampled batch (``buffer_obs``). Components and networks are attributes of the
    fragment objects: they may not be in :data:`ATTRIBUTE_NAMES` nor name a generated method.

    ```yaml
    name: numpy                                # E314: the build's package would shadow numpy
    loop: {rollout: [actor.act(obs) -> clock]} # E313: generated code has a local `clock`
    ```
    """
    package = package_name(spec.name)
    why = package_clash(package)
    if why:
        yield error(
            "E314",
            ("name",),
            f"the build's package '{package}' would be {why}, and a rank started in the build directory "
            "would import it instead",
            f"rename the spec, e.g. 'my-{spec.name}'",
        )
    steps = _step_prefixes(spec)
    for section in ("networks", "components"):
        for name, item in getattr(spec, section).items():
            path = (section, name)
            if name in RESERVED_NAMES:
                continue  # reported by the language's own check (E312)
            if name in ATTRIBUTE_NAMES:
                yield error("E313", path, _clash(name, "an attribute of every fragment"), _HINT.format(name), key=True)
            elif name.startswith(METHOD_PREFIXES) or any(name == s or name.startswith(f"{s}_") for s in steps):
                yield error("E313", path, _clash(name, "a fragment's method"), _HINT.format(name), key=True)
            elif section == "components" and item.kind in BUFFER_KINDS and name in LOCAL_NAMES:
                what = "a variable (a buffer's contents are one where they cross a cut)"
                yield error("E313", path, _clash(name, what), _HINT.format(name), key=True)
    parts = _parts(spec, flow)
    constants = group_constants(spec)
    for block in spec.loop.all_blocks():
        for lc in block.calls:
            for out in lc.call.outputs:
                if out.text in RESERVED_NAMES:
                    continue  # reported by the dataflow analysis (E311)
                what = "a variable or module" if out.text in LOCAL_NAMES | constants else parts.get(out.text)
                if what:
                    yield error(
                        "E313",
                        lc.path,
                        _clash(out.text, what),
                        _HINT.format(out.text),
                        offset=out.offset,
                        length=len(out.text),
                    )
