#include "tessera/data/atomic_file.h"

#include <memory>

#include "tessera/core/output_file.h"

namespace tessera::data {

void replace_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  // Every file written and fsynced before the first rename; an exception
  // before then removes the temporaries (OutputFile's destructor).
  std::vector<std::unique_ptr<OutputFile>> outs;
  for (const auto& [path, content] : files) {
    outs.push_back(std::make_unique<OutputFile>(path, "output"));
    outs.back()->write(content);
  }
  for (auto& o : outs) o->commit();
}

}  // namespace tessera::data
