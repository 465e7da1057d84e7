// The conjugate communication pairs of tensor parallelism, written once.
#include "tessera/model/tensor_parallel.h"

#include <span>

#include "tessera/core/error.h"

namespace tessera {

const float* tp_enter_forward(const TensorParallel& tp, const float* x, float* full, int64_t N,
                              int64_t C, Profile* prof) {
  if (!tp.sp()) return x;  // every rank already holds all N rows
  ProfileScope t(prof, Op::Comm);
  const int64_t shard = N / tp.size() * C;
  tp.group->all_gather(std::span<const float>(x, size_t(shard)),
                       std::span<float>(full, size_t(N * C)));
  return full;
}

kernels::ConstAct tp_enter_forward(const TensorParallel& tp, kernels::ConstAct x, float* full,
                                   int64_t N, int64_t C, Profile* prof) {
  if (!x.lowp()) return tp_enter_forward(tp, x.f32(), full, N, C, prof);
  if (!tp.sp()) return x;
  ProfileScope t(prof, Op::Comm);
  // 16-bit words: the gather moves them without looking at the values, so
  // Precision::Bf16 stands for fp16 too (the same size in the log's bytes).
  const int64_t shard = N / tp.size() * C;
  uint16_t* gathered = reinterpret_cast<uint16_t*>(full);  // (N, C) 16-bit, in full's first half
  tp.group->all_gather(x.u16(), gathered, size_t(shard), Precision::Bf16);
  return kernels::ConstAct(gathered, x.dtype);
}

float* tp_enter_backward(const TensorParallel& tp, float* dfull, int64_t N, int64_t C,
                         Profile* prof) {
  if (!tp.active()) return dfull;
  ProfileScope t(prof, Op::Comm);
  if (!tp.sp()) {
    tp.group->all_reduce(std::span<float>(dfull, size_t(N * C)));
    return dfull;
  }
  const int64_t shard = N / tp.size() * C;
  float* mine = dfull + tp.rank() * shard;  // in place: the rank's own block of the input
  tp.group->reduce_scatter(std::span<const float>(dfull, size_t(N * C)),
                           std::span<float>(mine, size_t(shard)));
  return mine;
}

void tp_leave_forward(const TensorParallel& tp, float* partial, float* y, int64_t N, int64_t C,
                      Profile* prof) {
  ProfileScope t(prof, Op::Comm);
  if (!tp.sp()) {
    TESSERA_CHECK(y == partial, "tp_leave_forward: without SP the sum is taken in place");
    if (tp.active()) tp.group->all_reduce(std::span<float>(partial, size_t(N * C)));
    return;
  }
  const int64_t shard = N / tp.size() * C;
  tp.group->reduce_scatter(std::span<const float>(partial, size_t(N * C)),
                           std::span<float>(y, size_t(shard)));
}

const float* tp_leave_backward(const TensorParallel& tp, const float* dy, float* full, int64_t N,
                               int64_t C, Profile* prof) {
  return tp_enter_forward(tp, dy, full, N, C, prof);  // the same all-gather, the conjugate role
}

void tp_sum_region_grad(const TensorParallel& tp, float* grad, int64_t n, Profile* prof) {
  if (tp.sp()) tp_all_reduce(tp, grad, n, comm::ReduceOp::Sum, prof);
}

void tp_all_reduce(const TensorParallel& tp, float* x, int64_t n, comm::ReduceOp op,
                   Profile* prof) {
  if (!tp.active()) return;
  ProfileScope t(prof, Op::Comm);
  tp.group->all_reduce(std::span<float>(x, size_t(n)), op);
}

TpCommElements tp_comm_elements_per_microbatch(const GPTConfig& m, int64_t B, int64_t T,
                                               int64_t tp, bool sp, int64_t layers,
                                               bool embedding, bool head) {
  TpCommElements e;
  if (tp <= 1) return e;
  const int64_t L = layers < 0 ? m.num_layers : layers;
  const int64_t N = B * T, C = m.hidden_size, NC = N * C;
  const int64_t loss_stats = N + 2 * N;  // row max, then (sum-exp, target logit)
  if (!sp) {
    e.all_reduce = L * 4 * NC + (embedding ? NC : 0) + (head ? NC + loss_stats : 0);
    return e;
  }
  e.all_gather = L * 6 * NC + (embedding ? NC : 0) + (head ? 2 * NC : 0);
  e.reduce_scatter = L * 4 * NC + (embedding ? NC : 0) + (head ? NC : 0);
  e.all_reduce = L * 4 * C + (head ? 2 * C + loss_stats : 0);
  return e;
}

}  // namespace tessera
