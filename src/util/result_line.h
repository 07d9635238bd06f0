// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// One result line of cairn-bench and of `cairn perf`. Every line starts with these fields, in this
// order, so that lines from any run, case, tool or system compare field by field:
//
//   system=<cairn|raw> case=<msgs>x<size>B batch=<B> sync=<0|1> append_msgs_per_s=..
//   append_MB_per_s=.. p50_us=.. p99_us=.. read_MB_per_s=..
//
// and continues with any number of extra key=value fields. A figure a case does not measure is
// printed as "-" (null in JSON). The constructor takes the fixed fields, so a line cannot come out
// in another shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace cairn::internal {

// The fields every line starts with. MB is 10^6 bytes.
struct ResultHeadline {
  std::string system;  // "cairn" or "raw"
  uint64_t messages = 0;
  uint64_t message_bytes = 0;
  uint64_t batch = 1;  // Messages per append.
  bool sync = false;
  std::optional<double> append_messages_per_s;
  std::optional<double> append_mb_per_s;
  std::optional<double> p50_us;
  std::optional<double> p99_us;
  std::optional<double> read_mb_per_s;
};

class ResultLine {
 public:
  explicit ResultLine(const ResultHeadline& h) {
    Text("system", h.system);
    Text("case", absl::StrFormat("%dx%dB", h.messages, h.message_bytes));
    Int("batch", static_cast<int64_t>(h.batch));
    Int("sync", h.sync ? 1 : 0);
    Number("append_msgs_per_s", h.append_messages_per_s, 0);
    Number("append_MB_per_s", h.append_mb_per_s, 1);
    Number("p50_us", h.p50_us, 1);
    Number("p99_us", h.p99_us, 1);
    Number("read_MB_per_s", h.read_mb_per_s, 1);
  }

  // `value` must not contain spaces, quotes or '='.
  void Text(std::string_view key, std::string_view value) {
    fields_.push_back({std::string(key), std::string(value), Kind::kText});
  }
  void Int(std::string_view key, int64_t value) {
    fields_.push_back({std::string(key), absl::StrFormat("%d", value), Kind::kNumber});
  }
  // `digits` after the decimal point. std::nullopt prints "-" (JSON null).
  void Number(std::string_view key, std::optional<double> value, int digits) {
    if (!value.has_value()) {
      fields_.push_back({std::string(key), "-", Kind::kMissing});
    } else {
      fields_.push_back({std::string(key), absl::StrFormat("%.*f", digits, *value), Kind::kNumber});
    }
  }
  // A ratio of two figures measured in this run; omitted when the denominator is unknown.
  void Ratio(std::string_view key, std::optional<double> numerator,
             std::optional<double> denominator) {
    if (!numerator.has_value() || !denominator.has_value() || *denominator <= 0) return;
    Number(key, *numerator / *denominator, 3);
  }

  // key=value pairs separated by single spaces.
  std::string TextLine() const {
    std::string line;
    for (const Field& f : fields_) {
      if (!line.empty()) line += ' ';
      line += f.key;
      line += '=';
      line += f.value;
    }
    return line;
  }

  // One JSON object with the same keys, in the same order.
  std::string JsonLine() const {
    std::string line = "{";
    for (const Field& f : fields_) {
      if (line.size() > 1) line += ',';
      absl::StrAppendFormat(&line, "\"%s\":", f.key);
      switch (f.kind) {
        case Kind::kText:
          absl::StrAppendFormat(&line, "\"%s\"", f.value);
          break;
        case Kind::kNumber:
          line += f.value;
          break;
        case Kind::kMissing:
          line += "null";
          break;
      }
    }
    return line + "}";
  }

 private:
  enum class Kind { kText, kNumber, kMissing };
  struct Field {
    std::string key;
    std::string value;
    Kind kind;
  };
  std::vector<Field> fields_;
};

}  // namespace cairn::internal
