#pragma once
// The REST calls behind github::Reporter (internal to github/): request bodies built with
// nlohmann::ordered_json, answers read with simdjson. Each returns GitHub's error unchanged.

#include <cstdint>
#include <optional>
#include <string>

#include "github/check_runs.hpp"
#include "github/http_client.hpp"
#include "github/job_report.hpp"

namespace github::api {

struct Target {
    const HttpClient& client;
    const Repository& repository;
    const std::string& check_name;
    const std::optional<std::string>& details_url;
};

// The newest run named check_name on report.sha whose external_id is report.job_key.
common::Expected<std::optional<std::int64_t>> find_check_run(const Target& target,
                                                             const JobReport& report);

// POST check-runs with status in_progress; returns the new id.
common::Expected<std::int64_t> create_in_progress(const Target& target, const JobReport& report);
// PATCH an existing run back to in_progress (a rerun of the same job).
common::Expected<void> reopen(const Target& target, std::int64_t id, const JobReport& report);

// POST check-runs already completed, with the first batch of annotations; returns the id.
common::Expected<std::int64_t> create_completed(const Target& target, const JobReport& report);
// PATCH the conclusion, output and the first batch of annotations.
common::Expected<void> conclude(const Target& target, std::int64_t id, const JobReport& report);
// PATCH annotations [from, from + 50) (title and summary repeated: output requires them).
common::Expected<void> add_annotations(const Target& target, std::int64_t id,
                                       const JobReport& report, std::size_t from);
// A minimal conclusion (no annotations, a plain summary), for when GitHub refused the full
// one: the run must not stay in_progress.
common::Expected<void> conclude_plainly(const Target& target, std::int64_t id,
                                        const JobReport& report, const std::string& why);

// POST statuses/{sha}: pending while in progress, then success/failure/error.
common::Expected<void> post_status(const Target& target, const JobReport& report);

}  // namespace github::api
