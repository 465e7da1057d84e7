// `tessera tokenize` end to end: train, encode, info, decode, and the error a
// user sees when the token file and the vocabulary do not match.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/data/token_file.h"
#include "tessera/data/tokenizer.h"

namespace fs = std::filesystem;

namespace {

struct CliResult {
  int rc;
  std::string out;  // stdout and stderr together
};

CliResult run(const std::string& args) {
  std::string cmd = std::string(TESSERA_BINARY) + " " + args + " 2>&1";
  CliResult r{-1, {}};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

}  // namespace

TEST(TokenizeCli, TrainEncodeDecodeRoundTrip) {
  fs::path dir = fs::temp_directory_path() / ("tessera_test_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string a, b = "caf\xC3\xA9 \xFF\xFE raw bytes\n";
  for (int i = 0; i < 200; ++i) a += "It's the quick brown fox, number " + std::to_string(i) + ".\n";
  std::ofstream(dir / "a.txt", std::ios::binary) << a;
  std::ofstream(dir / "b.txt", std::ios::binary) << b;
  const std::string A = (dir / "a.txt").string(), B = (dir / "b.txt").string();

  CliResult t = run("tokenize train --input " + A + " " + B + " --vocab-size 300 --output " + (dir / "vocab").string());
  ASSERT_EQ(t.rc, 0) << t.out;
  tessera::data::Tokenizer tok = tessera::data::Tokenizer::load((dir / "vocab").string());
  EXPECT_EQ(tok.vocab_size(), 300);
  EXPECT_EQ(tok.eot_id(), 299);

  CliResult e = run("tokenize encode --vocab " + (dir / "vocab").string() + " --input " + A + " " + B + " --output " +
              (dir / "x.tok").string());
  ASSERT_EQ(e.rc, 0) << e.out;
  tessera::data::TokenFile f((dir / "x.tok").string());
  EXPECT_EQ(f.tokenizer_hash(), tok.hash());
  EXPECT_EQ(f.header().document_count, 2u);
  // <|endoftext|> before each document, then that document's ids
  std::vector<int32_t> want{299};
  for (int32_t id : tok.encode(a)) want.push_back(id);
  want.push_back(299);
  for (int32_t id : tok.encode(b)) want.push_back(id);
  EXPECT_EQ(f.read(0, f.size()), want);

  CliResult d = run("tokenize decode --vocab " + (dir / "vocab").string() + " --input " + (dir / "x.tok").string() + " --output " +
              (dir / "back.txt").string());
  ASSERT_EQ(d.rc, 0) << d.out;
  EXPECT_EQ(slurp(dir / "back.txt"), "<|endoftext|>" + a + "<|endoftext|>" + b);

  CliResult i = run("tokenize info " + (dir / "x.tok").string());
  EXPECT_EQ(i.rc, 0);
  EXPECT_NE(i.out.find(std::to_string(want.size()) + " tokens"), std::string::npos) << i.out;

  // another vocabulary: refused, naming the file
  ASSERT_EQ(run("tokenize train --input " + A + " --vocab-size 290 --output " + (dir / "other").string()).rc, 0);
  CliResult bad = run("tokenize decode --vocab " + (dir / "other").string() + " --input " + (dir / "x.tok").string());
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("tokenizer mismatch"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("x.tok"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}
