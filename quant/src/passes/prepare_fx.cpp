// prepare_fx / prepare_qat_fx: per-node qconfig, QAT module swaps, and FakeQuantize
// (observer) insertion with shared and fixed qparams.
#include <torch/nn/modules/activation.h>

#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "pass_log.h"
#include "qfx/error.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/quant/fake_quantize.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/op_catalog.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/passes.h"

namespace qfx::quant {
namespace {

struct NodeInfo {
  std::string op;
  QConfigPtr qconfig;
  std::string matched_by;
  OpConfig op_config;
  bool quantized = false;
  std::string float_reason;
};

fx::CallFn fq_call_fn(const std::shared_ptr<FakeQuantize>& fq) { return fx::tensor_call_fn(fq); }

class Preparer {
 public:
  Preparer(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend, bool qat)
      : gm_(gm), g_(gm.graph()), mapping_(mapping), backend_(backend), qat_(qat) {}

  PassReport run() {
    // The model's module paths before fusion (a fused-away BatchNorm is a module the user may name).
    std::vector<std::string> paths;
    for (fx::Node* n : g_.nodes())
      if (n->op() != fx::Opcode::kPlaceholder && n->op() != fx::Opcode::kOutput) paths.push_back(node_module_path(*n));
    FuseOptions fo;
    fo.qat = qat_;
    PassReport fuse = fuse_fx(gm_, backend_, fo);
    report_.changes = fuse.changes;
    report_.declined = fuse.declined;
    for (const std::string& u : mapping_.unmatched(paths))
      report_.warnings.push_back("qconfig " + u + " matches no module of the model (it has no effect)");
    for (fx::Node* n : g_.nodes()) classify(n);
    find_elementwise_fusions();
    for (fx::Node* n : g_.nodes()) {
      if (!info_.count(n) || !info_[n].quantized) continue;
      observe_node(n);
    }
    finish_groups();
    mark_softmax_inputs();
    for (auto& kv : info_) {
      fx::Node* n = kv.first;
      const NodeInfo& i = kv.second;
      n->meta()["qfx_op"] = i.op;
      n->meta()["qfx_quantized"] = i.quantized;
      n->meta()["qfx_qconfig"] = i.matched_by;
      if (!i.quantized) n->meta()["qfx_float_reason"] = i.float_reason;
    }
    g_.lint();
    log_pass(qat_ ? "prepare_qat_fx" : "prepare_fx", report_);
    return report_;
  }

