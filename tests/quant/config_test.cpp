// YAML config loading: the tracer section, and file:line:column errors.
#include <gtest/gtest.h>

#include "../common/scratch_dir.h"

#include <filesystem>
#include <fstream>

#include "qfx/error.h"
#include "qfx/quant/backend_config.h"
#include "qfx/quant/config.h"
#include "qfx/quant/job_config.h"

using qfx::quant::load_tracer_config;

namespace {
std::string write(const std::string& name, const std::string& text) {
  const std::string path = qfx::test::scratch_path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    load_tracer_config(path);
  } catch (const qfx::ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(TracerConfig, ReadsWrapAndOptions) {
  auto p = write("good.yaml",
                 "model: {path: m.pt}\n"
                 "tracer:\n"
                 "  wrap: [\"_post_process\", \"module_type:DecodeHead\", \"aten::argmax\"]\n"
                 "  use_model_annotations: false\n"
                 "  max_unroll: 16\n");
  auto cfg = load_tracer_config(p);
  ASSERT_EQ(cfg.options.wrap.size(), 3u);
  EXPECT_EQ(cfg.options.wrap[0].kind, qfx::fx::WrapSpec::Kind::kAny);
  EXPECT_EQ(cfg.options.wrap[1].kind, qfx::fx::WrapSpec::Kind::kModuleType);
  EXPECT_EQ(cfg.options.wrap[1].name, "DecodeHead");
  EXPECT_EQ(cfg.options.wrap[2].kind, qfx::fx::WrapSpec::Kind::kFunction);
  EXPECT_FALSE(cfg.options.use_model_annotations);
  EXPECT_EQ(cfg.options.max_unroll, 16);
}

TEST(TracerConfig, EmptyFileGivesDefaults) {
  auto cfg = load_tracer_config(write("empty.yaml", ""));
  EXPECT_TRUE(cfg.options.wrap.empty());
  EXPECT_TRUE(cfg.options.use_model_annotations);
}

TEST(TracerConfig, UnknownKeysNameFileLineColumn) {
  EXPECT_EQ(error_of(write("k1.yaml", "tracer:\n  wrap: []\n  wrapp: []\n")),
            qfx::test::scratch_path() + "/k1.yaml:3:3: unknown key 'wrapp' in tracer (known: max_unroll, use_model_annotations, wrap); did you mean 'wrap'?");
  EXPECT_NE(error_of(write("k2.yaml", "modle: x\n")).find("k2.yaml:1:1: unknown key 'modle'"), std::string::npos);
}

TEST(TracerConfig, WrongTypesAndValues) {
  EXPECT_NE(error_of(write("t1.yaml", "tracer:\n  wrap: _post_process\n")).find("t1.yaml:2:9: tracer.wrap must be a list"),
            std::string::npos);
  EXPECT_NE(error_of(write("t2.yaml", "tracer:\n  wrap: [[a]]\n")).find("t2.yaml:2:10: tracer.wrap entries must be strings"),
            std::string::npos);
  EXPECT_NE(error_of(write("t3.yaml", "tracer:\n  use_model_annotations: maybe\n")).find("t3.yaml:2:26: tracer.use_model_annotations must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(write("t4.yaml", "tracer:\n  max_unroll: 0\n")).find("t4.yaml:2:15: tracer.max_unroll must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of(write("t5.yaml", "tracer:\n  wrap: [\"klass:X\"]\n")).find("t5.yaml:2:10: wrap entry 'klass:X': unknown kind"),
            std::string::npos);
  EXPECT_NE(error_of(write("t6.yaml", "tracer: [1, 2]\n")).find("t6.yaml:1:9: 'tracer' must be a mapping"), std::string::npos);
}

TEST(TracerConfig, SyntaxErrorAndMissingFile) {
  EXPECT_NE(error_of(write("s.yaml", "tracer:\n  wrap: [a, b\n")).find("s.yaml:3:1: YAML syntax error"), std::string::npos);
  EXPECT_THROW(load_tracer_config("/nonexistent/config.yaml"), qfx::IoError);
}

// Inputs the YAML fuzzer found (tests/fuzz/regressions/yaml/): as a job config and
// as a backend file, each loads or fails with a qfx::Error, never another exception.
TEST(FuzzRegressions, YamlInputsFailCleanly) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(QFX_SOURCE_DIR) + "/tests/fuzz/regressions/yaml")) {
    ++files;
    for (int as_backend = 0; as_backend < 2; ++as_backend) {
      try {
        if (as_backend) qfx::quant::BackendConfig::load(e.path().string());
        else qfx::quant::load_job_config(e.path().string());
      } catch (const qfx::Error& err) {
        EXPECT_NE(std::string(err.what()).find(e.path().filename().string()), std::string::npos) << err.what();
        EXPECT_EQ(err.exit_code(), 3) << err.what();  // ConfigError, as the README's error table says
      } catch (const std::exception& other) {
        ADD_FAILURE() << e.path() << (as_backend ? " as a backend file" : " as a job config") << ": " << other.what();
      }
    }
  }
  EXPECT_GE(files, 1);
}

