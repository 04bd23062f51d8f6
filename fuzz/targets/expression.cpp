// Expressions: the lexer, parser and evaluator (jobs/expr/expr.hpp), as `${{ }}` templates, `if:`
// conditions and bare expressions, against contexts like a job's, fromJSON included.
#include "fuzz/fuzz_target.hpp"
#include "jobs/expr/expr.hpp"

namespace {

const jobs::EvalContext& context() {
    static const jobs::EvalContext value = [] {
        jobs::EvalContext c;
        auto github =
            jobs::parse_json(R"({"event_name": "push", "ref": "refs/heads/main", "sha": "2ce6b095",
            "event": {"head_commit": {"message": "m"}, "pull_request": {"labels": [{"name": "a"}, {"name": "b"}]}}})");
        c.contexts.set("github", github ? *github : jobs::Value(jobs::Object{}));
        c.contexts.set("matrix", jobs::Value(jobs::Object{{"os", "linux"}, {"node", 20}}));
        c.contexts.set("env", jobs::Value(jobs::Object{{"JSON", "[1, {\"a\": [true, null]}]"}}));
        c.contexts.set(
            "needs",
            jobs::Value(jobs::Object{{"build", jobs::Value(jobs::Object{{"result", "success"}})}}));
        for (const char* name : {"vars", "secrets", "inputs", "strategy", "steps", "job", "runner"})
            c.contexts.set(name, jobs::Value(jobs::Object{}));
        return c;
    }();
    return value;
}

void check_error(const jobs::ExprError& error) {
    fuzz::check(!error.message.empty(), "an error has a message");
}

}  // namespace

SANDGATE_FUZZ_TARGET(expression) {
    const std::string_view input = fuzz::text(data, size);
    if (auto value = jobs::evaluate(input, context()); !value) check_error(value.error());
    if (auto condition = jobs::evaluate_condition(input, context()); !condition)
        check_error(condition.error());
    if (auto text = jobs::interpolate(input, context()); !text) check_error(text.error());
    const jobs::AllowedContext allowed{{"github", "env", "needs"},
                                       {{"hashFiles", 1, 255}, {"success", 0, 0}}};
    (void)jobs::validate_expression(input, allowed);
    return 0;
}
