// The op catalog's pooling and reductions (max / average pooling, adaptive
// average pooling, mean, sum), with padding and roll. ONNX has no adaptive
// pooling: to 1x1 it is GlobalAveragePool; an output size that divides the input's
// (static) spatial size is AveragePool with kernel = stride = input / output
// (PyTorch's windows are exactly those then); any other size is the exact
// pooling as a matrix product, input [N, C, H*W] x P [H*W, oh*ow], where P's column
// for output cell (i, j) holds 1/|window| over PyTorch's window rows
// [floor(i*H/oh), ceil((i+1)*H/oh)) and columns likewise (float between DQ and Q).
#include <torch/nn/modules/pooling.h>

#include "export_shape.h"
#include "op_families.h"

namespace qfx::quant::detail {
namespace {

// Max / average pooling of `n`'s input: kernel `k`, strides `s` (empty: k), pads
// `p` per spatial dim (both sides), dilations `d` (max only; empty: 1).
void pool(Exporter& e, fx::Node* n, bool max, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
          std::vector<int64_t> d, bool ceil, bool include_pad) {
  if (s.empty()) s = k;
  e.unary(n, max ? "MaxPool" : "AveragePool");
  e.attr_ints(e.last_, "kernel_shape", k);
  e.attr_ints(e.last_, "strides", s);
  std::vector<int64_t> pads = p;
  pads.insert(pads.end(), p.begin(), p.end());
  e.attr_ints(e.last_, "pads", pads);
  if (max && !d.empty() && d != std::vector<int64_t>(d.size(), 1)) e.attr_ints(e.last_, "dilations", d);
  if (ceil) e.attr_i(e.last_, "ceil_mode", 1);
  if (!max && include_pad) e.attr_i(e.last_, "count_include_pad", 1);
}

void adaptive_avg_pool(Exporter& ex, fx::Node* n, std::vector<int64_t> out) {
  if (out.size() == 1) out.push_back(out[0]);
  if (out.size() != 2) unsupported(*n, "adaptive average pooling with an output size of rank " + std::to_string(out.size()));
  if (out[0] == 1 && out[1] == 1) return ex.unary(n, "GlobalAveragePool");
  const auto& d = dims_of(ex, *n, n->args().at(0));
  if (d.size() != 4) unsupported(*n, "adaptive average pooling of a tensor of rank " + std::to_string(d.size()) + " (expected 4)");
  if (d[1].batch || d[2].batch || d[3].batch || d[1].value < 0 || d[2].value < 0 || d[3].value < 0)
    unsupported(*n, "adaptive average pooling needs static channels and spatial size (give model.input_shape)");
  const int64_t C = d[1].value, H = d[2].value, W = d[3].value;
  for (int i = 0; i < 2; ++i) {
    if (out[i] == -1) out[i] = i == 0 ? H : W;  // None: keep the input's size
    if (out[i] <= 0) unsupported(*n, "adaptive average pooling to a size of " + std::to_string(out[i]));
  }
  const int64_t oh = out[0], ow = out[1];
  if (H % oh == 0 && W % ow == 0) return pool(ex, n, false, {H / oh, W / ow}, {H / oh, W / ow}, {0, 0}, {}, false, false);
  at::Tensor P = at::zeros({H * W, oh * ow}, at::kFloat);
  auto p = P.accessor<float, 2>();
  for (int64_t i = 0; i < oh; ++i) {
    const int64_t h0 = (i * H) / oh, h1 = ((i + 1) * H + oh - 1) / oh;
    for (int64_t j = 0; j < ow; ++j) {
      const int64_t w0 = (j * W) / ow, w1 = ((j + 1) * W + ow - 1) / ow;
      const float inv = 1.0f / static_cast<float>((h1 - h0) * (w1 - w0));
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) p[h * W + w][i * ow + j] = inv;
    }
  }
  const std::string flat = ex.fresh(n->name() + "_flat"), prod = ex.fresh(n->name() + "_pooled"), y = ex.fresh(n->name());
  ex.node("Reshape", {ex.value(*n, n->args().at(0)), ex.ints_init("shape", {0, C, H * W})}, flat,
       n->name() + "_flatten");
  ex.node("MatMul", {flat, ex.init(n->name() + "_pooling", P)}, prod, n->name() + "_matmul");
  ex.last_ = ex.node("Reshape", {prod, ex.ints_init("shape", {0, C, oh, ow})}, y, n->name());
  ex.names_[n] = y;
  ex.rank_[n] = 4;
}

void adaptive_avg_pool1d(Exporter& ex, fx::Node* n, const std::vector<int64_t>& out) {
  if (out.size() != 1 || out[0] <= 0) unsupported(*n, "adaptive average pooling 1-D needs one positive output size");
  if (out[0] == 1) return ex.unary(n, "GlobalAveragePool");
  const auto& d = dims_of(ex, *n, n->args().at(0));
  if (d.size() != 3 || d[2].batch || d[2].value < 0) unsupported(*n, "adaptive average pooling 1-D needs a static length (give model.input_shape)");
  const int64_t L = d[2].value;
  if (L % out[0] != 0)
    unsupported(*n, "adaptive average pooling of length " + std::to_string(L) + " to " + std::to_string(out[0]) + " (not a divisor)");
  pool(ex, n, false, {L / out[0]}, {L / out[0]}, {0}, {}, false, false);
}

// F.pad / constant_pad_nd: torch lists (begin, end) per dim from the last one back;
// ONNX Pad takes all begins, then all ends, from the first dim. All zero: the input.
void pad(Exporter& ex, fx::Node* n, const std::string& fixed_mode = "") {
  const std::vector<Dim> p = size_list(ex, *n, 1);
  const int r = ex.rank_of(n->args().at(0)) >= 0 ? ex.rank_of(n->args().at(0)) : static_cast<int>(dims_of(ex, *n, n->args().at(0)).size());
  if (p.size() % 2 || static_cast<int>(p.size()) > 2 * r) unsupported(*n, "a pad list of " + std::to_string(p.size()) + " entries for rank " + std::to_string(r));
  std::string mode = "constant";
  double fill = 0.0;
  if (!fixed_mode.empty()) {
    mode = fixed_mode;
  } else if (n->target().rfind("aten::pad", 0) == 0) {
    if (n->args().size() > 2 && n->args()[2].is_const() && n->args()[2].value.isString()) mode = n->args()[2].value.toStringRef();
    if (n->args().size() > 3) fill = ex.num_arg(*n, 3, 0.0);
  } else {
    fill = ex.num_arg(*n, 2, 0.0);
  }
  if (mode != "constant" && mode != "reflect" && mode != "replicate") unsupported(*n, "pad mode '" + mode + "'");
  std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
  bool any = false;
  for (size_t k = 0; k < p.size(); ++k) {
    if (p[k].batch || p[k].value < 0) unsupported(*n, "a negative or batch-dependent pad");
    const size_t dim = static_cast<size_t>(r) - 1 - k / 2;
    pads[dim + (k % 2 ? static_cast<size_t>(r) : 0)] = p[k].value;
    any |= p[k].value != 0;
  }
  if (!any) {
    ex.names_[n] = ex.value(*n, n->args().at(0));
    ex.rank_[n] = r;
    return;
  }
  std::vector<std::string> in = {ex.value(*n, n->args().at(0)), ex.ints_init("pads", pads)};
  if (mode == "constant") in.push_back(ex.init("pad_value", at::tensor({static_cast<float>(fill)}, at::kFloat).reshape({})));
  const std::string y = ex.fresh(n->name());
  ex.last_ = ex.node("Pad", in, y, n->name());
  if (mode != "constant") {
    auto* a = ex.last_->add_attribute();
    a->set_name("mode");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(mode == "reflect" ? "reflect" : "edge");
  }
  ex.names_[n] = y;
  ex.rank_[n] = r;
}

// torch.roll(x, shifts, dims): per dim, the last `shift` entries move to the front,
// as Slice + Concat (ONNX has no roll). Static dims only.
void roll(Exporter& ex, fx::Node* n) {
  const std::vector<int64_t> shifts = ex.ints_arg(*n, 1), dims = n->args().size() > 2 ? ex.ints_arg(*n, 2) : std::vector<int64_t>{};
  if (dims.empty() || dims.size() != shifts.size()) unsupported(*n, "roll without one dim per shift (a flattened roll)");
  const auto& d = dims_of(ex, *n, n->args().at(0));
  std::string cur = ex.value(*n, n->args().at(0));
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t dim = norm_dim(*n, dims[k], d.size());
    if (d[static_cast<size_t>(dim)].batch || d[static_cast<size_t>(dim)].value < 0) unsupported(*n, "roll along a dynamic dim");
    const int64_t size = d[static_cast<size_t>(dim)].value;
    const int64_t s = ((shifts[k] % size) + size) % size;
    if (s == 0) continue;
    const std::string tail = ex.fresh(n->name() + "_tail"), head = ex.fresh(n->name() + "_head");
    slice_axis(ex, cur, size - s, size, dim, 1, tail, tail);
    slice_axis(ex, cur, 0, size - s, dim, 1, head, head);
    const std::string y = ex.fresh(n->name());
    ex.last_ = ex.node("Concat", {tail, head}, y, k + 1 == dims.size() ? n->name() : y);
    ex.attr_i(ex.last_, "axis", dim);
    cur = y;
  }
  ex.names_[n] = cur;
  ex.rank_[n] = static_cast<int>(d.size());
}

