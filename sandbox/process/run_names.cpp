// The names of run.hpp's enums and the posture text: what a RunResult says, apart from the
// process machinery of run.cpp (so that readers of results, the broker protocol's among them,
// need none of it).
#include "sandbox/process/run.hpp"

namespace sandbox {

std::string posture_text(const RunResult& result) {
    return result.sandbox_json.empty() ? result.sandbox.dump() : result.sandbox_json;
}

std::string_view to_string(SandboxMode mode) {
    switch (mode) {
        case SandboxMode::off:
            return "off";
        case SandboxMode::bwrap:
            return "bwrap";
        case SandboxMode::container:
            return "container";
    }
    return "off";
}

std::string_view to_string(NetworkMode mode) {
    return mode == NetworkMode::none ? "none" : "host";
}

std::string_view to_string(TreeKill kill) {
    switch (kill) {
        case TreeKill::cgroup:
            return "cgroup";
        case TreeKill::subreaper:
            return "subreaper";
        case TreeKill::pidns:
            return "pidns";
    }
    return "subreaper";
}

std::string_view to_string(RunErrorKind kind) {
    switch (kind) {
        case RunErrorKind::timeout:
            return "timeout";
        case RunErrorKind::spawn_failed:
            return "spawn_failed";
        case RunErrorKind::invalid_request:
            return "invalid_request";
        case RunErrorKind::sandbox_unavailable:
            return "sandbox_unavailable";
        case RunErrorKind::cancelled:
            return "cancelled";
    }
    return "spawn_failed";
}

}  // namespace sandbox
