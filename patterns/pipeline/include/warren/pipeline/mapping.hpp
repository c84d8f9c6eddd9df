// Records to and from AMQP messages, both ways, typed values preserved: a delivery's fields
// and basic properties become the record's metadata and its headers the record's headers; a
// record's metadata and headers become the published message's properties and headers.
#pragma once

#include "warren/client/message.hpp"
#include "warren/client/options.hpp"
#include "warren/pipeline/record.hpp"
#include "warren/result.hpp"

namespace warren::pipeline {

// The delivery as a record (body, metadata, decoded headers).
[[nodiscard]] Result<Record> record_from(const client::Message& message);
// The same without its headers, for a delivery whose headers cannot be decoded.
[[nodiscard]] Record record_without_headers(const client::Message& message);

// The basic properties to publish `metadata` with, headers included. Its user_id goes along
// only when carries_user_id() says so. Views into `metadata` and `headers`: keep both alive
// for the publish call (it copies the frames).
[[nodiscard]] client::Properties properties_of(const Metadata& metadata, const wire::FieldTable& headers,
                                               std::string_view login_user);

// Whether a republish may carry `user_id`: RabbitMQ accepts one only when it is the user the
// publishing connection logged in as (`login_user`; empty when not known, as with EXTERNAL),
// and refuses any other with a 406 that closes the channel.
[[nodiscard]] bool carries_user_id(std::string_view user_id, std::string_view login_user) noexcept;

}  // namespace warren::pipeline