// sum(self, dim, keepdim=False, dtype=None) as ReduceSum (opset 13: axes as an input).
void reduce_sum(Exporter& ex, fx::Node* n) {
  std::vector<int64_t> dims = n->args().size() > 1 ? ex.ints_arg(*n, 1) : std::vector<int64_t>{};
  const bool keep = ex.num_arg(*n, 2, 0) != 0;
  const std::string y = ex.fresh(n->name());
  std::vector<std::string> in = {ex.input_in_dtype(*n)};
  if (!dims.empty()) in.push_back(ex.ints_init(n->name() + "_axes", dims));
  ex.last_ = ex.node("ReduceSum", in, y, n->name());
  ex.attr_i(ex.last_, "keepdims", keep ? 1 : 0);
  ex.names_[n] = y;
  const int r = ex.rank_of(n->args().at(0));
  ex.rank_[n] = r < 0 ? -1 : keep ? r : dims.empty() ? 0 : r - static_cast<int>(dims.size());
}


// max_pool{1,2}d(x, kernel, stride, padding, dilation, ceil_mode) and
// avg_pool{1,2}d(x, kernel, stride, padding, ceil_mode, count_include_pad).
void pool_function(Exporter& e, fx::Node& n, bool max, size_t dims) {
  // A pooling argument: empty if absent, one value per spatial dim for a single v.
  auto per_dim = [&](size_t i) {
    std::vector<int64_t> v = i < n.args().size() ? e.ints_arg(n, i) : std::vector<int64_t>{};
    if (v.size() == 1) v.assign(dims, v[0]);
    return v;
  };
  auto k = per_dim(1), s = per_dim(2), p = per_dim(3);
  if (p.empty()) p.assign(dims, 0);
  if (max) return pool(e, &n, true, k, s, p, per_dim(4), e.num_arg(n, 5, 0) != 0, false);
  if (n.args().size() > 6 && !(n.args()[6].is_const() && n.args()[6].value.isNone())) unsupported(n, "average pooling with divisor_override");
  pool(e, &n, false, k, s, p, {}, e.num_arg(n, 4, 0) != 0, e.num_arg(n, 5, 1) != 0);
}