 private:
  void classify(fx::Node* n) {
    if (n->op() == fx::Opcode::kPlaceholder || n->op() == fx::Opcode::kGetAttr || n->op() == fx::Opcode::kOutput)
      return;
    NodeInfo i;
    i.op = canonical_op_name(*n, gm_);
    if (is_recurrent_op(i.op)) {  // recurrent layers: float, int8 at their boundaries
      i.qconfig = mapping_.resolve(node_module_path(*n), node_object_type(*n, gm_), &i.matched_by);
      i.op_config = backend_.op(i.op);
      const bool int8_weights = i.qconfig && i.op_config.kind == OpKind::kWeighted && observe_rnn_weights(n, i);
      i.float_reason = int8_weights ? "recurrent layer: int8 weights (W, R); biases, gates and states in float32; "
                                      "its input and outputs int8 where the ops around it are"
                                    : "recurrent layer: weights, gates and states in float32; its input and outputs int8 "
                                      "where the ops around it are";
      info_[n] = i;
      return;
    }
    if (i.op == "getitem" || !quantizable_value(*n)) return;
    if ((i.op == "zeros" || i.op == "zeros_like") && read_by_recurrent_only(*n, gm_))
      return;  // a recurrent layer's default initial state: not exported
    if (input_free(n)) {  // e.g. T5's relative position buckets (a log of 0 among them)
      i.float_reason = "computed from parameters and constants alone (a constant of the exported model)";
      info_[n] = i;
      return;
    }
    i.qconfig = mapping_.resolve(node_module_path(*n), node_object_type(*n, gm_), &i.matched_by);
    i.op_config = backend_.op(i.op);
    if (i.op == "wrapped") {
      i.float_reason = "wrapped call (kept whole, runs in float)";
    } else if (!i.qconfig) {
      i.float_reason = "qconfig is null (" + i.matched_by + ")";
    } else if (i.op_config.kind == OpKind::kFloat) {
      i.float_reason = backend_.ops.count(i.op) ? "backend '" + backend_.name + "' runs " + i.op + " in float"
                                                 : "'" + i.op + "' is not an int8 op of backend '" + backend_.name + "'";
    } else if (i.op_config.kind == OpKind::kWeighted && n->op() != fx::Opcode::kCallModule && !functional_linear(n)) {
      i.float_reason = "functional " + i.op + " (weights are not a module parameter)";
    } else {
      i.quantized = true;
    }
    if (i.quantized && i.op_config.kind == OpKind::kWeighted && n->op() != fx::Opcode::kCallModule) {
      observe_functional_weight(n, i);
    } else if (i.quantized && i.op_config.kind == OpKind::kWeighted) {
      if (!swap_weighted(n, i)) {
        i.quantized = false;
      }
    }
    if (i.quantized && i.qconfig->activation.keep_float) {  // weight-only: the weights above, float activations
      i.quantized = false;
      i.float_reason = i.op_config.kind == OpKind::kWeighted ? "weight-only quantization (activation dtype float)"
                                                              : "activation dtype float (" + i.matched_by + ")";
    }
    info_[n] = i;
  }

  // Backend fusions [add|mul, relu|relu6] (torch.ao's add-relu patterns): where an
  // int8 add's only user is an int8 relu reading nothing else, the pair is quantized
  // as one op: no observer between them, one after the relu. The runtime then runs
  // them as one QLinearAdd with the ReLU in its output clamp.
  void find_elementwise_fusions() {
    for (auto& [n, i] : info_) {
      if (!i.quantized || op_catalog().fusion_role(i.op) != FusionRole::kElementwiseHead || n->users().size() != 1) continue;
      fx::Node* u = n->users()[0];
      auto it = info_.find(u);
      if (it == info_.end() || !it->second.quantized || !backend_.has_fusion({i.op, it->second.op}) || !fx::consumes_only(u, n))
        continue;
      unobserved_.insert(n);
      report_.changes.push_back(n->name() + " + " + u->name() + ": " + i.op + "-" + it->second.op + " fusion, observed once after " +
                                u->name());
    }
  }

  // F.linear(x, W, b) with W (and b) parameters read by get_attr
  // (MultiheadAttention's in_proj_weight): quantized as torch.ao quantizes a
  // functional linear, with a weight FakeQuantize on the get_attr.
  static bool functional_linear(const fx::Node* n) {
    if (n->op() != fx::Opcode::kCallFunction || n->target().rfind("aten::linear", 0) != 0 || n->args().size() < 2) return false;
    const fx::Argument& w = n->args()[1];
    return w.is_node() && w.node->op() == fx::Opcode::kGetAttr;
  }

  void observe_functional_weight(fx::Node* n, const NodeInfo& i) {
    fx::Node* w = n->args()[1].node;
    ObserverSpec ws = resolve_tensor_qconfig(i.qconfig->weight, backend_, /*is_weight=*/true, qat_, n->name());
    ws.spec.ch_axis = 0;  // [out, in]
    auto obs = make_observer(ws);
    obs->set_tensor_name(n->name() + ".weight");
    auto fq = std::make_shared<FakeQuantize>(obs, qat_ && i.qconfig->weight.learnable);
    const std::string path = n->name() + "_weight_fake_quant";
    gm_.add_submodule(path, fq, fq_call_fn(fq));
    fx::Node* call;
    {
      fx::Graph::InsertPoint ip(g_, n);
      call = g_.call_module(path, {fx::Argument(w)}, {}, path);
    }
    call->meta()["is_tensor"] = true;
    n->replace_input_with(w, call);
    report_.changes.push_back(n->name() + ": functional linear with weight " + ws.spec.str() + " (" +
                              observer_kind_name(ws.kind) + ")");
  }

