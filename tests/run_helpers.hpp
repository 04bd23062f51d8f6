#pragma once
// Helpers shared by test_run.cpp and test_run_act.cpp: run the sandgate binary in a
// directory and capture what it printed.

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace tests {

struct Ran {
    int exit_code = -1;
    std::string output;  // stdout and stderr, interleaved
};

inline std::string shell_quote(const std::string& text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'') out += "'\\''";
        else out += c;
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

}  // namespace tests
