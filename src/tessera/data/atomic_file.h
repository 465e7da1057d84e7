// Replacing a file the user keeps (a tokenizer's vocab.json and merges.txt)
// so that a full disk or a kill never leaves it half written: the content
// goes to a temporary beside it, is fsynced, and only then renamed over the
// old file; the directory is fsynced so the rename itself survives a crash.
#pragma once
#include <string>
#include <vector>

namespace tessera::data {

// Each (path, content) pair: all temporaries are written and fsynced first,
// then renamed over their paths one after another, so a failure while
// writing (the likely one: disk full) leaves every old file untouched.
// Throws tessera::Error naming the file; removes its temporaries on failure.
void replace_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace tessera::data
