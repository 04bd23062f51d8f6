// `sandgate doctor [--json]`: what this machine allows (sandbox/wrap/doctor.hpp). Exit 0 when the
// default posture (--sandbox bwrap --network none) can be had, 1 when it cannot, 2 on usage.
// `sandgate doctor --packages [-C DIR]`: the apt packages DIR's workflows ask for and which
// this machine lacks. Exit 0 when it has them all, 1 when some are missing, 125 when the
// workflows cannot be read.
#include <cstdio>
#include <filesystem>

#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "sandbox/wrap/doctor.hpp"
#include "sandbox/wrap/identity.hpp"

namespace agent {
namespace {

enum class ReportFormat { text, json };

int packages_report(const std::string& directory, ReportFormat format) {
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(directory, ec).lexically_normal();
    auto report = sandbox::workflow_packages(absolute);
    if (!report) {
        std::fprintf(stderr, "sandgate doctor --packages: %s\n", report.error().message.c_str());
        return 125;
    }
    if (format == ReportFormat::json)
        std::printf("%s\n", report->to_json().dump(2).c_str());
    else
        std::fputs(report->to_text().c_str(), stdout);
    return report->complete() ? 0 : 1;
}

}  // namespace

int doctor_command(CommandArgs args) {
    CLI::App app("sandgate doctor: what this machine allows the sandbox to use", "sandgate doctor");
    bool json = false;
    std::string user;
    bool packages = false;
    std::string directory = ".";
    app.add_flag("--json", json, "print one JSON document");
    app.add_flag(
        "--packages", packages,
        "list the apt packages the repository's workflows install and those this machine lacks");
    app.add_option("-C,--directory", directory, "the repository for --packages (default: .)");
    app.add_option("--sandbox-user", user,
                   "the host identity to report, as `sandgate exec` takes it");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        return app.exit(error) == 0 ? 0 : 2;
    }
    if (packages) return packages_report(directory, json ? ReportFormat::json : ReportFormat::text);
    std::optional<sandbox::Owner> identity;
    if (!user.empty()) {
        auto parsed = sandbox::parse_host_identity(user, "--sandbox-user");
        if (!parsed) {
            std::fprintf(stderr, "sandgate doctor: %s\n", parsed.error().message.c_str());
            return 2;
        }
        identity = *parsed;
    }
    const auto report = sandbox::run_doctor(identity);
    if (json) {
        std::printf("%s\n", report.to_json().dump(2).c_str());
    } else {
        std::fputs(report.to_text().c_str(), stdout);
    }
    return report.default_available ? 0 : 1;
}

}  // namespace agent
