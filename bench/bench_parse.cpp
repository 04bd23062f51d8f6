// Workflow parsing, per file of ../shared/corpora: parse_workflow (GitHub's reader on libyaml,
// the schema check, the model) against the baseline measured in the same run, yaml-cpp's
// YAML::Load of the same text converted to the same tree (what sandgate's parser before the
// grammar work spent before validating anything: its whole cost was at least this). A ratio
// at or below 1 means no worse than that parser.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "jobs/workflow/workflow_model.hpp"

namespace {

// The previous reader: yaml-cpp's document converted to YamlNode (its converter, verbatim but
// for the limits it lacked).
void convert(const YAML::Node& node, jobs::YamlNode& out) {
    out.mark = jobs::SourceMark{"w.yml", node.Mark().line + 1, node.Mark().column + 1};
    switch (node.Type()) {
        case YAML::NodeType::Undefined:
        case YAML::NodeType::Null:
            out.kind = jobs::YamlNode::Kind::null;
            return;
        case YAML::NodeType::Scalar:
            out.kind = jobs::YamlNode::Kind::scalar;
            out.text = node.Scalar();
            out.plain = node.Tag() == "?";
            return;
        case YAML::NodeType::Sequence:
            out.kind = jobs::YamlNode::Kind::sequence;
            for (const auto& item : node) convert(item, out.items.emplace_back());
            return;
        case YAML::NodeType::Map:
            out.kind = jobs::YamlNode::Kind::mapping;
            for (const auto& pair : node) {
                out.entries.push_back(jobs::YamlEntry{pair.first.Scalar(), {}, {}});
                convert(pair.second, out.entries.back().value);
            }
            return;
    }
}

std::size_t baseline(const std::string& text) {
    jobs::YamlNode root;
    convert(YAML::Load(text), root);
    return root.entries.size();
}

std::size_t current(const std::string& text) {
    auto workflow = jobs::parse_workflow(text, "w.yml");
    return workflow ? workflow->jobs.size() : 0;
}

template <typename F>
double nanoseconds_per_parse(const std::string& text, F&& parse) {
    std::size_t sink = 0;
    int iterations = 0;
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = std::chrono::steady_clock::duration{};
    do {
        sink += parse(text);
        ++iterations;
        elapsed = std::chrono::steady_clock::now() - start;
    } while (elapsed < std::chrono::milliseconds(20) || iterations < 5);
    if (sink == static_cast<std::size_t>(-1)) std::printf("?");
    return std::chrono::duration<double, std::nano>(elapsed).count() / iterations;
}

std::string read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

}  // namespace

int main() {
    const std::filesystem::path corpora = std::filesystem::path(SANDGATE_SHARED_DIR) / "corpora";
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(corpora)) {
        const auto ext = entry.path().extension();
        if ((ext == ".yml" || ext == ".yaml") && entry.path().stem() != "action")
            files.push_back(entry.path());
    }
    std::ranges::sort(files);
    if (files.empty()) {
        std::fprintf(stderr, "bench_parse: no workflow under %s\n", corpora.c_str());
        return 1;
    }
    std::printf("%-58s %10s %12s %7s\n", "workflow", "ns/parse", "baseline ns", "ratio");
    double log_sum = 0;
    double total_new = 0, total_base = 0;
    for (const auto& file : files) {
        const std::string text = read(file);
        const double base = nanoseconds_per_parse(text, baseline);
        const double now = nanoseconds_per_parse(text, current);
        log_sum += std::log(now / base);
        total_new += now;
        total_base += base;
        std::printf("%-58s %10.0f %12.0f %7.2f\n", std::filesystem::relative(file, corpora).c_str(),
                    now, base, now / base);
    }
    std::printf(
        "%zu workflows: all files %.0f ns against %.0f ns: %.2fx the baseline (geometric mean per "
        "file %.2fx)\n",
        files.size(), total_new, total_base, total_new / total_base,
        std::exp(log_sum / static_cast<double>(files.size())));
    return 0;
}
