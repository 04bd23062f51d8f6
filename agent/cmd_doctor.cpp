// `sandgate doctor [--json]`: what this machine allows (sandbox/doctor.hpp). Exit 0 when the
// default posture (--sandbox bwrap --network none) can be had, 1 when it cannot, 2 on usage.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "agent/commands.hpp"
#include "sandbox/doctor.hpp"

namespace agent {

int doctor_command(CommandArgs args) {
    CLI::App app("sandgate doctor: what this machine allows the sandbox to use", "sandgate doctor");
    bool json = false;
    app.add_flag("--json", json, "print one JSON document");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        return app.exit(error) == 0 ? 0 : 2;
    }
    const auto report = sandbox::run_doctor();
    if (json) {
        std::printf("%s\n", report.to_json().dump(2).c_str());
    } else {
        std::fputs(report.to_text().c_str(), stdout);
    }
    return report.default_available ? 0 : 1;
}

}  // namespace agent
