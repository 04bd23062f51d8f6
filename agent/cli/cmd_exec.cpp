// sandgate exec: run one command through sandbox::run, bounded in time and output, its whole
// process tree killed afterwards. Exit status: the command's; 128+N for signal N; 124 on
// timeout; 125 for a bad request or a refused sandbox (nothing ran); 126 not executable;
// 127 not found; 128+N when sandgate itself got SIGINT, SIGTERM or SIGHUP (the command's tree
// is stopped first).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/assignments.hpp"
#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/interrupts.hpp"
#include "agent/cli/policy_options.hpp"
#include "agent/cli/terminal_text.hpp"
#include "agent/cli/units.hpp"
#include "sandbox/process/result_json.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/wrap/netns.hpp"
#include "sandbox/wrap/wrap.hpp"

namespace agent {
namespace {

constexpr int k_exit_refused = 125;

struct ExecOptions {
    std::string timeout;
    std::string kill_grace = "5s";
    std::string output_limit = std::to_string(sandbox::k_default_output_limit);
    std::string cwd;
    std::vector<std::string> env;
    std::vector<std::string> pass_env;
    std::optional<std::string> stdin_text;
    std::string stdin_file;
    std::string shell;
    bool json = false;
    std::string result_file;
    std::vector<std::string> argv;
    PolicyOptions policy;
};

void add_options(CLI::App& app, ExecOptions& o) {
    app.add_option("--timeout", o.timeout, "kill the command after DURATION (90s, 5m, 1h)");
    app.add_option("--kill-grace", o.kill_grace, "SIGTERM to SIGKILL delay on timeout (5s)");
    app.add_option("--output-limit", o.output_limit, "bytes of each stream kept (262144)");
    app.add_option("--cwd", o.cwd, "working directory of the command");
    add_assignment_option(app, "--env", o.env, "NAME=VALUE for the command (repeatable)");
    app.add_option("--pass-env", o.pass_env, "pass this variable through (repeatable)")
        ->allow_extra_args(false);
    auto* text = app.add_option("--stdin-text", o.stdin_text, "feed TEXT on stdin");
    app.add_option("--stdin-file", o.stdin_file, "feed this file (<= 1000000 bytes) on stdin")
        ->excludes(text);
    auto* shell = app.add_option("--shell", o.shell, "run SCRIPT with sh -c");
    app.add_flag("--json", o.json, "print one JSON document describing the run on stdout");
    app.add_option("--result-file", o.result_file,
                   "also write that JSON document to FILE (output still streams live)");
    add_policy_options(app, o.policy);
    app.add_option("argv", o.argv, "PROGRAM [ARGS...] (after --)")->excludes(shell);
}

std::string read_stdin_file(const std::string& path, std::string& error) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        error = "--stdin-file " + path + ": " + std::strerror(errno);
        return {};
    }
    std::ifstream in(path, std::ios::binary);
    std::string data(sandbox::k_max_stdin_bytes + 1, '\0');
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    if (in.bad()) {
        error = "--stdin-file " + path + ": cannot read it";
        return {};
    }
    data.resize(static_cast<std::size_t>(in.gcount()));
    if (data.size() > sandbox::k_max_stdin_bytes) {
        error = "--stdin-file " + path + ": more than " +
                std::to_string(sandbox::k_max_stdin_bytes) + " bytes";
        return {};
    }
    return data;
}

common::Expected<sandbox::RunRequest> make_request(const ExecOptions& o) {
    using common::ErrorKind;
    using common::fail;
    sandbox::RunRequest request;
    if (!o.shell.empty()) {
        request.argv = {"/bin/sh", "-c", o.shell};
    } else if (!o.argv.empty() && !o.argv.front().empty()) {
        request.argv = o.argv;
    } else {
        return fail(ErrorKind::invalid_input,
                    "nothing to run: give `-- PROGRAM [ARGS...]` or --shell");
    }
    if (!o.timeout.empty()) {
        auto timeout = parse_duration(o.timeout);
        if (!timeout)
            return fail(ErrorKind::invalid_input, "--timeout: " + timeout.error().message);
        if (timeout->count() <= 0)
            return fail(ErrorKind::invalid_input, "--timeout: must be positive");
        request.timeout = *timeout;
    }
    auto grace = parse_duration(o.kill_grace);
    if (!grace) return fail(ErrorKind::invalid_input, "--kill-grace: " + grace.error().message);
    request.kill_grace = *grace;
    auto limit = parse_bytes(o.output_limit);
    if (!limit) return fail(ErrorKind::invalid_input, "--output-limit: " + limit.error().message);
    if (*limit > sandbox::k_max_output_limit)
        return fail(ErrorKind::invalid_input,
                    "--output-limit: at most " + std::to_string(sandbox::k_max_output_limit));
    request.output_limit = static_cast<std::size_t>(*limit);
    if (!o.cwd.empty()) {
        struct stat st {};
        if (::stat(o.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            // Most likely a path seen inside an earlier run (its HOME or TMPDIR): say so.
            if (o.policy.sandbox == "bwrap")
                SANDGATE_CHECK(sandbox::refuse_private_scratch(o.cwd, "--cwd"));
            return fail(ErrorKind::invalid_input, "--cwd " + o.cwd + ": no such directory");
        }
        request.cwd = o.cwd;
    }
    const sandbox::Environment set =
        SANDGATE_TRY(parse_assignments(o.env, "--env", BareName::refused));
    for (const auto& name : o.pass_env)
        if (name.empty() || name.find('=') != std::string::npos)
            return fail(ErrorKind::invalid_input,
                        "--pass-env " + name + ": expected a variable name");
    request.env = sandbox::child_environment(sandbox::current_environment(), o.pass_env, set);
    if (o.stdin_text) {
        if (o.stdin_text->size() > sandbox::k_max_stdin_bytes)
            return fail(
                ErrorKind::invalid_input,
                "--stdin-text: more than " + std::to_string(sandbox::k_max_stdin_bytes) + " bytes");
        request.stdin_text = *o.stdin_text;
    } else if (!o.stdin_file.empty()) {
        std::string error;
        std::string data = read_stdin_file(o.stdin_file, error);
        if (!error.empty()) return fail(ErrorKind::invalid_input, error);
        request.stdin_text = std::move(data);
    }
    auto policy = to_policy(o.policy);
    if (!policy) return std::unexpected(policy.error());
    request.policy = *policy;
    return request;
}

// Without --json the command's output goes live to our own stdout and stderr.
class LiveOutput : public sandbox::OutputObserver {
public:
    void on_output(sandbox::Stream stream, std::string_view chunk) override {
        const int fd = stream == sandbox::Stream::out ? STDOUT_FILENO : STDERR_FILENO;
        bool& broken = stream == sandbox::Stream::out ? m_out_broken : m_err_broken;
        // A closed reader: keep running, stop copying.
        if (!broken && write_all(fd, chunk) == WriteOutcome::reader_gone) broken = true;
    }

private:
    bool m_out_broken = false;
    bool m_err_broken = false;
};

// Temp file beside the destination, then rename: a reader never sees half a document.
common::Expected<void> write_result_file(const std::string& path, const std::string& doc) {
    const std::string temp = path + ".tmp";
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        out << doc << '\n';
        if (!out.flush())
            return common::fail(common::ErrorKind::permanent,
                                "--result-file: cannot write " + temp);
    }
    if (std::rename(temp.c_str(), path.c_str()) != 0)
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("--result-file: " + path));
    return {};
}

