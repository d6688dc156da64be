// CUDA float kernels: Conv (group 1 as im2col + cuBLAS SGEMM, TF32 off; grouped as a
// direct kernel), Gemm / MatMul with a constant weight, Add / Sub / Mul / Div, Relu,
// Clip, MaxPool, GlobalAveragePool. Sums run in another order than the reference's, so
// results agree to float rounding, not bit for bit.
#include <tuple>
#include <cublas_v2.h>

#include "../reference/common.h"
#include "staging.h"

namespace qfx::runtime::cuda {
namespace {

// A cuBLAS handle owned by one kernel, in the default math mode (no TF32).
std::shared_ptr<cublasContext> blas_handle() {
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return nullptr;
  cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  return std::shared_ptr<cublasContext>(h, [](cublasHandle_t p) { cublasDestroy(p); });
}

// The output clamp of a fused Relu / Clip (ir::Node::fused_act), as the reference applies it.
void fused_bounds(const ir::Node& n, float* lo, float* hi) {
  std::tie(*lo, *hi) = n.act_bounds();
}

struct FLayer {
  ref::Geom g{};
  std::vector<float> w;     // [M, C/group·kH·kW]
  std::vector<float> bias;  // empty: none
};

bool build_float(const KernelRequest& r, Kernel* k, const FLayer& l, const Shape& out_shape) {
  const ir::Node& n = r.node;
  k->outputs = {{out_shape, DType::kFloat32}};
  FConvArgs a{};
  const ref::Geom& g = l.g;
  set_geometry(&a, g);
  fused_bounds(n, &a.lo, &a.hi);
  const std::string what = n.label();
  DeviceMem w = upload(l.w.data(), l.w.size() * 4, what + " weights");
  DeviceMem b = upload(l.bias.data(), l.bias.size() * 4, what + " bias");
  a.w = w.as<float>();
  a.bias = l.bias.empty() ? nullptr : b.as<float>();
  if (g.group != 1) {
    stage(r, k, {0}, [a, w, b](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
      FConvArgs c = a;
      c.x = static_cast<const float*>(in[0]);
      c.y = static_cast<float*>(out[0]);
      launch_fconv_direct(c, s);
    });
    return true;
  }
  auto h = blas_handle();
  if (!h) return r.decline("cublasCreate failed");
  const int64_t K = g.C * g.kH * g.kW, rows = g.N * g.oH * g.oW;
  const bool one_by_one = g.kH == 1 && g.kW == 1 && g.oH == g.H && g.oW == g.W && g.H * g.W == 1;
  DeviceMem cols(one_by_one ? 0 : static_cast<size_t>(rows * K) * 4, what + " im2col rows");
  DeviceMem acc(static_cast<size_t>(rows * g.M) * 4, what + " products");
  stage(r, k, {0}, [a, w, b, h, cols, acc, K, rows, one_by_one, what](const std::vector<const void*>& in,
                                                                     const std::vector<void*>& out, cudaStream_t s) {
    FConvArgs c = a;
    c.x = static_cast<const float*>(in[0]);
    c.y = static_cast<float*>(out[0]);
    const float* A = c.x;  // [rows, K]: a Gemm's input is its own im2col
    if (!one_by_one) {
      launch_im2col_f(c, cols.as<float>(), s);
      A = cols.as<float>();
    }
    const float alpha = 1.0f, beta = 0.0f;
    cublasSetStream(h.get(), s);
    const cublasStatus_t st = cublasSgemm(h.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(c.M), static_cast<int>(rows),
                                          static_cast<int>(K), &alpha, c.w, static_cast<int>(K), A, static_cast<int>(K), &beta,
                                          acc.as<float>(), static_cast<int>(c.M));
    if (st != CUBLAS_STATUS_SUCCESS) throw ExecutionError(what + ": cuBLAS SGEMM failed (status " + std::to_string(st) + ")");
    launch_fgemm_epilogue(c, acc.as<float>(), s);
  });
  return true;
}

bool fconv(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const ir::Node& n = r.node;
  if (r.in[0].dtype != DType::kFloat32 || r.in[0].shape.size() != 4) return r.decline("needs a 4-D float32 input");
  if (r.consts.size() < 2 || !r.consts[1] || r.consts[1]->dtype() != DType::kFloat32) return r.decline("the weight is not a float constant");
  if (n.attr_s("auto_pad", "NOTSET") != "NOTSET") return r.decline("auto_pad SAME / VALID");
  FLayer l;
  l.g = ref::conv_geom(n, r.in, r.consts[1]->shape());
  const float* w = r.consts[1]->data<float>();
  l.w.assign(w, w + r.consts[1]->numel());
  if (r.in.size() > 2 && !n.inputs[2].empty()) {
    if (!r.consts[2] || r.consts[2]->dtype() != DType::kFloat32 || r.consts[2]->numel() != l.g.M)
      return r.decline("the bias is not a float constant of one value per output channel");
    l.bias.assign(r.consts[2]->data<float>(), r.consts[2]->data<float>() + l.g.M);
  }
  return build_float(r, k, l, ref::spatial_out(r.in[0].shape, l.g.M, l.g));
}

// Gemm (transA 0, alpha 1, beta 1, C absent or 1-D) and MatMul with a constant 2-D weight.
bool fgemm(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const ir::Node& n = r.node;
  const bool gemm = n.op == "Gemm";
  if (r.in[0].dtype != DType::kFloat32 || r.in[0].shape.empty()) return r.decline("needs a float32 input");
  if (r.consts.size() > 1 && r.consts[1] && r.consts[1]->dtype() != DType::kFloat32) return r.decline("needs a float weight");
  if (gemm && r.in[0].shape.size() != 2) return r.decline("Gemm needs a 2-D input");
  GemmAsConv gc;
  if (!gemm_as_conv(r, gemm, &gc)) return false;
  const int64_t M = gc.g.M;
  FLayer l;
  l.g = gc.g;
  l.w.assign(gc.w.data<float>(), gc.w.data<float>() + gc.w.numel());
  if (gemm && r.in.size() > 2 && !n.inputs[2].empty()) {
    if (!r.consts[2] || r.consts[2]->dtype() != DType::kFloat32 || r.consts[2]->numel() != M ||
        r.consts[2]->shape().size() > 1)
      return r.decline("C is not a constant 1-D float bias");
    l.bias.assign(r.consts[2]->data<float>(), r.consts[2]->data<float>() + M);
  }
  return build_float(r, k, l, gc.out);
}

bool fbinary(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  if (r.in.size() != 2 || r.in[0].dtype != DType::kFloat32 || r.in[1].dtype != DType::kFloat32)
    return r.decline("needs two float32 inputs");
  const Shape o = ref::broadcast(r.node, r.in[0].shape, r.in[1].shape);
  if (o.size() > 8 || o.empty()) return r.decline("rank 0 or above 8");
  FBinaryArgs a{};
  a.rank = static_cast<int>(o.size());
  for (size_t d = 0; d < o.size(); ++d) a.out_dims[d] = o[d];
  broadcast_strides(o, r.in[0].shape, a.sa);
  broadcast_strides(o, r.in[1].shape, a.sb);
  a.n = ref::numel(o);
  const std::string& op = r.node.op;
  a.op = op == "Add" ? 0 : op == "Sub" ? 1 : op == "Mul" ? 2 : 3;
  fused_bounds(r.node, &a.lo, &a.hi);
  k->outputs = {{o, DType::kFloat32}};
  stage(r, k, {0, 1}, [a](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    FBinaryArgs b = a;
    b.a = static_cast<const float*>(in[0]), b.b = static_cast<const float*>(in[1]), b.y = static_cast<float*>(out[0]);
    launch_fbinary(b, s);
  });
  return true;
}

// Relu, and Clip with constant bounds (inputs 1 and 2, or opset-6 attributes).
bool fclamp(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const ir::Node& n = r.node;
  if (r.in[0].dtype != DType::kFloat32) return r.decline("needs a float32 input");
  float lo = n.op == "Relu" ? 0.0f : n.attr_f("min", -INFINITY), hi = n.op == "Relu" ? INFINITY : n.attr_f("max", INFINITY);
  for (size_t i = 1; i < 3 && n.op == "Clip" && i < r.in.size(); ++i) {
    if (n.inputs[i].empty()) continue;
    if (!r.consts[i] || r.consts[i]->dtype() != DType::kFloat32 || r.consts[i]->numel() != 1)
      return r.decline("a Clip bound that is not a float constant");
    (i == 1 ? lo : hi) = r.consts[i]->data<float>()[0];
  }
  k->outputs = {{r.in[0].shape, DType::kFloat32}};
  const int64_t total = ref::numel(r.in[0].shape);
  stage(r, k, {0}, [total, lo, hi](const std::vector<const void*>& in, const std::vector<void*>& out, cudaStream_t s) {
    launch_fclamp(static_cast<const float*>(in[0]), static_cast<float*>(out[0]), total, lo, hi, s);
  });
  return true;
}

bool fgap(const KernelRequest& r, Kernel* k) {
  if (!device_ready(r)) return false;
  const Shape& x = r.in[0].shape;
  if (r.in[0].dtype != DType::kFloat32 || x.size() < 3) return r.decline("needs a float32 [N, C, spatial...] input");
  Shape out = {x[0], x[1]};
  for (size_t i = 2; i < x.size(); ++i) out.push_back(1);
  const int64_t planes = x[0] * x[1], hw = ref::inner_numel(x, 2);
  k->outputs = {{out, DType::kFloat32}};
  stage(r, k, {0}, [planes, hw](const std::vector<const void*>& in, const std::vector<void*>& o, cudaStream_t s) {
    launch_fgap(static_cast<const float*>(in[0]), static_cast<float*>(o[0]), planes, hw, s);
  });
  return true;
}

}  // namespace

void register_float_kernels() {
  add_kernel("cuda", "Conv", "cuda", fconv);
  for (const char* op : {"Gemm", "MatMul"}) add_kernel("cuda", op, "cuda", fgemm);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) add_kernel("cuda", op, "cuda", fbinary);
  for (const char* op : {"Relu", "Clip"}) add_kernel("cuda", op, "cuda", fclamp);
  add_kernel("cuda", "GlobalAveragePool", "cuda", fgap);
}

}  // namespace qfx::runtime::cuda
