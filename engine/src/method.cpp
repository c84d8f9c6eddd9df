#include "warren/wire/method.hpp"

#include <array>

#include "warren/wire/constants.hpp"
#include "warren/wire/method_codec.hpp"

namespace warren::wire {
namespace {

template <std::size_t I>
using Alt = std::variant_alternative_t<I, Method>;
constexpr std::size_t method_count = std::variant_size_v<Method>;

// Class ids are sparse (10..85) and method ids small (<128): map each (class, method) pair to
// a slot in a flat table, so dispatch is one load, not a search.
constexpr int class_slot(std::uint16_t class_id) {
  switch (class_id) {
    case 10: return 0;
    case 20: return 1;
    case 40: return 2;
    case 50: return 3;
    case 60: return 4;
    case 85: return 5;
    default: return -1;
  }
}
constexpr std::size_t methods_per_class = 128;

template <std::size_t... I>
constexpr auto make_index(std::index_sequence<I...>) {
  std::array<std::uint8_t, 6 * methods_per_class> index{};  // alternative + 1; 0 = unknown
  ((index[static_cast<std::size_t>(class_slot(Alt<I>::id.class_id)) * methods_per_class +
          Alt<I>::id.method_id] = static_cast<std::uint8_t>(I + 1)),
   ...);
  return index;
}
constexpr auto alt_index = make_index(std::make_index_sequence<method_count>{});

using DecodeFn = Result<void> (*)(Reader&, Method&);

template <class M>
Result<void> decode_as(Reader& in, Method& out) {
  return detail::decode_fields_into(in, out.emplace<M>());
}

template <std::size_t... I>
constexpr auto make_decoders(std::index_sequence<I...>) {
  return std::array<DecodeFn, method_count>{&decode_as<Alt<I>>...};
}
constexpr auto decoders = make_decoders(std::make_index_sequence<method_count>{});

template <std::size_t... I>
constexpr auto make_names(std::index_sequence<I...>) {
  return std::array<std::string_view, method_count>{Alt<I>::name...};
}
constexpr auto names = make_names(std::make_index_sequence<method_count>{});

int find_alternative(MethodId id) {
  int slot = class_slot(id.class_id);
  if (slot < 0 || id.method_id >= methods_per_class) return -1;
  return alt_index[static_cast<std::size_t>(slot) * methods_per_class + id.method_id] - 1;
}

}  // namespace

Result<Method> decode_method(std::span<const std::byte> payload) {
  Method m;
  if (auto r = decode_method(payload, m); !r.ok()) return std::move(r).error();
  return m;
}

Result<void> decode_method(std::span<const std::byte> payload, Method& out) {
  Reader in(payload);
  MethodId id{in.u16(), in.u16()};
  if (in.failed())
    return make_error(errc::frame_too_small, "method frame of " + std::to_string(payload.size()) +
                                                 " bytes has no class and method id");
  int alt = find_alternative(id);
  if (alt < 0)
    return make_error(errc::unknown_method, "method " + std::to_string(id.class_id) + "." +
                                                std::to_string(id.method_id) +
                                                " is not one warren knows");
  return decoders[static_cast<std::size_t>(alt)](in, out);
}

MethodId method_id(const Method& m) {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::id; }, m);
}

std::string_view method_name(const Method& m) { return names[m.index()]; }

std::string_view method_name(MethodId id) {
  int alt = find_alternative(id);
  return alt < 0 ? std::string_view{} : names[static_cast<std::size_t>(alt)];
}

Result<std::size_t> method_payload_size(const Method& m) {
  return std::visit([](const auto& x) { return detail::payload_size(x); }, m);
}

void encode_method_payload(Writer& out, const Method& m) {
  std::visit([&](const auto& x) { detail::encode_payload(out, x); }, m);
}

std::string to_string(const Method& m) {
  return std::visit(
      [](const auto& x) {
        using M = std::decay_t<decltype(x)>;
        detail::PrintVisitor v;
        M::fields(x, v);
        return std::string(M::name) + "(" + v.out + ")";
      },
      m);
}

Error detail::unsizable_field(std::string_view method, const char* field, const TableRef* table) {
  if (table) {
    auto size = table->encoded_size();
    Error e = size.ok() ? make_error(errc::malformed_payload, "the table could not be sized") : size.error();
    e.detail = std::string(method) + " " + field + ": " + e.detail;
    return e;
  }
  return make_error(errc::string_too_long, std::string(method) + " " + field + " is over 255 bytes");
}

}  // namespace warren::wire
