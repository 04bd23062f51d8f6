#include <catch2/catch.hpp>
#include <cstdlib>

#include "sandbox/process/run.hpp"

TEST_CASE("child_environment: allowlist, then passed names, then set pairs") {
    const sandbox::Environment host = {
        {"PATH", "/usr/bin"},
        {"HOME", "/root"},
        {"GITHUB_TOKEN", "secret"},
        {"LANG", "C.UTF-8"},
        {"LC_ALL", "C"},
        {"TZ", "UTC"},
        {"TERM", "xterm"},
        {"SSH_AUTH_SOCK", "/tmp/agent"},
        {"LD_PRELOAD", "/evil.so"},
        {"PATHX", "no"},
    };
    const auto env = sandbox::child_environment(host, {"HOME", "UNSET_NAME"},
                                                {{"PATH", "/bin"}, {"CI", "true"}});
    const sandbox::Environment expected = {{"PATH", "/bin"}, {"LANG", "C.UTF-8"}, {"LC_ALL", "C"},
                                           {"TZ", "UTC"},    {"TERM", "xterm"},   {"HOME", "/root"},
                                           {"CI", "true"}};
    CHECK(env == expected);
    CHECK(sandbox::child_environment(host, {}, {}).size() == 5);
}

TEST_CASE("current_environment reads this process's environment") {
    ::setenv("SANDGATE_ENV_TEST", "a=b", 1);
    const auto env = sandbox::current_environment();
    bool found = false;
    for (const auto& [name, value] : env)
        found = found || (name == "SANDGATE_ENV_TEST" && value == "a=b");
    CHECK(found);
    ::unsetenv("SANDGATE_ENV_TEST");
}
