"""Shuttle's settings: flag > environment > config file > default.

The file is ``~/.loom/config.toml`` (or ``config.json`` next to it); ``--config``
or ``LOOM_CONFIG`` names another one. Resolving settings uses only the standard
library, so it costs nothing at start-up; tomlkit is imported only to write.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from shared.errors import shown_name
from shared.legacy import LegacySettingError, adopt_environment, aliases_of, shuttle_key_advice
from shuttle.errors import UsageError

DEFAULT_API_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_S = 10.0
CONFIG_ENV = "LOOM_CONFIG"

_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")


def _url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8080")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials; set api_token instead")
    if parts.query or parts.fragment:
        raise ValueError("must not have a query or fragment")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ValueError("has an invalid port") from None
    return value.rstrip("/")


def _token(value: str) -> str:
    if not _TOKEN.fullmatch(value):
        raise ValueError("must be 1-4096 printable characters without spaces")
    return value


def _project(value: str) -> str:
    from shared.names import PROJECT_ID_PATTERN, PROJECT_ID_RULE  # the fabric's rule, loaded when used

    if not re.fullmatch(PROJECT_ID_PATTERN, value):
        raise ValueError(f"must be {PROJECT_ID_RULE}")
    return value


def _timeout(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError("must be a number of seconds") from None
    if not math.isfinite(number) or not 0 < number <= 600:
        raise ValueError("must be more than 0 and at most 600 seconds")
    return number


@dataclass(frozen=True)
class Key:
    name: str
    envs: tuple[str, ...]
    parse: Callable[[str], Any]
    default: Any
    help: str
    secret: bool = False


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("api_url", ("LOOM_API_URL",), _url, DEFAULT_API_URL, "Weft's base URL"),
        Key("api_token", ("LOOM_API_TOKEN",), _token, None, "bearer token for Weft", secret=True),
        Key(
            "project_id",
            ("LOOM_PROJECT_ID", *aliases_of("LOOM_PROJECT_ID", ["shuttle"])),
            _project,
            None,
            "project sent as X-Loom-Project (default: Weft's own project)",
        ),
        Key("timeout", ("LOOM_API_TIMEOUT",), _timeout, DEFAULT_TIMEOUT_S, "HTTP timeout in seconds"),
    )
}


FLAG_NAMES = {
    "api_url": "--api-url",
    "api_token": "--token",
    "project_id": "--project",
    "timeout": "--timeout",
}


def unknown_key(origin: str, key: str) -> UsageError:
    """An unknown key; one of the TypeScript Shuttle's (``apiUrl``) is named with ours."""
    advice = shuttle_key_advice(key)
    if advice is not None:
        return UsageError(f"{origin}: {key}: {advice}")
    return UsageError(f"{origin}: unknown key {shown_name(key)!r} (known: {', '.join(KEYS)})")


def parse_value(key: str, raw: Any, origin: str) -> Any:
    """Validate one setting; ``origin`` names where it came from for the error line."""
    spec = KEYS.get(key)
    if spec is None:
        raise unknown_key(origin, key)
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise UsageError(f"{origin}: {key} must be a {'number' if key == 'timeout' else 'string'}")
    try:
        return spec.parse(str(raw))
    except ValueError as exc:  # the value is not repeated: it may be a secret given to the wrong key
        raise UsageError(f"{origin}: {key} {exc}") from None


def default_path() -> Path:
    folder = Path.home() / ".loom"
    toml_path = folder / "config.toml"
    json_path = folder / "config.json"
    if not toml_path.exists() and json_path.exists():
        return json_path
    return toml_path


