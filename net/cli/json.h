// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A small writer of JSON text for the tool's --json output: commas and string escaping are
// taken care of; the caller keeps objects and arrays balanced.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::cli {

class JsonWriter {
 public:
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // The name of the next member of the current object.
  void Key(std::string_view name);

  void String(std::string_view value);
  void Number(uint64_t value);
  void Number(double value);
  void Bool(bool value);
  void Null();

  // Key(name) and a value.
  void Field(std::string_view name, std::string_view value);
  void Field(std::string_view name, const std::string& value) {
    Field(name, std::string_view(value));
  }
  void Field(std::string_view name, const char* value) { Field(name, std::string_view(value)); }
  void Field(std::string_view name, uint64_t value);
  void Field(std::string_view name, double value);
  void Field(std::string_view name, bool value);

  const std::string& text() const { return text_; }

 private:
  // Writes the comma that separates this value from the previous one, if any.
  void BeforeValue();

  std::string text_;
  std::vector<bool> has_items_;  // One per open object or array.
  bool after_key_ = false;
};

}  // namespace cairn::cli
