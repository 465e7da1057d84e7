// vocab.json + merges.txt in the Hugging Face / OpenAI GPT-2 layout:
// vocab.json maps each token, spelled with GPT-2's byte-unicode table, to its
// id; merges.txt is a "#version" line then one "left right" pair per line in
// rank order. Special tokens are spelled as their plain text.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/core/error.h"
#include "tessera/core/regular_file.h"
#include "tessera/data/atomic_file.h"
#include "tessera/data/byte_unicode.h"
#include "tessera/data/tokenizer.h"

namespace tessera::data {

namespace fs = std::filesystem;

namespace {

// Not an ifstream: a named pipe given as a tokenizer file would block forever.
std::string read_text(const std::string& path) { return read_regular_file(path, "tokenizer file"); }

}  // namespace

Tokenizer Tokenizer::load(const std::string& dir) {
  return load((fs::path(dir) / "vocab.json").string(), (fs::path(dir) / "merges.txt").string());
}

Tokenizer Tokenizer::load(const std::string& vocab_json, const std::string& merges_txt) {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_text(vocab_json));
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer: {} is not valid JSON: {}", vocab_json, e.what());
  }
  TESSERA_CHECK(vocab.is_object() && !vocab.empty(), "tokenizer: {} must be a JSON object of token -> id", vocab_json);

  Tokenizer tok;
  const size_t V = vocab.size();
  tok.tokens_.assign(V, std::string());
  std::vector<uint8_t> seen(V, 0);
  std::unordered_map<std::string, int32_t> by_spelling;  // GPT-2 spelling -> id, to resolve merges
  by_spelling.reserve(V);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    TESSERA_CHECK(it.value().is_number_integer(), "tokenizer: {}: the id of token '{}' is not an integer", vocab_json, clipped(it.key()));
    int64_t id = it.value().get<int64_t>();
    TESSERA_CHECK(id >= 0 && size_t(id) < V, "tokenizer: {}: token '{}' has id {}, but ids must be 0..{} (one per entry)",
                  vocab_json, clipped(it.key()), id, V - 1);
    TESSERA_CHECK(!seen[size_t(id)], "tokenizer: {}: id {} is given to two tokens", vocab_json, id);
    seen[size_t(id)] = 1;
    std::string bytes;
    // Tokens outside the byte table (added tokens) keep their text as bytes.
    if (!gpt2_to_bytes(it.key(), &bytes)) bytes = it.key();
    tok.tokens_[size_t(id)] = std::move(bytes);
    by_spelling.emplace(it.key(), int32_t(id));
  }

  std::istringstream f(read_text(merges_txt));
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    TESSERA_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
                  "tokenizer: {}:{}: expected 'left right', got '{}'", merges_txt, lineno, clipped(line));
    auto a = by_spelling.find(line.substr(0, sp));
    auto b = by_spelling.find(line.substr(sp + 1));
    TESSERA_CHECK(a != by_spelling.end() && b != by_spelling.end(), "tokenizer: {}:{}: '{}' uses a token not in {}", merges_txt,
                  lineno, clipped(line), vocab_json);
    tok.merges_.emplace_back(a->second, b->second);
  }
  tok.build_index();
  return tok;
}

void Tokenizer::save(const std::string& dir) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  TESSERA_CHECK(!ec, "tokenizer: cannot create {}: {}", dir, ec.message());
  auto spell = [&](int32_t id) {
    return special_flag_[size_t(id)] ? tokens_[size_t(id)] : bytes_to_gpt2(tokens_[size_t(id)]);
  };
  // One entry per line in id order, so the file diffs and reads well.
  std::ostringstream vocab;
  vocab << "{\n";
  for (int32_t id = 0; id < vocab_size(); ++id)
    vocab << "  " << nlohmann::json(spell(id)).dump() << ": " << id << (id + 1 < vocab_size() ? ",\n" : "\n");
  vocab << "}\n";
  std::ostringstream merges;
  merges << "#version: 0.2\n";
  for (auto [a, b] : merges_) merges << spell(a) << ' ' << spell(b) << '\n';
  // Rewriting an existing tokenizer in place would destroy it on a full
  // disk; both files are written beside it first, then renamed over it.
  replace_files_atomically({{(fs::path(dir) / "vocab.json").string(), vocab.str()},
                            {(fs::path(dir) / "merges.txt").string(), merges.str()}});
}

}  // namespace tessera::data
