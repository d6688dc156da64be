#!/usr/bin/env python3
"""timm's model families, as users export them, through `qfx ptq`.

    timm_zoo.py families [-o DIR]           each family (the timm.models module a model comes
                                            from) and its smallest model by parameter count
                                            (counted on the meta device: nothing built, nothing
                                            downloaded), cached in DIR/families.json
    timm_zoo.py run [-o DIR] [--family REGEX] [--limit N] [--timeout S]
                                            the families matching REGEX (all by default, at
                                            most N), each in its own process killed after S
                                            seconds (default 900); prints the markdown table,
                                            exit status 1 if any row fails its rule
    timm_zoo.py table [-o DIR]              the table again from DIR's results

Each family's smallest model is built by `timm.create_model(name, pretrained=False)` (random
weights; torch.manual_seed(0)), for the smallest input of 64, 96, 128, 160 and 224 pixels
(then pretrained_cfg's input_size) it runs on: models whose size is fixed at construction
(vision transformers) are built for it with img_size=. Batch-norm statistics are
re-estimated on random inputs and all-zero weights re-drawn (tools/zoo/zoo.py's
reinit_zero_heads). Then tools/zoo/hf.py's measurement: torch.export with a dynamic batch
(Dim "batch"), 32 calibration and 16 evaluation N(0, 1) images, qfx ptq (metric cosine),
PT2E (X86InductorQuantizer), ONNX Runtime on qfx's int8 model, and hf.py's rule. Results
in DIR (default build/zoo_timm), one FAMILY.result.json each.
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random weights: never fetch

import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf  # noqa: E402
from zoo import reinit_zero_heads  # noqa: E402

SIZES = (64, 96, 128, 160, 224)


def params_on_meta(name):
    """The parameter count of timm model `name`, built on the meta device; None where it
    cannot be built there."""
    import timm
    try:
        with torch.device("meta"):
            m = timm.create_model(name, pretrained=False)
        return sum(p.numel() for p in m.parameters())
    except Exception:
        return None


def family(mod):
    """{"model": the smallest model of timm.models.MOD, "params": its count, "models": how many}."""
    import timm
    counts = [(params_on_meta(n), n) for n in timm.list_models(module=mod)]
    built = sorted((c, n) for c, n in counts if c is not None)
    return {"model": built[0][1] if built else None, "params": built[0][0] if built else None, "models": len(counts)}


def families(out, only=None):
    """{family: family(...)} for timm's modules (those `only` accepts), cached in
    DIR/families.json one family at a time."""
    import timm
    path = os.path.join(out, "families.json")
    fams = json.load(open(path)) if os.path.exists(path) else {}
    for mod in timm.list_modules():
        if mod in fams or (only is not None and not only(mod)):
            continue
        fams[mod] = family(mod)
        print("%s: %s (%s parameters, %d models)" % (mod, fams[mod]["model"], fams[mod]["params"],
                                                     fams[mod]["models"]), file=sys.stderr, flush=True)
        with open(path + ".tmp", "w") as f:
            json.dump(fams, f, indent=1)
        os.replace(path + ".tmp", path)
    return {m: fams[m] for m in timm.list_modules() if m in fams}


def build(name):
    """(model, input size) for the smallest size of SIZES, then pretrained_cfg's, it runs on."""
    import timm
    cfg_size = timm.models.get_pretrained_cfg(name)
    cfg_size = cfg_size.input_size[-1] if cfg_size is not None else 224
    errors = []
    for s in SIZES + (cfg_size,):
        for kw in ({"img_size": s}, {}):
            try:
                torch.manual_seed(0)
                m = timm.create_model(name, pretrained=False, **kw).eval()
                with torch.no_grad():
                    m(torch.randn(2, 3, s, s))
                return m, s
            except Exception as e:
                errors.append("%d %s: %s" % (s, kw, hf.short(e)))
    raise RuntimeError("no input size works: " + errors[-1])


def prepare(m, size):
    """Batch-norm statistics of random inputs and no all-zero weights (random weights)."""
    reinit_zero_heads(m)
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(8, 3, size, size))
    return m.eval()


