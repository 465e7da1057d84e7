// Input files that are not what they claim: named pipes and directories
// given as token data or tokenizer files (which used to block forever), a
// token file truncated while it is mapped (which used to SIGBUS), and a
// tokenizer rewritten on a full disk (which used to destroy the old one).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/core/error.h"
#include "tessera/data/llmc_shard.h"
#include "tessera/data/megatron_dataset.h"
#include "tessera/data/token_file.h"
#include "tessera/data/tokenizer.h"

namespace fs = std::filesystem;
using namespace tessera::data;

namespace {

class DataHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_data_hostile_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tessera::Error& e) {
    return e.what();
  }
  return "";
}

void write_tokens(const std::string& path, int64_t n) {
  TokenFileWriter w(path, 256, 0);
  std::vector<int32_t> ids(size_t(n), 7);
  w.append(ids);
  w.close();
}

TEST_F(DataHostile, NamedPipesAreRefusedNotWaitedOn) {
  ASSERT_EQ(::mkfifo(path("pipe.tok").c_str(), 0600), 0);
  std::string err = error_of([&] { open_token_source(path("pipe.tok")); });
  EXPECT_NE(err.find("named pipe"), std::string::npos) << err;
  EXPECT_NE(err.find(path("pipe.tok")), std::string::npos) << err;

  // Megatron: a pipe as the index, and as the data file.
  write_megatron_dataset(path("m"), {{1, 2, 3}});
  fs::remove(path("m.bin"));
  ASSERT_EQ(::mkfifo(path("m.bin").c_str(), 0600), 0);
  err = error_of([&] { open_token_source(path("m")); });
  EXPECT_NE(err.find("named pipe"), std::string::npos) << err;

  // Tokenizer files.
  fs::create_directories(path("tok"));
  ASSERT_EQ(::mkfifo(path("tok/vocab.json").c_str(), 0600), 0);
  std::ofstream(path("tok/merges.txt")) << "#version: 0.2\n";
  err = error_of([&] { Tokenizer::load(path("tok")); });
  EXPECT_NE(err.find("named pipe"), std::string::npos) << err;
}

TEST_F(DataHostile, DirectoriesAreRefusedAsDataAndTokenizerFiles) {
  fs::create_directories(path("dir.tok"));
  std::string err = error_of([&] { open_token_source(path("dir.tok")); });
  EXPECT_NE(err.find("a directory"), std::string::npos) << err;
  fs::create_directories(path("tok/vocab.json"));
  err = error_of([&] { Tokenizer::load(path("tok")); });
  EXPECT_NE(err.find("a directory"), std::string::npos) << err;
}

TEST_F(DataHostile, TruncatingAMappedFileIsAnErrorNotSigbus) {
  write_tokens(path("a.tok"), 100000);
  auto src = open_token_source(path("a.tok"));
  EXPECT_EQ(src->read(99990, 10).size(), 10u);
  fs::resize_file(path("a.tok"), 64 + 2 * 10);  // someone rewrites it in place
  const std::string err = error_of([&] { src->read(99990, 10); });
  EXPECT_NE(err.find("changed size while in use"), std::string::npos) << err;

  write_llmc_shard(path("b.bin"), std::vector<int32_t>(100000, 3));
  auto llmc = open_token_source(path("b.bin"));
  fs::resize_file(path("b.bin"), 1024);
  EXPECT_NE(error_of([&] { llmc->read(99000, 10); }).find("changed size"), std::string::npos);
}

// A tokenizer rewritten where the disk fills up (here: a file size limit)
// must leave the previous one loadable, and no temporaries behind.
TEST_F(DataHostile, TokenizerSaveIsAtomicOnAFullDisk) {
  Tokenizer old_tok = Tokenizer::from_merges({{'a', 'b'}}, {});
  old_tok.save(path("tok"));
  Tokenizer big = Tokenizer::from_merges({{'x', 'y'}, {'y', 'z'}}, {});

  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  struct rlimit small = saved;
  small.rlim_cur = 2000;  // smaller than vocab.json (256 byte tokens alone)
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string err = error_of([&] { big.save(path("tok")); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_NE(err, "");

  Tokenizer back = Tokenizer::load(path("tok"));
  EXPECT_EQ(back.hash(), old_tok.hash());
  for (const auto& de : fs::directory_iterator(path("tok")))
    EXPECT_EQ(de.path().filename().string().find(".tmp"), std::string::npos) << de.path();
}

}  // namespace
