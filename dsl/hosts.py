"""What a ``deploy.hosts`` entry means: ``host:slots`` (a bare ``host`` offers one slot), ranks
filling the entries in order, as horovodrun and the build's plan place them; and the hostfile
form horovodrun reads (``HOST slots=N`` per line)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class HostfileError(ValueError):
    """A hostfile that cannot be read or is written wrongly (the message names the line)."""


def host_name(entry: str) -> str:
    """The host of a ``host:slots`` entry."""
    return entry.rpartition(":")[0] or entry


def slots_of(hosts: Sequence[str]) -> int:
    """The slots ``host:slots`` entries offer (an entry without a count offers 1)."""
    return sum(int(slots) if slots.isdigit() else 1 for _, _, slots in (h.rpartition(":") for h in hosts))


def host_of_ranks(hosts: Sequence[str], workers: int) -> list[str]:
    """Rank → host, filling each ``host:slots`` in order (``localhost`` when none given)."""
    out: list[str] = []
    for entry in hosts:
        name, _, slots = entry.rpartition(":")
        out += [name or entry] * (int(slots) if slots.isdigit() else 1)
    out += ["localhost"] * (workers - len(out))
    return out[:workers]


def read_hostfile(path: str | Path) -> list[str]:
    """``host:slots`` entries from a horovodrun hostfile: ``HOST slots=N`` per line (``slots``
    defaults to 1), ``#`` comments and blank lines ignored."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise HostfileError(f"cannot read the hostfile {path}: {exc.strerror or exc}") from None
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        slots = "1"
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key != "slots" or not value.isdigit() or int(value) < 1:
                raise HostfileError(
                    f"{path}:{number}: '{word}' is not 'slots=N' (N ≥ 1); "
                    "a line is 'HOST slots=N', e.g. 'node1 slots=2'"
                )
            slots = value
        hosts.append(f"{words[0]}:{slots}")
    if not hosts:
        raise HostfileError(f"{path}: no hosts (a line is 'HOST slots=N', e.g. 'node1 slots=2')")
    return hosts