void max_pool2d_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* mp = dynamic_cast<torch::nn::MaxPool2dImpl*>(&m);
  if (!mp) unsupported(n, "module 'max_pool2d' has no ONNX export in qfx yet");
  const auto& o = mp->options;
  pool(e, &n, true, {(*o.kernel_size())[0], (*o.kernel_size())[1]}, {(*o.stride())[0], (*o.stride())[1]},
         {(*o.padding())[0], (*o.padding())[1]}, {(*o.dilation())[0], (*o.dilation())[1]}, o.ceil_mode(), false);
}

void avg_pool2d_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* ap = dynamic_cast<torch::nn::AvgPool2dImpl*>(&m);
  if (!ap) unsupported(n, "module 'avg_pool2d' has no ONNX export in qfx yet");
  const auto& o = ap->options;
  if (o.divisor_override()) unsupported(n, "AvgPool2d with divisor_override");
  pool(e, &n, false, {(*o.kernel_size())[0], (*o.kernel_size())[1]}, {(*o.stride())[0], (*o.stride())[1]},
         {(*o.padding())[0], (*o.padding())[1]}, {}, o.ceil_mode(), o.count_include_pad());
}

void adaptive_avg_pool2d_module(Exporter& e, fx::Node& n, torch::nn::Module& m) {
  auto* aa = dynamic_cast<torch::nn::AdaptiveAvgPool2dImpl*>(&m);
  if (!aa) unsupported(n, "module 'adaptive_avg_pool2d' has no ONNX export in qfx yet");
  const auto& os = *aa->options.output_size();
  adaptive_avg_pool(e, &n, {os[0] ? *os[0] : -1, os[1] ? *os[1] : -1});
}

