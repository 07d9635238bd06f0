// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The escaping of keys into ZooKeeper node names (zk_path.h).
#include "src/zookeeper/zk_path.h"

#include <string>
#include <string_view>

namespace cairn::internal {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool Plain(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

void Escape(std::string_view part, bool escape_leading_dot, std::string& out) {
  for (size_t i = 0; i < part.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(part[i]);
    if (Plain(c) && !(i == 0 && c == '.' && escape_leading_dot)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // Lower case is never written: a name holding it is not ours.
}

std::optional<std::string> Unescape(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c != '%') {
      if (!Plain(c)) return std::nullopt;
      out.push_back(static_cast<char>(c));
      continue;
    }
    if (i + 2 >= name.size()) return std::nullopt;
    const int high = HexValue(name[i + 1]);
    const int low = HexValue(name[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    const unsigned char byte = static_cast<unsigned char>(high * 16 + low);
    if (Plain(byte) && byte != '.') return std::nullopt;  // Not how this layout writes it.
    out.push_back(static_cast<char>(byte));
    i += 2;
  }
  return out;
}

}  // namespace

std::string ZkDirectoryName(std::string_view part) {
  if (part.empty()) return "%";
  std::string name;
  Escape(part, /*escape_leading_dot=*/true, name);
  return name;
}

std::string ZkLeafName(std::string_view part) {
  std::string name = "=";
  Escape(part, /*escape_leading_dot=*/false, name);
  return name;
}

std::optional<ZkName> ParseZkName(std::string_view name) {
  if (name.empty()) return std::nullopt;
  if (name[0] == '=') {
    std::optional<std::string> part = Unescape(name.substr(1));
    if (!part.has_value()) return std::nullopt;
    return ZkName{.leaf = true, .part = *std::move(part)};
  }
  if (name == "%") return ZkName{.leaf = false, .part = ""};
  if (name[0] == '.') return std::nullopt;
  std::optional<std::string> part = Unescape(name);
  if (!part.has_value()) return std::nullopt;
  return ZkName{.leaf = false, .part = *std::move(part)};
}

ZkKeyPath ZkPathOfKey(std::string_view root, std::string_view key) {
  ZkKeyPath path;
  path.parent = std::string(root);
  size_t start = 0;
  for (size_t slash = key.find('/'); slash != std::string_view::npos;
       slash = key.find('/', start)) {
    path.parent += '/';
    path.parent += ZkDirectoryName(key.substr(start, slash - start));
    path.directories.push_back(path.parent);
    start = slash + 1;
  }
  path.leaf = path.parent + "/" + ZkLeafName(key.substr(start));
  return path;
}

ZkListStart ZkListStartOf(std::string_view root, std::string_view prefix) {
  const size_t last_slash = prefix.rfind('/');
  const std::string_view whole = last_slash == std::string_view::npos
                                     ? std::string_view()
                                     : prefix.substr(0, last_slash + 1);
  ZkListStart start;
  // The directories of `whole` are those of a key "<whole>x".
  ZkKeyPath path = ZkPathOfKey(root, std::string(whole) + "x");
  start.directory = std::move(path.parent);
  start.directories = std::move(path.directories);
  start.key_prefix = std::string(whole);
  start.partial = std::string(prefix.substr(whole.size()));
  return start;
}

}  // namespace cairn::internal
