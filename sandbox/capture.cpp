#include "sandbox/capture.hpp"

#include <algorithm>
#include <cstring>

namespace sandbox {

MarkerCounter::MarkerCounter(std::string_view marker) : m_marker(marker) {}

void MarkerCounter::feed(std::string_view chunk) {
    if (chunk.empty() || m_marker.empty()) return;
    const std::size_t keep = m_marker.size() - 1;
    const char* data = chunk.data();
    // A marker that starts in the carried bytes and ends in this chunk belongs to the line
    // that was current at the end of the previous chunk (a marker holds no newline).
    if (!m_carry.empty()) {
        std::string joined = m_carry;
        joined.append(chunk.substr(0, keep));
        const std::size_t at = joined.find(m_marker);
        if (at != std::string::npos && at < m_carry.size() && !m_line_counted) {
            ++m_count;
            m_line_counted = true;
        }
    }
    // `known` is the offset up to which m_line_counted describes the current line.
    std::size_t known = 0;
    std::size_t from = 0;
    while (from + m_marker.size() <= chunk.size()) {
        const void* hit = ::memmem(data + from, chunk.size() - from, m_marker.data(), m_marker.size());
        if (hit == nullptr) break;
        const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - data);
        if (std::memchr(data + known, '\n', at - known) != nullptr) m_line_counted = false;
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
    if (known < chunk.size() && ::memrchr(data + known, '\n', chunk.size() - known) != nullptr)
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

void StreamCapture::feed(std::string_view chunk) {
    m_bytes += chunk.size();
    m_markers.feed(chunk);
    if (m_head.size() < m_limit) {
        const std::size_t take = std::min(chunk.size(), m_limit - m_head.size());
        m_head.append(chunk.substr(0, take));
        chunk.remove_prefix(take);
    }
    if (!chunk.empty()) feed_tail(chunk);
}

void StreamCapture::feed_tail(std::string_view chunk) {
    m_after_head += chunk.size();
    if (m_ring.empty()) m_ring.resize(k_tail_bytes);
    if (chunk.size() >= k_tail_bytes) {
        std::memcpy(m_ring.data(), chunk.data() + chunk.size() - k_tail_bytes, k_tail_bytes);
        m_ring_pos = 0;
        return;
    }
    const std::size_t first = std::min(chunk.size(), k_tail_bytes - m_ring_pos);
    std::memcpy(m_ring.data() + m_ring_pos, chunk.data(), first);
    std::memcpy(m_ring.data(), chunk.data() + first, chunk.size() - first);
    m_ring_pos = (m_ring_pos + chunk.size()) % k_tail_bytes;
}

StreamResult StreamCapture::result() const {
    StreamResult result;
    result.head = m_head;
    result.bytes = m_bytes;
    if (m_after_head <= k_tail_bytes) {
        // The ring has not wrapped: its first m_after_head bytes are the tail.
        result.tail = m_ring.substr(0, static_cast<std::size_t>(m_after_head));
    } else {
        result.tail = m_ring.substr(m_ring_pos) + m_ring.substr(0, m_ring_pos);
    }
    result.truncated = m_after_head > result.tail.size();
    return result;
}

}  // namespace sandbox
