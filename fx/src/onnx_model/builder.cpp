// The ONNX graph walk: inputs, initializers, one converter per node, outputs;
// every emitted node run on two shadow inputs (shapes, dynamic dims, folding).
#include "builder.h"

#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <set>

#include "proto.h"
#include "qfx/error.h"
#include "qfx/fx/interpreter.h"

namespace qfx::fx::onnx_detail {
namespace {

// An Interpreter that runs one node at a time and keeps every value.
class ShadowRun : public Interpreter {
 public:
  using Interpreter::Interpreter;
  void set(const Node* n, c10::IValue v) { env_[n] = std::move(v); }
  const c10::IValue& get(const Node* n) const { return env_.at(n); }
  void eval(const Node* n) { env_[n] = run_node(n); }
  void forget(const Node* n) { env_.erase(n); }
};

std::string identifier(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  while (!r.empty() && r[0] == '_') r.erase(0, 1);
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "v" + r;
  return r;
}

// "layer1.0.conv1.weight" -> "layer1.0.conv1": a PyTorch module path, or "".
std::string torch_path(const std::string& weight) {
  const std::string suffix = ".weight";
  if (weight.size() <= suffix.size() || weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  const std::string p = weight.substr(0, weight.size() - suffix.size());
  for (char c : p)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return "";
  if (p.front() == '.' || p.back() == '.' || p.find("..") != std::string::npos) return "";
  return p;
}

// The module path in a TorchScript-based exporter's node name:
// "/features/features.2/conv/conv.0/conv.0.0/Conv" -> "features.2.conv.0.0" (a
// scope that extends the one before it replaces it); "" for other names.
std::string scope_path(const std::string& node_name) {
  if (node_name.size() < 2 || node_name[0] != '/') return "";
  std::vector<std::string> scopes, path;
  size_t start = 1;
  for (size_t slash; (slash = node_name.find('/', start)) != std::string::npos; start = slash + 1)
    scopes.push_back(node_name.substr(start, slash - start));
  for (const auto& s : scopes) {
    if (s.empty()) return "";
    if (!path.empty() && s.rfind(path.back() + ".", 0) == 0) path.back() = s;
    else path.push_back(s);
  }
  std::string p;
  for (const auto& s : path) p += (p.empty() ? "" : ".") + s;
  return torch_path(p + ".weight");
}

at::ScalarType input_dtype(int t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return at::kFloat;
    case onnx::TensorProto::INT64: return at::kLong;
    case onnx::TensorProto::INT32: return at::kInt;
    case onnx::TensorProto::BOOL: return at::kBool;
    default: throw DataError(what + ": element type " + std::to_string(t) + " (qfx reads float32, int64, int32 and bool inputs)");
  }
}

}  // namespace

struct Builder::Shadows {
  explicit Shadows(GraphModule& gm) : a(gm), b(gm) {}
  ShadowRun a, b;
  std::set<const Node*> constant_nodes;  // get_attr nodes of constants (not parameters)
};

const ConverterTable& converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_layer_ops(t);
    add_elementwise_ops(t);
    add_shape_ops(t);
    add_spatial_ops(t);
    return t;
  }();
  return table;
}

at::Tensor Builder::constant_named(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? at::Tensor() : it->second.constant;
}

Builder::Builder(const onnx::ModelProto& m, std::string path, const OnnxModelOptions& o)
    : m_(m), path_(std::move(path)), o_(o), gm_(std::make_shared<GraphModule>()), g_(gm_->graph()),
      sh_(std::make_unique<Shadows>(*gm_)) {
  const auto slash = path_.rfind('/');
  dir_ = slash == std::string::npos ? "." : path_.substr(0, slash);
  opset_ = default_opset(m, path_);
}

Builder::~Builder() = default;

