#include "tessera/comm/launch_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <initializer_list>

namespace tessera::comm {

LaunchRank launch_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* s = std::getenv(var);
    if (s == nullptr || *s == '\0') continue;
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    if (*end == '\0' && errno == 0 && v >= 0 && v <= INT_MAX) return {int(v), true};
  }
  return {};
}

}  // namespace tessera::comm
