"""Checkpoints: torch.save with weights_only loading, and safetensors + JSON metadata.

Route 1 (plain torch): importing aoq registers every tensor class, enum and the rebuild
function as safe globals, so ``torch.load(p, weights_only=True)`` reads a state_dict that
``torch.save(model.state_dict(), p)`` wrote, and ``load_state_dict(sd, assign=True)`` puts it
into a float model (meta device allowed).

Route 2 (no pickle at all): ``save_pretrained(model, dir)`` writes ``model.safetensors`` (every
inner tensor under ``<key>:<field>``, plain tensors under their own key) and ``aoq.json``
(format version, config per module, class / nominal dtype / shape / attrs per quantized key).
``load_pretrained(model, dir)`` rebuilds the tensors, validates them and assigns them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from aoq.configs import config_from_dict
from aoq.tensors import TENSOR_CLASSES, AoqTensor, QuantizedWeight
from aoq.tensors import attrs as attrs_codec
from aoq.tensors.base import _rebuild_aoq_tensor

FORMAT = "aoq"
FORMAT_VERSION = 1
METADATA_FILE = "aoq.json"
WEIGHTS_FILE = "model.safetensors"
_DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64)
}


def register_safe_globals() -> None:
    """Allow aoq tensors in ``torch.load(weights_only=True)``. Called when aoq is imported."""
    torch.serialization.add_safe_globals(
        # enum classes only for checkpoints written before attrs were stored as plain values
        [_rebuild_aoq_tensor, *TENSOR_CLASSES.values(), *attrs_codec.enums().values()]
    )


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: says what is wrong and where."""


# --- save ------------------------------------------------------------------------------------


def save_pretrained(model: nn.Module, path: str | os.PathLike[str]) -> None:
    """Write ``model``'s state (quantized and plain tensors) as safetensors + aoq.json."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    flat: dict[str, torch.Tensor] = {}
    tensors_meta: dict[str, Any] = {}
    modules_meta: dict[str, Any] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[Any, ...], str] = {}
    for key, t in model.state_dict().items():
        if isinstance(t, AoqTensor):
            for field, inner in t.tensors().items():
                flat[f"{key}:{field}"] = inner.contiguous()
            tensors_meta[key] = {
                "class": type(t).__name__,
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "attrs": {n: attrs_codec.encode(v) for n, v in t.attrs().items()},
            }
            if isinstance(t, QuantizedWeight):
                module = key.rpartition(".")[0]
                modules_meta[module] = {"config": json.loads(t.config_json)}
            continue
        ident = (
            t.untyped_storage().data_ptr(),
            t.storage_offset(),
            tuple(t.shape),
            t.stride(),
            t.dtype,
        )
        if t.numel() and ident in seen:  # tied weights: store once
            aliases[key] = seen[ident]
            continue
        seen[ident] = key
        flat[key] = t.contiguous()
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "torch_version": torch.__version__,
        "modules": modules_meta,
        "tensors": tensors_meta,
        "aliases": aliases,
    }
    save_file(flat, str(out / WEIGHTS_FILE), metadata={"format": "pt", FORMAT: str(FORMAT_VERSION)})
    (out / METADATA_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True))


# --- load ------------------------------------------------------------------------------------


def _read_metadata(path: Path) -> dict[str, Any]:
    meta_path = path / METADATA_FILE
    if not meta_path.is_file():
        raise CheckpointError(f"{meta_path} is missing: not an aoq checkpoint directory")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{meta_path} is not valid JSON: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{meta_path}: 'format' must be {FORMAT!r}")
    version = meta.get("format_version")
    if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise CheckpointError(
            f"{meta_path}: format_version {version!r} is not supported (this aoq reads "
            f"1..{FORMAT_VERSION}); upgrade aoq"
        )
    return meta


def _rebuild(key: str, spec: dict[str, Any], flat: dict[str, torch.Tensor]) -> AoqTensor:
    cls = TENSOR_CLASSES.get(spec.get("class", ""))
    if cls is None:
        raise CheckpointError(f"{key}: unknown tensor class {spec.get('class')!r}")
    dtype = _DTYPES.get(spec.get("dtype", ""))
    if dtype is None:
        raise CheckpointError(f"{key}: unsupported nominal dtype {spec.get('dtype')!r}")
    inner = {
        f: flat.pop(f"{key}:{f}")
        for f in cls.tensor_fields + cls.optional_fields
        if f"{key}:{f}" in flat
    }
    missing = [f for f in cls.tensor_fields if f not in inner]
    if missing:
        raise CheckpointError(f"{key}: fields {missing} missing from {WEIGHTS_FILE}")
    try:
        attrs = {n: attrs_codec.decode(v) for n, v in spec.get("attrs", {}).items()}
    except attrs_codec.AttrError as e:
        raise CheckpointError(f"{key}: {e}") from e
    try:
        return _rebuild_aoq_tensor(cls, tuple(spec["shape"]), dtype, inner, attrs)
    except (TypeError, ValueError, KeyError) as e:
        raise CheckpointError(f"{key}: {e}") from e


def load_pretrained(
    model: nn.Module, path: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> nn.Module:
    """Turn a float model (meta device allowed) into the quantized model saved at ``path``."""
    src = Path(path)
    meta = _read_metadata(src)
    for module, entry in meta.get("modules", {}).items():
        try:
            config_from_dict(entry["config"])
        except (ValueError, TypeError, KeyError) as e:
            raise CheckpointError(f"module {module!r}: {e}") from e
    try:
        flat = load_file(str(src / WEIGHTS_FILE), device=str(device))
    except Exception as e:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(f"{src / WEIGHTS_FILE} cannot be read: {e}") from e
    # safetensors returns views into one buffer at unaligned offsets; torch's CPU int8 kernel
    # crashes on such weights, so every tensor gets storage of its own
    flat = {k: t.clone() for k, t in flat.items()}
    state: dict[str, torch.Tensor] = {}
    for key, spec in meta.get("tensors", {}).items():
        state[key] = _rebuild(key, spec, flat)
    stray = [k for k in flat if ":" in k]
    if stray:
        raise CheckpointError(f"tensors with no metadata entry: {stray[:5]}")
    state.update(flat)
    for key, target in meta.get("aliases", {}).items():
        if target not in state:
            raise CheckpointError(f"alias {key} -> {target}: target missing")
        state[key] = state[target]
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            "checkpoint does not match the model: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    for key, t in state.items():
        if tuple(t.shape) != tuple(expected[key].shape):
            raise CheckpointError(
                f"{key}: checkpoint shape {tuple(t.shape)} != model {tuple(expected[key].shape)}"
            )
    model.load_state_dict(state, assign=True, strict=True)
    for key, target in meta.get("aliases", {}).items():  # re-tie: one Parameter, two names
        owner, _, name = key.rpartition(".")
        setattr(model.get_submodule(owner), name, model.get_parameter(target))
    for p in model.parameters():
        if isinstance(p, AoqTensor):
            p.requires_grad_(False)
    return model
