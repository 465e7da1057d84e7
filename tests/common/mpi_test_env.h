// What the multi-rank gtest binaries share: the MPI runtime and the world
// group, set up once by mpi/mpi_test_main.cpp before any test runs, and one
// grid per (tp, pp) shape.
#pragma once
#include "tessera/comm/communicator.h"
#include "tessera/comm/grid.h"
#include "tessera/comm/mpi_runtime.h"

namespace tessera::test {

comm::MpiRuntime& mpi_runtime();
comm::Communicator& world();

// The grid of shape (tp, pp) over the world, built on first use and kept for
// the whole binary: the watchdog's progress board holds every group for the
// life of the process (64 at most), so tests must not build one per case.
comm::Grid& grid_of(int tp, int pp = 1);

}  // namespace tessera::test
