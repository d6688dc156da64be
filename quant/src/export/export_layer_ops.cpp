// The op catalog's layers: convolutions, linear (the module and F.linear), batch
// norm and matmul between activations. A prepared layer exports through its
// QuantizedConvLinear (exporter.h, weighted); these records export the ones
// prepare_fx left float.
#include <torch/nn/modules/batchnorm.h>

#include "exporter.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

void float_layer(Exporter& e, fx::Node& n, torch::nn::Module&) { e.float_layer(&n); }

// An unfused BatchNorm2d: ONNX BatchNormalization in float.
void batch_norm_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(&m);
  if (!bn) unsupported(n, "module 'batchnorm2d' has no ONNX export in qfx yet");
  const std::string y = e.fresh(n.name());
  auto* p = e.node("BatchNormalization",
                   {e.value(n, n.args().at(0)),
                    e.init("bn_scale", bn->weight.defined() ? bn->weight : at::ones_like(bn->running_mean)),
                    e.init("bn_bias", bn->bias.defined() ? bn->bias : at::zeros_like(bn->running_mean)),
                    e.init("bn_mean", bn->running_mean), e.init("bn_var", bn->running_var)},
                   y, n.name());
  e.attr_f(p, "epsilon", static_cast<float>(bn->options.eps()));
  e.names_[&n] = y;
  e.rank_[&n] = e.rank_of(n.args().at(0));
  e.res_.float_ops.push_back(n.name() + " (batchnorm2d): unfused batch norm runs in float");
}

// matmul / mm / bmm between two activations.
void matmul(Exporter& e, fx::Node& n) {
  const std::string y = e.fresh(n.name());
  e.node("MatMul", {e.value(n, n.args().at(0)), e.value(n, n.args().at(1))}, y, n.name());
  e.names_[&n] = y;
  e.rank_[&n] = std::max(e.rank_of(n.args().at(0)), e.rank_of(n.args().at(1)));
}

}  // namespace

void register_layer_ops(OpCatalog& c) {
  const std::vector<std::pair<std::string, std::string>> convs = {
      {"conv1d", "Conv1d"}, {"conv2d", "Conv2d"}, {"conv3d", "Conv3d"}, {"conv_transpose2d", "ConvTranspose2d"}};
  for (const auto& [name, cls] : convs)
    c.add(OpRecord(name).also_modules({cls}).quantized_as(weighted_kinds()).describe("convolution (ONNX Conv / ConvTranspose)")
              .to_onnx(nullptr, float_layer));
  c.add(OpRecord("linear").also_modules({"Linear"}).quantized_as(weighted_kinds())
            .describe("x W^T + b (ONNX Gemm for 2-D input, else MatMul + Add)")
            .to_onnx([](Exporter& e, fx::Node& n) { e.functional_linear(&n); }, float_layer));
  c.add(OpRecord("batchnorm1d").also_modules({"BatchNorm1d"}).quantized_as(activation_kinds())
            .describe("batch norm, exported folded into the conv / linear before it"));
  c.add(OpRecord("batchnorm2d").also_modules({"BatchNorm2d"}).also_aten({"batch_norm"}).quantized_as(activation_kinds())
            .describe("batch norm: folded into the conv before it, else ONNX BatchNormalization in float")
            .to_onnx(nullptr, batch_norm_module));
  c.add(OpRecord("batchnorm3d").also_modules({"BatchNorm3d"}).quantized_as(activation_kinds())
            .describe("batch norm, exported folded into the conv before it"));
  c.add(OpRecord("matmul").also_aten({"mm", "bmm"}).quantized_as(activation_kinds())
            .describe("matrix product of two activations (ONNX MatMul)").to_onnx(matmul));
}

}  // namespace qfx::quant::detail
