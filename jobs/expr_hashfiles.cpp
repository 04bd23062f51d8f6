// hashFiles(): the algorithm of actions/runner's hashFiles (sha256 over the sha256 digests
// of the matched files) with @actions/glob's pattern rules, matched with fnmatch(3) one path
// segment at a time and `**` spanning segments.
#include <fnmatch.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <memory>
#include <system_error>

#include "jobs/expr.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;

struct Pattern {
    bool negate = false;
    std::vector<std::string> segments;  // relative to the workspace; ends with "**"
};

std::vector<std::string> split_segments(const fs::path& relative) {
    std::vector<std::string> segments;
    for (const auto& part : relative) {
        const auto text = part.string();
        if (!text.empty() && text != ".") segments.push_back(text);
    }
    return segments;
}

// nullopt for blank lines, comments and patterns that point outside the workspace.
std::optional<Pattern> parse_pattern(std::string_view line, const fs::path& workspace) {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
        line.remove_suffix(1);
    }
    if (line.empty() || line.front() == '#') return std::nullopt;
    Pattern pattern;
    while (!line.empty() && line.front() == '!') {
        pattern.negate = !pattern.negate;
        line.remove_prefix(1);
    }
    fs::path path(line);
    if (path.is_relative()) path = workspace / path;
    const fs::path relative = path.lexically_normal().lexically_relative(workspace);
    if (relative.empty() || *relative.begin() == "..") return std::nullopt;
    pattern.segments = split_segments(relative);
    // A pattern matching a directory matches everything below it (implicit descendants).
    if (pattern.segments.empty() || pattern.segments.back() != "**") pattern.segments.push_back("**");
    return pattern;
}

bool match_segments(std::span<const std::string> pattern, std::span<const std::string> path) {
    if (pattern.empty()) return path.empty();
    if (pattern.front() == "**") {
        for (std::size_t skip = 0; skip <= path.size(); ++skip) {
            if (match_segments(pattern.subspan(1), path.subspan(skip))) return true;
        }
        return false;
    }
    if (path.empty()) return false;
    // No FNM_PERIOD: `*` matches dot files, as @actions/glob does.
    if (::fnmatch(pattern.front().c_str(), path.front().c_str(), 0) != 0) return false;
    return match_segments(pattern.subspan(1), path.subspan(1));
}

bool selected(const std::vector<Pattern>& patterns, std::span<const std::string> path) {
    bool included = false;
    for (const auto& pattern : patterns) {
        if (pattern.negate == included && match_segments(pattern.segments, path)) included = !pattern.negate;
    }
    return included;
}

using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
using Digest = std::array<unsigned char, 32>;

sandbox::Expected<Digest> sha256_file(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return sandbox::fail(sandbox::ErrorKind::permanent, "cannot read " + file.string());
    DigestContext context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
        return sandbox::fail(sandbox::ErrorKind::permanent, "sha256 unavailable");
    }
    std::array<char, 65536> buffer{};
    while (in) {
        in.read(buffer.data(), buffer.size());
        if (in.gcount() > 0) EVP_DigestUpdate(context.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) return sandbox::fail(sandbox::ErrorKind::permanent, "cannot read " + file.string());
    Digest digest{};
    EVP_DigestFinal_ex(context.get(), digest.data(), nullptr);
    return digest;
}

std::string to_hex(const unsigned char* bytes, std::size_t size) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < size; ++i) {
        out.push_back(k_hex[bytes[i] >> 4]);
        out.push_back(k_hex[bytes[i] & 15]);
    }
    return out;
}

// Regular files (symlinks to files count; symlinked directories are not entered) under
// `workspace` selected by `patterns`.
sandbox::Expected<std::vector<fs::path>> matching_files(const fs::path& workspace,
                                                        const std::vector<Pattern>& patterns) {
    std::vector<fs::path> files;
    std::error_code ec;
    fs::recursive_directory_iterator it(workspace, fs::directory_options::skip_permission_denied, ec);
    if (ec) return sandbox::fail(sandbox::ErrorKind::invalid_input, "cannot read workspace " + workspace.string() + ": " + ec.message());
    for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
        if (ec) return sandbox::fail(sandbox::ErrorKind::permanent, "cannot walk " + workspace.string() + ": " + ec.message());
        std::error_code status_ec;
        if (!it->is_regular_file(status_ec)) continue;  // follows a symlink; dirs and dangling links skip
        const auto segments = split_segments(it->path().lexically_relative(workspace));
        if (selected(patterns, segments)) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace

sandbox::Expected<std::string> hash_files(const fs::path& workspace_in, std::span<const std::string> arguments) {
    std::error_code ec;
    const fs::path workspace = fs::absolute(workspace_in, ec).lexically_normal();
    if (ec || !fs::is_directory(workspace, ec)) {
        return sandbox::fail(sandbox::ErrorKind::invalid_input, "workspace is not a directory: " + workspace_in.string());
    }
    std::vector<Pattern> patterns;
    for (const auto& argument : arguments) {
        std::string_view rest = argument;
        for (;;) {
            const auto newline = rest.find('\n');
            if (auto pattern = parse_pattern(rest.substr(0, newline), workspace)) patterns.push_back(std::move(*pattern));
            if (newline == std::string_view::npos) break;
            rest.remove_prefix(newline + 1);
        }
    }
    auto files = matching_files(workspace, patterns);
    if (!files) return std::unexpected(files.error());
    if (files->empty()) return std::string();
    DigestContext total(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!total || EVP_DigestInit_ex(total.get(), EVP_sha256(), nullptr) != 1) {
        return sandbox::fail(sandbox::ErrorKind::permanent, "sha256 unavailable");
    }
    for (const auto& file : *files) {
        auto digest = sha256_file(file);
        if (!digest) return std::unexpected(digest.error());
        EVP_DigestUpdate(total.get(), digest->data(), digest->size());
    }
    Digest result{};
    EVP_DigestFinal_ex(total.get(), result.data(), nullptr);
    return to_hex(result.data(), result.size());
}

}  // namespace jobs
