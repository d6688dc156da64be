// Internal: the TorchScript tracer's state machine (TraceImpl) and the symbolic
// values it runs on, shared by tracer.cpp (entry points), trace_impl.cpp
// (modules, wraps, leaves, C++ patterns) and trace_run.cpp (graph execution:
// nodes, control flow, method and function calls, operators).
#pragma once

#include "qfx/fx/decompositions.h"
#include "qfx/fx/tracer.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/library.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <array>
#include <cctype>
#include <mutex>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include "leaves/registry.h"
#include "script_wrapper.h"
#include "qfx/error.h"

namespace qfx::fx::detail {

using c10::IValue;
using JNode = torch::jit::Node;
using JValue = torch::jit::Value;


// ---- symbolic values ----------------------------------------------------------------

struct Sym;
using SymItems = std::shared_ptr<std::vector<Sym>>;

struct Sym {
  enum class K { kConst, kProxy, kModule, kList, kTuple, kFunction, kParam, kDict };
  K k = K::kConst;
  IValue c;
  Node* node = nullptr;
  int module = -1;
  SymItems items;  // kList / kTuple: the elements; kDict: the values
  std::shared_ptr<std::vector<IValue>> keys;  // kDict: the keys (constants), in insertion order
  c10::TypePtr elem;
  torch::jit::Function* fn = nullptr;
  int param = -1;  // kParam: index into the traced C++ module's tensors
  bool transposed = false;  // kParam: aten::t of the tensor, not yet emitted
  int pending_bias = -1;    // kProxy from a C++ Linear leaf: bias param already applied
  // kProxy: the value on the two example inputs (TracerOptions::input_shapes), or null.
  std::shared_ptr<std::array<IValue, 2>> shadow;

  static Sym constant(IValue v) { Sym s; s.c = std::move(v); return s; }
  static Sym proxy(Node* n) { Sym s; s.k = K::kProxy; s.node = n; return s; }
  static Sym dict() {  // an empty symbolic dictionary
    Sym s;
    s.k = K::kDict;
    s.items = std::make_shared<std::vector<Sym>>();
    s.keys = std::make_shared<std::vector<IValue>>();
    return s;
  }
  bool has_proxy() const {
    if (k == K::kProxy || k == K::kParam) return true;
    if (items) for (const auto& i : *items) if (i.has_proxy()) return true;
    return false;
  }
  bool is_const() const {
    if (k == K::kConst) return true;
    if (k == K::kList || k == K::kTuple) {
      for (const auto& i : *items) if (!i.is_const()) return false;
      return true;
    }
    return false;
  }
};

struct ModuleCtx {
  torch::jit::Module module;
  std::string path;
  std::string type;  // demangled qualified class name
};

struct Frame {
  std::string module_path;
  std::string module_type;
  std::string method;    // method being traced ("" inside a function)
  std::string function;  // function being traced ("" inside a method)
};

inline std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

inline std::string strip_suffix(std::string s) {
  auto dot = s.rfind('.');
  if (dot != std::string::npos && dot + 1 < s.size() &&
      s.find_first_not_of("0123456789", dot + 1) == std::string::npos) {
    s = s.substr(0, dot);
  }
  return s;
}


// ---- the tracer proper -----------------------------------------------------------------

class TraceImpl {
 public:
  TraceImpl(torch::jit::Module root, std::vector<WrapSpec> wraps, int64_t max_unroll,
            std::vector<std::vector<int64_t>> input_shapes = {}, std::vector<std::string> input_dtypes = {})
      : root_(std::move(root)), wraps_(std::move(wraps)), max_unroll_(max_unroll),
        input_shapes_(std::move(input_shapes)), input_dtypes_(std::move(input_dtypes)), gm_(std::make_shared<GraphModule>()), g_(gm_->graph()) {}

  struct CxxTensor {
    std::string path;
    at::Tensor tensor;
    bool buffer;
  };
  struct CxxLeaf {
    std::shared_ptr<torch::nn::Module> module;
    CallFn fn;
    std::string type;
  };