  // A recurrent layer's weights on a target that quantizes them (`lstm: weighted`):
  // the qconfig's weight FakeQuantize (per row where it is per channel) on each W_ih and W_hh (aten::lstm / gru's
  // params: w_ih, w_hh[, b_ih, b_hh] per layer and direction). Constant weights (the
  // TorchScript tracer records them in the call) become parameters first. False when
  // the weights are not a list of tensors.
  bool observe_rnn_weights(fx::Node* n, const NodeInfo& i) {
    if (n->args().size() < 4) return false;
    const fx::Argument& pa = n->args()[2];
    std::vector<fx::Argument> items;
    if (pa.is_const() && pa.value.isTensorList()) {
      for (const at::Tensor& t : pa.value.toTensorVector()) items.emplace_back(c10::IValue(t));
    } else if (pa.kind == fx::Argument::Kind::kList) {
      items = pa.items;
    } else {
      return false;
    }
    const size_t per = n->args()[3].is_const() && n->args()[3].value.isBool() && !n->args()[3].value.toBool() ? 2 : 4;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k % per > 1) continue;  // biases stay float
      fx::Argument& a = items[k];
      fx::Graph::InsertPoint ip(g_, n);
      if (a.is_const() && a.value.isTensor()) {
        const std::string path = n->name() + "_param_" + std::to_string(k);
        gm_.add_tensor(path, a.value.toTensor().detach().clone(), /*is_buffer=*/false);
        a = fx::Argument(g_.get_attr(path, path));
      }
      if (!a.is_node() || a.node->op() != fx::Opcode::kGetAttr) return false;
      ObserverSpec ws = resolve_tensor_qconfig(i.qconfig->weight, backend_, /*is_weight=*/true, qat_, n->name());
      ws.spec.ch_axis = 0;  // [gates * hidden, in]: per row where the qconfig is per channel
      if (ws.spec.block_size > 0)
        throw ConfigError("qconfig for the weights of recurrent node '" + n->name() +
                          "': per_block granularity is for linear weights; give it per_channel");
      auto fq = std::make_shared<FakeQuantize>(make_observer(ws), qat_ && i.qconfig->weight.learnable);
      const std::string path = n->name() + "_weight_fake_quant_" + std::to_string(k);
      gm_.add_submodule(path, fq, fq_call_fn(fq));
      fx::Node* call = g_.call_module(path, {a}, {}, path);
      call->meta()["is_tensor"] = true;
      a = fx::Argument(call);
    }
    std::vector<fx::Argument> args = n->args();
    args[2] = fx::Argument::list(items, c10::TensorType::get());
    n->set_args(args);
    report_.changes.push_back(n->name() + ": recurrent layer with int8 weights");
    return true;
  }

