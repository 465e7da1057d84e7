// The slowest device paces a synchronous step. Same-SKU GPUs do not run at
// one speed (the silicon lottery, each one's cooling and power management),
// and every rank of a data-, tensor- or pipeline-parallel job waits for the
// slowest at each step's collectives, so a job of N devices runs at the
// speed of the slowest of N.
#pragma once
#include <cstdint>

#include "tessera/plan/system.h"

namespace tessera::plan {

// E[max of n independent standard normal draws] (0 for n <= 1): how many
// standard deviations the slowest of n devices sits from the mean.
double expected_max_of_normals(int64_t n);

// Seconds the slowest of `devices` devices adds to `paced` seconds of the
// step that run at the device's own speed (its compute): the spread of
// device speeds (SystemSpec::device_speed_spread, a standard deviation as a
// fraction of the mean speed) times expected_max_of_normals(devices), as the
// time a device slower by that fraction takes. 0 when the system gives no
// spread (a CPU calibration: its own ranks are measured in place).
double straggler_seconds(const SystemSpec& sys, int64_t devices, double paced);

}  // namespace tessera::plan
