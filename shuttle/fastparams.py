"""A fast path for Typer's parameter coercion.

Typer 0.2x coerces every parameter of the invoked command through a pydantic
``TypeAdapter``: importing pydantic and building an adapter per parameter costs
60-90 ms on every start, more than the rest of Shuttle's start-up. Shuttle's
parameters are plain ``str``, ``int``, ``float`` and ``bool`` (or a list of
``str``), so those are coerced here with the same rules and messages; anything
else, and any Typer without these internals, keeps Typer's own path.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any

_SIMPLE = (str, int, float, bool)
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


def _plain(annotation: Any) -> tuple[type, bool] | None:
    """(leaf type, is list) for the annotations handled here, else None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            return None
        return _plain(args[0])
    if origin is list:
        (leaf,) = typing.get_args(annotation) or (None,)
        return (str, True) if leaf is str else None
    if annotation in _SIMPLE:
        return annotation, False
    return None


def _convert(leaf: type, value: Any, info: Any) -> Any:
    if leaf is str:
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return str(value)
    if leaf is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError("must be a boolean (true/false, yes/no, 1/0)")
    try:
        number = leaf(value)
    except (TypeError, ValueError):
        kind = "an integer" if leaf is int else "a number"
        raise ValueError(f"must be {kind}") from None
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    if getattr(info, "clamp", False):
        if low is not None and number < low:
            return leaf(low)
        if high is not None and number > high:
            return leaf(high)
        return number
    if low is not None and number < low:
        raise ValueError(f"Input should be greater than or equal to {low}")
    if high is not None and number > high:
        raise ValueError(f"Input should be less than or equal to {high}")
    return number


def install() -> bool:
    """Patch Typer's lazy runtime-parameter factory; False (and no change) when the
    internals it relies on are not there."""
    try:
        from typer import _coercion, core
        from typer._click.exceptions import BadParameter
    except ImportError:
        return False
    base = getattr(_coercion, "RuntimeParam", None)
    build = getattr(_coercion, "build_runtime_param", None)
    param_class = getattr(core, "_TyperParameter", None)
    if base is None or build is None or param_class is None:
        return False
    if not hasattr(param_class, "get_runtime_param"):
        return False

    @dataclass(frozen=True)
    class PlainRuntimeParam(base):  # type: ignore[valid-type,misc]
        leaf: type = str
        many: bool = False

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                if self.many:
                    items = value if isinstance(value, list | tuple) else [value]
                    return [_convert(self.leaf, item, self.parameter_info) for item in items]
                return _convert(self.leaf, value, self.parameter_info)
            except ValueError as exc:
                raise BadParameter(str(exc), ctx=ctx, param=param) from None

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            info = descriptor.parameter_info
            plain = None
            if descriptor.file_annotation is None and getattr(info, "parser", None) is None:
                plain = _plain(descriptor.annotation)
            if plain is None:
                self._runtime_param = build(descriptor)
            else:
                self._runtime_param = PlainRuntimeParam(
                    parameter_info=info, annotation=descriptor.annotation, leaf=plain[0], many=plain[1]
                )
        return self._runtime_param

    param_class.get_runtime_param = get_runtime_param
    return True
