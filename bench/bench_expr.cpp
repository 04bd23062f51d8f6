// Throughput of a typical step `if:`, parsed and evaluated each time (what a runner does per
// step) and pre-parsed, against the same test written directly in C++ over the same Values
// (the baseline, measured in the same run).
#include <chrono>
#include <cstdio>
#include <string>

#include "jobs/expr/expr.hpp"

namespace {

constexpr std::string_view k_condition =
    "github.event_name == 'push' && startsWith(github.ref, 'refs/heads/') && "
    "!contains(github.event.head_commit.message, '[skip ci]') && matrix.os != 'windows'";

jobs::EvalContext make_context() {
    auto github =
        jobs::parse_json(R"({"event_name": "push", "ref": "refs/heads/main", "sha": "2ce6b095f4cc",
        "repository": "monalisa/testing", "actor": "monalisa", "workflow": "CI", "run_id": "2827197126",
        "event": {"after": "2ce6b095f4cc", "before": "bbe29778fdad", "created": false, "deleted": false,
          "head_commit": {"id": "2ce6b095f4cc", "message": "Update main.yml", "author": {"name": "mona"}},
          "pusher": {"name": "monalisa"}, "ref": "refs/heads/main"}})");
    jobs::EvalContext context;
    context.contexts.set("github", *github);
    context.contexts.set("matrix", jobs::Value(jobs::Object{{"os", "linux"}, {"node", 20}}));
    for (const char* name :
         {"env", "vars", "secrets", "inputs", "strategy", "needs", "steps", "job", "runner"}) {
        context.contexts.set(name, jobs::Value(jobs::Object{}));
    }
    return context;
}

// The same test by hand: the baseline.
bool direct(const jobs::EvalContext& context) {
    const jobs::Value& github = *context.contexts.find("github");
    const auto& ref = github.get("ref")->as_string();
    const auto& message = github.get("event")->get("head_commit")->get("message")->as_string();
    return jobs::equals_ignore_case(github.get("event_name")->as_string(), "push") &&
           jobs::fold_case(ref).starts_with("REFS/HEADS/") &&
           jobs::fold_case(message).find("[SKIP CI]") == std::string::npos &&
           !jobs::equals_ignore_case(context.contexts.find("matrix")->get("os")->as_string(),
                                     "windows");
}

template <typename F>
double nanoseconds_per_call(int iterations, F&& body) {
    const auto start = std::chrono::steady_clock::now();
    int truthy = 0;
    for (int i = 0; i < iterations; ++i) truthy += body() ? 1 : 0;
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (truthy != iterations) std::fprintf(stderr, "bench_expr: unexpected result\n");
    return std::chrono::duration<double, std::nano>(elapsed).count() / iterations;
}

}  // namespace

int main() {
    const auto context = make_context();
    const auto names = jobs::context_names(context);
    auto parsed = jobs::parse(k_condition, names, jobs::FunctionSet::all);
    if (!parsed) {
        std::fprintf(stderr, "bench_expr: %s\n", parsed.error().message.c_str());
        return 1;
    }
    constexpr int k_iterations = 200000;
    const double baseline = nanoseconds_per_call(k_iterations, [&] { return direct(context); });
    const double full = nanoseconds_per_call(k_iterations, [&] {
        auto result = jobs::evaluate_condition(k_condition, context);
        return result && *result;
    });
    const double evaluate_only = nanoseconds_per_call(k_iterations, [&] {
        auto result = parsed->evaluate(context);
        return result && result->truthy();
    });
    std::printf("condition: %.*s\n", static_cast<int>(k_condition.size()), k_condition.data());
    std::printf("direct C++ (baseline)        %8.0f ns/op\n", baseline);
    std::printf("evaluate_condition (parse)   %8.0f ns/op  %6.1fx baseline  %8.0f ops/s\n", full,
                full / baseline, 1e9 / full);
    std::printf("pre-parsed evaluate          %8.0f ns/op  %6.1fx baseline  %8.0f ops/s\n",
                evaluate_only, evaluate_only / baseline, 1e9 / evaluate_only);
    return 0;
}
