#include "tessera/model/context_parallel.h"

#include <limits>
#include <utility>

#include "tessera/core/error.h"

namespace tessera {

namespace {

// Message tags of the ring: the K/V blocks and their gradient accumulators
// travel between the same neighbours at once, so they are told apart.
constexpr int kTagKv = 361;
constexpr int kTagDkv = 362;

// Waits on a transfer; the time spent waiting is the ring's exposed
// communication (what the block's attention did not hide), charged to Comm.
void wait_exposed(comm::Work& w, Profile* prof) {
  if (w.done()) return;
  ProfileScope t(prof, Op::Comm);
  w.wait();
}

}  // namespace

ContextParallel::ContextParallel(comm::Communicator* group, int64_t T, bool all_gather)
    : group_(group), T_(T), all_gather_(all_gather) {
  const int64_t cp = size();
  TESSERA_CHECK(cp == 1 || T % (2 * cp) == 0,
                "--seq-length {} does not divide into 2 x --context-parallel-size {} chunks", T,
                cp);
  pos_.assign(size_t(cp), {});
  for (int64_t r = 0; r < cp; ++r) pos_[size_t(r)] = ContextChunks{T, cp, r}.positions();
}

const float* ContextParallel::wide(const kernels::Ops& ops, std::vector<float>& buf,
                                   kernels::ConstAct x, int64_t n) const {
  if (!x.lowp()) return x.f32();
  TESSERA_CHECK(buf.size() == size_t(n), "context parallel: widened scratch not sized");
  ops.cast(kernels::Act(buf.data()), x, n);
  return buf.data();
}

void ContextParallel::attention_forward(const kernels::Ops& ops, kernels::Act out, float* lse,
                                        kernels::ConstAct qkv, int64_t B,
                                        const AttentionHeads& heads,
                                        const DropoutSite* drop) const {
  const int64_t cp = size(), r = rank(), Tl = local_T();
  const int64_t n = B * Tl * 2 * heads.kv_width();  // elements of one K/V block
  const int64_t no = B * Tl * heads.q_width();      // elements of out
  size_scratch(B, heads, qkv.lowp());
  const float* q = wide(ops, q32_, qkv, B * Tl * heads.qkv_width());  // (B, Tl, W) fp32
  float* o = out.lowp() ? out32_.data() : out.f32();  // (B, Tl, NH HS)
  ops.fill(kernels::Act(o), 0.0f, no, Op::Attention);
  ops.fill(kernels::Act(lse), -std::numeric_limits<float>::infinity(), B * heads.q_heads * Tl,
           Op::Attention);
  Profile* prof = ops.profile();
  const std::vector<int64_t>& qp = positions();
  if (all_gather_) {
    // Every rank's block, in rank order: kv_[1] (cp, B, Tl, 2 KVH HS).
    ops.ring_kv_pack(kv_[0].data(), q, B, Tl, heads);
    {
      ProfileScope t(prof, Op::Comm);
      group_->all_gather(kv_[0].data(), kv_[1].data(), size_t(n), Precision::Fp32);
    }
    for (int64_t src = 0; src < cp; ++src)
      ops.ring_attention_forward_block(o, lse, q, qp.data(), Tl, kv_[1].data() + src * n,
                                       pos_[size_t(src)].data(), Tl, B, T_, heads, drop);
  } else {
    ops.ring_kv_pack(kv_[0].data(), q, B, Tl, heads);
    const int next = int((r + 1) % cp), prev = int((r + cp - 1) % cp);
    for (int64_t i = 0; i < cp; ++i) {
      float* cur = kv_[size_t(i % 2)].data();         // (B, Tl, 2 KVH HS) rank r-i's block
      float* nxt = kv_[size_t((i + 1) % 2)].data();   // the next step's, arriving
      comm::Work sent, got;
      if (i + 1 < cp) {
        // Both only read or fill buffers the merge below does not write.
        sent = group_->send_async(cur, size_t(n), Precision::Fp32, next, kTagKv);
        got = group_->recv_async(nxt, size_t(n), Precision::Fp32, prev, kTagKv);
      }
      const int64_t src = (r - i + cp) % cp;
      ops.ring_attention_forward_block(o, lse, q, qp.data(), Tl, cur, pos_[size_t(src)].data(),
                                       Tl, B, T_, heads, drop);
      wait_exposed(sent, prof);
      wait_exposed(got, prof);
    }
  }
  if (out.lowp()) ops.cast(out, o, no);  // one rounding of the finished rows
}

void ContextParallel::attention_backward(const kernels::Ops& ops, kernels::Act dqkv,
                                         const float* dout, kernels::ConstAct qkv,
                                         kernels::ConstAct out, const float* lse, int64_t B,
                                         const AttentionHeads& heads,
                                         const DropoutSite* drop) const {
  const int64_t cp = size(), r = rank(), Tl = local_T();
  const int64_t n = B * Tl * 2 * heads.kv_width();  // elements of one K/V block
  const int64_t no = B * Tl * heads.q_width();
  size_scratch(B, heads, qkv.lowp());
  const float* q = wide(ops, q32_, qkv, B * Tl * heads.qkv_width());  // (B, Tl, W) fp32
  const float* o = wide(ops, out32_, out, no);                        // (B, Tl, NH HS) fp32
  Profile* prof = ops.profile();
  const std::vector<int64_t>& qp = positions();
  ops.ring_attention_backward_init(D_.data(), dout, o, B, Tl, heads);
  ops.fill(kernels::Act(dq_.data()), 0.0f, no, Op::Attention);
  float* dkv_own = nullptr;  // (B, Tl, 2 KVH HS) the gradient of this rank's own K/V
  if (all_gather_) {
    // dkv_[0] (cp, B, Tl, 2 KVH HS): every block's share from here.
    ops.ring_kv_pack(kv_[0].data(), q, B, Tl, heads);
    {
      ProfileScope t(prof, Op::Comm);
      group_->all_gather(kv_[0].data(), kv_[1].data(), size_t(n), Precision::Fp32);
    }
    ops.fill(kernels::Act(dkv_[0].data()), 0.0f, cp * n, Op::Attention);
    for (int64_t src = 0; src < cp; ++src)
      ops.ring_attention_backward_block(dq_.data(), dkv_[0].data() + src * n, dout, q, lse,
                                        D_.data(), qp.data(), Tl, kv_[1].data() + src * n,
                                        pos_[size_t(src)].data(), Tl, B, T_, heads, drop);
    {
      ProfileScope t(prof, Op::Comm);
      group_->reduce_scatter(dkv_[0].data(), dkv_[1].data(), size_t(n), Precision::Fp32,
                             comm::ReduceOp::Sum);
    }
    dkv_own = dkv_[1].data();
  } else {
    ops.ring_kv_pack(kv_[0].data(), q, B, Tl, heads);
    const int next = int((r + 1) % cp), prev = int((r + cp - 1) % cp);
    // dkv_[0]: this step's block share, then its accumulator, sent on;
    // dkv_[1]: the accumulator still in flight from the previous step;
    // dkv_[2]: the accumulator arriving from rank -1.
    comm::Work acc_sent;
    for (int64_t i = 0; i < cp; ++i) {
      float* cur = kv_[size_t(i % 2)].data();  // (B, Tl, 2 KVH HS) rank r-i's block
      float* nxt = kv_[size_t((i + 1) % 2)].data();
      comm::Work sent, got, acc_got;
      if (i + 1 < cp) {
        sent = group_->send_async(cur, size_t(n), Precision::Fp32, next, kTagKv);
        got = group_->recv_async(nxt, size_t(n), Precision::Fp32, prev, kTagKv);
      }
      // The block's gradient so far, from the ranks that held it before
      // (rank -1 finishes its share of this block as this rank computes).
      if (i > 0)
        acc_got = group_->recv_async(dkv_[2].data(), size_t(n), Precision::Fp32, prev, kTagDkv);
      float* part = dkv_[0].data();
      ops.fill(kernels::Act(part), 0.0f, n, Op::Attention);
      const int64_t src = (r - i + cp) % cp;
      ops.ring_attention_backward_block(dq_.data(), part, dout, q, lse, D_.data(), qp.data(), Tl,
                                        cur, pos_[size_t(src)].data(), Tl, B, T_, heads, drop);
      if (i > 0) {
        wait_exposed(acc_got, prof);
        ops.accumulate(part, dkv_[2].data(), n);
      }
      // Send it on (the last step's hop ends at its owner, rank +1).
      wait_exposed(acc_sent, prof);
      std::swap(dkv_[0], dkv_[1]);
      acc_sent = group_->send_async(dkv_[1].data(), size_t(n), Precision::Fp32, next, kTagDkv);
      wait_exposed(sent, prof);
      wait_exposed(got, prof);
    }
    // This rank's own block, back from rank -1 with every rank's share.
    comm::Work own = group_->recv_async(dkv_[2].data(), size_t(n), Precision::Fp32, prev, kTagDkv);
    wait_exposed(own, prof);
    wait_exposed(acc_sent, prof);
    dkv_own = dkv_[2].data();
  }
  ops.ring_qkv_grad(dqkv, dq_.data(), dkv_own, B, Tl, heads);
}

namespace {

// The runs' arithmetic: this rank's chunks, or without cp one chunk of the
// whole sequence of Tl rows.
ContextChunks local_chunks(const ContextParallel& cp, int64_t Tl) {
  return cp.active() ? cp.chunks() : ContextChunks{Tl, 1, 0};
}

}  // namespace

void cp_dropout_rows(const kernels::Ops& ops, const ContextParallel& cp, float* x, int64_t rows,
                     int64_t C, int64_t row0, int64_t Tl, const DropoutSite& site) {
  if (!cp.active()) {
    ops.dropout_rows(x, rows, C, row0, Tl, site);
    return;
  }
  if (!site.active()) return;
  TESSERA_CHECK(Tl == cp.local_T(), "cp_dropout_rows: sequences of {} rows, this rank holds {}",
                Tl, cp.local_T());
  // Each run is a stretch of consecutive global rows (sample x T + position).
  const int64_t T = cp.seq_length();
  chunk_runs(cp.chunks(), row0, rows, [&](const ChunkRun& r) {
    ops.dropout_rows(x + r.local * C, r.len, C, r.sample * T + r.position, T, site);
  });
}

void cp_position_embedding_forward(const kernels::Ops& ops, const ContextParallel& cp,
                                   float* out, const float* wpe, int64_t row0, int64_t rows,
                                   int64_t Tl, int64_t C) {
  chunk_runs(local_chunks(cp, Tl), row0, rows, [&](const ChunkRun& r) {
    ops.position_embedding_forward(out + r.local * C, wpe, 1, r.len, C, r.position);
  });
}

void cp_position_embedding_backward(const kernels::Ops& ops, const ContextParallel& cp,
                                    float* dwpe, const float* dout, int64_t B, int64_t Tl,
                                    int64_t C) {
  // In row order, so each table row sums its samples in order, as one
  // process's position_embedding_backward does.
  chunk_runs(local_chunks(cp, Tl), 0, B * Tl, [&](const ChunkRun& r) {
    ops.position_embedding_backward(dwpe + r.position * C, dout + r.local * C, 1, r.len, C);
  });
}

void ContextParallel::reserve(int64_t B, const AttentionHeads& heads, bool lowp) const {
  if (active()) size_scratch(B, heads, lowp);
}

// The one place the scratch's sizes are decided: reserve() allocates them up
// front and every call sizes them again (a no-op once reserved), so what
// scratch_bytes() reports before the first step is what the calls use.
void ContextParallel::size_scratch(int64_t B, const AttentionHeads& heads, bool lowp) const {
  const int64_t cp = size(), Tl = local_T();
  const int64_t n = B * Tl * 2 * heads.kv_width();   // one K/V block
  const int64_t no = B * Tl * heads.q_width();        // out, dq
  const int64_t all = all_gather_ ? cp * n : n;       // the gathered blocks (p2p: one)
  kv_[0].resize(size_t(n));                           // (B, Tl, 2 KVH HS) this rank's block
  kv_[1].resize(size_t(all));                         // p2p: the next block; all_gather: (cp, ...)
  dkv_[0].resize(size_t(all));                        // p2p: a share; all_gather: every block's
  dkv_[1].resize(size_t(n));                          // the accumulator in flight / this rank's
  dkv_[2].resize(size_t(all_gather_ ? 0 : n));        // p2p: the accumulator arriving
  dq_.resize(size_t(no));                             // (B, Tl, NH HS)
  D_.resize(size_t(B * heads.q_heads * Tl));          // (B, NH, Tl)
  if (lowp) {
    q32_.resize(size_t(B * Tl * heads.qkv_width()));  // (B, Tl, W) widened qkv
    out32_.resize(size_t(no));                        // (B, Tl, NH HS) widened out
  }
}

int64_t ContextParallel::scratch_bytes() const {
  size_t n = 0;
  for (const auto* v : {&kv_[0], &kv_[1], &dkv_[0], &dkv_[1], &dkv_[2], &q32_, &out32_, &dq_, &D_})
    n += v->capacity();
  return int64_t(n * sizeof(float));
}

}  // namespace tessera
