#pragma once
// `sandgate run -l`: what a run of the event would do, without running anything. For each
// workflow the event selects, its jobs by stage (the longest chain of `needs` before them),
// each with its runs-on, its legs and whether it runs here: "yes", or why not (its `if`, a
// skipped job it needs, runs-on, `container:`), evaluated as the run evaluates them (the
// jobs it needs taken as succeeded, with no outputs; what cannot be known before the jobs it
// needs have run is said so). Then the workflows the event does not run.

#include <cstdio>
#include <string>
#include <vector>

#include "jobs/run/run_context.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace agent {

// Prints the listing to `out`. `skipped_files`: the workflow files the event's filters leave
// out.
void print_run_list(std::FILE* out, const jobs::RunSettings& settings,
                    const std::vector<jobs::Workflow>& workflows,
                    const std::vector<std::string>& skipped_files);

}  // namespace agent
