"""Rank 0's checkpoints: each saved with the run state it belongs to, and the newest intact one
restored on ``--resume``.

A checkpoint is ``checkpoints/ckpt-<env steps>.{index,data-*}`` (TensorFlow's
``tf.train.CheckpointManager``, which keeps the newest ``checkpoint.keep``) plus
``ckpt-<env steps>.state.json``, the run state at that point (iteration, episodes, returns,
elapsed time, evaluation schedule), written *before* the checkpoint is registered so that the
two always match. ``state.json`` at the top of the run directory is a copy for people.

On resume the candidates are the checkpoint files themselves, newest first: TensorFlow's own
index of them (``checkpoints/checkpoint``) is not needed, so a deleted one loses nothing. A
candidate is used when its run state is whole and every tensor of it can be read (a truncated
data file fails here, before anything is restored); a damaged one moves to
``checkpoints/damaged/`` (kept for whoever wants to look, and out of the ``keep`` count) and
the next older one stands in for it.

Under ``agent-groups`` each group's rank holds its own learner and saves it in
``checkpoints/<group>/`` at the same env steps (the ranks run in lockstep), and rank 0 saves
only the run state and the iteration. A resume point is a run state whose every group has its
checkpoint at those steps, intact: rank 0 picks the newest such, and each group's rank restores
its own checkpoint there (:meth:`Checkpoints.restore_at`).

A run may go on under another policy than the one that saved its checkpoints (``auto``
switching between ``agent-groups`` and the rest): a group's learner is the part of the whole
learner module under its components' names, so the two kinds of checkpoint hold the same
values. ``agent-groups`` resuming at a whole checkpoint (rank 0's module) has each group restore
its part of it; a whole module resuming at ``agent-groups``' run state restores every group's
checkpoint at those steps, and only if together they hold every value of the module.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .rundir import RunDir, write_atomic

_NUMBERED = re.compile(r"ckpt-(\d+)\.index$")


class NoCheckpoint(Exception):
    """``--resume`` found no intact checkpoint (the message says what was tried)."""

    plain = True  # its message is the reason, without its type's name


def read_state(checkpoint: Path) -> dict[str, Any] | None:
    """The run state saved with a checkpoint, or None if it is missing or incomplete."""
    try:
        state = json.loads(checkpoint.with_name(checkpoint.name + ".state.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("iteration"), int):
        return None
    return state


def _on_disk(directory: Path) -> list[Path]:
    """The checkpoints in ``directory`` (by their index files), newest first."""
    found = []
    for index in directory.glob("ckpt-*.index"):
        m = _NUMBERED.match(index.name)
        if m:
            found.append((int(m.group(1)), directory / f"ckpt-{m.group(1)}"))
    return [path for _, path in sorted(found, reverse=True)]


def _readable(path: Path) -> str | None:
    """Why the checkpoint at ``path`` cannot be read whole (None: every tensor reads)."""
    import tensorflow as tf

    try:
        reader = tf.train.load_checkpoint(str(path))
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except Exception as exc:  # noqa: BLE001 - TensorFlow raises OpErrors, IndexError (a short read), ...
        return type(exc).__name__
    return None


def _saved(path: Path) -> bool:
    """Whether a checkpoint was saved at ``path`` (its index is on disk)."""
    return path.with_name(path.name + ".index").exists()


def _module_values(path: Path | str) -> set[str]:
    """The learner module's values in the checkpoint at ``path`` (none in ``agent-groups``'
    rank 0's, which holds only the iteration)."""
    import tensorflow as tf

    return {name for name, _ in tf.train.list_variables(str(path)) if name.startswith("module/")}


