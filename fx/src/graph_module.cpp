#include "qfx/fx/graph_module.h"

#include <stdexcept>

#include "qfx/error.h"
#include "qfx/fx/interpreter.h"
#include "qfx/fx/module_matcher.h"

namespace qfx::fx {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::shared_ptr<torch::nn::Module> find_child(torch::nn::Module& m, const std::string& name) {
  for (const auto& item : m.named_children()) {
    if (item.key() == name) return item.value();
  }
  return nullptr;
}

}  // namespace

GraphModule::GraphModule() : GraphModule(std::make_shared<Graph>()) {}

GraphModule::GraphModule(std::shared_ptr<Graph> graph)
    : torch::nn::Module("GraphModule"), graph_(std::move(graph)) {}

std::shared_ptr<torch::nn::Module> GraphModule::container_for(const std::string& path, std::string* leaf_name,
                                                              bool create) {
  if (path.empty()) throw ArgumentError("GraphModule: empty attribute path");
  auto parts = split_path(path);
  *leaf_name = parts.back();
  torch::nn::Module* cur = this;
  std::shared_ptr<torch::nn::Module> cur_sp;  // nullptr means `this`
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto child = find_child(*cur, parts[i]);
    if (!child) {
      if (!create) return nullptr;
      child = cur->register_module(parts[i], std::make_shared<torch::nn::Module>("Module"));
    }
    cur_sp = child;
    cur = child.get();
  }
  if (!cur_sp) {
    // Root: a non-owning shared_ptr to this module.
    return std::shared_ptr<torch::nn::Module>(std::shared_ptr<torch::nn::Module>{}, this);
  }
  return cur_sp;
}

void GraphModule::add_submodule(const std::string& path, std::shared_ptr<torch::nn::Module> module, CallFn fn) {
  std::string leaf;
  auto parent = container_for(path, &leaf, /*create=*/true);
  if (find_child(*parent, leaf)) throw ArgumentError("GraphModule: a module is already registered at '" + path + "'");
  parent->register_module(leaf, std::move(module));
  module_fns_[path] = std::move(fn);
}

void GraphModule::replace_submodule(const std::string& path, std::shared_ptr<torch::nn::Module> module, CallFn fn) {
  std::string leaf;
  auto parent = container_for(path, &leaf, /*create=*/false);
  if (!parent || !find_child(*parent, leaf)) throw ArgumentError("GraphModule: no module at '" + path + "' to replace");
  parent->replace_module(leaf, std::move(module));
  module_fns_[path] = std::move(fn);
}

void GraphModule::remove_submodule(const std::string& path) {
  std::string leaf;
  auto parent = container_for(path, &leaf, /*create=*/false);
  if (parent && find_child(*parent, leaf)) parent->unregister_module(leaf);
  module_fns_.erase(path);
}

std::shared_ptr<torch::nn::Module> GraphModule::get_submodule(const std::string& path) const {
  std::string leaf;
  auto parent = const_cast<GraphModule*>(this)->container_for(path, &leaf, /*create=*/false);
  return parent ? find_child(*parent, leaf) : nullptr;
}

const CallFn& GraphModule::module_fn(const std::string& path) const {
  auto it = module_fns_.find(path);
  if (it == module_fns_.end()) throw ArgumentError("GraphModule: no callable module at '" + path + "'");
  return it->second;
}

void GraphModule::add_tensor(const std::string& path, const at::Tensor& tensor, bool is_buffer) {
  std::string leaf;
  auto parent = container_for(path, &leaf, /*create=*/true);
  if (is_buffer) {
    parent->register_buffer(leaf, tensor);
  } else {
    parent->register_parameter(leaf, tensor, tensor.requires_grad());
  }
}

at::Tensor GraphModule::get_attr(const std::string& path) const {
  std::string leaf;
  auto parent = const_cast<GraphModule*>(this)->container_for(path, &leaf, /*create=*/false);
  if (parent) {
    // The dictionaries are temporaries: copy the tensor out while they live.
    const auto params = parent->named_parameters(false);
    if (const auto* p = params.find(leaf)) return *p;
    const auto buffers = parent->named_buffers(false);
    if (const auto* b = buffers.find(leaf)) return *b;
  }
  throw ArgumentError("GraphModule: no parameter or buffer at '" + path + "'");
}

bool GraphModule::has_attr(const std::string& path) const {
  try {
    get_attr(path);
    return true;
  } catch (const ArgumentError&) {
    return false;
  }
}

void GraphModule::add_method(const std::string& target, CallFn fn) { method_fns_[target] = std::move(fn); }
void GraphModule::add_function(const std::string& target, CallFn fn) { function_fns_[target] = std::move(fn); }

const CallFn* GraphModule::method_fn(const std::string& target) const {
  auto it = method_fns_.find(target);
  return it == method_fns_.end() ? nullptr : &it->second;
}

const CallFn* GraphModule::function_fn(const std::string& target) const {
  auto it = function_fns_.find(target);
  return it == function_fns_.end() ? nullptr : &it->second;
}

void GraphModule::add_train_hook(std::function<void(bool)> hook) { train_hooks_.push_back(std::move(hook)); }

void GraphModule::train(bool on) {
  torch::nn::Module::train(on);
  for (auto& h : train_hooks_) h(on);
}

std::shared_ptr<GraphModule> GraphModule::copy() const {
  auto c = std::make_shared<GraphModule>(std::shared_ptr<Graph>(graph_->copy()));
  for (const auto& [path, fn] : module_fns_) {
    auto m = get_submodule(path);
    if (!m) throw InternalError("GraphModule::copy: callable module '" + path + "' is not in the module tree");
    c->add_submodule(path, m, fn);
  }
  for (const Node* n : graph_->nodes()) {
    if (n->op() != Opcode::kGetAttr || c->has_attr(n->target())) continue;
    std::string leaf;
    auto parent = const_cast<GraphModule*>(this)->container_for(n->target(), &leaf, /*create=*/false);
    const bool is_buffer = parent && parent->named_buffers(false).find(leaf) != nullptr;
    c->add_tensor(n->target(), get_attr(n->target()), is_buffer);
  }
  c->method_fns_ = method_fns_;
  c->function_fns_ = function_fns_;
  c->train_hooks_ = train_hooks_;
  c->script_root_ = script_root_;
  c->train(is_training());
  return c;
}

c10::IValue GraphModule::forward(std::vector<c10::IValue> inputs) {
  Interpreter interp(*this);
  return interp.run(std::move(inputs));
}

at::Tensor GraphModule::forward(const at::Tensor& input) {
  c10::IValue out = forward(std::vector<c10::IValue>{input});
  if (!out.isTensor()) throw DataError("GraphModule::forward(Tensor): the graph returns " + std::string(out.tagKind()) + ", not one tensor (call forward(std::vector<IValue>))");
  return out.toTensor();
}

void GraphModule::print_tabular(std::ostream& os) const {
  graph_->print_tabular(os, [this](const Node& n) { return module_type_name(n, *this); });
}

}  // namespace qfx::fx
