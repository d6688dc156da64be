// split_host_postprocess (see passes.h): the network goes to the device, wrapped
// post-processing and library operators stay on the host.
#include <set>

#include "qfx/error.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/passes.h"

namespace qfx::quant {

namespace {

// Why `n` cannot be exported to ONNX, or "" if it can (as far as the split knows).
std::string host_reason(const fx::Node& n, const fx::GraphModule& gm) {
  switch (n.op()) {
    case fx::Opcode::kCallMethod: return "wrapped method: kept whole, runs its TorchScript code";
    case fx::Opcode::kCallModule: {
      auto m = gm.get_submodule(n.target());
      if (m && m->name() == "ScriptModuleWrapper")
        return "wrapped module " + fx::module_type_name(n, gm) + ": kept whole, runs its TorchScript code";
      return "";
    }
    case fx::Opcode::kCallFunction: {
      const std::string& t = n.target();
      if (t == "getitem" || t.rfind("aten::", 0) == 0 || t.rfind("prim::", 0) == 0) return "";
      if (gm.function_fn(t)) return "wrapped function: kept whole, runs its TorchScript code";
      return "operator from library '" + t.substr(0, t.find("::")) + "' (no ONNX export)";
    }
    default: return "";
  }
}

}  // namespace

HostSplit split_host_postprocess(fx::GraphModule& gm) {
  HostSplit split;
  fx::Graph& g = gm.graph();
  std::set<const fx::Node*> host;
  for (fx::Node* n : g.nodes()) {
    if (n->op() == fx::Opcode::kOutput) continue;
    std::string why = host_reason(*n, gm);
    bool downstream = false;
    for (const fx::Node* in : n->input_nodes()) downstream |= host.count(in) > 0;
    if (why.empty() && !downstream) continue;
    host.insert(n);
    split.host_nodes.push_back(n->name() + ": " + n->target() + (why.empty() ? "" : " (" + why + ")"));
  }
  if (host.empty()) return split;

  // The device values the host part (or the graph's output) reads, in graph order.
  fx::Node* out = g.output_node();
  std::set<const fx::Node*> read;
  for (fx::Node* n : g.nodes()) {
    if (!host.count(n)) continue;
    for (const fx::Node* in : n->input_nodes())
      if (!host.count(in)) read.insert(in);
  }
  if (out)
    for (const fx::Node* in : out->input_nodes())
      if (!host.count(in)) read.insert(in);
  std::vector<fx::Argument> outputs;
  for (fx::Node* n : g.nodes()) {
    // The host has the model's inputs and parameters itself.
    if (!read.count(n) || n->op() == fx::Opcode::kGetAttr || n->op() == fx::Opcode::kPlaceholder) continue;
    if (!produces_tensor(*n))
      throw UnsupportedOpError("split_host_postprocess: the host post-processing reads '" + n->name() + "' (" + n->target() +
                               "), which is not a tensor: only tensors can pass from the deployed model to the host");
    outputs.emplace_back(n);
    split.outputs.push_back(n->name());
  }
  bool device_op = false;
  for (fx::Node* n : g.nodes())
    device_op |= !host.count(n) && n->op() != fx::Opcode::kPlaceholder && n->op() != fx::Opcode::kOutput &&
                 n->op() != fx::Opcode::kGetAttr;
  if (!device_op || outputs.empty())
    throw UnsupportedOpError("split_host_postprocess: nothing is left to deploy: '" + split.host_nodes.front() +
                             "' reads the model's input, so the whole model would run on the host");

  // The graph now returns the device values; the host nodes go (last first).
  if (out) g.erase_node(out);
  g.output(outputs.size() == 1 ? outputs[0] : fx::Argument::tuple(outputs));
  auto nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (host.count(*it)) g.erase_node(*it);
  gm.recompile();
  return split;
}

}  // namespace qfx::quant
