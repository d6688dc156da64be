// fuse_fx: conv/linear [+ batch norm] [+ relu/relu6] -> one FusedConvLinear module.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

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

// How many call_module nodes call each module target.
std::unordered_map<std::string, int> count_module_calls(fx::Graph& g) {
  std::unordered_map<std::string, int> target_uses;
  for (fx::Node* n : g.nodes())
    if (n->op() == fx::Opcode::kCallModule) ++target_uses[n->target()];
  return target_uses;
}

// The chain walked from a weighted head: the longest prefix the backend fuses (`best`), every
// node the walk took (`names`), and why it stopped where the head had several users.
struct Chain {
  std::vector<fx::Node*> best;
  std::vector<std::string> best_names;
  std::vector<std::string> names;
  std::string stop;
};

// Walks single-user consumers from head `n` (op `op`) while they extend a prefix of one of the backend's fusions.
Chain walk_chain(fx::GraphModule& gm, const BackendConfig& backend, fx::Node* n, const std::string& op) {
  Chain c;
  std::vector<fx::Node*> chain = {n};
  c.names = {op};
  fx::Node* cur = n;
  while (true) {
    if (cur->users().size() != 1) {
      if (cur->users().size() > 1) c.stop = "'" + cur->name() + "' has " + std::to_string(cur->users().size()) + " users";
      break;
    }
    fx::Node* u = cur->users()[0];
    const std::string un = canonical_op_name(*u, gm);
    std::vector<std::string> cand = c.names;
    cand.push_back(un);
    if (!is_prefix_of_some(backend, cand)) break;
    const bool bn = un.rfind("batchnorm", 0) == 0;
    if (bn && u->op() != fx::Opcode::kCallModule) break;
    if (!fx::consumes_only(u, cur)) break;
    chain.push_back(u);
    c.names = cand;
    if (backend.has_fusion(c.names)) {
      c.best = chain;
      c.best_names = c.names;
    }
    cur = u;
  }
  return c;
}

// Notes head `n` as declined where a fusion starting at `op` would have applied had its output one user.
void note_several_users(PassReport& report, const BackendConfig& backend, const fx::Node* n, const std::string& op,
                        const Chain& c) {
  if (c.stop.empty() || c.names.size() != 1) return;
  for (const auto& f : backend.fusions)
    if (f[0] == op) {
      report.declined.push_back(n->name() + ": not fused (" + c.stop + ")");
      break;
    }
}

// What a fused chain folds into its head: the batch norm module (whether another node calls it
// too) and the activation.
struct Absorbed {
  std::shared_ptr<torch::nn::Module> bnmod;
  FusedActivation act = FusedActivation::kNone;
  bool shared_module = false;
};

// Reads the batch norm and activation of chain `c`'s best fusion.
Absorbed absorbed_parts(fx::GraphModule& gm, const Chain& c, std::unordered_map<std::string, int>& target_uses) {
  Absorbed a;
  for (size_t i = 1; i < c.best.size(); ++i) {
    const OpRecord* r = op_catalog().find(c.best_names[i]);
    if (r && r->fusion == FusionRole::kBatchNorm) {
      a.bnmod = gm.get_submodule(c.best[i]->target());
      if (target_uses[c.best[i]->target()] > 1) a.shared_module = true;
    }
    if (r && r->fusion == FusionRole::kActivation) a.act = r->fused_activation;
  }
  return a;
}

// Erases the fused nodes after the head (last first), removing modules no node calls any more;
// returns their names, comma-separated.
std::string erase_absorbed(fx::GraphModule& gm, const std::vector<fx::Node*>& best,
                           std::unordered_map<std::string, int>& target_uses, std::set<fx::Node*>& erased) {
  std::string absorbed;
  for (size_t i = best.size() - 1; i >= 1; --i) {
    fx::Node* d = best[i];
    absorbed += (absorbed.empty() ? "" : ", ") + d->name();
    if (d->op() == fx::Opcode::kCallModule && --target_uses[d->target()] == 0) gm.remove_submodule(d->target());
    erased.insert(d);
    gm.graph().erase_node(d);
  }
  return absorbed;
}

// Joins the op names of a fusion pattern with '+'.
std::string pattern_of(const std::vector<std::string>& names) {
  std::string pattern;
  for (const auto& s : names) pattern += (pattern.empty() ? "" : "+") + s;
  return pattern;
}

}  // namespace

PassReport fuse_fx(fx::GraphModule& gm, const BackendConfig& backend, const FuseOptions& options) {
  PassReport report;
  fx::Graph& g = gm.graph();
  std::unordered_map<std::string, int> target_uses = count_module_calls(g);
  std::set<fx::Node*> erased;
  for (fx::Node* n : g.nodes()) {
    if (erased.count(n) || n->op() != fx::Opcode::kCallModule) continue;
    const std::string op = canonical_op_name(*n, gm);
    if (!is_weighted(op)) continue;
    auto module = gm.get_submodule(n->target());
    if (dynamic_cast<FusedConvLinear*>(module.get())) continue;
    const Chain c = walk_chain(gm, backend, n, op);
    if (c.best.empty()) {
      note_several_users(report, backend, n, op, c);
      continue;
    }
    const Absorbed a = absorbed_parts(gm, c, target_uses);
    if (a.shared_module && options.qat) {
      report.declined.push_back(n->name() + ": not fused (its batch norm module is called from several places)");
      continue;
    }
    std::string why;
    auto fused = FusedConvLinear::create(module, a.bnmod,
                                         options.qat ? FusedConvLinear::BnMode::kSimulate : FusedConvLinear::BnMode::kFold,
                                         a.act, &why);
    if (!fused) {
      report.declined.push_back(n->name() + ": not fused (" + why + ")");
      continue;
    }
    gm.replace_submodule(n->target(), fused, fused_call_fn(fused));
    n->meta()["fused_type"] = fused->type_name();
    c.best.back()->replace_all_uses_with(n);
    const std::string absorbed = erase_absorbed(gm, c.best, target_uses, erased);
    report.changes.push_back(n->name() + ": " + pattern_of(c.best_names) + " -> " + fused->type_name() + " (absorbed " +
                             absorbed + ")");
  }
  g.lint();
  log_pass("fuse_fx", report);
  return report;
}

}  // namespace qfx::quant
