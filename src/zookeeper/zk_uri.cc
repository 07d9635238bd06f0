// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// "zk://host:port[,host:port...][/root]", the daemons' --metadata for a ZooKeeper ensemble.
#include <charconv>
#include <string>
#include <string_view>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "cairn/zookeeper_metadata.h"
#include "src/util/strings.h"
#include "src/zookeeper/zk_path.h"

namespace cairn {
namespace internal {

absl::Status CheckZkRoot(std::string_view root) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("ZooKeeper root '", Sv(root), "': ", Sv(why), " (e.g. /cairn)"));
  };
  if (root.empty() || root[0] != '/') return bad("must start with '/'");
  if (root == "/") return absl::OkStatus();
  if (root.back() == '/') return bad("must not end with '/'");
  size_t start = 1;
  while (start <= root.size()) {
    size_t end = root.find('/', start);
    if (end == std::string_view::npos) end = root.size();
    const std::string_view part = root.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return bad("has an empty, '.' or '..' part");
    if (start == 1 && part == "zookeeper") return bad("/zookeeper is ZooKeeper's own");
    for (char c : part) {
      const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
      if (!plain) return bad("may hold only letters, digits, '_', '-', '.' and '/'");
    }
    start = end + 1;
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<ZooKeeperMetadataOptions> ParseZooKeeperUri(std::string_view uri) {
  constexpr std::string_view kScheme = "zk://";
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata address '", internal::Sv(uri), "': ", internal::Sv(why),
                     " (expected zk://host:port[,host:port...][/root])"));
  };
  if (!uri.starts_with(kScheme)) return bad("does not start with zk://");
  std::string_view rest = uri.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string_view servers = rest.substr(0, slash);
  ZooKeeperMetadataOptions options;
  if (slash != std::string_view::npos) {
    options.root = std::string(rest.substr(slash));
    if (absl::Status root = internal::CheckZkRoot(options.root); !root.ok()) return root;
  }
  if (servers.empty()) return bad("names no server");
  size_t start = 0;
  while (start <= servers.size()) {
    size_t end = servers.find(',', start);
    if (end == std::string_view::npos) end = servers.size();
    const std::string_view server = servers.substr(start, end - start);
    const size_t colon = server.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return bad("a server is not host:port");
    const std::string_view port_text = server.substr(colon + 1);
    unsigned port = 0;
    const auto [ptr, error] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (error != std::errc() || ptr != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return bad("a server's port is not a number from 1 to 65535");
    }
    start = end + 1;
  }
  options.servers = std::string(servers);
  return options;
}

}  // namespace cairn
