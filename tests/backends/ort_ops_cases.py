"""One-op ONNX models (opset 17) of the runtime's integer, index, reduction and
value-shaped ops, for ort_check.sh to run on qfx and on ONNX Runtime.

    python ort_ops_cases.py DIR            writes DIR/NAME.onnx, DIR/NAME.inK.npy, DIR/cases.txt
    python ort_ops_cases.py --compare DIR  compares DIR/NAME.{reference,onednn}.npy with DIR/NAME.ort.npy

cases.txt holds one line per model: its name, then its input files in order.
Integer and bool outputs must be equal; float outputs within 1e-5 of ONNX Runtime's
(relative to the largest magnitude, at least 1). Exit 0 when every case agrees.
"""
import os
import sys

import numpy as np

F, I64, I32 = np.float32, np.int64, np.int32


class Writer:
    """Writes one-op models and their inputs into a folder, and the list of cases."""

    def __init__(self, out):
        self.out, self.lines = out, []

    def save(self, name, nodes, inputs, consts, ydt):
        """inputs / consts: lists of (name, array); the graph's output is 'y' of dtype ydt."""
        import onnx
        from onnx import helper, numpy_helper
        tt = helper.np_dtype_to_tensor_dtype
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, tt(a.dtype), a.shape) for n, a in inputs],
                              [helper.make_tensor_value_info("y", tt(np.dtype(ydt)), None)],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in consts])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.save(m, os.path.join(self.out, name + ".onnx"))
        files = []
        for k, (_, a) in enumerate(inputs):
            files.append(os.path.join(self.out, "%s.in%d.npy" % (name, k)))
            np.save(files[-1], a)
        self.lines.append(" ".join([name] + files))

    def one(self, name, op, ins, ydt, outputs=("y",), **attrs):
        """One node reading `ins` [(name, array, is_graph_input)]."""
        from onnx import helper
        node = helper.make_node(op, [n for n, _, _ in ins], list(outputs), **attrs)
        self.save(name, [node], [(n, a) for n, a, i in ins if i], [(n, a) for n, a, i in ins if not i], ydt)

    def finish(self):
        with open(os.path.join(self.out, "cases.txt"), "w") as fh:
            fh.write("\n".join(self.lines) + "\n")


def x(a):
    """The graph input x."""
    return ("x", a, True)


def c(n, a):
    """An initializer."""
    return (n, np.asarray(a), False)