  // Weighted ops run as FusedConvLinear with a weight fake quantize.
  bool swap_weighted(fx::Node* n, NodeInfo& i) {
    auto m = gm_.get_submodule(n->target());
    auto fused = std::dynamic_pointer_cast<FusedConvLinear>(m);
    if (!fused) {
      std::string why;
      fused = FusedConvLinear::create(m, nullptr, FusedConvLinear::BnMode::kFold, FusedActivation::kNone, &why);
      if (!fused) {
        i.float_reason = why;
        return false;
      }
      gm_.replace_submodule(n->target(), fused, fused_call_fn(fused));
    }
    ObserverSpec ws = resolve_tensor_qconfig(i.qconfig->weight, backend_, /*is_weight=*/true, qat_, n->name());
    if (ws.spec.per_channel) ws.spec.ch_axis = fused->weight_out_axis();
    if (ws.spec.block_size > 0 && fused->op() != FusedConvLinear::Op::kLinear)
      throw ConfigError("qconfig for the weight of node '" + n->name() + "': per_block granularity is for linear weights (" +
                        fused->type_name() + " is not one); give it per_channel (module_name / module_type)");
    auto obs = make_observer(ws);
    obs->set_tensor_name(n->name() + ".weight");
    auto fq = std::make_shared<FakeQuantize>(obs, qat_ && i.qconfig->weight.learnable);
    fused->set_weight_fake_quant(fq);
    report_.changes.push_back(n->name() + ": " + fused->type_name() + " with weight " + ws.spec.str() + " (" +
                              observer_kind_name(ws.kind) + ")");
    return true;
  }

  bool is_observed(fx::Node* v) const { return group_of_.count(v) != 0; }

  // Inserts a FakeQuantize after `v` for the activation spec of `consumer`'s
  // qconfig; every other user of `v` now reads the observed value.
  std::string observe_value(fx::Node* v, fx::Node* consumer, const std::string& path_hint = "") {
    const NodeInfo& ci = info_.at(consumer);
    std::shared_ptr<FakeQuantize> fq;
    if (ci.op_config.kind == OpKind::kFixed && v == consumer) {
      ObserverSpec as = resolve_tensor_qconfig(ci.qconfig->activation, backend_, false, qat_, consumer->name());
      auto obs = std::make_shared<FixedQParamsObserver>(as.spec, ci.op_config.fixed_lo, ci.op_config.fixed_hi);
      obs->set_tensor_name(v->name());
      fq = std::make_shared<FakeQuantize>(obs, false);
    } else {
      ObserverSpec as = resolve_tensor_qconfig(ci.qconfig->activation, backend_, false, qat_, consumer->name());
      auto obs = make_observer(as);
      obs->set_tensor_name(v->name());
      fq = std::make_shared<FakeQuantize>(obs, qat_ && ci.qconfig->activation.learnable);
    }
    if (backend_.arithmetic.requantize != runtime::RequantMode::kFloat || backend_.arithmetic.elementwise != runtime::RequantMode::kFloat)
      fq->set_rounding(backend_.arithmetic.rounding);  // the target's requantization rounds so
    const std::string path = path_hint.empty() ? "activation_post_process_" + std::to_string(counter_++) : path_hint;
    gm_.add_submodule(path, fq, fq_call_fn(fq));
    insert_observer_call(v, path);
    group_of_[v] = path;
    return path;
  }

  // The softmax dim of `n` if it is a softmax (aten op or torch.nn.Softmax), else nullopt.
  std::optional<int64_t> softmax_dim(const fx::Node* n) const {
    if (canonical_op_name(*n, gm_) != "softmax") return std::nullopt;
    if (n->op() == fx::Opcode::kCallFunction) {
      if (n->args().size() < 2 || !n->args()[1].is_const() || !n->args()[1].value.isInt()) return std::nullopt;
      return n->args()[1].value.toInt();
    }
    if (auto* m = dynamic_cast<torch::nn::SoftmaxImpl*>(gm_.get_submodule(n->target()).get())) return m->options.dim();
    return std::nullopt;
  }

  // FakeQuantize::set_softmax_dim on every observer whose calls all feed softmaxes over one dim.
  void mark_softmax_inputs() {
    std::map<std::string, std::set<std::optional<int64_t>>> dims;  // path -> softmax dims of its users
    for (fx::Node* n : g_.nodes()) {
      if (n->op() != fx::Opcode::kCallModule || !dynamic_cast<FakeQuantize*>(gm_.get_submodule(n->target()).get())) continue;
      auto& d = dims[n->target()];
      if (n->users().empty()) d.insert(std::nullopt);
      for (const fx::Node* u : n->users()) d.insert(softmax_dim(u));
    }
    for (const auto& [path, d] : dims)
      if (d.size() == 1 && *d.begin())
        std::dynamic_pointer_cast<FakeQuantize>(gm_.get_submodule(path))->set_softmax_dim(*d.begin());
  }

