// FakeQuantize: simulated quantization with a straight-through estimator
// (torch.ao.quantization.FakeQuantize), a learnable-scale form (LSQ), and the
// model-wide states of Horizon's plugin (calibration / fake quant / float).
#pragma once

#include <functional>

#include <torch/nn/module.h>

#include <memory>
#include <optional>

#include "qfx/quant/observer.h"
#include "qfx/runtime/arithmetic.h"

namespace qfx::quant {

/// Model-wide quantization state, applied to every FakeQuantize in one call.
enum class QuantState {
  kCalibration,  ///< observers record statistics; values pass through unchanged
  kFakeQuant,    ///< observers record (QAT) and values are fake-quantized
  kFloat,        ///< neither: the float model, for validation
};

/// Observes and/or fake-quantizes the tensors passing through it.
///
/// forward(x), x float of any shape (per-channel: `observer.spec().ch_axis` < x.dim()):
/// - observer enabled: the observer records x (detached);
/// - fake quant enabled: returns `at::fake_quantize_per_tensor_affine` /
///   `per_channel_affine` of x with the current scale/zero_point (STE gradient:
///   1 inside [qmin, qmax] after rounding, 0 outside), or in the learnable form
///   `at::_fake_quantize_learnable_per_*_affine` (LSQ, Esser et al. 2020, "Learned
///   Step Size Quantization"; gradient scale 1/sqrt(numel * quant_max));
/// - otherwise returns x.
/// Scale and zero_point are recomputed from the observer whenever it has seen new
/// data and fake quant needs them (as torch.ao recomputes on every observed
/// forward). A learnable scale is initialised from the observer once, then learnt.
class FakeQuantize : public torch::nn::Module {
 public:
  /// `observer` is registered as the submodule "activation_post_process".
  explicit FakeQuantize(std::shared_ptr<ObserverBase> observer, bool learnable = false);
  at::Tensor forward(const at::Tensor& x);
  /// What `forward` records when the observer is enabled, for a float32 value as a
  /// runtime tap hands it (calibration): the observer observes `v` (for a Softmax
  /// input, max(x, rowmax - kSoftmaxSpan), which needs `v` in the logical layout).
  /// Nothing is fake-quantized. Same errors as `forward`.
  void observe(const stats::FloatView& v);
  /// Turns statistics collection on or off.
  void enable_observer(bool on = true);
  void disable_observer() { enable_observer(false); }
  /// Turns fake quantization on or off.
  void enable_fake_quant(bool on = true);
  void disable_fake_quant() { enable_fake_quant(false); }
  bool observer_enabled() const;
  bool fake_quant_enabled() const;
  /// Applies a model-wide state (see QuantState).
  void set_state(QuantState s);
  /// The current qparams (recomputed from the observer first if it saw new data;
  /// the learnt scale for LSQ). scale: float32 0-dim or [C]; zero_point int32; on
  /// the host, wherever the module is.
  QParams qparams();
  /// Moves scale and zero_point (what the fake-quantize kernels read) to `device`;
  /// the observer's statistics and the enable flags stay on the host, so a forward on
  /// a CUDA tensor reads no flag from the device. Any dtype is ignored.
  using torch::nn::Module::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;
  /// Forces the qparams to be recomputed from the observer now (for a learnable
  /// scale: re-initialises it).
  void calculate_qparams();
  /// The observer.
  ObserverBase& observer() { return *observer_; }
  const ObserverBase& observer() const { return *observer_; }
  std::shared_ptr<ObserverBase> observer_ptr() const { return observer_; }
  /// True for the LSQ form.
  bool learnable() const { return learnable_; }
  /// True if the observer saw data since the qparams were last computed (the
  /// next `qparams()` recomputes them). Saved and restored by save_graph_module.
  bool qparams_stale() const { return stale_; }
  void set_qparams_stale(bool stale) { stale_ = stale; }
  /// Fixes the current qparams (computed from the observer first if stale): the
  /// observer is disabled and stays so through `set_state` / `enable_observer`,
  /// and `qparams()` / `calculate_qparams()` never change them again. For
  /// weight-rounding algorithms (AdaRound) whose integer codes hold only for
  /// these qparams. The flag is the buffer "qparams_frozen" (saved with the
  /// model). Throws ArgumentError for the learnable (LSQ) form.
  void freeze_qparams();
  bool qparams_frozen() const;
  /// Called right after the observer records a tensor in `forward`, before the
  /// qparams are recomputed (data-parallel QAT: distributed::synchronize_observers
  /// all-reduces the observer's range here, so every rank fake-quantizes with the
  /// qparams of the global batch). Empty: none.
  void set_observer_sync(std::function<void(ObserverBase&)> sync) { sync_ = std::move(sync); }
  /// How the simulated quantization rounds ties: kHalfEven (ONNX, torch; the
  /// default) or a target's requantization rounding (BackendConfig::arithmetic;
  /// prepare_fx / prepare_qat_fx set it on activation FakeQuantizes), so that
  /// evaluation and QAT see the chip's rounding: the value is
  /// (clamp(round_r(x / scale) + zp, qmin, qmax) - zp) * scale, the gradient stays
  /// the STE's. Per-tensor non-learnable FakeQuantizes only (others ignore it).
  void set_rounding(runtime::Rounding r) { rounding_ = r; }
  runtime::Rounding rounding() const { return rounding_; }
  /// The entries of a Softmax input that lie more than this below their row's
  /// maximum weigh less than e^-20 (2e-9) of the row's largest: below any 8- or
  /// 16-bit output code.
  static constexpr double kSoftmaxSpan = 20.0;
  /// Marks the observed value as a Softmax input over `dim` (prepare_fx sets it
  /// when every user of the value is a softmax over one dim; nullopt: not one).
  /// The observer then records max(x, rowmax(x, dim) - kSoftmaxSpan) instead of x,
  /// so an additive attention mask (-10000, or the dtype's lowest value, on padded
  /// positions) does not stretch the range the scores share; the masked entries
  /// quantize to the range's minimum and keep a weight below e^-20. The values
  /// fake-quantized are x itself.
  void set_softmax_dim(std::optional<int64_t> dim) { softmax_dim_ = dim; }
  std::optional<int64_t> softmax_dim() const { return softmax_dim_; }

