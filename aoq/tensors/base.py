"""The base of every aoq tensor subclass.

An aoq tensor looks like a float tensor of its nominal ``shape`` and ``dtype`` (so nn.Linear
modules, parameter names and state_dict keys stay as they are) and holds its quantized data
in plain inner tensors. A subclass declares:

- ``tensor_fields``: required inner tensors, ``optional_fields``: inner tensors that may be None;
- ``attr_fields``: non-tensor metadata (enums, strings), fixed for the tensor's lifetime;
- ``layout_attrs``: those attrs that only say how the inner tensors are laid out for one
  device's kernels (the values they hold are the same in every layout), with ``for_device``
  and ``relayout`` to pick and convert: a device move, a checkpoint load and copy_ put the
  tensor in the layout its new device's kernels read.

From those declarations this base derives construction, ``__tensor_flatten__`` (torch.compile),
pickling (``torch.save`` / ``torch.load(weights_only=True)``), device moves, detach, clone and
copy_. Any other op raises: a quantized tensor never silently dequantizes.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import importlib.util
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from aoq.tensors import attrs as attrs_codec

aten = torch.ops.aten
_DERIVED = "derived__"


class ActQuant(enum.Enum):
    """How a quantized linear treats its activations."""

    NONE = "none"
    """Weight-only: activations stay in float."""
    INT8_DYNAMIC = "int8_dynamic"
    """int8 symmetric, one scale per token, computed at run time."""
    INT8_DYNAMIC_ASYM = "int8_dynamic_asym"
    """int8 asymmetric (scale and zero point) per token, computed at run time."""
    INT8_STATIC = "int8_static"
    """int8 symmetric with one calibrated scale (zero point 0); bias stored as int32."""
    FP8_ROW = "fp8_row"
    """float8 with one scale per token, computed at run time."""
    FP8_TENSOR = "fp8_tensor"
    """float8 with one scale for the whole activation tensor, computed at run time."""
    MX_DYNAMIC = "mx_dynamic"
    """MX blocks along K in the weight's element format and block size, computed at run time."""
    NVFP4_DYNAMIC = "nvfp4_dynamic"
    """NVFP4 (e4m3 scale per 16 along K, float32 tensor scale from the activation's amax),
    computed at run time."""


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """A hash of aoq's own sources (aoq/ and kernels/). The compile cache keys a subclass by
    this hash plus its metadata, so code that changes how aoq computes a linear never reuses
    a graph compiled by an older aoq."""
    digest = hashlib.sha256()
    roots = [Path(__file__).resolve().parents[1]]
    spec = importlib.util.find_spec("aoq.kernels")
    roots += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


