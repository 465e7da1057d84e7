// LocalCommunicator: a Communicator over a LocalBackend (a world of one
// process, no MPI), logged and counted like any other.
#pragma once
#include <memory>
#include <string>

#include "tessera/comm/comm_monitor.h"
#include "tessera/comm/communicator.h"
#include "tessera/comm/local_backend.h"

namespace tessera::comm {

class LocalCommunicator final : public Communicator {
 public:
  // Without a monitor, the communicator gets a log of its own (and no
  // progress board: there is nobody to read it).
  explicit LocalCommunicator(std::string name = "world",
                             std::shared_ptr<CommMonitor> monitor = nullptr)
      : Communicator(std::make_unique<LocalBackend>(), std::move(name),
                     monitor ? std::move(monitor)
                             : std::make_shared<CommMonitor>(0, size_t(1024), nullptr)) {}
};

}  // namespace tessera::comm