  // Converts a graph recorded by libtorch's JIT tracer from a C++ module: the first
  // `n_inputs` graph inputs are the example inputs, the rest are `tensors`.
  std::shared_ptr<GraphModule> run_cxx(torch::jit::Graph& graph, size_t n_inputs, std::vector<CxxTensor> tensors,
                                       std::unordered_map<std::string, CxxLeaf> leaves) {
    cxx_tensors_ = std::move(tensors);
    cxx_leaves_ = std::move(leaves);
    std::vector<Sym> inputs;
    for (size_t i = 0; i < graph.inputs().size(); ++i) {
      if (i < n_inputs) {
        Node* p = g_.placeholder(n_inputs == 1 ? "input" : "input_" + std::to_string(i), graph.inputs()[i]->type()->str());
        p->meta()["is_tensor"] = graph.inputs()[i]->type()->kind() == c10::TypeKind::TensorType;
        inputs.push_back(Sym::proxy(p));
      } else {
        Sym s;
        s.k = Sym::K::kParam;
        s.param = static_cast<int>(i - n_inputs);
        inputs.push_back(s);
      }
    }
    frames_.push_back({"", "torch.nn.Module (C++)", "forward", ""});
    auto outs = run_graph(graph, inputs);
    frames_.pop_back();
    g_.output(outs.size() == 1 ? to_arg(outs[0], nullptr) : tuple_arg(outs));
    decompose_attention(*gm_);
    g_.eliminate_dead_code();
    g_.lint();
    return gm_;
  }

  std::shared_ptr<GraphModule> run();

 private:
  using Env = std::unordered_map<const JValue*, Sym>;

  // ---- modules ----
  int module_index(const torch::jit::Module& m, const std::string& path);
  static Sym module_sym(int idx) { Sym s; s.k = Sym::K::kModule; s.module = idx; return s; }

  // ---- wraps ----
  bool name_matches(const std::string& spec, const std::string& qualified) const;
  bool wrapped_method(const std::string& path, const std::string& method) const;
  bool wrapped_module(const ModuleCtx& m) const;
  bool wrapped_function(const std::string& name) const;

  // ---- errors ----
  std::string where(const JNode* n) const;

  std::string suggestion() const;

  [[noreturn]] void fail(const JNode* n, const std::string& what) const;

  // ---- conversion ----
  IValue materialize(const Sym& s) const;

  Argument to_arg(const Sym& s, const JNode* n);

  Node* param_node(int idx);

  // The C++ leaf at `*path_out` if tensor `idx` is its weight, else nullptr.
  const CxxLeaf* leaf_of_weight(int idx, std::string* path_out);
  bool is_bias_of(const Sym& s, const std::string& path) const;
  Node* emit_cxx_leaf(JNode* n, const std::string& path, const CxxLeaf& leaf, const Sym& input);

  // libtorch records a C++ Linear as t(W) then addmm(b, x, W^T), or matmul(x, W^T)
  // then add(b) for inputs of rank > 2: fold those back into one call_module.
  bool cxx_linear_pattern(JNode* n, Env& env, const std::string& op);

  // conv / linear / batch_norm on the weight of a C++ Conv/Linear/BatchNorm
  // submodule: one call_module node on that submodule.
  bool cxx_leaf_call(JNode* n, Env& env, const std::string& op);
  Argument tuple_arg(const std::vector<Sym>& outs);

  void annotate(Node* fxn, const JNode* n);

  // Splits a multi-output node into getitem nodes.
  void bind_outputs(const JNode* n, Node* fxn, Env& env);

  // ---- graph walking ----
  std::vector<Sym> run_graph(torch::jit::Graph& graph, const std::vector<Sym>& inputs);

  void run_block(torch::jit::Block* b, Env& env);

  const Sym& in(const JNode* n, size_t i, Env& env);

  void run_node(JNode* n, Env& env);
  // prim::Constant: a function value or a constant.
  void run_constant(JNode* n, Env& env);
  // List, tuple and dictionary construction; false when `n` is none of them.
  bool run_construct(JNode* n, Env& env);
  // dict([(k, v), ...]) over a symbolic list of pairs (constant keys, later pairs win).
  Sym dict_from_pairs(const JNode* n, const Sym& pairs);
  // List/tuple unpacking, tuple indexing and unchecked_cast; false when `n` is none of them.
  bool run_unpack(JNode* n, Env& env);
  // Ops that pass their input through (symbolic int <-> tensor, Uninitialized); false otherwise.
  bool run_passthrough(JNode* n, Env& env);
  // `is` / `is not` decided by tracing (traced value vs None, two traced values); false otherwise.
  bool run_identity(JNode* n, Env& env);