def elementwise_cases(w, rng):
    """Integer arithmetic, Mod, Min / Max, comparisons, Where, Cast, unary math."""
    one = w.one
    ints = rng.integers(-20, 20, (3, 4)).astype(I64)
    div = np.array([-7, -3, 2, 5], I64)
    f = rng.normal(0, 1, (3, 4)).astype(F)
    for op in ("Add", "Sub", "Mul", "Div"):
        one("%s_int64" % op.lower(), op, [x(ints), ("b", div, True)], I64)
    one("div_int32", "Div", [x(ints.astype(I32)), c("b", div.astype(I32))], I32)
    one("pow_int64", "Pow", [x(rng.integers(-3, 4, (3, 4)).astype(I64)), c("e", np.array([0, 1, 2, 5], I64))], I64)
    one("pow_float_int", "Pow", [x(f), c("e", np.array([0, 1, 2, 3], I64))], F)
    one("mod_int64", "Mod", [x(ints), c("b", div)], I64)
    one("mod_int64_fmod", "Mod", [x(ints), c("b", div)], I64, fmod=1)
    one("mod_float_fmod", "Mod", [x(f * 5), c("b", np.array([1.5, -2, 0.7, 3], F))], F, fmod=1)
    one("min3", "Min", [x(f), c("a", rng.normal(0, 1, (4,)).astype(F)), c("b", rng.normal(0, 1, (3, 1)).astype(F))], F)
    one("max_int64", "Max", [x(ints), c("b", np.array([[0], [5], [-30]], I64))], I64)
    one("less_int64", "Less", [x(ints), c("b", np.array([0, -5, 5, 19], I64))], np.bool_)
    one("equal_int32", "Equal", [x(ints.astype(I32) % 3), c("b", np.array([0, 1, 2, 0], I32))], np.bool_)
    one("where_int64", "Where", [("cond", ints > 0, True), x(ints), c("b", np.array([-1, -2, -3, -4], I64))], I64)
    one("xor", "Xor", [x(ints > 0), c("b", np.array([True, False, True, False]))], np.bool_)
    for op in ("Neg", "Abs", "Sign"):
        one("%s_int32" % op.lower(), op, [x(ints.astype(I32))], I32)
    casts = [("float_int8", np.clip(f * 40, -127, 127), 3, np.int8), ("float_uint8", np.clip(np.abs(f) * 60, 0, 250), 2, np.uint8), ("int64_float", ints, 1, F),
             ("int32_bool", ints.astype(I32) % 2, 9, np.bool_), ("bool_int64", ints > 0, 7, I64),
             ("uint8_int8", np.array([0, 1, 127, 200, 255], np.uint8), 3, np.int8), ("float_int64", f * 1e3, 7, I64)]
    for name, a, to, dt in casts:
        one("cast_" + name, "Cast", [x(np.asarray(a))], dt, to=to)
    unit = rng.uniform(-0.9, 0.9, (3, 4)).astype(F)
    for op in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"):
        one(op.lower(), op, [x(unit)], F)
    one("acosh", "Acosh", [x(rng.uniform(1, 5, (3, 4)).astype(F))], F)
    one("round", "Round", [x(np.arange(-3.5, 3.5, 0.5, dtype=F).reshape(2, 7))], F)
    special = np.array([1, np.nan, np.inf, -np.inf, 0], F)
    one("isnan", "IsNaN", [x(special)], np.bool_)
    one("isinf_positive", "IsInf", [x(special)], np.bool_, detect_negative=0)


def shape_cases(w, rng):
    """Reductions, scans, index ops, Tile, TopK, Split, LayerNormalization, Pad, value-shaped ops."""
    from onnx import helper, numpy_helper
    one, save = w.one, w.save
    ints = rng.integers(-20, 20, (3, 4)).astype(I64)
    f = rng.normal(0, 1, (3, 4)).astype(F)
    one("reducemax", "ReduceMax", [x(f)], F, axes=[1], keepdims=0)
    one("reducemin", "ReduceMin", [x(f)], F, axes=[0, -1], keepdims=1)
    one("reduceprod", "ReduceProd", [x(f)], F, axes=[1])
    one("reducemax_int64", "ReduceMax", [x(ints)], I64, keepdims=0)
    one("reducesum_noop", "ReduceSum", [x(f), c("axes", np.zeros((0,), I64))], F, noop_with_empty_axes=1)
    ties = rng.integers(0, 3, (3, 5)).astype(F)
    one("argmax_last", "ArgMax", [x(ties)], I64, axis=1, select_last_index=1)
    one("argmin", "ArgMin", [x(ties)], I64, axis=0, keepdims=0)
    one("cumsum", "CumSum", [x(f), c("axis", np.array(1, I64))], F, exclusive=1, reverse=1)
    one("cumsum_axis_input", "CumSum", [x(ints), ("axis", np.array(0, I64), True)], I64)
    one("gather_elements", "GatherElements", [x(f), c("i", np.array([[0, -1], [3, 1], [2, 2]], I64))], F, axis=1)
    one("gather_nd", "GatherND", [x(f), c("i", np.array([[2, 1], [0, -1]], I64))], F)
    one("scatter_nd_add", "ScatterND", [x(f), c("i", np.array([[1], [1], [0]], I64)), c("u", np.ones((3, 4), F))], F, reduction="add")
    one("scatter_elements", "ScatterElements", [x(f), c("i", np.array([[1, 0]], I64)), c("u", np.array([[9, 8]], F))], F, axis=1)
    one("tile", "Tile", [x(f), c("r", np.array([2, 3], I64))], F)
    one("topk", "TopK", [x(ties), c("k", np.array([3], I64))], F, outputs=("y", "i"), axis=1)
    one("topk_indices_smallest", "TopK", [x(ties), c("k", np.array([2], I64))], I64, outputs=("v", "y"), axis=0, largest=0)
    one("split", "Split", [x(f), c("s", np.array([1, 3], I64))], F, outputs=("a", "y"), axis=1)
    one("layer_norm", "LayerNormalization", [x(f * 3 + 1), c("s", rng.normal(1, 0.2, (4,)).astype(F)),
                                             c("b", rng.normal(0, 0.2, (4,)).astype(F))], F, epsilon=1e-3)
    one("pad_reflect", "Pad", [x(f), c("p", np.array([1, 2, 0, 3], I64))], F, mode="reflect")
    one("pad_edge", "Pad", [x(ints), c("p", np.array([2, 0, 1, 1], I64))], I64, mode="edge")
    one("pad_constant_crop", "Pad", [x(f), c("p", np.array([0, -1, 1, 2], I64)), c("v", np.array(-1.5, F))], F)
    # Shapes from values: the planner folds Shape -> Gather into Range / ConstantOfShape.
    dims = [helper.make_node("Shape", ["x"], ["shape"]), helper.make_node("Gather", ["shape", "one"], ["n"])]
    save("range_int64", dims + [helper.make_node("Range", ["n", "zero", "minus1"], ["y"])], [("x", f)],
         [("one", np.array(1, I64)), ("zero", np.array(0, I64)), ("minus1", np.array(-1, I64))], I64)
    save("range_float", dims + [helper.make_node("Cast", ["n"], ["nf"], to=1), helper.make_node("Range", ["half", "nf", "step"], ["y"])],
         [("x", f)], [("one", np.array(1, I64)), ("half", np.array(0.5, F)), ("step", np.array(0.75, F))], F)
    save("constant_of_shape", dims[:1] + [helper.make_node("ConstantOfShape", ["shape"], ["y"],
                                                           value=numpy_helper.from_array(np.array([7], I64)))],
         [("x", f)], [], I64)


