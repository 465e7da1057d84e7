// The CPU's theoretical peak (issue 16, item 4): FLOPs per cycle from the
// flags of /proc/cpuinfo texts of known CPUs, the clock measured on this
// machine, and peak = cores x clock x FLOPs per cycle.
#include <gtest/gtest.h>

#include "tessera/kernels/cpu_peak.h"

namespace tessera::kernels {
namespace {

std::string cpuinfo(const std::string& vendor, int family, const std::string& flags,
                    const std::string& mhz0 = "2100.000", const std::string& mhz1 = "2100.000") {
  return "processor\t: 0\nvendor_id\t: " + vendor + "\ncpu family\t: " + std::to_string(family) +
         "\nmodel name\t: test\ncpu MHz\t\t: " + mhz0 + "\nflags\t\t: " + flags +
         "\n\nprocessor\t: 1\nvendor_id\t: " + vendor + "\ncpu MHz\t\t: " + mhz1 +
         "\nflags\t\t: " + flags + "\n\n";
}

TEST(CpuPeak, FlopsPerCycleFromTheVectorUnits) {
  // Sapphire Rapids: AVX-512 with two FMA pipes, AMX for bf16.
  const CpuInfo spr = parse_cpuinfo(cpuinfo(
      "GenuineIntel", 6, "fpu sse sse2 avx fma avx2 avx512f avx512_bf16 amx_bf16 amx_tile"));
  EXPECT_EQ(flops_per_cycle(spr, Precision::Fp32), 64);
  EXPECT_EQ(flops_per_cycle(spr, Precision::Bf16), 1024);
  EXPECT_EQ(flops_per_cycle(spr, Precision::Fp16), 64);  // no amx_fp16: computed in fp32
  // Zen 4 (family 0x19): 512-bit FMAs on two 256-bit pipes; bf16 dot products twice that.
  const CpuInfo zen4 =
      parse_cpuinfo(cpuinfo("AuthenticAMD", 25, "sse sse2 avx fma avx2 avx512f avx512_bf16"));
  EXPECT_EQ(flops_per_cycle(zen4, Precision::Fp32), 32);
  EXPECT_EQ(flops_per_cycle(zen4, Precision::Bf16), 64);
  // Zen 5 (family 0x1A, this machine's kind): full-width AVX-512.
  const CpuInfo zen5 =
      parse_cpuinfo(cpuinfo("AuthenticAMD", 26, "sse sse2 avx fma avx2 avx512f avx512_bf16"));
  EXPECT_EQ(flops_per_cycle(zen5, Precision::Fp32), 64);
  EXPECT_EQ(flops_per_cycle(zen5, Precision::Bf16), 128);
  // Haswell: AVX2 + FMA; no bf16 instructions, so bf16 runs at the fp32 rate.
  const CpuInfo hsw = parse_cpuinfo(cpuinfo("GenuineIntel", 6, "sse sse2 avx fma avx2"));
  EXPECT_EQ(flops_per_cycle(hsw, Precision::Fp32), 32);
  EXPECT_EQ(flops_per_cycle(hsw, Precision::Bf16), 32);
  // Sandy Bridge: AVX without FMA; and SSE alone. "avx512f" is not "avx512fx".
  EXPECT_EQ(flops_per_cycle(parse_cpuinfo(cpuinfo("GenuineIntel", 6, "sse sse2 avx")),
                            Precision::Fp32),
            16);
  EXPECT_EQ(flops_per_cycle(parse_cpuinfo(cpuinfo("GenuineIntel", 6, "sse sse2 avx512fx")),
                            Precision::Fp32),
            8);
}

TEST(CpuPeak, ParsesTheFirstProcessorAndTheHighestClock) {
  const CpuInfo c =
      parse_cpuinfo(cpuinfo("AuthenticAMD", 26, "avx2 fma avx512f", "2096.027", "3700.5"));
  EXPECT_EQ(c.vendor, "AuthenticAMD");
  EXPECT_EQ(c.family, 26);
  EXPECT_DOUBLE_EQ(c.max_mhz, 3700.5);
  EXPECT_TRUE(c.has("avx512f"));
  EXPECT_FALSE(c.has("avx512"));
}

TEST(CpuPeak, TheoreticalPeakIsCoresTimesClockTimesFlops) {
  const CpuPeak p = cpu_theoretical_peak(3, Precision::Fp32);
  EXPECT_EQ(p.cores, 3);
  EXPECT_GT(p.ghz, 0.3);
  EXPECT_LT(p.ghz, 8.0);
  EXPECT_GE(p.flops_per_cycle, 8);
  EXPECT_DOUBLE_EQ(p.tflops, 3 * p.ghz * double(p.flops_per_cycle) / 1e3);
  EXPECT_NE(p.description.find("3 core(s) x"), std::string::npos) << p.description;
#if defined(__x86_64__)
  // The dependent-add chain runs one add per cycle: a clock a CPU can have.
  const double ghz = measure_clock_ghz();
  EXPECT_GT(ghz, 0.3);
  EXPECT_LT(ghz, 8.0);
#endif
}

}  // namespace
}  // namespace tessera::kernels
