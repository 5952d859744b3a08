// Encoder and decoder of the records of proto/gpuctl/v1/records.h,
// generated from its field tables, for the library's writer, the daemon's
// reader and the tests' builders and decoders alike.
//
// Every field is an explicit little-endian store or load at a constant
// offset; after inlining a record is straight-line code (no loop, branch
// or call per field). Nothing is reinterpret_cast.
#ifndef GPUCTL_PROTO_GPUCTL_V1_RECORD_CODEC_H_
#define GPUCTL_PROTO_GPUCTL_V1_RECORD_CODEC_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include "gpuctl/v1/records.h"

namespace gpuctl::records {

// Little-endian stores and loads of one field; `p` has the field's bytes.
template <typename T>
requires std::is_integral_v<T>
inline void StoreField(uint8_t* p, T v) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(v);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &u, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
  }
}

template <typename T>
requires std::is_integral_v<T>
inline void LoadField(const uint8_t* p, T* v) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&u, p, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(U); ++i)
      u = static_cast<U>(u | (static_cast<U>(p[i]) << (8 * i)));
  }
  *v = static_cast<T>(u);
}

template <typename T, size_t N>
inline void StoreField(uint8_t* p, const std::array<T, N>& v) {
  for (size_t i = 0; i < N; ++i) StoreField(p + i * sizeof(T), v[i]);
}

template <typename T, size_t N>
inline void LoadField(const uint8_t* p, std::array<T, N>* v) {
  for (size_t i = 0; i < N; ++i) LoadField(p + i * sizeof(T), &(*v)[i]);
}

// EncodeFields(r, p) writes every field and reserved span of r's table at
// its offset from p. DecodeFields(p, size, &r) reads the fields that lie
// within `size` bytes (those within the kind's minimum size unconditionally:
// the condition is constant) and leaves the others as they are.
#define GPUCTL_RECORDS_STORE_(type, name, offset) StoreField(p + (offset), r.name);
#define GPUCTL_RECORDS_STORE_PAD_(offset, bytes) std::memset(p + (offset), 0, bytes);
#define GPUCTL_RECORDS_LOAD_(type, name, offset)                                         \
  if ((offset) + sizeof(type) <= Layout<R>::kMinSize || (offset) + sizeof(type) <= size) \
    LoadField(p + (offset), &r->name);
#define GPUCTL_RECORDS_SKIP_(offset, bytes)
#define GPUCTL_RECORDS_CODEC_(Type, FIELDS)                           \
  inline void EncodeFields(const Type& r, uint8_t* p) {               \
    FIELDS(GPUCTL_RECORDS_STORE_, GPUCTL_RECORDS_STORE_PAD_)          \
  }                                                                   \
  /* NOLINTNEXTLINE(bugprone-macro-parentheses): Type names a type */ \
  inline void DecodeFields(const uint8_t* p, size_t size, Type* r) {  \
    using R = Type;                                                   \
    FIELDS(GPUCTL_RECORDS_LOAD_, GPUCTL_RECORDS_SKIP_)                \
  }
#define GPUCTL_RECORDS_RECORD_CODEC_(Name, kind, min_size) \
  GPUCTL_RECORDS_CODEC_(Name##Record, GPUCTL_RECORD_FIELDS_##Name)

GPUCTL_RECORDS_CODEC_(PayloadHeader, GPUCTL_RECORD_HEADER_FIELDS)
GPUCTL_RECORD_KINDS(GPUCTL_RECORDS_RECORD_CODEC_)

#undef GPUCTL_RECORDS_RECORD_CODEC_
#undef GPUCTL_RECORDS_CODEC_
#undef GPUCTL_RECORDS_SKIP_
#undef GPUCTL_RECORDS_LOAD_
#undef GPUCTL_RECORDS_STORE_PAD_
#undef GPUCTL_RECORDS_STORE_

// Writes the record: kind, size and fields, Layout<R>::kSize bytes at `out`
// (reserved bytes 0).
template <typename R>
inline void EncodeRecord(const R& r, uint8_t* out) {
  StoreField(out, static_cast<uint16_t>(Layout<R>::kKind));
  StoreField(out + 2, Layout<R>::kSize);
  EncodeFields(r, out);
}

// Reads a record of kind R whose `size` bytes (from its prefix) are at `p`.
// nullopt when size is below the kind's minimum. Bytes past the fields this
// build knows (a newer minor's) are ignored; fields past `size` (an older
// minor's record) are 0.
template <typename R>
inline std::optional<R> DecodeRecord(const uint8_t* p, size_t size) {
  if (size < Layout<R>::kMinSize) return std::nullopt;
  R r;
  DecodeFields(p, size, &r);
  return r;
}

// The header: kHeaderSize bytes at `out` / `p` (the reader checks the size
// and skips a longer header's extra bytes).
inline void EncodeHeader(const PayloadHeader& h, uint8_t* out) { EncodeFields(h, out); }
inline PayloadHeader DecodeHeader(const uint8_t* p) {
  PayloadHeader h;
  DecodeFields(p, kHeaderSize, &h);
  return h;
}

}  // namespace gpuctl::records

#endif  // GPUCTL_PROTO_GPUCTL_V1_RECORD_CODEC_H_
