// `sandgate expr EXPRESSION [--contexts FILE.json]`: evaluates one GitHub Actions expression
// and prints {"kind": ..., "value": ...} (exit 0) or {"error": {"kind": phase, "message": ...}}
// (exit 2). Usage errors: one line on stderr, exit 2.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "jobs/expr/expr.hpp"

namespace agent {
namespace {

constexpr int k_exit_ok = 0;
constexpr int k_exit_error = 2;

int usage_error(const std::string& message) {
    std::fprintf(stderr, "sandgate expr: %s\n", message.c_str());
    return k_exit_error;
}

void print(const nlohmann::ordered_json& document) {
    const auto text =
        document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::printf("%s\n", text.c_str());
}

}  // namespace

int expr_command(CommandArgs args) {
    CLI::App app{"Evaluate one GitHub Actions expression against contexts given as JSON.",
                 "sandgate expr"};
    std::string expression;
    std::string contexts_file;
    std::string workspace = ".";
    std::string status = "success";
    app.add_option("EXPRESSION", expression, "the expression, without ${{ }}")->required();
    app.add_option("--contexts", contexts_file,
                   "a JSON object of contexts: {\"github\": {...}, \"matrix\": {...}}");
    app.add_option("--workspace", workspace, "the directory hashFiles() globs in (default: .)");
    app.add_option("--status", status, "what success()/failure()/cancelled() see")
        ->check(CLI::IsMember({"success", "failure", "cancelled"}));
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::CallForHelp&) {
        std::printf("%s", app.help().c_str());
        return k_exit_ok;
    } catch (const CLI::ParseError& error) {
        return usage_error(error.what());
    }

    jobs::EvalContext context;
    context.workspace = workspace;
    context.status = status == "failure"     ? jobs::RunStatus::failure
                     : status == "cancelled" ? jobs::RunStatus::cancelled
                                             : jobs::RunStatus::success;
    if (!contexts_file.empty()) {
        std::ifstream in(contexts_file, std::ios::binary);
        if (!in) return usage_error("--contexts: cannot read " + contexts_file);
        std::stringstream text;
        text << in.rdbuf();
        auto parsed = jobs::parse_json(text.str());
        if (!parsed)
            return usage_error("--contexts " + contexts_file + ": " + parsed.error().message);
        if (!parsed->is_object())
            return usage_error("--contexts " + contexts_file + ": not a JSON object");
        context.contexts = parsed->as_object();
    }

    auto result = jobs::evaluate(expression, context);
    nlohmann::ordered_json out;
    if (!result) {
        out["error"]["kind"] = std::string(jobs::to_string(result.error().phase));
        out["error"]["message"] = result.error().message;
        print(out);
        return k_exit_error;
    }
    out["kind"] = std::string(jobs::to_string(result->kind()));
    out["value"] = jobs::to_ordered_json(*result);
    print(out);
    return k_exit_ok;
}

}  // namespace agent
