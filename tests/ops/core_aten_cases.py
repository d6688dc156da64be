"""One-op torch.export programs, one or more per Core ATen operator.

Usage: core_aten_cases.py OUT_DIR

Writes, for every case below, OUT_DIR/<case>/model.pt2 (a program whose graph calls
the one Core ATen overload, as ``torch.export.export`` writes it, with a dynamic batch
where the op allows one), the test inputs in0.npy, in1.npy, ... (at a batch other than
the traced one when the batch is dynamic) and PyTorch's outputs out0.npy, ...; and
OUT_DIR/manifest.json listing the cases (op name, overload, input shapes with -1 for a
dynamic dimension, dtypes). ``qfx_op_check`` runs them through qfx and compares.

The operator set is the one ``torch.Tag.core`` marks (the Core ATen IR of
https://pytorch.org/docs/stable/torch.compiler_ir.html); ``core_names()`` reads it
from the installed torch, so an op torch adds to the set shows up as "no case".
"""
import json
import os
import sys

import numpy as np
import torch

aten = torch.ops.aten
TRACE_BATCH, TEST_BATCH = 2, 3


def f32(*shape, lo=-2.0, hi=2.0):
    return ("f32", shape, lo, hi)


def pos(*shape):
    return ("f32", shape, 0.1, 3.0)


def i64(*shape, lo=0, hi=5):
    return ("i64", shape, lo, hi)


def i32(*shape, lo=-50, hi=50):
    return ("i32", shape, lo, hi)


def boolean(*shape):
    return ("bool", shape, 0, 2)


def make(spec, batch, gen):
    kind, shape, lo, hi = spec
    shape = tuple(batch if d == "B" else d for d in shape)
    if kind == "f32":
        return torch.rand(shape, generator=gen) * (hi - lo) + lo
    t = torch.randint(lo, hi, shape, generator=gen)
    return {"i64": t.long(), "i32": t.int(), "bool": t.bool()}[kind]


class Case:
    """One program: `fn(params, *inputs)` calls one op; `inputs` are specs whose "B"
    dims are the batch (dynamic when the op lets torch.export keep it so)."""

    def __init__(self, name, op, fn, inputs, params=None):
        self.name, self.op, self.fn, self.inputs, self.params = name, op, fn, inputs, params or {}


class OneOp(torch.nn.Module):
    def __init__(self, case, gen):
        super().__init__()
        self.fn = case.fn
        for k, spec in case.params.items():
            self.register_buffer(k, make(spec, 1, gen))

    def forward(self, *xs):
        return self.fn(self, *xs)


