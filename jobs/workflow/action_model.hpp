#pragma once
// The model of a local action's action.yml (or action.yaml): composite and JavaScript
// (node*) actions run; docker actions parse but cannot run offline without a container arm.
// Errors are one line, "file:line:col: message", of kind invalid_input.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

enum class ActionKind { composite, node, docker };

struct Action {
    std::filesystem::path directory;  // where action.yml lives (GITHUB_ACTION_PATH)
    std::string file;                 // the manifest, as named in errors
    std::string repository;           // a remote action's OWNER/REPO; empty for a local one
    std::string ref;                  // a remote action's ref, as written
    std::string name;
    std::vector<InputSpec> inputs;    // default_value as written (may hold expressions)
    std::vector<OutputSpec> outputs;  // composite: value expressions; node: value empty
    ActionKind kind = ActionKind::composite;
    std::string using_;       // as written: composite, node16, node20, docker
    std::vector<Step> steps;  // composite
    // node: paths relative to `directory`; pre/post empty when absent.
    std::string main, pre, post;
    std::optional<Text> pre_if, post_if;  // default: always()
    YamlNode env;                         // runs.env (docker)
};

// Loads DIR/action.yml (or DIR/action.yaml). DIR lies beneath `root`, a tree steps may have
// written (the workspace of a `uses: ./my-action`): the manifest is read through root's fd, a
// regular file reached without a link, at most 4 MiB (sandbox/access/safe_access.hpp). Neither
// there: invalid_input "Can't find 'action.yml' or 'action.yaml' under 'DIR'..." (the runner's
// line); a link, FIFO or directory in its place: "DIR/action.yml is not a regular file".
common::Expected<Action> load_action(const std::filesystem::path& root,
                                     const std::filesystem::path& dir);
common::Expected<Action> parse_action(std::string_view text, std::string_view file,
                                      const std::filesystem::path& dir);

}  // namespace jobs