// Whether the command line keeps the default wrap's network (bwrap, --network none), read
// before CLI11 parses it (~0.1 ms) so that the namespace is made meanwhile
// (sandbox/wrap/netns.hpp). Only the options' own spellings count; a wrong guess either way costs
// at most a namespace made for nothing or one made later, by bwrap.
bool wants_loopback_netns(CommandArgs args) {
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string_view arg = args[i];
        if (arg == "--") break;
        if (arg == "--help" || arg == "-h") return false;
        const auto value_of = [&](std::string_view name) -> std::optional<std::string_view> {
            if (arg == name) return i + 1 < args.size() ? std::string_view(args[i + 1]) : "";
            if (arg.size() > name.size() && arg.starts_with(name) && arg[name.size()] == '=')
                return arg.substr(name.size() + 1);
            return std::nullopt;
        };
        if (const auto mode = value_of("--sandbox"); mode && *mode != "bwrap") return false;
        if (const auto network = value_of("--network"); network && *network != "none") return false;
    }
    return true;
}

}  // namespace

int exec_command(CommandArgs args) {
    std::optional<sandbox::LoopbackNetns> early_netns;
    if (wants_loopback_netns(args)) early_netns.emplace();
    CLI::App app{
        "Run one command bounded in time and output; its whole process tree is killed "
        "afterwards.\nForms: sandgate exec [OPTIONS] -- PROGRAM [ARGS...]\n"
        "       sandgate exec [OPTIONS] --shell 'SCRIPT'",
        "sandgate exec"};
    ExecOptions options;
    add_options(app, options);
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return 0;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "sandgate exec: %s\n", one_line(e.what()).c_str());
        return k_exit_refused;
    }
    auto request = make_request(options);
    if (!request) {
        std::fprintf(stderr, "sandgate exec: %s\n", one_line(request.error().message).c_str());
        return k_exit_refused;
    }
    ::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill us mid-run
    // SIGINT/SIGTERM/SIGHUP to sandgate stop the command's tree before sandgate goes.
    auto interrupts = InterruptGuard::install();
    if (!interrupts) {
        std::fprintf(stderr, "sandgate exec: %s\n", one_line(interrupts.error().message).c_str());
        return k_exit_refused;
    }
    request->cancel = &(*interrupts)->token();
    if (early_netns) request->early_netns = &*early_netns;
    // One command and no other child: this process adopts the command's orphans, so the run
    // ends only once the last of them is reaped. Under the wrap that is bwrap's pid 1, which
    // the kernel releases only after every other process of its namespace, including a
    // daemon that closed its output and would otherwise outlive the return by its own exit.
    if (sandbox::make_caller_subreaper()) request->reaper = sandbox::Reaper::caller;
    LiveOutput live;
    if (!options.json) request->observer = &live;
    const sandbox::RunResult result = sandbox::run(*request);
    // The document only when someone reads it: rendering a large head and tail costs.
    std::string doc;
    if (options.json || !options.result_file.empty())
        doc = sandbox::to_json(result).dump(-1, ' ', false,
                                            nlohmann::ordered_json::error_handler_t::replace);
    if (options.json) {
        std::fwrite(doc.data(), 1, doc.size(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
    }
    if (!options.result_file.empty()) {
        if (auto written = write_result_file(options.result_file, doc); !written)
            std::fprintf(stderr, "sandgate exec: %s\n", one_line(written.error().message).c_str());
    }
    if (result.error)
        std::fprintf(stderr, "sandgate exec: %s\n", one_line(result.error->message).c_str());
    // Interrupted: the shell's convention for the signal we got (130 for SIGINT, 143 for TERM).
    if (const auto sig = (*interrupts)->received();
        sig && result.error && result.error->kind == sandbox::RunErrorKind::cancelled)
        return 128 + *sig;
    return result.exit_status();
}

}  // namespace agent
