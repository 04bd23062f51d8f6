#include "common/temp_dir.hpp"

#include <cstdlib>
#include <string>

namespace common {

std::filesystem::path host_temp_dir() {
    const char* tmp = std::getenv("TMPDIR");
    return std::filesystem::path(tmp != nullptr && *tmp == '/' ? tmp : "/tmp");
}

Expected<std::filesystem::path> make_host_temp_dir(std::string_view prefix) {
    std::string pattern = (host_temp_dir() / prefix).string() + "XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)  // trusted path: the host's $TMPDIR
        return fail(ErrorKind::unavailable, errno_message("creating a directory " + pattern));
    return std::filesystem::path(pattern);
}

}  // namespace common
