// The runtime: loads an ONNX model (float or int8 QDQ) and runs it on one backend.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qfx/runtime/arithmetic.h"
#include "qfx/runtime/registry.h"
#include "qfx/runtime/tensor.h"
#include "qfx/stats/statistic.h"

namespace qfx::runtime {

namespace ir {
struct Graph;
}

/// ONNX Runtime's contrib-op domain. Its QuantizeLinear / DequantizeLinear take
/// int16 and uint16 (standard ONNX has them only from opset 21): qfx exports int16
/// activations with them and runs them as the standard ops.
inline constexpr const char* kMicrosoftDomain = "com.microsoft";

/// Weight bits the onednn backend runs exactly in int8 on this CPU: 8 with
/// VNNI or AMX; 7 otherwise (AVX2 / AVX-512BW multiply u8 x s8 pairs into
/// saturating int16 (vpmaddubsw); with |w| <= 64 no pair can saturate, with 8-bit
/// weights the reference kernels run instead, exact but slower).
int native_int8_weight_bits();

/// Options of Model::load. Throws from load: ConfigError for an unknown backend
/// (naming the registered ones), IoError for a plug-in that does not load.
struct ModelOptions {
  ModelOptions() = default;
  /// `{"reference"}`, `{"onednn", false}`: backend and QDQ matching.
  ModelOptions(std::string backend_name, bool fuse = true) : backend(std::move(backend_name)), fuse_qdq(fuse) {}
  ModelOptions(const char* backend_name, bool fuse = true) : backend(backend_name), fuse_qdq(fuse) {}
  /// A registered runtime backend (see registry.h): "onednn" (oneDNN primitives,
  /// then vectorised kernels, then the reference kernels), "reference" (plain C++
  /// kernels that define the arithmetic), or one a plug-in registers.
  std::string backend = "onednn";
  /// Plug-in shared libraries to load (load_plugin) before the backend is looked up.
  std::vector<std::string> plugins;
  /// Match DequantizeLinear -> op -> QuantizeLinear groups into integer ops
  /// (false: run every op in float, Q/DQ as written).
  bool fuse_qdq = true;
  /// Tensors that must stay observable by `run(inputs, watch, on_value)`: a float
  /// Relu/Clip is not fused into the op producing one of these (the fusion would
  /// hide the pre-activation value), and they are stored in the plain layout, so
  /// watching them costs no conversion from channels last.
  std::vector<std::string> keep_values;
  /// `keep_values` may be stored channels last where their consumers take that
  /// layout (they still stay unfused): the watch callback of `run` then gets such
  /// a value as stored, the channels-last bytes under its logical NCHW shape. For
  /// callers whose statistics ignore element order (per-tensor min/max,
  /// histograms: calibration), this saves the reorders to and from the plain
  /// layout around every convolution.
  bool keep_values_any_layout = false;
  /// Fuse a float Relu / Clip into the op producing its input (false: every float
  /// activation runs as its own op, and `value_names()` lists every value of the
  /// ONNX graph).
  bool fuse_activations = true;
  /// How many input-shape signatures keep their plans (kernels, packed weights,
  /// arena) cached; beyond it the least recently used signature's plans are freed
  /// and rebuilt when that shape comes again. At least 1 (ConfigError otherwise).
  size_t plan_cache_size = 8;
  /// Largest memory plan (the arena of intermediate values for one input shape)
  /// a run may allocate, in bytes; 0: this machine's physical memory. A larger
  /// plan is a DataError naming the input shapes (before allocating).
  uint64_t max_plan_bytes = 0;
  /// The integer arithmetic int8 ops compute with, overriding the model's
  /// `qfx.arithmetic` metadata (an exported model for a custom target carries its
  /// own): `Arithmetic{}` runs any QDQ model with ONNX's float requantization, to
  /// compare a target's arithmetic against it. Throws DataError if invalid.
  std::optional<Arithmetic> arithmetic;
};

/// Time spent in one node's kernel (Model::profile).
struct NodeTime {
  std::string node, op, impl;  ///< node name, op after QDQ matching, the implementation that ran it
  double ms = 0;               ///< milliseconds summed over the profiled runs
};

/// A graph input or output as the model declares it (-1: dynamic dimension).
struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};

