// Shape specialisation (TracerOptions::input_shapes): every traced value is also
// computed on two example inputs whose dynamic dimensions are 2 and 3, as
// torch.jit.trace runs a model on its example. A shape query (size, dim, len,
// dtype, ...) that gives the same answer on both is a constant at trace time, so
// branches and asserts on ranks and static sizes fold; one that differs depends
// on a dynamic dimension and stays symbolic.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "qfx/fx/shape_prop.h"
#include "trace_impl.h"

namespace qfx::fx::detail {

IValue TraceImpl::example_input(const std::vector<int64_t>& shape, int k, const std::string& dtype) {
  std::vector<int64_t> s;
  for (int64_t d : shape) s.push_back(d < 0 ? 2 + k : d);
  if (input_scalar_type(dtype) != at::kFloat) return IValue(at::ones(s, input_scalar_type(dtype)));
  // A generator of its own: tracing must not move the global random state.
  at::Generator gen = at::detail::createCPUGenerator(0x5eed + static_cast<uint64_t>(k));
  return IValue(at::randn(s, gen));
}

bool TraceImpl::shadow_value(const Sym& s, int k, IValue* out) const {
  switch (s.k) {
    case Sym::K::kConst:
      *out = s.c;
      return true;
    case Sym::K::kProxy:
      if (!s.shadow) return false;
      *out = (*s.shadow)[static_cast<size_t>(k)];
      return true;
    case Sym::K::kList: {
      c10::impl::GenericList l(s.elem ? s.elem : c10::AnyType::get());
      for (const auto& i : *s.items) {
        IValue v;
        if (!shadow_value(i, k, &v)) return false;
        l.push_back(std::move(v));
      }
      *out = IValue(l);
      return true;
    }
    case Sym::K::kTuple: {
      std::vector<IValue> v;
      for (const auto& i : *s.items) {
        IValue e;
        if (!shadow_value(i, k, &e)) return false;
        v.push_back(std::move(e));
      }
      *out = c10::ivalue::Tuple::create(std::move(v));
      return true;
    }
    default:
      return false;
  }
}

bool TraceImpl::run_shadows(const std::vector<Sym>& args, size_t nout, const std::function<void(torch::jit::Stack&)>& fn,
                            std::array<std::vector<IValue>, 2>* out) const {
  if (input_shapes_.empty()) return false;
  for (int k = 0; k < 2; ++k) {
    torch::jit::Stack stack;
    for (const auto& a : args) {
      IValue v;
      if (!shadow_value(a, k, &v)) return false;
      stack.push_back(std::move(v));
    }
    try {
      at::NoGradGuard ng;
      fn(stack);
    } catch (const std::exception&) {
      return false;  // the example cannot run this op: the value stays unspecialised
    }
    if (stack.size() < nout) return false;
    (*out)[static_cast<size_t>(k)].assign(stack.end() - static_cast<std::ptrdiff_t>(nout), stack.end());
  }
  return true;
}

void TraceImpl::attach_shadows(const JNode* n, const std::array<std::vector<IValue>, 2>& outs, Env& env) {
  for (size_t i = 0; i < n->outputs().size() && i < outs[0].size(); ++i) {
    auto it = env.find(n->outputs()[i]);
    if (it == env.end() || it->second.k != Sym::K::kProxy) continue;
    it->second.shadow = std::make_shared<std::array<IValue, 2>>(std::array<IValue, 2>{outs[0][i], outs[1][i]});
    const IValue &a = outs[0][i], &b = outs[1][i];
    if (a.isTensor() && b.isTensor() && a.toTensor().dim() == b.toTensor().dim()) {
      const auto sa = a.toTensor().sizes(), sb = b.toTensor().sizes();
      std::vector<int64_t> shape;
      for (size_t d = 0; d < sa.size(); ++d) shape.push_back(sa[d] == sb[d] ? sa[d] : -1);
      it->second.node->meta()["traced_shape"] = IValue(shape);
      if (a.toTensor().scalar_type() == b.toTensor().scalar_type())
        it->second.node->meta()["traced_dtype"] = std::string(c10::toString(a.toTensor().scalar_type()));
    }
  }
}

bool TraceImpl::same_example(const IValue& a, const IValue& b) {
  if (a.isInt() && b.isInt()) return a.toInt() == b.toInt();
  if (a.isBool() && b.isBool()) return a.toBool() == b.toBool();
  if (a.isDouble() && b.isDouble()) return a.toDouble() == b.toDouble();
  if (a.isString() && b.isString()) return a.toStringRef() == b.toStringRef();
  if (a.isDevice() && b.isDevice()) return a.toDevice() == b.toDevice();
  if (a.isIntList() && b.isIntList()) return a.toIntVector() == b.toIntVector();
  if (a.isNone() && b.isNone()) return true;
  return false;
}

bool TraceImpl::fold_shape_query(const JNode* n, const std::string& op, const std::array<std::vector<IValue>, 2>& outs,
                                 Env& env) {
  // Queries of a tensor's metadata, and reading an element of their answers. An
  // op that computes with a dynamic answer (x.size(0) == 1) is not one: equal
  // results there would not mean independence of the dynamic dimension.
  static const std::unordered_set<std::string> kQueries = {
      "aten::size", "aten::dim", "aten::len", "aten::__getitem__", "aten::numel", "prim::dtype", "prim::device",
      "prim::layout", "aten::is_floating_point", "aten::is_complex", "prim::is_cuda", "aten::get_device",
      "prim::is_nested", "aten::is_nested", "prim::is_sparse", "prim::is_sparse_csr", "prim::is_quantized", "prim::is_mkldnn",
      "prim::is_meta", "prim::is_xpu", "prim::is_vulkan", "prim::is_ipu", "prim::is_mps", "prim::is_ort", "prim::requires_grad",
      "aten::str", "aten::slice"};  // slice: of a size list (x.shape[-2:]); a tensor slice never compares equal
  if (!kQueries.count(op)) return false;
  for (size_t i = 0; i < n->outputs().size(); ++i)
    if (i >= outs[0].size() || !same_example(outs[0][i], outs[1][i])) return false;
  for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = Sym::constant(outs[0][i]);
  return true;
}

}  // namespace qfx::fx::detail
