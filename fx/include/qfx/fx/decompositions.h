#pragma once

#include "qfx/fx/graph_module.h"

namespace qfx::fx {

/// Rewrites every call_function of `aten::scaled_dot_product_attention` into the
/// computation torch.nn.functional.scaled_dot_product_attention documents, as
/// separate aten nodes, so that each matmul and the softmax can be observed and
/// quantized like any other op (PyTorch's own PT2E flow decomposes it the same way):
///
///     scores = matmul(query, transpose(key, -2, -1)) * scale    [..., L, S]
///     scores = scores + attn_mask        (float mask)
///            | masked_fill(scores, !attn_mask, -inf)   (bool mask)
///            | scores + causal mask      (is_causal: -inf above the diagonal)
///     out    = matmul(softmax(scores, -1), value)               [..., L, Ev]
///
/// `scale` is the op's `scale` argument, or 1 / sqrt(E) with E the query's last
/// dimension, which must then be known: from meta["traced_shape"] (the tracer
/// records it when given input shapes) or meta["shape"] (ShapeProp). A causal
/// mask likewise needs static L and S; it is added as a buffer
/// `<node>_causal_mask` of the GraphModule. A nonzero `dropout_p` becomes an
/// `aten::dropout` in training mode on the attention weights.
///
/// The new nodes take the replaced node's meta (module_path, source) and names
/// derived from its name. Returns the number of nodes rewritten. Throws
/// qfx::UnsupportedOpError naming the node when E (or L and S for is_causal) is
/// unknown, or for grouped-query attention (enable_gqa) with unequal head counts.
int decompose_attention(GraphModule& gm);

/// Rewrites `aten::index.Tensor(x, [i_0, ..., i_{k-1}])` whose every index i_d is
/// `arange(x.size(d))` moved by `unsqueeze` (or `add` of 0) onto an axis a_d of its
/// own in a rank-R broadcast, with a_0 < a_1 < ..., into unsqueezes of x at the other
/// R - k axes: `x[arange(B)[:, None, None, None], arange(L)[None, None, None, :]]` is
/// `x[:, None, None, :]`, [B, 1, 1, L] (the gather reads every element once, in
/// order, so the rewrite is exact). transformers' attention-mask builders index the
/// padding mask this way. Sizes are compared as the program recorded them
/// (meta["traced_dims"] of x and the index tensors, meta["sym_expr"] or the constant
/// of the arange's end): equal symbols, equal sizes. Other index nodes are left as
/// they are. Returns the number of nodes rewritten.
int simplify_arange_index(GraphModule& gm);

/// Rewrites `aten::addmm(b, x, m2)` (beta = alpha = 1, b a parameter) and
/// `aten::mm(x, m2)` whose m2 is a [in, out] parameter as `aten::linear(x, W[, b])`
/// with W [out, in], so that they quantize as torch.nn.Linear does (a per-channel int8
/// weight): W is the parameter under `permute(W, [1, 0])` / `t(W)` (Core ATen's
/// linear after run_decompositions), or a transposed copy of m2 registered as the
/// parameter `<m2's path>_t` (GPT-2's Conv1D: addmm(bias, x, weight)); and
/// `aten::bmm(x, view(expand(permute(W, [1, 0]))))`, Core ATen's form of a linear on a
/// non-contiguous 3-D input, as `aten::linear(x, W)`. Other addmm / mm / bmm nodes
/// (two activations) are left as they are. Returns the number rewritten.
int addmm_as_linear(GraphModule& gm);

/// Rewrites `aten::add.Tensor(x, where(c, fill, 0))` (or `where(c, 0, fill)`), the
/// additive attention mask of Core ATen's SDPA decomposition and of eager attention,
/// where `fill` is -inf or a float's lowest-like value (<= -1e30) and the operands are
/// constants or 0-d `scalar_tensor` / `full` nodes, as `aten::masked_fill.Scalar(x, c,
/// fill)` (c negated with `logical_not` for the second form): the same values (x plus
/// fill is fill in float32), and masked_fill computes in float, so no observer sees
/// the -inf a quantized add would. Returns the number of nodes rewritten.
int mask_add_as_masked_fill(GraphModule& gm);

}  // namespace qfx::fx