def one(family, name, out, qfx):
    """Measures one family's model (in this process); writes FAMILY.result.json."""
    torch.set_num_threads(int(os.environ.get("QFX_ZOO_THREADS", "1")))
    r = {"case": family, "model": name}
    try:
        m, size = build(name)
        m = prepare(m, size)
    except Exception as e:
        r.update(hf.failed(family, "building the model: " + hf.short(e)))
    else:
        rng = np.random.default_rng(0)
        cal = {"x": rng.normal(0, 1, (hf.CAL, 3, size, size)).astype(np.float32)}
        ev = {"x": rng.normal(0, 1, (hf.EVAL, 3, size, size)).astype(np.float32)}
        r.update(hf.measure_or_fail(family, m, cal, ev, out, qfx), model=name, size=size)
    with open(os.path.join(out, family + ".result.json"), "w") as f:
        json.dump(r, f, indent=1)


HEADER = ("| family | model | input | export | int8 ops | float ops | qfx int8 cosine | PT2E cosine "
          "| ONNX Runtime vs qfx | pass |\n|---|---|---|---|---|---|---|---|---|---|")


def row(r):
    cells = hf.row(r, r["case"], None).split(" | ")  # | family | - | export ... |
    size = "%dx%d" % (r["size"], r["size"]) if r.get("size") else ""
    return " | ".join([cells[0], r.get("model") or "", size] + cells[2:])


def table(out, fams):
    ok, lines = True, [HEADER]
    for fam in fams:
        path = os.path.join(out, fam + ".result.json")
        if os.path.exists(path):
            r = json.load(open(path))
            r["pass"] = hf.passes(r)  # the current rule
            ok &= r["pass"]
            lines.append(row(r))
    print("\n".join(lines))
    return ok


def run(out, pattern, limit, timeout):
    import timm
    chosen = [f for f in timm.list_modules() if re.search(pattern, f)][:limit]
    ok = True
    for fam in chosen:
        fams = families(out, only=lambda m: m == fam)  # the smallest model, found when needed
        name = fams[fam]["model"]
        print("== %s (%s)" % (fam, name), file=sys.stderr, flush=True)
        path = os.path.join(out, fam + ".result.json")
        if os.path.exists(path):
            os.remove(path)
        if not name:
            with open(path, "w") as f:
                json.dump(dict(hf.failed(fam, "no model of the family builds on the meta device"), model=None), f)
        try:
            if name:
                subprocess.run([sys.executable, os.path.abspath(__file__), "one", fam, name, "-o", out],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, fam + ".py.log"), "w"),
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        if not os.path.exists(path):
            step = hf.last_stage(os.path.join(out, fam + ".log")) or "building the model"
            why = "not finished in %d s (or crashed) at: %s" % (timeout, step)
            with open(path, "w") as f:
                json.dump(dict(hf.failed(fam, why), model=name), f)
        r = json.load(open(path))
        ok &= r["pass"]
        print("   " + row(r), file=sys.stderr, flush=True)
    return table(out, chosen) and ok


def main(argv):
    out = os.path.join(hf.ROOT, "build", "zoo_timm")
    opts = {"--family": ".", "--limit": "1000", "--timeout": "900", "-o": out}
    cmd, rest = (argv[0] if argv else ""), []
    it = iter(argv[1:])
    for a in it:
        if a in opts:
            opts[a] = next(it)
        else:
            rest.append(a)
    out = os.path.abspath(opts["-o"])
    os.makedirs(out, exist_ok=True)
    qfx = os.environ.get("QFX", os.path.join(hf.ROOT, "build", "tools", "qfx"))
    if cmd == "one" and len(rest) == 2:
        one(rest[0], rest[1], out, qfx)
        return 0
    if cmd not in ("families", "run", "table") or rest:
        sys.exit(__doc__)
    if cmd == "run":
        if not os.access(qfx, os.X_OK):
            sys.exit("timm_zoo.py: %s not found: build qfx first (README) or set QFX" % qfx)
        return 0 if run(out, opts["--family"], int(opts["--limit"]), int(opts["--timeout"])) else 1
    fams = families(out) if cmd == "families" else json.load(open(os.path.join(out, "families.json")))
    if cmd == "families":
        for f, d in fams.items():
            print(f, d["model"], d["params"])
        return 0
    return 0 if table(out, fams) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