def config_path(flag: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if flag:
        return Path(flag).expanduser()
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    return default_path()


def is_foreign_table(raw: Any) -> bool:
    """Tables in the shared user file belong to other parts (Warp's ``[channels]``);
    Shuttle's own settings are top-level values, so only those are checked."""
    return isinstance(raw, dict) or (
        isinstance(raw, list) and bool(raw) and all(isinstance(v, dict) for v in raw)
    )


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"config file {path}: cannot read it ({exc.strerror or exc})") from None


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        if path.suffix == ".json":
            data = json.loads(text) if text.strip() else {}
        else:
            import tomllib

            data = tomllib.loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError and json.JSONDecodeError are ValueErrors
        raise UsageError(f"config file {path}: not valid {_kind(path)} ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"config file {path}: must hold a {_kind(path)} table of settings")
    return data


def read_file(path: Path) -> dict[str, Any]:
    """The file's raw key/value pairs (empty when it does not exist)."""
    text = _read_text(path)
    return {} if text is None else _parse(path, text)


def _kind(path: Path) -> str:
    return "JSON" if path.suffix == ".json" else "TOML"


FILE_HEADER = "Loom user settings (Shuttle's keys: see `shuttle config list`)"


def update_file(path: Path, key: str, value: Any) -> bool:
    """Set one top-level setting (``value`` None removes it) and write the file back;
    False when there was nothing to remove.

    A TOML file is edited in place with tomlkit, so the user's comments, order and
    spacing and the tables of other parts (Warp's ``[channels.*]``) survive; a new key
    goes after the top-level keys, before the first table. The file is first read with
    :mod:`tomllib`, so a broken file gets the same error as when settings are resolved.
    """
    text = _read_text(path)
    data = {} if text is None else _parse(path, text)
    if value is None and key not in data:
        return False
    if path.suffix == ".json":
        if value is None:
            del data[key]
        else:
            data[key] = value
        out = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    else:
        out = _edit_toml(path, text, key, value)
    _write_private(path, out)
    return True


def _edit_toml(path: Path, text: str | None, key: str, value: Any) -> str:
    import tomlkit

    if text is None:
        doc = tomlkit.document()
        doc.add(tomlkit.comment(FILE_HEADER))
    else:  # tomllib has accepted it, and tomlkit reads all of TOML 1.0 (and some of 1.1)
        doc = tomlkit.parse(text)
    if value is None:
        del doc[key]
    else:
        doc[key] = value
    return doc.as_string()


def _write_private(path: Path, text: str) -> None:
    """Write atomically, private to the user (the file may hold a token)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"config file {path}: cannot write it ({exc.strerror or exc})") from None


@dataclass
class Settings:
    """Resolved settings and where each value came from (flag, env:NAME, file, default)."""

    path: Path
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def api_url(self) -> str:
        return str(self.values["api_url"])

    @property
    def api_token(self) -> str | None:
        value = self.values.get("api_token")
        return None if value is None else str(value)

    @property
    def project_id(self) -> str | None:
        value = self.values.get("project_id")
        return None if value is None else str(value)

    @property
    def timeout(self) -> float:
        return float(self.values["timeout"])


def resolve(
    flags: Mapping[str, Any] | None = None,
    *,
    config_flag: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Apply the precedence flag > env > file > default and validate every value."""
    env = os.environ if env is None else env
    try:  # the TypeScript Shuttle's PROJECT_ID is read as LOOM_PROJECT_ID, unless they disagree
        adopt_environment(["shuttle"], env)
    except LegacySettingError as exc:
        raise UsageError(str(exc)) from None
    flags = flags or {}
    path = config_path(config_flag, env)
    file_data = read_file(path)
    unknown = [key for key, raw in file_data.items() if key not in KEYS and not is_foreign_table(raw)]
    if unknown:  # every one at once: a file of the TypeScript Shuttle has several
        lines = [unknown_key(f"config file {path}", key).message for key in unknown]
        raise UsageError("; ".join([lines[0], *(line.split(": ", 1)[1] for line in lines[1:])]))
    settings = Settings(path=path)
    for key, spec in KEYS.items():
        flag_value = flags.get(key)
        env_name = next((name for name in spec.envs if env.get(name)), None)
        if flag_value is not None and flag_value != "":
            settings.values[key] = parse_value(key, flag_value, FLAG_NAMES[key])
            settings.sources[key] = "flag"
        elif env_name is not None:
            settings.values[key] = parse_value(key, env[env_name], env_name)
            settings.sources[key] = f"env:{env_name}"
        elif key in file_data:
            settings.values[key] = parse_value(key, file_data[key], f"config file {path}")
            settings.sources[key] = "file"
        else:
            settings.values[key] = spec.default
            settings.sources[key] = "default"
    return settings


def mask(key: str, value: Any) -> Any:
    if value is not None and KEYS[key].secret:
        return "***"
    return value
