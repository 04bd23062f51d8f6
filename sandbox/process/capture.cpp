#include "sandbox/process/capture.hpp"

#include <algorithm>
#include <cstring>

namespace sandbox {

namespace {

// Bytes in roughly decreasing frequency in build output; a byte not listed counts as rarest.
constexpr std::string_view k_common_bytes =
    " etaoinsrhldcumfpgwybvkxjqz0123456789\n.,-_/:=()[]'\"ETAOINSRHLDCUMFPGWYBVKXJQZ";

std::size_t rarest_byte(std::string_view marker) {
    std::size_t best = 0;
    std::size_t best_rank = 0;
    for (std::size_t i = 0; i < marker.size(); ++i) {
        const std::size_t at = k_common_bytes.find(marker[i]);
        const std::size_t rank = at == std::string_view::npos ? k_common_bytes.size() : at;
        if (i == 0 || rank > best_rank) {
            best = i;
            best_rank = rank;
        }
    }
    return best;
}

}  // namespace

MarkerCounter::MarkerCounter(std::string_view marker)
    : m_marker(marker), m_anchor(rarest_byte(marker)) {}

// The first marker in [data, data + size). memchr (vectorised in glibc, tens of GiB/s) for
// the marker's rarest byte, then a compare: far faster than memmem on ordinary output. When
// that byte turns out to be common in this output, memmem takes over for the rest; every
// position before it has been ruled out, so no marker is missed either way.
const char* MarkerCounter::find(const char* data, std::size_t size) const {
    const std::size_t length = m_marker.size();
    if (size < length) return nullptr;
    const char anchor = m_marker[m_anchor];
    const char* const last_start = data + (size - length);
    const char* from = data + m_anchor;
    std::size_t misses = 0;
    while (from <= last_start + m_anchor) {
        const auto* hit = static_cast<const char*>(
            std::memchr(from, anchor, static_cast<std::size_t>(last_start + m_anchor - from) + 1));
        if (hit == nullptr) return nullptr;
        const char* start = hit - m_anchor;
        if (std::memcmp(start, m_marker.data(), length) == 0) return start;
        from = hit + 1;
        if (++misses >= 16 && static_cast<std::size_t>(from - data) < misses * 64) {
            const char* rest = from - m_anchor;
            return static_cast<const char*>(::memmem(
                rest, static_cast<std::size_t>(data + size - rest), m_marker.data(), length));
        }
    }
    return nullptr;
}

void MarkerCounter::feed(std::string_view chunk) {
    if (chunk.empty() || m_marker.empty()) return;
    const std::size_t keep = m_marker.size() - 1;
    const char* data = chunk.data();
    // A marker that starts in the carried bytes and ends in this chunk belongs to the line
    // that was current at the end of the previous chunk (a marker holds no newline).
    if (!m_carry.empty() && !m_line_counted) {
        m_joined.assign(m_carry);
        m_joined.append(chunk.substr(0, keep));
        const std::size_t at = m_joined.find(m_marker);
        if (at != std::string::npos && at < m_carry.size()) {
            ++m_count;
            m_line_counted = true;
        }
    }
    // `known` is the offset up to which m_line_counted describes the current line.
    std::size_t known = 0;
    std::size_t from = 0;
    while (from + m_marker.size() <= chunk.size()) {
        const char* hit = find(data + from, chunk.size() - from);
        if (hit == nullptr) break;
        const std::size_t at = static_cast<std::size_t>(hit - data);
        if (m_line_counted && std::memchr(data + known, '\n', at - known) != nullptr)
            m_line_counted = false;
        if (!m_line_counted) {
            ++m_count;
            m_line_counted = true;
        }
        known = at;
        // Skip to the end of this line: further markers on it do not count.
        const void* newline = std::memchr(data + at, '\n', chunk.size() - at);
        if (newline == nullptr) {
            from = chunk.size();
            break;
        }
        known = static_cast<std::size_t>(static_cast<const char*>(newline) - data) + 1;
        m_line_counted = false;
        from = known;
    }
    // Only a counted line needs to know whether it ended (a scan of the rest of the chunk).
    if (m_line_counted && known < chunk.size() &&
        ::memrchr(data + known, '\n', chunk.size() - known) != nullptr)
        m_line_counted = false;
    // Carry the last `keep` bytes of the stream (some may come from the previous carry).
    if (chunk.size() >= keep) {
        m_carry.assign(chunk.substr(chunk.size() - keep));
    } else {
        m_carry.append(chunk);
        if (m_carry.size() > keep) m_carry.erase(0, m_carry.size() - keep);
    }
}

StreamCapture::StreamCapture(std::size_t limit) : m_limit(limit) {}

std::span<char> StreamCapture::read_buffer() {
    if (m_head_size < m_limit) {
        // Untouched pages cost no memory: a large limit is only paid for as output arrives.
        if (!m_head) m_head.reset(new char[m_limit]);
        return {m_head.get() + m_head_size, std::min(m_limit - m_head_size, k_capture_ring_bytes)};
    }
    if (!m_ring) m_ring.reset(new char[k_capture_ring_bytes]);
    if (m_ring_pos == k_capture_ring_bytes) m_ring_pos = 0;
    return {m_ring.get() + m_ring_pos, k_capture_ring_bytes - m_ring_pos};
}

std::string_view StreamCapture::commit(std::size_t n) {
    std::string_view chunk;
    if (m_head_size < m_limit) {
        chunk = {m_head.get() + m_head_size, n};
        m_head_size += n;
    } else {
        chunk = {m_ring.get() + m_ring_pos, n};
        m_ring_pos += n;
        m_after_head += n;
    }
    m_bytes += n;
    m_markers.feed(chunk);
    return chunk;
}

void StreamCapture::feed(std::string_view chunk) {
    while (!chunk.empty()) {
        const std::span<char> buffer = read_buffer();
        const std::size_t n = std::min(buffer.size(), chunk.size());
        std::memcpy(buffer.data(), chunk.data(), n);
        commit(n);
        chunk.remove_prefix(n);
    }
}

StreamResult StreamCapture::result() const {
    StreamResult result;
    if (m_head) result.head.assign(m_head.get(), m_head_size);
    result.bytes = m_bytes;
    const std::size_t keep =
        static_cast<std::size_t>(std::min<std::uint64_t>(m_after_head, k_tail_bytes));
    if (keep == 0) {
        // nothing after the head
    } else if (keep <= m_ring_pos) {
        // The newest `keep` bytes sit just before the write position (a ring that has not
        // wrapped has all of its bytes there).
        result.tail.assign(m_ring.get() + m_ring_pos - keep, keep);
    } else {
        const std::size_t older = keep - m_ring_pos;  // at the end of the ring
        result.tail.assign(m_ring.get() + k_capture_ring_bytes - older, older);
        result.tail.append(m_ring.get(), m_ring_pos);
    }
    result.truncated = m_after_head > result.tail.size();
    return result;
}

}  // namespace sandbox