def compare(out):
    """True when every case's qfx outputs (both backends) agree with ONNX Runtime's."""
    ok = True
    for line in open(os.path.join(out, "cases.txt")):
        name = line.split()[0]
        want = np.load(os.path.join(out, name + ".ort.npy"))
        for backend in ("reference", "onednn"):
            path = os.path.join(out, "%s.%s.npy" % (name, backend))
            if not os.path.exists(path):
                print("FAIL %s (%s): qfx wrote no output" % (name, backend))
                ok = False
                continue
            got = np.load(path)
            if got.shape == () and want.shape == (1,):  # run.py's np.ascontiguousarray makes a 0-d output 1-d
                want = want.reshape(())
            if got.shape != want.shape or got.dtype != want.dtype:
                good, what = False, "shape %s %s vs ONNX Runtime %s %s" % (got.shape, got.dtype, want.shape, want.dtype)
            elif want.dtype.kind == "f":
                scale = max(1.0, float(np.nanmax(np.abs(want))) if want.size else 1.0)
                same_nan = np.array_equal(np.isnan(got), np.isnan(want))
                err = float(np.nanmax(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0
                good, what = same_nan and err <= 1e-5, "max difference %.3g relative%s" % (err, "" if same_nan else ", NaNs differ")
            else:
                good, what = bool(np.array_equal(got, want)), "equal" if np.array_equal(got, want) else "differ: %s vs %s" % (got.ravel()[:8], want.ravel()[:8])
            print("%s %s (%s): %s" % ("ok  " if good else "FAIL", name, backend, what))
            ok = ok and good
    return ok


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        sys.exit(0 if compare(sys.argv[2]) else 1)
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    os.makedirs(sys.argv[1], exist_ok=True)
    rng, w = np.random.default_rng(11), Writer(sys.argv[1])
    elementwise_cases(w, rng)
    shape_cases(w, rng)
    w.finish()
