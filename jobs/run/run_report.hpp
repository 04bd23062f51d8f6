#pragma once
// The result model of `sandgate run`: per workflow, job (leg) and step the outcome, the
// conclusion, exit code, duration, output sizes, outputs and annotations. The workflow runner
// fills it; `--report FILE` writes it as JSON (to_json) and the GitHub reporting maps it to
// check runs. All text in it is masked before it is stored (the runner masks; write_report
// masks again with the run's masker, so a secret learnt late is still hidden).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "jobs/actions/action_ref.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/run/masker.hpp"
#include "jobs/run/step_runner.hpp"
#include "jobs/run/workflow_commands.hpp"

namespace jobs {

// GitHub's vocabulary (Outcome, from step_runner.hpp): a step's outcome is what happened;
// its conclusion is the outcome after continue-on-error (a failed step that may fail
// concludes success).

enum class StepStage { pre, main, post };
std::string_view to_string(StepStage stage);

struct StepReport {
    std::string id;    // `id:` or the generated one ("__run_2")
    std::string name;  // display name, evaluated and masked
    StepStage stage = StepStage::main;
    Outcome outcome = Outcome::skipped;
    Outcome conclusion = Outcome::skipped;
    std::optional<int> exit_code;
    std::chrono::milliseconds duration{0};
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;
    bool truncated = false;
    bool timed_out = false;
    std::uint64_t skip_markers = 0;
    NamedValues outputs;
    std::vector<Annotation> annotations;
    std::string summary;            // what the step wrote to GITHUB_STEP_SUMMARY (masked)
    std::string message;            // the runner's reason for a failure or a skip; "" otherwise
    std::vector<StepReport> steps;  // a composite action's inner steps
    // Under --network allowlist: the step's connections through its proxy (host, port,
    // verdict and reason, address, bytes each way, duration), as "egress" in the JSON (the
    // names and reasons masked); unset otherwise.
    std::optional<sandbox::EgressReport> egress;
};

struct JobReport {
    std::string id;    // the job id
    std::string name;  // display name (with matrix values), masked
    Value matrix;      // the leg's combination (Null when the job has no matrix)
    Outcome conclusion = Outcome::skipped;  // after continue-on-error
    Outcome outcome = Outcome::skipped;
    std::chrono::milliseconds duration{0};
    NamedValues outputs;
    std::vector<StepReport> steps;
    std::vector<Annotation> annotations;
    std::string message;          // why it was skipped or failed outside any step
    std::string workflow_call;    // the called workflow for `uses:` jobs
    std::vector<JobReport> jobs;  // a called workflow's jobs
};

struct WorkflowReport {
    std::string file;
    std::string name;
    Outcome conclusion = Outcome::success;
    std::vector<JobReport> jobs;
};

struct RunReport {
    std::string event;
    int exit_code = 0;
    std::chrono::milliseconds duration{0};
    std::vector<WorkflowReport> workflows;
    // The run's lock: every remote `uses:` and the commit it resolved to (error: why not),
    // as `"actions": [{"uses", "repository", "path", "ref", "sha"|"error"}]`.
    std::vector<LockedAction> actions;
};

// Why a failed job (leg) failed, one line: its first failed step and that step's reason
// ("step 'test': Process completed with exit code 2 (error: expected 3)": the step's own
// message, or its exit code, or timed out, and its first other error annotation), through composite
// actions' steps and a called workflow's jobs
// ("job 'build': step ..."); the job's message when no step failed; "" for a job that did
// not fail. Already masked (the report holds masked text only).
std::string failure_reason(const JobReport& job);

nlohmann::ordered_json to_json(const RunReport& report, const Masker& masker);

// Writes the JSON to `path` atomically (a temp file beside it, then rename). Nothing is left
// behind on error.
common::Expected<void> write_report(const std::filesystem::path& path, const RunReport& report,
                                    const Masker& masker);

}  // namespace jobs
