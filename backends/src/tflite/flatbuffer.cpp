// Serializes a ModelDef with FlatBuffers' C++ builder (tables written field by field
// with the schema's vtable offsets from the generated header).
#include "flatbuffer.h"

#include <algorithm>
#include <map>

#include <flatbuffers/flatbuffers.h>

#include "qfx_tflite_schema.h"

namespace qfx::runtime::tflite {

namespace s = qfx::tflite_schema;
namespace fb = flatbuffers;

int32_t ModelDef::add(TensorDef t) {
  tensors.push_back(std::move(t));
  return static_cast<int32_t>(tensors.size() - 1);
}

namespace {

// Adds scalar field `field` of table T (its vtable offset and C++ type from the header).
#define QFX_TFL_SCALAR(fbb, T, field, value) \
  (fbb).AddElement<s::T::t##field>(s::T::k##field, static_cast<s::T::t##field>(value), s::T::t##field{})
#define QFX_TFL_OFFSET(fbb, T, field, off) (fbb).AddOffset(s::T::k##field, (off))

fb::Offset<void> quantization(fb::FlatBufferBuilder& fbb, const TensorDef& t) {
  auto scale = fbb.CreateVector(t.scale);
  auto zp = fbb.CreateVector(t.zero_point);
  const auto start = fbb.StartTable();
  QFX_TFL_OFFSET(fbb, QuantizationParametersT, Scale, scale);
  QFX_TFL_OFFSET(fbb, QuantizationParametersT, ZeroPoint, zp);
  QFX_TFL_SCALAR(fbb, QuantizationParametersT, QuantizedDimension, t.qdim);
  return fb::Offset<void>(fbb.EndTable(start));
}

fb::Offset<void> tensor(fb::FlatBufferBuilder& fbb, const TensorDef& t, uint32_t buffer) {
  auto shape = fbb.CreateVector(t.shape);
  auto name = fbb.CreateString(t.name);
  fb::Offset<void> q = t.scale.empty() ? fb::Offset<void>() : quantization(fbb, t);
  fb::Offset<fb::Vector<int32_t>> sig;
  if (!t.signature.empty()) sig = fbb.CreateVector(t.signature);
  const auto start = fbb.StartTable();
  QFX_TFL_OFFSET(fbb, TensorT, Shape, shape);
  QFX_TFL_SCALAR(fbb, TensorT, Type, t.type);
  QFX_TFL_SCALAR(fbb, TensorT, Buffer, buffer);
  QFX_TFL_OFFSET(fbb, TensorT, Name, name);
  if (!q.IsNull()) QFX_TFL_OFFSET(fbb, TensorT, Quantization, q);
  if (!sig.IsNull()) QFX_TFL_OFFSET(fbb, TensorT, ShapeSignature, sig);
  return fb::Offset<void>(fbb.EndTable(start));
}

fb::Offset<void> buffer(fb::FlatBufferBuilder& fbb, const std::string& data) {
  fb::Offset<fb::Vector<uint8_t>> bytes;
  if (!data.empty()) {
    fbb.ForceVectorAlignment(data.size(), 1, 16);
    bytes = fbb.CreateVector(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  }
  const auto start = fbb.StartTable();
  if (!bytes.IsNull()) QFX_TFL_OFFSET(fbb, BufferT, Data, bytes);
  return fb::Offset<void>(fbb.EndTable(start));
}

fb::Offset<void> operator_code(fb::FlatBufferBuilder& fbb, int64_t code) {
  const auto start = fbb.StartTable();
  // Codes above 127 live in builtin_code; the deprecated byte holds
  // PLACEHOLDER_FOR_GREATER_OP_CODES for them.
  QFX_TFL_SCALAR(fbb, OperatorCodeT, DeprecatedBuiltinCode,
                 std::min<int64_t>(code, s::BuiltinOperator::PLACEHOLDER_FOR_GREATER_OP_CODES));
  QFX_TFL_SCALAR(fbb, OperatorCodeT, BuiltinCode, code);
  QFX_TFL_SCALAR(fbb, OperatorCodeT, Version, 1);
  return fb::Offset<void>(fbb.EndTable(start));
}

fb::Offset<void> op(fb::FlatBufferBuilder& fbb, const OpDef& o, uint32_t opcode_index) {
  auto in = fbb.CreateVector(o.inputs);
  auto out = fbb.CreateVector(o.outputs);
  fb::Offset<void> options;
  if (o.options) options = fb::Offset<void>(o.options(fbb));
  const auto start = fbb.StartTable();
  QFX_TFL_SCALAR(fbb, OperatorT, OpcodeIndex, opcode_index);
  QFX_TFL_OFFSET(fbb, OperatorT, Inputs, in);
  QFX_TFL_OFFSET(fbb, OperatorT, Outputs, out);
  if (!options.IsNull()) {
    QFX_TFL_SCALAR(fbb, OperatorT, BuiltinOptionsType, o.options_type);
    QFX_TFL_OFFSET(fbb, OperatorT, BuiltinOptions, options);
  }
  return fb::Offset<void>(fbb.EndTable(start));
}

}  // namespace

std::string ModelDef::serialize(const std::string& description) const {
  fb::FlatBufferBuilder fbb(1 << 20);
  fbb.ForceDefaults(true);
  // Buffers: 0 is the empty buffer computed tensors point at.
  std::vector<fb::Offset<void>> buffers{buffer(fbb, {})};
  std::vector<uint32_t> buffer_of(tensors.size(), 0);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].data.empty()) {
      buffer_of[i] = static_cast<uint32_t>(buffers.size());
      buffers.push_back(buffer(fbb, tensors[i].data));
    }
  std::vector<fb::Offset<void>> tensor_offs;
  for (size_t i = 0; i < tensors.size(); ++i) tensor_offs.push_back(tensor(fbb, tensors[i], buffer_of[i]));
  std::map<int64_t, uint32_t> opcode_index;
  std::vector<int64_t> codes;
  for (const auto& o : ops)
    if (opcode_index.emplace(o.code, static_cast<uint32_t>(codes.size())).second) codes.push_back(o.code);
  std::vector<fb::Offset<void>> op_offs, code_offs;
  for (const auto& o : ops) op_offs.push_back(op(fbb, o, opcode_index.at(o.code)));
  for (int64_t c : codes) code_offs.push_back(operator_code(fbb, c));

