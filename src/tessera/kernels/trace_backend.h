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

  // Each kernel of backend_methods.inc: record its cost, then run it on the
  // inner backend if there is one (alone, sum_squares returns 0).
#define TESSERA_BACKEND_METHOD(Ret, name, params, args, key, ...) Ret name params const override;
#include "tessera/kernels/backend_methods.inc"
#undef TESSERA_BACKEND_METHOD

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
