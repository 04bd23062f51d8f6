#pragma once
// `sandgate run`'s command-line values turned into what the workflow runner takes: the
// workflow files (-W), the event payload (-e), secrets, vars, env and inputs. Every error
// is one line naming the flag or file:line; the command exits 2 on them.

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/git/repo_info.hpp"
#include "jobs/run/run_context.hpp"
#include "jobs/workflow/workflow_model.hpp"
#include "sandbox/process/run.hpp"

namespace agent {

// The workflow files -W names: a file, or the *.yml / *.yaml of a directory (not recursive),
// sorted. `base` resolves a relative PATH. Each file is named as `display/<file>`.
common::Expected<std::vector<std::filesystem::path>> workflow_files(
    const std::filesystem::path& base, const std::string& path);

// Loads and validates every file, and the local workflows their jobs call, by the rules of
// `dialect` (jobs/workflow/workflow_model.hpp: GitHub's for gates; `sandgate run` runs act's too).
common::Expected<std::vector<jobs::Workflow>> load_workflows(
    const std::filesystem::path& repository, const std::vector<std::filesystem::path>& files,
    jobs::Dialect dialect = jobs::Dialect::github);

// KEY:VALUE for --matrix.
common::Expected<std::pair<std::string, std::string>> parse_matrix_filter(const std::string& text);

// The -e payload: a JSON object (simdjson), or {} when `path` is empty.
common::Expected<jobs::Value> load_event(const std::filesystem::path& path);

// The payload a run without -e stands for: for push, {"ref": REF} with the ref github.ref
// names (HEAD's branch, or the tag HEAD is detached at: jobs/git/repo_info.hpp), so that branch
// and tag filters are matched as GitHub would for that push; {} otherwise, or when HEAD is
// neither (then the filters are not applied).
jobs::Value synthesized_event(std::string_view event_name, const jobs::RepoInfo& repo);

// The inputs context of a top-level workflow: workflow_dispatch / workflow_call inputs from
// the payload's `inputs` (and --input), typed and defaulted. Errors name the input.
common::Expected<jobs::Object> top_level_inputs(const jobs::RunSettings& settings,
                                                const jobs::Workflow& workflow);

}  // namespace agent