// mean(x, dims, keepdim): over H and W of a 4-D tensor GlobalAveragePool (int8 as
// QLinearGlobalAveragePool), then Flatten unless keepdim; else ReduceMean.
void mean(Exporter& e, fx::Node& n) {
  for (const auto& [k, a] : n.kwargs())
    if (k == "dtype" && a.is_const() && a.value.isInt() && static_cast<at::ScalarType>(a.value.toInt()) != at::kFloat &&
        e.dtype_of(n.args().at(0)) != static_cast<at::ScalarType>(a.value.toInt()))
      unsupported(n, "mean with a dtype other than its input's or float32");
  if (n.args().size() < 2 || (n.args()[1].is_const() && n.args()[1].value.isNone())) {  // mean.default: of every element
    e.unary(&n, "ReduceMean");
    e.attr_i(e.last_, "keepdims", 0);
    e.rank_[&n] = 0;
    return;
  }
  auto dims = e.ints_arg(n, 1);
  const bool keep = e.num_arg(n, 2, 0) != 0;
  const int r = e.rank_of(n.args().at(0));
  std::vector<int64_t> nd;
  for (auto d : dims) nd.push_back(d < 0 && r > 0 ? d + r : d);
  std::sort(nd.begin(), nd.end());
  if (r == 4 && nd == std::vector<int64_t>{2, 3}) {
    e.unary(&n, "GlobalAveragePool");
    if (keep) return;
    const std::string y = e.fresh(n.name());
    e.last_ = e.node("Flatten", {e.names_[&n]}, y, n.name() + "_flatten");
    e.attr_i(e.last_, "axis", 1);
    e.names_[&n] = y;
    e.rank_[&n] = 2;
    return;
  }
  e.unary(&n, "ReduceMean");
  e.reduce_axes(e.last_, dims);
  e.attr_i(e.last_, "keepdims", keep ? 1 : 0);
  e.rank_[&n] = r < 0 ? -1 : (keep ? r : r - static_cast<int>(dims.size()));
}

}  // namespace

