// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/cluster/text_record.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/util/strings.h"

namespace cairn::net {

absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> ParseTextRecord(
    std::string_view what, std::string_view record) {
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  size_t start = 0;
  while (start < record.size()) {
    size_t end = record.find('\n', start);
    if (end == std::string_view::npos) end = record.size();
    const std::string_view line = record.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos) {
      return absl::DataLossError(absl::StrCat(internal::Sv(what), " \"",
                                              absl::CHexEscape(internal::Sv(record)),
                                              "\": a line without '='"));
    }
    fields.emplace_back(line.substr(0, equals), line.substr(equals + 1));
  }
  return fields;
}

}  // namespace cairn::net
