#include "tessera/model/op_trace.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/comm/comm_monitor.h"
#include "tessera/comm/communicator.h"
#include "tessera/comm/trace_backend.h"
#include "tessera/core/error.h"
#include "tessera/kernels/trace_backend.h"
#include "tessera/model/activations.h"
#include "tessera/model/gpt.h"

namespace tessera {

namespace {

// Where the traced buffers seem to live: regions of 2^44 bytes of the user
// address space that nothing maps (x86-64 and AArch64 user space reaches
// 2^47), each larger than the largest model's buffer of its kind (a 1T
// model's fp32 weights are 4e12 bytes, under 2^42). The tracing backends
// never dereference them; the recorder reads back from an address which
// region, and so which kind of buffer, a call touches.
enum class Region : uintptr_t {
  None = 0, Acts = 1, Weights = 2, Grads = 3, WorkingCopy = 4, LowpScratch = 5
};
constexpr int kRegionBits = 44;
template <typename T>
T* unmapped(Region r) {
  return reinterpret_cast<T*>(uintptr_t(r) << kRegionBits);
}
Region region_of(const void* p) {
  const uintptr_t r = reinterpret_cast<uintptr_t>(p) >> kRegionBits;
  return r >= 1 && r <= 5 ? Region(r) : Region::None;
}
// The element of its region's buffer an address is (fp32, or 16-bit in the
// working copy and the casts' scratch).
int64_t element_of(const void* p) {
  const uintptr_t bytes = reinterpret_cast<uintptr_t>(p) & ((uintptr_t(1) << kRegionBits) - 1);
  const Region r = region_of(p);
  return int64_t(bytes / (r == Region::WorkingCopy || r == Region::LowpScratch ? 2 : 4));
}

// Receives the traced calls and files them: into the section (embedding,
// layer, head) and phase the hooks say the run is in, under the profile
// kind Ops opened for the call.
class Recorder : public LayerHooks {
 public:
  Recorder(OpList& out, const ParamLayout& layout) : out_(out), layout_(layout) {}

  Profile profile;  // the micro-batch's: its open kind is each call's

  // The loss statistics: reduced over tp inside the activation arena, but
  // no activations (OpEntry::activation).
  void set_statistics(const void* ce_lse, const void* ce_sums) { ce_lse_ = ce_lse, ce_sums_ = ce_sums; }

  void kernel(const kernels::KernelCall& k) {
    TESSERA_CHECK(profile.open != Op::kCount,
                  "op trace: kernel {} was called outside kernels::Ops (no profile kind)", k.kernel);
    OpEntry e = op_entry_of(k);
    e.phase = phase_;
    e.op = profile.open;
    e.what = label_of(k.key);
    section_->push_back(e);
  }

  void collective(const comm::TracedCall& c) {
    OpEntry e;
    e.phase = phase_;
    e.cls = OpClass::Collective;
    e.op = Op::Comm;
    // A layer's tp group only reduces and gathers (OpEntry::collective).
    TESSERA_CHECK(c.op == comm::CommOp::AllReduce || c.op == comm::CommOp::AllGather ||
                      c.op == comm::CommOp::ReduceScatter,
                  "op trace: a transformer layer issued a {} on its tensor-parallel group",
                  comm::comm_op_name(c.op));
    e.collective = c.op;
    e.kernel = comm::comm_op_name(c.op).data();  // a literal's view: NUL-terminated
    e.dtype = c.dtype;
    e.group_size = c.group_size;
    e.bytes = double(c.bytes);
    e.elements = int64_t(c.bytes / dtype_size(c.dtype));
    e.activation = region_of(c.data) == Region::Acts && c.data != ce_lse_ && c.data != ce_sums_;
    section_->push_back(e);
  }

  // ---- LayerHooks: the one layer's boundaries ----
  void before_forward(size_t) override { enter(out_.layer, OpPhase::Forward); }
  void after_forward(size_t) override { enter(out_.head, OpPhase::Forward); }
  void before_backward(size_t) override { enter(out_.layer, OpPhase::Recompute); }
  void after_recompute(size_t) override { enter(out_.layer, OpPhase::Backward); }
  void after_backward(size_t) override { enter(out_.embed, OpPhase::Backward); }
  void enter(std::vector<OpEntry>& section, OpPhase phase) { section_ = &section, phase_ = phase; }