def cases():
    """The cases: (name, core op name, body, input specs[, parameter specs])."""
    c = []

    def add(name, op, fn, inputs, params=None):
        c.append(Case(name, op, fn, inputs, params))

    x4 = f32("B", 3, 8, 8)
    x3 = f32("B", 4, 6)
    # Elementwise unary math.
    for op, spec in [("abs", x3), ("acos", f32("B", 4, 6, lo=-0.9, hi=0.9)), ("acosh", f32("B", 4, 6, lo=1.1, hi=4)),
                     ("asin", f32("B", 4, 6, lo=-0.9, hi=0.9)), ("asinh", x3), ("atan", x3),
                     ("atanh", f32("B", 4, 6, lo=-0.9, hi=0.9)), ("ceil", x3), ("cos", x3), ("cosh", x3), ("erf", x3),
                     ("exp", x3), ("expm1", x3), ("floor", x3), ("log", pos("B", 4, 6)), ("log10", pos("B", 4, 6)),
                     ("log1p", pos("B", 4, 6)), ("log2", pos("B", 4, 6)), ("neg", x3), ("reciprocal", pos("B", 4, 6)),
                     ("relu", x3), ("round", f32("B", 4, 6, lo=-4, hi=4)), ("rsqrt", pos("B", 4, 6)), ("sigmoid", x3),
                     ("sign", x3), ("sin", x3), ("sinh", x3), ("sqrt", pos("B", 4, 6)), ("tan", f32("B", 4, 6, lo=-1.2, hi=1.2)),
                     ("tanh", x3), ("trunc", f32("B", 4, 6, lo=-4, hi=4)), ("isnan", special("B", 4, 6)),
                     ("isinf", special("B", 4, 6))]:
        add(op, op, (lambda o: lambda m, x: getattr(aten, o).default(x))(op), [spec])
    add("abs_i64", "abs", lambda m, x: aten.abs.default(x), [i64("B", 5, lo=-9, hi=9)])
    add("neg_i64", "neg", lambda m, x: aten.neg.default(x), [i64("B", 5, lo=-9, hi=9)])
    add("gelu", "gelu", lambda m, x: aten.gelu.default(x), [x3])
    add("gelu_tanh", "gelu", lambda m, x: aten.gelu.default(x, approximate="tanh"), [x3])
    add("elu", "elu", lambda m, x: aten.elu.default(x, 0.7), [x3])
    add("leaky_relu", "leaky_relu", lambda m, x: aten.leaky_relu.default(x, 0.2), [x3])
    add("hardtanh", "hardtanh", lambda m, x: aten.hardtanh.default(x, -0.5, 1.5), [x3])
    add("clamp", "clamp", lambda m, x: aten.clamp.default(x, -0.5, 1.0), [x3])
    add("clamp_min_only", "clamp", lambda m, x: aten.clamp.default(x, 0.25), [x3])
    add("clamp_tensor", "clamp", lambda m, x, lo, hi: aten.clamp.Tensor(x, lo, hi), [x3, f32(1, 6, lo=-1, hi=0), f32(4, 6, lo=0, hi=1)])
    add("clamp_i64", "clamp", lambda m, x: aten.clamp.default(x, 1, 3), [i64("B", 5, lo=-9, hi=9)])
    # Binary arithmetic (tensor / scalar overloads, broadcasting, integer dtypes).
    for op in ["add", "sub", "mul", "div"]:
        t = getattr(aten, op)
        add(f"{op}_tensor", op, (lambda t: lambda m, x, y: t.Tensor(x, y))(t), [x3, f32(1, 6, lo=0.5, hi=2)])
        add(f"{op}_scalar", op, (lambda t: lambda m, x: t.Scalar(x, 1.5))(t), [x3])
        if op != "div":
            add(f"{op}_i64", op, (lambda t: lambda m, x, y: t.Tensor(x, y))(t), [i64("B", 5, lo=-9, hi=9), i64(5, lo=-9, hi=9)])
    add("add_alpha", "add", lambda m, x, y: aten.add.Tensor(x, y, alpha=2), [x3, x3])
    add("div_trunc", "div", lambda m, x, y: aten.div.Tensor_mode(x, y, rounding_mode="trunc"), [f32("B", 6, lo=-9, hi=9), f32(6, lo=0.5, hi=3)])
    add("div_floor", "div", lambda m, x, y: aten.div.Tensor_mode(x, y, rounding_mode="floor"), [f32("B", 6, lo=-9, hi=9), f32(6, lo=0.5, hi=3)])
    add("div_floor_i64", "div", lambda m, x, y: aten.div.Tensor_mode(x, y, rounding_mode="floor"), [i64("B", 6, lo=-9, hi=9), i64(6, lo=1, hi=4)])
    add("div_scalar_mode", "div", lambda m, x: aten.div.Scalar_mode(x, 2.0, rounding_mode="floor"), [x3])
    add("pow_tensor_tensor", "pow", lambda m, x, y: aten.pow.Tensor_Tensor(x, y), [pos("B", 6), f32(6, lo=-2, hi=2)])
    add("pow_tensor_scalar", "pow", lambda m, x: aten.pow.Tensor_Scalar(x, 2), [x3])
    add("pow_scalar", "pow", lambda m, x: aten.pow.Scalar(2.0, x), [x3])
    add("atan2", "atan2", lambda m, x, y: aten.atan2.default(x, y), [x3, f32(4, 6)])
    add("fmod_tensor", "fmod", lambda m, x, y: aten.fmod.Tensor(x, y), [f32("B", 6, lo=-9, hi=9), f32(6, lo=0.5, hi=3)])
    add("fmod_scalar", "fmod", lambda m, x: aten.fmod.Scalar(x, 1.5), [f32("B", 6, lo=-9, hi=9)])
    add("remainder_tensor", "remainder", lambda m, x, y: aten.remainder.Tensor(x, y), [f32("B", 6, lo=-9, hi=9), f32(6, lo=0.5, hi=3)])
    add("remainder_scalar_i64", "remainder", lambda m, x: aten.remainder.Scalar(x, 4), [i64("B", 6, lo=-20, hi=20)])
    add("maximum", "maximum", lambda m, x, y: aten.maximum.default(x, y), [x3, f32(4, 6)])
    add("minimum", "minimum", lambda m, x, y: aten.minimum.default(x, y), [x3, f32(4, 6)])
    add("minimum_i64", "minimum", lambda m, x, y: aten.minimum.default(x, y), [i64("B", 6, lo=-9, hi=9), i64(6, lo=-9, hi=9)])
    # Comparisons and logic.
    for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
        t = getattr(aten, op)
        add(f"{op}_tensor", op, (lambda t: lambda m, x, y: t.Tensor(x, y))(t), [f32("B", 6, lo=-3, hi=3), f32(6, lo=-3, hi=3)])
        add(f"{op}_scalar", op, (lambda t: lambda m, x: t.Scalar(x, 0.5))(t), [x3])
        add(f"{op}_i64", op, (lambda t: lambda m, x, y: t.Tensor(x, y))(t), [i64("B", 6), i64(6)])
    for op in ["logical_and", "logical_or", "logical_xor"]:
        add(op, op, (lambda o: lambda m, x, y: getattr(aten, o).default(x, y))(op), [boolean("B", 6), boolean(6)])
    add("logical_not", "logical_not", lambda m, x: aten.logical_not.default(x), [boolean("B", 6)])
    add("logical_and_f32", "logical_and", lambda m, x, y: aten.logical_and.default(x, y), [f32("B", 6, lo=-1, hi=1), boolean(6)])
    for op in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
        t = getattr(aten, op)
        add(f"{op}_bool", op, (lambda t: lambda m, x, y: t.Tensor(x, y))(t), [boolean("B", 6), boolean(6)])
        add(f"{op}_i64", op, (lambda t: lambda m, x, y: t.Tensor(x, y))(t), [i64("B", 6, lo=0, hi=64), i64(6, lo=0, hi=64)])
        add(f"{op}_scalar", op, (lambda t: lambda m, x: t.Scalar(x, 6))(t), [i64("B", 6, lo=0, hi=64)])
    add("bitwise_not_bool", "bitwise_not", lambda m, x: aten.bitwise_not.default(x), [boolean("B", 6)])
    add("bitwise_not_i64", "bitwise_not", lambda m, x: aten.bitwise_not.default(x), [i64("B", 6, lo=-9, hi=9)])
    add("where", "where", lambda m, c, x, y: aten.where.self(c, x, y), [boolean("B", 6), f32("B", 6), f32(6)])
    add("where_i64", "where", lambda m, c, x, y: aten.where.self(c, x, y), [boolean("B", 6), i64("B", 6), i64(6)])
    # Reductions.
    add("sum_dim", "sum", lambda m, x: aten.sum.dim_IntList(x, [1, 2]), [x4])
    add("sum_keepdim", "sum", lambda m, x: aten.sum.dim_IntList(x, [-1], True), [x3])
    add("mean_dim", "mean", lambda m, x: aten.mean.dim(x, [-1, -2], True), [x4])
    add("mean_all", "mean", lambda m, x: aten.mean.default(x), [x3])
    add("prod_dim", "prod", lambda m, x: aten.prod.dim_int(x, 1), [f32("B", 4, 6, lo=0.5, hi=1.5)])
    add("prod_all", "prod", lambda m, x: aten.prod.default(x), [f32("B", 4, lo=0.5, hi=1.5)])
    add("amax", "amax", lambda m, x: aten.amax.default(x, [1]), [x3])
    add("amax_keepdim", "amax", lambda m, x: aten.amax.default(x, [1, 2], True), [x4])
    add("amin", "amin", lambda m, x: aten.amin.default(x, [-1]), [x3])
    add("any_dim", "any", lambda m, x: aten.any.dim(x, 1), [boolean("B", 6)])
    add("any_dims", "any", lambda m, x: aten.any.dims(x, [1, 2], True), [boolean("B", 3, 4)])
    add("any_all", "any", lambda m, x: aten.any.default(x), [boolean("B", 6)])
    add("argmax", "argmax", lambda m, x: aten.argmax.default(x, 1), [x3])
    add("argmax_keepdim", "argmax", lambda m, x: aten.argmax.default(x, -1, True), [x3])
    add("argmin", "argmin", lambda m, x: aten.argmin.default(x, 2), [x3])
    add("max_dim", "max", lambda m, x: aten.max.dim(x, 1), [x3])
    add("min_dim", "min", lambda m, x: aten.min.dim(x, -1, True), [x3])
    add("var_correction", "var", lambda m, x: aten.var.correction(x, [1], correction=1), [x3])
    add("var_correction0", "var", lambda m, x: aten.var.correction(x, [-1, -2], correction=0, keepdim=True), [x4])
    add("var_dim", "var", lambda m, x: aten.var.dim(x, [2], True), [x3])
    add("cumsum", "cumsum", lambda m, x: aten.cumsum.default(x, 1), [x3])
    add("cumsum_i64", "cumsum", lambda m, x: aten.cumsum.default(x, -1), [i64("B", 7)])
    add("topk", "topk", lambda m, x: aten.topk.default(x, 3), [x3])
    add("topk_smallest", "topk", lambda m, x: aten.topk.default(x, 2, 1, False), [x3])
    add("sort", "sort", lambda m, x: aten.sort.default(x, -1), [x3])
    add("sort_descending", "sort", lambda m, x: aten.sort.default(x, 1, True), [x3])
    # Softmax and normalization.
    add("softmax", "_softmax", lambda m, x: aten._softmax.default(x, -1, False), [x3])
    add("log_softmax", "_log_softmax", lambda m, x: aten._log_softmax.default(x, 1, False), [x3])
    add("native_layer_norm", "native_layer_norm", lambda m, x: aten.native_layer_norm.default(x, [6], m.w, m.b, 1e-5)[0],
        [x3], {"w": f32(6), "b": f32(6)})
    add("native_layer_norm_2d", "native_layer_norm", lambda m, x: aten.native_layer_norm.default(x, [4, 6], None, None, 1e-5)[0], [x3])
    add("native_group_norm", "native_group_norm",
        lambda m, x: aten.native_group_norm.default(x, m.w, m.b, x.shape[0], 4, 16, 2, 1e-5)[0], [f32("B", 4, 4, 4)],
        {"w": f32(4), "b": f32(4)})
    add("batch_norm_no_training", "_native_batch_norm_legit_no_training",
        lambda m, x: aten._native_batch_norm_legit_no_training.default(x, m.w, m.b, m.mean, m.var, 0.1, 1e-5)[0], [x4],
        {"w": f32(3), "b": f32(3), "mean": f32(3), "var": pos(3)})
    # Linear algebra, convolution, embedding.
    add("mm", "mm", lambda m, x: aten.mm.default(x, m.w), [f32("B", 6)], {"w": f32(6, 5)})
    add("bmm", "bmm", lambda m, x, y: aten.bmm.default(x, y), [f32("B", 4, 6), f32("B", 6, 3)])
    add("addmm", "addmm", lambda m, x: aten.addmm.default(m.b, x, m.w), [f32("B", 6)], {"w": f32(6, 5), "b": f32(5)})
    add("addmm_beta_alpha", "addmm", lambda m, x: aten.addmm.default(m.b, x, m.w, beta=0.5, alpha=2.0), [f32("B", 6)],
        {"w": f32(6, 5), "b": f32(5)})
    add("convolution_2d", "convolution",
        lambda m, x: aten.convolution.default(x, m.w, m.b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), [x4],
        {"w": f32(5, 3, 3, 3), "b": f32(5)})
    add("convolution_2d_groups_stride", "convolution",
        lambda m, x: aten.convolution.default(x, m.w, None, [2, 2], [0, 1], [1, 1], False, [0, 0], 3), [f32("B", 6, 8, 8)],
        {"w": f32(6, 2, 3, 3)})
    add("convolution_1d", "convolution",
        lambda m, x: aten.convolution.default(x, m.w, m.b, [1], [2], [2], False, [0], 1), [f32("B", 3, 10)],
        {"w": f32(4, 3, 3), "b": f32(4)})
    add("convolution_transposed", "convolution",
        lambda m, x: aten.convolution.default(x, m.w, m.b, [2, 2], [1, 1], [1, 1], True, [1, 1], 1), [x4],
        {"w": f32(3, 4, 3, 3), "b": f32(4)})
    add("embedding", "embedding", lambda m, i: aten.embedding.default(m.w, i), [i64("B", 5, lo=0, hi=10)], {"w": f32(10, 4)})
    # Pooling and resampling.
    add("avg_pool2d", "avg_pool2d", lambda m, x: aten.avg_pool2d.default(x, [2, 2], [2, 2]), [x4])
    add("avg_pool2d_pad", "avg_pool2d", lambda m, x: aten.avg_pool2d.default(x, [3, 3], [2, 2], [1, 1], False, False), [x4])
    add("max_pool2d_with_indices", "max_pool2d_with_indices",
        lambda m, x: aten.max_pool2d_with_indices.default(x, [3, 3], [2, 2], [1, 1])[0], [x4])
    add("adaptive_avg_pool2d", "_adaptive_avg_pool2d", lambda m, x: aten._adaptive_avg_pool2d.default(x, [4, 4]), [x4])
    add("adaptive_avg_pool2d_global", "_adaptive_avg_pool2d", lambda m, x: aten._adaptive_avg_pool2d.default(x, [1, 1]), [x4])
    add("avg_pool3d", "avg_pool3d", lambda m, x: aten.avg_pool3d.default(x, [2, 2, 2], [2, 2, 2]), [f32("B", 2, 4, 4, 4)])
    add("max_pool3d_with_indices", "max_pool3d_with_indices",
        lambda m, x: aten.max_pool3d_with_indices.default(x, [2, 2, 2], [2, 2, 2])[0], [f32("B", 2, 4, 4, 4)])
    add("adaptive_avg_pool3d", "_adaptive_avg_pool3d", lambda m, x: aten._adaptive_avg_pool3d.default(x, [1, 1, 1]), [f32("B", 2, 4, 4, 4)])
    add("upsample_nearest2d", "upsample_nearest2d", lambda m, x: aten.upsample_nearest2d.vec(x, None, [2.0, 2.0]), [x4])
    add("upsample_nearest2d_size", "upsample_nearest2d", lambda m, x: aten.upsample_nearest2d.vec(x, [12, 16], None), [x4])
    add("upsample_bilinear2d", "upsample_bilinear2d", lambda m, x: aten.upsample_bilinear2d.vec(x, None, False, [2.0, 2.0]), [x4])
    add("upsample_bilinear2d_align", "upsample_bilinear2d", lambda m, x: aten.upsample_bilinear2d.vec(x, [11, 13], True, None), [x4])
    add("grid_sampler_2d", "grid_sampler_2d", lambda m, x, g: aten.grid_sampler_2d.default(x, g, 0, 0, False),
        [x4, f32("B", 5, 5, 2, lo=-1, hi=1)])
    add("col2im", "col2im", lambda m, x: aten.col2im.default(x, [4, 4], [2, 2], [1, 1], [0, 0], [2, 2]), [f32("B", 12, 4)])
    # Padding.
    add("constant_pad_nd", "constant_pad_nd", lambda m, x: aten.constant_pad_nd.default(x, [1, 2, 0, 1], 0.5), [x4])
    add("reflection_pad1d", "reflection_pad1d", lambda m, x: aten.reflection_pad1d.default(x, [2, 1]), [x3])
    add("reflection_pad2d", "reflection_pad2d", lambda m, x: aten.reflection_pad2d.default(x, [1, 2, 2, 1]), [x4])
    add("reflection_pad3d", "reflection_pad3d", lambda m, x: aten.reflection_pad3d.default(x, [1, 1, 1, 1, 1, 1]), [f32("B", 2, 4, 4, 4)])
    add("replication_pad2d", "replication_pad2d", lambda m, x: aten.replication_pad2d.default(x, [1, 2, 2, 1]), [x4])
    add("replication_pad3d", "replication_pad3d", lambda m, x: aten.replication_pad3d.default(x, [1, 1, 1, 1, 1, 1]), [f32("B", 2, 4, 4, 4)])
    # Shapes and views.
    add("view", "view", lambda m, x: aten.view.default(x, [x.shape[0], 24]), [x3])
    add("permute", "permute", lambda m, x: aten.permute.default(x, [0, 2, 1]), [x3])
    add("expand", "expand", lambda m, x: aten.expand.default(x, [x.shape[0], 4, 6]), [f32("B", 1, 6)])
    # torch.broadcast_to as exported before decomposition (Falcon's attention): expand.
    add("broadcast_to", "broadcast_to", lambda m, x: aten.broadcast_to.default(x, [x.shape[0], 4, 6]), [f32("B", 1, 6)])
    add("squeeze_dim", "squeeze", lambda m, x: aten.squeeze.dim(x, 1), [f32("B", 1, 6)])
    add("squeeze_dims", "squeeze", lambda m, x: aten.squeeze.dims(x, [1, 3]), [f32("B", 1, 6, 1)])
    add("unsqueeze", "unsqueeze", lambda m, x: aten.unsqueeze.default(x, -1), [x3])
    add("slice", "slice", lambda m, x: aten.slice.Tensor(x, 2, 1, 5, 2), [x3])
    add("slice_neg", "slice", lambda m, x: aten.slice.Tensor(x, 1, -3), [x3])
    add("select", "select", lambda m, x: aten.select.int(x, 1, 2), [x3])
    add("select_neg", "select", lambda m, x: aten.select.int(x, -1, -1), [x3])
    add("cat", "cat", lambda m, x, y: aten.cat.default([x, y], 1), [x3, f32("B", 2, 6)])
    add("split_with_sizes", "split_with_sizes", lambda m, x: aten.split_with_sizes.default(x, [2, 4], -1), [x3])
    add("clone", "clone", lambda m, x: aten.clone.default(x), [x3])
    add("alias", "alias", lambda m, x: aten.alias.default(x), [x3])
    add("flip", "flip", lambda m, x: aten.flip.default(x, [1, 2]), [x3])
    add("repeat", "repeat", lambda m, x: aten.repeat.default(x, [1, 2, 3]), [x3])
    add("diagonal", "diagonal", lambda m, x: aten.diagonal.default(x, 0, 1, 2), [f32("B", 5, 5)])
    add("as_strided", "as_strided", lambda m, x: aten.as_strided.default(x, [4, 3], [6, 2]), [f32(4, 6)])
    add("sym_size", "sym_size", lambda m, x: aten.view.default(x, [aten.sym_size.int(x, 0), -1]), [x3])
    add("sym_numel", "sym_numel", lambda m, x: aten.view.default(x, [aten.sym_numel.default(x)]), [x3])
    # Indexing, gather and scatter.
    add("index_select", "index_select", lambda m, x, i: aten.index_select.default(x, 1, i), [x3, i64(3, lo=0, hi=4)])
    add("index_one", "index", lambda m, x, i: aten.index.Tensor(x, [None, i]), [x3, i64(3, lo=0, hi=4)])
    add("index_two", "index", lambda m, x, i, j: aten.index.Tensor(x, [None, i, j]), [x3, i64(3, lo=0, hi=4), i64(3, lo=0, hi=6)])
    add("index_bool", "index", lambda m, x, i: aten.index.Tensor(x, [i]), [f32(5, 6), boolean(5)])
    add("gather", "gather", lambda m, x, i: aten.gather.default(x, 1, i), [x3, i64("B", 2, 6, lo=0, hi=4)])
    add("scatter_src", "scatter", lambda m, x, i, s: aten.scatter.src(x, 1, i, s),
        [f32(4, 6), torch_perm_index(4, 6), f32(4, 6)])
    add("scatter_value", "scatter", lambda m, x, i: aten.scatter.value(x, 1, i, 2.5), [f32(4, 6), torch_perm_index(4, 6)])
    add("scatter_add", "scatter_add", lambda m, x, i, s: aten.scatter_add.default(x, 1, i, s), [x3, i64("B", 4, 6, lo=0, hi=4), x3])
    add("scatter_reduce_sum", "scatter_reduce", lambda m, x, i, s: aten.scatter_reduce.two(x, 1, i, s, "sum"),
        [x3, i64("B", 4, 6, lo=0, hi=4), x3])
    add("scatter_reduce_amax", "scatter_reduce", lambda m, x, i, s: aten.scatter_reduce.two(x, 1, i, s, "amax"),
        [x3, i64("B", 4, 6, lo=0, hi=4), x3])
    add("index_put", "index_put", lambda m, x, i, v: aten.index_put.default(x, [i], v), [f32(6, 4), torch_perm_index(3, 0, 6), f32(3, 4)])
    add("index_put_accumulate", "index_put", lambda m, x, i, v: aten.index_put.default(x, [i], v, True),
        [f32(6, 4), i64(5, lo=0, hi=6), f32(5, 4)])
    add("slice_scatter", "slice_scatter", lambda m, x, s: aten.slice_scatter.default(x, s, 1, 1, 3), [x3, f32("B", 2, 6)])
    add("select_scatter", "select_scatter", lambda m, x, s: aten.select_scatter.default(x, s, 1, 0), [x3, f32("B", 6)])
    add("masked_scatter", "masked_scatter", lambda m, x, k, s: aten.masked_scatter.default(x, k, s), [f32(4, 6), boolean(4, 6), f32(24)])
    add("nonzero", "nonzero", lambda m, x: aten.nonzero.default(x), [boolean(4, 6)])
    # Creation, dtype and copies.
    add("arange", "arange", lambda m, x: aten.add.Tensor(x, aten.arange.start_step(0, 6, 1, dtype=torch.float32)), [x3])
    add("arange_dynamic", "arange",
        lambda m, x: aten.add.Tensor(x, aten.unsqueeze.default(aten.arange.start_step(0, x.shape[0], 1, dtype=torch.float32), 1)),
        [f32("B", 6)])
    add("arange_end_dynamic", "arange",
        lambda m, x: aten.add.Tensor(x, aten.unsqueeze.default(aten.arange.default(x.shape[0], dtype=torch.float32), 1)), [f32("B", 6)])
    add("unbind", "unbind", lambda m, x: aten.unbind.int(x, 1), [x3])
    add("unfold", "unfold", lambda m, x: aten.unfold.default(x, 2, 3, 2), [x3])
    add("unfold_middle", "unfold", lambda m, x: aten.unfold.default(x, 1, 2, 1), [x3])
    add("stack", "stack", lambda m, x, y: aten.stack.default([x, y, x], 1), [x3, x3])
    add("stack_last", "stack", lambda m, x: aten.stack.default([x, aten.neg.default(x)], -1), [x3])
    add("meshgrid", "meshgrid",
        lambda m, x: aten.add.Tensor(x, aten.mul.Tensor(*aten.meshgrid.indexing([aten.arange.default(4, dtype=torch.float32),
                                                                              aten.arange.default(6, dtype=torch.float32)], indexing="ij"))),
        [x3])
    add("zeros", "zeros", lambda m, x: aten.add.Tensor(x, aten.to.dtype(aten.zeros.default([x.shape[0], 4, 6]), torch.float32)), [x3])
    add("zeros_static", "zeros", lambda m, x: aten.add.Tensor(x, aten.zeros.default([4, 6], dtype=torch.float32)), [x3])
    add("zeros_like", "zeros_like", lambda m, x: aten.sub.Tensor(aten.zeros_like.default(x), x), [x3])
    add("full", "full", lambda m, x: aten.add.Tensor(x, aten.full.default([4, 6], 0.5, dtype=torch.float32)), [x3])
    add("full_like", "full_like", lambda m, x: aten.full_like.default(x, 2.5), [x3])
    add("scalar_tensor", "scalar_tensor", lambda m, x: aten.mul.Tensor(x, aten.scalar_tensor.default(3.0)), [x3])
    add("fill", "fill", lambda m, x: aten.fill.Scalar(x, 1.25), [x3])
    add("empty_like_filled", "empty", lambda m, x: aten.fill.Scalar(aten.empty.memory_format([x.shape[0], 6], dtype=torch.float32), 0.5),
        [f32("B", 6)])
    add("empty_strided", "empty_strided",
        lambda m, x: aten.fill.Scalar(aten.empty_strided.default([4, 6], [6, 1], dtype=torch.float32), 0.5), [f32(4, 6)])
    add("to_copy_i64", "_to_copy", lambda m, x: aten._to_copy.default(x, dtype=torch.int64), [f32("B", 6, lo=-9, hi=9)])
    add("to_copy_f32", "_to_copy", lambda m, x: aten._to_copy.default(x, dtype=torch.float32), [i64("B", 6, lo=-9, hi=9)])
    add("to_copy_bool", "_to_copy", lambda m, x: aten._to_copy.default(x, dtype=torch.bool), [i64("B", 6, lo=-2, hi=2)])
    add("copy", "copy", lambda m, x, y: aten.copy.default(x, y), [x3, f32(6)])
    # Distances and others.
    add("cdist", "_cdist_forward", lambda m, x, y: aten._cdist_forward.default(x, y, 2.0, None), [f32("B", 4, 3), f32("B", 5, 3)])
    add("pdist", "_pdist_forward", lambda m, x: aten._pdist_forward.default(x, 2.0), [f32(5, 3)])
    add("embedding_bag", "_embedding_bag", lambda m, i, o: aten._embedding_bag.default(m.w, i, o)[0], [i64(6, lo=0, hi=10), offsets(0, 2, 5)],
        {"w": f32(10, 4)})
    return c


