#include "agent/cli/random_id.hpp"

#include <sys/random.h>

#include <vector>

namespace agent {

common::Expected<std::string> random_id(std::string_view prefix, std::size_t bytes) {
    std::vector<unsigned char> random(bytes);
    if (bytes > 0 && ::getrandom(random.data(), bytes, 0) != static_cast<ssize_t>(bytes))
        return common::fail(common::ErrorKind::unavailable, common::errno_message("getrandom"));
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string id(prefix);
    id.reserve(prefix.size() + 2 * bytes);
    for (const unsigned char byte : random) {
        id.push_back(k_hex[byte >> 4]);
        id.push_back(k_hex[byte & 15]);
    }
    return id;
}

}  // namespace agent
