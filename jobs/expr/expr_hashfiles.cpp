// hashFiles(): the algorithm of actions/runner's hashFiles (sha256 over the sha256 digests
// of the matched files) with @actions/glob's pattern rules (jobs/expr/path_patterns.hpp). The
// workspace is a step's: it is walked and read only through sandbox/access/safe_access.hpp (regular
// files, no links followed), within the step's time and cancellable.
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <system_error>

#include "common/sha256.hpp"
#include "jobs/expr/expr.hpp"
#include "jobs/expr/path_patterns.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;

// ErrorKind::timeout once the deadline passed or the token fired.
std::optional<common::Error> expired(const HashLimits& limits) {
    if (limits.cancel != nullptr && limits.cancel->cancelled())
        return common::Error{common::ErrorKind::timeout, "hashFiles: cancelled"};
    if (limits.deadline && std::chrono::steady_clock::now() >= *limits.deadline)
        return common::Error{common::ErrorKind::timeout, "hashFiles: the step's time ran out"};
    return std::nullopt;
}

// A timeout of the walk or a read is said as hashFiles' own.
common::Error hash_error(const common::Error& error) {
    if (error.kind != common::ErrorKind::timeout) return error;
    return {error.kind, error.message.find("cancelled") != std::string::npos
                            ? "hashFiles: cancelled"
                            : "hashFiles: the step's time ran out"};
}

using DigestContext = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
using Digest = common::Sha256Digest;

// The digest of one regular file beneath the workspace, read through the workspace's fd in
// chunks, the limits checked between them.
common::Expected<Digest> sha256_file(const sandbox::SafeDir& workspace, const std::string& relative,
                                     const HashLimits& limits) {
    auto fd = SANDGATE_TRY(workspace.open_file(relative, "hashFiles: " + relative));
    DigestContext context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
        return common::fail(common::ErrorKind::permanent, "sha256 unavailable");
    }
    std::array<char, 65536> buffer{};
    for (;;) {
        if (auto stop = expired(limits)) return std::unexpected(*stop);
        const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return common::fail(common::ErrorKind::permanent, "hashFiles: cannot read " + relative);
        if (got == 0) break;
        EVP_DigestUpdate(context.get(), buffer.data(), static_cast<std::size_t>(got));
    }
    Digest digest{};
    EVP_DigestFinal_ex(context.get(), digest.data(), nullptr);
    return digest;
}

// Regular files under `workspace` selected by `patterns` (jobs/expr/path_patterns.hpp): symlinks
// (to files or directories), FIFOs and devices are neither followed nor hashed.
common::Expected<std::vector<std::string>> matching_files(const sandbox::SafeDir& workspace,
                                                          const std::vector<PathPattern>& patterns,
                                                          const HashLimits& limits) {
    const sandbox::ReadLimits walk_limits{0, limits.deadline,
                                          limits.cancel != nullptr ? limits.cancel->fd() : -1};
    auto selection = select_files(workspace, patterns, walk_limits);
    if (!selection) return std::unexpected(hash_error(selection.error()));
    return std::move(selection->files);
}

}  // namespace

common::Expected<std::string> hash_files(const fs::path& workspace_in,
                                         std::span<const std::string> arguments,
                                         const HashLimits& limits) {
    std::error_code ec;
    const fs::path workspace = fs::absolute(workspace_in, ec).lexically_normal();
    auto root = sandbox::SafeDir::open_trusted(workspace, "the workspace");
    if (ec || !root) {
        return common::fail(common::ErrorKind::invalid_input,
                            "workspace is not a directory: " + workspace_in.string());
    }
    std::vector<PathPattern> patterns;
    for (const auto& argument : arguments) {
        std::string_view rest = argument;
        for (;;) {
            const auto newline = rest.find('\n');
            if (auto pattern = parse_path_pattern(rest.substr(0, newline), workspace))
                patterns.push_back(std::move(*pattern));
            if (newline == std::string_view::npos) break;
            rest.remove_prefix(newline + 1);
        }
    }
    auto files = SANDGATE_TRY(matching_files(*root, patterns, limits));
    if (files.empty()) return std::string();
    DigestContext total(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!total || EVP_DigestInit_ex(total.get(), EVP_sha256(), nullptr) != 1) {
        return common::fail(common::ErrorKind::permanent, "sha256 unavailable");
    }
    for (const auto& file : files) {
        auto digest = sha256_file(*root, file, limits);
        if (!digest) return std::unexpected(hash_error(digest.error()));
        EVP_DigestUpdate(total.get(), digest->data(), digest->size());
    }
    Digest result{};
    EVP_DigestFinal_ex(total.get(), result.data(), nullptr);
    return common::to_hex(result);
}

}  // namespace jobs