 private:
  // The parameter a call reads, by the name the layout gives it without
  // its layer and kind: "attn.qkv", "mlp.proj", "ln_1", "ln_f", "wte", ...
  const char* label_of(const void* key) {
    const Region r = region_of(key);
    if (r != Region::Weights && r != Region::Grads && r != Region::WorkingCopy) return "";
    const int64_t off = element_of(key);
    for (const ParamEntry& p : layout_.entries())
      if (off >= p.offset && off < p.offset + p.numel()) return short_name(p.name);
    return "";
  }
  // Interned for the program's life: an OpEntry outlives the trace.
  static const char* short_name(const std::string& name) {
    std::string s = name;
    if (s.rfind("h.", 0) == 0) s = s.substr(s.find('.', 2) + 1);  // "h.0.attn.qkv.weight"
    for (const std::string_view suffix : {".weight", ".bias"})
      if (s.size() > suffix.size() && s.ends_with(suffix)) s.resize(s.size() - suffix.size());
    static std::mutex mutex;
    static std::set<std::string> names;  // a few dozen at most
    const std::lock_guard<std::mutex> lock(mutex);
    return names.insert(std::move(s)).first->c_str();
  }

  OpList& out_;
  const ParamLayout& layout_;
  std::vector<OpEntry>* section_ = &out_.embed;
  OpPhase phase_ = OpPhase::Forward;
  const void* ce_lse_ = nullptr;
  const void* ce_sums_ = nullptr;
};

}  // namespace

OpList trace_op_list(const OpListConfig& c) {
  GPTConfig m = c.model;
  m.num_layers = 1;  // one layer is every layer
  // The model reads the per-token losses and targets on the host (the mean
  // loss, the vocab-parallel target check), so those two are real: bound
  // them (256 MiB each) far above any micro-batch a run trains on.
  constexpr int64_t kMaxTokens = int64_t(1) << 26;
  TESSERA_CHECK(c.micro_batch > 0 && m.seq_length > 0 && c.micro_batch <= kMaxTokens &&
                    m.seq_length <= kMaxTokens / c.micro_batch,
                "op trace: a micro-batch of {} x {} tokens is more than the planner traces ({})",
                c.micro_batch, m.seq_length, kMaxTokens);
  const int64_t N = c.micro_batch * m.seq_length;
  ParallelConfig par;
  par.tp = c.tp;
  par.sequence_parallel = c.sequence_parallel;
  par.micro_batch = c.micro_batch;
  par.recompute = c.recompute;
  const ParamLayout layout = ParamLayout::build(m, par, /*tp_rank=*/0, /*pp_rank=*/0);

  OpList out;
  Recorder rec(out, layout);
  comm::Communicator group(
      std::make_unique<comm::TraceBackend>(
          0, int(c.tp), [&rec](const comm::TracedCall& call) { rec.collective(call); }),
      "tp", std::make_shared<comm::CommMonitor>(0, size_t(64), nullptr));
  kernels::TraceBackend backend([&rec](const kernels::KernelCall& k) { rec.kernel(k); });

  GPT gpt(m, layout,
          {.own_params = false,
           .own_grads = false,
           .tp = TensorParallel{c.tp > 1 ? &group : nullptr, c.sequence_parallel},
           .precision = c.precision,
           .recompute = c.recompute,
           .backend = &backend});
  gpt.place_lowp_scratch(unmapped<uint16_t>(Region::LowpScratch));
  for (const ParamUnit& u : layout.units())
    gpt.bind_unit(u, unmapped<float>(Region::Weights) + u.begin,
                  unmapped<float>(Region::Grads) + u.begin,
                  unmapped<uint16_t>(Region::WorkingCopy) + u.begin);

  Activations acts;
  const ActShape s = gpt.act_shape(c.micro_batch, m.seq_length);
  activations_place(acts, s, unmapped<char>(Region::Acts));
  // The per-token losses are read back by the model (their mean): real.
  std::vector<float> losses(static_cast<size_t>(N));  // (B, T)
  acts.losses = losses.data();
  rec.set_statistics(acts.ce_lse, acts.ce_sums);
  acts.profile = &rec.profile;
  acts.dropout.training = c.training;
  std::vector<int32_t> tokens(static_cast<size_t>(N), 0);  // (B, T) inputs and targets: token 0

  gpt.forward(acts, tokens.data(), tokens.data(), &rec);
  rec.enter(out.head, OpPhase::Backward);
  gpt.backward(acts, tokens.data(), tokens.data(), 1.0f, &rec);
  return out;
}

}  // namespace tessera