std::shared_ptr<GraphModule> Builder::build() {
  torch::NoGradGuard no_grad;
  initializers();
  inputs();
  for (const auto& n : m_.graph().node()) {
    for (const auto& i : n.input()) consumers_[i].push_back(&n);
    for (const auto& o : n.output()) producers_[o] = &n;
  }
  for (const auto& o : m_.graph().output()) consumers_[o.name()].push_back(nullptr);
  // Constant nodes first: they read nothing, and patterns read ahead (GELU's 1 and 0.5).
  for (const auto& n : m_.graph().node())
    if (n.op_type() == "Constant") convert(n);
  for (const auto& n : m_.graph().node())
    if (n.op_type() != "Constant") convert(n);
  outputs();
  g_.eliminate_dead_code();
  gm_->eval();
  return gm_;
}

void Builder::initializers() {
  for (const auto& t : m_.graph().initializer()) {
    values_[t.name()] = constant_value(to_tensor(t, path_, dir_));
    initializer_names_.insert(t.name());
  }
}

void Builder::inputs() {
  size_t k = 0;
  for (const auto& vi : m_.graph().input()) {
    if (values_.count(vi.name())) continue;  // an initializer listed as an input (IR version < 4)
    const std::string what = path_ + ": input '" + vi.name() + "'";
    if (!vi.type().has_tensor_type()) throw DataError(what + " is not a tensor");
    const auto& tt = vi.type().tensor_type();
    const at::ScalarType dtype = input_dtype(tt.elem_type(), what);
    std::vector<int64_t> a, b, traced;
    const auto& dims = tt.shape().dim();
    const std::vector<int64_t> given = k < o_.input_shapes.size() ? o_.input_shapes[k] : std::vector<int64_t>{};
    if (!tt.has_shape() && given.empty())
      throw DataError(what + " declares no shape; give it (model.input_shape, or --input-shape for qfx inspect)");
    const int rank = tt.has_shape() ? dims.size() : static_cast<int>(given.size());  // no shape: the given one
    if (!given.empty() && given.size() != static_cast<size_t>(rank))
      throw DataError(what + " has rank " + std::to_string(rank) + "; the input shape given has " + std::to_string(given.size()) + " dims");
    for (int d = 0; d < rank; ++d) {
      int64_t v = tt.has_shape() && dims[d].has_dim_value() && dims[d].dim_value() > 0 ? dims[d].dim_value() : -1;
      if (!given.empty() && given[d] > 0) v = given[d];
      if (v < 0 && d != 0)
        throw DataError(what + " dim " + std::to_string(d) + " is dynamic ('" + (tt.has_shape() ? dims[d].dim_param() : "") +
                        "'); give it a size (model.input_shape, or --input-shape for qfx inspect)");
      a.push_back(v < 0 ? 2 : v);
      b.push_back(v < 0 ? 3 : v);
      traced.push_back(v);
    }
    int64_t n = 1;
    for (int64_t d : b) {
      if (d > 0 && n > Builder::kMaxElements / d) throw DataError(what + ": its declared shape has more than 2^30 elements");
      n *= d;
    }
    Node* p = g_.placeholder(identifier(vi.name()));
    p->meta()["is_tensor"] = true;
    p->meta()["traced_shape"] = c10::IValue(traced);
    p->meta()["onnx_node"] = vi.name();
    auto sample = [&](const std::vector<int64_t>& s) {
      return dtype == at::kFloat ? at::randn(s) : at::zeros(s, at::TensorOptions().dtype(dtype));
    };
    sh_->a.set(p, sample(a));
    sh_->b.set(p, sample(b));
    values_[vi.name()].node = p;
    ++k;
  }
}

void Builder::convert(const onnx::NodeProto& n) {
  cur_ = &n;
  if (auto it = absorbed_.find(&n); it != absorbed_.end()) {
    bind(0, it->second);
    return;
  }
  auto c = converters().find(n.op_type());
  if (c == converters().end()) {
    std::string ops;
    for (const auto& s : onnx_supported_ops()) ops += (ops.empty() ? "" : ", ") + s;
    fail("qfx does not read this op type (it reads: " + ops + ")");
  }
  for (size_t i = 0; i < static_cast<size_t>(n.input_size()); ++i)
    if (has_input(i) && !values_.count(n.input(static_cast<int>(i))))
      throw IoError(path_ + ": node " + n.name() + " (" + n.op_type() + ") reads '" + n.input(static_cast<int>(i)) +
                    "', which no earlier node computes (nodes must be in topological order)");
  try {
    c->second(*this);
  } catch (const c10::Error& e) {
    fail(std::string("libtorch rejects it: ") + e.what_without_backtrace());
  } catch (const std::out_of_range&) {
    invalid("an index or count in the node is out of range");
  }
  for (const auto& o : n.output())
    if (!o.empty() && !values_.count(o)) fail("output '" + o + "' is not produced (an optional output qfx does not compute)");
}

