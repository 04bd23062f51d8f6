#pragma once
// The validated model of one GitHub Actions workflow file (and of a local action.yml).
//
// parse_workflow() turns YAML into this model and rejects, before anything runs, what GitHub
// rejects: the file is read as GitHub's reader does (yaml_tree.hpp), validated against
// GitHub's workflow schema (template_reader.hpp: keys, required keys, value lists, scalar
// types, where `${{ }}` may appear and what it may name, `if` conditions), and then held to
// the rules of GitHub's converters: job and step ids (IdBuilder), unknown or cyclic `needs`,
// `uses` references, `runs-on.group` prefixes, container images, matrices (empty vectors, at
// most 256 combinations after `exclude`). Every error is one line, "file:line:col: message"
// with GitHub's wording where it has one, of kind invalid_input.
//
// Values that are only known at run time (anything that may hold `${{ }}`) stay as YamlNode
// (typed, positioned) or Text (a string with its position); the runner evaluates them.
// The model owns everything it holds and is immutable once built: safe to share between
// threads.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "jobs/workflow/yaml_tree.hpp"

namespace jobs {

// A string from the file, possibly holding `${{ }}`, with where it was written.
struct Text {
    std::string value;
    SourceMark mark;
};

// A NAME: value mapping as written (env, with, outputs): in order, names unique.
using TextMap = std::vector<std::pair<std::string, Text>>;

struct RunDefaults {
    std::optional<Text> shell;
    std::optional<Text> working_directory;
};

// One input of workflow_dispatch / workflow_call, or of an action.
struct InputSpec {
    std::string name;
    std::string description;
    bool required = false;
    std::optional<YamlNode> default_value;  // typed; may hold an expression (workflow_call)
    std::string type;                       // "", string, boolean, number, choice, environment
    std::vector<std::string> options;       // type: choice
    SourceMark mark;
};

struct SecretSpec {
    std::string name;
    bool required = false;
    SourceMark mark;
};

struct OutputSpec {
    std::string name;
    Text value;  // workflow_call outputs and composite action outputs
    SourceMark mark;
};

// One event under `on:` with its filters (branches, tags, paths, types, ...), as written.
struct EventTrigger {
    std::string event;
    YamlNode filters;  // null when none
    SourceMark mark;
};

struct Triggers {
    std::vector<EventTrigger> events;
    std::vector<InputSpec> dispatch_inputs;  // workflow_dispatch.inputs
    std::vector<InputSpec> call_inputs;      // workflow_call.inputs
    std::vector<SecretSpec> call_secrets;    // workflow_call.secrets
    std::vector<OutputSpec> call_outputs;    // workflow_call.outputs

    const EventTrigger* find(std::string_view event) const;
};

// What a step does. run and uses start a process (or a composite/builtin); the others are
// GitHub's background-step controls (jobs only, never in composite actions):
// `wait: ID | [IDs]`, `wait-all:` (bare or a boolean; false waits for nothing), `cancel: ID`,
// and `parallel:` (a block of run/uses steps started as background steps and waited for
// before the next step).
enum class StepKind { run, uses, wait, wait_all, cancel, parallel };

struct Step {
    std::size_t index = 0;  // position in its job or composite action (or parallel block)
    StepKind kind = StepKind::run;
    std::optional<std::string> id;
    std::optional<Text> name;
    std::optional<Text> condition;  // `if`
    std::optional<Text> run;
    std::optional<Text> uses;
    std::optional<Text> shell;
    std::optional<Text> working_directory;
    YamlNode env;  // mapping, expression string, or null
    TextMap with;  // stringified as GitHub does (true -> "true")
    // A `with` holding `${{ insert }}` or expression keys (or itself an expression) is kept
    // whole and evaluated when the step runs; `with` is then empty.
    std::optional<YamlNode> with_template;
    std::optional<YamlNode> continue_on_error;  // boolean or expression
    std::optional<YamlNode> timeout_minutes;    // number or expression
    // `background: true` (and every step of a parallel block): the step starts and the job
    // goes on with the next one; its results join the job when it is waited for.
    bool background = false;
    // wait: the ids waited for; cancel: the one id, as written (the parser checked that each
    // names a background step before this one in the job).
    std::vector<Text> targets;
    bool wait_all = true;              // `wait-all: false` waits for nothing
    std::vector<Step> parallel;        // parallel: its steps (run or uses, background)
    std::optional<std::size_t> block;  // a step of a parallel block: the block's index
    SourceMark mark;

    // The name shown in logs: `name`, else "Run <first line of run>" or "Run <uses>", or
    // "Wait for a, b" / "Wait for all background steps" / "Cancel x".
    std::string display_name() const;
};

struct Strategy {
    YamlNode matrix;  // mapping, expression string, or null
    std::optional<YamlNode> fail_fast;
    std::optional<YamlNode> max_parallel;
    // `strategy: ${{ ... }}`: the whole strategy computed when the job starts (then the
    // fields above are unset), to an object with matrix, fail-fast and max-parallel.
    std::optional<YamlNode> computed;
    SourceMark mark;
};

enum class SecretsMode { none, map, inherit };

struct Job {
    std::string id;
    SourceMark mark;
    std::optional<Text> name;
    std::vector<std::string> needs;
    std::optional<Text> condition;      // `if`
    YamlNode runs_on;                   // string, sequence, {group, labels} mapping or expression
    std::optional<YamlNode> container;  // `container:` (an image, a mapping or an expression)
    YamlNode env;
    RunDefaults defaults;
    std::optional<Strategy> strategy;
    std::vector<Step> steps;
    TextMap outputs;
    std::optional<YamlNode> continue_on_error;
    std::optional<YamlNode> timeout_minutes;
    // A job that calls a reusable workflow (`uses:` at job level).
    std::optional<Text> uses;
    std::vector<std::pair<std::string, YamlNode>> with;
    SecretsMode secrets_mode = SecretsMode::none;
    TextMap secrets;

    bool calls_workflow() const { return uses.has_value(); }
};

struct Workflow {
    std::string file;  // as given (display name in marks)
    std::optional<Text> name;
    std::optional<Text> run_name;
    Triggers on;
    YamlNode env;
    RunDefaults defaults;
    std::vector<Job> jobs;  // in file order

    const Job* find_job(std::string_view id) const;
    // "name" when set and without expressions, else the file name.
    std::string display_name() const;
};

// GitHub's rules for the characters of job and step ids: a letter or `_`, then letters,
// digits, `-` or `_` (the reserved `__` prefix and the length are checked by the parser).
bool is_valid_identifier(std::string_view id);

// Whose rules a workflow is held to. github: GitHub's, exactly (merge gates, the agent). act:
// GitHub's but for what nektos/act also runs and `sandgate run` (act's local runner) keeps
// running: a workflow_call input without a `type` (a string, as act reads it).
enum class Dialect { github, act };

// Parses and validates a workflow from text; `file` names it in errors.
common::Expected<Workflow> parse_workflow(std::string_view text, std::string_view file,
                                          Dialect dialect = Dialect::github);
// Reads and parses a workflow file; the path as given names it.
common::Expected<Workflow> load_workflow(const std::filesystem::path& path,
                                         Dialect dialect = Dialect::github);

// Job ids in an order where every job comes after the jobs it needs (file order otherwise).
// The model is acyclic once validated, so this never fails on a parsed Workflow.
std::vector<std::string> topological_order(const Workflow& workflow);

}  // namespace jobs