def torch_perm_index(*args):
    """An index spec whose values are a permutation along the last dim (scatter with
    unique targets has one answer): ("perm", shape) or, with three ints (n, lo, hi),
    n distinct values in [lo, hi)."""
    return ("perm", args, 0, 0)


def special(*shape):
    """float32 with NaN, +inf and -inf among its values."""
    return ("special", shape, 0, 0)


def offsets(*v):
    return ("const", v, 0, 0)


def make_input(spec, batch, gen):
    kind, shape = spec[0], spec[1]
    if kind == "perm":
        if len(shape) == 3:
            n, lo, hi = shape
            return (torch.randperm(hi - lo, generator=gen)[:n] + lo).long()
        rows, cols = shape
        return torch.stack([torch.randperm(cols, generator=gen) for _ in range(rows)]).long()
    if kind == "const":
        return torch.tensor(shape, dtype=torch.long)
    if kind == "special":
        t = make(("f32", shape, -2.0, 2.0), batch, gen).flatten()
        t[::5], t[1::7], t[2::11] = float("nan"), float("inf"), -float("inf")
        return t.reshape(make(("f32", shape, 0, 1), batch, gen).shape)
    return make(spec, batch, gen)


def core_names():
    """The Core ATen operator names of the installed torch (ops with torch.Tag.core)."""
    names = set()
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name, None)
        if not hasattr(packet, "overloads"):
            continue
        for o in packet.overloads():
            if torch.Tag.core in getattr(packet, o).tags:
                names.add(name)
    return sorted(names)


