#include "tests/support/temp_dir.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tests {
namespace {

std::mutex g_mutex;
std::vector<std::filesystem::path> g_dirs;

}  // namespace

std::filesystem::path make_temp_dir(std::string_view label) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/sandgate-test-" +
                          std::string(label) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    std::lock_guard lock(g_mutex);
    g_dirs.emplace_back(pattern);
    return g_dirs.back();
}

void finish_temp_dirs(Outcome outcome) {
    std::lock_guard lock(g_mutex);
    for (const auto& dir : g_dirs) {
        if (outcome == Outcome::failed) {
            std::fprintf(stderr, "kept temp dir of the failed test: %s\n", dir.c_str());
            continue;
        }
        std::error_code ec;
        // Tests may leave read-only dirs behind (a worktree, a mirror); make them removable.
        for (auto it = std::filesystem::recursive_directory_iterator(
                 dir, std::filesystem::directory_options::skip_permission_denied, ec);
             !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
            if (it->is_directory(ec) && !it->is_symlink(ec))
                std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                             std::filesystem::perm_options::add, ec);
        }
        std::filesystem::remove_all(dir, ec);
    }
    g_dirs.clear();
}

void write_file(const std::filesystem::path& path, std::string_view content) {
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

}  // namespace tests