void Builder::outputs() {
  std::vector<Argument> outs;
  std::vector<c10::IValue> keys;
  for (const auto& o : m_.graph().output()) {
    cur_ = nullptr;
    auto it = values_.find(o.name());
    if (it == values_.end()) throw IoError(path_ + ": graph output '" + o.name() + "' is computed by no node");
    if (!it->second.sym.empty()) throw UnsupportedOpError(path_ + ": graph output '" + o.name() + "' is a shape, not a tensor");
    Node* n = it->second.node;
    if (!n) n = constant_node(it->second.constant, "onnx_constant_" + identifier(o.name()), false);  // a constant output
    outs.emplace_back(n);
    keys.emplace_back(o.name());
  }
  Node* out = g_.output(outs.size() == 1 ? outs[0] : Argument::tuple(std::move(outs)));
  if (keys.size() > 1) set_output_keys(out, keys);
}

bool Builder::has_input(size_t i) const { return i < static_cast<size_t>(cur_->input_size()) && !cur_->input(static_cast<int>(i)).empty(); }

const Value& Builder::in(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  return values_.at(cur_->input(static_cast<int>(i)));
}

Node* Builder::tensor(size_t i) {
  in(i);  // fails for an absent input
  const std::string& name = cur_->input(static_cast<int>(i));
  Value& v = values_.at(name);
  if (v.node) return v.node;
  if (!v.sym.empty())
    fail("input " + std::to_string(i) + " is a shape computed from dynamic dims and used as a tensor; fix the input shape "
         "(model.input_shape) so qfx can fold it");
  // An initializer read as a tensor: a trainable parameter when floating point.
  v.node = constant_node(v.constant, identifier(name), v.constant.is_floating_point() && initializer_names_.count(name));
  return v.node;
}

Node* Builder::node_of(const Value& v) {
  if (v.node) return v.node;
  if (!v.sym.empty()) fail("a shape computed from dynamic dims is used as a tensor; fix the input shape (model.input_shape)");
  return constant_node(v.constant, "onnx_constant", false);
}

Node* Builder::constant_node(const at::Tensor& c, const std::string& hint, bool trainable) {
  const std::string attr = unique_path(hint);
  at::Tensor t = c;
  if (trainable) t = t.detach().requires_grad_(true);
  gm_->add_tensor(attr, t, !trainable);
  Node* n = g_.get_attr(attr, attr);
  n->meta()["is_tensor"] = true;
  n->meta()["module_path"] = std::string();
  n->meta()["traced_shape"] = c10::IValue(t.sizes().vec());
  sh_->a.eval(n);
  sh_->b.eval(n);
  sh_->constant_nodes.insert(n);
  return n;
}

at::Tensor Builder::constant(size_t i, const std::string& what) const {
  const Value& v = in(i);
  if (!v.constant.defined()) fail(what + " (input " + std::to_string(i) + ") must be a constant; here it is computed at run time");
  return v.constant;
}

Argument Builder::ints(size_t i) {
  const Value& v = in(i);
  if (!v.sym.empty()) return int_list(v.sym);
  const at::Tensor c = constant(i, "this int list").to(at::kLong).contiguous().reshape({-1});
  return Argument(c10::IValue(std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel())));
}

std::vector<int64_t> Builder::shape(size_t i) const {
  const Value& v = in(i);
  if (v.constant.defined()) return v.constant.sizes().vec();
  if (!v.sym.empty()) return v.sym_scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.sym.size())};
  const c10::IValue& a = sh_->a.get(v.node);
  const c10::IValue& b = sh_->b.get(v.node);
  if (!a.isTensor()) return {};
  std::vector<int64_t> s = a.toTensor().sizes().vec();
  const auto sb = b.toTensor().sizes();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] != sb[d]) s[d] = -1;
  return s;
}

