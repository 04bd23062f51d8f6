#pragma once
// RAII for libarchive's handles and the entry-name rule the archive readers share
// (jobs/actions/action_archive.cpp, jobs/builtins/tree_archive.cpp).

#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace jobs::archive_io {

struct ReadFree {
    void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteFree {
    void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
    void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using ArchiveReader = std::unique_ptr<archive, ReadFree>;
using ArchiveWriter = std::unique_ptr<archive, WriteFree>;
using ArchiveEntry = std::unique_ptr<archive_entry, EntryFree>;

inline std::string archive_text(archive* a) {
    const char* text = archive_error_string(a);
    return text != nullptr ? text : "unknown libarchive error";
}

// An entry's name split into components; empty when it is absolute or has a `..`.
inline std::vector<std::string> components(std::string_view name) {
    std::vector<std::string> out;
    if (name.empty() || name.front() == '/') return {};
    std::size_t start = 0;
    while (start < name.size()) {
        auto slash = name.find('/', start);
        if (slash == std::string_view::npos) slash = name.size();
        const auto part = name.substr(start, slash - start);
        if (part == "..") return {};
        if (!part.empty() && part != ".") out.emplace_back(part);
        start = slash + 1;
    }
    return out;
}

}  // namespace jobs::archive_io
