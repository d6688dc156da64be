// export_onnx's exporter core (exporter.h): the ONNX building helpers, arguments,
// inputs, parameters, and the dispatch of each node to its op catalog record.
#include "exporter.h"

#include <set>

#include "export_rnn.h"
#include "qfx/quant/block_quant.h"
#include "qfx/quant/passes.h"

namespace qfx::quant::detail {
namespace {

// A new initializer of `g` named `name`, of ONNX data type `type` and shape `dims`,
// holding `raw` (raw_data, little-endian as ONNX stores it).
void add_raw_initializer(onnx::GraphProto* g, const std::string& name, at::IntArrayRef dims, int type, std::string raw) {
  auto* tp = g->add_initializer();
  tp->set_name(name);
  for (auto d : dims) tp->add_dims(d);
  tp->set_data_type(type);
  tp->set_raw_data(std::move(raw));
}

}  // namespace

Exporter::Exporter(fx::GraphModule& gm, const ExportOptions& o, ExportResult& r) : gm_(gm), opt_(o), res_(r) {
  model_.set_ir_version(8);
  model_.set_producer_name("qfx");
  auto* os = model_.add_opset_import();
  os->set_domain("");
  os->set_version(o.opset);
  g_ = model_.mutable_graph();
  g_->set_name("qfx_int8");
  std::map<std::string, std::string> metadata = o.metadata;
  if (o.target_arithmetic && !o.float_model && !metadata.count(runtime::kArithmeticMetadataKey))
    if (const std::string a = recorded_arithmetic(gm); !a.empty()) metadata[runtime::kArithmeticMetadataKey] = a;
  for (const auto& [k, v] : metadata) {
    auto* p = model_.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
}

void Exporter::run() {
  size_t placeholder_index = 0;
  for (fx::Node* n : gm_.graph().nodes()) {
    switch (n->op()) {
      case fx::Opcode::kPlaceholder: input(n, placeholder_index++); break;
      case fx::Opcode::kOutput: output(n); break;
      case fx::Opcode::kGetAttr: attribute(n); break;
      case fx::Opcode::kCallMethod: unsupported(*n, "a wrapped call cannot be expressed in ONNX; keep it out of the exported part");
      case fx::Opcode::kCallModule: module(n); break;
      case fx::Opcode::kCallFunction:
        if (integer_constant(n)) {  // index arithmetic and masks on constants: their values
          fold_constant(n);
          break;
        }
        try {
          function(n);
        } catch (const UnsupportedOpError&) {
          if (!constant_node(n)) throw;
          fold_constant(n);  // reads only parameters and buffers: its value is the export
        }
        break;
    }
  }
  prune_initializers();
}

void Exporter::prune_initializers() {
  std::set<std::string> used;
  for (const auto& nd : g_->node()) used.insert(nd.input().begin(), nd.input().end());
  for (const auto& o : g_->output()) used.insert(o.name());
  auto* inits = g_->mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i)
    if (!used.count(inits->Get(i).name())) inits->DeleteSubrange(i, 1);
}

std::string Exporter::bytes() {
  std::string b;
  if (!model_.SerializeToString(&b)) throw IoError("export_onnx: cannot serialize the ONNX model");
  return b;
}

onnx::NodeProto* Exporter::node(const std::string& op, const std::vector<std::string>& in, const std::string& out,
                                const std::string& name) {
  const std::vector<std::string>& allowed = emitting_ ? emitting_->onnx_ops : core_onnx_ops();
  if (std::find(allowed.begin(), allowed.end(), op) == allowed.end())
    throw InternalError("export_onnx: node '" + name + "' is ONNX " + op + ", which " +
                        (emitting_ ? "the op catalog record '" + emitting_->name + "' does not list in its onnx_ops"
                                   : std::string("core_onnx_ops() does not list")));
  auto* p = g_->add_node();
  p->set_op_type(op);
  p->set_name(node_names_.insert(name).second ? name : *node_names_.insert(fresh(name)).first);
  for (const auto& i : in) p->add_input(i);
  p->add_output(out);
  return p;
}

void Exporter::attr_i(onnx::NodeProto* p, const std::string& k, int64_t v) {
  auto* a = p->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void Exporter::attr_f(onnx::NodeProto* p, const std::string& k, float v) {
  auto* a = p->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void Exporter::attr_ints(onnx::NodeProto* p, const std::string& k, const std::vector<int64_t>& v) {
  auto* a = p->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

void Exporter::attr_s(onnx::NodeProto* p, const std::string& k, const std::string& v) {
  auto* a = p->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

std::string Exporter::init(const std::string& hint, const at::Tensor& t_in) {
  at::Tensor t = t_in.detach().contiguous();
  int type;
  switch (t.scalar_type()) {
    case at::kFloat: type = onnx::TensorProto::FLOAT; break;
    case at::kChar: type = onnx::TensorProto::INT8; break;
    case at::kShort: type = onnx::TensorProto::INT16; break;
    case at::kByte: type = onnx::TensorProto::UINT8; break;
    case at::kInt: type = onnx::TensorProto::INT32; break;
    case at::kLong: type = onnx::TensorProto::INT64; break;
    case at::kBool: type = onnx::TensorProto::BOOL; break;
    default: throw UnsupportedOpError("export_onnx: cannot store a tensor of type " + std::string(c10::toString(t.scalar_type())));
  }
  const std::string name = fresh(hint);
  add_raw_initializer(g_, name, t.sizes(), type, std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()));
  return name;
}

void Exporter::reduce_axes(onnx::NodeProto* p, const std::vector<int64_t>& axes) {
  if (opt_.opset >= 18) p->add_input(ints_init(p->name() + "_axes", axes));
  else attr_ints(p, "axes", axes);
}

std::string Exporter::init_4bit(const std::string& hint, const at::Tensor& codes) {
  const at::Tensor c = codes.detach().contiguous().to(at::kInt);
  const bool is_signed = codes.scalar_type() == at::kChar;
  const int64_t n = c.numel();
  std::string packed(static_cast<size_t>((n + 1) / 2), '\0');
  const int32_t* v = c.data_ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t x = v[i];
    if (is_signed ? (x < -8 || x > 7) : (x < 0 || x > 15))
      throw InternalError("export_onnx: 4-bit code " + std::to_string(x) + " of '" + hint + "' is out of range");
    const auto nib = static_cast<unsigned char>(x & 0xF);
    packed[static_cast<size_t>(i / 2)] = static_cast<char>(static_cast<unsigned char>(packed[static_cast<size_t>(i / 2)]) |
                                                           (i % 2 ? nib << 4 : nib));
  }
  const std::string name = fresh(hint);
  add_raw_initializer(g_, name, c.sizes(), is_signed ? kOnnxInt4 : kOnnxUInt4, std::move(packed));
  return name;
}

std::string Exporter::dequantize_weight(const std::string& hint, const at::Tensor& codes, const QParams& q,
                                        int64_t channel_axis) {
  std::string ws, wz, wi;
  if (q.block_size > 0) {
    if (opt_.opset < 21)
      throw UnsupportedOpError("export_onnx: node '" + hint + "': block-wise weights need ONNX opset 21 (exporting " +
                               std::to_string(opt_.opset) + ")");
    const int64_t channels = codes.size(channel_axis);
    at::Tensor scale = block_grid(q.scale.to(at::kFloat), channels), zp = block_grid(zero_points(q), channels);
    if (channel_axis == 1) scale = scale.t().contiguous(), zp = zp.t().contiguous();
    const bool four = q.quant_min >= -8 && q.quant_max <= (q.dtype == QDType::kUInt8 ? 15 : 7);
    wi = four ? init_4bit(hint + "_weight_q", codes) : init(hint + "_weight_q", codes);
    ws = init(hint + "_weight_scale", scale);
    wz = four ? init_4bit(hint + "_weight_zero_point", zp) : init(hint + "_weight_zero_point", zp);
  } else {
    const std::vector<int64_t> vec = q.per_channel ? std::vector<int64_t>{-1} : std::vector<int64_t>{};
    wi = init(hint + "_weight_q", codes);
    ws = init(hint + "_weight_scale", q.scale.to(at::kFloat).reshape(vec));
    wz = init(hint + "_weight_zero_point", zero_points(q).reshape(vec));
  }
  const std::string out = fresh(hint + "_weight");
  auto* dn = node("DequantizeLinear", {wi, ws, wz}, out, out);
  if (q.block_size > 0) {
    attr_i(dn, "axis", 1 - channel_axis);
    attr_i(dn, "block_size", q.block_size);
  } else if (q.per_channel) {
    attr_i(dn, "axis", channel_axis);
  }
  ++res_.quantized_weights;
  Encoding enc;
  enc.tensor = out;
  enc.quantized = wi;
  enc.node = hint;
  enc.dtype = qdtype_name(q.dtype);
  const at::Tensor sc = q.scale.to(at::kFloat).contiguous().reshape({-1});
  const at::Tensor zp = q.zero_point.to(at::kInt).contiguous().reshape({-1});
  enc.scale.assign(sc.data_ptr<float>(), sc.data_ptr<float>() + sc.numel());
  enc.zero_point.assign(zp.data_ptr<int32_t>(), zp.data_ptr<int32_t>() + zp.numel());
  enc.axis = q.per_channel ? channel_axis : -1;
  enc.block_size = q.block_size;
  enc.quant_min = q.quant_min;
  enc.quant_max = q.quant_max;
  res_.weight_encodings.push_back(std::move(enc));
  return out;
}

at::Tensor Exporter::zero_points(const QParams& q) {
  at::Tensor z = q.zero_point.to(at::kInt);
  return q.dtype == QDType::kUInt8 ? z.to(at::kByte) : q.dtype == QDType::kInt16 ? z.to(at::kShort) : z.to(at::kChar);
}

void Exporter::microsoft_domain(onnx::NodeProto* p) {
  p->set_domain(runtime::kMicrosoftDomain);
  if (ms_imported_) return;
  auto* os = model_.add_opset_import();
  os->set_domain(runtime::kMicrosoftDomain);
  os->set_version(1);
  ms_imported_ = true;
}

std::string Exporter::two_input(const char* op, const std::string& a, const std::string& b, const std::string& name) {
  const std::string y = fresh(name);
  node(op, {a, b}, y, y);
  return y;
}

const std::string& Exporter::value(const fx::Node& user, const fx::Argument& a) {
  if (!a.is_node()) unsupported(user, "a non-tensor argument where a tensor is expected");
  auto it = names_.find(a.node);
  if (it == names_.end()) {
    // A folded integer or bool value, written where a non-constant op first reads it.
    auto f = folded_.find(a.node->name());
    if (f == folded_.end() || f->second.is_floating_point())
      unsupported(user, "its input '" + a.node->name() + "' was not exported");
    it = names_.emplace(a.node, init(a.node->name(), f->second)).first;
  }
  return it->second;
}

int Exporter::rank_of(const fx::Argument& a) {
  if (!a.is_node()) return -1;
  auto it = rank_.find(a.node);
  return it == rank_.end() ? -1 : it->second;
}

std::vector<int64_t> Exporter::ints_arg(const fx::Node& n, size_t i) {
  if (i >= n.args().size() || !n.args()[i].is_const()) unsupported(n, "argument " + std::to_string(i) + " must be a constant");
  const auto& v = n.args()[i].value;
  if (v.isInt()) return {v.toInt()};
  if (v.isIntList()) return v.toIntVector();
  unsupported(n, "argument " + std::to_string(i) + " must be an int or int list");
}

double Exporter::num_arg(const fx::Node& n, size_t i, double def) {
  if (i >= n.args().size()) return def;
  const auto& a = n.args()[i];
  if (!a.is_const()) unsupported(n, "argument " + std::to_string(i) + " must be a constant");
  if (a.value.isDouble()) return a.value.toDouble();
  if (a.value.isInt()) return static_cast<double>(a.value.toInt());
  if (a.value.isBool()) return a.value.toBool() ? 1.0 : 0.0;
  return def;
}

std::string Exporter::operand(const fx::Node& n, const fx::Argument& a) {
  if (a.is_node()) return value(n, a);
  if (a.is_const() && (a.value.isDouble() || a.value.isInt()))
    return init("scalar", at::full({}, static_cast<float>(a.value.isDouble() ? a.value.toDouble() : a.value.toInt())));
  if (a.is_const() && a.value.isTensor())  // a constant torch.jit.trace recorded (-10000.0 of an attention mask)
    return init("constant", a.value.toTensor().detach().to(at::kFloat));
  unsupported(n, "an operand that is neither a tensor nor a number");
}

void Exporter::unary(fx::Node* n, const std::string& op, int rank_delta, const std::vector<std::string>& extra) {
  const std::string y = fresh(n->name());
  std::vector<std::string> in = {value(*n, n->args().at(0))};
  in.insert(in.end(), extra.begin(), extra.end());
  last_ = node(op, in, y, n->name());
  names_[n] = y;
  const int r = rank_of(n->args().at(0));
  rank_[n] = r < 0 ? -1 : r + rank_delta;
}

void Exporter::binary(fx::Node* n, const std::string& op) {
  static const std::set<std::string> compares = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
  at::ScalarType t = op == "And" || op == "Or" || op == "Xor" ? at::kBool : promoted(*n, 0, 2);
  if (op == "Div" && at::isIntegralType(t, /*includeBool=*/true)) t = at::kFloat;
  if (!compares.count(op) && t == at::kBool && op != "And" && op != "Or" && op != "Xor") t = at::kLong;  // bool arithmetic
  const std::string a = operand_as(*n, n->args().at(0), t);
  std::string b = operand_as(*n, n->args().at(1), t);
  double alpha = n->args().size() > 2 ? num_arg(*n, 2, 1.0) : 1.0;
  for (const auto& [k, v] : n->kwargs())
    if (k == "alpha" && v.is_const() && (v.value.isDouble() || v.value.isInt())) alpha = v.value.isDouble() ? v.value.toDouble() : v.value.toInt();
  if ((op == "Add" || op == "Sub") && alpha != 1.0) {
    if (at::isIntegralType(t, true) && alpha != std::floor(alpha)) unsupported(*n, "a fractional alpha on integers");
    b = two_input("Mul", b, init("alpha", at::full({}, alpha, at::TensorOptions().dtype(t))), n->name() + "_alpha");
  }
  const std::string y = fresh(n->name());
  node(op, {a, b}, y, n->name());
  names_[n] = y;
  rank_[n] = std::max(rank_of(n->args().at(0)), rank_of(n->args().at(1)));
}

void Exporter::alias(fx::Node* n) {
  names_[n] = value(*n, n->args().at(0));
  rank_[n] = rank_of(n->args().at(0));
}

onnx::NodeProto* Exporter::gated(fx::Node* n, const std::string& op, const std::string& hint) {
  const std::string& x = value(*n, n->args().at(0));
  const std::string s = fresh(n->name() + hint);
  onnx::NodeProto* g = node(op, {x}, s, n->name() + hint);
  const std::string y = fresh(n->name());
  last_ = node("Mul", {x, s}, y, n->name());
  names_[n] = y;
  rank_[n] = rank_of(n->args().at(0));
  return g;
}

void Exporter::input(fx::Node* n, size_t i) {
  if (i == 0) first_input_ = n;
  const std::string name = i < opt_.input_names.size() ? opt_.input_names[i] : n->name();
  auto* vi = g_->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  const std::string dtype = i < opt_.input_dtypes.size() ? opt_.input_dtypes[i] : "float32";
  tt->set_elem_type(dtype == "int64"   ? onnx::TensorProto::INT64
                    : dtype == "int32" ? onnx::TensorProto::INT32
                    : dtype == "bool"  ? onnx::TensorProto::BOOL
                                       : onnx::TensorProto::FLOAT);
  if (i < opt_.input_shapes.size()) {
    auto* sh = tt->mutable_shape();
    for (auto d : opt_.input_shapes[i]) {
      auto* dim = sh->add_dim();
      if (d < 0) dim->set_dim_param("N");
      else dim->set_dim_value(d);
    }
    rank_[n] = static_cast<int>(opt_.input_shapes[i].size());
  }
  names_[n] = name;
}

void Exporter::attribute(fx::Node* n) {
  if (read_by_rnn_only(*this, n)) return;  // a recurrent layer's weight: exported reordered by rnn_function
  at::Tensor t = gm_.get_attr(n->target()).detach();
  if (t.is_floating_point()) t = t.to(at::kFloat);
  names_[n] = init(n->name(), t);
  rank_[n] = static_cast<int>(t.dim());
}

void Exporter::observed(fx::Node* n) {
  if (read_by_rnn_only(*this, n)) return;  // a recurrent layer's weight quantizer: rnn_function reads the weight
  const std::string& x = value(*n, n->args().at(0));
  res_.observed.push_back({n->target(), n->args().at(0).is_node() ? n->args().at(0).node->name() : n->name(), x});
  names_[n] = x;
  rank_[n] = rank_of(n->args().at(0));
}

bool Exporter::weight_of_functional_linear(const fx::Node* n) {
  if (n->args().empty() || !n->args()[0].is_node() || n->args()[0].node->op() != fx::Opcode::kGetAttr || n->users().empty())
    return false;
  for (const fx::Node* u : n->users())
    if (u->op() != fx::Opcode::kCallFunction || u->target().rfind("aten::linear", 0) != 0 || u->args().size() < 2 ||
        !u->args()[1].is_node() || u->args()[1].node != n)
      return false;
  return true;
}

namespace {

// Sets Exporter::emitting_ for the life of one record's emission.
class Emitting {
 public:
  Emitting(Exporter& e, const OpRecord* r) : e_(e), prev_(e.emitting_) { e.emitting_ = r; }
  ~Emitting() { e_.emitting_ = prev_; }

 private:
  Exporter& e_;
  const OpRecord* prev_;
};

}  // namespace

void Exporter::module(fx::Node* n) {
  auto m = gm_.get_submodule(n->target());
  if (auto* qd = dynamic_cast<QuantDequant*>(m.get())) return quant_dequant(n, *qd);
  if (auto* q = dynamic_cast<QuantizedConvLinear*>(m.get())) return weighted(n, *q);
  if (dynamic_cast<FakeQuantize*>(m.get())) {
    if (!opt_.float_model) unsupported(*n, "a FakeQuantize in the graph: export the output of convert_fx");
    return observed(n);
  }
  if (auto* f = dynamic_cast<FusedConvLinear*>(m.get())) {
    if (!opt_.float_model) unsupported(*n, "a prepared FusedConvLinear in the graph: export the output of convert_fx");
    return weighted(n, QuantizedConvLinear(*f, /*quantize_weight=*/false, -1.0f));
  }
  const std::string op = canonical_op_name(*n, gm_);
  const auto [record, x] = emission(*n, op, "module");
  Emitting scope(*this, record);
  if (x->module) return x->module(*this, *n, *m);
  // Called with the function's arguments (ReLU(x) as relu(x)): only for a class
  // the op's record lists.
  if (op_catalog().name_of_module(fx::module_type_name(*n, gm_)) != op || !x->function)
    unsupported(*n, "module '" + op + "' has no ONNX export in qfx yet");
  x->function(*this, *n);
}

std::pair<const OpRecord*, const OnnxExport*> Exporter::emission(const fx::Node& n, const std::string& op, const std::string& what) {
  const OpRecord* r = op_catalog().find(op);
  if (const OnnxExport* x = op_catalog().onnx_export(op, opt_.opset)) return {r, x};
  if (r && !r->onnx.empty())
    unsupported(n, what + " '" + op + "' needs ONNX opset " + std::to_string(r->onnx.front().since_opset) +
                       " or newer (exporting opset " + std::to_string(opt_.opset) + ")");
  unsupported(n, what + " '" + op + "' has no ONNX export in qfx yet");
}

void Exporter::function(fx::Node* n) {
  const std::string op = canonical_op_name(*n, gm_);
  const auto [record, x] = emission(*n, op, "op");
  if (!x->function) unsupported(*n, "op '" + op + "' is exported only as a module");
  check_kwargs(*n, record);
  Emitting scope(*this, record);
  x->function(*this, *n);
}

}  // namespace qfx::quant::detail
