#include "agent/hook/runner_hook.hpp"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "jobs/workflow/yaml_tree.hpp"

namespace agent {
namespace {

using common::ErrorKind;
using common::fail;
namespace dom = simdjson::dom;

// One printable line, whatever the input's strings hold.
common::Error field_error(std::string_view field, std::string_view what) {
    return {ErrorKind::invalid_input,
            jobs::one_line(std::string(field) + ": " + std::string(what))};
}

// An optional string member: absent or null gives "".
common::Expected<std::string> string_at(dom::object object, std::string_view key,
                                        std::string_view field) {
    dom::element element;
    if (object[key].get(element) != simdjson::SUCCESS || element.is_null()) return std::string();
    std::string_view text;
    if (element.get_string().get(text) != simdjson::SUCCESS)
        return std::unexpected(field_error(field, "must be a string"));
    return std::string(text);
}

common::Expected<std::vector<std::string>> strings_at(dom::object object, std::string_view key,
                                                      std::string_view field) {
    std::vector<std::string> out;
    dom::element element;
    if (object[key].get(element) != simdjson::SUCCESS || element.is_null()) return out;
    dom::array array;
    if (element.get_array().get(array) != simdjson::SUCCESS)
        return std::unexpected(field_error(field, "must be an array of strings"));
    for (dom::element item : array) {
        std::string_view text;
        if (item.get_string().get(text) != simdjson::SUCCESS)
            return std::unexpected(field_error(field, "must be an array of strings"));
        out.emplace_back(text);
    }
    return out;
}

// prependPath: a list of directories, or one string of them joined with ':' (both reach hooks,
// depending on the runner's version).
common::Expected<std::vector<std::string>> path_list_at(dom::object object, std::string_view key,
                                                        std::string_view field) {
    std::string_view joined;
    if (object[key].get_string().get(joined) != simdjson::SUCCESS)
        return strings_at(object, key, field);
    std::vector<std::string> out;
    for (std::size_t start = 0; start <= joined.size();) {
        const std::size_t end = std::min(joined.find(':', start), joined.size());
        if (end > start) out.emplace_back(joined.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

common::Expected<std::map<std::string, std::string>> env_at(dom::object object,
                                                            std::string_view key,
                                                            std::string_view field) {
    std::map<std::string, std::string> out;
    dom::element element;
    if (object[key].get(element) != simdjson::SUCCESS || element.is_null()) return out;
    dom::object map;
    if (element.get_object().get(map) != simdjson::SUCCESS)
        return std::unexpected(field_error(field, "must be an object of strings"));
    for (auto [name, value] : map) {
        std::string_view text;
        if (value.get_string().get(text) != simdjson::SUCCESS)
            return std::unexpected(
                field_error(std::string(field) + "." + std::string(name), "must be a string"));
        out.emplace(std::string(name), std::string(text));
    }
    return out;
}

// Volumes. The runner's (systemMountVolumes): absolute host paths; the engine's socket and
// named volumes are dropped with a warning. The workflow's (userMountVolumes) are kept as given
// for the allowlist to judge (runner_hook_run.cpp); only a relative target is an error here.
enum class Volumes { runner, workflow };
common::Expected<std::vector<HookMount>> mounts_at(dom::object object, std::string_view key,
                                                   std::string_view field, Volumes origin) {
    std::vector<HookMount> out;
    dom::element element;
    if (object[key].get(element) != simdjson::SUCCESS || element.is_null()) return out;
    dom::array array;
    if (element.get_array().get(array) != simdjson::SUCCESS)
        return std::unexpected(field_error(field, "must be an array"));
    for (dom::element item : array) {
        dom::object volume;
        if (item.get_object().get(volume) != simdjson::SUCCESS)
            return std::unexpected(field_error(field, "entries must be objects"));
        auto source =
            string_at(volume, "sourceVolumePath", std::string(field) + ".sourceVolumePath");
        auto target =
            string_at(volume, "targetVolumePath", std::string(field) + ".targetVolumePath");
        if (!source) return std::unexpected(source.error());
        if (!target) return std::unexpected(target.error());
        bool read_only = false;
        if (volume["readOnly"].get(read_only) != simdjson::SUCCESS) read_only = false;
        if (origin == Volumes::workflow) {
            if (!target->starts_with("/"))
                return std::unexpected(
                    field_error(field, "targetVolumePath '" + *target + "' is not absolute"));
            out.push_back({*source, *target, sandbox::Access::read_only});
            continue;
        }
        if (source->ends_with("docker.sock") || target->ends_with("docker.sock")) {
            spdlog::warn("{}: not binding the container engine's socket {}", field, *source);
            continue;
        }
        if (!source->starts_with("/")) {
            spdlog::warn("{}: named volume '{}' is not supported; not mounted", field, *source);
            continue;
        }
        if (!target->starts_with("/"))
            return std::unexpected(
                field_error(field, "targetVolumePath '" + *target + "' is not absolute"));
        out.push_back(
            {*source, *target, read_only ? sandbox::Access::read_only : sandbox::Access::writable});
    }
    return out;
}

// The runner splits its argument string on single spaces (after wrapping a node action's
// script path in double quotes); its own process launcher would have parsed the string as
// .NET does: blanks separate, double quotes group, 2n backslashes before a quote are n and the
// quote groups, 2n+1 are n and a literal quote, other backslashes are literal.
std::vector<std::string> rejoined_arguments(const std::vector<std::string>& pieces) {
    std::string line;
    for (const auto& piece : pieces) line += (line.empty() ? "" : " ") + piece;
    std::vector<std::string> out;
    std::string current;
    bool quoted = false, started = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        std::size_t slashes = 0;
        for (; i < line.size() && line[i] == '\\'; ++i) ++slashes;
        if (i < line.size() && line[i] == '"') {
            current.append(slashes / 2, '\\');
            if (slashes % 2 == 1)
                current.push_back('"');
            else
                quoted = !quoted;
            started = true;
            continue;
        }
        current.append(slashes, '\\');
        started = started || slashes > 0;
        if (i == line.size()) break;
        if (!quoted && (line[i] == ' ' || line[i] == '\t')) {
            if (started) out.push_back(std::move(current));
            current.clear();
            started = false;
            continue;
        }
        current.push_back(line[i]);
        started = true;
    }
    if (started) out.push_back(std::move(current));
    return out;
}

common::Expected<HookCommand> command_from(std::string_view name) {
    if (name == "prepare_job") return HookCommand::prepare_job;
    if (name == "cleanup_job") return HookCommand::cleanup_job;
    if (name == "run_script_step") return HookCommand::run_script_step;
    if (name == "run_container_step") return HookCommand::run_container_step;
    return std::unexpected(
        field_error("command", "unknown hook command '" + std::string(name) + "'"));
}

common::Expected<std::optional<HookJob>> state_from(dom::object root) {
    dom::object state, ours;
    if (root["state"].get(state) != simdjson::SUCCESS) return std::optional<HookJob>();
    if (state["sandgate"].get(ours) != simdjson::SUCCESS) return std::optional<HookJob>();
    HookJob job;
    auto id = string_at(ours, "job", "state.sandgate.job");
    auto image = string_at(ours, "image", "state.sandgate.image");
    auto mounts = mounts_at(ours, "mounts", "state.sandgate.mounts", Volumes::runner);
    auto env = env_at(ours, "env", "state.sandgate.env");
    if (!id || !image || !mounts || !env)
        return std::unexpected(!id       ? id.error()
                               : !image  ? image.error()
                               : !mounts ? mounts.error()
                                         : env.error());
    if (id->empty() || id->find_first_not_of("0123456789abcdef") != std::string::npos)
        return std::unexpected(field_error("state.sandgate.job", "not a job id"));
    job.id = *id;
    job.image = *image;
    job.mounts = std::move(*mounts);
    job.env = std::move(*env);
    return std::optional<HookJob>(std::move(job));
}

common::Expected<void> parse_prepare(dom::object args, HookInput& input) {
    dom::object container;
    if (args["container"].get(container) == simdjson::SUCCESS) {
        auto image = string_at(container, "image", "args.container.image");
        auto env = env_at(container, "environmentVariables", "args.container.environmentVariables");
        if (!image) return std::unexpected(image.error());
        if (!env) return std::unexpected(env.error());
        input.prepare.image = *image;
        input.prepare.env = std::move(*env);
        auto system = mounts_at(container, "systemMountVolumes",
                                "args.container.systemMountVolumes", Volumes::runner);
        auto user = mounts_at(container, "userMountVolumes", "args.container.userMountVolumes",
                              Volumes::workflow);
        if (!system) return std::unexpected(system.error());
        if (!user) return std::unexpected(user.error());
        input.prepare.mounts = std::move(*system);
        input.prepare_user_mounts = std::move(*user);
    }
    dom::array services;
    if (args["services"].get(services) == simdjson::SUCCESS) {
        for (dom::element service : services) {
            std::string_view name;
            if (service["contextName"].get(name) != simdjson::SUCCESS) name = "service";
            input.services.emplace_back(name);
        }
    }
    return {};
}

common::Expected<void> parse_step(dom::object args, HookInput& input) {
    HookStep& step = input.step;
    auto image = string_at(args, "image", "args.image");
    auto entry = string_at(args, "entryPoint", "args.entryPoint");
    auto entry_args = strings_at(args, "entryPointArgs", "args.entryPointArgs");
    auto env = env_at(args, "environmentVariables", "args.environmentVariables");
    auto path = path_list_at(args, "prependPath", "args.prependPath");
    auto workdir = string_at(args, "workingDirectory", "args.workingDirectory");
    if (!image) return std::unexpected(image.error());
    if (!entry) return std::unexpected(entry.error());
    if (!entry_args) return std::unexpected(entry_args.error());
    if (!env) return std::unexpected(env.error());
    if (!path) return std::unexpected(path.error());
    if (!workdir) return std::unexpected(workdir.error());
    if (entry->empty() && input.command == HookCommand::run_script_step)
        return std::unexpected(field_error("args.entryPoint", "is required"));
    if (!workdir->starts_with("/"))
        return std::unexpected(
            field_error("args.workingDirectory", "must be an absolute container path"));
    step = {*image,
            *entry,
            rejoined_arguments(*entry_args),
            std::move(*env),
            std::move(*path),
            *workdir,
            {},
            {}};
    auto system = mounts_at(args, "systemMountVolumes", "args.systemMountVolumes", Volumes::runner);
    auto user = mounts_at(args, "userMountVolumes", "args.userMountVolumes", Volumes::workflow);
    if (!system) return std::unexpected(system.error());
    if (!user) return std::unexpected(user.error());
    step.mounts = std::move(*system);
    step.user_mounts = std::move(*user);
    return {};
}

}  // namespace

common::Expected<HookInput> parse_hook_input(std::string_view json) {
    dom::parser parser;
    dom::element root_element;
    if (auto error = parser.parse(json.data(), json.size()).get(root_element))
        return fail(ErrorKind::invalid_input,
                    std::string("hook input is not JSON: ") + simdjson::error_message(error));
    dom::object root;
    if (root_element.get_object().get(root))
        return fail(ErrorKind::invalid_input, "hook input must be a JSON object");
    std::string_view name;
    if (root["command"].get_string().get(name))
        return std::unexpected(field_error("command", "is required and must be a string"));
    HookInput input;
    auto command = command_from(name);
    if (!command) return std::unexpected(command.error());
    input.command = *command;
    auto response = SANDGATE_TRY(string_at(root, "responseFile", "responseFile"));
    input.response_file = response;
    auto state = state_from(root);
    if (!state) return std::unexpected(state.error());
    input.state = std::move(*state);
    dom::object args;
    const bool has_args = root["args"].get(args) == simdjson::SUCCESS;
    if (input.command == HookCommand::prepare_job) {
        if (input.response_file.empty())
            return std::unexpected(
                field_error("responseFile", "prepare_job needs a response file"));
        if (has_args) SANDGATE_CHECK(parse_prepare(args, input));
    } else if (input.command != HookCommand::cleanup_job) {
        if (!has_args) return std::unexpected(field_error("args", "is required for this command"));
        SANDGATE_CHECK(parse_step(args, input));
    }
    return input;
}

}  // namespace agent