// The `ptq:` section: the shipped 4-bit presets load with their algorithms, and
// bad values are ConfigErrors at file:line:column naming the key.
TEST(PtqSection, PresetsAndErrors) {
  for (const char* preset : {"w4_per_tensor", "w4_per_channel"}) {
    const auto c = qfx::quant::load_job_config(std::string(QFX_SOURCE_DIR) + "/configs/ptq/" + preset + ".yaml");
    EXPECT_TRUE(c.ptq.adaround) << preset;
    EXPECT_TRUE(c.ptq.bias_correction) << preset;
    EXPECT_FALSE(c.ptq.cross_layer_equalization) << preset;
    EXPECT_EQ(c.ptq.adaround_options.iterations, 1000) << preset;
  }
  const std::string base = std::string(QFX_SOURCE_DIR) + "/configs/ptq/default.yaml";
  const auto c = qfx::quant::load_job_config(base, {"ptq.adaround={iterations: 50, beta: [10, 1], warmup: 0.1}",
                                                    "ptq.cross_layer_equalization=true", "ptq.bias_correction={num_samples: 64}"});
  EXPECT_TRUE(c.ptq.adaround && c.ptq.cross_layer_equalization && c.ptq.bias_correction);
  EXPECT_EQ(c.ptq.adaround_options.iterations, 50);
  EXPECT_EQ(c.ptq.adaround_options.beta_start, 10);
  EXPECT_EQ(c.ptq.adaround_options.beta_end, 1);
  EXPECT_EQ(c.ptq.bias_correction_samples, 64);
  EXPECT_FALSE(qfx::quant::load_job_config(base).ptq.adaround);
  auto error = [&](const std::string& o) {
    try {
      qfx::quant::load_job_config(base, {o});
    } catch (const qfx::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("ptq.adaround={iteration: 5}").find("unknown key 'iteration'"), std::string::npos);
  EXPECT_NE(error("ptq.adaround={beta: [1, 2]}").find("ptq.adaround.beta"), std::string::npos);
  EXPECT_NE(error("ptq.adaround={warmup: 1.5}").find("ptq.adaround.warmup"), std::string::npos);
  // ptq.auto_fallback: top1 needs labels for the held-out samples; candidates are int16 and float.
  EXPECT_NE(error("ptq.auto_fallback=true").find("ptq.auto_fallback.metric top1 needs labels"), std::string::npos);
  EXPECT_NE(error("ptq.auto_fallback={metric: sqnr, candidates: [int4]}").find("ptq.auto_fallback.candidates"), std::string::npos);
  EXPECT_NE(error("ptq.auto_fallback={metric: top5}").find("ptq.auto_fallback.metric"), std::string::npos);
  EXPECT_NE(error("ptq.auto_fallback={metric: sqnr, tolerence: 1}").find("unknown key 'tolerence'"), std::string::npos);
  {
    const auto a = qfx::quant::load_job_config(base, {"ptq.auto_fallback={metric: sqnr, min_sqnr_db: 25, max_layers: 2, num_samples: 300}"});
    EXPECT_TRUE(a.ptq.auto_fallback);
    EXPECT_EQ(a.ptq.auto_fallback_options.metric, "sqnr");
    EXPECT_EQ(a.ptq.auto_fallback_options.min_sqnr_db, 25);
    EXPECT_EQ(a.ptq.auto_fallback_options.max_layers, 2);
    EXPECT_EQ(a.ptq.auto_fallback_samples, 300);
    const auto t = qfx::quant::load_job_config(base, {"calibration.data.labels=/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
                                                      "ptq.auto_fallback={tolerance: 0.2}"});
    EXPECT_EQ(t.ptq.auto_fallback_options.tolerance, 0.2);
    // The reproduction config: module_name null entries, no auto_fallback, absolute paths.
    const std::string y = qfx::quant::final_config_yaml(t, {"layer1.0.conv1", "fc"}, {}, "header line");
    EXPECT_EQ(y.rfind("# header line\n", 0), 0u) << y;
    const std::string f = qfx::test::scratch_path() + "/final_config.yaml";
    { std::ofstream(f) << y; }
    const auto r = qfx::quant::load_job_config(f);
    EXPECT_FALSE(r.ptq.auto_fallback);
    EXPECT_EQ(r.model.path, t.model.path);
    EXPECT_EQ(r.calibration.data.labels, t.calibration.data.labels);
    std::string by;
    EXPECT_EQ(r.qconfig.resolve("layer1.0.conv1", "Conv2d", &by), nullptr);
    EXPECT_EQ(by, "module_name:layer1.0.conv1");
    EXPECT_EQ(r.qconfig.resolve("fc", "Linear"), nullptr);
    EXPECT_NE(r.qconfig.resolve("layer1.0.conv2", "Conv2d"), nullptr);
  }
  EXPECT_TRUE(qfx::quant::load_job_config(base, {"ptq.sensitivity={num_samples: 32}"}).ptq.sensitivity);
  EXPECT_NE(error("ptq.smoothquant={alpha: 1.5}").find("ptq.smoothquant.alpha"), std::string::npos);
  EXPECT_TRUE(qfx::quant::load_job_config(base, {"ptq.smoothquant={alpha: 0.7}"}).ptq.smoothquant);
  EXPECT_NE(error("ptq.bias_correction=maybe").find("ptq.bias_correction"), std::string::npos);
  // ptq.range_search: true takes every algorithm; a list picks (kl is entropy); bad names are named.
  {
    using qfx::quant::Algorithm;
    const auto on = qfx::quant::load_job_config(base, {"ptq.range_search=true"});
    EXPECT_TRUE(on.ptq.range_search);
    EXPECT_EQ(on.ptq.range_search_options.candidates.size(), 5u);
    const auto r = qfx::quant::load_job_config(base, {"ptq.range_search={candidates: [percentile, kl], num_samples: 16}"});
    EXPECT_TRUE(r.ptq.range_search);
    EXPECT_EQ(r.ptq.range_search_options.candidates, (std::vector<Algorithm>{Algorithm::kPercentile, Algorithm::kEntropy}));
    EXPECT_EQ(r.ptq.range_search_options.num_samples, 16);
    EXPECT_FALSE(qfx::quant::load_job_config(base).ptq.range_search);
  }
  EXPECT_NE(error("ptq.range_search={candidates: [median]}").find("ptq.range_search.candidates"), std::string::npos);
  EXPECT_NE(error("ptq.range_search={candidates: []}").find("ptq.range_search.candidates must be a list"), std::string::npos);
  EXPECT_NE(error("ptq.range_search={num_samples: 0}").find("ptq.range_search.num_samples"), std::string::npos);
  EXPECT_NE(error("ptq.range_search={sample: 3}").find("unknown key 'sample'"), std::string::npos);
}

// One rule for relative paths: relative to the config file's folder when written in
// the file (output.dir and checkpoints included), to the current directory when
// given with --set; without output.dir the outputs go to the current directory.
// An error in a --set value names the override, not a place in the config file (the
// value and its key were never in the file); errors in the file keep file:line:column.
TEST(JobConfig, OverrideErrorsNameTheOverride) {
  const std::string base = std::string(QFX_SOURCE_DIR) + "/configs/ptq/default.yaml";
  auto error = [&](const std::string& o) {
    try {
      qfx::quant::load_job_config(base, {"calibration.seed=1", o});
    } catch (const qfx::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("calibration.batch_size=abc").rfind("--set 'calibration.batch_size=abc': calibration.batch_size", 0), 0u)
      << error("calibration.batch_size=abc");
  EXPECT_EQ(error("calibration.nosuch=1").rfind("--set 'calibration.nosuch=1': unknown key 'nosuch'", 0), 0u)
      << error("calibration.nosuch=1");
  EXPECT_EQ(error("calibration.num_samples=.nan").rfind("--set 'calibration.num_samples=.nan': ", 0), 0u);
  EXPECT_EQ(error("ptq.awq={grid: 0}").rfind("--set 'ptq.awq={grid: 0}': ptq.awq.grid must be >= 1", 0), 0u)
      << error("ptq.awq={grid: 0}");
  const std::string bad_file = write("bad_batch.yaml", "model: {path: x.pt, input_shape: [-1, 1, 28, 28]}\n"
                                                       "calibration:\n  data: {format: npy, images: x.npy}\n  batch_size: abc\n");
  std::string in_file;
  try {
    qfx::quant::load_job_config(bad_file);
  } catch (const qfx::ConfigError& e) {
    in_file = e.what();
  }
  EXPECT_NE(in_file.find("bad_batch.yaml:4:15: calibration.batch_size must be an integer"), std::string::npos) << in_file;
}

TEST(JobConfig, RelativePathsAreRelativeToWhereTheyAreWritten) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(qfx::test::scratch_path()) / "relpaths" / "cfg";
  fs::create_directories(dir);
  const std::string file = (dir / "job.yaml").string();
  {
    std::ofstream(file) << "model: {path: m.pt, input_shape: [-1, 3, 8, 8], libraries: [ops/lib.so]}\n"
                           "backend: accel/my.yaml\n"
                           "calibration: {data: {format: npy, images: data/x.npy, labels: data/y.npy}}\n"
                           "training: {data: {format: npy, images: t.npy, labels: l.npy}, checkpoint: ck/c.pt, resume: r.pt}\n"
                           "evaluation: {data: {format: npy, images: e.npy, labels: l.npy}}\n"
                           "output: {dir: out}\n";
  }
  const fs::path cwd = fs::current_path();
  auto in_dir = [&](const char* p) { return (dir / p).string(); };
  auto in_cwd = [&](const char* p) { return (cwd / p).lexically_normal().string(); };
  const auto c = qfx::quant::load_job_config(file);
  EXPECT_EQ(c.model.path, in_dir("m.pt"));
  EXPECT_EQ(c.tracer.options.libraries.at(0), in_dir("ops/lib.so"));
  EXPECT_EQ(c.backend, in_dir("accel/my.yaml"));
  EXPECT_EQ(c.calibration.data.images, in_dir("data/x.npy"));
  EXPECT_EQ(c.calibration.data.labels, in_dir("data/y.npy"));
  EXPECT_EQ(c.training.checkpoint, in_dir("ck/c.pt"));
  EXPECT_EQ(c.training.resume, in_dir("r.pt"));
  EXPECT_EQ(c.output.dir, in_dir("out"));
  // The same keys given with --set: relative to the current directory, also inside a mapping.
  const auto o = qfx::quant::load_job_config(
      file, {"model.path=n.pt", "output.dir=res", "calibration.data={format: npy, images: c.npy}", "backend=b.yaml",
             "training.checkpoint=k.pt", "model.libraries=[x/l.so]"});
  EXPECT_EQ(o.model.path, in_cwd("n.pt"));
  EXPECT_EQ(o.output.dir, in_cwd("res"));
  EXPECT_EQ(o.calibration.data.images, in_cwd("c.npy"));
  EXPECT_EQ(o.backend, in_cwd("b.yaml"));
  EXPECT_EQ(o.training.checkpoint, in_cwd("k.pt"));
  EXPECT_EQ(o.tracer.options.libraries.at(0), in_cwd("x/l.so"));
  EXPECT_EQ(o.evaluation.data.images, in_dir("e.npy"));  // not overridden: still the file's
  EXPECT_EQ(qfx::quant::load_job_config(file, {"backend=reference"}).backend, "reference");  // a name, not a path
  // No output.dir: the current directory, named after the job kind.
  EXPECT_EQ(qfx::quant::load_job_config(file, {"output={}"}).output.dir, "qfx_qat_out");
  EXPECT_EQ(qfx::quant::load_job_config(file, {"output={}", "training=null"}).output.dir, "qfx_ptq_out");
}
