// save_graph_module / load_graph_module (see serialize.h).
#include "archive_size.h"
#include "qfx/fx/serialize.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/mobile/type_parser.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <typeinfo>

#include "leaves/registry.h"
#include "qfx/atomic_file.h"
#include "qfx/error.h"
#include "script_wrapper.h"

namespace qfx::fx {
namespace {

using c10::IValue;

constexpr const char* kScriptType = "torchscript.module";

struct Registry {
  std::mutex mu;
  std::vector<ModuleSerializer> items;  // later registrations first on lookup
};

Registry& raw_registry() {
  static Registry r;
  return r;
}

// The built-in leaf serializers, registered before any lookup or user
// registration (so a user's serializer of the same type replaces them).
Registry& registry() {
  static std::once_flag once;
  std::call_once(once, detail::register_leaf_serializers);
  return raw_registry();
}

std::string what_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) {
    std::string m = c->what_without_backtrace();
    const auto nl = m.find('\n');
    return nl == std::string::npos ? m : m.substr(0, nl);
  }
  return e.what();
}

bool plain_data(const IValue& v) {
  if (v.isNone() || v.isBool() || v.isInt() || v.isDouble() || v.isString() || v.isTensor() || v.isDevice()) return true;
  if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (!plain_data(e)) return false;
    return true;
  }
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements())
      if (!plain_data(e)) return false;
    return true;
  }
  if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict())
      if (!plain_data(kv.key()) || !plain_data(kv.value())) return false;
    return true;
  }
  return false;
}

IValue tuple(std::vector<IValue> items) { return c10::ivalue::Tuple::create(std::move(items)); }

c10::impl::GenericList any_list() { return c10::impl::GenericList(c10::AnyType::get()); }

IValue encode_arg(const Argument& a, const Node& owner) {
  switch (a.kind) {
    case Argument::Kind::kNode:
      return tuple({std::string("node"), a.node->name()});
    case Argument::Kind::kConst:
      if (!plain_data(a.value))
        throw IoError("node '" + owner.name() + "': argument of kind " + a.value.tagKind() + " cannot be saved");
      return tuple({std::string("const"), a.value});
    case Argument::Kind::kList:
    case Argument::Kind::kTuple: {
      auto items = any_list();
      for (const auto& it : a.items) items.push_back(encode_arg(it, owner));
      if (a.kind == Argument::Kind::kTuple) return tuple({std::string("tuple"), items});
      return tuple({std::string("list"), items, a.elem_type ? a.elem_type->annotation_str() : std::string()});
    }
  }
  return IValue();
}

Argument decode_arg(const IValue& v, const std::map<std::string, Node*>& nodes) {
  const auto& t = v.toTupleRef().elements();
  const std::string& kind = t.at(0).toStringRef();
  if (kind == "node") {
    auto it = nodes.find(t.at(1).toStringRef());
    if (it == nodes.end()) throw IoError("argument names node '" + t.at(1).toStringRef() + "' before it is defined");
    return Argument(it->second);
  }
  if (kind == "const") return Argument(t.at(1));
  std::vector<Argument> items;
  for (const auto& e : t.at(1).toListRef()) items.push_back(decode_arg(e, nodes));
  if (kind == "tuple") return Argument::tuple(std::move(items));
  if (kind == "list") {
    const std::string& elem = t.at(2).toStringRef();
    return Argument::list(std::move(items), elem.empty() ? c10::TypePtr() : c10::parseType(elem));
  }
  throw IoError("unknown argument kind '" + kind + "'");
}

Opcode parse_opcode(const std::string& s) {
  for (Opcode op : {Opcode::kPlaceholder, Opcode::kGetAttr, Opcode::kCallFunction, Opcode::kCallModule,
                    Opcode::kCallMethod, Opcode::kOutput}) {
    if (s == opcode_name(op)) return op;
  }
  throw IoError("unknown opcode '" + s + "'");
}

