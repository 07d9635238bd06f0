// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/producer_stamp.h"


namespace cairn::net {
namespace {

void Store64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

uint64_t Load64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}

}  // namespace

std::string EncodeProducerStamp(const ProducerStamp& stamp) {
  std::string value(kProducerStampValueBytes, '\0');
  Store64(value.data(), stamp.producer_id);
  Store64(value.data() + 8, stamp.sequence);
  return value;
}

std::optional<ProducerStamp> FindProducerStamp(const HeadersView& headers) {
  for (const EntryHeader& header : headers) {
    if (header.first != kProducerStampHeader) continue;
    if (header.second.size() != kProducerStampValueBytes) return std::nullopt;
    return ProducerStamp{.producer_id = Load64(header.second.data()),
                         .sequence = Load64(header.second.data() + 8)};
  }
  return std::nullopt;
}

}  // namespace cairn::net
