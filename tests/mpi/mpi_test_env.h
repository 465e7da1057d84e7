// What the multi-rank gtest binaries share: the MPI runtime and the world
// group, set up once by mpi_test_main.cpp before any test runs.
#pragma once
#include "tessera/comm/communicator.h"
#include "tessera/comm/mpi_runtime.h"

namespace tessera::test {

comm::MpiRuntime& mpi_runtime();
comm::Communicator& world();

}  // namespace tessera::test
