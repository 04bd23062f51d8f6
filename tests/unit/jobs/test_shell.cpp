#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "jobs/run/shell.hpp"
#include "tests/support/temp_dir.hpp"

using namespace jobs;

namespace {
// A PATH holding only fake executables named `names` (so the tests choose what exists).
std::string fake_path(const std::filesystem::path& dir, std::initializer_list<const char*> names) {
    std::filesystem::create_directories(dir);
    for (const char* name : names) {
        tests::write_file(dir / name, "#!/bin/sh\n");
        ::chmod((dir / name).c_str(), 0755);
    }
    return dir.string();
}
}  // namespace

TEST_CASE("built-in shells resolve to the runner's templates") {
    const auto dir = tests::make_temp_dir("shell");
    const auto path = fake_path(dir / "bin", {"bash", "sh", "python", "pwsh"});
    auto bash = resolve_shell("bash", path);
    REQUIRE(bash);
    CHECK(bash->program == (dir / "bin" / "bash").string());
    CHECK(bash->args ==
          std::vector<std::string>{"--noprofile", "--norc", "-eo", "pipefail", "{0}"});
    CHECK(bash->extension == ".sh");
    auto sh = resolve_shell("sh", path);
    REQUIRE(sh);
    CHECK(sh->args == std::vector<std::string>{"-e", "{0}"});
    auto python = resolve_shell("python", path);
    REQUIRE(python);
    CHECK(python->program.ends_with("/python"));
    CHECK(python->extension == ".py");
    auto pwsh = resolve_shell("pwsh", path);
    REQUIRE(pwsh);
    CHECK(pwsh->args == std::vector<std::string>{"-command", ". '{0}'"});
    CHECK(pwsh->extension == ".ps1");
}

TEST_CASE("the default shell is bash -e, or sh -e without bash") {
    const auto dir = tests::make_temp_dir("shell");
    auto with_bash = resolve_shell("", fake_path(dir / "a", {"bash", "sh"}));
    REQUIRE(with_bash);
    CHECK(with_bash->name == "bash");
    CHECK(with_bash->args == std::vector<std::string>{"-e", "{0}"});
    auto without = resolve_shell("  ", fake_path(dir / "b", {"sh"}));
    REQUIRE(without);
    CHECK(without->name == "sh");
    CHECK(without->program.ends_with("/b/sh"));
}

TEST_CASE("python falls back to python3") {
    const auto dir = tests::make_temp_dir("shell");
    auto python = resolve_shell("python", fake_path(dir / "bin", {"python3"}));
    REQUIRE(python);
    CHECK(python->program.ends_with("/python3"));
}

TEST_CASE("custom templates need {0}; missing programs are unavailable") {
    const auto dir = tests::make_temp_dir("shell");
    const auto path = fake_path(dir / "bin", {"perl", "bash"});
    auto perl = resolve_shell("perl -w \"{0}\" --flag", path);
    REQUIRE(perl);
    CHECK(perl->name == "custom");
    CHECK(perl->args == std::vector<std::string>{"-w", "{0}", "--flag"});
    CHECK(perl->extension.empty());
    auto login = resolve_shell("bash -l {0}", path);
    REQUIRE(login);
    CHECK(login->extension == ".sh");

    auto no_placeholder = resolve_shell("perl -w", path);
    REQUIRE_FALSE(no_placeholder);
    CHECK(no_placeholder.error().kind == common::ErrorKind::invalid_input);
    CHECK(no_placeholder.error().message.find("format string containing '{0}'") !=
          std::string::npos);
    auto unknown = resolve_shell("zsh", path);
    REQUIRE_FALSE(unknown);
    CHECK(unknown.error().kind == common::ErrorKind::invalid_input);
    auto missing = resolve_shell("ruby {0}", path);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().kind == common::ErrorKind::unavailable);
    CHECK(missing.error().message == "shell program 'ruby' was not found on PATH");
    CHECK_FALSE(resolve_shell("python", path));  // neither python nor python3
}

TEST_CASE("prepare_script writes the script and substitutes its path") {
    const auto dir = tests::make_temp_dir("shell");
    const auto path = fake_path(dir / "bin", {"bash", "pwsh", "perl"});
    std::filesystem::create_directory(dir / "tmp");
    auto temp = sandbox::SafeDir::open_trusted(dir / "tmp", "tmp");
    REQUIRE(temp);
    auto command = prepare_script("bash", "echo hi\n", *temp, {}, path);
    REQUIRE(command);
    CHECK(command->script.parent_path() == dir / "tmp");
    CHECK(command->script.extension() == ".sh");
    CHECK(tests::read_file(command->script) == "echo hi\n");
    CHECK(command->argv.back() == command->script.string());
    CHECK(command->argv.size() == 6);

    auto ps = prepare_script("pwsh", "Write-Host hi", *temp, {}, path);
    REQUIRE(ps);
    CHECK(ps->argv[2] == ". '" + ps->script.string() + "'");
    CHECK(tests::read_file(ps->script)
              .starts_with("$ErrorActionPreference = 'stop'\nWrite-Host hi\n"));

    auto custom = prepare_script("perl {0} {0}", "print 1", *temp, {}, path);
    REQUIRE(custom);
    CHECK(custom->argv == std::vector<std::string>{(dir / "bin" / "perl").string(),
                                                   custom->script.string(),
                                                   custom->script.string()});
    CHECK(custom->script.extension().empty());
    CHECK(command->script != custom->script);
}

TEST_CASE("split_arguments honours double quotes") {
    CHECK(split_arguments("  a  \"b c\" d\\\"e \"\"") ==
          std::vector<std::string>{"a", "b c", "d\"e", ""});
}
