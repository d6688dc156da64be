// QAT's evaluations: top-1 in libtorch (fp32, fake-quant), the int8 model on the
// runtime, and the data-parallel check that every rank holds the same qparams.
#include "qfx/quant/distributed.h"
#include "qfx/quant/fake_quantize.h"
#include "metrics.h"
#include "stages.h"

namespace qfx::quant::pipeline {

double top1_libtorch(const Job& job, fx::GraphModule& gm, Dataset& d, at::Tensor* pred, const std::string& what) {
  at::NoGradGuard ng;
  const int64_t bs = job.cfg.evaluation.batch_size;
  std::vector<at::Tensor> preds;
  int64_t K = 0;  // classes
  for (int64_t i = 0; i < d.size(); i += bs) {
    const std::vector<at::Tensor> b = d.batch_inputs(i, std::min(i + bs, d.size()));
    const at::Tensor scores = forward_output(gm, b, job.output);
    K = scores.size(1);
    preds.push_back(scores.argmax(1));
    progress(job.hooks, what, i + b[0].size(0), d.size());
  }
  *pred = at::cat(preds);
  return label_accuracy(*pred, d.labels(), K, job.cfg.evaluation.data.labels);
}

at::Tensor run_int8(const Job& job, const Int8Model& int8, Dataset& d) {
  const int64_t bs = job.cfg.evaluation.batch_size;
  std::vector<at::Tensor> outs;
  for (int64_t i = 0; i < d.size(); i += bs) {
    const std::vector<at::Tensor> b = d.batch_inputs(i, std::min(i + bs, d.size()));
    outs.push_back(to_aten(int8.model.run(feed(int8.model, b)).at(int8.output)));
    progress(job.hooks, "int8 evaluation", i + b[0].size(0), d.size());
  }
  return at::cat(outs);
}

bool qparams_identical_on_all_ranks(fx::GraphModule& gm, distributed::Context& dist) {
  std::vector<at::Tensor> q;
  for (const auto& m : gm.modules(false))
    if (auto* fq = dynamic_cast<FakeQuantize*>(m.get())) {
      QParams p = fq->qparams();
      q.push_back(p.scale.to(at::kDouble).reshape({-1}));
      q.push_back(p.zero_point.to(at::kDouble).reshape({-1}));
    }
  const at::Tensor all = dist.all_gather(q.empty() ? at::zeros({1}, at::kDouble) : at::cat(q), "qparams check");
  bool same = true;
  for (int r = 1; r < dist.world_size(); ++r) same &= at::equal(all[0], all[r]);
  return same;
}

}  // namespace qfx::quant::pipeline
