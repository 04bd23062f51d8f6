#pragma once
// XML's five predefined entities, for text and attribute values alike.

#include <string>
#include <string_view>

namespace common {

// `text` with & < > " ' as &amp; &lt; &gt; &quot; &apos; (.NET's SecurityElement.Escape, which
// the runner uses to mask secrets' XML form); every other byte as it is.
std::string xml_escape(std::string_view text);

}  // namespace common
