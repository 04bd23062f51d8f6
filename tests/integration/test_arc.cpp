// contrib/arc/ (the actions-runner-controller recipe): no cluster runs here, so this checks
// its invariants: values.yaml parses with the project's YAML reader, the variables it sets
// are the ones the runner and the hook read (index.js and `sandgate hook`'s sources), the
// paths agree with the image's Dockerfile, and the security context holds what bubblewrap
// needs and nothing more.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "jobs/workflow/yaml_tree.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const std::filesystem::path k_arc = SANDGATE_SOURCE_DIR "/contrib/arc";

const jobs::YamlNode& at(const jobs::YamlNode& node, std::string_view key) {
    const jobs::YamlNode* found = node.find(key);
    INFO("key " << key);
    REQUIRE(found != nullptr);
    return *found;
}

// NAME -> value of the runner container's env list.
std::map<std::string, std::string> env_of(const jobs::YamlNode& container) {
    std::map<std::string, std::string> env;
    for (const auto& item : at(container, "env").items)
        env[at(item, "name").text] = at(item, "value").text;
    return env;
}

// Every variable name `pattern`'s first group matches in the files.
std::set<std::string> names_read(const std::vector<std::filesystem::path>& files,
                                 const std::regex& pattern) {
    std::set<std::string> names;
    for (const auto& file : files) {
        const std::string text = tests::read_file(file);
        for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it)
            names.insert((*it)[1].str());
    }
    return names;
}

}  // namespace

TEST_CASE("arc: the scale set's runner container sets what the runner and the hook read") {
    auto values = jobs::load_yaml_file((k_arc / "values.yaml").string());
    REQUIRE(values);
    const auto& spec = at(at(*values, "template"), "spec");
    const auto& containers = at(spec, "containers");
    REQUIRE(containers.items.size() == 1);
    const auto& runner = containers.items[0];
    CHECK(at(runner, "name").text == "runner");  // the chart's name for the runner container
    CHECK(at(runner, "command").items.at(0).text == "/home/runner/run.sh");
    CHECK_FALSE(values->find("containerMode"));  // the default mode: the hook, not dind or k8s
    const auto env = env_of(runner);
    CHECK(env.at("ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER") == "true");

    // The SANDGATE_* variables set are read by the hook script or by `sandgate hook`.
    std::vector<std::filesystem::path> hook_sources = {SANDGATE_SOURCE_DIR
                                                       "/contrib/runner-hooks/index.js"};
    for (const auto& entry : std::filesystem::directory_iterator(SANDGATE_SOURCE_DIR "/agent"))
        if (entry.path().filename().string().starts_with("runner_hook") ||
            entry.path().filename() == "cmd_hook.cpp")
            hook_sources.push_back(entry.path());
    const auto read = names_read(
        hook_sources,
        std::regex(R"((?:process\.env\.|process\.env\[['"]|getenv\(")(SANDGATE_[A-Z0-9_]+))"));
    CHECK(read.count("SANDGATE_BIN") == 1);
    for (const auto& [name, value] : env) {
        INFO(name << "=" << value);
        if (name.starts_with("SANDGATE_")) CHECK(read.count(name) == 1);
    }

    // The paths are where the image puts the hook and the binaries.
    const std::string dockerfile = tests::read_file(k_arc / "Dockerfile");
    CHECK(dockerfile.find("COPY contrib/runner-hooks/index.js " +
                          env.at("ACTIONS_RUNNER_CONTAINER_HOOKS") + "\n") != std::string::npos);
    CHECK(env.at("SANDGATE_BIN") == "/usr/local/bin/sandgate");
    CHECK(dockerfile.find("-C /usr/local/bin \\\n      sandgate sandgate-full sandgate-broker "
                          "sandgate-agent") != std::string::npos);
    // The image's own defaults say the same.
    for (const char* name : {"ACTIONS_RUNNER_CONTAINER_HOOKS",
                             "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER", "SANDGATE_BIN"}) {
        INFO(name);
        CHECK(dockerfile.find(std::string(name) + "=" + env.at(name)) != std::string::npos);
    }
}

TEST_CASE("arc: the pod's security context is what bubblewrap needs, nothing more") {
    auto values = jobs::load_yaml_file((k_arc / "values.yaml").string());
    REQUIRE(values);
    const auto& spec = at(at(*values, "template"), "spec");
    CHECK(at(spec, "hostUsers").scalar_type() == jobs::YamlNode::ScalarType::boolean);
    CHECK_FALSE(at(spec, "hostUsers").as_bool());
    CHECK(at(at(spec, "securityContext"), "runAsNonRoot").as_bool());
    CHECK(at(at(spec, "securityContext"), "runAsUser").text == "1001");
    const auto& context = at(spec.find("containers")->items.at(0), "securityContext");
    CHECK(at(context, "procMount").text == "Unmasked");
    CHECK(at(at(context, "seccompProfile"), "type").text == "Unconfined");
    CHECK(at(at(context, "appArmorProfile"), "type").text == "Unconfined");
    CHECK_FALSE(at(context, "allowPrivilegeEscalation").as_bool());
    CHECK(at(at(context, "capabilities"), "drop").items.at(0).text == "ALL");
    CHECK_FALSE(context.find("privileged"));
    CHECK(at(context, "capabilities").find("add") == nullptr);
}

TEST_CASE("arc: the runner image builds the product on Ubuntu 24.04 and adds bubblewrap") {
    const std::string dockerfile = tests::read_file(k_arc / "Dockerfile");
    CHECK(dockerfile.find("FROM ubuntu:24.04 AS build\n") != std::string::npos);
    CHECK(dockerfile.find("./scripts/install-deps.sh --product") != std::string::npos);
    CHECK(dockerfile.find("./scripts/build-product.sh") != std::string::npos);
    CHECK(dockerfile.find("./scripts/action/package-release.sh /build /out") != std::string::npos);
    CHECK(dockerfile.find("FROM ${RUNNER_IMAGE} AS runner\n") != std::string::npos);
    CHECK(dockerfile.find("ARG RUNNER_IMAGE=ghcr.io/actions/actions-runner:") != std::string::npos);
    CHECK(dockerfile.find("apt-get install -y --no-install-recommends bubblewrap") !=
          std::string::npos);
    CHECK(dockerfile.find("xargs -a /usr/local/bin/runtime-packages") != std::string::npos);
    CHECK(dockerfile.rfind("\nUSER runner\n") != std::string::npos);
}
