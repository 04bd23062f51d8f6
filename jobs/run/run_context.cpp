#include "jobs/run/run_context.hpp"

#include <unistd.h>

#include "jobs/workflow/yaml_value.hpp"
#include "sandbox/wrap/tool_cache.hpp"

namespace jobs {
namespace {

std::string text_of(const Value* value) {
    return value == nullptr ? std::string() : value->to_display_string();
}

const Value* path_get(const Value& root, std::initializer_list<std::string_view> keys) {
    const Value* current = &root;
    for (auto key : keys) {
        current = current->get(key);
        if (current == nullptr) return nullptr;
    }
    return current;
}

std::string ref_name(const std::string& ref) {
    for (std::string_view prefix : {"refs/heads/", "refs/tags/"}) {
        if (ref.starts_with(prefix)) return ref.substr(prefix.size());
    }
    if (ref.starts_with("refs/pull/")) return ref.substr(10);
    return ref;
}

Value typed_input(const InputSpec& spec, const Value& value) {
    if (spec.type == "boolean") {
        if (value.is_boolean()) return value;
        if (value.is_string()) return Value(equals_ignore_case(value.as_string(), "true"));
        return Value(value.truthy());
    }
    if (spec.type == "number") return value.is_number() ? value : Value(value.to_number());
    if (spec.type == "string" || spec.type == "choice" || spec.type == "environment")
        return value.is_string() ? value : Value(value.to_display_string());
    return value;
}

}  // namespace

std::string env_text(const Value& value) {
    return value.is_string() ? value.as_string() : value.to_display_string();
}

Object github_context(const RunSettings& settings, const Workflow& workflow,
                      std::string_view job_id, const std::filesystem::path& workspace) {
    const Value& event = settings.event;
    std::string ref = settings.repo.ref;
    std::string sha = settings.repo.sha;
    std::string head_ref, base_ref;
    if (settings.event_name.starts_with("pull_request")) {
        head_ref = text_of(path_get(event, {"pull_request", "head", "ref"}));
        base_ref = text_of(path_get(event, {"pull_request", "base", "ref"}));
        if (const Value* number = event.get("number"))
            ref = "refs/pull/" + number->to_display_string() + "/merge";
        else if (!head_ref.empty())
            ref = "refs/heads/" + head_ref;
    } else if (const Value* event_ref = event.get("ref"); event_ref && event_ref->is_string()) {
        ref = event_ref->as_string();
    }
    if (const Value* after = event.get("after"); after && after->is_string() && sha.empty())
        sha = after->as_string();
    std::string repository = settings.repo.repository;
    if (const Value* full = path_get(event, {"repository", "full_name"}); full && full->is_string())
        repository = full->as_string();
    std::string owner = repository.substr(0, repository.find('/'));
    Object github;
    github.set("event_name", settings.event_name);
    github.set("event", event);
    github.set("sha", sha);
    github.set("ref", ref);
    github.set("ref_name", ref_name(ref));
    github.set("ref_type", ref.starts_with("refs/tags/") ? "tag" : "branch");
    github.set("head_ref", head_ref);
    github.set("base_ref", base_ref);
    github.set("repository", repository);
    github.set("repository_owner", owner);
    github.set("repositoryUrl",
               repository.empty() ? "" : "https://github.com/" + repository + ".git");
    github.set("actor", settings.actor);
    github.set("triggering_actor", settings.actor);
    github.set("workflow", workflow.display_name());
    github.set("workflow_ref", repository + "/" + workflow.file + "@" + ref);
    github.set("job", std::string(job_id));
    github.set("run_id", settings.run_id);
    github.set("run_number", settings.run_number);
    github.set("run_attempt", "1");
    github.set("retention_days", "0");
    github.set("workspace", workspace.string());
    github.set("action", "");
    github.set("action_path", "");
    github.set("action_ref", "");
    github.set("action_repository", "");
    github.set("server_url", "https://github.com");
    github.set("api_url", "https://api.github.com");
    github.set("graphql_url", "https://api.github.com/graphql");
    github.set("token", "");
    return github;
}

std::filesystem::path runner_workspace(const std::filesystem::path& workspace) {
    std::filesystem::path normal = workspace.lexically_normal();
    if (!normal.has_filename()) normal = normal.parent_path();
    return normal.parent_path();
}

Object runner_context(const RunSettings& settings, const std::filesystem::path& workspace) {
    Object runner;
    runner.set("os", settings.platform.os);
    runner.set("arch", settings.platform.arch);
    runner.set("name", "sandgate");
    runner.set("environment", "self-hosted");
    runner.set("temp", (settings.temp_root / "temp").string());
    // Under the wrap with a tool cache, what the step's RUNNER_TOOL_CACHE says (wrap_bwrap).
    const bool bound_cache =
        settings.policy.tool_cache && settings.policy.mode == sandbox::SandboxMode::bwrap;
    runner.set("tool_cache", bound_cache ? std::string(sandbox::k_tool_cache_mount)
                                         : (settings.temp_root / "tool_cache").string());
    runner.set("workspace",
               workspace.empty() ? std::string() : runner_workspace(workspace).string());
    runner.set("debug", "");
    return runner;
}

sandbox::Environment github_environment(const Object& github, const Object& runner) {
    auto get = [&](std::string_view key) { return text_of(github.find(key)); };
    sandbox::Environment env = {
        {"CI", "true"},
        {"GITHUB_ACTIONS", "true"},
        {"GITHUB_ACTOR", get("actor")},
        {"GITHUB_TRIGGERING_ACTOR", get("triggering_actor")},
        {"GITHUB_API_URL", get("api_url")},
        {"GITHUB_BASE_REF", get("base_ref")},
        {"GITHUB_EVENT_NAME", get("event_name")},
        {"GITHUB_GRAPHQL_URL", get("graphql_url")},
        {"GITHUB_HEAD_REF", get("head_ref")},
        {"GITHUB_JOB", get("job")},
        {"GITHUB_REF", get("ref")},
        {"GITHUB_REF_NAME", get("ref_name")},
        {"GITHUB_REF_TYPE", get("ref_type")},
        {"GITHUB_REPOSITORY", get("repository")},
        {"GITHUB_REPOSITORY_OWNER", get("repository_owner")},
        {"GITHUB_RETENTION_DAYS", get("retention_days")},
        {"GITHUB_RUN_ATTEMPT", get("run_attempt")},
        {"GITHUB_RUN_ID", get("run_id")},
        {"GITHUB_RUN_NUMBER", get("run_number")},
        {"GITHUB_SERVER_URL", get("server_url")},
        {"GITHUB_SHA", get("sha")},
        {"GITHUB_WORKFLOW", get("workflow")},
        {"GITHUB_WORKFLOW_REF", get("workflow_ref")},
        {"GITHUB_WORKSPACE", get("workspace")},
        {"RUNNER_OS", text_of(runner.find("os"))},
        {"RUNNER_ARCH", text_of(runner.find("arch"))},
        {"RUNNER_NAME", text_of(runner.find("name"))},
        {"RUNNER_ENVIRONMENT", text_of(runner.find("environment"))},
        {"RUNNER_TEMP", text_of(runner.find("temp"))},
        {"RUNNER_TOOL_CACHE", text_of(runner.find("tool_cache"))},
        {"RUNNER_WORKSPACE", text_of(runner.find("workspace"))},
    };
    return env;
}

common::Expected<Object> resolve_inputs(const std::vector<InputSpec>& specs, const Object& given,
                                        const EvalContext& context, InputCheck check) {
    Object out;
    for (const auto& spec : specs) {
        if (const Value* value = given.find(spec.name)) {
            out.set(spec.name, typed_input(spec, *value));
        } else if (spec.default_value) {
            auto fallback = evaluate_yaml(*spec.default_value, context);
            if (!fallback)
                return common::fail(common::ErrorKind::invalid_input, fallback.error().message);
            out.set(spec.name, typed_input(spec, *fallback));
        } else if (check == InputCheck::strict && spec.required) {
            return common::fail(
                common::ErrorKind::invalid_input,
                located(spec.mark, "the required input '" + spec.name + "' was not given"));
        } else {
            out.set(spec.name, typed_input(spec, spec.type == "boolean" ? Value(false)
                                                                        : Value(std::string())));
        }
    }
    for (const auto& [name, value] : given) {
        if (out.contains(name)) continue;
        if (check == InputCheck::strict)
            return common::fail(common::ErrorKind::invalid_input,
                                "the input '" + name + "' is not defined by the called workflow");
        out.set(name, value);
    }
    return out;
}

}  // namespace jobs
