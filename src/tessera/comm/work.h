// Work: the wait handle of a non-blocking communication call.
//
// A Work owns whatever keeps the operation in flight (an MPI request, a task
// on the communicator's stream). Its destructor waits, for the same reason
// std::jthread joins: the caller's buffers must outlive the operation, and
// forgetting a handle must not turn into a use-after-free on another thread.
#pragma once
#include <memory>

namespace tessera::comm {

class Work {
 public:
  // What a backend implements for each kind of in-flight operation.
  struct Impl {
    virtual ~Impl() = default;
    virtual void wait() = 0;   // blocks until done; rethrows the op's error
    virtual bool test() = 0;   // true once done (never blocks)
  };

  Work() = default;  // an already-complete operation
  explicit Work(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Work(Work&&) noexcept = default;
  Work& operator=(Work&& other) noexcept {
    if (this != &other) {
      finish_quietly();
      impl_ = std::move(other.impl_);
    }
    return *this;
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() { finish_quietly(); }

  void wait() {
    if (!impl_) return;
    auto impl = std::move(impl_);  // done (or failed) either way after this
    impl->wait();
  }
  bool test() {
    if (!impl_) return true;
    if (!impl_->test()) return false;
    wait();  // surfaces an error the op may have raised
    return true;
  }
  bool done() const { return !impl_; }

 private:
  void finish_quietly() noexcept {
    try {
      wait();
    } catch (...) {
      // An error nobody waited for: destructors must not throw. The watchdog
      // and the log still saw it.
    }
  }

  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::comm
