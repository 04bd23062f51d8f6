// `sandgate report`: posts a `sandgate run --report` document to GitHub as check runs (or
// commit statuses), one per job, and first sends whatever the report journal still holds.
//
//   sandgate report --github-repo OWNER/NAME --sha SHA --from-report FILE.json
//                   [--api-url URL] (--token-file F | --app-id N --app-key F --installation-id N)
//                   [--check-name TEMPLATE] [--details-url URL] [--report-as checks|status]
//                   [--state-dir DIR]
//   sandgate report --github-repo OWNER/NAME --replay-only ...
//
// Exit: 0 everything delivered; 2 bad arguments or report file; 3 something was kept in the
// journal for later (GitHub unreachable or rate limited); 4 GitHub refused a report.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "agent/cli/commands.hpp"
#include "agent/gate/gate_reporting.hpp"

namespace agent {
namespace {

common::Expected<std::string> read_report_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return common::fail(common::ErrorKind::invalid_input,
                            "--from-report " + path + ": cannot be read");
    }
    std::ostringstream content;
    content << in.rdbuf();
    return content.str();
}

}  // namespace

int report_command(CommandArgs args) {
    CLI::App app("sandgate report: post a run report to GitHub as check runs or statuses",
                 "sandgate report");
    GitHubFlags flags;
    std::string from_report;
    std::string sha;
    bool replay_only = false;
    add_github_options(app, flags);
    app.add_option("--from-report", from_report, "the JSON written by `sandgate run --report`");
    app.add_option("--sha", sha, "the commit the report is about");
    app.add_flag("--replay-only", replay_only, "only send what the report journal holds");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        return app.exit(error) == 0 ? 0 : k_exit_report_usage;
    }
    if (flags.repo.empty()) {
        std::fprintf(stderr, "sandgate report: --github-repo OWNER/NAME is required\n");
        return k_exit_report_usage;
    }
    if (!replay_only && (from_report.empty() || sha.empty())) {
        std::fprintf(stderr,
                     "sandgate report: --from-report and --sha are required "
                     "(or --replay-only)\n");
        return k_exit_report_usage;
    }
    std::vector<github::JobReport> jobs;
    if (!replay_only) {
        auto text = read_report_file(from_report);
        if (!text) {
            std::fprintf(stderr, "sandgate report: %s\n", text.error().message.c_str());
            return k_exit_report_usage;
        }
        auto mapped = job_reports_from_run_report(*text, sha);
        if (!mapped) {
            const std::string message =
                "--from-report " + from_report + ": " + mapped.error().message;
            std::fprintf(stderr, "sandgate report: %s\n", message.c_str());
            return k_exit_report_usage;
        }
        jobs = std::move(*mapped);
    }
    auto reporter = make_reporter(flags);
    if (!reporter) {
        std::fprintf(stderr, "sandgate report: %s\n", reporter.error().message.c_str());
        return k_exit_report_usage;
    }
    const ReportOutput output{stdout, stderr, "sandgate report"};
    const int replayed = replay_journal(*reporter, output);
    return std::max(replayed, deliver_reports(*reporter, jobs, output));
}

}  // namespace agent
