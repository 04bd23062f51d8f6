#pragma once
// The bodies the API reads (api.hpp), without side effects: what a POST asks for, or the
// one-line 400 message naming the field. Fuzzed (fuzz/targets/api_bodies.cpp).

#include <expected>
#include <string>
#include <string_view>

#include "agent/store/job_store.hpp"

namespace agent {

// 40 (SHA-1) or 64 (SHA-256) lower-case hex digits.
bool is_hex_sha(std::string_view sha);

// POST /v1/jobs: {repository, sha, workflow_job?, attempt?, ref?, event?, base_sha?, base_ref?}
// as the job to submit (source "api", event "push" unless given).
std::expected<JobSpec, std::string> read_job_submission(std::string_view body);

}  // namespace agent
