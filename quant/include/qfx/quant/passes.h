// Graph passes of the quantization flow (torch.ao.quantization.quantize_fx):
// fuse_fx, prepare_fx, prepare_qat_fx; statistics files keyed by graph hash.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qfx/fx/graph_module.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/qconfig.h"

namespace qfx::quant {

/// Options of fuse_fx.
struct FuseOptions {
  /// false (PTQ): batch norms are folded into the conv/linear weights from their
  /// running statistics (eval semantics). true (QAT): they are kept and folding
  /// is simulated during training (FusedConvLinear::BnMode::kSimulate).
  bool qat = false;
};

/// What one pass changed, and what it declined and why (also printed to stderr
/// when the environment has QFX_LOG=passes).
struct PassReport {
  std::vector<std::string> changes;   ///< what the pass did, one line per change
  std::vector<std::string> declined;  ///< what it left alone, with the reason
  /// What the user should be told: a `module_name` / `module_name_regex` qconfig
  /// entry that matches no module of the graph (a typo would otherwise go unseen).
  std::vector<std::string> warnings;
};

/// Fuses the backend's patterns (conv1d/2d/3d + bn (+ relu/relu6), conv + relu/relu6,
/// linear + bn1d, linear + relu, conv_transpose2d + bn) into FusedConvLinear modules
/// at the conv/linear's path; the absorbed bn/relu nodes are erased and their
/// modules removed. Only call_module convs/linears fuse, and only when each
/// intermediate value has exactly one user (a conv whose output is used elsewhere
/// is left alone). ReLU may be a module or aten::relu / relu6 / hardtanh(0, 6).
/// Eval-mode outputs are unchanged (relative error ~1e-6).
PassReport fuse_fx(fx::GraphModule& gm, const BackendConfig& backend, const FuseOptions& options = {});

/// Options of prepare_fx / prepare_qat_fx.
struct PrepareOptions {
  bool qat = false;  ///< set by prepare_qat_fx
};

/// Prepares a traced model for post-training calibration, in place (the model's
/// own tensors are not modified; folded weights are new tensors):
/// 1. `fuse_fx` (batch norms folded: the model must be calibrated in eval mode);
/// 2. per node, the qconfig from `mapping` and the op's entry in `backend` decide
///    whether it runs in int8; weighted ops become FusedConvLinear modules with a
///    weight fake quantize;
/// 3. FakeQuantize modules ("activation_post_process_N", observers inside) are
///    inserted after every value an int8 op produces or consumes; ops that share
///    qparams reuse their input's module (cat: all inputs and the output share
///    one); fixed-qparams ops get FixedQParamsObserver; float ops (qconfig null,
///    not int8 on the backend, wrapped calls) get none, so float islands are
///    bounded by observed values, where convert puts quantize / dequantize.
/// The model is left in eval mode and QuantState::kCalibration. Node meta gets
/// "qfx_op", "qfx_quantized", "qfx_qconfig" (which mapping entry) and
/// "qfx_float_reason"; the output node gets kTargetArithmeticMeta when the backend's
/// arithmetic is not ONNX's (export_onnx writes it). Throws ConfigError naming the
/// node and the constraint if a qconfig asks for what the backend cannot do.
PassReport prepare_fx(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend,
                      PrepareOptions options = {});

/// As prepare_fx for quantization-aware training: batch norms are kept and their
/// folding simulated (ConvBn / ConvBnReLU QAT modules, `freeze_bn_stats()`),
/// activations get moving-average observers by default, and the model is left in
/// train mode and QuantState::kFakeQuant, ready for a libtorch optimizer over
/// `gm.parameters()`.
PassReport prepare_qat_fx(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend);

/// The output node's meta key under which prepare_fx / prepare_qat_fx record the
/// backend's arithmetic (runtime::Arithmetic::to_json), carried through convert_fx.
inline constexpr const char* kTargetArithmeticMeta = "qfx_target_arithmetic";
/// The arithmetic prepare_fx recorded on `gm` (or on the model it was converted
/// from), as Arithmetic::to_json; empty for ONNX's arithmetic or a model that was
/// not prepared by qfx.
std::string recorded_arithmetic(const fx::GraphModule& gm);

/// One line per node that stays float, with the reason ("fc: qconfig is null
/// (module_name:fc)"), from the meta prepare_fx recorded.
std::vector<std::string> float_fallbacks(const fx::GraphModule& gm);

/// The part of a traced model split_host_postprocess leaves to the host.
struct HostSplit {
  /// The nodes that run on the host, in graph order: "name: target (why)" for the
  /// nodes that cannot be exported ("post: module NmsPostProcess (wrapped: kept
  /// whole, runs its TorchScript code)"), "name: target" for those downstream of them.
  std::vector<std::string> host_nodes;
  /// The device values the host part reads, in graph order: the names of the new
  /// graph outputs (the deployed ONNX model's outputs, in that order).
  std::vector<std::string> outputs;
  /// True if nothing moved (the graph is unchanged).
  bool empty() const { return host_nodes.empty(); }
};

/// Splits a traced model where ONNX export cannot follow, as deployment toolchains
/// split a detector into the network (int8, on the target) and its post-processing
/// (float, on the host): the host part is every wrapped call (wrapped modules,
/// methods and functions run TorchScript code), every operator from a library
/// outside aten/prim ("torchvision::nms"), and everything that reads their results;
/// it is removed and the graph returns, in order, the tensors it read. Graph
/// outputs that do not depend on the host part stay outputs. Run on a freshly traced
/// model, before prepare_fx. Throws ConfigError if the host part reads a value that
/// is not a tensor (naming the node) or if nothing would be left on the device.
HostSplit split_host_postprocess(fx::GraphModule& gm);

/// A stable 64-bit FNV-1a hash (hex) of the prepared graph's code and of its
/// observers' paths and quantization specs.
std::string graph_hash(const fx::GraphModule& gm);

/// Writes every observer's statistics (not qparams) of a prepared model to
/// `path` (a libtorch archive; written to a temporary name, then renamed), with
/// the graph hash. Throws IoError if it cannot be written.
void save_statistics(fx::GraphModule& gm, const std::string& path);
/// Loads statistics saved by save_statistics. Throws IoError if unreadable and
/// DataError if the file was recorded for a different graph (hash mismatch).
void load_statistics(fx::GraphModule& gm, const std::string& path);

}  // namespace qfx::quant
