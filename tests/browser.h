#pragma once
// Loading a page in a real browser (headless Debian chromium) for the report and serve tests: the
// pages record their self-check on <body> (data-charts, data-charts-drawn, data-errors, ...), which
// these helpers read from the DOM after the page's scripts ran.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "train/tiny_corpus.h"

namespace normlab::testing {

// Loads `url`, gives its scripts 5 s of virtual time (timers run fast; network fetches are waited
// for), and returns the rendered <body ...> tag. It saves build/test-artifacts/<name>.png and the DOM
// as <name>.dom.html, test artifacts to look at.
inline std::string render_in_chromium(const std::string& url, const std::string& screenshot_name) {
  namespace fs = std::filesystem;
  const fs::path artifacts = fs::path(NORMLAB_BINARY).parent_path() / "test-artifacts";
  fs::create_directories(artifacts);
  // A fresh profile per load: no cache, no state carried from one load to the next.
  static std::atomic<int> counter{0};
  const train::testing::TempDir profile("chromium_profile_" + std::to_string(counter++));
  const std::string flags =
      "--headless=new --no-sandbox --disable-gpu --disable-background-networking "
      "--disable-component-update --disable-sync --no-first-run --virtual-time-budget=5000 "
      "--user-data-dir='" +
      profile.path().string() + "' ";
  // One load gives both: the DOM after the virtual time, and the screenshot. Headless chromium now and
  // then hangs on a load that takes seconds otherwise (CI saw it once, on the serve test's second load
  // of a page that had rendered a moment before; never reproduced here): a load that outlasts 150 s (a
  // load takes seconds, a starved machine's up to a minute) is tried again, up to three times; any
  // other failure fails at once.
  const fs::path dom = artifacts / (screenshot_name + ".dom.html");
  const std::string cmd = "timeout -k 5 150 chromium " + flags + "--window-size=1400,1800 --screenshot='" +
                          (artifacts / (screenshot_name + ".png")).string() + "' --dump-dom '" + url + "' >'" +
                          dom.string() + "' 2>/dev/null";
  int status = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    status = std::system(cmd.c_str());
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 124) break;
    std::fprintf(stderr, "chromium: %s timed out after 150 s (attempt %d of 3)\n", screenshot_name.c_str(), attempt);
  }
  EXPECT_EQ(status, 0) << "chromium failed: is Debian's chromium installed (scripts/setup.sh)?";
  const fs::path png = artifacts / (screenshot_name + ".png");
  EXPECT_GT(fs::exists(png) ? fs::file_size(png) : 0, 10000u) << png;
  std::smatch body;
  const std::string text = train::testing::slurp(dom);
  return std::regex_search(text, body, std::regex("<body[^>]*>")) ? body.str() : "";
}

// The value of data-<name> in a <body ...> tag ("" if absent).
inline std::string body_attribute(const std::string& body, const std::string& name) {
  std::smatch m;
  return std::regex_search(body, m, std::regex(" data-" + name + "=\"([^\"]*)\"")) ? m[1].str() : "";
}

}  // namespace normlab::testing
