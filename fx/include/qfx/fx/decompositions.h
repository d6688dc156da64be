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

}  // namespace qfx::fx
