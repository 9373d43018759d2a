"""Both checkpoint routes, for every config, loaded in a FRESH process into a meta-device model;
and checkpoints that are truncated, tampered with or hostile."""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

import aoq
from aoq.testing.cases import inference_configs

CONFIGS = inference_configs()

LOADER = r"""
import sys, torch
from torch import nn
import aoq
from aoq.testing.metrics import bit_equal

def build():
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 32)).to(DTYPE)

root = sys.argv[1]
bad = []
for case in sys.argv[2:]:
    x, y = torch.load(f"{root}/{case}/io.pt", weights_only=True)
    m = build()
    m.load_state_dict(torch.load(f"{root}/{case}/sd.pt", weights_only=True), assign=True)
    if not bit_equal(m(x), y):
        bad.append(case + ":torch.load")
    m = aoq.load_pretrained(build(), f"{root}/{case}/pretrained")
    if not bit_equal(m(x), y):
        bad.append(case + ":load_pretrained")
print("BAD", bad)
"""


def _model(dtype):
    return nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 32)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_both_routes_bit_identical_in_fresh_process(tmp_path, dtype):
    cases = []
    for config in CONFIGS:
        d = tmp_path / config.id
        d.mkdir()
        m = aoq.quantize_(_model(dtype), config)
        x = torch.randn(5, 128, dtype=dtype)
        torch.save((x, m(x).detach()), d / "io.pt")
        torch.save(m.state_dict(), d / "sd.pt")
        aoq.save_pretrained(m, d / "pretrained")
        cases.append(config.id)
    code = LOADER.replace("DTYPE", str(dtype))
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), *cases], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "BAD []" in out.stdout, out.stdout


def test_weights_only_load_needs_aoq_imported(tmp_path):
    m = aoq.quantize_(_model(torch.float32), aoq.Int8WeightOnlyConfig())
    torch.save(m.state_dict(), tmp_path / "sd.pt")
    code = f"import torch; torch.load({str(tmp_path / 'sd.pt')!r}, weights_only=True)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0 and "weights_only" in out.stderr


def test_metadata_names_format_and_config_per_module(tmp_path):
    m = aoq.quantize_(_model(torch.float32), aoq.Int4WeightOnlyConfig(group_size=32))
    aoq.save_pretrained(m, tmp_path)
    meta = json.loads((tmp_path / "aoq.json").read_text())
    assert meta["format"] == "aoq" and meta["format_version"] == 1
    assert meta["modules"]["0"]["config"]["name"] == "Int4WeightOnlyConfig"
    assert meta["tensors"]["0.weight"]["class"] == "Int4Tensor"
    assert "0.bias" in load_file(str(tmp_path / "model.safetensors"))


def test_tied_weights_stored_once_and_retied(tmp_path):
    m = nn.Sequential(nn.Embedding(10, 16), nn.Linear(16, 10, bias=False))
    m[1].weight = m[0].weight
    aoq.save_pretrained(m, tmp_path)
    with torch.device("meta"):
        fresh = nn.Sequential(nn.Embedding(10, 16), nn.Linear(16, 10, bias=False))
    aoq.load_pretrained(fresh, tmp_path)
    assert fresh[0].weight is fresh[1].weight


@pytest.fixture()
def saved(tmp_path):
    config = aoq.Int8DynamicActivationInt4WeightConfig(act_scale=0.03)
    aoq.save_pretrained(aoq.quantize_(_model(torch.float32), config), tmp_path)
    return tmp_path


def _meta_model():
    with torch.device("meta"):
        return _model(torch.float32)


def _edit_meta(path: Path, fn):
    meta = json.loads((path / "aoq.json").read_text())
    fn(meta)
    (path / "aoq.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "tamper, match",
    [
        (lambda m: m.update(format_version=99), "format_version 99 is not supported"),
        (lambda m: m.update(format="other"), "'format' must be 'aoq'"),
        (lambda m: m["tensors"]["0.weight"].update({"class": "Evil"}), "unknown tensor class"),
        (lambda m: m["tensors"]["0.weight"].update(shape=[128, 256]), "expected"),
        (lambda m: m["modules"]["0"]["config"].update(version=7), "version 7 is not supported"),
        (
            lambda m: m["tensors"]["0.weight"]["attrs"].update(act={"enum": "os", "value": 1}),
            "unknown enum",
        ),
    ],
)
def test_tampered_metadata_is_a_clear_error(saved, tamper, match):
    _edit_meta(saved, tamper)
    with pytest.raises(aoq.CheckpointError, match=match):
        aoq.load_pretrained(_meta_model(), saved)


def test_tampered_tensors_are_clear_errors(saved):
    flat = load_file(str(saved / "model.safetensors"))
    flat["0.weight:qdata"] = flat["0.weight:qdata"][:, :10].contiguous()
    save_file(flat, str(saved / "model.safetensors"))
    with pytest.raises(aoq.CheckpointError, match="qdata"):
        aoq.load_pretrained(_meta_model(), saved)
    del flat["0.weight:qdata"]
    save_file(flat, str(saved / "model.safetensors"))
    with pytest.raises(aoq.CheckpointError, match="missing"):
        aoq.load_pretrained(_meta_model(), saved)


def test_truncated_and_missing_files(saved):
    data = (saved / "model.safetensors").read_bytes()
    (saved / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(aoq.CheckpointError, match="cannot be read"):
        aoq.load_pretrained(_meta_model(), saved)
    (saved / "aoq.json").write_text("{not json")
    with pytest.raises(aoq.CheckpointError, match="not valid JSON"):
        aoq.load_pretrained(_meta_model(), saved)
    with pytest.raises(aoq.CheckpointError, match="missing"):
        aoq.load_pretrained(_meta_model(), saved / "nowhere")


def test_wrong_model_is_a_clear_error(saved):
    with torch.device("meta"):
        other = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 16))
    with pytest.raises(aoq.CheckpointError, match="shape"):
        aoq.load_pretrained(other, saved)


class _Exploit:
    def __reduce__(self):
        return (print, ("pwned",))


def test_hostile_pickle_never_executes(tmp_path, capsys):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"w": _Exploit()}, f)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    assert "pwned" not in capsys.readouterr().out


def test_tampered_pickled_tensor_fails_validation(tmp_path):
    from aoq.tensors.base import _rebuild_aoq_tensor

    w = aoq.quantize_(nn.Linear(64, 32), aoq.Int8WeightOnlyConfig()).weight
    parts = w.tensors()
    parts["qdata"] = parts["qdata"][:, :8]
    with pytest.raises(ValueError, match="qdata"):
        _rebuild_aoq_tensor(type(w), tuple(w.shape), w.dtype, parts, w.attrs())


def test_checkpoint_holds_no_enum_objects(tmp_path):
    """How Python pickles an enum member changed between releases (3.11.2 pickles
    getattr(cls, name), which weights_only refuses): attrs are stored as plain values."""
    import pickletools
    import zipfile

    m = aoq.quantize_(_model(torch.float32), aoq.Int8DynamicActivationInt4WeightConfig())
    torch.save(m.state_dict(), tmp_path / "sd.pt")
    with zipfile.ZipFile(tmp_path / "sd.pt") as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    globals_used = {arg for op, arg, _ in pickletools.genops(data) if op.name == "GLOBAL"}
    assert not any("ActQuant" in str(g) or "getattr" in str(g) for g in globals_used)