/// One rescale of an int8 op under the model's arithmetic (Model::integer_ops).
struct IntegerRescale {
  std::string name;                  ///< "output", "input_a" / "input_b" (add), "input_K" (concat)
  RequantMode mode = RequantMode::kFloat;
  std::vector<float> multiplier;     ///< the float32 multipliers (per channel for conv / gemm)
  /// kFixedPoint: the integer multipliers and exponents (real = M * 2^(shift - (bits-1)));
  /// kShift: multiplier 1 and shift = -k (real = 2^-k).
  std::vector<int32_t> fixed_multiplier;
  std::vector<int> shift;
  int multiplier_bits = 32;
};

/// The integer parameters of one int8 op as it computes under the model's
/// arithmetic: what a vendor compiler needs besides the qparams (encodings.json
/// "integer_ops").
struct IntegerOp {
  std::string node;                   ///< node name (the ONNX node the group was matched from)
  std::string op;                     ///< "QLinearConv", "QGemm", "QLinearAdd", "QLut", "QIntSoftmax", ...
  std::vector<IntegerRescale> rescales;
  /// Pooling: the multiplier listed is input scale / output scale, divided by the
  /// window's element count at run time.
  bool per_window_count = false;
  /// QLut: output codes for input codes lowest..highest (256).
  std::vector<int32_t> table;
  /// Conv / gemm: accumulator width in bits: the target's (32 by default), 64 for
  /// 16x8 layers (int16 input). 0 for other ops.
  int accumulator_bits = 0;
  /// dtype_name of the first input's and the output's codes ("int8", "int16", ...).
  std::string input_dtype, output_dtype;
};

/// What the built-in observer taps collect (see Model::set_taps).
enum class TapKind {
  kMinMax,           ///< per-tensor min and max (stats::MinMax)
  kPerChannelMinMax, ///< min and max per channel, axis 1 (stats::PerChannelMinMax)
  kHistogram,        ///< a histogram (stats::Histogram; see TapOptions)
};

/// Options of a histogram tap: `bins` bins. With hi > lo, a fixed range [lo, hi)
/// (values outside land in the end bins, NaN in bin 0); otherwise (the default) the
/// bins grow with the data as the quantization HistogramObserver's do, the
/// statistics calibration collects (a NaN or Inf value then throws DataError).
struct TapOptions {
  int64_t bins = 2048;
  float lo = 0.0f;
  float hi = 0.0f;
};

/// Statistics of one tapped tensor, accumulated over every `run` since `set_taps`.
struct TapStats {
  float min = 0, max = 0;                 ///< over all elements seen (NaN skipped)
  std::vector<float> channel_min, channel_max;  ///< kPerChannelMinMax, [C]
  std::vector<double> histogram;          ///< kHistogram counts, [bins]
  double histogram_lo = 0, bin_width = 0; ///< kHistogram: the grid's start and bin width
  int64_t count = 0;                      ///< elements seen
};

/// Makes the statistic a tap feeds for one tensor, given its name (Model::set_taps).
using TapFactory = std::function<std::shared_ptr<stats::Statistic>(const std::string& name)>;

/// An ONNX model parsed once (Model::parse): the imported graph (opset, nodes,
/// initializers, the `qfx.arithmetic` metadata), before any backend, QDQ matching or
/// plan. `Model::load(parsed, options)` plans it for any backend and options without
/// reading or parsing the file again: a job that runs its int8 model on its backend,
/// unfused for the fake-quant SQNR and on the reference backend parses it once.
/// Copies share the graph, which nothing changes (each load works on its own copy).
class ParsedModel {
 public:
  /// The file (or the `what` of Model::parse_from_string) it was parsed from.
  const std::string& path() const { return path_; }

 private:
  friend class Model;
  std::shared_ptr<const ir::Graph> graph_;
  std::string path_;
};

