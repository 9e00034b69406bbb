"""Channel configuration: built-in defaults, the user file and the project file.

Files, later ones overriding earlier ones channel by channel:

1. built-in defaults: ``roadmap``, ``parallel-work``, ``errors``;
2. the user file ``~/.loom/config.json`` (or ``config.toml``);
3. the project file ``.loom/config.json`` (or ``.toml``), the nearest one found
   walking up from the project path (the home directory's own ``.loom`` is the
   user file, never a project file).

Only the ``channels`` table is Warp's; other top-level keys (Shuttle keeps its
settings in the same user file) are left alone, except the TypeScript Warp's
(``namespace``, ``natsUrl``, ``logging``, ``workQueue``), which are refused
naming where the setting lives now. The files are re-checked on
every channel operation (a few ``stat`` calls), so an edit takes effect on the
next call and Warp updates the streams' limits to match.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import Invalid, describe_problems, parse_problem, shown_name, validation_problems
from shared.legacy import warp_file_key_advice
from shared.names import TOKEN_RULE, InvalidNameError, validate_channel

CONFIG_DIR = ".loom"
CONFIG_NAMES = ("config.json", "config.toml")

DAY_S = 24 * 3600

RACY_NS = 2_000_000_000
"""Files changed less than this before a check are compared by content, not only by stat."""

_Mark = tuple[str, int, int, int, int]
"""A config file's path, mtime_ns, ctime_ns, size and inode."""


class ConfigError(Invalid, ValueError):
    """A configuration file is unreadable or invalid; the message names the file and field."""


class ChannelSpec(BaseModel):
    """One channel's description and retention limits (applied to its stream)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = Field(default="", max_length=500)
    max_messages: int = Field(default=10_000, ge=1, le=100_000_000)
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, le=1 << 40)
    max_age_s: float = Field(default=30 * DAY_S, ge=0, le=10 * 365 * DAY_S)
    """0 keeps messages until the count or size limit pushes them out."""


DEFAULT_CHANNELS: dict[str, ChannelSpec] = {
    "roadmap": ChannelSpec(description="Plans, priorities and direction of the project"),
    "parallel-work": ChannelSpec(description="Who is doing what right now, to avoid duplicate work"),
    "errors": ChannelSpec(description="Errors and failures the team should know about"),
}


class _ConfigFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    channels: dict[str, ChannelSpec] = Field(default_factory=dict)


@dataclass(frozen=True)
class ChannelConfig:
    channels: dict[str, ChannelSpec]
    sources: tuple[Path, ...]

    def get(self, name: str) -> ChannelSpec | None:
        return self.channels.get(name)


def _parse(path: Path) -> dict[str, ChannelSpec]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data: Any = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ConfigError(f"{path}: not valid {kind}: {parse_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be an object/table")
    originals = [advice for key in data if (advice := warp_file_key_advice(key))]
    if originals:  # left from the TypeScript Warp's file: not another part's key, so never ignored
        raise ConfigError(f"{path}: " + "; ".join(originals))
    try:
        parsed = _ConfigFile.model_validate(data)
    except ValidationError as exc:
        problems = describe_problems(validation_problems(exc.errors(include_url=False)), limit=20)
        raise ConfigError(f"{path}: {problems}") from None
    for name in parsed.channels:
        try:
            validate_channel(name, f"channels.{name}")
        except InvalidNameError:
            raise ConfigError(
                f"{path}: channels.{shown_name(name)}: invalid channel name; must be {TOKEN_RULE}"
            ) from None
    return parsed.channels


def _config_file_in(directory: Path) -> Path | None:
    found = [
        directory / CONFIG_DIR / name for name in CONFIG_NAMES if (directory / CONFIG_DIR / name).is_file()
    ]
    if len(found) > 1:
        raise ConfigError(f"{directory / CONFIG_DIR}: both config.json and config.toml exist; keep only one")
    return found[0] if found else None


def find_project_file(project_path: Path, home: Path) -> Path | None:
    home = home.resolve()
    for directory in (project_path, *project_path.parents):
        if directory == home:
            return None
        found = _config_file_in(directory)
        if found is not None:
            return found
    return None


def load_channel_config(project_path: Path, home: Path | None = None) -> ChannelConfig:
    home_dir = (home or Path.home()).expanduser()
    channels = dict(DEFAULT_CHANNELS)
    sources: list[Path] = []
    for path in (_config_file_in(home_dir), find_project_file(project_path.resolve(), home_dir)):
        if path is not None:
            channels.update(_parse(path))
            sources.append(path)
    return ChannelConfig(channels=channels, sources=tuple(sources))


class ConfigLoader:
    """Re-reads the files when any candidate file appears, changes or disappears.

    Every channel operation asks, so the check is a few ``stat`` calls: one per candidate
    ``.loom`` directory (most do not exist) and one per file in those that do. A file whose
    timestamps are within :data:`RACY_NS` of the last check is compared by content as well,
    because a second edit inside one timestamp tick (the kernel's clock is coarse) can leave
    size, times and inode unchanged.
    """

    def __init__(self, project_path: Path, home: Path | None = None) -> None:
        self.project_path = project_path.resolve()
        self.home = (home or Path.home()).expanduser()
        self._marks: tuple[_Mark, ...] | None = None
        self._racy = True
        self._contents: tuple[tuple[str, bytes], ...] | None = None
        self._config: ChannelConfig | None = None
        self._error: ConfigError | None = None
        self._dirs: list[tuple[str, tuple[str, ...]]] | None = None

    def _candidates(self) -> list[tuple[str, tuple[str, ...]]]:
        """Each ``.loom`` directory that could hold a config file, with those files' paths."""
        if self._dirs is None:
            dirs = [self.home]
            home = self.home.resolve()
            for directory in (self.project_path, *self.project_path.parents):
                if directory == home:
                    break
                dirs.append(directory)
            self._dirs = [
                (str(d / CONFIG_DIR), tuple(str(d / CONFIG_DIR / name) for name in CONFIG_NAMES))
                for d in dirs
            ]
        return self._dirs

    def _stat(self) -> tuple[_Mark, ...]:
        marks: list[_Mark] = []
        for directory, files in self._candidates():
            try:
                os.stat(directory)
            except OSError:
                continue
            for path in files:
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                marks.append((path, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        return tuple(marks)

    @staticmethod
    def _read(marks: tuple[_Mark, ...]) -> tuple[tuple[str, bytes], ...]:
        contents: list[tuple[str, bytes]] = []
        for mark in marks:
            try:
                with open(mark[0], "rb") as handle:
                    contents.append((mark[0], handle.read()))
            except OSError:
                continue
        return tuple(contents)

    def current(self) -> ChannelConfig:
        """The configuration now; raises :class:`ConfigError` while a file is invalid."""
        marks = self._stat()
        if marks != self._marks or self._racy:
            now = time.time_ns()
            contents = self._read(marks)
            self._marks = marks
            self._racy = any(now - mark[1] < RACY_NS or now - mark[2] < RACY_NS for mark in marks)
            if contents != self._contents:
                self._contents = contents
                try:
                    self._config = load_channel_config(self.project_path, self.home)
                    self._error = None
                except ConfigError as exc:
                    self._error = exc
        if self._error is not None:
            raise self._error
        assert self._config is not None
        return self._config