 private:
  /// Records `d` (detached, logical layout) in the observer: for a Softmax input,
  /// max(d, rowmax(d) - kSoftmaxSpan) along softmax_dim().
  void record(const at::Tensor& d);
  /// After an observation: the distributed sync, and qparams marked stale.
  void observed();
  runtime::Rounding rounding_ = runtime::Rounding::kHalfEven;
  std::optional<int64_t> softmax_dim_;
  std::function<void(ObserverBase&)> sync_;
  std::shared_ptr<ObserverBase> observer_;
  bool learnable_;
  at::Tensor scale_;       // buffer (parameter when learnable)
  at::Tensor zero_point_;  // int32 buffer (float when learnable, as the LSQ kernels need)
  at::Tensor observer_enabled_, fake_quant_enabled_, initialized_, frozen_;  // uint8 flags (buffers)
  bool stale_ = true;      // observer saw data since the last qparams computation
};

/// Sets `state` on every FakeQuantize inside `model` (itself included). Returns
/// how many were set.
int set_quant_state(torch::nn::Module& model, QuantState state);
/// Enables/disables the observers of every FakeQuantize in `model`.
void enable_observer(torch::nn::Module& model, bool on = true);
void disable_observer(torch::nn::Module& model);
/// Enables/disables fake quantization in every FakeQuantize in `model`.
void enable_fake_quant(torch::nn::Module& model, bool on = true);
void disable_fake_quant(torch::nn::Module& model);

}  // namespace qfx::quant
