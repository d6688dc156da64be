// Internal: a TorchScript module kept whole (a wrap annotation) as a call_module
// target of a GraphModule.
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <string>

namespace qfx::fx::detail {

// A TorchScript module handle exposed as a torch::nn::Module, so that a wrapped
// module sits in the GraphModule's tree: its parameters are listed by
// parameters() and train()/eval() reach its TorchScript code.
class ScriptModuleWrapper : public torch::nn::Module {
 public:
  explicit ScriptModuleWrapper(torch::jit::Module m) : torch::nn::Module("ScriptModuleWrapper"), m_(std::move(m)) {
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) add(p.name, p.value, false);
    for (const auto& b : m_.named_buffers(/*recurse=*/true)) add(b.name, b.value, true);
    torch::nn::Module::train(m_.is_training());
  }
  void train(bool on = true) override {
    torch::nn::Module::train(on);
    m_.train(on);
  }
  torch::jit::Module& script() { return m_; }

 private:
  void add(const std::string& dotted, const at::Tensor& t, bool buffer) {
    torch::nn::Module* cur = this;
    size_t start = 0;
    while (true) {
      size_t dot = dotted.find('.', start);
      std::string part = dotted.substr(start, dot - start);
      if (dot == std::string::npos) {
        if (buffer) cur->register_buffer(part, t);
        else cur->register_parameter(part, t, t.requires_grad());
        return;
      }
      std::shared_ptr<torch::nn::Module> child;
      for (const auto& c : cur->named_children()) if (c.key() == part) child = c.value();
      if (!child) child = cur->register_module(part, std::make_shared<torch::nn::Module>("Module"));
      cur = child.get();
      start = dot + 1;
    }
  }
  torch::jit::Module m_;
};

}  // namespace qfx::fx::detail
