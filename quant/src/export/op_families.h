// Internal: the op catalog's families. Each function adds the records of one
// family file (their names, spellings, quantization categories and ONNX
// emissions); op_catalog.cpp calls them all once.
#pragma once

#include "qfx/quant/op_catalog.h"

namespace qfx::quant::detail {

void register_layer_ops(OpCatalog& c);        // export_layer_ops.cpp: conv, linear (and F.linear), batch norm, matmul
void register_activation_ops(OpCatalog& c);   // export_activation_ops.cpp: relu6, silu, softmax, mish
void register_unary_ops(OpCatalog& c);        // export_unary_ops.cpp: fx's shared unary table (relu, elu, abs, ...)
void register_elementwise_ops(OpCatalog& c);  // export_elementwise_ops.cpp: arithmetic, comparisons, logic, casts
void register_shape_ops(OpCatalog& c);        // export_shape_ops.cpp: views, size arithmetic, cat, slices
void register_pool_ops(OpCatalog& c);         // export_pool_ops.cpp: pooling, mean, sum, pad, roll
void register_norm_ops(OpCatalog& c);         // export_norm_ops.cpp: layer / group / instance norm
void register_transformer_ops(OpCatalog& c);  // export_transformer_ops.cpp: gelu, permute
void register_resize_ops(OpCatalog& c);       // export_resize_ops.cpp: upsample / interpolate
void register_rnn_ops(OpCatalog& c);          // export_rnn_ops.cpp: lstm, gru
void register_gather_ops(OpCatalog& c);       // export_gather_ops.cpp: embedding, index_select
void register_scatter_ops(OpCatalog& c);      // export_scatter_ops.cpp: index, gather, scatter, index_put, slice/select_scatter
void register_creation_ops(OpCatalog& c);     // export_creation_ops.cpp: arange, full, full_like, fill, empty, zeros, copy, flip, repeat
void register_reduce_ops(OpCatalog& c);       // export_reduce_ops.cpp: amax, amin, prod, any, argmax, var, cumsum, topk, sort

}  // namespace qfx::quant::detail
