#include "io/web.h"

#include <filesystem>

#include "common/error.h"
#include "io/atomic_file.h"

namespace normlab::io {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string chart_js_source() {
  constexpr const char* kChartJs = "/usr/share/javascript/chart.js/chart.min.js";
  if (!std::filesystem::exists(kChartJs))
    fail("{} is missing: install Debian's libjs-chart.js (scripts/setup.sh does)", kChartJs);
  return read_file(kChartJs, "Chart.js");
}

}  // namespace normlab::io
