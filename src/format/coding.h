// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Little-endian fixed-width integers, LEB128 varints and zigzag, the building blocks of every
// on-disk format in cairn.
//
// Encoding writes into caller-provided memory that is known to be large enough (callers size it
// with VarintLength / the fixed widths first). Decoding goes through `Decoder`, which never reads
// past the span it was given and accepts only the canonical (shortest) encoding of a varint, so
// that one value has exactly one byte representation and a decoded record can be re-encoded to
// the identical bytes.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace cairn::internal {

// Longest varint encodings: 7 payload bits per byte.
inline constexpr size_t kMaxVarint32Bytes = 5;
inline constexpr size_t kMaxVarint64Bytes = 10;

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "mixed-endian platforms are not supported");

namespace coding_detail {

template <typename T>
constexpr T ToLittleEndian(T value) {
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    return value;
  } else if constexpr (sizeof(T) == 2) {
    return __builtin_bswap16(value);
  } else if constexpr (sizeof(T) == 4) {
    return __builtin_bswap32(value);
  } else {
    static_assert(sizeof(T) == 8);
    return __builtin_bswap64(value);
  }
}

}  // namespace coding_detail

// ---- fixed width ------------------------------------------------------------------------------
// `dst`/`src` need not be aligned. The caller guarantees sizeof(value) bytes are addressable.

inline void EncodeFixed16(char* dst, uint16_t value) {
  value = coding_detail::ToLittleEndian(value);
  std::memcpy(dst, &value, sizeof(value));
}
inline void EncodeFixed32(char* dst, uint32_t value) {
  value = coding_detail::ToLittleEndian(value);
  std::memcpy(dst, &value, sizeof(value));
}
inline void EncodeFixed64(char* dst, uint64_t value) {
  value = coding_detail::ToLittleEndian(value);
  std::memcpy(dst, &value, sizeof(value));
}

inline uint16_t DecodeFixed16(const char* src) {
  uint16_t value;
  std::memcpy(&value, src, sizeof(value));
  return coding_detail::ToLittleEndian(value);
}
inline uint32_t DecodeFixed32(const char* src) {
  uint32_t value;
  std::memcpy(&value, src, sizeof(value));
  return coding_detail::ToLittleEndian(value);
}
inline uint64_t DecodeFixed64(const char* src) {
  uint64_t value;
  std::memcpy(&value, src, sizeof(value));
  return coding_detail::ToLittleEndian(value);
}

// ---- zigzag -----------------------------------------------------------------------------------
// Maps signed integers of small magnitude to small unsigned ones (0,-1,1,-2 -> 0,1,2,3), so that
// their varints are short.

constexpr uint64_t ZigZagEncode64(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}
constexpr int64_t ZigZagDecode64(uint64_t value) {
  return static_cast<int64_t>((value >> 1) ^ (~(value & 1) + 1));
}

// ---- varint -----------------------------------------------------------------------------------
// Unsigned LEB128: 7 bits per byte, least significant group first, high bit set on every byte but
// the last. The canonical encoding is the shortest one; a multi-byte encoding whose last byte is
// zero is non-canonical and rejected on decode.

constexpr size_t VarintLength(uint64_t value) {
  // Bits needed, rounded up to groups of 7; zero still takes one byte.
  const int bits = 64 - std::countl_zero(value | 1);
  return static_cast<size_t>((bits + 6) / 7);
}

// Writes the varint of `value` at `dst`, which must have VarintLength(value) bytes of room.
// Returns the position just past the encoding.
inline char* EncodeVarint64(char* dst, uint64_t value) {
  while (value >= 0x80) {
    *dst++ = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  *dst++ = static_cast<char>(value);
  return dst;
}

// Why a decode failed. Callers turn it into a Status with their own context.
enum class DecodeError : uint8_t {
  kOk = 0,
  kTruncated,     // the input ended inside the value
  kNonCanonical,  // a varint with redundant trailing zero groups
  kOverflow,      // a varint whose value does not fit the requested width
};

constexpr std::string_view DecodeErrorName(DecodeError error) {
  switch (error) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kNonCanonical:
      return "non-canonical varint";
    case DecodeError::kOverflow:
      return "varint overflow";
  }
  return "unknown decode error";
}

