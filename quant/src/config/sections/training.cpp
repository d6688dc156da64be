// The `training:` section of a `qfx qat` config.
#include "qfx/quant/torch_device.h"
#include "sections.h"

namespace qfx::quant::sections {

using namespace yaml;

namespace {

const KeyTable& optimizer_keys() {
  static const KeyTable t{"training.optimizer", {
      {"type", KeyType::kChoice, {"sgd", "adam"}, {}, "sgd", "the optimizer"},
      {"lr", KeyType::kNumber, {}, {0, kNoBound, true, false, "must be positive"}, "0.01", "peak learning rate"},
      {"momentum", KeyType::kNumber, {}, {}, "0.9", "sgd's momentum"},
      {"weight_decay", KeyType::kNumber, {}, {}, "0", "L2 weight decay"},
  }};
  return t;
}

const KeyTable& lr_schedule_keys() {
  static const KeyTable t{"training.lr_schedule", {
      {"type", KeyType::kChoice, {"constant", "cosine", "step"}, {}, "cosine", "the schedule"},
      {"milestones", KeyType::kList, {}, {}, "[]", "step: the steps at which the rate is multiplied by 0.1"},
  }};
  return t;
}

// training.device: cpu, cuda or cuda:N; refused at load where libtorch cannot run there.
void read_training_device(const SectionReader& s, TrainingConfig* tc) {
  const YAML::Node v = s["device"];
  s.read("device", &tc->device);
  c10::Device d(c10::kCPU);
  try {
    d = parse_torch_device(tc->device, "training.device");
  } catch (const ConfigError& e) {
    bad(s.path(), v, e.what());
  }
  if (const std::string why = torch_device_unavailable_reason(d); !why.empty())
    bad(s.path(), v, "training.device: " + tc->device + ", but " + why);
}

// training.lr_schedule: a name, or {type, milestones}.
void read_lr_schedule(const SectionReader& s, TrainingConfig* tc) {
  const YAML::Node l = s["lr_schedule"];
  const auto& choices = lr_schedule_keys().find("type")->choices;
  if (l.IsScalar()) {
    tc->lr_schedule = as_choice(s.path(), l, s.what("lr_schedule"), choices);
    return;
  }
  const SectionReader m(s.path(), l, s.what("lr_schedule"), lr_schedule_keys());
  m.read("type", &tc->lr_schedule);
  if (auto v = m["milestones"]) {
    if (!v.IsSequence()) bad(s.path(), v, "training.lr_schedule.milestones must be a list of steps");
    for (const auto& e : v) tc->lr_steps.push_back(as_int(s.path(), e, "training.lr_schedule.milestones"));
  }
}

}  // namespace

const KeyTable& training_keys() {
  static const KeyTable t{"training", {
      {"data", KeyType::kData, {}, {}, "required", "training samples with labels", &data_source_keys()},
      {"num_samples", KeyType::kInt, {}, at_least(0), "0", "samples trained on (0: all)"},
      {"epochs", KeyType::kInt, {}, at_least(1), "1", "passes over the samples"},
      {"batch_size", KeyType::kInt, {}, at_least(1), "64", "samples per step"},
      {"optimizer", KeyType::kMapping, {}, {}, "{type: sgd}", "the optimizer and its settings", &optimizer_keys()},
      {"lr_schedule", KeyType::kMapping, {}, {}, "cosine", "a schedule name, or {type, milestones}", &lr_schedule_keys()},
      {"freeze_bn_after", KeyType::kInt, {}, {}, "-1", "steps before batch-norm statistics freeze (-1: never)"},
      {"disable_observer_after", KeyType::kInt, {}, {}, "-1", "steps before observers stop (-1: never)"},
      {"seed", KeyType::kInt, {}, {}, "0", "the shuffling seed"},
      {"max_steps", KeyType::kInt, {}, at_least(0), "0", "stop after this many steps (0: the epochs decide)"},
      {"checkpoint", KeyType::kPath, {}, {}, "OUT/qat_checkpoint.pt", "written after every epoch"},
      {"resume", KeyType::kPath, {}, {}, "none", "a checkpoint to continue from"},
      {"device", KeyType::kString, {}, {}, "cpu", "where the training steps run: cpu, cuda or cuda:N"},
  }};
  return t;
}

void read_training(const SectionReader& s, JobConfig* c) {
  TrainingConfig& tc = c->training;
  read_samples(s, *c, &tc.enabled, &tc.data, &tc.num_samples, &tc.batch_size);
  if (tc.data.labels.empty()) bad(s.path(), s["data"], "training.data.labels is required");
  s.read("epochs", &tc.epochs);
  if (const YAML::Node o = s["optimizer"]) {
    const SectionReader opt(s.path(), o, s.what("optimizer"), optimizer_keys());
    opt.read("type", &tc.optimizer);
    opt.read("lr", &tc.lr);
    opt.read("momentum", &tc.momentum);
    opt.read("weight_decay", &tc.weight_decay);
  }
  if (s["lr_schedule"]) read_lr_schedule(s, &tc);
  s.read("freeze_bn_after", &tc.freeze_bn_after);
  s.read("disable_observer_after", &tc.disable_observer_after);
  s.read("seed", &tc.seed);
  s.read("max_steps", &tc.max_steps);
  s.read("checkpoint", &tc.checkpoint);
  s.read("resume", &tc.resume);
  if (s["device"]) read_training_device(s, &tc);
}

}  // namespace qfx::quant::sections