  fx::Node* insert_observer_call(fx::Node* v, const std::string& path) {
    fx::Node* obs_node;
    {
      fx::Graph::InsertPoint ip(g_, fx::Graph::after(v));
      obs_node = g_.call_module(path, {fx::Argument(v)}, {}, v->name() + "_post_process");
    }
    obs_node->meta()["is_tensor"] = true;
    obs_node->meta()["qfx_observer_of"] = v->name();
    // Comparisons read the value itself: they test exact values (SDPA's guard for rows
    // masked to -inf), which quantization would move, and they have no qparams.
    static const std::set<std::string> exact = {"eq", "ne", "lt", "le", "gt", "ge", "isinf", "isnan"};
    for (fx::Node* u : std::vector<fx::Node*>(v->users()))
      if (u != obs_node && !exact.count(canonical_op_name(*u, gm_))) u->replace_input_with(v, obs_node);
    calls_[path].push_back(obs_node);
    observed_by_[obs_node] = v;
    return obs_node;
  }

  // True for a call_function that no model input reaches (it reads get_attrs and
  // constants only): its value is the same for every input, the export folds it, and
  // the op that reads it observes it as a constant.
  bool input_free(fx::Node* n) {
    auto it = input_free_.find(n);
    if (it != input_free_.end()) return it->second;
    bool free = n->op() == fx::Opcode::kGetAttr;
    if (n->op() == fx::Opcode::kCallFunction) {
      free = true;
      for (fx::Node* in : n->input_nodes()) free = free && input_free(in);
    }
    return input_free_[n] = free;
  }

  // A tensor that can carry qparams: a float one. Integer and bool tensors (token and
  // position ids, masks) are not observed, as the program's meta["traced_dtype"] or a
  // get_attr's tensor tells; a value of unknown dtype counts as float.
  bool quantizable_value(const fx::Node& n) const {
    if (!produces_tensor(n)) return false;
    auto it = n.meta().find("traced_dtype");
    if (it != n.meta().end() && it->second.isString()) {
      const std::string& t = it->second.toStringRef();
      return t == "Float" || t == "Double" || t == "Half" || t == "BFloat16";
    }
    if (n.op() == fx::Opcode::kGetAttr && gm_.has_attr(n.target())) return gm_.get_attr(n.target()).is_floating_point();
    return true;
  }

  // The value node behind an observed input (the observer call's producer).
  fx::Node* producer(fx::Node* arg) const {
    auto it = observed_by_.find(arg);
    return it == observed_by_.end() ? arg : it->second;
  }

  std::vector<fx::Node*> tensor_inputs(fx::Node* n, bool weighted) const {
    std::vector<fx::Node*> out;
    auto add = [&](fx::Node* a) {
      if (quantizable_value(*producer(a)) || observed_by_.count(a)) out.push_back(a);
    };
    for (const auto& a : n->args()) {
      if (a.is_node()) add(a.node);
      else
        for (const auto& it : a.items)
          if (it.is_node()) add(it.node);
      if (weighted) break;  // the activation input only
    }
    return out;
  }

