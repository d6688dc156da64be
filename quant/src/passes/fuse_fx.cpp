// fuse_fx: conv/linear [+ batch norm] [+ relu/relu6] -> one FusedConvLinear module.
#include <cstdlib>
#include <iostream>
#include <set>
#include <unordered_map>

#include "pass_log.h"
#include "qfx/fx/module_matcher.h"
#include "qfx/quant/modules.h"
#include "qfx/quant/op_catalog.h"
#include "qfx/quant/op_names.h"
#include "qfx/quant/passes.h"

namespace qfx::quant {
namespace {

bool is_weighted(const std::string& op) { return op_catalog().fusion_role(op) == FusionRole::kWeightedHead; }

bool is_prefix_of_some(const BackendConfig& b, const std::vector<std::string>& names) {
  for (const auto& f : b.fusions)
    if (f.size() >= names.size() && std::equal(names.begin(), names.end(), f.begin())) return true;
  return false;
}

}  // namespace

PassReport fuse_fx(fx::GraphModule& gm, const BackendConfig& backend, const FuseOptions& options) {
  PassReport report;
  fx::Graph& g = gm.graph();
  std::unordered_map<std::string, int> target_uses;
  for (fx::Node* n : g.nodes())
    if (n->op() == fx::Opcode::kCallModule) ++target_uses[n->target()];
  std::set<fx::Node*> erased;
  for (fx::Node* n : g.nodes()) {
    if (erased.count(n) || n->op() != fx::Opcode::kCallModule) continue;
    const std::string op = canonical_op_name(*n, gm);
    if (!is_weighted(op)) continue;
    auto module = gm.get_submodule(n->target());
    if (dynamic_cast<FusedConvLinear*>(module.get())) continue;
    std::vector<fx::Node*> chain = {n}, best;
    std::vector<std::string> names = {op}, best_names;
    fx::Node* cur = n;
    std::string stop;
    while (true) {
      if (cur->users().size() != 1) {
        if (cur->users().size() > 1) stop = "'" + cur->name() + "' has " + std::to_string(cur->users().size()) + " users";
        break;
      }
      fx::Node* u = cur->users()[0];
      const std::string un = canonical_op_name(*u, gm);
      std::vector<std::string> cand = names;
      cand.push_back(un);
      if (!is_prefix_of_some(backend, cand)) break;
      const bool bn = un.rfind("batchnorm", 0) == 0;
      if (bn && u->op() != fx::Opcode::kCallModule) break;
      if (!fx::consumes_only(u, cur)) break;
      chain.push_back(u);
      names = cand;
      if (backend.has_fusion(names)) {
        best = chain;
        best_names = names;
      }
      cur = u;
    }
    if (best.empty()) {
      if (!stop.empty() && names.size() == 1) {
        // Would a fusion have applied if the output had one user?
        for (const auto& f : backend.fusions)
          if (f[0] == op) {
            report.declined.push_back(n->name() + ": not fused (" + stop + ")");
            break;
          }
      }
      continue;
    }
    std::shared_ptr<torch::nn::Module> bnmod;
    FusedActivation act = FusedActivation::kNone;
    bool shared_module = false;
    for (size_t i = 1; i < best.size(); ++i) {
      const OpRecord* r = op_catalog().find(best_names[i]);
      if (r && r->fusion == FusionRole::kBatchNorm) {
        bnmod = gm.get_submodule(best[i]->target());
        if (target_uses[best[i]->target()] > 1) shared_module = true;
      }
      if (r && r->fusion == FusionRole::kActivation) act = r->fused_activation;
    }
    if (shared_module && options.qat) {
      report.declined.push_back(n->name() + ": not fused (its batch norm module is called from several places)");
      continue;
    }
    std::string why;
    auto fused = FusedConvLinear::create(module, bnmod,
                                         options.qat ? FusedConvLinear::BnMode::kSimulate : FusedConvLinear::BnMode::kFold,
                                         act, &why);
    if (!fused) {
      report.declined.push_back(n->name() + ": not fused (" + why + ")");
      continue;
    }
    gm.replace_submodule(n->target(), fused, fused_call_fn(fused));
    n->meta()["fused_type"] = fused->type_name();
    best.back()->replace_all_uses_with(n);
    std::string absorbed;
    for (size_t i = best.size() - 1; i >= 1; --i) {
      fx::Node* d = best[i];
      absorbed += (absorbed.empty() ? "" : ", ") + d->name();
      if (d->op() == fx::Opcode::kCallModule && --target_uses[d->target()] == 0) gm.remove_submodule(d->target());
      erased.insert(d);
      g.erase_node(d);
    }
    std::string pattern;
    for (const auto& s : best_names) pattern += (pattern.empty() ? "" : "+") + s;
    report.changes.push_back(n->name() + ": " + pattern + " -> " + fused->type_name() + " (absorbed " + absorbed + ")");
  }
  g.lint();
  log_pass("fuse_fx", report);
  return report;
}

}  // namespace qfx::quant