  auto tensors_v = fbb.CreateVector(tensor_offs);
  auto ins = fbb.CreateVector(inputs);
  auto outs = fbb.CreateVector(outputs);
  auto ops_v = fbb.CreateVector(op_offs);
  auto sg_name = fbb.CreateString("main");
  auto sg_start = fbb.StartTable();
  QFX_TFL_OFFSET(fbb, SubGraphT, Tensors, tensors_v);
  QFX_TFL_OFFSET(fbb, SubGraphT, Inputs, ins);
  QFX_TFL_OFFSET(fbb, SubGraphT, Outputs, outs);
  QFX_TFL_OFFSET(fbb, SubGraphT, Operators, ops_v);
  QFX_TFL_OFFSET(fbb, SubGraphT, Name, sg_name);
  const fb::Offset<void> subgraph(fbb.EndTable(sg_start));

  auto codes_v = fbb.CreateVector(code_offs);
  auto subgraphs_v = fbb.CreateVector(std::vector<fb::Offset<void>>{subgraph});
  auto desc = fbb.CreateString(description);
  auto buffers_v = fbb.CreateVector(buffers);
  auto m_start = fbb.StartTable();
  QFX_TFL_SCALAR(fbb, ModelT, Version, 3);
  QFX_TFL_OFFSET(fbb, ModelT, OperatorCodes, codes_v);
  QFX_TFL_OFFSET(fbb, ModelT, Subgraphs, subgraphs_v);
  QFX_TFL_OFFSET(fbb, ModelT, Description, desc);
  QFX_TFL_OFFSET(fbb, ModelT, Buffers, buffers_v);
  const fb::Offset<void> model(fbb.EndTable(m_start));
  fbb.Finish(model, "TFL3");
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace qfx::runtime::tflite