/// The submodule at dotted `path` of a TorchScript module ("" = the module).
torch::jit::Module script_submodule(const torch::jit::Module& root, const std::string& path) {
  torch::jit::Module cur = root;
  size_t start = 0;
  while (!path.empty() && start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot - start);
    if (!cur.hasattr(part) || !cur.attr(part).isModule())
      throw IoError("the TorchScript model has no submodule '" + path + "'");
    cur = cur.attr(part).toModule();
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

/// `target` of a wrapped call_method: (owner path, method name).
std::pair<std::string, std::string> split_method(const std::string& target) {
  const auto dot = target.rfind('.');
  if (dot == std::string::npos) return {"", target};
  return {target.substr(0, dot), target.substr(dot + 1)};
}

/// The TorchScript function whose demangled qualified name is `qname`, or nullptr.
torch::jit::Function* find_script_function(const torch::jit::Module& root, const std::string& qname) {
  auto cu = root._ivalue()->compilation_unit();
  for (torch::jit::Function* f : cu->get_functions()) {
    if (detail::demangle_type(f->qualname().qualifiedName()) == qname) return f;
  }
  return nullptr;
}

/// The call_module targets of `gm`'s graph in module-tree order (the order
/// `named_modules` lists them), so the loaded tree registers them in the same
/// order and `named_parameters()` / `named_modules()` list things identically.
std::vector<std::string> call_module_targets(const GraphModule& gm) {
  std::set<std::string> targets;
  for (const Node* n : gm.graph().nodes())
    if (n->op() == Opcode::kCallModule) targets.insert(n->target());
  std::vector<std::string> out;
  for (const auto& item : gm.named_modules("", /*include_self=*/false)) {
    if (targets.erase(item.key())) out.push_back(item.key());
  }
  out.insert(out.end(), targets.begin(), targets.end());  // not in the tree: save reports them
  return out;
}

/// Tensor `name` (dotted) of a TorchScript module, if it is one.
c10::optional<at::Tensor> script_tensor(const torch::jit::Module& root, const std::string& name) {
  const auto dot = name.rfind('.');
  try {
    torch::jit::Module owner = dot == std::string::npos ? root : script_submodule(root, name.substr(0, dot));
    const std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    if (owner.hasattr(leaf) && owner.attr(leaf).isTensor()) return owner.attr(leaf).toTensor();
  } catch (const std::exception&) {
  }
  return c10::nullopt;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(path + ": cannot open the saved GraphModule (missing or unreadable)");
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

ModuleConfig make_config() { return ModuleConfig(c10::StringType::get(), c10::AnyType::get()); }

c10::IValue config_at(const c10::IValue& config, const std::string& key) {
  if (!config.isGenericDict()) throw IoError("module configuration is not a dictionary");
  auto d = config.toGenericDict();
  auto it = d.find(IValue(key));
  if (it == d.end()) throw IoError("module configuration lacks '" + key + "'");
  return it->value();
}

void register_module_serializer(ModuleSerializer s) {
  registry();
  detail::add_serializer(std::move(s));
}

void detail::add_serializer(ModuleSerializer s) {
  Registry& r = raw_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& e : r.items) {
    if (e.type == s.type) {
      e = std::move(s);
      return;
    }
  }
  r.items.push_back(std::move(s));
}

c10::IValue save_module_record(const torch::nn::Module& m) {
  if (typeid(m) == typeid(detail::ScriptModuleWrapper))
    throw IoError("a TorchScript module nested in module class '" + m.name() + "' cannot be saved");
  Registry& r = registry();
  const ModuleSerializer* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto it = r.items.rbegin(); it != r.items.rend() && !s; ++it)
      if (it->matches(m)) s = &*it;
  }
  if (!s)
    throw IoError("module class '" + m.name() +
                  "' has no serializer (register one with qfx::fx::register_module_serializer)");
  ModuleConfig rec = make_config();
  rec.insert("type", s->type);
  rec.insert("config", s->save(m));
  return rec;
}

