// `sandgate doctor --packages`: the apt packages a repository's workflows ask for, against
// this machine's dpkg status (see doctor.hpp).
#include <algorithm>
#include <chrono>

#include "sandbox/process/run.hpp"
#include "sandbox/wrap/doctor.hpp"

namespace sandbox {
namespace {

constexpr std::size_t k_max_workflow = 1 << 20;

// Shell words of one logical line (quotes dropped, no expansion); a separator (&&, ||, ;, |,
// a redirection, a comment) ends the list as a word of its own.
std::vector<std::string> words_of(std::string_view line) {
    std::vector<std::string> words;
    std::string word;
    char quote = 0;
    const auto flush = [&] {
        if (!word.empty()) words.push_back(std::move(word));
        word.clear();
    };
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (line.substr(i).starts_with("${{")) {  // an expression is one word, spaces and all
            const std::size_t end = line.find("}}", i);
            const std::size_t stop = end == std::string_view::npos ? line.size() : end + 2;
            word += line.substr(i, stop - i);
            i = stop - 1;
            continue;
        }
        if (quote) {
            if (c == quote)
                quote = 0;
            else
                word.push_back(c);
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == ' ' || c == '\t') {
            flush();
        } else if (c == ';' || c == '&' || c == '|' || c == '>' || c == '<' || c == ')' ||
                   (c == '#' && word.empty())) {
            flush();
            words.push_back(std::string(1, c));
        } else {
            word.push_back(c);
        }
    }
    flush();
    return words;
}

bool separator(const std::string& word) {
    return word.size() == 1 && std::string_view(";&|><)#").find(word[0]) != std::string_view::npos;
}

bool is_apt(const std::string& word) {
    const auto base = word.substr(word.rfind('/') + 1);
    return base == "apt-get" || base == "apt";
}

}  // namespace

std::vector<PackageAsk> package_asks(std::string_view text, std::string_view file,
                                     std::vector<std::string>& unresolved) {
    std::vector<PackageAsk> asks;
    std::size_t line_number = 0;
    std::size_t start = 0;
    while (start < text.size()) {
        // One logical line: physical lines ending with a backslash continue on the next.
        const std::size_t first_line = ++line_number;
        std::string logical;
        for (;;) {
            std::size_t end = text.find('\n', start);
            if (end == std::string_view::npos) end = text.size();
            std::string_view physical = text.substr(start, end - start);
            start = end + 1;
            if (!physical.empty() && physical.back() == '\r') physical.remove_suffix(1);
            if (physical.empty() || physical.back() != '\\' || start >= text.size()) {
                logical += physical;
                break;
            }
            physical.remove_suffix(1);
            logical += physical;
            logical += ' ';
            ++line_number;
        }
        const std::string where = std::string(file) + ":" + std::to_string(first_line);
        const auto words = words_of(logical);
        for (std::size_t i = 0; i < words.size(); ++i) {
            if (!is_apt(words[i])) continue;
            std::size_t at = i + 1;
            // Options before the command; -o, -c and -t take a value.
            while (at < words.size() && words[at].starts_with("-")) {
                const auto& option = words[at];
                at += (option == "-o" || option == "-c" || option == "-t") ? 2 : 1;
            }
            if (at >= words.size() || words[at] != "install") continue;
            for (++at; at < words.size() && !separator(words[at]); ++at) {
                const auto& word = words[at];
                if (word.starts_with("-")) {
                    if (word == "-o" || word == "-c" || word == "-t") ++at;
                    continue;
                }
                if (word.find('$') != std::string::npos) {
                    unresolved.push_back(where + ": " + word);
                    continue;
                }
                std::string name = word.substr(0, word.find('='));
                name = name.substr(0, name.find('/'));
                if (name.empty()) continue;
                const bool seen = std::any_of(asks.begin(), asks.end(),
                                              [&](const auto& ask) { return ask.package == name; });
                if (!seen) asks.push_back({name, where, false});
            }
            i = at;
        }
    }
    return asks;
}