Argument Builder::dim(size_t i, int64_t d) {
  const std::vector<int64_t> s = shape(i);
  if (d < 0) d += static_cast<int64_t>(s.size());
  if (d < 0 || d >= static_cast<int64_t>(s.size())) fail("dim " + std::to_string(d) + " is out of range");
  if (s[d] >= 0) return Argument(c10::IValue(s[d]));
  Value v = call("aten::size.int", {Argument(tensor(i)), Argument(c10::IValue(d))});
  return Argument(v.node);
}

Value Builder::call(const std::string& target, std::vector<Argument> args, std::vector<std::pair<std::string, Argument>> kwargs) {
  Node* n = g_.call_function(target, std::move(args), std::move(kwargs), identifier(cur_ ? cur_->name() : target));
  return fold_or_keep(n);
}

// Runs `n` on the shadows; a node that reads no run-time value becomes a constant.
Value Builder::fold_or_keep(Node* n) {
  if (cur_) {
    n->meta()["onnx_node"] = cur_->name();
    if (!n->meta().count("module_path")) n->meta()["module_path"] = std::string();
  }
  try {
    sh_->a.eval(n);
    sh_->b.eval(n);
  } catch (const Error& e) {
    fail(std::string("computing it fails: ") + e.what());
  }
  bool runtime = false;
  for (const Node* in : n->input_nodes()) runtime = runtime || !sh_->constant_nodes.count(in);
  const c10::IValue& va = sh_->a.get(n);
  if (!runtime && n->op() == Opcode::kCallFunction) {
    Value v;
    if (va.isTensor()) v.constant = va.toTensor().detach();
    else if (va.isInt()) v.constant = at::scalar_tensor(va.toInt(), at::kLong);
    else if (va.isDouble()) v.constant = at::scalar_tensor(va.toDouble(), at::kFloat);
    if (v.constant.defined()) {
      sh_->a.forget(n);
      sh_->b.forget(n);
      g_.erase_node(n);
      return v;
    }
  }
  n->meta()["is_tensor"] = va.isTensor();
  n->meta()["type"] = std::string(va.isTensor() ? "Tensor" : va.isInt() ? "int" : "value");
  set_shape_meta(n);
  Value v;
  v.node = n;
  return v;
}

void Builder::set_shape_meta(Node* n) {
  const c10::IValue& a = sh_->a.get(n);
  const c10::IValue& b = sh_->b.get(n);
  if (!a.isTensor() || !b.isTensor()) return;
  std::vector<int64_t> s = a.toTensor().sizes().vec();
  const auto sb = b.toTensor().sizes();
  for (size_t d = 0; d < s.size() && d < sb.size(); ++d)
    if (s[d] != sb[d]) s[d] = -1;
  n->meta()["traced_shape"] = c10::IValue(s);
}


Value Builder::module(const std::string& cls, LoadedModule m, Node* x, const std::string& weight) {
  std::string hint = torch_path(weight);
  if (hint.empty()) hint = scope_path(cur_->name());
  if (hint.empty() || gm_->has_attr(hint) || nests_with_a_layer(hint)) hint = identifier(cur_->name().empty() ? cls : cur_->name());
  const std::string path = unique_path(hint);
  layer_paths_.insert(path);
  gm_->add_submodule(path, m.module, m.fn);
  Node* n = g_.call_module(path, {Argument(x)}, {}, path);
  n->meta()["module_type"] = cls;
  n->meta()["module_path"] = path;
  return fold_or_keep(n);
}

Value Builder::constant_value(at::Tensor t) {
  Value v;
  v.constant = std::move(t);
  return v;
}

void Builder::bind(size_t output, Value v) {
  if (output >= static_cast<size_t>(cur_->output_size()) || cur_->output(static_cast<int>(output)).empty()) return;
  values_[cur_->output(static_cast<int>(output))] = std::move(v);
}

// A path that is, holds or lies inside a layer already rebuilt (a scope name can
// be the module that calls a layer's functions, not the layer).
bool Builder::nests_with_a_layer(const std::string& p) const {
  for (const auto& l : layer_paths_)
    if (l == p || p.rfind(l + ".", 0) == 0 || l.rfind(p + ".", 0) == 0) return true;
  return false;
}

