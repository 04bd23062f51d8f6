#include "common/fd.hpp"

#include <algorithm>

namespace common {

void close_all(std::vector<Fd>& fds) {
    std::vector<int> numbers;
    numbers.reserve(fds.size());
    for (auto& fd : fds)
        if (fd.valid()) numbers.push_back(fd.release());
    fds.clear();
    std::sort(numbers.begin(), numbers.end());
    for (std::size_t first = 0; first < numbers.size();) {
        std::size_t last = first;
        while (last + 1 < numbers.size() && numbers[last + 1] == numbers[last] + 1) ++last;
        // Every number in [numbers[first], numbers[last]] is ours: the run has no gap.
        if (last == first || ::close_range(static_cast<unsigned>(numbers[first]),
                                           static_cast<unsigned>(numbers[last]), 0) != 0) {
            for (std::size_t i = first; i <= last; ++i) ::close(numbers[i]);
        }
        first = last + 1;
    }
}

}  // namespace common
