#include "record_log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>

#include <nlohmann/json.hpp>

#include "untrusted_text.hpp"

namespace warren::cli {
namespace {

std::optional<client::Level> level_named(const std::string& name) {
  for (auto l : {client::Level::debug, client::Level::info, client::Level::warning, client::Level::error})
    if (name == client::to_string(l)) return l;
  return std::nullopt;
}

// "2026-12-05T07:50:25.123Z": UTC, milliseconds.
std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(ms));
  return text;
}

class RecordLog : public client::Observer {
 public:
  RecordLog(client::Level level, bool json) : level_(level), json_(json) {}

  void on_record(const client::Record& r) override {
    if (r.level < level_) return;
    std::string line = json_ ? as_json(r) : as_text(r);
    line += '\n';
    std::fputs(line.c_str(), stderr);
  }

 private:
  static std::string as_text(const client::Record& r) {
    std::string line = "warren: ";
    line += client::to_string(r.level);
    line += ' ';
    line += r.name;
    line += ' ';
    line += r.connection;
    if (r.channel != 0) line += " channel " + std::to_string(r.channel);
    if (!r.subject.empty()) line += " '" + std::string(r.subject) + "'";
    if (r.cause) line += ": " + r.cause->to_string();
    // A subject or a broker's reply text may hold anything a publisher or a peer wrote: one
    // line, nothing a terminal acts on.
    return escaped_for_terminal(line);
  }
  static std::string as_json(const client::Record& r) {
    // Every key on every line, so a reader never tests for presence.
    nlohmann::ordered_json j;
    j["time"] = utc_now();
    j["level"] = client::to_string(r.level);
    j["event"] = std::string(r.name);
    j["connection"] = std::string(r.connection);
    j["channel"] = r.channel;
    j["subject"] = std::string(r.subject);
    j["cause"] = r.cause ? nlohmann::ordered_json(r.cause->to_string()) : nlohmann::ordered_json(nullptr);
    j["reply_code"] = r.cause ? r.cause->reply_code : 0;
    // Bytes from the broker need not be UTF-8: replace, never throw.
    return json_line_escaped(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  }

  client::Level level_;
  bool json_;
};

}  // namespace

void print_final_line(const std::string& format, const FinalLine& line) {
  std::string text(line.what);
  if (!text.empty()) text += ": ";
  text += line.why;
  if (format != "json") {
    std::fprintf(stderr, "warren: %s\n", escaped_for_terminal(text).c_str());
    return;
  }
  nlohmann::ordered_json j;
  j["time"] = utc_now();
  j["level"] = client::to_string(line.level);
  j["event"] = std::string(line.event);
  j["connection"] = "";
  j["channel"] = 0;
  j["subject"] = std::string(line.what);
  j["cause"] = text;
  j["reply_code"] = line.reply_code;
  std::fprintf(stderr, "%s\n", json_line_escaped(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)).c_str());
}

std::shared_ptr<client::Observer> make_record_log(const std::string& level, const std::string& format) {
  const auto min = level_named(level);
  if (!min) return nullptr;  // "off"
  return std::make_shared<RecordLog>(*min, format == "json");
}

}  // namespace warren::cli
