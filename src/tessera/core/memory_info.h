// How much memory this process can still take, to refuse a run that cannot
// fit before it allocates (an allocation the kernel overcommits succeeds and
// then dies, killed, while it is being filled; one it refuses ends in
// std::bad_alloc deep inside a constructor).
#pragma once
#include <algorithm>
#include <fstream>
#include <string>

namespace tessera {

// MemAvailable plus free swap (/proc/meminfo), capped by a cgroup v2 limit
// (memory.max - memory.current) when there is one. 0 when unknown: callers
// then check nothing.
inline double available_memory_bytes() {
  double avail_kb = -1, swap_kb = 0;
  {
    std::ifstream mi("/proc/meminfo");
    std::string key, unit;
    double kb = 0;
    while (mi >> key >> kb) {
      if (key == "MemAvailable:") avail_kb = kb;
      if (key == "SwapFree:") swap_kb = kb;
      std::getline(mi, unit);  // " kB"
    }
  }
  if (avail_kb < 0) return 0;
  double bytes = (avail_kb + swap_kb) * 1024;
  std::ifstream max_f("/sys/fs/cgroup/memory.max"), cur_f("/sys/fs/cgroup/memory.current");
  std::string max_s;
  double cur = 0;
  if (max_f >> max_s && max_s != "max" && cur_f >> cur) {
    try {
      bytes = std::min(bytes, std::max(0.0, std::stod(max_s) - cur));
    } catch (...) {  // an unreadable limit: no cap
    }
  }
  return bytes;
}

}  // namespace tessera
