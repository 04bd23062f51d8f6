// `sandgate sandboxes exec` (sandbox_exec_client.hpp).
#include "agent/cli/sandbox_exec_client.hpp"

#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "agent/api/exec_registry.hpp"
#include "agent/cli/assignments.hpp"
#include "agent/cli/cli11.hpp"
#include "agent/cli/interrupts.hpp"
#include "agent/cli/random_id.hpp"
#include "agent/cli/terminal_text.hpp"
#include "agent/cli/units.hpp"
#include "agent/sandboxes/sandbox_records.hpp"
#include "sandbox/broker/broker_protocol.hpp"

namespace agent {

namespace {

using Json = nlohmann::ordered_json;
using common::ErrorKind;
using common::fail;

int nothing_ran(const std::string& message) {
    std::fprintf(stderr, "sandgate sandboxes: %s\n", message.c_str());
    return k_sandbox_exec_nothing_ran;
}

enum class ZeroDuration { allowed, refused };

// Milliseconds of a duration flag; zero refused too when `zero` says so.
common::Expected<std::int64_t> duration_ms(std::string_view flag, const std::string& text,
                                           ZeroDuration zero) {
    auto parsed = parse_duration(text);
    if (!parsed)
        return fail(ErrorKind::invalid_input, std::string(flag) + ": " + parsed.error().message);
    if (zero == ZeroDuration::refused && parsed->count() <= 0)
        return fail(ErrorKind::invalid_input, std::string(flag) + ": must be positive");
    return parsed->count();
}

// The sandbox's identity as its GET answer shows it; the error line (exit 125) otherwise.
std::expected<Json, std::string> fetch_identity(const ApiTarget& target, const std::string& id) {
    auto response = api_request(target, "GET", "/v1/sandboxes/" + id);
    if (!response) return std::unexpected(response.error().message);
    if (!response->ok()) return std::unexpected(api_error_line(*response));
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(simdjson::padded_string(response->body)).get(doc) != simdjson::SUCCESS ||
        !doc.is_object())
        return std::unexpected("the agent's answer for sandbox " + id + " is not a JSON object");
    std::string error;
    auto identity = parse_identity(doc, &error);
    if (!identity) return std::unexpected("the agent's answer for sandbox " + id + ": " + error);
    return identity_json(*identity);
}

void print_stream(int fd, std::string_view name, const sandbox::StreamResult& stream) {
    write_all(fd, stream.head);
    if (stream.truncated) {
        const auto kept = stream.head.size() + stream.tail.size();
        std::fprintf(
            stderr,
            "\nsandgate sandboxes: %llu bytes of the step's %.*s dropped here (--output-limit)\n",
            static_cast<unsigned long long>(stream.bytes > kept ? stream.bytes - kept : 0),
            static_cast<int>(name.size()), name.data());
    }
    write_all(fd, stream.tail);
}

// The exec answer (200) printed: the API's JSON, or the step's streams; returns the status.
int report(const ApiResponse& response, const SandboxExecOptions& options,
           const InterruptGuard& interrupts) {
    simdjson::dom::parser parser;
    simdjson::dom::element result;
    if (parser.parse(simdjson::padded_string(response.body))["result"].get(result) !=
        simdjson::SUCCESS)
        return nothing_ran("the agent's exec answer has no result");
    auto decoded = sandbox::decode_run_result(simdjson::minify(result));
    if (!decoded) return nothing_ran("the agent's exec answer: " + decoded.error().message);
    if (options.json) {
        std::fwrite(response.body.data(), 1, response.body.size(), stdout);
        std::fflush(stdout);
    } else {
        print_stream(STDOUT_FILENO, "stdout", decoded->out);
        print_stream(STDERR_FILENO, "stderr", decoded->err);
    }
    if (decoded->error)
        std::fprintf(stderr, "sandgate sandboxes: %s\n", decoded->error->message.c_str());
    const auto sig = interrupts.received();
    if (sig && decoded->error && decoded->error->kind == sandbox::RunErrorKind::cancelled)
        return 128 + *sig;
    return decoded->exit_status();
}

}  // namespace

void add_sandbox_exec_options(CLI::App& exec, SandboxExecOptions& o) {
    exec.add_option("id", o.sandbox, "the sandbox")->required();
    exec.add_option("--exec-id", o.exec_id,
                    "the exec's id, for `sandboxes cancel` (default: chosen)");
    add_assignment_option(exec, "--env", o.env, "NAME=VALUE for the step (repeatable)");
    exec.add_option("--cwd", o.cwd, "working directory inside the sandbox (default: its root)");
    exec.add_option("--timeout", o.timeout, "stop the step after DURATION (90s, 5m, 1h)");
    exec.add_option("--kill-grace", o.kill_grace, "SIGTERM to SIGKILL delay when stopped (5s)");
    exec.add_option("--output-limit", o.output_limit, "bytes of each stream kept (262144)");
    exec.add_option("--stdin-text", o.stdin_text, "feed TEXT on stdin");
    auto* shell = exec.add_option("--shell", o.shell, "run SCRIPT with bash -eo pipefail -c");
    exec.add_flag("--json", o.json, "print the API's answer instead of the step's output");
    exec.add_option("argv", o.argv, "PROGRAM [ARGS...] (after --)")->excludes(shell);
}

