// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cairn::cli {

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_items_.empty()) {
    if (has_items_.back()) text_ += ',';
    has_items_.back() = true;
  }
}

void JsonWriter::BeginObject() {
  BeforeValue();
  text_ += '{';
  has_items_.push_back(false);
}

void JsonWriter::EndObject() {
  text_ += '}';
  has_items_.pop_back();
}

void JsonWriter::BeginArray() {
  BeforeValue();
  text_ += '[';
  has_items_.push_back(false);
}

void JsonWriter::EndArray() {
  text_ += ']';
  has_items_.pop_back();
}

void JsonWriter::Key(std::string_view name) {
  String(name);
  text_ += ':';
  after_key_ = true;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  text_ += '"';
  for (const char c : value) {
    switch (c) {
      case '"':
        text_ += "\\\"";
        break;
      case '\\':
        text_ += "\\\\";
        break;
      case '\n':
        text_ += "\\n";
        break;
      case '\r':
        text_ += "\\r";
        break;
      case '\t':
        text_ += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&text_, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          // Bytes >= 0x80 pass through: paths and messages are taken to be UTF-8.
          text_ += c;
        }
    }
  }
  text_ += '"';
}

void JsonWriter::Number(uint64_t value) {
  BeforeValue();
  absl::StrAppend(&text_, value);
}

void JsonWriter::Number(double value) {
  BeforeValue();
  if (std::isfinite(value)) {
    absl::StrAppendFormat(&text_, "%.6g", value);
  } else {
    text_ += "null";  // JSON has no infinities.
  }
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  text_ += value ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  text_ += "null";
}

void JsonWriter::Field(std::string_view name, std::string_view value) {
  Key(name);
  String(value);
}

void JsonWriter::Field(std::string_view name, uint64_t value) {
  Key(name);
  Number(value);
}

void JsonWriter::Field(std::string_view name, double value) {
  Key(name);
  Number(value);
}

void JsonWriter::Field(std::string_view name, bool value) {
  Key(name);
  Bool(value);
}

}  // namespace cairn::cli