// A bounds-checked reading cursor over borrowed bytes. Every Read* either succeeds and advances,
// or fails, leaves the cursor where it was, and reports why. Nothing is ever read outside the span.
class Decoder {
 public:
  explicit Decoder(std::span<const char> bytes)
      : begin_(bytes.data()), pos_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  size_t offset() const { return static_cast<size_t>(pos_ - begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }
  bool empty() const { return pos_ == end_; }
  const char* position() const { return pos_; }
  // The unread rest of the input.
  std::span<const char> rest() const { return {pos_, remaining()}; }

  [[nodiscard]] DecodeError ReadFixed8(uint8_t* value) {
    if (pos_ == end_) return DecodeError::kTruncated;
    *value = static_cast<uint8_t>(*pos_++);
    return DecodeError::kOk;
  }

  [[nodiscard]] DecodeError ReadVarint64(uint64_t* value) {
    return ReadVarint(kMaxVarint64Bytes, /*last_byte_max=*/0x01, value);
  }

  [[nodiscard]] DecodeError ReadVarint32(uint32_t* value) {
    uint64_t wide;
    const DecodeError error = ReadVarint(kMaxVarint32Bytes, /*last_byte_max=*/0x0f, &wide);
    if (error == DecodeError::kOk) *value = static_cast<uint32_t>(wide);
    return error;
  }

  // Borrows the next `length` bytes.
  [[nodiscard]] DecodeError ReadBytes(size_t length, std::string_view* bytes) {
    if (length > remaining()) return DecodeError::kTruncated;
    *bytes = std::string_view(pos_, length);
    pos_ += length;
    return DecodeError::kOk;
  }

  // Skips the next `length` bytes.
  [[nodiscard]] DecodeError Skip(size_t length) {
    if (length > remaining()) return DecodeError::kTruncated;
    pos_ += length;
    return DecodeError::kOk;
  }

 private:
  // `max_bytes` is the longest encoding of the target width; its final byte may only carry the
  // bits that are left (`last_byte_max`), anything more overflows the type.
  DecodeError ReadVarint(size_t max_bytes, uint8_t last_byte_max, uint64_t* value) {
    // Fast path: one byte, by far the most common case for lengths and counts.
    if (pos_ != end_ && static_cast<uint8_t>(*pos_) < 0x80) {
      *value = static_cast<uint8_t>(*pos_++);
      return DecodeError::kOk;
    }
    uint64_t result = 0;
    const char* p = pos_;
    for (size_t i = 0; i < max_bytes; ++i) {
      if (p == end_) return DecodeError::kTruncated;
      const uint8_t byte = static_cast<uint8_t>(*p++);
      if (i == max_bytes - 1 && byte > last_byte_max) return DecodeError::kOverflow;
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        if (byte == 0 && i > 0) return DecodeError::kNonCanonical;
        pos_ = p;
        *value = result;
        return DecodeError::kOk;
      }
    }
    // Unreachable: the last allowed byte has its continuation bit clear (last_byte_max < 0x80).
    return DecodeError::kOverflow;
  }

  const char* begin_;
  const char* pos_;
  const char* end_;
};

// Appends `value` as a varint.
inline void PutVarint(std::string& out, uint64_t value) {
  char buffer[kMaxVarint64Bytes];
  out.append(buffer, EncodeVarint64(buffer, value) - buffer);
}

// Reads a record made of varints and bytes, and stops at the first failure: every read after a
// failed one fails too, so a decoder may test each step or only the last.
class RecordReader {
 public:
  explicit RecordReader(std::span<const char> bytes) : decoder_(bytes) {}
  bool Varint(uint64_t* value) {
    return ok_ && (ok_ = decoder_.ReadVarint64(value) == DecodeError::kOk);
  }
  bool Signed(int64_t* value) {
    uint64_t raw;
    if (!Varint(&raw)) return false;
    *value = ZigZagDecode64(raw);
    return true;
  }
  bool Byte(uint8_t* value) { return ok_ && (ok_ = decoder_.ReadFixed8(value) == DecodeError::kOk); }
  bool ok() const { return ok_; }
  bool done() const { return decoder_.empty(); }
  size_t remaining() const { return decoder_.remaining(); }

 private:
  Decoder decoder_;
  bool ok_ = true;
};

}  // namespace cairn::internal
