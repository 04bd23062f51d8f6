// `sandgate sandboxes create|exec|list|get|rm|cancel`: the agent API's job sandboxes (api.hpp)
// from the command line, over the same connection flags as `sandgate jobs` (api_client.hpp).
// create/list/get/rm/cancel print the API's JSON answer; exec is sandbox_exec_client.hpp.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "agent/api/exec_registry.hpp"
#include "agent/cli/api_client.hpp"
#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/sandbox_exec_client.hpp"
#include "agent/cli/terminal_text.hpp"
#include "agent/cli/units.hpp"
#include "agent/sandboxes/sandbox_records.hpp"

namespace agent {

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* k_footer =
    "Exit status: 0 done; 1 the API answered with an error (printed as one line: HTTP status\n"
    "and the API's message); 2 bad usage (nothing sent); 3 the agent cannot be reached.\n"
    "exec exits as `sandgate exec` does: the step's status, 128+N for signal N, 124 timeout,\n"
    "130 cancelled (SIGINT/SIGTERM/SIGHUP cancel the step on the agent: 128+N), 125 nothing\n"
    "ran (agent unreachable, sandbox unknown, exec refused or malformed); 2 bad flags.\n";

int usage(const std::string& message) {
    std::fprintf(stderr, "sandgate sandboxes: %s\n", one_line(message).c_str());
    return k_api_exit_usage;
}

int print(const ApiTarget& target, std::string_view method, const std::string& path,
          const std::string& payload = "") {
    return print_api_answer(target, "sandgate sandboxes", method, path, payload);
}

struct CreateOptions {
    std::string repository, sha, job_id, ttl, network;
    std::optional<std::int64_t> run_id, attempt, job;
};

void add_create_options(CLI::App& create, CreateOptions& o) {
    create.add_option("--repository", o.repository, "identity: owner/name")->required();
    create.add_option("--sha", o.sha, "identity: the commit")->required();
    create.add_option("--run-id", o.run_id, "identity: the workflow run id");
    create.add_option("--attempt", o.attempt, "identity: the run attempt");
    create.add_option("--job-id", o.job_id, "identity: the workflow job")->required();
    create.add_option("--ttl", o.ttl, "lifetime (1s to 24h; the agent's default otherwise)");
    create.add_option("--network", o.network, "none or host (default: the agent's job.network)");
    create.add_option("--job", o.job, "the agent job whose record gets the sandbox's evidence");
}

common::Expected<Json> create_body(const CreateOptions& o) {
    using common::ErrorKind;
    using common::fail;
    for (auto [flag, value] : {std::pair{"--repository", &o.repository}, std::pair{"--sha", &o.sha},
                               std::pair{"--job-id", &o.job_id}})
        if (value->empty())
            return fail(ErrorKind::invalid_input, std::string(flag) + ": must not be empty");
    SandboxIdentity identity{.repository = o.repository, .sha = o.sha, .job_id = o.job_id};
    if (o.run_id) identity.run_id = *o.run_id;
    if (o.attempt) identity.attempt = *o.attempt;
    Json body{{"identity", identity_json(identity)}};
    if (!o.ttl.empty()) {
        auto ttl = parse_duration(o.ttl);
        if (!ttl) return fail(ErrorKind::invalid_input, "--ttl: " + ttl.error().message);
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(*ttl).count();
        if (seconds < 1 || seconds > 24 * 3600)
            return fail(ErrorKind::invalid_input, "--ttl: 1s to 24h");
        body["ttl_s"] = seconds;
    }
    if (!o.network.empty()) {
        if (o.network != "none" && o.network != "host")
            return fail(ErrorKind::invalid_input, "--network " + o.network + ": none or host");
        body["network"] = o.network;
    }
    if (o.job) body["job"] = *o.job;
    return body;
}

}  // namespace

int sandboxes_command(CommandArgs args) {
    CLI::App app{
        "talk to a running `sandgate agent` about its job sandboxes: create, exec, list, "
        "get, rm, cancel",
        "sandgate sandboxes"};
    app.require_subcommand(1);
    app.footer(k_footer);
    ApiTargetOptions target_options;
    add_api_target_options(app, target_options);
    CreateOptions create_options;
    auto* create = app.add_subcommand("create", "make a sandbox; prints it (JSON, with its id)");
    add_create_options(*create, create_options);
    SandboxExecOptions exec_options;
    auto* exec = app.add_subcommand(
        "exec", "run one step in a sandbox: ID [OPTIONS] (-- PROGRAM [ARGS...] | --shell SCRIPT)");
    add_sandbox_exec_options(*exec, exec_options);
    std::string id, exec_id;
    auto* list = app.add_subcommand("list", "list the sandboxes");
    auto* get = app.add_subcommand("get", "show one sandbox (with its running exec)");
    get->add_option("id", id, "the sandbox")->required();
    auto* rm = app.add_subcommand("rm", "destroy a sandbox (stops its running exec)");
    rm->add_option("id", id, "the sandbox")->required();
    auto* cancel = app.add_subcommand("cancel", "cancel a running exec: ID EXEC_ID");
    cancel->add_option("id", id, "the sandbox")->required();
    cancel->add_option("exec_id", exec_id, "the exec")->required();
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == 0) return app.exit(error);  // --help
        if (app.get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&error))
            return usage(
                app.remaining().empty()
                    ? std::string("a subcommand is required: create, exec, list, get, rm, cancel")
                    : "unknown subcommand '" + app.remaining().front() +
                          "' (create, exec, list, get, rm, cancel)");
        return usage(error.what());
    }
    // Ids go into the request path: the agent's own alphabet only (its ids are sb-/ex- + hex).
    const std::string& sandbox_id = exec->parsed() ? exec_options.sandbox : id;
    if (!create->parsed() && !list->parsed() && !valid_exec_id(sandbox_id))
        return usage("ID " + sandbox_id + ": 1 to 64 letters, digits, '.', '_' or '-'");
    if (cancel->parsed() && !valid_exec_id(exec_id))
        return usage("EXEC_ID " + exec_id + ": 1 to 64 letters, digits, '.', '_' or '-'");
    common::Expected<Json> body = Json::object();
    if (create->parsed()) body = create_body(create_options);
    if (exec->parsed()) body = sandbox_exec_body(exec_options);
    if (!body) return usage(body.error().message);
    auto target = resolve_api_target(target_options);
    if (!target) return usage(target.error().message);
    if (create->parsed()) return print(*target, "POST", "/v1/sandboxes", body->dump());
    if (exec->parsed()) return run_sandbox_exec(*target, exec_options, std::move(*body));
    if (list->parsed()) return print(*target, "GET", "/v1/sandboxes");
    const std::string path = "/v1/sandboxes/" + id;
    if (get->parsed()) return print(*target, "GET", path);
    if (rm->parsed()) return print(*target, "DELETE", path);
    return print(*target, "POST", path + "/execs/" + exec_id + "/cancel");
}

}  // namespace agent
