#pragma once
// The one set of libcurl handles, each an owning RAII type, shared by the GitHub REST client
// (http_client.cpp) and the agent API's client (agent/cli/api_client.cpp).
//
// Contract: curl_global_once() before the first handle of a process (libcurl's global init is
// not thread-safe and curl_easy_init would otherwise run it implicitly, racing another
// thread's); append_header() leaves the list as it was when libcurl cannot allocate.

#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <string>

namespace github {

struct CurlEasyDeleter {
    void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct CurlSlistDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
struct CurlShareDeleter {
    void operator()(CURLSH* share) const { curl_share_cleanup(share); }
};
struct CurlMultiDeleter {
    void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
using EasyHandle = std::unique_ptr<CURL, CurlEasyDeleter>;
using HeaderList = std::unique_ptr<curl_slist, CurlSlistDeleter>;
using ShareHandle = std::unique_ptr<CURLSH, CurlShareDeleter>;
using MultiHandle = std::unique_ptr<CURLM, CurlMultiDeleter>;

inline void curl_global_once() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Appends one header line; false (and the list unchanged) when libcurl cannot allocate.
inline bool append_header(HeaderList& list, const std::string& line) {
    curl_slist* grown = curl_slist_append(list.get(), line.c_str());
    if (grown == nullptr) return false;
    (void)list.release();  // curl_slist_append returned the same head (or a new one)
    list.reset(grown);
    return true;
}

// A fresh easy handle, after the global init.
inline EasyHandle make_easy_handle() {
    curl_global_once();
    return EasyHandle(curl_easy_init());
}

}  // namespace github
