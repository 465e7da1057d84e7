#include "tessera/data/mapped_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "tessera/core/error.h"
#include "tessera/core/regular_file.h"

namespace tessera::data {

MappedFile::MappedFile(const std::string& path, const char* what) : path_(path) {
  fd_ = open_regular_file(path, what);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int e = errno;
    release();
    fail("cannot stat {}: {}", path, std::strerror(e));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      release();
      fail("cannot map {}: {}", path, std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
}

void MappedFile::check_unchanged() const {
  if (fd_ < 0) return;  // moved from
  struct stat st {};
  TESSERA_CHECK(::fstat(fd_, &st) == 0, "cannot stat {}: {}", path_, std::strerror(errno));
  TESSERA_CHECK(size_t(st.st_size) == size_,
                "{}: the file changed size while in use ({} bytes when opened, {} now): it was "
                "truncated or rewritten during the run; write data to a new file and rename it "
                "into place instead",
                path_, size_, st.st_size);
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      fd_(std::exchange(o.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

}  // namespace tessera::data
