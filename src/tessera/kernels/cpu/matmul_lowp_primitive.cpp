#include "tessera/kernels/cpu/matmul_lowp_primitive.h"

#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tessera/core/error.h"

namespace tessera::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dt to_dnnl(Precision t) {
  switch (t) {
    case Precision::Fp32: return dt::f32;
    case Precision::Bf16: return dt::bf16;
    case Precision::Fp16: return dt::f16;
    default: break;  // no 16-bit GEMM takes other types (check_spec)
  }
  return dt::undef;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// A cached primitive and what it was built for. `pd` is kept for the
// implementation name; a spec oneDNN cannot run is cached as !ok so the
// failed search is not repeated on every call.
struct Entry {
  bool ok = false;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// The descriptor of a (rows, cols) matrix stored row-major with row stride
// ld (0: cols), or, transposed, stored (cols, rows) with row stride ld (0:
// rows). No data moves: a transpose is only swapped strides (tag ba when dense).
dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, Precision t, bool transposed, int64_t ld) {
  if (ld == 0) return dnnl::memory::desc({rows, cols}, to_dnnl(t), transposed ? tag::ba : tag::ab);
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{1, ld}
                                                : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, to_dnnl(t), strides);
}

// The primitive descriptor for s, or an Entry with ok = false.
Entry make_entry(const GemmSpec& s) {
  const dnnl::memory::desc a = matrix_desc(s.M, s.K, s.in, s.a_trans, s.lda);
  const dnnl::memory::desc b = matrix_desc(s.K, s.N, s.in, s.b_trans, s.ldb);
  const dnnl::memory::desc c = matrix_desc(s.M, s.N, s.out, false, s.ldc);
  const dnnl::memory::desc bias({1, s.N}, dt::f32, tag::ab);  // broadcast over rows
  dnnl::primitive_attr attr;
  if (s.accumulate) {  // C += ...: oneDNN's sum post-op reads the old C
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  Entry e;
  try {
    const auto desc = s.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
    e.pd = dnnl::matmul::primitive_desc(desc, attr, cpu_engine());
    e.prim = dnnl::matmul(e.pd);
    e.ok = true;
  } catch (const dnnl::error&) {
    e.ok = false;  // unimplemented for this CPU / type combination
  }
  return e;
}

const Entry& cached_entry(const GemmSpec& s) {
  static std::mutex mu;
  // unique_ptr: map nodes never move, but keep entries' addresses obviously stable.
  static std::map<GemmSpec, std::unique_ptr<Entry>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(s);
  if (it == cache.end()) it = cache.emplace(s, std::make_unique<Entry>(make_entry(s))).first;
  return *it->second;
}

void check_spec(const GemmSpec& s) {
  TESSERA_CHECK(s.in == Precision::Bf16 || s.in == Precision::Fp16, "gemm_lowp: inputs must be bf16 or f16");
  TESSERA_CHECK(s.out == Precision::Fp32 || s.out == s.in, "gemm_lowp: output must be f32 or {}",
                dtype_name(s.in));
  TESSERA_CHECK(!s.accumulate || (s.out == Precision::Fp32 && !s.bias),
                "gemm_lowp: accumulation needs an f32 output and no bias");
  TESSERA_CHECK(s.M > 0 && s.N > 0 && s.K > 0, "gemm_lowp: empty GEMM {}x{}x{}", s.M, s.N, s.K);
  // A stride below the stored width would make rows overlap.
  TESSERA_CHECK(s.lda == 0 || s.lda >= (s.a_trans ? s.M : s.K), "gemm_lowp: lda {} too small",
                s.lda);
  TESSERA_CHECK(s.ldb == 0 || s.ldb >= (s.b_trans ? s.K : s.N), "gemm_lowp: ldb {} too small",
                s.ldb);
  TESSERA_CHECK(s.ldc == 0 || s.ldc >= s.N, "gemm_lowp: ldc {} too small", s.ldc);
}

}  // namespace

void gemm_lowp(const GemmSpec& s, const void* A, const void* B, const float* bias, void* C) {
  check_spec(s);
  const Entry& e = cached_entry(s);
  TESSERA_CHECK(e.ok, "oneDNN has no {} matmul for this CPU ({}x{}x{}, isa {})",
                dtype_name(s.in), s.M, s.N, s.K, onednn_cpu_isa());
  dnnl::engine& eng = cpu_engine();
  // oneDNN memory objects only wrap the caller's pointers (no copy).
  dnnl::memory a(e.pd.src_desc(), eng, const_cast<void*>(A));
  dnnl::memory b(e.pd.weights_desc(), eng, const_cast<void*>(B));
  dnnl::memory c(e.pd.dst_desc(), eng, C);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (s.bias)
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.pd.bias_desc(), eng, const_cast<float*>(bias)));
  // One stream per calling thread, made once (a CPU stream is only a handle,
  // but there is no reason to make one per GEMM).
  thread_local dnnl::stream stream(eng);
  e.prim.execute(stream, args);
  stream.wait();
}

std::string gemm_lowp_impl(const GemmSpec& s) {
  check_spec(s);
  const Entry& e = cached_entry(s);
  return e.ok ? std::string(e.pd.impl_info_str()) : std::string();
}

std::string onednn_cpu_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace tessera::cpu
