#include "tessera/comm/comm_stream.h"

#include <chrono>

namespace tessera::comm {
namespace {

struct FutureWork final : Work::Impl {
  explicit FutureWork(std::future<void> f) : future(std::move(f)) {}
  void wait() override { future.get(); }
  bool test() override {
    return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  std::future<void> future;
};

}  // namespace

CommStream::~CommStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Work CommStream::submit(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  auto future = packaged.get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(packaged));
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
  return Work(std::make_unique<FutureWork>(std::move(future)));
}

void CommStream::run() {
  while (true) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // a thrown error lands in the task's future, for wait() to rethrow
  }
}

}  // namespace tessera::comm
