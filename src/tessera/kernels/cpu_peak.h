// The CPU's theoretical peak FLOP/s, the denominator of an honest MFU:
//
//   peak = cores x clock x FLOPs per cycle per core
//
// FLOPs per cycle come from the vector units the CPU's flags name
// (/proc/cpuinfo), for the precision the GEMMs run in:
//   fp32: lanes per vector x 2 (a fused multiply-add is two FLOPs) x FMA pipes.
//         AVX-512: 16 lanes x 2 x 2 pipes = 64 (Intel Xeon Skylake-SP and
//         later; AMD Zen 5); AMD Zen 4 (family 0x19) runs 512-bit FMAs on two
//         256-bit pipes: 32. AVX2 + FMA: 8 x 2 x 2 = 32. AVX without FMA: 8
//         adds + 8 multiplies = 16. SSE: 8.
//   bf16: AMX (amx_bf16): 1024 per core (Intel's figure for Sapphire Rapids);
//         AVX512_BF16's dot product (vdpbf16ps): twice the fp32 rate; without
//         either, the fp32 rate (bf16 is computed in fp32).
//   fp16: AMX-FP16 (amx_fp16): 1024; otherwise the fp32 rate (oneDNN 2.6
//         computes fp16 in fp32 on CPUs without it).
// The clock is the higher of the highest frequency the kernel reports
// (cpufreq's cpuinfo_max_freq, else /proc/cpuinfo's "cpu MHz") and the clock
// measured by a chain of dependent integer adds (one per cycle on every x86
// core), best of several repeats: a VM's "cpu MHz" is often the base clock,
// below the boost the cores really run at, which would put MFU above 100 %.
// These are assumptions about the hardware, stated in the log; --peak-tflops
// replaces them with a figure the user knows better.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/kernels/precision.h"

namespace tessera::kernels {

struct CpuInfo {
  std::string vendor;     // "GenuineIntel", "AuthenticAMD", ...
  int family = 0;         // "cpu family"
  std::string model_name;
  std::string flags;      // " fma avx2 avx512f ... " (space-padded for whole-word search)
  double max_mhz = 0;     // the highest "cpu MHz" listed
  bool has(const std::string& flag) const;
};

// The first processor's fields of a /proc/cpuinfo text (max_mhz: over all).
CpuInfo parse_cpuinfo(const std::string& text);

// FLOPs per cycle per core of the vector units (see the header comment).
int64_t flops_per_cycle(const CpuInfo& cpu, Precision p);

// The vector units behind flops_per_cycle, for the log ("AVX-512, 2 FMA pipes").
std::string vector_units(const CpuInfo& cpu, Precision p);

struct CpuPeak {
  double tflops = 0;  // cores x ghz x flops_per_cycle / 1e3
  int64_t cores = 0;
  double ghz = 0;
  int64_t flops_per_cycle = 0;
  std::string description;  // "2 cores x 3.70 GHz (measured) x 64 FLOP/cycle (AVX-512 FMA, fp32)"
};

// This machine's theoretical peak for `cores` cores at precision p.
CpuPeak cpu_theoretical_peak(int64_t cores, Precision p);

// The clock the cores run at, measured (GHz; 0 where not measurable).
double measure_clock_ghz();

}  // namespace tessera::kernels