LoadedModule load_module_record(const c10::IValue& record) {
  const std::string type = config_at(record, "type").toStringRef();
  Registry& r = registry();
  std::function<LoadedModule(const IValue&)> load;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& e : r.items)
      if (e.type == type) load = e.load;
  }
  if (!load)
    throw IoError("module type '" + type +
                  "' has no serializer in this build (link the library that defines it, e.g. qfx_quant)");
  return load(config_at(record, "config"));
}

namespace {

// Throws save_graph_module's error for `path`.
[[noreturn]] void fail_save(const std::string& path, const std::string& why) {
  throw IoError(path + ": cannot save the GraphModule: " + why);
}

// The archive record of one node: opcode, name, target, encoded arguments and plain-data meta.
IValue encode_node(const Node& n, const std::string& path) {
  ModuleConfig rec = make_config();
  rec.insert("op", std::string(opcode_name(n.op())));
  rec.insert("name", n.name());
  rec.insert("target", n.target());
  auto args = any_list();
  auto kwargs = any_list();
  try {
    for (const auto& a : n.args()) args.push_back(encode_arg(a, n));
    for (const auto& [k, a] : n.kwargs()) kwargs.push_back(tuple({k, encode_arg(a, n)}));
  } catch (const IoError& e) {
    fail_save(path, e.what());
  }
  rec.insert("args", args);
  rec.insert("kwargs", kwargs);
  ModuleConfig meta = make_config();
  for (const auto& [k, v] : n.meta())
    if (plain_data(v)) meta.insert(k, v);
  rec.insert("meta", meta);
  return IValue(rec);
}

// Checks that a node's wrapped method or function is in the TorchScript model (a wrapped
// function's name goes to `functions`); true when the node needs that model saved.
bool check_wrapped_callable(const GraphModule& gm, const c10::optional<torch::jit::Module>& root, const Node& n,
                            const std::string& path, c10::impl::GenericList& functions) {
  if (n.op() == Opcode::kCallMethod) {
    if (!root)
      fail_save(path, "node '" + n.name() + "' calls wrapped method '" + n.target() +
                          "' but the module has no TorchScript model");
    auto [owner, method] = split_method(n.target());
    try {
      if (!script_submodule(*root, owner).find_method(method)) throw IoError("no such method");
    } catch (const std::exception& e) {
      fail_save(path, "node '" + n.name() + "': wrapped method '" + n.target() +
                          "' is not in the TorchScript model (" + what_of(e) + ")");
    }
    return true;
  }
  if (n.op() == Opcode::kCallFunction && gm.function_fn(n.target())) {
    if (!root || !find_script_function(*root, n.target()))
      fail_save(path, "node '" + n.name() + "': wrapped function '" + n.target() +
                          "' is not in the model's TorchScript archive (functions bound by hand cannot be saved)");
    functions.push_back(n.target());
    return true;
  }
  return false;
}

// The archive record of the call_module target `mpath` (its serializer's type and config, or
// the TorchScript marker); sets `needs_script` for a TorchScript module.
IValue encode_module(const GraphModule& gm, const c10::optional<torch::jit::Module>& root, const std::string& mpath,
                     const std::string& path, bool& needs_script) {
  auto m = gm.get_submodule(mpath);
  if (!m) fail_save(path, "call_module target '" + mpath + "' is not in the module tree");
  ModuleConfig rec = make_config();
  rec.insert("path", mpath);
  if (typeid(*m) == typeid(detail::ScriptModuleWrapper)) {
    needs_script = true;
    if (!root) fail_save(path, "module '" + mpath + "' is TorchScript but the module has no TorchScript model");
    rec.insert("type", std::string(kScriptType));
    rec.insert("config", IValue());
    return IValue(rec);
  }
  IValue r;
  try {
    r = save_module_record(*m);
  } catch (const IoError& e) {
    fail_save(path, "module '" + mpath + "': " + e.what());
  } catch (const std::exception& e) {
    fail_save(path, "module '" + mpath + "': " + what_of(e));
  }
  rec.insert("type", config_at(r, "type"));
  rec.insert("config", config_at(r, "config"));
  return IValue(rec);
}

// The TorchScript model's zip bytes as a uint8 tensor of shape [n].
IValue script_archive(const torch::jit::Module& root, const std::string& path) {
  std::ostringstream os;
  try {
    root.save(os);
  } catch (const std::exception& e) {
    fail_save(path, "cannot serialize its TorchScript model: " + what_of(e));
  }
  const std::string bytes = os.str();
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

// The file's "parameters", "buffers" and "frozen" (parameters without requires_grad) entries.
void insert_tensors(const GraphModule& gm, ModuleConfig& file) {
  c10::Dict<std::string, at::Tensor> params, buffers;
  auto frozen = any_list();
  for (const auto& p : gm.named_parameters(true)) {
    params.insert(p.key(), p.value().detach());
    if (!p.value().requires_grad()) frozen.push_back(p.key());
  }
  for (const auto& b : gm.named_buffers(true)) buffers.insert(b.key(), b.value().detach());
  file.insert("parameters", params);
  file.insert("buffers", buffers);
  file.insert("frozen", frozen);
}

// A loaded archive's top-level dictionary; at() throws "no '<key>' entry" for a missing key.
struct Archive {
  const std::string& path;
  IValue file;

  IoError bad(const std::string& why) const { return IoError(path + ": " + why); }

  IValue at(const std::string& key) const {
    auto d = file.toGenericDict();
    auto it = d.find(IValue(key));
    if (it == d.end()) throw bad("not a saved GraphModule (no '" + key + "' entry)");
    return it->value();
  }
};

// Reads `path` as a saved GraphModule and checks its format and version entries.
Archive open_archive(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  if (bytes.size() < 4 || bytes[0] != 'P' || bytes[1] != 'K')
    throw IoError(path + ": not a saved GraphModule (expected a zip file written by save_graph_module)");
  detail::check_unpacked_size(path, "not a saved GraphModule (truncated or corrupt?)");
  Archive ar{path, IValue()};
  try {
    ar.file = torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    throw IoError(path + ": not a saved GraphModule (truncated or corrupt?): " + what_of(e));
  }
  if (!ar.file.isGenericDict()) throw ar.bad("not a saved GraphModule (the archive holds no dictionary)");
  if (!ar.at("format").isString() || ar.at("format").toStringRef() != kGraphModuleFormat)
    throw ar.bad("not a saved GraphModule (format entry is not '" + std::string(kGraphModuleFormat) + "')");
  if (!ar.at("version").isInt()) throw ar.bad("the 'version' entry is not an integer");
  const int64_t version = ar.at("version").toInt();
  if (version > kGraphModuleFormatVersion)
    throw ar.bad("written by a newer qfx (GraphModule format version " + std::to_string(version) +
                 "; this build reads versions up to " + std::to_string(kGraphModuleFormatVersion) + ")");
  if (version < 1) throw ar.bad("invalid GraphModule format version " + std::to_string(version));
  return ar;
}

// Loads the archive's TorchScript model of wrapped callables (none when the entry is None).
c10::optional<torch::jit::Module> load_script(const IValue& script, GraphModule& gm, std::string& where) {
  if (script.isNone()) return c10::nullopt;
  where = "script";
  at::Tensor t = script.toTensor().contiguous();
  std::istringstream is(std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel())));
  torch::jit::Module root = torch::jit::load(is);
  gm.set_script_root(root._ivalue());
  return root;
}

