// The layout's rules check themselves (ARCHITECTURE.md, The parts): cmake/check_layering.cmake,
// run at every build, fails on an include a folder's library may not depend on, naming the
// file and line; the real tree passes it; the places ARCHITECTURE.md names exist.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

tests::Ran check_layering(const std::filesystem::path& tree) {
    const std::string command =
        "cmake -DSOURCE_DIR=" + tests::shell_quote(tree.string()) + " -P " +
        tests::shell_quote(std::string(SANDGATE_SOURCE_DIR) + "/cmake/check_layering.cmake") +
        " 2>&1";
    tests::Ran ran;
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) ran.output.append(buffer, n);
    const int status = ::pclose(pipe);
    ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    UNSCOPED_INFO(ran.output);
    return ran;
}

}  // namespace

TEST_CASE("the source tree keeps its folders' dependencies one way") {
    CHECK(check_layering(SANDGATE_SOURCE_DIR).exit_code == 0);
}

TEST_CASE("an include against the layering fails the check, naming the file and line") {
    const auto tree = tests::make_temp_dir("layering");
    tests::write_file(tree / "common/base.hpp", "#pragma once\n#include <string>\n");
    tests::write_file(tree / "sandbox/process/run.hpp",
                      "#pragma once\n#include \"common/base.hpp\"\n#include \"sandbox/x.hpp\"\n");
    tests::write_file(tree / "jobs/run/step.cpp", "#include \"sandbox/process/run.hpp\"\n");
    tests::write_file(tree / "agent/cli/cli.cpp",
                      "#include \"github/auth.hpp\"\n#include \"jobs/run/step.hpp\"\n");
    CHECK(check_layering(tree).exit_code == 0);  // every include above is allowed

    SECTION("sandbox may not know jobs") {
        tests::write_file(tree / "sandbox/wrap/wrap.cpp",
                          "#include <vector>\n\n#include \"jobs/run/step.hpp\"\n");
        const auto ran = check_layering(tree);
        CHECK(ran.exit_code != 0);
        CHECK(ran.output.find("sandbox/wrap/wrap.cpp:3: sandbox/ may not include "
                              "jobs/run/step.hpp") != std::string::npos);
    }
    SECTION("github may not know jobs or sandbox") {
        tests::write_file(tree / "github/client.hpp", "#include \"sandbox/process/run.hpp\"\n");
        const auto ran = check_layering(tree);
        CHECK(ran.exit_code != 0);
        CHECK(ran.output.find("github/client.hpp:1: github/ may not include "
                              "sandbox/process/run.hpp") != std::string::npos);
    }
    SECTION("common may not know anything of the project") {
        tests::write_file(tree / "common/base.hpp", "#include \"agent/cli/cli.hpp\"\n");
        const auto ran = check_layering(tree);
        CHECK(ran.exit_code != 0);
        CHECK(ran.output.find("common/base.hpp:1: common/ may not include agent/cli/cli.hpp") !=
              std::string::npos);
    }
}

TEST_CASE("the places ARCHITECTURE.md sends a newcomer to exist") {
    const std::filesystem::path root = SANDGATE_SOURCE_DIR;
    const std::string map = tests::read_file(root / "ARCHITECTURE.md");
    for (const char* path :
         {"jobs/expr/expr.hpp", "sandbox/broker/broker.hpp", "agent/store/job_store.hpp",
          "agent/daemon/daemon_queue.hpp", "agent/gate/cmd_gate.cpp", "common/error.hpp",
          "sandbox/access/safe_access.hpp", "sandbox/process/run.hpp"}) {
        INFO(path);
        CHECK(std::filesystem::is_regular_file(root / path));
    }
    for (const char* folder : {"jobs/expr/", "sandbox/broker/", "agent/store/", "agent/gate/"}) {
        INFO(folder);
        CHECK(map.find(std::string("`") + folder + "`") != std::string::npos);
    }
}
