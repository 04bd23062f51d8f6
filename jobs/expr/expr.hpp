#pragma once
// The GitHub Actions expression language: `github.event_name == 'push' && !cancelled()`.
//
// Semantics follow GitHub's engine (actions/languageservices, actions/runner): literals
// (null, booleans, numbers incl. hex/octal/exponents/NaN/Infinity, 'strings' with '' escapes),
// operators by precedence (`()` `[]` `.`, `!`, `< <= > >=`, `== !=`, `&&`, `||`; && and ||
// return an operand, not a boolean), loose equality with JavaScript-like coercion, case-
// insensitive string comparison and property lookup, `.*`/`[*]` filters, and the functions
// contains, startsWith, endsWith, format, join, toJSON, fromJSON, case, hashFiles, success,
// failure, always and cancelled.
//
// Named values (contexts) must be known at parse time: `nosuchcontext.foo` is a parse error,
// as on GitHub. The set of names is the set of keys of EvalContext::contexts; give a context
// that is allowed but empty as an empty object.
//
// Errors are values (ExprError) tagged with the phase that found them; nothing here throws
// or exits. Evaluation is bounded: 21000 characters of expression, depth 50, and about 1 MiB
// of intermediate strings (GitHub's limits).

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "jobs/expr/value.hpp"
#include "sandbox/process/cancel.hpp"

namespace jobs {

struct ExprError {
    enum class Phase { lexing, parsing, evaluation } phase;
    std::string message;
};

// "lexing", "parsing", "evaluation".
std::string_view to_string(ExprError::Phase phase);

template <typename T>
using ExprExpected = std::expected<T, ExprError>;

// Which functions beyond the core ones (contains, startsWith, endsWith, format, join,
// toJSON, fromJSON, case) an expression may call. GitHub allows the status functions only in
// `if:` conditions and hashFiles only where a workspace exists; a function outside the set is
// a parse error "Unrecognized function".
enum class FunctionSet : std::uint8_t {
    core = 0,
    status = 1,      // success(), failure(), always(), cancelled()
    hash_files = 2,  // hashFiles(...)
    all = 3,
};
constexpr FunctionSet operator|(FunctionSet a, FunctionSet b) {
    return static_cast<FunctionSet>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr bool has(FunctionSet set, FunctionSet wanted) {
    return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(wanted)) ==
           static_cast<std::uint8_t>(wanted);
}

// The status the status functions see. For a step: the job's status so far. For a job's
// `if`, over every job it needs, directly or transitively (GitHub's and act's rule): failure
// when one failed, else cancelled when one was, else skipped when one was skipped, else
// success. success() is true only for success, failure() only for failure, cancelled() only
// for cancelled, always() always; so a job below a skipped one is skipped unless its `if`
// calls always() (or needs.<id>.result is tested after one).
enum class RunStatus { success, failure, cancelled, skipped };

struct EvalContext {
    // Named values: github, env, vars, secrets, inputs, matrix, strategy, needs, steps, job,
    // runner, ... Keys are matched case-insensitively; only these names may appear.
    Object contexts;
    FunctionSet functions = FunctionSet::all;
    RunStatus status = RunStatus::success;
    // Where hashFiles globs (GITHUB_WORKSPACE). Unset: hashFiles fails at evaluation.
    std::optional<std::filesystem::path> workspace;
    // Bounds on hashFiles (a step's workspace is hostile: a 1 TiB sparse file, a huge tree):
    // past the deadline, or once the token fires, it fails (the step's timeout, SIGTERM).
    std::optional<std::chrono::steady_clock::time_point> deadline;
    const sandbox::CancelToken* cancel = nullptr;
    // Overrides the built-in hashFiles (for callers that hash elsewhere, e.g. inside the
    // wrap). Receives the patterns as given; returns the hex digest or "".
    std::function<common::Expected<std::string>(std::span<const std::string>)> hash_files;
};

// A parsed expression, reusable across evaluations (parse once, evaluate per matrix leg).
// Copyable; copies share the immutable syntax tree.
class Expression {
public:
    struct Node;