void register_pool_ops(OpCatalog& c) {
  for (const bool max : {true, false})
    for (const size_t dims : {1, 2}) {
      const std::string name = std::string(max ? "max" : "avg") + "_pool" + std::to_string(dims) + "d";
      OpRecord r(name);
      if (dims == 2) r.also_modules({max ? "MaxPool2d" : "AvgPool2d"});
      c.add(r.quantized_as(activation_kinds())
                .describe(std::string("ONNX ") + (max ? "MaxPool" : "AveragePool"))
                .writes({max ? "MaxPool" : "AveragePool"})
                .to_onnx([max, dims](Exporter& e, fx::Node& n) { pool_function(e, n, max, dims); },
                         dims == 1 ? nullptr : max ? max_pool2d_module : avg_pool2d_module));
    }
  c.add(OpRecord("adaptive_avg_pool2d").also_modules({"AdaptiveAvgPool2d"}).quantized_as(activation_kinds())
            .describe("ONNX GlobalAveragePool, AveragePool or the exact pooling matrix")
            .writes({"GlobalAveragePool", "AveragePool", "Reshape", "MatMul"})
            .to_onnx([](Exporter& e, fx::Node& n) { adaptive_avg_pool(e, &n, e.ints_arg(n, 1)); }, adaptive_avg_pool2d_module));
  c.add(OpRecord("adaptive_avg_pool1d").quantized_as(activation_kinds()).describe("ONNX GlobalAveragePool or AveragePool")
            .writes({"GlobalAveragePool", "AveragePool"})
            .to_onnx([](Exporter& e, fx::Node& n) { adaptive_avg_pool1d(e, &n, e.ints_arg(n, 1)); }));
  c.add(OpRecord("mean").reads_kwargs({"dtype"}).quantized_as(activation_kinds()).describe("ONNX GlobalAveragePool or ReduceMean")
            .writes({"GlobalAveragePool", "Flatten", "ReduceMean"}).to_onnx(mean));
  c.add(OpRecord("sum").reads_kwargs({"dtype"}).describe("ONNX ReduceSum over dims").writes({"ReduceSum"}).to_onnx([](Exporter& e, fx::Node& n) {
    if (n.args().size() <= 1) unsupported(n, "op 'sum' of all elements has no ONNX export in qfx yet");
    reduce_sum(e, &n);
  }));
  c.add(OpRecord("pad").also_aten({"constant_pad_nd"}).quantized_as(activation_kinds()).describe("ONNX Pad (constant, reflect, edge)")
            .writes({"Pad"}).to_onnx([](Exporter& e, fx::Node& n) { pad(e, &n); }));
  for (const char* op : {"reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d"}) {
    const bool reflect = std::string(op).rfind("reflection", 0) == 0;
    c.add(OpRecord(op).describe(std::string("ONNX Pad, mode ") + (reflect ? "reflect" : "edge")).writes({"Pad"})
              .to_onnx([reflect](Exporter& e, fx::Node& n) { pad(e, &n, reflect ? "reflect" : "replicate"); }));
  }
  for (const size_t dims : {2, 3})
    c.add(OpRecord("max_pool" + std::to_string(dims) + "d_with_indices").describe("max pooling's values (ONNX MaxPool; indices unsupported)")
              .writes({"MaxPool"}).to_onnx([dims](Exporter& e, fx::Node& n) {
                pool_function(e, n, true, dims);
                e.tuple_items_[&n] = {e.names_[&n]};
              }));
  c.add(OpRecord("avg_pool3d").describe("ONNX AveragePool").writes({"AveragePool"}).to_onnx([](Exporter& e, fx::Node& n) {
    pool_function(e, n, false, 3);
  }));
  c.add(OpRecord("_adaptive_avg_pool2d").describe("adaptive_avg_pool2d's Core ATen form").writes({"GlobalAveragePool", "AveragePool", "Reshape", "MatMul"})
            .to_onnx([](Exporter& e, fx::Node& n) { adaptive_avg_pool(e, &n, e.ints_arg(n, 1)); }));
  c.add(OpRecord("_adaptive_avg_pool3d").describe("adaptive average pooling 3-D to 1x1x1 (ONNX GlobalAveragePool)").writes({"GlobalAveragePool"})
            .to_onnx([](Exporter& e, fx::Node& n) {
              if (e.ints_arg(n, 1) != std::vector<int64_t>{1, 1, 1}) unsupported(n, "adaptive average pooling 3-D to other than 1x1x1");
              e.unary(&n, "GlobalAveragePool");
            }));
  c.add(OpRecord("roll").describe("torch.roll (ONNX Slice + Concat)").writes({"Slice", "Concat"}).to_onnx([](Exporter& e, fx::Node& n) {
    roll(e, &n);
  }));
}

}  // namespace qfx::quant::detail