def _module_keys(checkpoint: Any) -> set[str]:
    """The module values a checkpoint of ``checkpoint``'s objects holds (written once to a
    scratch directory: TensorFlow lists them only from a file)."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        return _module_values(checkpoint.write(str(Path(scratch) / "keys")))


class Checkpoints:
    """Rank 0's checkpoints of ``module`` and the iteration counter (see the module docstring).

    ``group``: a group's rank under ``agent-groups``, saving its ``module`` in
    ``checkpoints/<group>/``; ``groups``: rank 0 there (``module`` None), whose resume points
    need every one of those groups' checkpoints."""

    def __init__(
        self, run_dir: RunDir, module: Any, keep: int, group: str | None = None, groups: Sequence[str] = ()
    ) -> None:
        import tensorflow as tf

        self.run_dir, self.keep = run_dir, keep
        self.group, self.groups = group, tuple(groups)
        self.directory = run_dir.checkpoints / group if group else run_dir.checkpoints
        self.module = module
        self.iteration = tf.Variable(0, dtype=tf.int64, trainable=False, name="iteration")
        parts = {"iteration": self.iteration} if module is None else {"module": module, "iteration": self.iteration}
        self._checkpoint = tf.train.Checkpoint(**parts)
        self._manager: Any = None

    def _managed(self) -> Any:
        if self._manager is None:
            import tensorflow as tf

            self._manager = tf.train.CheckpointManager(self._checkpoint, str(self.directory), max_to_keep=self.keep)
        return self._manager

    def restore(self, note: Callable[[str], None]) -> tuple[str, dict[str, Any]]:
        """Restore the newest intact checkpoint; returns its path and run state. Damaged newer
        ones move aside (``note`` says which); :class:`NoCheckpoint` if none is intact."""
        tried = []
        for path in _on_disk(self.directory):
            state = read_state(path)
            why = "no run state" if state is None else self._groups_missing(path) or _readable(path)
            if why is None:
                try:
                    self._restore(path)
                except Exception as exc:  # noqa: BLE001 - the checkpoint does not fit this build
                    why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
            if why is not None:
                tried.append(f"{path.name} ({why})")
                self._set_aside(path)
                continue
            self.iteration.assign(int(state["iteration"]))
            self._reindex(path)
            if tried:
                note(f"skipped unusable checkpoint(s), moved to {self.directory / 'damaged'}: {', '.join(tried)}")
            return str(path), state
        detail = f": {', '.join(tried)} unusable (moved to {self.directory / 'damaged'})" if tried else ""
        raise NoCheckpoint(f"--resume: no intact checkpoint in {self.directory}{detail}")

    def _restore(self, path: Path) -> None:
        """Restore rank 0's objects from the checkpoint at ``path``: from it alone, or where it
        holds no module but this rank has one, from the groups' checkpoints at its steps."""
        if self.module is not None and not _module_values(path):
            self._assemble(path)
            return
        # agent-groups' rank 0 takes only the iteration from a whole checkpoint
        self._checkpoint.restore(str(path)).assert_existing_objects_matched().expect_partial()

    def _assemble(self, path: Path) -> None:
        """The whole module from ``agent-groups``' checkpoints at ``path``'s steps: each group's
        part from its own, all of them needed."""
        import tensorflow as tf

        parts = [d / path.name for d in sorted(self.directory.iterdir()) if d.is_dir() and d.name != "damaged"]
        parts = [p for p in parts if _saved(p)]
        if not parts:
            raise ValueError("it holds no learner, and no group's checkpoint is at its steps")
        held: set[str] = set()
        whole = tf.train.Checkpoint(module=self.module)
        for part in parts:
            if (why := _readable(part)) is not None:
                raise ValueError(f"group {part.parent.name}'s checkpoint: {why}")
            whole.restore(str(part)).expect_partial()
            held |= _module_values(part)
        if missing := _module_keys(whole) - held:
            raise ValueError(f"the groups' checkpoints lack {len(missing)} of the module's values, e.g. {min(missing)}")

    def _groups_missing(self, path: Path) -> str | None:
        """Why a group's checkpoint at ``path``'s steps cannot be used (None: every one is intact,
        or ``path`` is a whole checkpoint, which holds every group's part)."""
        if self.groups and _module_values(path):
            return None
        for group in self.groups:
            theirs = self.directory / group / path.name
            if not _saved(theirs):
                return f"group {group}'s checkpoint is missing"
            if (why := _readable(theirs)) is not None:
                return f"group {group}'s checkpoint: {why}"
        return None

    def restore_at(self, iteration: int, env_steps: int) -> str:
        """Restore this group's checkpoint at ``env_steps``, the resume point rank 0 chose
        (:class:`NoCheckpoint` when it is missing or damaged); returns its path."""
        path = self.directory / f"ckpt-{env_steps}"
        whole = self.directory.parent / path.name  # saved by a whole module's rank 0 (another policy)
        source = whole if not _saved(path) and _saved(whole) else path
        why = None if _saved(source) else "missing"
        why = why or _readable(source)
        if why is None:
            try:  # this group's part of a whole checkpoint: the other groups' values stay unread
                self._checkpoint.restore(str(source)).assert_existing_objects_matched().expect_partial()
            except Exception as exc:  # noqa: BLE001 - the checkpoint does not fit this build
                why = type(exc).__name__
        if why is not None:
            raise NoCheckpoint(f"--resume: group {self.group}'s checkpoint {path} at {env_steps} env steps: {why}")
        for newer in _on_disk(self.directory):  # past the resume point: a timeline given up
            if int(newer.name.split("-")[1]) > env_steps:
                for part in self.directory.glob(f"{newer.name}.*"):
                    part.unlink(missing_ok=True)
        self.iteration.assign(iteration)
        if source == path:
            self._reindex(path)
        return str(source)

    def save(self, iteration: int, env_steps: int, state: dict[str, Any]) -> None:
        """Save the module with ``state`` (see the module docstring); the previous checkpoint
        stays until this one is whole."""
        self.iteration.assign(iteration)
        text = json.dumps(state)
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.directory / f"ckpt-{env_steps}.state.json", text)
        manager = self._managed()
        manager.save(checkpoint_number=env_steps)
        if self.group is None:  # the run's state, for people (a group's rank has none of its own)
            write_atomic(self.run_dir.state, text)
        kept = {Path(p).name for p in manager.checkpoints}
        for old in self.directory.glob("ckpt-*.state.json"):
            if old.name.removesuffix(".state.json") not in kept:
                old.unlink(missing_ok=True)

    def _set_aside(self, path: Path) -> None:
        damaged = self.directory / "damaged"
        damaged.mkdir(exist_ok=True)
        for part in self.directory.glob(f"{path.name}.*"):
            shutil.move(str(part), damaged / part.name)

    def _reindex(self, restored: Path) -> None:
        """TensorFlow's index lists the checkpoints on disk with ``restored`` the newest, so that
        the ``keep`` count is of intact ones (a deleted index is written anew). Each gets a
        timestamp after the last preserved one: without them TensorFlow's manager takes the
        listed checkpoints as preserved for good, never counts them towards ``keep`` (so their
        run states were deleted at the next save) and never deletes their files."""
        import tensorflow as tf

        paths = sorted(_on_disk(self.directory), key=lambda p: int(p.name.split("-")[1]))
        stamps: list[float] = []
        for p in paths:  # in step order, strictly increasing, none in the future
            made = p.with_name(p.name + ".index").stat().st_mtime
            stamps.append(max(made, stamps[-1] + 1e-3) if stamps else made)
        now = time.time()
        stamps = [min(t, now - 1e-3 * (len(stamps) - i)) for i, t in enumerate(stamps)]
        tf.compat.v1.train.update_checkpoint_state(
            str(self.directory),
            str(restored),
            all_model_checkpoint_paths=[str(p) for p in paths],
            all_model_checkpoint_timestamps=stamps,
            last_preserved_timestamp=(stamps[0] if stamps else now) - 1.0,
        )
        self._manager = None
        self._managed()


def digests(module: Any) -> dict[str, str]:
    """What must be equal on every rank that holds the learner: every trainable variable (a
    learner's own networks included, e.g. SAC's critics, which are not exchanged: replicas start
    them equal from the run's seed) and the normaliser's statistics."""
    out = {}
    if module is not None and hasattr(module, "weights"):
        out["weights_sha256"] = weights_digest(module.trainable_variables)
    if getattr(module, "normalizer", None) is not None:
        out["normalizer_sha256"] = weights_digest(module.normalizer.statistics())
    return out


def weights_digest(variables: Sequence[Any]) -> str:
    """sha256 of variables' values in order: equal digests on two ranks mean equal weights."""
    import hashlib

    h = hashlib.sha256()
    for v in variables:
        h.update(np.ascontiguousarray(v.numpy()).tobytes())
    return h.hexdigest()
