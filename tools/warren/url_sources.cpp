#include "url_sources.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "small_file.hpp"

namespace warren::cli {
namespace {

// A URL file is a few lines; reading /dev/zero or a log by mistake must end, and say so.
constexpr std::size_t max_url_file_bytes = 64 * 1024;

Error usage(std::string detail) { return make_error(errc::invalid_argument, std::move(detail)); }

struct Line {
  std::size_t number;
  std::string text;
};

// One URL a line; a blank line, or one whose first non-blank character is '#', is skipped;
// blanks and a CR at either end are not part of the URL (an editor's or echo's line end).
std::vector<Line> url_lines(std::string_view text) {
  std::vector<Line> lines;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || line[first] == '#') continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    lines.push_back({number, std::string(line)});
  }
  return lines;
}

Result<SmallFile> read_url_file(const std::string& path) {
  const std::string what = "--url-file " + path;
  SmallFile file = read_small_file(path, max_url_file_bytes);
  if (file.error) return usage(what + ": cannot read it: " + std::strerror(file.error));
  if (file.too_large) return usage(what + ": larger than 64 KiB, not a URL file");
  return file;
}

}  // namespace

std::optional<std::string> take_environment_url() {
  const char* value = std::getenv(url_variable);
  if (!value) return std::nullopt;
  std::string copy = value;
  ::unsetenv(url_variable);
  return copy;
}

Result<UrlTexts> url_texts(const Common& common, const std::optional<std::string>& environment_url) {
  UrlTexts out;
  if (!common.urls.empty()) {
    for (std::size_t i = 0; i < common.urls.size(); ++i) {
      const std::string where = common.urls.size() == 1 ? std::string()
                                                        : "--url " + std::to_string(i + 1) + " of " +
                                                              std::to_string(common.urls.size());
      out.urls.push_back({common.urls[i], where});
    }
    return out;
  }
  if (!common.url_file.empty()) {
    auto file = read_url_file(common.url_file);
    if (!file.ok()) return std::move(file).error();
    for (auto& line : url_lines(file->text))
      out.urls.push_back({std::move(line.text), "--url-file " + common.url_file + " line " + std::to_string(line.number)});
    if (out.urls.empty())
      return usage("--url-file " + common.url_file + ": holds no URL (one a line; blank lines and lines starting "
                   "with # are skipped)");
    if (file->others_can_read)
      out.warning = "warning: --url-file " + common.url_file +
                    " can be read by other users, and the URLs in it hold credentials: chmod o-r it";
    return out;
  }
  if (environment_url) {
    auto lines = url_lines(*environment_url);
    for (auto& line : lines) {
      std::string where = url_variable;
      if (lines.size() > 1) where += " line " + std::to_string(line.number);
      out.urls.push_back({std::move(line.text), std::move(where)});
    }
    // A secret that did not arrive must not send the command to another broker, the default.
    if (out.urls.empty()) return usage(std::string(url_variable) + " is set but holds no URL");
    return out;
  }
  out.urls.push_back({default_url, ""});
  return out;
}

}  // namespace warren::cli
