#pragma once
// The official runner's types for a container hook's prepare_job response (Newtonsoft.Json,
// camelCase; ../shared/corpora/runner-container-hooks/README.md): what deserializing it would
// refuse fails the check here. Shared by test_runner_hook and the runner-side conformance test.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace tests {

// ContainerInfo-like: {id: string, network: string, ports?: list of strings}.
inline void check_hook_container(const nlohmann::json& container) {
    REQUIRE(container.is_object());
    CHECK(container.at("id").is_string());
    CHECK(container.at("network").is_string());
    if (container.contains("ports")) {
        REQUIRE(container.at("ports").is_array());
        for (const auto& port : container.at("ports")) CHECK(port.is_string());
    }
}

// The whole response: state any value (handed back verbatim), isAlpine a required boolean,
// context.container an object, context.services a list (an object fails the runner).
inline void check_prepare_response(const nlohmann::json& response) {
    REQUIRE(response.is_object());
    CHECK(response.contains("state"));
    REQUIRE(response.contains("isAlpine"));
    CHECK(response.at("isAlpine").is_boolean());
    REQUIRE(response.contains("context"));
    const auto& context = response.at("context");
    check_hook_container(context.at("container"));
    if (context.contains("services")) {
        REQUIRE(context.at("services").is_array());
        for (const auto& service : context.at("services")) check_hook_container(service);
    }
}

}  // namespace tests