// Appends the node of one archive record to `g`; its arguments name nodes already in `by_name`.
Node* decode_node(const IValue& rv, Graph& g, const std::map<std::string, Node*>& by_name, std::string& where) {
  const std::string name = config_at(rv, "name").toStringRef();
  where = "node '" + name + "'";
  const Opcode op = parse_opcode(config_at(rv, "op").toStringRef());
  const std::string target = config_at(rv, "target").toStringRef();
  std::vector<Argument> args;
  for (const auto& a : config_at(rv, "args").toListRef()) args.push_back(decode_arg(a, by_name));
  std::vector<std::pair<std::string, Argument>> kwargs;
  for (const auto& kv : config_at(rv, "kwargs").toListRef()) {
    const auto& t = kv.toTupleRef().elements();
    kwargs.emplace_back(t.at(0).toStringRef(), decode_arg(t.at(1), by_name));
  }
  Node* n = nullptr;
  switch (op) {
    case Opcode::kPlaceholder: n = g.placeholder(name); break;
    case Opcode::kGetAttr: n = g.get_attr(target, name); break;
    case Opcode::kCallFunction: n = g.call_function(target, std::move(args), std::move(kwargs), name); break;
    case Opcode::kCallModule: n = g.call_module(target, std::move(args), std::move(kwargs), name); break;
    case Opcode::kCallMethod: n = g.call_method(target, std::move(args), std::move(kwargs), name); break;
    case Opcode::kOutput:
      if (args.size() != 1) throw IoError("output node needs one argument");
      n = g.output(args[0]);
      break;
  }
  if (n->name() != name) throw IoError("duplicate node name");
  n->meta().clear();
  for (const auto& kv : config_at(rv, "meta").toGenericDict()) n->meta()[kv.key().toStringRef()] = kv.value();
  return n;
}

