// TraceBackend: a kernel backend that writes down each call it receives,
// with the cost the call's declaration states (backend.h). Alone it
// computes nothing: the op trace (model/op_trace.h) runs the engine on it
// with buffers at addresses nothing is mapped at, which it never reads or
// writes. Over an `inner` backend it records and then runs each call there,
// so a test can watch what a real run executed (tests/common/op_recorder.h);
// with a timer too, it hands each call's wall time on the inner backend to
// the timer, which is how calibration measures the engine's own kernels
// where a training step runs them (plan/kernel_rates.h).
#pragma once
#include <functional>

#include "tessera/core/timer.h"
#include "tessera/kernels/backend.h"
#include "tessera/kernels/kernel_call.h"

namespace tessera::kernels {

// One Backend call's parts (a fused kernel's all together: they run as one)
// and the seconds it took on the inner backend.
using CallTimer = std::function<void(const KernelCalls& calls, double seconds)>;

class TraceBackend final : public Backend {
 public:
  // sink: receives each call (a fused kernel as its parts) in call order.
  // inner: null, or the backend each call then runs on (it must outlive this).
  // timer: with an inner backend, receives each call again once it has run there.
  explicit TraceBackend(KernelSink sink, const Backend* inner = nullptr, CallTimer timer = {})
      : sink_(std::move(sink)), inner_(inner), timer_(std::move(timer)) {}
  const char* name() const override { return inner_ ? inner_->name() : "trace"; }

  void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int64_t N,
                      int64_t C, int64_t OC) const override;
  void matmul_backward(float* dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp,
                       ConstAct weight, int64_t N, int64_t C, int64_t OC, bool accumulate_dinp,
                       bool accumulate_dweight) const override;
  void cast(Act out, ConstAct in, int64_t n) const override;
  void fill(Act x, float value, int64_t n) const override;
  void accumulate(float* y, ConstAct x, int64_t n) const override;
  void bias_add(float* out, const float* bias, int64_t N, int64_t C,
                float* gelu_out) const override;
  void layernorm_forward(Act out, float* mean, float* rstd, const float* inp, float* res,
                         const float* weight, const float* bias, int64_t N,
                         int64_t C) const override;
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int64_t N, int64_t C) const override;
  void rmsnorm_forward(Act out, float* rstd, const float* inp, const float* weight, int64_t N,
                       int64_t C, float eps) const override;
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                        const float* weight, const float* rstd, int64_t N,
                        int64_t C) const override;
  void attention_forward(Act out, float* lse, ConstAct qkv, int64_t B, int64_t T,
                         const AttentionHeads& heads, const DropoutSite* drop) const override;
  void attention_backward(Act dqkv, const float* dout, ConstAct qkv, ConstAct out,
                          const float* lse, int64_t B, int64_t T, const AttentionHeads& heads,
                          const DropoutSite* drop) const override;
  void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                        int64_t len, const AttentionHeads& heads) const override;
  void rope_rows(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t HS, int64_t pos0,
                 float base) const override;
  void gelu_forward(Act out, ConstAct inp, int64_t n) const override;
  void gelu_backward(Act dinp, ConstAct inp, const float* dout, int64_t n) const override;
  void swiglu_forward(Act out, ConstAct inp, int64_t N, int64_t F) const override;
  void swiglu_backward(Act dinp, ConstAct inp, const float* dout, int64_t N,
                       int64_t F) const override;
  void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                    const DropoutSite& site) const override;
  void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                               int64_t C, int64_t vocab_begin, int64_t vocab_end) const override;
  void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                                int64_t C, int64_t vocab_begin,
                                int64_t vocab_end) const override;
  void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T, int64_t C,
                                  int64_t pos0) const override;
  void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                   int64_t C) const override;
  void cross_entropy_forward(float* losses, float* lse, const float* logits,
                             const int32_t* targets, int64_t N, int64_t V) const override;
  void cross_entropy_backward(Act dlogits, const float* logits, const float* lse,
                              const int32_t* targets, float dloss, int64_t N, int64_t V,
                              int64_t vocab_begin) const override;
  void vp_xent_local_max(float* row_max, const float* logits, int64_t N,
                         int64_t V) const override;
  void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                          const int32_t* targets, int64_t N, int64_t V,
                          int64_t vocab_begin) const override;
  void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                      const int32_t* targets, int64_t N) const override;
  void adamw_update(float* params, float* grads, float* m, float* v, int64_t n,
                    const AdamWArgs& args, Act working) const override;
  // Alone: records the pass and returns 0 (there are no values to square).
  double sum_squares(const float* x, int64_t n) const override;

 private:
  // Lives for the rest of one method: the inner backend's call ends before
  // it does, and its destructor hands the call's time to the timer.
  class Timed {
   public:
    Timed(const TraceBackend& owner, const KernelCalls& calls) : owner_(owner), calls_(calls) {}
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;
    ~Timed() {
      if (owner_.timer_ && owner_.inner_) owner_.timer_(calls_, clock_.elapsed());
    }

   private:
    const TraceBackend& owner_;
    KernelCalls calls_;
    Stopwatch clock_;  // started last: after the sink has had the call
  };
  // Hands each part to the sink with the parameter it reads (if any); what
  // it returns times the rest of the calling method.
  [[nodiscard]] Timed record(const KernelCalls& calls, const void* key = nullptr) const;
  KernelSink sink_;
  const Backend* inner_;
  CallTimer timer_;
};

}  // namespace tessera::kernels
