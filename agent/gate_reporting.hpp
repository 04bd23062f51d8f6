#pragma once
// Reporting a gate's results to GitHub from the command line: the flags shared by
// `sandgate gate` and `sandgate report`, building a github::Reporter from them, and the
// mapping from a `sandgate run --report` document (the jobs/ run report, as JSON) to
// github::JobReport, one per job (the jobs of called workflows flattened).
//
// Credentials never come from argv: --token-file F, or the App flags (--app-id, --app-key
// FILE, --installation-id), or else the environment (SANDGATE_GITHUB_TOKEN, then
// GITHUB_TOKEN).

// CLI11's split() trips g++ 12's -Wnull-dereference once inlined here (a false positive in
// the library's header, not in this code).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>
#pragma GCC diagnostic pop

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "github/check_runs.hpp"
#include "github/job_report.hpp"
#include "sandbox/error.hpp"

namespace agent {

// Exit codes of commands that report to GitHub.
inline constexpr int k_exit_reported = 0;
inline constexpr int k_exit_report_usage = 2;
inline constexpr int k_exit_report_journaled = 3;  // kept in the journal: sent later
inline constexpr int k_exit_report_refused = 4;    // GitHub refused it (401/403/404/422)

inline constexpr const char* k_token_variables[] = {"SANDGATE_GITHUB_TOKEN", "GITHUB_TOKEN"};

struct GitHubFlags {
    std::string repo;  // --github-repo OWNER/NAME; empty: no reporting
    std::string api_url = "https://api.github.com";
    std::string token_file;
    std::string app_id;
    std::string app_key;
    std::string installation_id;
    std::string check_name = "{workflow} / {job}";
    std::string details_url;
    std::string report_as = "checks";
    std::string state_dir;  // empty: default_state_dir()
};

// Registers --github-repo, --api-url, --token-file, --app-id, --app-key, --installation-id,
// --check-name, --details-url, --report-as and --state-dir on `app`.
void add_github_options(CLI::App& app, GitHubFlags& flags);


// Checks the flags (exactly one credential source, a valid repo, URL and template) and builds
// the reporter with its journal under the state directory. invalid_input naming the flag.
sandbox::Expected<github::Reporter> make_reporter(const GitHubFlags& flags);

// Maps a run report document to one JobReport per job, all completed, on commit `sha`.
// Job keys are "<workflow file>#<job id>" plus the matrix leg as compact JSON.
// invalid_input naming the field on a malformed document.
sandbox::Expected<std::vector<github::JobReport>> job_reports_from_run_report(std::string_view json,
                                                                              std::string_view sha);

}  // namespace agent