// Rebuilds the call_module targets of the archive's "modules" records into `gm`.
void load_modules(const IValue& records, const c10::optional<torch::jit::Module>& root, GraphModule& gm,
                  std::string& where) {
  for (const auto& rv : records.toListRef()) {
    const std::string mpath = config_at(rv, "path").toStringRef();
    const std::string type = config_at(rv, "type").toStringRef();
    where = "module '" + mpath + "' (" + type + ")";
    if (type == kScriptType) {
      if (!root) throw IoError("the file has no TorchScript model");
      torch::jit::Module sm = script_submodule(*root, mpath);
      gm.add_submodule(mpath, std::make_shared<detail::ScriptModuleWrapper>(sm),
                       [sm](std::vector<IValue>& a) mutable -> IValue { return sm.forward(a); });
    } else {
      ModuleConfig rec = make_config();
      rec.insert("type", type);
      rec.insert("config", config_at(rv, "config"));
      LoadedModule lm = load_module_record(rec);
      gm.add_submodule(mpath, lm.module, lm.fn);
    }
  }
}

// Binds each call_method target of the graph to its TorchScript method (one train hook per owner).
void bind_wrapped_methods(const c10::optional<torch::jit::Module>& root, GraphModule& gm, std::string& where) {
  std::set<std::string> owners;
  for (const Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::kCallMethod || gm.method_fn(n->target())) continue;
    where = "node '" + n->name() + "'";
    if (!root) throw IoError("wrapped method '" + n->target() + "' but the file has no TorchScript model");
    auto [owner, method] = split_method(n->target());
    torch::jit::Module m = script_submodule(*root, owner);
    if (!m.find_method(method)) throw IoError("the TorchScript model has no method '" + n->target() + "'");
    gm.add_method(n->target(), [m, method = method](std::vector<IValue>& a) mutable -> IValue {
      return m.get_method(method)(a);
    });
    if (owners.insert(owner).second) gm.add_train_hook([m](bool on) mutable { m.train(on); });
  }
}

// Binds each name of the archive's "functions" entry to its TorchScript function.
void bind_wrapped_functions(const IValue& names, const c10::optional<torch::jit::Module>& root, GraphModule& gm,
                            std::string& where) {
  for (const auto& fv : names.toListRef()) {
    const std::string qname = fv.toStringRef();
    where = "wrapped function '" + qname + "'";
    torch::jit::Function* fn = root ? find_script_function(*root, qname) : nullptr;
    if (!fn) throw IoError("not in the file's TorchScript model");
    auto cu = root->_ivalue()->compilation_unit();
    gm.add_function(qname, [fn, cu](std::vector<IValue>& a) -> IValue { return (*fn)(a); });
  }
}