const onnx::NodeProto* Builder::producer(size_t i) const {
  if (!has_input(i)) return nullptr;
  auto it = producers_.find(cur_->input(static_cast<int>(i)));
  return it == producers_.end() ? nullptr : it->second;
}

const onnx::NodeProto* Builder::sole_consumer(size_t k) const { return sole_consumer_of(*cur_, k); }

const onnx::NodeProto* Builder::sole_consumer_of(const onnx::NodeProto& n, size_t k) const {
  if (k >= static_cast<size_t>(n.output_size())) return nullptr;
  auto it = consumers_.find(n.output(static_cast<int>(k)));
  if (it == consumers_.end() || it->second.size() != 1) return nullptr;
  return it->second[0];
}

void Builder::absorb(const onnx::NodeProto& later, Value v) { absorbed_[&later] = std::move(v); }

std::string Builder::unique_path(const std::string& hint) {
  std::string p = hint;
  int& k = paths_[hint];
  while (gm_->get_submodule(p) || gm_->has_attr(p) || (k > 0 && p == hint)) p = hint + "_" + std::to_string(k++);
  if (k == 0) k = 1;
  return p;
}

void Builder::invalid(const std::string& why) const {
  throw IoError(path_ + ": node " + (cur_ && !cur_->name().empty() ? cur_->name() : std::string("(unnamed)")) + " (" +
                (cur_ ? cur_->op_type() : std::string("?")) + "): not a valid ONNX node: " + why);
}

int64_t Builder::axis(int64_t a, int64_t rank, const std::string& what) const {
  const int64_t v = a < 0 ? a + rank : a;
  if (v < 0 || v >= rank) invalid(what + " " + std::to_string(a) + " for a rank-" + std::to_string(rank) + " input");
  return v;
}

std::vector<int64_t> Builder::attr_ints_n(const std::string& name, size_t n, std::vector<int64_t> def) const {
  std::vector<int64_t> v = attr_ints(*cur_, name, std::move(def));
  if (v.size() != n) invalid(name + " holds " + std::to_string(v.size()) + " values, " + std::to_string(n) + " expected");
  return v;
}

void Builder::check_size(const std::vector<int64_t>& shape, const std::string& what) const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) invalid(what + " has a negative size");
    if (d > 0 && n > kMaxElements / d) invalid(what + " has more than 2^30 elements");
    n *= d;
  }
}

void Builder::fail(const std::string& why) const {
  if (!cur_) throw UnsupportedOpError(path_ + ": " + why);
  throw UnsupportedOpError(path_ + ": node " + (cur_->name().empty() ? std::string("(unnamed)") : cur_->name()) + " (" +
                           cur_->op_type() + "): " + why);
}

// Symmetric padding per spatial dim from ONNX pads (begin..., end...) and auto_pad;
// asymmetric pads are applied by a constant_pad_nd before the layer.
std::vector<int64_t> symmetric_pads(Builder& b, Node** x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                    const std::vector<int64_t>& dilations, double pad_value) {
  const auto& n = b.node();
  const size_t d = kernel.size();
  std::vector<int64_t> pads = attr_ints(n, "pads", std::vector<int64_t>(2 * d, 0));
  const std::string ap = attr_s(n, "auto_pad", "NOTSET");
  if (ap == "VALID") pads.assign(2 * d, 0);
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const std::vector<int64_t> in = b.shape(0);
    for (size_t i = 0; i < d; ++i) {
      const int64_t size = in[2 + i];
      if (size < 0) b.fail("auto_pad " + ap + " over a dynamic spatial dim");
      const int64_t out = (size + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0);
      pads[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + d] = total - pads[i];
    }
  }
  if (pads.size() != 2 * d) b.fail("pads has " + std::to_string(pads.size()) + " values for " + std::to_string(d) + " spatial dims");
  bool symmetric = true;
  for (size_t i = 0; i < d; ++i) symmetric = symmetric && pads[i] == pads[i + d];
  if (symmetric) return std::vector<int64_t>(pads.begin(), pads.begin() + static_cast<long>(d));
  std::vector<int64_t> torch_pad;  // last dim first: (begin, end) pairs
  for (size_t i = d; i-- > 0;) {
    torch_pad.push_back(pads[i]);
    torch_pad.push_back(pads[i + d]);
  }
  // node_of: a constant input (an initializer read as the tensor) is padded at load, and the result is a constant
  *x = b.node_of(b.call("aten::constant_pad_nd", {Argument(*x), Argument(c10::IValue(torch_pad)), Argument(c10::IValue(pad_value))}));
  return std::vector<int64_t>(d, 0);
}

