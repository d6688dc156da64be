// ONNX Runtime's MatMulNBits form of block-wise 4-bit weights (ExportOptions::matmul_nbits).
#include "matmul_nbits.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "exporter.h"

namespace qfx::quant::detail {

namespace {

const onnx::TensorProto* initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

// The 4-bit values of an INT4 / UINT4 initializer as MatMulNBits' unsigned codes:
// UINT4 as stored, INT4 plus 8 (-8..7 become 0..15: the nibble with its top bit flipped).
std::vector<int> nibbles(const onnx::TensorProto& t, int64_t n) {
  std::vector<int> out(static_cast<size_t>(n));
  const std::string& raw = t.raw_data();
  const bool is_signed = t.data_type() == kOnnxInt4;
  for (int64_t i = 0; i < n; ++i) {
    const int v = (static_cast<unsigned char>(raw.at(static_cast<size_t>(i / 2))) >> (i % 2 ? 4 : 0)) & 0xF;
    out[static_cast<size_t>(i)] = is_signed ? v ^ 8 : v;
  }
  return out;
}

// A float initializer's `n` values (foldable() checked that raw_data holds them).
std::vector<float> floats(const onnx::TensorProto& t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  std::memcpy(out.data(), t.raw_data().data(), out.size() * 4);
  return out;
}

int64_t attr(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

void set_attr(onnx::NodeProto* n, const char* name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// A DequantizeLinear this pass can fold into its MatMul: its weight's layout.
struct Weight {
  const onnx::TensorProto *codes = nullptr, *scale = nullptr, *zero_point = nullptr;
  int64_t K = 0, N = 0, block = 0, blocks = 0;
};

bool foldable(const onnx::GraphProto& g, const onnx::NodeProto& dq, Weight* w) {
  if (dq.op_type() != "DequantizeLinear" || !dq.domain().empty() || dq.input_size() < 2) return false;
  w->codes = initializer(g, dq.input(0));
  w->scale = initializer(g, dq.input(1));
  w->zero_point = dq.input_size() > 2 && !dq.input(2).empty() ? initializer(g, dq.input(2)) : nullptr;
  w->block = attr(dq, "block_size", 0);
  if (!w->codes || !w->scale || (dq.input_size() > 2 && !dq.input(2).empty() && !w->zero_point)) return false;
  if (w->codes->data_type() != kOnnxInt4 && w->codes->data_type() != kOnnxUInt4) return false;
  if (w->codes->dims_size() != 2 || attr(dq, "axis", 1) != 0 || w->block < 16 || (w->block & (w->block - 1))) return false;
  w->K = w->codes->dims(0);
  w->N = w->codes->dims(1);
  w->blocks = (w->K + w->block - 1) / w->block;
  return w->scale->data_type() == onnx::TensorProto::FLOAT && w->scale->raw_data().size() == static_cast<size_t>(w->blocks * w->N * 4) &&
         (!w->zero_point || w->zero_point->data_type() == w->codes->data_type());
}

// The MatMulNBits inputs B, scales and zero points (empty when all are the default 8).
struct Packed {
  std::string b, scales, zero_points;
};

Packed pack(const Weight& w) {
  const std::vector<int> q = nibbles(*w.codes, w.K * w.N);
  const std::vector<float> s = floats(*w.scale, w.blocks * w.N);
  const std::vector<int> z = w.zero_point ? nibbles(*w.zero_point, w.blocks * w.N)
                                          : std::vector<int>(static_cast<size_t>(w.blocks * w.N), w.codes->data_type() == kOnnxInt4 ? 8 : 0);
  Packed p;
  p.b.assign(static_cast<size_t>(w.N * w.blocks * w.block / 2), '\0');
  p.scales.resize(static_cast<size_t>(w.N * w.blocks * 4));
  p.zero_points.assign(static_cast<size_t>(w.N * ((w.blocks + 1) / 2)), '\0');
  bool default_zp = true;
  for (int64_t o = 0; o < w.N; ++o)
    for (int64_t b = 0; b < w.blocks; ++b) {
      const int zp = z[static_cast<size_t>(b * w.N + o)];
      default_zp = default_zp && zp == 8;
      std::memcpy(&p.scales[static_cast<size_t>((o * w.blocks + b) * 4)], &s[static_cast<size_t>(b * w.N + o)], 4);
      p.zero_points[static_cast<size_t>(o * ((w.blocks + 1) / 2) + b / 2)] |= static_cast<char>(zp << (b % 2 ? 4 : 0));
      for (int64_t j = 0; j < w.block; ++j) {  // past K: the zero point (the rows of A stop at K)
        const int64_t k = b * w.block + j;
        const int v = k < w.K ? q[static_cast<size_t>(k * w.N + o)] : zp;
        p.b[static_cast<size_t>((o * w.blocks + b) * w.block / 2 + j / 2)] |= static_cast<char>(v << (j % 2 ? 4 : 0));
      }
    }
  if (default_zp) p.zero_points.clear();
  return p;
}

void replace_initializer(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, int type, std::string raw) {
  for (auto& t : *g->mutable_initializer())
    if (t.name() == name) {
      t.Clear();
      t.set_name(name);
      for (int64_t d : dims) t.add_dims(d);
      t.set_data_type(type);
      t.set_raw_data(std::move(raw));
      return;
    }
}

}  // namespace

int use_matmul_nbits(onnx::ModelProto& m, int accuracy_level) {
  onnx::GraphProto* g = m.mutable_graph();
  std::map<std::string, int> uses;
  for (const auto& n : g->node())
    for (const auto& i : n.input()) ++uses[i];
  for (const auto& o : g->output()) ++uses[o.name()];
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : g->node())
    for (const auto& o : n.output()) producer[o] = &n;
  std::vector<std::string> dropped;  // DequantizeLinear outputs folded away
  int rewritten = 0;
  for (auto& mm : *g->mutable_node()) {
    if (mm.op_type() != "MatMul" || !mm.domain().empty() || mm.input_size() != 2 || uses[mm.input(1)] != 1) continue;
    auto p = producer.find(mm.input(1));
    Weight w;
    if (p == producer.end() || !foldable(*g, *p->second, &w)) continue;
    const onnx::NodeProto& dq = *p->second;
    if (uses[dq.input(0)] != 1 || uses[dq.input(1)] != 1 || (w.zero_point && uses[dq.input(2)] != 1)) continue;
    Packed packed = pack(w);
    const std::string codes = dq.input(0), scales = dq.input(1), zp = w.zero_point ? dq.input(2) : "";
    replace_initializer(g, codes, {w.N, w.blocks, w.block / 2}, onnx::TensorProto::UINT8, std::move(packed.b));
    replace_initializer(g, scales, {w.N, w.blocks}, onnx::TensorProto::FLOAT, std::move(packed.scales));
    const std::string a = mm.input(0);
    dropped.push_back(mm.input(1));
    mm.clear_input();
    mm.add_input(a);
    mm.add_input(codes);
    mm.add_input(scales);
    if (!packed.zero_points.empty()) {
      const std::string zname = zp.empty() ? codes + "_zero_points" : zp;
      if (zp.empty()) g->add_initializer()->set_name(zname);
      replace_initializer(g, zname, {w.N, (w.blocks + 1) / 2}, onnx::TensorProto::UINT8, std::move(packed.zero_points));
      mm.add_input(zname);
    } else if (!zp.empty()) {
      dropped.push_back(zp);  // an initializer no node reads now
    }
    mm.set_op_type("MatMulNBits");
    mm.set_domain("com.microsoft");
    mm.clear_attribute();
    set_attr(&mm, "K", w.K);
    set_attr(&mm, "N", w.N);
    set_attr(&mm, "bits", 4);
    set_attr(&mm, "block_size", w.block);
    set_attr(&mm, "accuracy_level", accuracy_level);
    ++rewritten;
  }
  if (!rewritten) return 0;
  auto* nodes = g->mutable_node();
  for (int i = nodes->size() - 1; i >= 0; --i)
    if (nodes->Get(i).op_type() == "DequantizeLinear" && nodes->Get(i).output_size() == 1 &&
        std::find(dropped.begin(), dropped.end(), nodes->Get(i).output(0)) != dropped.end())
      nodes->DeleteSubrange(i, 1);
  auto* inits = g->mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i)
    if (std::find(dropped.begin(), dropped.end(), inits->Get(i).name()) != dropped.end()) inits->DeleteSubrange(i, 1);
  bool has_ms = false;
  for (const auto& o : m.opset_import()) has_ms = has_ms || o.domain() == "com.microsoft";
  if (!has_ms) {
    auto* o = m.add_opset_import();
    o->set_domain("com.microsoft");
    o->set_version(1);
  }
  return rewritten;
}

}  // namespace qfx::quant::detail
