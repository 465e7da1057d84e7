// `tessera tune`'s trial log: one JSON line per trial (tune_trial.h's
// trial_to_json), appended as each trial ends, so an interrupted tuning
// resumes from it (--resume) and loses at most the trial it was running.
#pragma once
#include <string>
#include <vector>

#include "tessera/tune/tune_trial.h"

namespace tessera::tune {

// The trials of a log. Throws naming `path` and the line for one that is
// not a trial.
std::vector<Trial> read_trial_log(const std::string& path);

// `t` appended to the log at `path` and flushed.
void append_trial_log(const std::string& path, const Trial& t);

}  // namespace tessera::tune
