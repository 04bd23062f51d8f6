// `sandgate doctor`: the real checks of this machine, as text and JSON, and its exit status.
#include <simdjson.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "sandbox/wrap/doctor.hpp"
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
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
        result.text.append(buffer, n);
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
    for (const char* name :
         {"bwrap", "user_namespaces", "apparmor_restrict_unprivileged_userns", "seccomp", "cgroup2",
          "memory_limit", "pids_limit", "podman", "docker"})
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
        CHECK(std::string_view(find_check(doc, "bwrap")["detail"]).find("bubblewrap") !=
              std::string_view::npos);
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

TEST_CASE("doctor --packages lists what the workflows ask apt for and what this machine lacks") {
    std::vector<std::string> unresolved;
    const auto asks = sandbox::package_asks(
        "jobs:\n"
        "  build:\n"
        "    steps:\n"
        "      - run: sudo apt-get update && sudo apt-get install -y -q --no-install-recommends "
        "coreutils dpkg=1.21\n"
        "      - run: |\n"
        "          sudo apt install -o Dpkg::Options::=--force-confnew \\\n"
        "            sandgate-no-such-package 'libfoo-dev/bookworm' ${{ matrix.extra }} # comment\n"
        "          apt-get -y remove not-this-one; apt-cache policy nor-this\n"
        "          echo apt-get install; echo done\n",
        "ci.yml", unresolved);
    REQUIRE(asks.size() == 4);
    CHECK(asks[0].package == "coreutils");
    CHECK(asks[0].where == "ci.yml:4");
    CHECK(asks[1].package == "dpkg");
    CHECK(asks[2].package == "sandgate-no-such-package");
    CHECK(asks[2].where == "ci.yml:6");
    CHECK(asks[3].package == "libfoo-dev");
    REQUIRE(unresolved.size() == 1);
    CHECK(unresolved[0] == "ci.yml:6: ${{ matrix.extra }}");

    const auto dir = tests::make_temp_dir("doctor-packages");
    tests::write_file(dir / ".github/workflows/ci.yml",
                      "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: sudo apt-get install -y coreutils sandgate-no-such-package\n");
    tests::write_file(dir / ".github/workflows/other.yaml",
                      "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: sudo apt install dpkg\n");
    const auto text =
        run_shell(std::string(SANDGATE_BINARY) + " doctor --packages -C " + dir.string() + " 2>&1");
    INFO(text.text);
    CHECK(text.status == 1);
    CHECK(text.text.find("ok       coreutils") != std::string::npos);
    CHECK(text.text.find("MISSING  sandgate-no-such-package") != std::string::npos);
    CHECK(text.text.find(".github/workflows/ci.yml:6") != std::string::npos);
    CHECK(text.text.find("ok       dpkg") != std::string::npos);
    CHECK(text.text.find("administrator") != std::string::npos);
    CHECK(text.text.find("sudo apt-get install sandgate-no-such-package\n") != std::string::npos);
    const auto json =
        run_shell(std::string(SANDGATE_BINARY) + " doctor --packages --json -C " + dir.string());
    CHECK(json.status == 1);
    simdjson::dom::parser parser;
    auto doc = parser.parse(json.text);
    REQUIRE(!doc.error());
    auto missing = doc.value()["missing"].get_array();
    REQUIRE(!missing.error());
    CHECK(missing.value().size() == 1);
    tests::write_file(dir / ".github/workflows/ci.yml", "on: push\njobs: {}\n");
    CHECK(
        run_shell(std::string(SANDGATE_BINARY) + " doctor --packages -C " + dir.string()).status ==
        0);
    CHECK(run_shell(std::string(SANDGATE_BINARY) + " doctor --packages -C " +
                    (dir / "none").string() + " 2>&1")
              .status == 125);
}