class AoqTensor(torch.Tensor):
    tensor_fields: ClassVar[tuple[str, ...]] = ()
    optional_fields: ClassVar[tuple[str, ...]] = ()
    attr_fields: ClassVar[tuple[str, ...]] = ()
    layout_attrs: ClassVar[tuple[str, ...]] = ()
    # attrs added after checkpoints were written without them: the value those imply
    attr_defaults: ClassVar[dict[str, Any]] = {}

    @staticmethod
    def __new__(cls, shape: torch.Size | tuple[int, ...], dtype: torch.dtype, **parts: Any):
        first = parts[cls.tensor_fields[0]]
        return torch.Tensor._make_wrapper_subclass(
            cls, tuple(shape), dtype=dtype, device=first.device, requires_grad=False
        )

    def __init__(self, shape: torch.Size | tuple[int, ...], dtype: torch.dtype, **parts: Any):
        parts = {**{n: v for n, v in self.attr_defaults.items() if n not in parts}, **parts}
        expected = set(self.tensor_fields) | set(self.optional_fields) | set(self.attr_fields)
        if set(parts) != expected:
            raise TypeError(f"{type(self).__name__} takes {sorted(expected)}, got {sorted(parts)}")
        for name, value in parts.items():
            setattr(self, name, value)
        self._derived: dict[str, torch.Tensor] | None = None
        self._size = tuple(shape)  # self.shape goes through __torch_function__: ~1 µs a read

    def __setattr__(self, name: str, value: Any) -> None:
        # a replaced inner tensor, attr or derived layout invalidates what aoq/plans.py
        # recorded with the old one
        fields = (*self.tensor_fields, *self.optional_fields, *self.attr_fields, "_derived")
        if name in fields:
            self.__dict__.pop("_plans", None)
        super().__setattr__(name, value)

    # -- parts ------------------------------------------------------------------------------

    def tensors(self) -> dict[str, torch.Tensor]:
        """The inner tensors that are present, by field name."""
        names = self.tensor_fields + self.optional_fields
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def canonical_tensors(self) -> dict[str, torch.Tensor]:
        """:meth:`tensors` in the reference layout (a packing made for one device's kernels
        put back), for comparison with the reference's quantization."""
        return self.tensors()

    def attrs(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in self.attr_fields}

    def for_device(self) -> AoqTensor:
        """This tensor in the layout its device's kernels read: self when it already is (or
        when the class has a single layout)."""
        return self

    def relayout(self, **layout: Any) -> AoqTensor:
        """A copy with the layout attrs ``layout`` and its inner tensors converted to match;
        self when it already has them. Classes with layout_attrs override it."""
        if all(n in self.layout_attrs and getattr(self, n) == v for n, v in layout.items()):
            return self
        raise NotImplementedError(f"{type(self).__name__} has no layout {layout}")

    def _rebuild(self, fn: Any = None, dtype: torch.dtype | None = None) -> AoqTensor:
        """A copy with ``fn`` applied to every inner tensor (and optionally a new nominal dtype)."""
        parts: dict[str, Any] = {n: None for n in self.optional_fields}
        parts.update({n: (fn(t) if fn else t) for n, t in self.tensors().items()})
        parts.update(self.attrs())
        return type(self)(self.shape, dtype or self.dtype, **parts)

    def replace(self, **changes: Any) -> AoqTensor:
        """A copy with some fields or attrs replaced (inner tensors are shared, not copied)."""
        parts: dict[str, Any] = {n: getattr(self, n) for n in self.optional_fields}
        parts.update(self.tensors())
        parts.update(self.attrs())
        parts.update(changes)
        new = type(self)(self.shape, self.dtype, **parts)
        new.validate()
        return new

    def validate(self) -> None:
        """Raise ValueError if the fields do not fit the declared layout (checkpoint loads)."""

    def _expect(self, name: str, dtypes: tuple[torch.dtype, ...], shape: tuple[int, ...]) -> None:
        t = getattr(self, name)
        if t is None:
            raise ValueError(f"{type(self).__name__}.{name} is missing")
        if t.dtype not in dtypes or tuple(t.shape) != shape:
            raise ValueError(
                f"{type(self).__name__}.{name}: expected {shape} of {dtypes}, "
                f"got {tuple(t.shape)} of {t.dtype}"
            )

    def build_derived(self) -> dict[str, torch.Tensor]:
        """Fast layouts for this tensor's device and nominal dtype (e.g. a CPU op's packing).
        Never saved; rebuilt after moves; passed to torch.compile as inner tensors."""
        return {}

    def derived(self) -> dict[str, torch.Tensor]:
        if self._derived is None:
            self._derived = self.build_derived()
        return self._derived

    def __repr__(self) -> str:  # type: ignore[override]
        inner = ", ".join(
            f"{n}={tuple(t.shape)}:{str(t.dtype).removeprefix('torch.')}"
            for n, t in self.tensors().items()
        )
        meta = ", ".join(f"{n}={getattr(v, 'value', v)}" for n, v in self.attrs().items())
        return (
            f"{type(self).__name__}(shape={tuple(self.shape)}, dtype={self.dtype}, "
            f"device={self.device}, {inner}, {meta})"
        )

    # -- torch.compile ----------------------------------------------------------------------

    def __tensor_flatten__(self) -> tuple[list[str], tuple[Any, ...]]:
        derived = [_DERIVED + n for n in self.derived()]
        return list(self.tensors()) + derived, (self.dtype, tuple(self.attrs().items()))

    def __getattr__(self, name: str) -> Any:
        # flatten names derived layouts "derived__<name>"; compile reads them back by name
        if name.startswith(_DERIVED):
            return self.derived()[name[len(_DERIVED) :]]
        raise AttributeError(name)

    @classmethod
    def __tensor_unflatten__(
        cls,
        inner: dict[str, torch.Tensor],
        ctx: tuple[Any, ...],
        outer_size: Any,
        outer_stride: Any,
    ) -> AoqTensor:
        dtype, attrs = ctx
        parts: dict[str, Any] = {n: None for n in cls.optional_fields}
        parts.update({n: t for n, t in inner.items() if not n.startswith(_DERIVED)})
        parts.update(dict(attrs))
        t = cls(tuple(outer_size), dtype, **parts)
        t._derived = {n[len(_DERIVED) :]: v for n, v in inner.items() if n.startswith(_DERIVED)}
        return t

    def _stable_hash_for_caching(self) -> str:
        """Key for torch.compile's AOT autograd cache: layout and metadata, never values."""
        inner = [(n, tuple(t.shape), str(t.dtype), t.stride()) for n, t in self.tensors().items()]
        attrs = [(n, getattr(v, "value", v)) for n, v in self.attrs().items()]
        payload = (
            _code_version(),
            type(self).__qualname__,
            tuple(self.shape),
            str(self.dtype),
            inner,
            attrs,
        )
        return hashlib.sha256(repr(payload).encode()).hexdigest()

    # -- pickling: a safe-global rebuild function, so torch.load(weights_only=True) works and
    # map_location applies to the inner tensors (the wrapper follows them) --------------------

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (
            _rebuild_aoq_tensor,
            (
                type(self),
                tuple(self.shape),
                self.dtype,
                self.tensors(),
                {n: attrs_codec.encode(v) for n, v in self.attrs().items()},
            ),
        )

    # -- ops --------------------------------------------------------------------------------

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if isinstance(weight, QuantizedWeight):
                return weight.linear(x, bias)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        handler = _OPS.get(func)
        if handler is None:
            raise NotImplementedError(
                f"aoq: {cls.__name__} does not support {func}; quantized tensors only serve "
                "F.linear and moves/copies (call .dequantize() for a float tensor)"
            )
        return handler(func, *args, **kwargs)


