// `sandgate doctor`: the real checks of this machine, as text and JSON, and its exit status.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <simdjson.h>
#include <string>

#include "sandbox/doctor.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

struct Output {
    int status = -1;
    std::string text;
};

Output run_shell(const std::string& command) {
    Output result;
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.text.append(buffer, n);
    const int status = ::pclose(pipe);
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

const simdjson::dom::element find_check(const simdjson::dom::element& doc, std::string_view name) {
    for (auto check : doc["checks"].get_array()) {
        if (std::string_view(check["name"]) == name) return check;
    }
    FAIL("no check named " << name);
    return {};
}

}  // namespace

TEST_CASE("doctor --json reports every check and the strongest posture") {
    auto output = run_shell(std::string(SANDGATE_BINARY) + " doctor --json");
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    REQUIRE(parser.parse(output.text).get(doc) == simdjson::SUCCESS);
    for (const char* name : {"bwrap", "user_namespaces", "apparmor_restrict_unprivileged_userns",
                             "seccomp", "cgroup2", "memory_limit", "pids_limit", "podman", "docker"})
        find_check(doc, name);
    const bool available = doc["default_posture_available"].get_bool();
    const std::string_view strongest = doc["strongest_posture"];
    // The report agrees with the library's own verdict and with the exit status.
    const auto report = sandbox::run_doctor();
    CHECK(available == report.default_available);
    CHECK(strongest == report.strongest);
    CHECK(output.status == (available ? 0 : 1));
    if (available) {
        CHECK(strongest == "bwrap");
        CHECK(bool(find_check(doc, "bwrap")["ok"]));
        CHECK(std::string_view(find_check(doc, "bwrap")["detail"]).find("bubblewrap") != std::string_view::npos);
    }
}

TEST_CASE("doctor without bwrap on PATH says the default posture cannot be had and exits 1") {
    const auto empty = tests::make_temp_dir("doctor");
    auto output = run_shell("env -i PATH=" + empty.string() + " " + SANDGATE_BINARY + " doctor");
    CHECK(output.status == 1);
    CHECK(output.text.find("NO    bwrap") != std::string::npos);
    CHECK(output.text.find("bubblewrap") != std::string::npos);
    CHECK(output.text.find("NOT available") != std::string::npos);
    CHECK(output.text.find("strongest posture: off") != std::string::npos);
}

TEST_CASE("doctor rejects unknown options with exit 2") {
    CHECK(run_shell(std::string(SANDGATE_BINARY) + " doctor --bogus 2>/dev/null").status == 2);
}
