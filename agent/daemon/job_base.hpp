#pragma once
// Where a job's diff starts. The webhook, the poller and the API record the base a push-like
// event names in the job's payload_json: `base_sha` (a push's `before`, 40 zeros for a new
// branch; a pull request's base.sha; a merge group's base_sha) and `base_ref` (the base
// branch of a pull request or merge group). The daemon hands them to `sandgate gate` as
// --base-sha (paths filters, github.event) and --base-ref (branches filters; the base a pull
// request is diffed from when its base SHA is missing). SHAs are checked with
// jobs::is_commit_sha (jobs/workflow/merge_queue.hpp), not jobs::parse_sha: the daemon links no
// libgit2.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/store/job_store.hpp"

namespace agent {

struct JobBase {
    std::string sha;  // 40 lower-case hex digits, or empty
    std::string ref;  // a branch, as the event names it ("main", "refs/heads/main"), or empty
};

// The base a merge-queue head ref names: refs/heads/gh-readonly-queue/BASE/pr-N-SHA gives
// refs/heads/BASE and SHA (the commit the group is stacked on); empty fields otherwise.
JobBase merge_queue_base(std::string_view head_ref);

// Writes the non-empty fields into `payload` (base_sha only when it is a full SHA).
void record_base(nlohmann::ordered_json& payload, const JobBase& base);

// The base recorded in the job's payload_json; a field absent, of another type or not a full
// SHA is empty.
JobBase recorded_base(const JobSpec& spec);

// A rerun whose event names no base (a check run's rerequest may carry no `before`) keeps the
// base of `earlier`, an earlier attempt of the same job, when both are of one event: each field
// of rerun's recorded base that is empty is taken from earlier's. The rest of rerun's
// payload_json stays as it is.
void inherit_base(JobSpec& rerun, const JobSpec& earlier);

// The gate's arguments for the job's recorded base: --base-sha for every event, --base-ref
// for pull_request and merge_group (a push has no base branch).
std::vector<std::string> base_arguments(const JobSpec& spec);

}  // namespace agent