std::optional<std::vector<std::string>> installed_packages() {
    RunRequest request;
    request.argv = {"dpkg-query", "-W", "-f=${db:Status-Abbrev} ${binary:Package}\\n"};
    request.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LC_ALL", "C"}};
    request.policy.mode = SandboxMode::off;
    request.timeout = std::chrono::seconds(30);
    request.output_limit = 32 << 20;
    const auto result = run(request);
    if (result.error || result.exit_code != 0) return std::nullopt;
    std::vector<std::string> names;
    std::size_t start = 0;
    const std::string& out = result.out.head;
    while (start < out.size()) {
        std::size_t end = out.find('\n', start);
        if (end == std::string::npos) end = out.size();
        const std::string_view line(out.data() + start, end - start);
        start = end + 1;
        if (!line.starts_with("ii ")) continue;
        std::string name(line.substr(line.rfind(' ') + 1));
        // multiarch names carry their architecture (libc6:amd64): both spellings count
        if (const auto colon = name.find(':'); colon != std::string::npos)
            names.push_back(name.substr(0, colon));
        names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

Expected<PackagesReport> workflow_packages(const std::filesystem::path& repository) {
    auto root = SANDGATE_TRY(SafeDir::open_trusted(repository, repository.string()));
    auto workflows =
        root.open_dir(".github/workflows", (repository / ".github/workflows").string());
    if (!workflows) return std::unexpected(workflows.error());
    std::vector<std::string> files;
    SANDGATE_CHECK(workflows->walk([&](const WalkEntry& entry) {
        if (entry.kind == EntryKind::regular &&
            (entry.relative.ends_with(".yml") || entry.relative.ends_with(".yaml")) &&
            entry.relative.find('/') == std::string::npos)
            files.push_back(entry.relative);
        return WalkStep::skip;
    }));
    std::sort(files.begin(), files.end());
    PackagesReport report;
    for (const auto& file : files) {
        const std::string label = ".github/workflows/" + file;
        ReadLimits limits;
        limits.max_bytes = k_max_workflow;
        auto text = SANDGATE_TRY(workflows->read_file(file, limits, label));
        for (auto& ask : package_asks(text, label, report.unresolved)) {
            const bool seen =
                std::any_of(report.asks.begin(), report.asks.end(),
                            [&](const auto& other) { return other.package == ask.package; });
            if (!seen) report.asks.push_back(std::move(ask));
        }
    }
    const auto installed = installed_packages();
    report.dpkg = installed.has_value();
    for (auto& ask : report.asks)
        ask.installed =
            installed && std::binary_search(installed->begin(), installed->end(), ask.package);
    return report;
}

bool PackagesReport::complete() const {
    return std::all_of(asks.begin(), asks.end(), [](const auto& ask) { return ask.installed; });
}

nlohmann::ordered_json PackagesReport::to_json() const {
    nlohmann::ordered_json doc;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    nlohmann::ordered_json missing = nlohmann::ordered_json::array();
    for (const auto& ask : asks) {
        list.push_back(
            {{"package", ask.package}, {"where", ask.where}, {"installed", ask.installed}});
        if (!ask.installed) missing.push_back(ask.package);
    }
    doc["packages"] = std::move(list);
    doc["missing"] = std::move(missing);
    doc["unresolved"] = unresolved;
    doc["dpkg"] = dpkg;
    return doc;
}

std::string PackagesReport::to_text() const {
    std::string text;
    std::string missing;
    for (const auto& ask : asks) {
        std::string name = ask.package;
        name.resize(std::max<std::size_t>(name.size(), 32), ' ');
        text += (ask.installed ? "ok       " : "MISSING  ") + name + " " + ask.where + "\n";
        if (!ask.installed) missing += " " + ask.package;
    }
    for (const auto& word : unresolved)
        text += "?        " + word + " (an expression or a variable: not looked up)\n";
    if (asks.empty()) text += "the workflows ask apt to install nothing\n";
    if (!dpkg) text += "this machine has no dpkg database: every package counts as missing\n";
    if (!missing.empty())
        text +=
            "missing on this machine; a step cannot install them, the machine's administrator adds "
            "them:\n"
            "  sudo apt-get install" +
            missing + "\n";
    else if (!asks.empty())
        text += "every package the workflows ask for is installed\n";
    return text;
}

}  // namespace sandbox
