// CommStream: one worker thread that runs a group's non-blocking collectives
// one after another, in the order they were issued (a CUDA/NCCL stream,
// on a CPU).
//
// Why a thread rather than MPI_I* calls: Open MPI progresses non-blocking
// collectives only while the caller is inside MPI, so a gradient all-reduce
// started before backward would mostly run at the wait() after it. Run by a
// thread, it moves while the caller computes. The thread sleeps on a
// condition variable when idle and only exists once the first task arrives.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "tessera/comm/work.h"

namespace tessera::comm {

class CommStream {
 public:
  CommStream() = default;
  ~CommStream();  // runs what is queued, then joins
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  Work submit(std::function<void()> task);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace tessera::comm
