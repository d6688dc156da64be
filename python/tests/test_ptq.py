"""qfx.ptq against the qfx command on the same config, and its error classes."""

import json
import subprocess

import pytest
import qfx
from conftest import QUICK


def _cli_ptq(cli, out_dir, *args):
    sets = [a for k, v in QUICK.items() for a in ("--set", f"{k}={v}")]
    return subprocess.run([cli, "ptq", *args, *sets, "--set", f"output.dir={out_dir}"], capture_output=True, text=True)


def test_ptq_default_job_equals_the_cli(tmp_path, cli):
    r = qfx.ptq(overrides={**QUICK, "output.dir": str(tmp_path / "py")}, progress=False)
    done = _cli_ptq(cli, tmp_path / "cli")
    assert done.returncode == 0, done.stderr
    # the same engine: the same bytes, the same numbers
    assert r.model_int8.read_bytes() == (tmp_path / "cli" / "model_int8.onnx").read_bytes()
    assert r.encodings.read_bytes() == (tmp_path / "cli" / "encodings.json").read_bytes()
    cli_eval = json.loads((tmp_path / "cli" / "report.json").read_text())["evaluation"]
    assert r.metrics["top1_fp32"] == cli_eval["top1_fp32"]
    assert r.metrics["top1_int8"] == cli_eval["top1_int8"]
    assert r.metrics["top1_int8"] > 0.85
    assert r.reference_images == 512 and r.reference_identical == 512
    cli_layers = json.loads((tmp_path / "cli" / "report.json").read_text())["per_layer_sqnr"]["layers"]
    assert [(l.node, l.sqnr_db_fakequant, l.sqnr_db_int8) for l in r.layers] == \
        [(l["node"], l["sqnr_db_fakequant"], l.get("sqnr_db_int8")) for l in cli_layers]
    assert any(l.sqnr_db_int8 is not None for l in r.layers)
    assert r.range_advice == json.loads((tmp_path / "cli" / "report.json").read_text())["range_advice"]
    assert r.layers[0].sqnr_db_fakequant <= r.layers[-1].sqnr_db_fakequant  # worst first
    assert r.report_html is not None and r.report_html.is_file()
    assert set(r.files) >= {r.model_int8, r.encodings, r.report_json}


def test_dict_config_paths_are_relative_to_the_current_directory(tmp_path, fixtures, monkeypatch):
    monkeypatch.chdir(fixtures)
    cfg = {"model": {"path": "fashion_resnet.pt", "input_shape": [-1, 1, 28, 28]},
           "calibration": {"data": {"format": "idx",
                                    "images": "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"},
                           "num_samples": 64, "batch_size": 32},
           "output": {"dir": str(tmp_path / "out")}}
    r = qfx.ptq(cfg, progress=False)
    assert r.model_int8.is_file() and r.output_dir == tmp_path / "out"
    assert r.metrics == {}  # no evaluation section


def test_errors_mirror_the_cli_exit_codes(tmp_path, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  path: x.pt\ncalibraton:\n  num_samples: 4\n")
    with pytest.raises(qfx.ConfigError) as e:
        qfx.ptq(bad, progress=False)
    assert f"{bad}:3:1: unknown key 'calibraton'" in str(e.value) and "did you mean 'calibration'" in str(e.value)
    done = subprocess.run([cli, "ptq", str(bad)], capture_output=True, text=True)
    assert done.returncode == e.value.exit_code == 3
    assert str(e.value) in done.stderr


def test_missing_model_is_an_io_error_and_writes_nothing(tmp_path, cli):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model: {path: missing.pt, input_shape: [-1, 1, 28, 28]}\n"
                   "calibration:\n  data: {format: idx, images: /usr/share/datasets/fashion-mnist/"
                   "train-images-idx3-ubyte.gz}\n  num_samples: 8\noutput: {dir: out}\n")
    with pytest.raises(qfx.IoError) as e:
        qfx.ptq(cfg, progress=False)
    assert str(tmp_path / "missing.pt") in str(e.value)
    assert isinstance(e.value, qfx.Error) and e.value.exit_code == 7
    assert subprocess.run([cli, "ptq", str(cfg)], capture_output=True).returncode == 7
    assert not (tmp_path / "out").exists()


def test_dict_config_syntax_and_override_errors(tmp_path):
    with pytest.raises(qfx.ConfigError, match=r"<config dict>:\d+:\d+: unknown key 'bogus'"):
        qfx.ptq({"model": {"path": "m.pt"}, "bogus": 1}, progress=False)
    with pytest.raises(qfx.ConfigError, match="calibration.num_samples"):
        qfx.ptq(None, overrides=["calibration.num_samples=many"], progress=False)
    with pytest.raises(qfx.ArgumentError):
        qfx.ptq(None, overrides="calibration.num_samples=4", progress=False)
    with pytest.raises(qfx.ArgumentError):
        qfx.ptq(42, progress=False)


def test_error_classes_follow_the_exit_codes():
    from qfx import errors
    codes = {errors.error_class(c).__name__: c for c in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)}
    assert codes == {"InternalError": 1, "Error": 2, "ConfigError": 3, "TraceError": 4, "UnsupportedOpError": 5,
                     "DataError": 6, "IoError": 7, "ExecutionError": 8, "ReferenceCheckError": 9,
                     "DistributedError": 10, "ArgumentError": 11}
    assert errors.error_class(99) is errors.Error


def test_another_torch_is_refused(monkeypatch):
    from qfx import _build_info, _load
    monkeypatch.setattr(_build_info, "TORCH_VERSION", "1.0.0")
    with pytest.raises(ImportError, match=r"built against torch 1\.0\.0, but this Python has torch"):
        _load.load_extension()


def test_the_qfx_command_runs_the_binary():
    import sys
    done = subprocess.run([sys.executable, "-m", "qfx", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith(f"qfx {qfx.__version__} (libtorch")