  Sym element(const JNode* n, const Sym& s, int64_t i);

  // Ops on Python lists whose elements may be traced values: handled on the
  // symbolic list itself (aliasing kept), as torch.fx does with Python lists.
  bool structural_list_op(JNode* n, Env& env);
  // A dictionary that holds traced values (`result["out"] = x`, as torchvision's
  // segmentation models return): keys are constants, values symbolic.
  void construct_dict(JNode* n, Env& env);
  bool whole_slice(JNode* n, Env& env);
  bool dict_view(JNode* n, const Sym& d, const std::string& op, Env& env);
  bool structural_dict_op(JNode* n, Env& env);
  bool in_place_list_op(JNode* n, const std::string& op, std::vector<Sym>& items, Env& env);

  void run_isinstance(JNode* n, Env& env);

  void get_attr(JNode* n, Env& env);

  void call_method(JNode* n, Env& env);

  void emit_call_module(JNode* n, const std::string& path, const std::vector<Sym>& args, Env& env);

  void call_function(JNode* n, Env& env);

  void run_if(JNode* n, Env& env);

  static bool raises(torch::jit::Block* b);

  void run_loop(JNode* n, Env& env);

  static bool produces_tensor(const c10::TypePtr& t);

  void run_operator(JNode* n, Env& env);

  // ---- shape specialisation (shadow execution on example inputs; trace_shadow.cpp) ----
  // The example input k (0, 1) for a graph input of `shape`.
  // Example input k (0, 1) of `shape` (-1 dims at 2 + k): random normal floats, or
  // ones for an integer input (an index valid in any table, a mask that keeps all).
  static IValue example_input(const std::vector<int64_t>& shape, int k, const std::string& dtype);
  // `s`'s value on example k (constants as they are); false if unknown.
  bool shadow_value(const Sym& s, int k, IValue* out) const;
  // Runs `fn` on the example values of `args` (a JIT stack in, `nout` values out) for
  // both examples; false (nothing computed) if a value is unknown or `fn` throws.
  bool run_shadows(const std::vector<Sym>& args, size_t nout, const std::function<void(torch::jit::Stack&)>& fn,
                   std::array<std::vector<IValue>, 2>* out) const;
  // Attaches the example values to `n`'s outputs in `env` (and meta["traced_shape"]
  // to their nodes).
  void attach_shadows(const JNode* n, const std::array<std::vector<IValue>, 2>& outs, Env& env);
  // Runs a wrapped or leaf call (`call(args)`, one result) on the examples and
  // attaches the results to `n`'s output.
  void shadow_call(const JNode* n, const std::vector<Sym>& args, const std::function<IValue(std::vector<IValue>&)>& call,
                   Env& env);
  // A shape query (size, dim, len, dtype, ...) whose two example results agree:
  // binds them as constants and returns true.
  bool fold_shape_query(const JNode* n, const std::string& op, const std::array<std::vector<IValue>, 2>& outs, Env& env);
  // Whether two example results are equal (ints, bools, floats, strings, devices, int lists).
  static bool same_example(const IValue& a, const IValue& b);

  torch::jit::Module root_;
  std::vector<WrapSpec> wraps_;
  int64_t max_unroll_;
  std::vector<std::vector<int64_t>> input_shapes_;
  std::vector<std::string> input_dtypes_;  // "float32" (default), "int64", "int32"
  std::shared_ptr<GraphModule> gm_;
  Graph& g_;
  std::vector<ModuleCtx> modules_;
  std::unordered_map<std::string, int> module_by_path_;
  std::unordered_map<std::string, Node*> attr_nodes_;
  std::unordered_set<std::string> leaves_;
  std::vector<ModuleCtx> method_owners_;
  std::vector<Frame> frames_;
  std::vector<CxxTensor> cxx_tensors_;
  std::unordered_map<std::string, CxxLeaf> cxx_leaves_;
};

/// Appends the wrap entries a model declares in `__qfx_wrap__` on any module.
void collect_model_wraps(const torch::jit::Module& m, std::vector<WrapSpec>& out);

}  // namespace qfx::fx::detail