    // Evaluates against `context`. The context names and functions were checked at parse
    // time; evaluating against a context lacking one of them yields Null for that name.
    ExprExpected<Value> evaluate(const EvalContext& context) const;
    // True when the expression calls success(), failure(), always() or cancelled().
    bool uses_status_function() const { return m_uses_status; }
    const std::string& text() const { return m_text; }

private:
    friend ExprExpected<Expression> parse(std::string_view, std::span<const std::string>,
                                          FunctionSet);
    friend ExprExpected<Expression> parse(std::string_view, const Object&, FunctionSet);
    std::shared_ptr<const Node> m_root;  // null for the empty expression (evaluates to Null)
    std::string m_text;
    bool m_uses_status = false;
};

// Lexes and parses; `context_names` are the allowed named values (case-insensitive).
ExprExpected<Expression> parse(std::string_view expression,
                               std::span<const std::string> context_names,
                               FunctionSet functions = FunctionSet::all);

// The same, with the allowed names being the keys of `contexts` (no copy of the names).
ExprExpected<Expression> parse(std::string_view expression, const Object& contexts,
                               FunctionSet functions = FunctionSet::all);

// The names of `context.contexts`, for parse().
std::vector<std::string> context_names(const EvalContext& context);

// Parses and evaluates one expression (no `${{ }}` wrapper).
ExprExpected<Value> evaluate(std::string_view expression, const EvalContext& context);

// `if:` semantics: an optional `${{ }}` wrapper around the whole text is removed; when the
// expression calls no status function it is evaluated as `success() && (expr)`; the result is
// its truthiness. Text mixing literal parts and `${{ }}` is interpolated to a string first
// and then tested (a non-empty string is true), as GitHub does.
ExprExpected<bool> evaluate_condition(std::string_view if_text, const EvalContext& context);

// Replaces each `${{ expr }}` in `text` by its value coerced to a string (null "", numbers
// as GitHub prints them, arrays "Array", objects "Object"). An unclosed `${{` is a parse error.
ExprExpected<std::string> interpolate(std::string_view text, const EvalContext& context);

// As interpolate, but when the whole text (ignoring surrounding whitespace) is exactly one
// `${{ expr }}` the value itself is returned, keeping its kind (for `strategy.matrix:
// ${{ fromJSON(...) }}`, `continue-on-error: ${{ ... }}`); otherwise a String.
ExprExpected<Value> interpolate_value(std::string_view text, const EvalContext& context);

// Load-time checks (a workflow is rejected before anything runs, as GitHub does): lexes and
// parses every expression without evaluating, against the context names and functions that
// will be available there. evaluate_condition's rules for the `${{ }}` wrapper apply to
// check_condition, which always allows the status functions.
ExprExpected<void> check_template(std::string_view text, std::span<const std::string> context_names,
                                  FunctionSet functions);
ExprExpected<void> check_condition(std::string_view if_text,
                                   std::span<const std::string> context_names,
                                   FunctionSet functions);

// A function an allowed context adds, as GitHub's schemas write it (`hashFiles(1,255)`,
// `failure(0,MAX)`): the name and the number of arguments it takes.
struct FunctionSignature {
    std::string name;
    std::size_t min_args = 0;
    std::size_t max_args = 0;
};

// What an expression may name where the schema puts it: the named values (contexts) and,
// besides the core functions (contains, startsWith, endsWith, format, join, toJSON,
// fromJSON, case), the functions with their arities. A schema `context` list splits into
// these with split_allowed_context().
struct AllowedContext {
    std::vector<std::string> names;
    std::vector<FunctionSignature> functions;
};

// GitHub's splitAllowedContext (workflow-parser templates/allowed-context.ts): entries of the
// form `name(min,max)` (max may be MAX) are functions, the others named values.
AllowedContext split_allowed_context(std::span<const std::string_view> context);

// GitHub's validateExpression: lexes and parses `expression` (no `${{ }}` wrapper) against
// `allowed`, without evaluating it. The errors are the parser's, of phase lexing or parsing.
ExprExpected<void> validate_expression(std::string_view expression, const AllowedContext& allowed);

// True when the parsed expression calls success(), failure(), always() or cancelled()
// (GitHub's ensureStatusFunction). False when it does not parse.
bool calls_status_function(std::string_view expression, const AllowedContext& allowed);

// True when `text` contains a `${{`.
bool has_expression(std::string_view text);

// hashFiles(patterns...) over `workspace`: patterns relative to it (or absolute inside it),
// one per argument or per line, `**` spanning directories, `*`/`?`/`[...]` within a name,
// dot files included, `!pattern` excluding, a matched directory standing for everything
// below it. Matching regular files, sorted by path, outside the workspace ignored; the result
// is the hex sha256 of the concatenated sha256 digests of their contents, "" when none match.
// Only regular files count: symlinks, to files or directories, are neither followed nor hashed
// (the workspace is a step's: sandbox/access/safe_access.hpp). ErrorKind::timeout once `limits`'
// deadline passes or its token fires.
struct HashLimits {
    std::optional<std::chrono::steady_clock::time_point> deadline;
    const sandbox::CancelToken* cancel = nullptr;
};
common::Expected<std::string> hash_files(const std::filesystem::path& workspace,
                                         std::span<const std::string> patterns,
                                         const HashLimits& limits = {});

}  // namespace jobs