  void observe_node(fx::Node* n) {
    NodeInfo& i = info_[n];
    const OpKind kind = i.op_config.kind;
    std::vector<fx::Node*> inputs = tensor_inputs(n, kind == OpKind::kWeighted);
    // 1. inputs: every tensor input of an int8 op must carry qparams.
    for (fx::Node* a : inputs) {
      fx::Node* p = producer(a);
      if (observed_by_.count(a) || is_observed(p) || unobserved_.count(p)) continue;
      observe_value(p, n);
    }
    // 2. output (an elementwise fusion's head has none: its activation observes).
    if (unobserved_.count(n)) return;
    switch (kind) {
      case OpKind::kWeighted:
      case OpKind::kQuantized:
      case OpKind::kFixed:
        observe_value(n, n);
        break;
      case OpKind::kShare: {
        if (inputs.empty()) {
          observe_value(n, n);
          break;
        }
        // All inputs and the output share one FakeQuantize.
        std::string root = find(group_of_.at(producer(inputs[0])));
        for (size_t k = 1; k < inputs.size(); ++k) unite(root, group_of_.at(producer(inputs[k])));
        insert_observer_call(n, root);
        group_of_[n] = root;
        break;
      }
      case OpKind::kFloat:
        break;
    }
  }

  std::string find(const std::string& p) {
    auto it = parent_.find(p);
    if (it == parent_.end() || it->second == p) return p;
    return parent_[p] = find(it->second);
  }
  void unite(const std::string& keep, const std::string& other) {
    const std::string a = find(keep), b = find(other);
    if (a != b) parent_[b] = a;
  }

  // Retargets observer calls of merged groups to one module, removes the others.
  void finish_groups() {
    for (auto& kv : calls_) {
      const std::string root = find(kv.first);
      if (root == kv.first) continue;
      for (fx::Node* c : kv.second) c->set_target(root);
      gm_.remove_submodule(kv.first);
      report_.changes.push_back("shared qparams: " + kv.first + " merged into " + root);
    }
  }

  fx::GraphModule& gm_;
  fx::Graph& g_;
  const QConfigMapping& mapping_;
  const BackendConfig& backend_;
  bool qat_;
  PassReport report_;
  std::map<fx::Node*, NodeInfo> info_;
  std::map<fx::Node*, bool> input_free_;  // input_free's answers
  std::unordered_map<fx::Node*, std::string> group_of_;        // value -> FakeQuantize path
  std::unordered_map<fx::Node*, fx::Node*> observed_by_;       // observer call -> value
  std::map<std::string, std::vector<fx::Node*>> calls_;        // path -> observer calls
  std::unordered_map<std::string, std::string> parent_;        // union-find over paths
  std::set<fx::Node*> unobserved_;                             // heads of elementwise fusions
  int counter_ = 0;
};

}  // namespace

PassReport prepare_fx(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend,
                      PrepareOptions options) {
  Preparer p(gm, mapping, backend, options.qat);
  PassReport r = p.run();
  // The target's arithmetic, for export_onnx (ExportOptions::target_arithmetic).
  if (fx::Node* out = gm.graph().output_node(); out && !backend.arithmetic.is_float())
    out->meta()[kTargetArithmeticMeta] = backend.arithmetic.to_json();
  if (options.qat) {
    gm.train(true);
    set_quant_state(gm, QuantState::kFakeQuant);
  } else {
    gm.eval();
    set_quant_state(gm, QuantState::kCalibration);
  }
  return r;
}

std::string recorded_arithmetic(const fx::GraphModule& gm) {
  const fx::Node* out = gm.graph().output_node();
  if (!out) return {};
  auto it = out->meta().find(kTargetArithmeticMeta);
  return it == out->meta().end() || !it->second.isString() ? std::string() : it->second.toStringRef();
}

PassReport prepare_qat_fx(fx::GraphModule& gm, const QConfigMapping& mapping, const BackendConfig& backend) {
  PrepareOptions o;
  o.qat = true;
  return prepare_fx(gm, mapping, backend, o);
}

std::vector<std::string> float_fallbacks(const fx::GraphModule& gm) {
  std::vector<std::string> out;
  for (const fx::Node* n : gm.graph().nodes()) {
    auto it = n->meta().find("qfx_float_reason");
    if (it != n->meta().end()) out.push_back(n->name() + ": " + it->second.toStringRef());
  }
  return out;
}

}  // namespace qfx::quant