// Loads the archive's parameters and buffers into the rebuilt modules by name (set_data keeps
// each module's own handle on its tensors valid); every tensor the modules own must be in it.
void load_tensors(const Archive& ar, const c10::optional<torch::jit::Module>& root, GraphModule& gm,
                  std::string& where) {
  at::NoGradGuard no_grad;
  std::set<std::string> frozen;
  for (const auto& f : ar.at("frozen").toListRef()) frozen.insert(f.toStringRef());
  std::map<std::string, at::Tensor> have;
  for (const auto& p : gm.named_parameters(true)) have[p.key()] = p.value();
  for (const auto& b : gm.named_buffers(true)) have[b.key()] = b.value();
  std::set<std::string> loaded;
  for (const char* kind : {"parameters", "buffers"}) {
    const bool is_buffer = std::string(kind) == "buffers";
    for (const auto& kv : ar.at(kind).toGenericDict()) {
      const std::string name = kv.key().toStringRef();
      where = "tensor '" + name + "'";
      // A copy with storage of its own: tensors read from the archive cannot be
      // resized, and observers and fake quantizes resize their buffers.
      at::Tensor saved = kv.value().toTensor().clone();
      auto it = have.find(name);
      if (it != have.end()) {
        it->second.set_data(saved);
      } else if (auto st = root ? script_tensor(*root, name) : c10::nullopt) {
        st->set_data(saved);  // a tensor only wrapped TorchScript code reads: keep it shared
        gm.add_tensor(name, *st, is_buffer);
      } else {
        gm.add_tensor(name, saved, is_buffer);
      }
      if (!is_buffer) {
        at::Tensor t = gm.get_attr(name);
        if (t.is_leaf()) t.requires_grad_(frozen.count(name) == 0);
      }
      loaded.insert(name);
    }
  }
  for (const auto& [name, t] : have) {
    where = "tensor '" + name + "'";
    if (!loaded.count(name)) throw IoError("the rebuilt module has it but the file does not");
  }
}

}  // namespace

void save_graph_module(const GraphModule& gm, const std::string& path) {
  const Graph& g = gm.graph();
  g.lint();

  c10::optional<torch::jit::Module> root;
  if (gm.script_root().isObject()) root = torch::jit::Module(gm.script_root().toObject());

  auto nodes = any_list();
  auto functions = any_list();
  bool needs_script = false;
  for (const Node* n : g.nodes()) {
    nodes.push_back(encode_node(*n, path));
    if (check_wrapped_callable(gm, root, *n, path, functions)) needs_script = true;
  }
  auto modules = any_list();
  for (const std::string& mpath : call_module_targets(gm))
    modules.push_back(encode_module(gm, root, mpath, path, needs_script));

  const IValue script = needs_script ? script_archive(*root, path) : IValue();

  ModuleConfig file = make_config();
  file.insert("format", std::string(kGraphModuleFormat));
  file.insert("version", kGraphModuleFormatVersion);
  file.insert("training", gm.is_training());
  file.insert("graph", nodes);
  file.insert("code", g.python_code());
  file.insert("modules", modules);
  file.insert("functions", functions);
  insert_tensors(gm, file);
  file.insert("script", script);
  std::vector<char> bytes;
  try {
    bytes = torch::jit::pickle_save(IValue(file));
  } catch (const std::exception& e) {
    fail_save(path, what_of(e));
  }
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
}

std::shared_ptr<GraphModule> load_graph_module(const std::string& path) {
  const Archive ar = open_archive(path);
  auto gm = std::make_shared<GraphModule>();
  std::string where = "graph";
  try {
    const c10::optional<torch::jit::Module> root = load_script(ar.at("script"), *gm, where);
    Graph& g = gm->graph();
    std::map<std::string, Node*> by_name;
    for (const auto& rv : ar.at("graph").toListRef()) {
      Node* n = decode_node(rv, g, by_name, where);
      by_name[n->name()] = n;
    }
    load_modules(ar.at("modules"), root, *gm, where);
    bind_wrapped_methods(root, *gm, where);
    bind_wrapped_functions(ar.at("functions"), root, *gm, where);
    load_tensors(ar, root, *gm, where);
    where = "graph";
    gm->train(ar.at("training").toBool());
    g.lint();
  } catch (const std::exception& e) {
    throw ar.bad(where + ": " + what_of(e));
  }
  return gm;
}

}  // namespace qfx::fx
