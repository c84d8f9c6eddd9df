// ClientOptions and its view (connect_options.hpp), both ways, field for field.
#include "warren/client/connect_options.hpp"

#include "warren/client/connection.hpp"

namespace warren::client {

ClientOptions ConnectOptions::owned() const {
  ClientOptions o;
  o.engine.user = std::string(engine.user);
  o.engine.password = std::string(engine.password);
  o.engine.vhost = std::string(engine.vhost);
  o.engine.mechanism = engine.mechanism;
  o.engine.connection_name = std::string(engine.connection_name);
  o.engine.client_properties = engine.client_properties.to_table();
  o.engine.heartbeat_s = engine.heartbeat_s;
  o.engine.frame_max_bytes = engine.frame_max_bytes;
  o.engine.channel_max = engine.channel_max;
  o.engine.handshake_timeout = engine.handshake_timeout;
  o.engine.request_timeout = engine.request_timeout;
  o.engine.close_timeout = engine.close_timeout;
  o.engine.default_prefetch = engine.default_prefetch;
  o.engine.output_limit_bytes = engine.output_limit_bytes;
  o.engine.max_body_bytes = engine.max_body_bytes;
  o.connect_timeout = connect_timeout;
  o.ca_pem = std::string(ca_pem);
  o.client_cert_pem = std::string(client_cert_pem);
  o.client_key_pem = std::string(client_key_pem);
  o.read_batching = read_batching;
  o.observer = observer.get();
  o.metrics = metrics.get();
  o.credentials = credentials.get();
  return o;
}

ClientOptions::operator ConnectOptions() const {
  return ConnectOptions{
      .engine = {.user = engine.user,
                 .password = engine.password,
                 .vhost = engine.vhost,
                 .mechanism = engine.mechanism,
                 .connection_name = engine.connection_name,
                 .client_properties = Arguments(engine.client_properties),
                 .heartbeat_s = engine.heartbeat_s,
                 .frame_max_bytes = engine.frame_max_bytes,
                 .channel_max = engine.channel_max,
                 .handshake_timeout = engine.handshake_timeout,
                 .request_timeout = engine.request_timeout,
                 .close_timeout = engine.close_timeout,
                 .default_prefetch = engine.default_prefetch,
                 .output_limit_bytes = engine.output_limit_bytes,
                 .max_body_bytes = engine.max_body_bytes},
      .connect_timeout = connect_timeout,
      .ca_pem = ca_pem,
      .client_cert_pem = client_cert_pem,
      .client_key_pem = client_key_pem,
      .read_batching = read_batching,
      .observer = observer,
      .metrics = metrics,
      .credentials = credentials,
  };
}

}  // namespace warren::client