class QuantizedWeight(AoqTensor):
    """A quantized [N, K] linear weight. Subclasses give ``scheme`` and ``dequantize``; every
    one carries ``act`` (ActQuant), ``config_id`` (short name) and ``config_json``."""

    act: ActQuant
    config_id: str
    config_json: str

    @property
    def scheme(self) -> Any:
        raise NotImplementedError

    def linear(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """F.linear(x, self, bias) for x [..., K] of any leading dims (M = 0 included)."""
        dispatch = _DISPATCH or _import_dispatch()
        n, k = self._size
        if x.shape[-1] != k:
            raise ValueError(
                f"linear: input has {x.shape[-1]} features, weight {self.config_id} expects {k}"
            )
        if x.dim() == 2 and x.is_contiguous():  # the decode call: no reshapes (host time)
            return dispatch.run_linear(self, x, bias)
        x2 = x.reshape(-1, k).contiguous()  # results never depend on the input's layout
        y = dispatch.run_linear(self, x2, bias)
        return y.reshape(*x.shape[:-1], n)

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:  # type: ignore[override]
        raise NotImplementedError


_DISPATCH: Any = None
"""aoq.dispatch, imported at the first linear (it imports the tensors: a module-level import
would be circular) and kept: an import statement per call costs host time."""


def _import_dispatch() -> Any:
    global _DISPATCH
    from aoq import dispatch

    _DISPATCH = dispatch
    return dispatch


def check_act(t: QuantizedWeight, allowed: tuple[ActQuant, ...]) -> None:
    """Validate the act attr and the static act_scale that goes with it."""
    if t.act not in allowed:
        raise ValueError(f"{type(t).__name__}: act={t.act!r} is not one of {allowed}")
    for name in ("config_id", "config_json"):
        if not isinstance(getattr(t, name), str):
            raise ValueError(f"{type(t).__name__}.{name} must be a string")
    static = t.act is ActQuant.INT8_STATIC
    act_scale = getattr(t, "act_scale", None)
    if static and (act_scale is None or act_scale.dtype != torch.float32 or act_scale.dim()):
        raise ValueError(f"{type(t).__name__}: a static weight needs a float32 scalar act_scale")
    if not static and act_scale is not None:
        raise ValueError(f"{type(t).__name__}: act_scale is only for static activations")


def _rebuild_aoq_tensor(
    cls: type[AoqTensor],
    shape: tuple[int, ...],
    dtype: torch.dtype,
    tensors: dict[str, torch.Tensor],
    attrs: dict[str, Any],
) -> AoqTensor:
    if not (isinstance(cls, type) and issubclass(cls, AoqTensor)):
        raise TypeError(f"not an aoq tensor class: {cls!r}")
    parts: dict[str, Any] = {n: None for n in cls.optional_fields}
    parts.update(tensors)
    parts.update({n: attrs_codec.decode(v) for n, v in attrs.items()})
    t = cls(shape, dtype, **parts)
    t.validate()
    return t.for_device()  # a checkpoint loads into the layout of the device it lands on


# --- the few aten ops an aoq tensor supports --------------------------------------------------


def _detach(func: Any, t: AoqTensor) -> AoqTensor:
    return t._rebuild(torch.Tensor.detach)


def _clone(func: Any, t: AoqTensor, **kwargs: Any) -> AoqTensor:
    return t._rebuild(torch.clone)


def _to_copy(func: Any, t: AoqTensor, **kwargs: Any) -> AoqTensor:
    device = kwargs.get("device")
    dtype = kwargs.get("dtype")
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"aoq: cannot cast a quantized tensor to {dtype}")
    moved = t._rebuild(lambda x: x.to(device=device)) if device is not None else t._rebuild()
    moved = moved._rebuild(dtype=dtype) if dtype is not None else moved
    return moved.for_device()


def _settings(t: AoqTensor) -> dict[str, Any]:
    """The attrs that are not layout attrs: those a copy_'s source must share."""
    return {n: v for n, v in t.attrs().items() if n not in t.layout_attrs}


def _copy_(func: Any, dst: AoqTensor, src: Any, non_blocking: bool = False) -> AoqTensor:
    if type(src) is not type(dst) or _settings(src) != _settings(dst) or src.shape != dst.shape:
        raise TypeError(
            f"aoq: copy_ needs a {type(dst).__name__} of the same shape and settings; got "
            f"{type(src).__name__} {tuple(src.shape)}"
        )
    src = src.relayout(**{n: getattr(dst, n) for n in dst.layout_attrs})
    mine, theirs = dst.tensors(), src.tensors()
    if set(mine) != set(theirs):
        raise TypeError(f"aoq: copy_ between tensors with fields {set(mine)} and {set(theirs)}")
    for name, t in mine.items():
        t.copy_(theirs[name], non_blocking=non_blocking)
    dst._derived = None
    return dst


_OPS: dict[Any, Any] = {
    aten.detach.default: _detach,
    aten.alias.default: _detach,
    aten.clone.default: _clone,
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
}
