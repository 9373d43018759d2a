"""Tensor attributes as plain values, for every checkpoint route.

Enum attributes are stored as ``{"enum": <class name>, "value": <value>}``, never as pickled enum
objects: how Python pickles an enum member changed between releases (3.11.2 pickles
``getattr(cls, name)``, which ``torch.load(weights_only=True)`` refuses), so a checkpoint must
not depend on it. The same encoding is the safetensors metadata of save_pretrained.
"""

from __future__ import annotations

import enum
import functools
from typing import Any


class AttrError(ValueError):
    """An attribute value that aoq does not store or does not know."""


@functools.lru_cache(maxsize=1)
def enums() -> dict[str, type[enum.Enum]]:
    """The enum types that may appear as aoq tensor attributes, by class name."""
    from aoq.formats.float8 import Granularity
    from aoq.formats.mx import MXElem, ScaleRounding
    from aoq.tensors.base import ActQuant

    return {e.__name__: e for e in (ActQuant, Granularity, MXElem, ScaleRounding)}


def encode(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return {"enum": type(value).__name__, "value": value.value}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise AttrError(f"cannot store attribute {value!r} in a checkpoint")


def decode(value: Any) -> Any:
    """Inverse of encode; an enum object (checkpoints written before this encoding) passes."""
    if isinstance(value, dict):
        cls = enums().get(str(value.get("enum", "")))
        if cls is None or "value" not in value:
            raise AttrError(f"unknown enum attribute {value!r}")
        return cls(value["value"])
    return value