common::Expected<Json> sandbox_exec_body(const SandboxExecOptions& o) {
    Json body = Json::object();
    if (!o.exec_id.empty() && !valid_exec_id(o.exec_id))
        return fail(ErrorKind::invalid_input,
                    "--exec-id " + o.exec_id + ": 1 to 64 letters, digits, '.', '_' or '-'");
    if (!o.shell.empty())
        body["shell"] = o.shell;
    else if (!o.argv.empty() && !o.argv.front().empty())
        body["argv"] = o.argv;
    else
        return fail(ErrorKind::invalid_input,
                    "nothing to run: give `-- PROGRAM [ARGS...]` or --shell");
    Json env = Json::object();
    for (auto& [name, value] : SANDGATE_TRY(parse_assignments(o.env, "--env", BareName::refused)))
        env[name] = value;
    if (!env.empty()) body["env"] = std::move(env);
    if (!o.cwd.empty()) body["cwd"] = o.cwd;
    if (!o.timeout.empty()) {
        auto ms = SANDGATE_TRY(duration_ms("--timeout", o.timeout, ZeroDuration::refused));
        body["timeout_ms"] = ms;
    }
    if (!o.kill_grace.empty()) {
        auto ms = SANDGATE_TRY(duration_ms("--kill-grace", o.kill_grace, ZeroDuration::allowed));
        if (ms > sandbox::k_max_kill_grace.count())
            return fail(ErrorKind::invalid_input, "--kill-grace: at most 10m");
        body["kill_grace_ms"] = ms;
    }
    if (!o.output_limit.empty()) {
        auto limit = parse_bytes(o.output_limit);
        if (!limit)
            return fail(ErrorKind::invalid_input, "--output-limit: " + limit.error().message);
        if (*limit > sandbox::k_max_broker_output_limit)
            return fail(
                ErrorKind::invalid_input,
                "--output-limit: at most " + std::to_string(sandbox::k_max_broker_output_limit));
        body["output_limit"] = *limit;
    }
    if (o.stdin_text) {
        if (o.stdin_text->size() > sandbox::k_max_stdin_bytes)
            return fail(
                ErrorKind::invalid_input,
                "--stdin-text: more than " + std::to_string(sandbox::k_max_stdin_bytes) + " bytes");
        body["stdin_text"] = *o.stdin_text;
    }
    return body;
}

int run_sandbox_exec(const ApiTarget& target, const SandboxExecOptions& options, Json body) {
    ::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill us while the step runs
    // From here on SIGINT/SIGTERM/SIGHUP cancel the step on the agent instead of killing us.
    auto interrupts = InterruptGuard::install();
    if (!interrupts) return nothing_ran(interrupts.error().message);
    auto identity = fetch_identity(target, options.sandbox);
    if (!identity) return nothing_ran(identity.error());
    std::string exec_id = options.exec_id;
    if (exec_id.empty()) {
        auto chosen = random_id("ex-", 8);
        if (!chosen) return nothing_ran(chosen.error().message);
        exec_id = *chosen;
    }
    if (const auto sig = (*interrupts)->received()) {
        std::fprintf(stderr, "sandgate sandboxes: interrupted before the step was sent\n");
        return 128 + *sig;
    }
    body["identity"] = std::move(*identity);
    body["exec_id"] = exec_id;
    const std::string base = "/v1/sandboxes/" + options.sandbox;
    bool hung_up = false;  // our own on_cancel decided to hang up (not an error's kind)
    const auto on_cancel = [&] {
        std::fprintf(stderr, "sandgate sandboxes: interrupted: cancelling exec %s\n",
                     exec_id.c_str());
        auto answer = api_request(target, "POST", base + "/execs/" + exec_id + "/cancel");
        // 409: it has just finished, its answer is on the way. Otherwise (not started yet,
        // the agent unreachable) hanging up is what stops it.
        if (answer && (answer->status == 200 || answer->status == 409))
            return AfterCancel::wait_for_answer;
        hung_up = true;
        return AfterCancel::hang_up;
    };
    auto response = api_request_cancellable(
        target, "POST", base + "/exec", body.dump(-1, ' ', false, Json::error_handler_t::replace),
        (*interrupts)->token(), on_cancel);
    if (!response && hung_up) {
        std::fprintf(stderr,
                     "sandgate sandboxes: interrupted: hung up on the agent, which stops exec %s\n",
                     exec_id.c_str());
        return 128 + (*interrupts)->received().value_or(SIGINT);
    }
    if (!response) return nothing_ran(response.error().message);
    if (response->status != 200) return nothing_ran(api_error_line(*response));
    return report(*response, options, **interrupts);
}

}  // namespace agent