def export_case(case, out_dir, gen):
    mod = OneOp(case, gen).eval()
    batched = [s[0] not in ("perm", "const") and "B" in s[1] for s in case.inputs]
    trace = [make_input(s, TRACE_BATCH, gen) for s in case.inputs]
    dyn = tuple({0: torch.export.Dim.AUTO} if b else None for b in batched)
    ep = torch.export.export(mod, tuple(trace), dynamic_shapes=(dyn,) if any(batched) else None)
    dynamic = []
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in ep.graph_signature.user_inputs:
            shape = node.meta["val"].shape
            dynamic.append(len(shape) > 0 and not isinstance(shape[0], int))
    test = [make_input(s, TEST_BATCH if d else TRACE_BATCH, gen) for s, d in zip(case.inputs, dynamic)]
    # Inputs of the same spec that share the batch keep it equal at test time too.
    with torch.no_grad():
        outs = mod(*test)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    d = os.path.join(out_dir, case.name)
    os.makedirs(d, exist_ok=True)
    torch.export.save(ep, os.path.join(d, "model.pt2"))
    ins = []
    for i, (t, dy) in enumerate(zip(test, dynamic)):
        np.save(os.path.join(d, f"in{i}.npy"), np.require(t.numpy(), requirements="C"))
        ins.append({"shape": [-1 if (dy and k == 0) else s for k, s in enumerate(t.shape)], "dtype": str(t.dtype).split(".")[1]})
    for j, t in enumerate(outs):
        np.save(os.path.join(d, f"out{j}.npy"), np.require(t.detach().numpy(), requirements="C"))
    targets = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})
    return {"case": case.name, "op": case.op, "inputs": ins, "outputs": len(outs), "targets": targets}


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    manifest = {"torch": torch.__version__, "core_ops": core_names(), "cases": [], "not_exported": []}
    for case in cases():
        try:
            manifest["cases"].append(export_case(case, out_dir, gen))
        except Exception as e:  # a case torch.export itself refuses: listed, never silently dropped
            manifest["not_exported"].append({"case": case.name, "op": case.op, "why": f"{type(e).__name__}: {e}"[:300]})
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    covered = {c["op"] for c in manifest["cases"]} & set(manifest["core_ops"])
    print(f"{len(manifest['cases'])} cases over {len(covered)} of {len(manifest['core_ops'])} Core ATen names; "
          f"{len(manifest['not_exported'])} not exported by torch.export")
    for n in manifest["not_exported"]:
        print(f"  not exported: {n['case']}: {n['why']}")


if __name__ == "__main__":
    main()