/// A loaded ONNX model, ready to run.
///
/// - Load: parses ONNX (opset 13..21), folds Constant/Identity, matches QDQ groups
///   into int8 ops (QLinearConv, QGemm, QLinearMatMul, QLinearAdd, QLinearMul, QLinearAveragePool, QLinearGlobalAveragePool,
///   QLinearConcat, QRelu/QClip, and shape ops on integers); groups that cannot run in
///   int8 stay float and are listed in `float_fallbacks()`. Static input shapes
///   are planned at load.
/// - Plan (per distinct input-shape signature, cached for the
///   `ModelOptions::plan_cache_size` most recently used signatures): kernels are
///   built for the concrete shapes, weights packed, and every intermediate value
///   gets a slot in one arena; values whose lifetimes do not overlap share memory.
/// - Run: thread-safe. Each concurrent run takes a planned context from a pool;
///   in steady state no intermediate tensor is allocated (outputs are returned in
///   their own buffers).
class Model {
 public:
  /// Loads `path`. Throws IoError (missing, truncated, not ONNX),
  /// UnsupportedOpError (opset, custom domain, op or attribute outside the set,
  /// naming the node and op) or DataError (inconsistent shapes).
  static Model load(const std::string& path, const ModelOptions& options = {});
  /// Loads a serialized ONNX ModelProto held in memory (`what` names it in
  /// errors). Same checks and errors as `load`.
  static Model load_from_string(const std::string& bytes, const ModelOptions& options = {},
                                const std::string& what = "<in-memory ONNX>");
  /// Parses `path` into a graph for `load(parsed, options)`. Throws what `load`
  /// throws for the file itself: IoError (missing, truncated, not ONNX),
  /// UnsupportedOpError (opset, custom domain), DataError (tensor types).
  static ParsedModel parse(const std::string& path);
  /// Parses a serialized ONNX ModelProto held in memory (`what` names it in errors).
  static ParsedModel parse_from_string(const std::string& bytes, const std::string& what = "<in-memory ONNX>");
  /// Plans an already parsed model for `options`' backend: the same model, checks
  /// and errors as `load(parsed.path(), options)`, without reading the file.
  static Model load(const ParsedModel& parsed, const ModelOptions& options = {});

  /// Runs the model. `inputs` maps each graph input name to a tensor of the
  /// declared dtype and a shape matching the declared one (dynamic dims free).
  /// Returns the outputs by name. Throws DataError naming the input for a missing
  /// or unknown name, a wrong dtype or rank, or a mismatching static dimension.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) const;

