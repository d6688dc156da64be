// export_onnx's QuantDequant of an activation (see exporter.h): QuantizeLinear ->
// DequantizeLinear (com.microsoft's for int16; per channel along its axis), a Clip to
// a sub-8-bit range, and the encoding it records.
#include "export_rnn.h"

namespace qfx::quant::detail {

void Exporter::quant_dequant(fx::Node* n, const QuantDequant& qd) {
  if (read_by_rnn_only(*this, n)) return;  // a recurrent layer's weight: rnn_function writes its codes
  const std::string& x = value(*n, n->args().at(0));
  const QParams& q = qd.qparams();
  if (opt_.float_model || weight_of_functional_linear(n)) {  // the linear writes the weight's codes itself
    names_[n] = x;
    rank_[n] = rank_of(n->args().at(0));
    return;
  }
  const std::string s = init(n->name() + "_scale", q.scale.to(at::kFloat));
  const std::string z = init(n->name() + "_zero_point", zero_points(q));
  const std::string qv = fresh(n->name() + "_q"), dv = fresh(n->name() + "_dq");
  auto* qn = node("QuantizeLinear", {x, s, z}, qv, qv);
  auto* dn = node("DequantizeLinear", {qv, s, z}, dv, dv);
  if (q.dtype == QDType::kInt16) {
    microsoft_domain(qn);
    microsoft_domain(dn);
  }
  if (q.per_channel) {
    attr_i(qn, "axis", q.axis);
    attr_i(dn, "axis", q.axis);
  }
  std::string out = dv;
  const int64_t full_min = q.dtype == QDType::kUInt8 ? 0 : q.dtype == QDType::kInt16 ? -32768 : -128;
  const int64_t full_max = q.dtype == QDType::kUInt8 ? 255 : q.dtype == QDType::kInt16 ? 32767 : 127;
  if (!q.per_channel && (q.quant_min > full_min || q.quant_max < full_max)) {
    // A sub-8-bit range: saturate to it (ONNX QuantizeLinear saturates to the container only).
    const float sc = q.scale.item<float>();
    const int zp = q.zero_point.item<int>();
    const std::string lo = init(n->name() + "_lo", at::full({}, (static_cast<float>(q.quant_min) - zp) * sc));
    const std::string hi = init(n->name() + "_hi", at::full({}, (static_cast<float>(q.quant_max) - zp) * sc));
    out = fresh(n->name() + "_clip");
    node("Clip", {dv, lo, hi}, out, out);
  }
  names_[n] = out;
  rank_[n] = rank_of(n->args().at(0));
  Encoding e;
  e.tensor = x;
  e.quantized = qv;
  e.node = n->args().at(0).is_node() ? n->args().at(0).node->name() : n->name();
  e.dtype = qdtype_name(q.dtype);
  at::Tensor sf = q.scale.reshape({-1}).to(at::kFloat).contiguous(), zf = q.zero_point.reshape({-1}).to(at::kInt).contiguous();
  e.scale.assign(sf.data_ptr<float>(), sf.data_ptr<float>() + sf.numel());
  e.zero_point.assign(zf.data_ptr<int32_t>(), zf.data_ptr<int32_t>() + zf.numel());
  e.axis = q.per_channel ? q.axis : -1;
  e.quant_min = q.quant_min;
  e.quant_max = q.quant_max;
  e.algorithm = qd.algorithm();
  e.observed_min = qd.observed_min();
  e.observed_max = qd.observed_max();
  res_.encodings.push_back(std::move(e));
}

}  // namespace qfx::quant::detail
