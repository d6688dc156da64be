// ShapeProp (see shape_prop.h).
#include "qfx/fx/shape_prop.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace qfx::fx {
namespace {

std::string memory_format_of(const at::Tensor& t) {
  if (t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast) && !t.is_contiguous()) return "channels_last";
  return t.is_contiguous() ? "contiguous" : "strided";
}

}  // namespace

c10::IValue ShapeProp::propagate(std::vector<c10::IValue> example_inputs) {
  c10::AutoGradMode no_grad(false);
  return run(std::move(example_inputs));
}

c10::IValue ShapeProp::run_node(const Node* n) {
  c10::IValue v = Interpreter::run_node(n);
  auto& meta = const_cast<Node*>(n)->meta();
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    meta["shape"] = c10::IValue(t.sizes().vec());
    meta["stride"] = c10::IValue(t.strides().vec());
    meta["dtype"] = c10::IValue(std::string(c10::toString(t.scalar_type())));
    meta["memory_format"] = c10::IValue(memory_format_of(t));
  } else if (v.isTuple() || v.isTensorList() || v.isList()) {
    c10::impl::GenericList shapes(c10::ListType::create(c10::IntType::get()));
    std::vector<c10::IValue> elems;
    if (v.isTuple()) {
      for (const auto& e : v.toTupleRef().elements()) elems.push_back(e);
    } else {
      for (const auto& e : v.toListRef()) elems.push_back(e);
    }
    std::string dtype;
    for (const auto& e : elems) {
      if (!e.isTensor()) continue;
      shapes.push_back(c10::IValue(e.toTensor().sizes().vec()));
      if (dtype.empty()) dtype = c10::toString(e.toTensor().scalar_type());
    }
    if (!shapes.empty()) {
      meta["shapes"] = c10::IValue(shapes);
      meta["dtype"] = c10::IValue(dtype);
    }
  }
  return v;
}

at::ScalarType input_scalar_type(const std::string& dtype) {
  return dtype == "int64" ? at::kLong : dtype == "int32" ? at::kInt : dtype == "bool" ? at::kBool : at::kFloat;
}

void propagate_shapes(GraphModule& gm, const std::vector<std::vector<int64_t>>& input_shapes,
                      const std::vector<std::string>& input_dtypes) {
  std::vector<c10::IValue> in;
  for (size_t i = 0; i < input_shapes.size(); ++i)
    in.emplace_back(at::zeros(input_shapes[i], input_scalar_type(i < input_dtypes.size() ? input_dtypes[i] : "float32")));
  ShapeProp(gm).propagate(std::move(in));
}

}  // namespace qfx::fx
