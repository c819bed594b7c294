"""What recording evaluation episodes as videos shares between single- and multi-agent envs:
the error for an env that draws no frames, and where episode ``k``'s mp4 goes."""

from __future__ import annotations

from pathlib import Path


class VideoError(Exception):
    """Episodes that cannot be recorded: the env draws no ``rgb_array`` frames (the message says why)."""


def video_paths(folder: Path, name: str, episodes: int) -> list[Path]:
    """The mp4 files ``episodes`` recorded episodes go into, in episode order."""
    return [folder / f"{name}-episode-{k}.mp4" for k in range(episodes)]
