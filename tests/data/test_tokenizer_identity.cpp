// Tokenizer identity (data/tokenizer_identity.h, issue 38): the one check
// every mix of tokenizers goes through, the files read as one sequence, and
// how a model's tokenizer is found (recorded hash, else its files).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "expect_error.h"
#include "tessera/data/token_file.h"
#include "tessera/data/token_source.h"
#include "tessera/data/tokenizer.h"
#include "tessera/data/tokenizer_identity.h"

namespace fs = std::filesystem;
using namespace tessera::data;
using tessera::test::throws_error_with;

namespace {

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tessera_test_tokid_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_tokens(const std::string& path, uint64_t hash) {
  TokenFileWriter w(path, 300, hash);
  w.append(std::vector<int32_t>{1, 2, 3, 4});
  w.close();
}

TEST(TokenizerIdentity, UnknownAgreesWithAnythingKnownMustBeEqual) {
  EXPECT_EQ(same_tokenizer({}).hash, 0u);
  EXPECT_EQ(same_tokenizer({{"a", 0}, {"b", 0}}).hash, 0u);
  const TokenizerId first = same_tokenizer({{"a", 0}, {"b", 7}, {"c", 0}, {"d", 7}});
  EXPECT_EQ(first.name, "b");
  EXPECT_EQ(first.hash, 7u);
  // The message names the odd one and the first known one, with both hashes.
  EXPECT_TRUE(throws_error_with([] { same_tokenizer({{"a.tok", 0}, {"b.tok", 0x11}, {"c.tok", 0x22}}); },
                                {"tokenizer mismatch", "c.tok has tokenizer 0000000000000022",
                                 "b.tok has tokenizer 0000000000000011"}));
  EXPECT_TRUE(throws_error_with([] { same_tokenizer({{"the model m", kBytesTokenizerHash}, {"--tokenizer t", 5}}); },
                                {"--tokenizer t has tokenizer 0000000000000005",
                                 "the model m has byte-level text"}));
}

TEST(TokenizerIdentity, FilesReadAsOneSequenceMustShareATokenizer) {
  const fs::path d = scratch("concat");
  write_tokens((d / "a.tok").string(), 0xa);
  write_tokens((d / "a2.tok").string(), 0xa);
  write_tokens((d / "b.tok").string(), 0xb);
  write_tokens((d / "x.tok").string(), 0);  // unknown: agrees
  EXPECT_EQ(open_token_sources({(d / "a.tok").string(), (d / "x.tok").string(), (d / "a2.tok").string()})
                ->tokenizer_hash(),
            0xau);
  EXPECT_EQ(open_token_sources({(d / "x.tok").string(), (d / "x.tok").string()})->tokenizer_hash(), 0u);
  // Until now the mix read silently (the joint hash was 0, "unknown").
  EXPECT_TRUE(throws_error_with(
      [&] { open_token_sources({(d / "a.tok").string(), (d / "x.tok").string(), (d / "b.tok").string()}); },
      {"tokenizer mismatch", (d / "b.tok").string(), (d / "a.tok").string()}));
  fs::remove_all(d);
}

TEST(TokenizerIdentity, AModelsTokenizerIsItsRecordedHashElseItsFiles) {
  const fs::path d = scratch("model");
  const Tokenizer tok = Tokenizer::from_merges({{64, 65}}, {std::string(kEndOfText)});
  tok.save((d / "tok").string());
  EXPECT_EQ(tokenizer_spec_hash((d / "tok").string()), tok.hash());
  EXPECT_EQ(tokenizer_spec_hash("bytes"), kBytesTokenizerHash);
  EXPECT_NE(tok.hash(), kBytesTokenizerHash);
  EXPECT_EQ(tokenizer_spec_hash(""), 0u);
  EXPECT_EQ(tokenizer_spec_hash((d / "gone").string()), 0u);
  // Recorded wins; a checkpoint from before the hash was recorded falls back
  // to its tokenizer files.
  EXPECT_EQ(model_tokenizer("m", (d / "tok").string(), 42).hash, 42u);
  EXPECT_EQ(model_tokenizer("m", (d / "tok").string(), 0).hash, tok.hash());
  EXPECT_EQ(model_tokenizer("m", "", 0).hash, 0u);
  EXPECT_EQ(model_tokenizer("the model m", "", 0).name, "the model m");
  fs::remove_all(d);
}

}  // namespace
