#pragma once

/// Every public qfx header in one include: `#include <qfx/qfx.h>`.
/// The fx graph (tracer, GraphModule, passes), quantization (configs, observers,
/// prepare / calibrate / convert, PTQ and QAT pipelines), the libtorch-free runtime
/// (models, tensors, kernels) and the bridges between libtorch and runtime tensors
/// (`runtime_view`, `aten_view`). Include single headers instead to compile faster.

#include "qfx/error.h"
#include "qfx/version.h"

#include "qfx/fx/decompositions.h"
#include "qfx/fx/exported_program.h"
#include "qfx/fx/graph.h"
#include "qfx/fx/graph_module.h"
#include "qfx/fx/interpreter.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/fx/node.h"
#include "qfx/fx/op_libraries.h"
#include "qfx/fx/serialize.h"
#include "qfx/fx/shape_prop.h"
#include "qfx/fx/subgraph_rewriter.h"
#include "qfx/fx/tracer.h"

#include "qfx/quant/algorithms.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/calibrate.h"
#include "qfx/quant/checkpoint.h"
#include "qfx/quant/config.h"
#include "qfx/quant/convert.h"
#include "qfx/quant/data.h"
#include "qfx/quant/dataset.h"
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/fault_injection.h"
#include "qfx/quant/horizon.h"
#include "qfx/quant/job_config.h"
#include "qfx/quant/lowered_model.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/observer.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/passes.h"
#include "qfx/quant/pipeline.h"
#include "qfx/quant/ptq_algorithms.h"
#include "qfx/quant/qconfig.h"
#include "qfx/quant/qparams.h"
#include "qfx/quant/quantized_modules.h"
#include "qfx/quant/runtime_tensor.h"

#include "qfx/runtime/arithmetic.h"
#include "qfx/runtime/kernel.h"
#include "qfx/runtime/model.h"
#include "qfx/runtime/npy.h"
#include "qfx/runtime/peak.h"
#include "qfx/runtime/registry.h"
#include "qfx/runtime/tensor.h"
#include "qfx/runtime/threads.h"
