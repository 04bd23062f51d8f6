#pragma once
// Helpers shared by the tests that drive the sandgate binary: run it in a directory and
// capture what it printed; `sandgate run` in the suite's posture; read a run's JSON report.

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "jobs/expr/value.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace tests {

struct Ran {
    int exit_code = -1;
    std::string output;  // stdout and stderr, interleaved
};

inline std::string shell_quote(const std::string& text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

// Runs `sandgate ARGS...` with `dir` as its working directory.
inline Ran run_sandgate(const std::filesystem::path& dir, const std::vector<std::string>& args) {
    std::string command = "cd " + shell_quote(dir.string()) + " && " + shell_quote(SANDGATE_BINARY);
    for (const auto& arg : args) command += " " + shell_quote(arg);
    command += " 2>&1";
    Ran ran;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return ran;
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) ran.output.append(buffer, n);
    const int status = ::pclose(pipe);
    ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return ran;
}

// `sandgate run ARGS... --sandbox bwrap` (the default posture), or `--sandbox off` inside the
// suite's own wrap run, where a nested bubblewrap is not available. The output is attached
// to the next assertion.
inline Ran run_workflows(const std::filesystem::path& dir, const std::vector<std::string>& args) {
    std::vector<std::string> all{"run"};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--sandbox", under_wrap() ? "off" : "bwrap"});
    auto ran = run_sandgate(dir, all);
    UNSCOPED_INFO(ran.output);
    return ran;
}

// The JSON document `sandgate run --report` wrote.
inline jobs::Value read_report(const std::filesystem::path& path) {
    auto value = jobs::parse_json(read_file(path));
    REQUIRE(value.has_value());
    return *value;
}

}  // namespace tests
