// The PT2 archive of an exported program: its records through libtorch's zip
// reader (PyTorchStreamReader), the program's JSON, and its raw weight files.
#include "archive.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include <filesystem>

#include "../archive_size.h"
#include "qfx/error.h"
#include "qfx/fx/exported_program.h"

namespace qfx::fx::detail {
namespace {
using nlohmann::json;

std::string record(caffe2::serialize::PyTorchStreamReader& r, const std::string& name) {
  auto [ptr, size] = r.getRecord(name);
  return std::string(static_cast<const char*>(ptr.get()), size);
}

json parse(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw IoError(what + ": not valid JSON (" + e.what() + ")");
  }
}

// The one program the archive holds: models/<name>.json.
std::string model_record(const std::vector<std::string>& records, const std::string& path) {
  std::vector<std::string> models;
  for (const auto& r : records)
    if (is_model_record(r)) models.push_back(r);
  if (models.empty()) throw IoError(path + ": not an exported program (no models/*.json; torch.export.save writes one)");
  if (models.size() > 1) {
    std::string names;
    for (const auto& m : models) names += (names.empty() ? "" : ", ") + m;
    throw IoError(path + ": holds " + std::to_string(models.size()) + " programs (" + names +
                  "); qfx quantizes one graph: save each program on its own");
  }
  return models[0];
}

void check_schema(const json& model, const std::string& path) {
  const json& v = model.at("schema_version");
  // The numbers as written (a 2^70 or a float is not an int; it is still named as given).
  const json& major = v.at("major");
  if (!major.is_number_integer() || major.get<int64_t>() != kExportSchemaMajor)
    throw IoError(path + ": exported-program schema " + major.dump() + "." + v.at("minor").dump() + " (torch " +
                  model.value("torch_version", std::string("?")) + "); this qfx reads schema " + std::to_string(kExportSchemaMajor) +
                  ".x: export the model with a torch whose schema major version is " + std::to_string(kExportSchemaMajor));
}

// One tensor of a weights / constants config entry, from its raw bytes.
at::Tensor tensor_of(caffe2::serialize::PyTorchStreamReader& r, const std::string& dir, const std::string& name,
                     const json& entry, const std::string& path) {
  const std::string what = path + ": tensor '" + name + "'";
  if (entry.value("use_pickle", false))
    throw IoError(what + " is stored pickled (a tensor subclass or a non-contiguous view); qfx reads raw tensors");
  const json& meta = entry.at("tensor_meta");
  const c10::ScalarType dtype = scalar_type_of(meta.at("dtype").get<int64_t>(), what);
  std::vector<int64_t> sizes, strides;
  for (const auto& s : meta.at("sizes")) sizes.push_back(static_int(s));
  for (const auto& s : meta.at("strides")) strides.push_back(static_int(s));
  const int64_t offset = static_int(meta.at("storage_offset"));
  if (sizes.size() != strides.size() || offset < 0) throw IoError(what + ": inconsistent sizes and strides");
  int64_t extent = 1;  // elements the view reaches
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || strides[i] < 0) throw IoError(what + ": negative or symbolic size");
    if (sizes[i] == 0) extent = 0;
    if (extent > 0) extent += (sizes[i] - 1) * strides[i];
  }
  const std::string file = dir + entry.at("path_name").get<std::string>();
  if (!r.hasRecord(file)) throw IoError(what + ": its data " + file + " is missing from the archive");
  auto [ptr, size] = r.getRecord(file);
  const size_t need = static_cast<size_t>(extent == 0 ? 0 : offset + extent) * c10::elementSize(dtype);
  if (size < need)
    throw IoError(what + ": " + file + " holds " + std::to_string(size) + " bytes, the tensor needs " + std::to_string(need));
  const int64_t elems = static_cast<int64_t>(size / c10::elementSize(dtype));
  at::Tensor storage = at::empty({elems}, at::TensorOptions().dtype(dtype));
  if (size) std::memcpy(storage.data_ptr(), ptr.get(), static_cast<size_t>(elems) * c10::elementSize(dtype));
  return storage.as_strided(sizes, strides, offset);
}

std::map<std::string, at::Tensor> tensors(caffe2::serialize::PyTorchStreamReader& r, const std::string& config,
                                          const std::string& dir, const std::string& path) {
  std::map<std::string, at::Tensor> out;
  if (!r.hasRecord(config)) return out;
  const json j = parse(record(r, config), path + ": " + config);
  for (const auto& [name, entry] : j.at("config").items()) out.emplace(name, tensor_of(r, dir, name, entry, path));
  return out;
}

}  // namespace

c10::ScalarType scalar_type_of(int64_t code, const std::string& what) {
  switch (code) {
    case 1: return at::kByte;
    case 2: return at::kChar;
    case 3: return at::kShort;
    case 4: return at::kInt;
    case 5: return at::kLong;
    case 6: return at::kHalf;
    case 7: return at::kFloat;
    case 8: return at::kDouble;
    case 12: return at::kBool;
    case 13: return at::kBFloat16;
    default: throw IoError(what + ": dtype code " + std::to_string(code) + " (complex, 8-bit float or unsigned wide) is not supported");
  }
}

bool is_model_record(const std::string& r) {
  return r.rfind("models/", 0) == 0 && r.size() > 12 && r.compare(r.size() - 5, 5, ".json") == 0;
}

int64_t static_int(const json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.contains("as_int")) return j.at("as_int").get<int64_t>();
  return -1;
}

ExportedArchive read_exported_archive(const std::string& path, bool with_tensors) {
  if (!std::filesystem::is_regular_file(path)) throw IoError(path + ": model file not found");
  check_unpacked_size(path, "cannot read exported program (not a zip archive)");
  ExportedArchive a;
  a.path = path;
  try {
    caffe2::serialize::PyTorchStreamReader r(path);
    const std::string model = model_record(r.getAllRecords(), path);
    a.model = parse(record(r, model), path + ": " + model);
    check_schema(a.model, path);
    if (!with_tensors) return a;
    a.weights = tensors(r, "data/weights/model_weights_config.json", "data/weights/", path);
    a.constants = tensors(r, "data/constants/model_constants_config.json", "data/constants/", path);
  } catch (const Error&) {
    throw;
  } catch (const json::exception& e) {
    throw IoError(path + ": the exported program's JSON lacks a field qfx needs (" + std::string(e.what()) + ")");
  } catch (const c10::Error& e) {
    throw IoError(path + ": cannot read exported program (" + e.what_without_backtrace() + ")");
  }
  return a;
}

}  // namespace qfx::fx::detail

namespace qfx::fx {

std::vector<std::string> exported_program_inputs(const std::string& path) {
  const detail::ExportedArchive a = detail::read_exported_archive(path, /*with_tensors=*/false);
  std::vector<std::string> names;
  try {
    for (const auto& spec : a.model.at("graph_module").at("signature").at("input_specs"))
      if (spec.contains("user_input") && spec.at("user_input").at("arg").contains("as_tensor"))
        names.push_back(spec.at("user_input").at("arg").at("as_tensor").at("name").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": the exported program's signature lacks a field qfx needs (" + std::string(e.what()) + ")");
  }
  return names;
}

}  // namespace qfx::fx
