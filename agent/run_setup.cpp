#include "agent/run_setup.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "jobs/workflow_call.hpp"

namespace agent {

using sandbox::ErrorKind;
using sandbox::fail;

sandbox::Expected<std::vector<std::filesystem::path>> workflow_files(const std::filesystem::path& base,
                                                                     const std::string& path) {
    const std::filesystem::path given(path);
    const std::filesystem::path full = given.is_absolute() ? given : base / given;
    std::error_code ec;
    std::vector<std::filesystem::path> out;
    if (std::filesystem::is_regular_file(full, ec)) {
        out.push_back(given);
        return out;
    }
    if (!std::filesystem::is_directory(full, ec))
        return fail(ErrorKind::invalid_input, "-W " + path + ": no such file or directory");
    for (const auto& entry : std::filesystem::directory_iterator(full, ec)) {
        const auto ext = entry.path().extension();
        if ((ext == ".yml" || ext == ".yaml") && entry.is_regular_file(ec))
            out.push_back(given / entry.path().filename());
    }
    if (ec) return fail(ErrorKind::invalid_input, "-W " + path + ": " + ec.message());
    std::ranges::sort(out);
    if (out.empty()) return fail(ErrorKind::invalid_input, "-W " + path + ": no *.yml or *.yaml workflow there");
    return out;
}

sandbox::Expected<std::vector<jobs::Workflow>> load_workflows(const std::filesystem::path& repository,
                                                              const std::vector<std::filesystem::path>& files,
                                                              jobs::Dialect dialect) {
    std::vector<jobs::Workflow> out;
    for (const auto& file : files) {
        const std::filesystem::path full = file.is_absolute() ? file : repository / file;
        std::ifstream in(full, std::ios::binary);
        if (!in) return fail(ErrorKind::invalid_input, file.string() + ": cannot read the file");
        std::ostringstream text;
        text << in.rdbuf();
        auto workflow = jobs::parse_workflow(text.str(), file.lexically_normal().string(), dialect);
        if (!workflow) return std::unexpected(workflow.error());
        for (const auto& job : workflow->jobs) {
            if (!job.uses || !job.uses->value.starts_with("./")) continue;
            auto called = jobs::load_called_workflow(repository, job);
            if (!called) return std::unexpected(called.error());
        }
        out.push_back(std::move(*workflow));
    }
    return out;
}

sandbox::Expected<std::pair<std::string, std::string>> parse_assignment(const std::string& text,
                                                                       const std::string& flag,
                                                                       bool from_environment) {
    const auto eq = text.find('=');
    const std::string name = text.substr(0, eq);
    if (name.empty()) return fail(ErrorKind::invalid_input, flag + " " + text + ": expected NAME=VALUE");
    if (eq != std::string::npos) return std::pair{name, text.substr(eq + 1)};
    if (!from_environment) return fail(ErrorKind::invalid_input, flag + " " + text + ": expected NAME=VALUE");
    const char* value = std::getenv(name.c_str());
    if (value == nullptr)
        return fail(ErrorKind::invalid_input, flag + " " + name + ": no value given and $" + name + " is not set");
    return std::pair{name, std::string(value)};
}

sandbox::Expected<std::pair<std::string, std::string>> parse_matrix_filter(const std::string& text) {
    const auto colon = text.find(':');
    if (colon == std::string::npos || colon == 0)
        return fail(ErrorKind::invalid_input, "--matrix " + text + ": expected KEY:VALUE");
    return std::pair{text.substr(0, colon), text.substr(colon + 1)};
}

sandbox::Expected<jobs::Value> load_event(const std::filesystem::path& path) {
    if (path.empty()) return jobs::Value(jobs::Object{});
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(ErrorKind::invalid_input, "-e " + path.string() + ": cannot read the file");
    std::ostringstream text;
    text << in.rdbuf();
    auto value = jobs::parse_json(text.str());
    if (!value) return fail(ErrorKind::invalid_input, "-e " + path.string() + ": " + value.error().message);
    if (!value->is_object()) return fail(ErrorKind::invalid_input, "-e " + path.string() + ": the payload must be a JSON object");
    return value;
}

}  // namespace agent
