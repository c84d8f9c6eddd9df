// Where the broker URLs come from, so that credentials need not be on the command line (where
// every local user reads them in ps): --url (any number), else --url-file PATH, else the
// environment's WARREN_URL, else the default. A file and WARREN_URL hold one URL a line, tried
// in order like several --url. Nothing here quotes a URL: an error names the source and line.
// docs/warren-cli.md, "Credentials".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "job.hpp"

namespace warren::cli {

inline constexpr const char* url_variable = "WARREN_URL";

struct UrlText {
  std::string text;
  // Which source and line, for an error: "" for a lone --url, "--url 2 of 3", "WARREN_URL",
  // "WARREN_URL line 2", "--url-file PATH line 3".
  std::string where;
};

struct UrlTexts {
  std::vector<UrlText> urls;  // at least one
  std::string warning;        // "" or why the URL file is a risk (others can read it)
};

// Reads WARREN_URL once and takes it out of the environment, so that no command warren
// runs (pipe --exec, work run --exec) inherits the credentials. Call before anything reads
// the environment from another thread.
[[nodiscard]] std::optional<std::string> take_environment_url();

// The URL texts `common` and `environment_url` give, by the precedence above. An error (a
// file that cannot be read, a source that holds no URL) is a usage error; its detail is the
// line to print.
[[nodiscard]] Result<UrlTexts> url_texts(const Common& common, const std::optional<std::string>& environment_url);

}  // namespace warren::cli