std::optional<at::ScalarType> scalar_type(int64_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return at::kFloat;
    case onnx::TensorProto::UINT8: return at::kByte;
    case onnx::TensorProto::INT8: return at::kChar;
    case onnx::TensorProto::INT16: return at::kShort;
    case onnx::TensorProto::INT32: return at::kInt;
    case onnx::TensorProto::INT64: return at::kLong;
    case onnx::TensorProto::BOOL: return at::kBool;
    case onnx::TensorProto::FLOAT16: return at::kHalf;
    case onnx::TensorProto::DOUBLE: return at::kDouble;
    default: return std::nullopt;
  }
}

at::Tensor Builder::attr_tensor(const std::string& name) const {
  const onnx::AttributeProto* a = attribute(*cur_, name);
  if (!a || !a->has_t()) return at::Tensor();
  return to_tensor(a->t(), path_, dir_);
}

std::optional<std::vector<Argument>> shape_elements(const Value& v) {
  if (!v.sym.empty()) return v.sym;
  if (!v.constant.defined() || v.constant.is_floating_point() || v.constant.dim() > 1) return std::nullopt;
  const at::Tensor c = v.constant.to(at::kLong).contiguous().reshape({-1});
  std::vector<Argument> e;
  for (int64_t i = 0; i < c.numel(); ++i) e.emplace_back(c10::IValue(c.data_ptr<int64_t>()[i]));
  return e;
}

Argument int_list(const std::vector<Argument>& e) {
  std::vector<int64_t> ints;
  for (const auto& a : e)
    if (a.kind == Argument::Kind::kConst && a.value.isInt()) ints.push_back(a.value.toInt());
  if (ints.size() == e.size()) return Argument(c10::IValue(ints));
  return Argument::list(e, c10::IntType::get());
}

Value shape_value(std::vector<Argument> e, bool scalar) {
  std::vector<int64_t> ints;
  for (const auto& a : e)
    if (a.kind == Argument::Kind::kConst && a.value.isInt()) ints.push_back(a.value.toInt());
  Value v;
  if (ints.size() == e.size()) {
    v.constant = at::tensor(ints, at::kLong);
    if (scalar) v.constant = v.constant.reshape({});
    return v;
  }
  v.sym = std::move(e);
  v.sym_scalar = scalar;
  return v;
}

}  // namespace qfx::fx::onnx_detail

namespace qfx::fx {

std::shared_ptr<GraphModule> load_onnx_model(const std::string& path, const OnnxModelOptions& options) {
  const onnx::ModelProto m = onnx_detail::read_model(path);
  return onnx_detail::Builder(m, path, options).build();
}

std::vector<OnnxInput> onnx_model_inputs(const std::string& path) {
  const onnx::ModelProto m = onnx_detail::read_model(path);
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  std::vector<OnnxInput> out;
  for (const auto& vi : m.graph().input()) {
    if (inits.count(vi.name())) continue;
    OnnxInput in{vi.name(), "", {}};
    const auto& tt = vi.type().tensor_type();
    std::string t = onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(tt.elem_type()));
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    in.dtype = t == "float" ? "float32" : t;
    for (const auto& d : tt.shape().dim()) in.shape.push_back(d.has_dim_value() && d.dim_value() > 0 ? d.dim_value() : -1);
    out.push_back(std::move(in));
  }
  return out;
}

bool is_onnx_model(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".onnx";
}

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> ops;
  for (const auto& [k, v] : onnx_detail::converters()) ops.push_back(k);
  return ops;
}

}  // namespace qfx::fx
