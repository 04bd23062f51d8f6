#include "jobs/run/shell.hpp"

#include <unistd.h>

#include <random>

namespace jobs {
namespace {

using common::ErrorKind;
using common::fail;

struct Builtin {
    std::string_view name;
    std::string_view args;
    std::string_view extension;
};

constexpr Builtin k_builtins[] = {
    {"bash", "--noprofile --norc -eo pipefail {0}", ".sh"},
    {"sh", "-e {0}", ".sh"},
    {"python", "{0}", ".py"},
    {"pwsh", "-command \". '{0}'\"", ".ps1"},
    {"powershell", "-command \". '{0}'\"", ".ps1"},
};

const Builtin* find_builtin(std::string_view name) {
    for (const auto& builtin : k_builtins) {
        if (builtin.name == name) return &builtin;
    }
    return nullptr;
}

common::Expected<std::filesystem::path> require_program(std::string_view program,
                                                        std::string_view path_env) {
    auto found = find_program(program, path_env);
    if (found.empty()) {
        return fail(ErrorKind::unavailable,
                    "shell program '" + std::string(program) + "' was not found on PATH");
    }
    return found;
}

std::string random_name() {
    std::random_device device;
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    for (int i = 0; i < 4; ++i) {
        auto word = device();
        for (int j = 0; j < 8; ++j, word >>= 4) out += k_hex[word & 0xF];
    }
    return out;
}

std::string fix_up(const ShellTemplate& shell, std::string_view script) {
    if (shell.name != "pwsh" && shell.name != "powershell") return std::string(script);
    return "$ErrorActionPreference = 'stop'\n" + std::string(script) +
           "\nif ((Test-Path -LiteralPath variable:\\LASTEXITCODE)) { exit $LASTEXITCODE }";
}

std::string replace_placeholder(std::string text, const std::string& script) {
    for (auto pos = text.find("{0}"); pos != std::string::npos;
         pos = text.find("{0}", pos + script.size())) {
        text.replace(pos, 3, script);
    }
    return text;
}

}  // namespace

std::filesystem::path find_program(std::string_view program, std::string_view path_env) {
    if (program.empty()) return {};
    if (program.find('/') != std::string_view::npos) {
        const std::string path(program);
        return ::access(path.c_str(), X_OK) == 0 ? std::filesystem::path(path)
                                                 : std::filesystem::path();
    }
    while (true) {
        const auto colon = path_env.find(':');
        auto dir = path_env.substr(0, colon);
        if (dir.empty()) dir = ".";
        const auto candidate = std::filesystem::path(dir) / program;
        std::error_code ec;
        // trusted path: a stat, not an open; what it finds runs inside the wrap
        if (std::filesystem::is_regular_file(candidate, ec) &&
            ::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
        if (colon == std::string_view::npos) return {};
        path_env.remove_prefix(colon + 1);
    }
}

std::vector<std::string> split_arguments(std::string_view text) {
    std::vector<std::string> args;
    std::string current;
    bool in_token = false;
    bool quoted = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\\' && i + 1 < text.size() && text[i + 1] == '"') {
            current += '"';
            in_token = true;
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
            in_token = true;
        } else if ((c == ' ' || c == '\t') && !quoted) {
            if (in_token) args.push_back(std::move(current));
            current.clear();
            in_token = false;
        } else {
            current += c;
            in_token = true;
        }
    }
    if (in_token) args.push_back(std::move(current));
    return args;
}

common::Expected<ShellTemplate> resolve_shell(std::string_view shell, std::string_view path_env) {
    const auto first = shell.find_first_not_of(" \t");
    shell = first == std::string_view::npos ? std::string_view() : shell.substr(first);
    while (!shell.empty() && (shell.back() == ' ' || shell.back() == '\t')) shell.remove_suffix(1);
    if (shell.empty()) {  // the runner's default: bash -e, else sh -e
        const bool has_bash = !find_program("bash", path_env).empty();
        auto program = SANDGATE_TRY(require_program(has_bash ? "bash" : "sh", path_env));
        return ShellTemplate{program.string(), {"-e", "{0}"}, ".sh", has_bash ? "bash" : "sh"};
    }
    const auto space = shell.find_first_of(" \t");
    const auto command = shell.substr(0, space);
    const auto rest =
        space == std::string_view::npos ? std::string_view() : shell.substr(space + 1);
    const auto* builtin = find_builtin(command);
    if (!rest.empty() || builtin == nullptr) {
        if (rest.find("{0}") == std::string_view::npos) {
            return fail(ErrorKind::invalid_input,
                        "Invalid shell option '" + std::string(shell) +
                            "'. Shell must be a valid built-in (bash, sh, python, pwsh, "
                            "powershell) or a format string containing '{0}'");
        }
        auto program = SANDGATE_TRY(require_program(command, path_env));
        const auto extension = builtin ? std::string(builtin->extension) : std::string();
        return ShellTemplate{program.string(), split_arguments(rest), extension,
                             builtin ? std::string(builtin->name) : std::string("custom")};
    }
    std::string_view program_name = builtin->name;
    if (program_name == "python" && find_program("python", path_env).empty())
        program_name = "python3";
    auto program = SANDGATE_TRY(require_program(program_name, path_env));
    return ShellTemplate{program.string(), split_arguments(builtin->args),
                         std::string(builtin->extension), std::string(builtin->name)};
}

common::Expected<ShellCommand> prepare_script(std::string_view shell, std::string_view script,
                                              const sandbox::SafeDir& temp_dir,
                                              const sandbox::CreateOptions& options,
                                              std::string_view path_env) {
    auto resolved = SANDGATE_TRY(resolve_shell(shell, path_env));
    ShellCommand command;
    command.script_name = random_name() + resolved.extension;
    command.script = temp_dir.path() / command.script_name;
    SANDGATE_CHECK(temp_dir.create_file(command.script_name, fix_up(resolved, script), options,
                                        "the step's script in $RUNNER_TEMP"));
    command.argv.push_back(resolved.program);
    for (const auto& arg : resolved.args)
        command.argv.push_back(replace_placeholder(arg, command.script.string()));
    return command;
}

}  // namespace jobs
