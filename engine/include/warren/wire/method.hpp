// Every method warren speaks, as one variant, with its decode, encode and printed form.
// Classes connection (with RabbitMQ's update-secret), channel, exchange, queue, basic and
// confirm, both directions.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "warren/result.hpp"
#include "warren/wire/byte_io.hpp"
#include "warren/wire/methods_basic.hpp"
#include "warren/wire/methods_channel.hpp"
#include "warren/wire/methods_connection.hpp"
#include "warren/wire/methods_exchange.hpp"
#include "warren/wire/methods_queue.hpp"

namespace warren::wire {

using Method = std::variant<
    ConnectionStart, ConnectionStartOk, ConnectionSecure, ConnectionSecureOk, ConnectionTune,
    ConnectionTuneOk, ConnectionOpen, ConnectionOpenOk, ConnectionClose, ConnectionCloseOk,
    ConnectionBlocked, ConnectionUnblocked, ConnectionUpdateSecret, ConnectionUpdateSecretOk,
    ChannelOpen, ChannelOpenOk, ChannelFlow, ChannelFlowOk, ChannelClose, ChannelCloseOk,
    ExchangeDeclare, ExchangeDeclareOk, ExchangeDelete, ExchangeDeleteOk, ExchangeBind,
    ExchangeBindOk, ExchangeUnbind, ExchangeUnbindOk,
    QueueDeclare, QueueDeclareOk, QueueBind, QueueBindOk, QueuePurge, QueuePurgeOk, QueueDelete,
    QueueDeleteOk, QueueUnbind, QueueUnbindOk,
    BasicQos, BasicQosOk, BasicConsume, BasicConsumeOk, BasicCancel, BasicCancelOk, BasicPublish,
    BasicReturn, BasicDeliver, BasicGet, BasicGetOk, BasicGetEmpty, BasicAck, BasicReject,
    BasicRecover, BasicRecoverOk, BasicNack,
    ConfirmSelect, ConfirmSelectOk>;

// Decodes a method frame's payload. Fails on an unknown class/method pair, a field that runs
// past the payload, an invalid table, or bytes left over after the last field. String and
// table fields are views into `payload`.
[[nodiscard]] Result<Method> decode_method(std::span<const std::byte> payload);
// The same, decoding into `out` in place (the hot path: no copy of the variant).
[[nodiscard]] Result<void> decode_method(std::span<const std::byte> payload, Method& out);

[[nodiscard]] MethodId method_id(const Method& m);
[[nodiscard]] std::string_view method_name(const Method& m);
[[nodiscard]] std::string_view method_name(MethodId id);  // "" when warren does not know it

// Payload size (class and method ids included); refuses strings and tables that cannot be
// encoded. encode_method_payload writes exactly that many bytes.
[[nodiscard]] Result<std::size_t> method_payload_size(const Method& m);
void encode_method_payload(Writer& out, const Method& m);

// "queue.declare(queue=\"q\", passive=false, ...)"; secrets print as <hidden>.
[[nodiscard]] std::string to_string(const Method& m);

}  // namespace warren::wire