  /// Receives a watched tensor during `run`: its name and its value, which lives
  /// in the run's arena and is valid only until the callback returns (copy it to
  /// keep it). Float tensors arrive as computed; int8 values (after QDQ matching)
  /// as their integer codes.
  using ValueCallback = std::function<void(const std::string& name, const Tensor& value)>;
  /// Runs the model like `run(inputs)` and calls `on_value` for each tensor named
  /// in `watch` (graph inputs or node outputs) as soon as it is computed, in
  /// execution order, on the calling thread. This is how calibration feeds
  /// observers without keeping activations. Throws DataError naming a watched
  /// tensor the model does not compute.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& watch,
                                    const ValueCallback& on_value) const;
  /// How `run` hands a watched value that is stored channels last to its callback.
  enum class WatchLayout {
    kLoaded,    ///< as ModelOptions::keep_values_any_layout said at load
    kPlain,     ///< reordered into the logical (NCHW) layout: element order as ONNX defines it
    kAsStored,  ///< as stored, the channels-last bytes under the logical shape (for statistics that ignore order)
  };
  /// `run(inputs, watch, on_value)` with the layout of the watched values chosen
  /// for this run: one loaded model serves callers that need the plain layout
  /// (per-layer errors) and callers that do not (calibration's per-tensor
  /// statistics). Same errors.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& watch,
                                    const ValueCallback& on_value, WatchLayout layout) const;
  /// Receives a value to replace during `run_replacing`: its name and a tensor in
  /// the logical (NCHW) layout holding the computed value, which the callback may
  /// overwrite (same shape and dtype; valid only until it returns).
  using ValueReplacer = std::function<void(const std::string& name, Tensor& value)>;
  /// Runs the model like `run(inputs, watch, on_value, WatchLayout::kPlain)`, and
  /// right after each node output named in `replace` is computed hands it to
  /// `replacer`; what the replacer leaves in it is what the later nodes, the taps and
  /// the watch callback read. Values folded when the plan was built are constants
  /// and are not handed over. This is teacher forcing: feeding every quantized layer
  /// of a Q/DQ model the float model's values measures each layer's own error apart
  /// from the error it inherits. Throws DataError naming a tensor in `replace` or
  /// `watch` that the model's nodes do not compute (graph inputs included), or one
  /// kept in a device's memory.
  std::map<std::string, Tensor> run_replacing(const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& replace,
                                              const ValueReplacer& replacer, const std::vector<std::string>& watch,
                                              const ValueCallback& on_value) const;
  /// Models loaded in this process so far (every `load` and `load_from_string`,
  /// from a path, bytes or a ParsedModel, whether or not they succeeded): how a
  /// pipeline's tests count the plans it builds.
  static int64_t load_count();
  /// ONNX files and strings parsed in this process so far (`parse`,
  /// `parse_from_string`, and the parse inside `load(path)` / `load_from_string`):
  /// how a pipeline's tests check that it parses each model once.
  static int64_t parse_count();

  /// The graph inputs and outputs.
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  /// One line per QDQ group that stays float, with the reason.
  const std::vector<std::string>& float_fallbacks() const;
  /// Number of int8 ops after QDQ matching, and of ops in total.
  int int8_ops() const;
  int total_ops() const;
  /// The backend's name.
  const std::string& backend() const;
  /// The integer arithmetic the int8 ops compute with (metadata or ModelOptions).
  const Arithmetic& arithmetic() const;
  /// Per int8 op (after QDQ matching), its rescales and tables under arithmetic(),
  /// as the kernels compute them. Throws DataError naming the node where the
  /// arithmetic cannot express a multiplier (kShift with a non-power-of-two).
  std::vector<IntegerOp> integer_ops() const;
  /// Per node of the plan built at load, in execution order: which implementation
  /// runs it and which faster ones declined, with their reasons (`qfx run --explain`).
  /// A model with dynamic height / width that cannot be planned with those as 1 is
  /// planned at its first run: then this is that plan's report (empty before).
  std::vector<KernelChoice> kernel_report() const;
  /// How many nodes of each op run on each implementation in the plan built at
  /// load, nodes folded at plan time left out: {"QLinearConv:onednn": 2, "Add:simd": 1, ...}.
  std::map<std::string, int> kernel_impls() const;
  /// The input-shape signatures whose plans are cached now, most recently used
  /// first ("[1, 3, 224, 224]" per input); at most `ModelOptions::plan_cache_size`.
  std::vector<std::string> cached_plans() const;
  /// Names of the float tensors computed by the model's nodes, in execution order
  /// (what `set_taps` accepts besides the inputs).
  std::vector<std::string> value_names() const;
  /// Multiply-accumulates of one run on inputs of these shapes (in `inputs()`
  /// order), float and int8 layers alike: convolutions count numel(output) x the
  /// weights per output channel (ConvTranspose: numel(input) x the weights per
  /// input channel), Gemm and MatMul numel(output) x the reduced dimension. Plans
  /// the shapes as `run` would. Throws DataError if the shape count differs from
  /// the model's inputs.
  int64_t multiply_accumulates(const std::vector<std::vector<int64_t>>& input_shapes) const;
  /// The model's constant (initializer) named `name`, or nullptr for a computed
  /// value or an unknown name. Valid as long as the model.
  const Tensor* constant(const std::string& name) const;

  /// Collects statistics of the named float tensors (graph inputs or any node
  /// output) on every following `run`, replacing earlier taps: one built-in
  /// statistic of `kind` per tensor. Throws DataError naming an unknown tensor, or
  /// for a fixed-range histogram with bins < 1 or hi <= lo. Safe to call while other
  /// threads run the model: a run uses the taps current when it began, and runs that
  /// began before this call (or before `reset_taps`) add nothing to the new statistics.
  void set_taps(const std::vector<std::string>& names, TapKind kind, TapOptions options = {});
  /// As above, with the statistic of each tensor made by `make` (called once per name
  /// here and again by `reset_taps`): how calibration feeds its observers. A value
  /// stored channels last reaches its statistic as stored (a channels-last
  /// stats::FloatView) or, with `layout` kPlain, reordered into the logical layout
  /// first. An exception a statistic throws ends the run that fed it.
  void set_taps(const std::vector<std::string>& names, const TapFactory& make, WatchLayout layout = WatchLayout::kAsStored);
  /// Removes every tap (runs then observe nothing).
  void clear_taps();
  /// The statistics of the built-in taps collected so far, by tensor name (empty
  /// for taps made by a TapFactory: their maker holds them).
  std::map<std::string, TapStats> taps() const;
  /// Clears the collected statistics (the taps stay; a TapFactory makes them anew).
  void reset_taps();
  /// Times every node's kernel in the runs that begin while `on` (a steady-clock
  /// read per node); turning it on clears what was collected.
  void set_profiling(bool on);
  /// Per node in execution order (nodes folded at plan time left out), the kernel
  /// time summed over the profiled runs, and in `runs` how many runs that was.
  std::vector<NodeTime> profile(int64_t* runs = nullptr) const;

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  static Model from_graph(ir::Graph graph, const ModelOptions& options, const std::string& path);
  std::map<std::string, Tensor> run_impl(const std::map<std::string, Tensor>& inputs, const std::vector<char>* watched,
                                         const ValueCallback* on_value, const std::vector<char>* replaced = nullptr,
                                         const ValueReplacer* replacer = nullptr) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qfx::runtime
