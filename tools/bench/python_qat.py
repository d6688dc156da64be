"""QAT from Python against `qfx qat`, side by side in one run: the default QAT job
(configs/qat/fashion_mobilenet.yaml) trained for the same number of steps by the C++
loop and by a plain PyTorch loop over qfx.prepare_qat, with the job's optimizer,
cosine schedule, batch size, BN-freeze and observer-disable steps and calibration
pass. Prints each side's ms per training step (and the ratio), and fake-quant and
int8 top-1 on the evaluation images.

    PYTHONPATH=build/python .venv/bin/python tools/bench/python_qat.py --steps 300

Run from the repository root after `cmake --build build`. The two loops draw their
batches in different orders (the C++ loop shuffles with std::mt19937_64), so their
accuracies differ by the run-to-run spread of QAT itself."""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "tests"))
import qfx  # noqa: E402
from fashion import images, labels  # noqa: E402


def cpp_run(cli, steps, eval_n, out, fixtures):
    sets = {"training.max_steps": steps, "evaluation.num_samples": eval_n, "evaluation.reference_check": 0,
            "output.dir": out}
    cmd = [cli, "qat"] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "QFX_BUSY_CHECK": "0", "QFX_FIXTURES": fixtures})
    if done.returncode != 0:
        sys.exit(f"qfx qat failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    r = json.loads((Path(out) / "report.json").read_text())
    return r["training"]["ms_per_step"], r["evaluation"]["top1_fakequant"], r["evaluation"]["top1_int8"]


def python_run(cfg, model, steps, eval_n, out):
    tr = cfg["training"]
    x, y = images("train"), labels("train")
    xt, yt = images("t10k")[:eval_n], labels("t10k")[:eval_n]
    m = qfx.prepare_qat(model, (x[:2],), target=cfg["backend"], qconfig=cfg["qconfig"])
    cal = cfg["calibration"]  # observers start from one pass over the calibration images
    m.eval()
    m.set_quant_state("calibration")
    with torch.no_grad():
        for k in range(0, cal["num_samples"], cal["batch_size"]):
            m(x[k:k + cal["batch_size"]])
    m.set_quant_state("fake_quant")
    opt_cfg = tr["optimizer"]
    opt = torch.optim.SGD(m.parameters(), lr=opt_cfg["lr"], momentum=opt_cfg["momentum"],
                          weight_decay=opt_cfg["weight_decay"])
    bs, per_epoch = tr["batch_size"], math.ceil(x.shape[0] / tr["batch_size"])
    m.train()
    step, spent = 0, 0.0
    while step < steps:
        order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(tr["seed"] + step // per_epoch))
        for k in range(per_epoch):
            if step >= steps:
                break
            if step == tr["freeze_bn_after"]:
                m.freeze_bn_stats()
            if step == tr["disable_observer_after"]:
                m.disable_observer()
            t0 = time.perf_counter()
            for g in opt.param_groups:
                g["lr"] = 0.5 * opt_cfg["lr"] * (1 + math.cos(math.pi * step / steps))
            b = order[k * bs:(k + 1) * bs]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x[b]), y[b])
            loss.backward()
            opt.step()
            spent += time.perf_counter() - t0
            step += 1
    m.eval()
    with torch.no_grad():
        fq = torch.cat([m(xt[k:k + 500]) for k in range(0, len(xt), 500)])
    r = qfx.convert(m, out)
    (q,) = qfx.runtime.Model(r.model_int8).run(xt).values()
    return 1000 * spent / steps, (fq.argmax(1) == yt).float().mean().item(), (q.argmax(1) == yt).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--eval", type=int, default=10000, help="evaluation images")
    ap.add_argument("--cli", default="build/tools/qfx")
    a = ap.parse_args()
    with open(qfx._load_extension().find_config("qat/fashion_mobilenet.yaml")) as f:
        cfg = yaml.safe_load(f)
    fixtures = str(Path(os.environ.get("QFX_FIXTURES", "build/fixtures")).resolve())
    model = os.path.join(fixtures, "fashion_mobilenet.pt")
    with tempfile.TemporaryDirectory() as tmp:
        c = cpp_run(a.cli, a.steps, a.eval, os.path.join(tmp, "cpp"), fixtures)
        p = python_run(cfg, model, a.steps, a.eval, os.path.join(tmp, "py"))
    print(f"default QAT job, {a.steps} steps, batch {cfg['training']['batch_size']}, {torch.get_num_threads()} threads, "
          f"top-1 on {a.eval} test images")
    print(f"{'loop':<10}{'ms/step':>10}{'fake-quant':>12}{'int8':>10}")
    for name, (ms, fq, q) in (("qfx qat", c), ("Python", p)):
        print(f"{name:<10}{ms:>10.1f}{100 * fq:>11.2f}%{100 * q:>9.2f}%")
    print(f"Python / C++ step time: {p[0] / c[0]:.2f}x; int8 top-1 difference {100 * (p[2] - c[2]):+.2f} points")


if __name__ == "__main__":
    main()
