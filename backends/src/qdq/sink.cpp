// Moving Q / DQ across the ops that move codes (OpSchema::moves_codes), before
// QDQ groups are matched: moving values and (de)quantizing per tensor commute exactly.
#include <cstring>
#include <map>
#include <set>

#include "qfx/runtime/op_schema.h"
#include "rules.h"

namespace qfx::runtime::ir::qdq {
namespace {

// Who writes each value, and how many inputs read it.
struct Edges {
  std::map<std::string, size_t> producer;
  std::map<std::string, int> uses;
  explicit Edges(const Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& in : g.nodes[i].inputs) ++uses[in];
      for (const auto& o : g.nodes[i].outputs) producer[o] = i;
    }
  }
};

bool moves_codes(const std::string& op) {
  const OpSchema* s = find_op_schema(op);
  return s && s->moves_codes;
}

std::set<std::string> graph_outputs(const Graph& g) {
  std::set<std::string> outs;
  for (const auto& o : g.outputs) outs.insert(o.name);
  return outs;
}

// A Q or DQ whose scale and zero point (when given) are one-element initializers
// (a blocked one or one to a narrow type excepted: qdq_refusal).
bool per_tensor(const Graph& g, const Node& q) {
  if (q.inputs.size() < 2 || !qdq_refusal(q).empty()) return false;
  for (size_t k = 1; k < q.inputs.size() && k < 3; ++k) {
    if (q.inputs[k].empty()) continue;
    auto it = g.initializers.find(q.inputs[k]);
    if (it == g.initializers.end() || it->second.numel() != 1) return false;
  }
  return true;
}

// The nodes after `i` that read DequantizeLinear `dq`'s output, when every reader
// moves codes through its input 0 alone; empty otherwise.
std::vector<size_t> code_readers(const Graph& g, size_t i, const Node& dq, const std::set<std::string>& outs) {
  std::vector<size_t> readers;
  for (size_t j = i + 1; j < g.nodes.size(); ++j) {
    const Node& n = g.nodes[j];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k] != dq.outputs[0]) continue;
      if (k != 0 || !moves_codes(n.op) || n.outputs.size() != 1 || outs.count(n.outputs[0])) return {};
      if (readers.empty() || readers.back() != j) readers.push_back(j);
    }
  }
  return readers;
}

// Each DequantizeLinear with per-tensor qparams moves below the ops that move codes
// and read it, one copy per reader, so those ops move 8-bit codes and what follows
// is fed by a DequantizeLinear again (ShuffleNet's channel shuffle and chunk, then a
// conv; a transformer's q/k/v slices).
void sink_below_moves(Graph& g, const std::set<std::string>& outs) {
  // One pass: the copies a move leaves go after its readers, where the scan meets them.
  for (size_t i = 0; i < g.nodes.size();) {
    const Node dq = g.nodes[i];
    const bool ok = dq.op == "DequantizeLinear" && dq.outputs.size() == 1 && !outs.count(dq.outputs[0]) && per_tensor(g, dq);
    const std::vector<size_t> readers = ok ? code_readers(g, i, dq, outs) : std::vector<size_t>{};
    if (readers.empty()) {
      ++i;
      continue;
    }
    // Readers read the codes and write codes; a DequantizeLinear after each gives
    // back the float value under its old name.
    for (size_t r = readers.size(); r-- > 0;) {
      Node& n = g.nodes[readers[r]];
      const std::string y = n.outputs[0];
      n.inputs[0] = dq.inputs[0];
      n.outputs[0] = y + "_codes";
      Node d = dq;
      d.name = dq.name + "_after_" + n.name;
      d.inputs[0] = n.outputs[0];
      d.outputs = {y};
      g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(readers[r]) + 1, d);
    }
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));  // node i is now the next one
  }
}

// Moves one QuantizeLinear with per-tensor qparams above the op moving codes that
// alone feeds it (x.mean([2, 3]) exported as GlobalAveragePool + Flatten: the pool
// meets its QuantizeLinear and runs int8). Returns true if it moved one.
bool raise_one_quantize(Graph& g, const std::set<std::string>& outs) {
  Edges e(g);
  auto& prod = e.producer;
  auto& reads = e.uses;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node q = g.nodes[i];
    if (q.op != "QuantizeLinear" || q.outputs.size() != 1 || !per_tensor(g, q)) continue;
    auto pit = prod.find(q.inputs[0]);
    if (pit == prod.end() || reads[q.inputs[0]] != 1 || outs.count(q.inputs[0])) continue;
    Node& mv = g.nodes[pit->second];
    if (!moves_codes(mv.op) || mv.outputs.size() != 1 || mv.inputs.empty()) continue;
    auto src = prod.find(mv.inputs[0]);
    if (src != prod.end() && g.nodes[src->second].op == "DequantizeLinear") continue;  // sunk already
    Node nq = q;
    nq.name = q.name + "_before_" + mv.name;
    nq.inputs[0] = mv.inputs[0];
    nq.outputs = {mv.inputs[0] + "_codes_" + q.name};
    mv.inputs[0] = nq.outputs[0];
    mv.outputs[0] = q.outputs[0];
    const size_t at = pit->second;
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(at), nq);
    return true;
  }
  return false;
}

bool same_const(const Graph& g, const std::string& a, const std::string& b) {
  if (a == b) return true;
  auto x = g.initializers.find(a), y = g.initializers.find(b);
  return x != g.initializers.end() && y != g.initializers.end() && x->second.dtype() == y->second.dtype() &&
         x->second.nbytes() == y->second.nbytes() && std::memcmp(x->second.raw(), y->second.raw(), x->second.nbytes()) == 0;
}

// A DequantizeLinear read only by a QuantizeLinear with the same qparams (what a
// moved value meets next) is the identity on codes: both go.
void drop_identity_pairs(Graph& g, const std::set<std::string>& outs) {
  Edges e(g);
  auto& producer = e.producer;
  auto& uses = e.uses;
  std::map<std::string, std::string> rename;
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& q = g.nodes[i];
    if (q.op != "QuantizeLinear" || q.inputs.size() < 3 || outs.count(q.outputs[0])) continue;
    auto p = producer.find(q.inputs[0]);
    if (p == producer.end() || uses[q.inputs[0]] != 1) continue;
    const Node& d = g.nodes[p->second];
    if (d.op != "DequantizeLinear" || d.inputs.size() < 3 || !same_const(g, d.inputs[1], q.inputs[1]) ||
        !same_const(g, d.inputs[2], q.inputs[2]) || !qdq_refusal(d).empty() || !qdq_refusal(q).empty())
      continue;
    rename[q.outputs[0]] = d.inputs[0];
    drop[i] = drop[p->second] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (drop[i]) continue;
    for (auto& in : g.nodes[i].inputs)
      for (auto r = rename.find(in); r != rename.end(); r = rename.find(in)) in = r->second;
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

}  // namespace

void sink_dequantize(Graph& g) {
  const std::set<std::string> outs = graph_outputs(g);
  sink_below_moves(g, outs);
  while (raise_one_quantize(g, outs)) {
  }
  drop_identity_pairs(g, outs);
}

}  // namespace qfx::runtime::ir::qdq
