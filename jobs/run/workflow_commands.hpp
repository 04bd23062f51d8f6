#pragma once
// Workflow commands in step output (`::name k=v,k=v::data`), parsed and applied the way
// actions/runner does (src/Runner.Common/ActionCommand.cs TryParseV2,
// src/Runner.Worker/ActionCommandManager.cs):
//  - leading whitespace is ignored; the line must start with `::` and contain a second `::`;
//  - the command name runs to the first space and matches case-insensitively; a line naming
//    no known command is ordinary output;
//  - properties are split on `,`, each on its first `=`; empty keys or values are dropped;
//    keys match case-insensitively;
//  - data unescapes %0D, %0A, %25 in that order; property values also %3A and %2C
//    (sequential, case-sensitive replacements, exactly as the runner does).
// Commands: add-mask, group, endgroup, error, warning, notice (file, line, endLine, col,
// endColumn, title), debug, stop-commands/<token>, save-state, set-output (deprecated),
// set-env and add-path (only when ACTIONS_ALLOW_UNSECURE_COMMANDS is true; otherwise the
// step fails with the runner's message), echo on/off, add-matcher / remove-matcher (problem
// matchers, workflow_matchers.hpp: lines that are not commands are matched against them and a
// match becomes an annotation instead of output, as in the runner's OutputManager).

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jobs/run/masker.hpp"

namespace jobs {

class LogSink;
struct StepLabel;
struct ProblemMatcher;
class MatcherSet;

enum class AnnotationLevel { error, warning, notice };

// Fields left out of a designated initializer are empty (hence the {} on each).
struct Annotation {
    AnnotationLevel level = AnnotationLevel::error;
    std::string message{};
    std::optional<std::string> title{};
    std::optional<std::string> file{};
    std::optional<int> line{};
    std::optional<int> end_line{};
    std::optional<int> column{};
    std::optional<int> end_column{};
    std::optional<std::string> code{};  // problem matchers' `code`
};

std::string_view to_string(AnnotationLevel level);

// One ordered name/value list (outputs, state, env updates); set() replaces in place.
using NamedValues = std::vector<std::pair<std::string, std::string>>;
void set_named(NamedValues& values, std::string_view name, std::string_view value);
const std::string* find_named(const NamedValues& values, std::string_view name);

struct ParsedCommand {
    std::string name;        // as written
    NamedValues properties;  // unescaped values; later duplicates replace earlier ones
    std::string data;        // unescaped
    const std::string* property(std::string_view key) const;  // case-insensitive
};

// Parses the `::name props::data` syntax without judging the name. nullopt: not a command.
std::optional<ParsedCommand> parse_command(std::string_view line);

// The legacy form `##[name k=v;k=v]data`, found anywhere in the line (ActionCommand.TryParse;
// %3B %0D %0A %5D %25 unescaped). Tried after the `::` form, as the runner does.
std::optional<ParsedCommand> parse_legacy_command(std::string_view line);

// Sequential unescaping as the runner does it.
std::string unescape_data(std::string_view text);
std::string unescape_property(std::string_view text);

enum class UnsecureCommands { disabled, enabled };
enum class Echo { off, on };
enum class DebugLog { hidden, shown };

// What the commands of one step did. Values are raw (unmasked): the caller masks what it
// shows. Annotations are masked when recorded.
struct CommandEffects {
    NamedValues outputs;            // set-output
    NamedValues state;              // save-state
    NamedValues env;                // set-env
    std::vector<std::string> path;  // add-path, in order
    std::vector<Annotation> annotations;
    std::vector<std::string> failures;  // commands that fail the step (runner: CommandResult)
};

// Processes a step's output lines, in order, for one step. Not thread-safe: one per step,
// fed from one thread (the sandbox observer callback).
class CommandProcessor {
public:
    CommandProcessor(Masker& masker, LogSink& log, const StepLabel& label,
                     UnsecureCommands unsecure, Echo echo);
    ~CommandProcessor();
    CommandProcessor(const CommandProcessor&) = delete;
    CommandProcessor& operator=(const CommandProcessor&) = delete;

    // Handles one output line (without its newline): runs a command, or masks the line and
    // logs it as output. Lines inside stop-commands are output.
    void process_line(std::string_view line);

    // Annotation files under `workspace` are made relative to it (as the runner does with
    // github.workspace), so they name repository paths.
    void set_workspace(std::string workspace) { m_workspace = std::move(workspace); }
    // The action store's read-only trees (jobs/actions/action_store.hpp): an add-matcher FILE
    // beneath them (an action's own matcher file, setup-python's .github/python.json) is read there
    // too.
    void set_action_trees(std::string root) { m_action_trees = std::move(root); }

    // The job's problem matchers (borrowed; must outlive the processor): the step starts
    // with them, and add-matcher / remove-matcher change them for the job's later steps.
    void set_matchers(std::vector<ProblemMatcher>& job_matchers);

    // Closes a group left open by the step.
    void finish();

    CommandEffects& effects() { return m_effects; }

private:
    void output(std::string_view line);
    // One function per command; `raw` is the command's line, named when it fails.
    void handle(const ParsedCommand& command, std::string_view raw);
    void stop_commands(const ParsedCommand& command, std::string_view raw);
    void add_mask(const ParsedCommand& command);
    void start_group(const ParsedCommand& command);
    void end_group();
    void set_echo(const ParsedCommand& command, std::string_view raw);
    void save_value(const std::string& name, const ParsedCommand& command, std::string_view raw);
    bool unsecure_allowed(std::string_view name, std::string_view raw);
    void set_env(const ParsedCommand& command, std::string_view raw);
    void add_path(const ParsedCommand& command, std::string_view raw);
    void issue(const ParsedCommand& command, AnnotationLevel level);
    void fail(std::string_view raw, std::string message);
    void add_annotation(Annotation annotation);
    void warn(std::string message);
    std::string relative_to_workspace(const std::string& file) const;
    void add_matcher(const ParsedCommand& command, std::string_view raw);
    void remove_matcher(const ParsedCommand& command, std::string_view raw);
    bool match_problem(std::string_view line);
    std::filesystem::path rooted(const std::string& file) const;

    Masker& m_masker;
    LogSink& m_log;
    const StepLabel& m_label;
    UnsecureCommands m_unsecure;
    Echo m_echo;
    std::optional<std::string> m_stop_token;
    std::string m_workspace;
    std::string m_action_trees;
    bool m_group_open = false;
    CommandEffects m_effects;
    std::vector<ProblemMatcher>* m_job_matchers = nullptr;
    std::unique_ptr<MatcherSet> m_matchers;  // this step's, with running multi-line state
};

// `true` in the sense of .NET bool.TryParse (case-insensitive, surrounding space allowed).
bool parse_bool_true(std::string_view text);

}  // namespace jobs
